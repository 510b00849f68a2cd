//! The fixture's static surface: tool, resource and prompt listings and the fixed payloads they return.
//!
//! Everything here is written as the JSON the conformance suite's scenario descriptions show, then
//! decoded into rmcp's model types with [`wire`]. Writing the wire form directly keeps the fixture
//! reviewable against the suite (names, field spellings and nesting can be compared line by line) and
//! keeps rmcp's constructors, which change between minors, out of the picture. The unit tests decode
//! every value, so a shape rmcp rejects fails `cargo test`, not a conformance run.

use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// A 1x1 red RGBA PNG (70 bytes; IHDR/IDAT/IEND with valid CRCs).
pub const TEST_IMAGE_PNG_BASE64: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";

/// A complete PCM WAV file: 8 kHz, mono, 8-bit, two samples of silence (46 bytes). The suite only checks
/// `mimeType == "audio/wav"` and non-empty data, but a fixture should not ship a truncated file.
pub const TEST_AUDIO_WAV_BASE64: &str =
    "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQIAAACAgA==";

pub const STATIC_TEXT_URI: &str = "test://static-text";
pub const STATIC_BINARY_URI: &str = "test://static-binary";
pub const WATCHED_URI: &str = "test://watched-resource";
pub const TEMPLATE_URI: &str = "test://template/{id}/data";
const TEMPLATE_PREFIX: &str = "test://template/";
const TEMPLATE_SUFFIX: &str = "/data";

/// The tool with an `x-mcp-header` parameter: its `region` argument travels as `Mcp-Param-Region` too.
pub const CUSTOM_HEADER_TOOL: &str = "test_custom_header_param";

/// Name the suite's `server-sse-polling` scenario calls; the HTTP transport treats it specially.
pub const RECONNECTION_TOOL: &str = "test_reconnection";

/// Decodes fixture JSON into an rmcp model type.
///
/// Panics on mismatch: the inputs are constants of this crate (plus strings copied into string fields),
/// so a failure is a fixture bug that the unit tests catch before any client sees it.
pub fn wire<T: DeserializeOwned>(value: Value) -> T {
    match serde_json::from_value(value) {
        Ok(decoded) => decoded,
        Err(error) => panic!(
            "fixture JSON does not decode as {}: {error}",
            std::any::type_name::<T>()
        ),
    }
}

fn no_arguments() -> Value {
    json!({"type": "object", "properties": {}})
}

/// `tools/list`: every tool the server scenarios call, handshake-era ones first.
pub fn tools() -> Value {
    let tool = |name: &str, description: &str| json!({"name": name, "description": description, "inputSchema": no_arguments()});
    let mut tools = json!({"tools": [
        tool("test_simple_text", "Returns one text content item (tools-call-simple-text)."),
        tool("test_image_content", "Returns one PNG image content item (tools-call-image)."),
        tool("test_audio_content", "Returns one WAV audio content item (tools-call-audio)."),
        tool("test_embedded_resource", "Returns one embedded text resource (tools-call-embedded-resource)."),
        tool("test_multiple_content_types", "Returns text, image and embedded resource content (tools-call-mixed-content)."),
        tool("test_tool_with_logging", "Sends three info-level notifications/message while running (tools-call-with-logging)."),
        tool("test_tool_with_progress", "Sends notifications/progress 0, 50, 100 of 100 when the call carries a progressToken (tools-call-with-progress)."),
        tool("test_error_handling", "Always fails with an isError result (tools-call-error)."),
        tool(RECONNECTION_TOOL, "Over Streamable HTTP, closes its own SSE response stream mid-call and answers after the client resumes with Last-Event-ID (server-sse-polling, SEP-1699)."),
        {
            "name": "test_sampling",
            "description": "Sends sampling/createMessage to the client and returns the model's text (tools-call-sampling).",
            "inputSchema": {
                "type": "object",
                "properties": {"prompt": {"type": "string", "description": "The prompt to send to the LLM"}},
                "required": ["prompt"]
            }
        },
        {
            "name": "test_elicitation",
            "description": "Sends elicitation/create (username, email) to the client and returns its answer (tools-call-elicitation).",
            "inputSchema": {
                "type": "object",
                "properties": {"message": {"type": "string", "description": "The message to show the user"}},
                "required": ["message"]
            }
        },
        tool("test_elicitation_sep1034_defaults", "Sends elicitation/create whose schema has a default for every primitive type (elicitation-sep1034-defaults)."),
        tool("test_elicitation_sep1330_enums", "Sends elicitation/create with all five SEP-1330 enum shapes (elicitation-sep1330-enums)."),
        {
            "name": "json_schema_2020_12_tool",
            "description": "Tool with JSON Schema 2020-12 features: $schema, $defs with an $anchor, additionalProperties (SEP-1613), allOf/anyOf and if/then/else (SEP-2106) (json-schema-2020-12).",
            "inputSchema": {
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "type": "object",
                "$defs": {
                    "address": {
                        "$anchor": "addressDef",
                        "type": "object",
                        "properties": {"street": {"type": "string"}, "city": {"type": "string"}}
                    }
                },
                "properties": {
                    "name": {"type": "string"},
                    "address": {"$ref": "#/$defs/address"},
                    "contactMethod": {"type": "string", "enum": ["phone", "email"]},
                    "phone": {"type": "string"},
                    "email": {"type": "string"}
                },
                "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
                "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
                "then": {"required": ["phone"]},
                "else": {"required": ["email"]},
                "additionalProperties": false
            }
        },
        {
            "name": CUSTOM_HEADER_TOOL,
            "description": "Echoes `region`, which a 2026-07-28 HTTP client also sends as the Mcp-Param-Region header; rmcp checks that the header matches the body (http-custom-header-server-validation, SEP-2243).",
            "inputSchema": {
                "type": "object",
                "properties": {"region": {"type": "string", "x-mcp-header": "Region"}},
                "required": ["region"]
            }
        },
        tool("test_input_required_result_elicitation", "2026-07-28: asks user_name through an input_required elicitation, then greets (input-required-result-*)."),
        tool("test_input_required_result_sampling", "2026-07-28: asks capital_question through an input_required sampling request."),
        tool("test_input_required_result_list_roots", "2026-07-28: asks client_roots through an input_required roots/list request."),
        tool("test_input_required_result_request_state", "2026-07-28: asks confirm with a signed requestState and answers state-ok once it verifies."),
        tool("test_input_required_result_multiple_inputs", "2026-07-28: asks an elicitation, a sampling and a roots/list request in one round."),
        tool("test_input_required_result_multi_round", "2026-07-28: two rounds of elicitation, the requestState changing between them."),
        tool("test_input_required_result_tampered_state", "2026-07-28: refuses a requestState that fails its HMAC check with -32602."),
        tool("test_input_required_result_capabilities", "2026-07-28: asks only for what the request's clientCapabilities declare."),
        tool("test_missing_capability", "Needs the sampling capability: refused with -32021 when the request did not declare it (server-stateless)."),
        tool("test_streaming_elicitation", "2026-07-28: answers with an input_required elicitation, never a request on the response stream (server-stateless)."),
        tool("test_logging_tool", "Logs at info only when the request's _meta asks for a logLevel (server-stateless)."),
        tool("test_trigger_tool_change", "Announces notifications/tools/list_changed to the subscriptions/listen streams that asked for it."),
        tool("test_trigger_prompt_change", "Announces notifications/prompts/list_changed to the subscriptions/listen streams that asked for it.")
    ]});
    if let Some(Value::Array(listed)) = tools.get_mut("tools") {
        listed.extend(crate::tasks::tools());
    }
    tools
}

pub fn text_result(text: &str) -> Value {
    json!({"content": [{"type": "text", "text": text}]})
}

pub fn error_result(text: &str) -> Value {
    json!({"content": [{"type": "text", "text": text}], "isError": true})
}

pub fn image_result() -> Value {
    json!({"content": [{"type": "image", "data": TEST_IMAGE_PNG_BASE64, "mimeType": "image/png"}]})
}

pub fn audio_result() -> Value {
    json!({"content": [{"type": "audio", "data": TEST_AUDIO_WAV_BASE64, "mimeType": "audio/wav"}]})
}

pub fn embedded_resource_result() -> Value {
    json!({"content": [{
        "type": "resource",
        "resource": {
            "uri": "test://embedded-resource",
            "mimeType": "text/plain",
            "text": "This is an embedded resource content."
        }
    }]})
}

pub fn mixed_content_result() -> Value {
    json!({"content": [
        {"type": "text", "text": "Multiple content types test:"},
        {"type": "image", "data": TEST_IMAGE_PNG_BASE64, "mimeType": "image/png"},
        {
            "type": "resource",
            "resource": {
                "uri": "test://mixed-content-resource",
                "mimeType": "application/json",
                "text": json!({"test": "data", "value": 123}).to_string()
            }
        }
    ]})
}

/// `elicitation/create` params for `test_elicitation` (the suite's description asks for username + email).
pub fn elicitation_basic(message: &str) -> Value {
    json!({
        "mode": "form",
        "message": message,
        "requestedSchema": {
            "type": "object",
            "properties": {
                "username": {"type": "string", "description": "User's response"},
                "email": {"type": "string", "description": "User's email address"}
            },
            "required": ["username", "email"]
        }
    })
}

/// SEP-1034: a default for string, integer, number, enum and boolean fields.
pub fn elicitation_sep1034_defaults() -> Value {
    json!({
        "mode": "form",
        "message": "Please review and update the form fields with defaults",
        "requestedSchema": {
            "type": "object",
            "properties": {
                "name": {"type": "string", "description": "User name", "default": "John Doe"},
                "age": {"type": "integer", "description": "User age", "default": 30},
                "score": {"type": "number", "description": "User score", "default": 95.5},
                "status": {
                    "type": "string",
                    "description": "User status",
                    "enum": ["active", "inactive", "pending"],
                    "default": "active"
                },
                "verified": {"type": "boolean", "description": "Verification status", "default": true}
            },
            "required": []
        }
    })
}

/// SEP-1330: untitled/titled single-select, legacy `enumNames`, untitled/titled multi-select.
pub fn elicitation_sep1330_enums() -> Value {
    json!({
        "mode": "form",
        "message": "Please select options from the enum fields",
        "requestedSchema": {
            "type": "object",
            "properties": {
                "untitledSingle": {
                    "type": "string",
                    "description": "Select one option",
                    "enum": ["option1", "option2", "option3"]
                },
                "titledSingle": {
                    "type": "string",
                    "description": "Select one option with titles",
                    "oneOf": [
                        {"const": "value1", "title": "First Option"},
                        {"const": "value2", "title": "Second Option"},
                        {"const": "value3", "title": "Third Option"}
                    ]
                },
                "legacyEnum": {
                    "type": "string",
                    "description": "Select one option (legacy)",
                    "enum": ["opt1", "opt2", "opt3"],
                    "enumNames": ["Option One", "Option Two", "Option Three"]
                },
                "untitledMulti": {
                    "type": "array",
                    "description": "Select multiple options",
                    "minItems": 1,
                    "maxItems": 3,
                    "items": {"type": "string", "enum": ["option1", "option2", "option3"]}
                },
                "titledMulti": {
                    "type": "array",
                    "description": "Select multiple options with titles",
                    "minItems": 1,
                    "maxItems": 3,
                    "items": {"anyOf": [
                        {"const": "value1", "title": "First Choice"},
                        {"const": "value2", "title": "Second Choice"},
                        {"const": "value3", "title": "Third Choice"}
                    ]}
                }
            },
            "required": []
        }
    })
}

pub fn sampling_request(prompt: &str) -> Value {
    json!({
        "messages": [{"role": "user", "content": {"type": "text", "text": prompt}}],
        "maxTokens": 100
    })
}

pub fn resources() -> Value {
    json!({"resources": [
        {
            "uri": STATIC_TEXT_URI,
            "name": "static-text",
            "title": "Static Text Resource",
            "description": "A static text resource (resources-read-text).",
            "mimeType": "text/plain"
        },
        {
            "uri": STATIC_BINARY_URI,
            "name": "static-binary",
            "title": "Static Binary Resource",
            "description": "A static PNG resource returned as a blob (resources-read-binary).",
            "mimeType": "image/png"
        },
        {
            "uri": WATCHED_URI,
            "name": "watched-resource",
            "title": "Watched Resource",
            "description": "The resource the suite subscribes to (resources-subscribe, resources-unsubscribe).",
            "mimeType": "text/plain"
        }
    ]})
}

pub fn resource_templates() -> Value {
    json!({"resourceTemplates": [{
        "uriTemplate": TEMPLATE_URI,
        "name": "template",
        "title": "Resource Template",
        "description": "Substitutes {id} into the returned JSON (resources-templates-read).",
        "mimeType": "application/json"
    }]})
}

/// The `resources/read` result for `uri`, or `None` when the fixture has no such resource.
pub fn read_resource(uri: &str) -> Option<Value> {
    let contents = match uri {
        STATIC_TEXT_URI => json!({
            "uri": uri, "mimeType": "text/plain",
            "text": "This is the content of the static text resource."
        }),
        STATIC_BINARY_URI => {
            json!({"uri": uri, "mimeType": "image/png", "blob": TEST_IMAGE_PNG_BASE64})
        }
        WATCHED_URI => {
            json!({"uri": uri, "mimeType": "text/plain", "text": "Watched resource content"})
        }
        _ => {
            let id = template_id(uri)?;
            json!({
                "uri": uri,
                "mimeType": "application/json",
                "text": json!({"id": id, "templateTest": true, "data": format!("Data for ID: {id}")}).to_string()
            })
        }
    };
    Some(json!({"contents": [contents]}))
}

/// `{id}` of `test://template/{id}/data`: one non-empty path segment.
fn template_id(uri: &str) -> Option<&str> {
    let id = uri
        .strip_prefix(TEMPLATE_PREFIX)?
        .strip_suffix(TEMPLATE_SUFFIX)?;
    (!id.is_empty() && !id.contains('/')).then_some(id)
}

pub fn prompts() -> Value {
    json!({"prompts": [
        {
            "name": "test_simple_prompt",
            "title": "Simple Test Prompt",
            "description": "A prompt without arguments (prompts-get-simple)."
        },
        {
            "name": "test_prompt_with_arguments",
            "title": "Prompt With Arguments",
            "description": "Substitutes arg1 and arg2 (prompts-get-with-args, completion-complete).",
            "arguments": [
                {"name": "arg1", "description": "First test argument", "required": true},
                {"name": "arg2", "description": "Second test argument", "required": true}
            ]
        },
        {
            "name": "test_prompt_with_embedded_resource",
            "title": "Prompt With Embedded Resource",
            "description": "Embeds a text resource at resourceUri (prompts-get-embedded-resource).",
            "arguments": [
                {"name": "resourceUri", "description": "URI of the resource to embed", "required": true}
            ]
        },
        {
            "name": "test_prompt_with_image",
            "title": "Prompt With Image",
            "description": "A prompt with PNG image content (prompts-get-with-image)."
        },
        {
            "name": crate::input_required::PROMPT,
            "title": "Prompt Needing Input",
            "description": "2026-07-28: asks user_context through an input_required elicitation first (input-required-result-non-tool-request)."
        }
    ]})
}

/// Why a `prompts/get` could not be answered; both map to JSON-RPC `-32602`.
#[derive(Debug, PartialEq, Eq)]
pub enum PromptError {
    UnknownPrompt,
    MissingArgument(&'static str),
}

/// The `prompts/get` result. `argument` looks up one string argument of the request.
pub fn get_prompt<'a>(
    name: &str,
    argument: impl Fn(&str) -> Option<&'a str>,
) -> Result<Value, PromptError> {
    let required = |key: &'static str| argument(key).ok_or(PromptError::MissingArgument(key));
    let messages = match name {
        "test_simple_prompt" => json!([
            {"role": "user", "content": {"type": "text", "text": "This is a simple prompt for testing."}}
        ]),
        "test_prompt_with_arguments" => {
            let (arg1, arg2) = (required("arg1")?, required("arg2")?);
            json!([{"role": "user", "content": {
                "type": "text",
                "text": format!("Prompt with arguments: arg1='{arg1}', arg2='{arg2}'")
            }}])
        }
        "test_prompt_with_embedded_resource" => {
            let uri = required("resourceUri")?;
            json!([
                {"role": "user", "content": {"type": "resource", "resource": {
                    "uri": uri, "mimeType": "text/plain", "text": "Embedded resource content for testing."
                }}},
                {"role": "user", "content": {"type": "text", "text": "Please process the embedded resource above."}}
            ])
        }
        "test_prompt_with_image" => json!([
            {"role": "user", "content": {"type": "image", "data": TEST_IMAGE_PNG_BASE64, "mimeType": "image/png"}},
            {"role": "user", "content": {"type": "text", "text": "Please analyze the image above."}}
        ]),
        _ => return Err(PromptError::UnknownPrompt),
    };
    Ok(json!({"messages": messages}))
}

/// `completion/complete`: candidates for the arguments the fixture knows, filtered by prefix.
///
/// The suite only checks that `completion.values` is an array; real suggestions make the endpoint
/// useful for checking that a gateway relays completions rather than answering them itself.
pub fn complete(ref_kind: CompletionRef<'_>, argument: &str, prefix: &str) -> Value {
    let candidates: &[&str] = match (ref_kind, argument) {
        (CompletionRef::Prompt("test_prompt_with_arguments"), "arg1" | "arg2") => {
            &["paris", "park", "party", "test", "testValue1", "testValue2"]
        }
        (CompletionRef::Prompt("test_prompt_with_embedded_resource"), "resourceUri") => {
            &[STATIC_TEXT_URI, STATIC_BINARY_URI, WATCHED_URI]
        }
        (CompletionRef::ResourceTemplate(TEMPLATE_URI), "id") => &["123", "456", "789"],
        _ => &[],
    };
    let values: Vec<&str> = candidates
        .iter()
        .copied()
        .filter(|candidate| candidate.starts_with(prefix))
        .collect();
    json!({"completion": {"values": values, "total": values.len(), "hasMore": false}})
}

#[derive(Debug, Clone, Copy)]
pub enum CompletionRef<'a> {
    Prompt(&'a str),
    ResourceTemplate(&'a str),
    /// A reference kind this fixture does not know (newer protocol revisions may add some).
    Unknown,
}

#[cfg(test)]
// The sampling params type is deprecated in rmcp 3.11 (SEP-2577); decoding into it is the point here.
#[allow(deprecated)]
mod tests {
    use super::*;
    use rmcp::model::{
        CallToolResult, CompleteResult, CreateMessageRequestParams, ElicitRequestParams,
        GetPromptResult, ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult,
        ListToolsResult, ReadResourceResult,
    };

    /// Decodes into the rmcp type and re-encodes, so the test sees what goes on the wire.
    fn round_trip<T: DeserializeOwned + serde::Serialize>(value: Value) -> Value {
        serde_json::to_value(wire::<T>(value)).unwrap()
    }

    #[test]
    fn tool_listing_survives_rmcp_and_keeps_2020_12_keywords() {
        let listed = round_trip::<ListToolsResult>(tools());
        let tools = listed["tools"].as_array().unwrap();
        assert_eq!(tools.len(), 35);
        for tool in tools {
            assert!(tool["description"].as_str().is_some_and(|d| !d.is_empty()));
            assert!(tool["inputSchema"].is_object());
        }
        let schema = &tools
            .iter()
            .find(|tool| tool["name"] == "json_schema_2020_12_tool")
            .unwrap()["inputSchema"];
        assert_eq!(
            schema["$schema"],
            "https://json-schema.org/draft/2020-12/schema"
        );
        assert_eq!(schema["$defs"]["address"]["$anchor"], "addressDef");
        assert_eq!(schema["additionalProperties"], false);
        for keyword in ["allOf", "if", "then", "else"] {
            assert!(!schema[keyword].is_null(), "{keyword} lost in {schema}");
        }
        assert!(schema["allOf"][0]["anyOf"].is_array());
    }

    #[test]
    fn tool_results_decode() {
        for result in [
            text_result("x"),
            error_result("x"),
            image_result(),
            audio_result(),
            embedded_resource_result(),
            mixed_content_result(),
        ] {
            assert_eq!(round_trip::<CallToolResult>(result.clone()), result);
        }
    }

    #[test]
    fn elicitation_schemas_keep_every_field_the_suite_checks() {
        let basic = round_trip::<ElicitRequestParams>(elicitation_basic("hi"));
        assert_eq!(
            basic["requestedSchema"]["required"],
            json!(["username", "email"])
        );

        let defaults = round_trip::<ElicitRequestParams>(elicitation_sep1034_defaults());
        let props = &defaults["requestedSchema"]["properties"];
        assert_eq!(props["name"]["default"], "John Doe");
        assert_eq!(props["age"]["type"], "integer");
        assert_eq!(props["age"]["default"], 30);
        assert_eq!(props["score"]["default"], 95.5);
        assert_eq!(props["status"]["default"], "active");
        assert!(props["status"]["enum"].is_array());
        assert_eq!(props["verified"]["default"], true);

        let enums = round_trip::<ElicitRequestParams>(elicitation_sep1330_enums());
        let props = &enums["requestedSchema"]["properties"];
        assert!(props["untitledSingle"]["enum"].is_array());
        assert!(props["untitledSingle"].get("oneOf").is_none());
        assert!(props["untitledSingle"].get("enumNames").is_none());
        assert_eq!(props["titledSingle"]["oneOf"][0]["title"], "First Option");
        assert!(props["titledSingle"].get("enum").is_none());
        assert_eq!(
            props["legacyEnum"]["enumNames"].as_array().unwrap().len(),
            3
        );
        assert_eq!(props["untitledMulti"]["type"], "array");
        assert_eq!(props["untitledMulti"]["items"]["type"], "string");
        assert!(props["untitledMulti"]["items"]["enum"].is_array());
        assert_eq!(props["titledMulti"]["items"]["anyOf"][1]["const"], "value2");
        assert!(props["titledMulti"]["items"].get("enum").is_none());
    }

    #[test]
    fn sampling_request_decodes() {
        let params = round_trip::<CreateMessageRequestParams>(sampling_request("p"));
        assert_eq!(params["maxTokens"], 100);
        assert_eq!(params["messages"][0]["content"]["text"], "p");
    }

    #[test]
    fn resources_and_templates() {
        round_trip::<ListResourcesResult>(resources());
        round_trip::<ListResourceTemplatesResult>(resource_templates());
        for uri in [STATIC_TEXT_URI, STATIC_BINARY_URI, WATCHED_URI] {
            let read = round_trip::<ReadResourceResult>(read_resource(uri).unwrap());
            assert_eq!(read["contents"][0]["uri"], uri);
        }
        let read =
            round_trip::<ReadResourceResult>(read_resource("test://template/123/data").unwrap());
        let text = read["contents"][0]["text"].as_str().unwrap();
        assert_eq!(
            serde_json::from_str::<Value>(text).unwrap(),
            json!({"id": "123", "templateTest": true, "data": "Data for ID: 123"})
        );
        assert!(read_resource("test://template//data").is_none());
        assert!(read_resource("test://template/1/2/data").is_none());
        assert!(read_resource("test://nope").is_none());
    }

    #[test]
    fn prompts_decode_and_substitute() {
        round_trip::<ListPromptsResult>(prompts());
        let args = |key: &str| match key {
            "arg1" => Some("testValue1"),
            "arg2" => Some("testValue2"),
            "resourceUri" => Some("test://example-resource"),
            _ => None,
        };
        for name in [
            "test_simple_prompt",
            "test_prompt_with_arguments",
            "test_prompt_with_embedded_resource",
            "test_prompt_with_image",
        ] {
            round_trip::<GetPromptResult>(get_prompt(name, args).unwrap());
        }
        let text = get_prompt("test_prompt_with_arguments", args)
            .unwrap()
            .to_string();
        assert!(text.contains("testValue1") && text.contains("testValue2"));
        assert_eq!(
            get_prompt("test_prompt_with_arguments", |_| None),
            Err(PromptError::MissingArgument("arg1"))
        );
        assert_eq!(get_prompt("nope", args), Err(PromptError::UnknownPrompt));
    }

    #[test]
    fn completion_filters_by_prefix() {
        let result = round_trip::<CompleteResult>(complete(
            CompletionRef::Prompt("test_prompt_with_arguments"),
            "arg1",
            "par",
        ));
        assert_eq!(
            result["completion"]["values"],
            json!(["paris", "park", "party"])
        );
        let none = complete(CompletionRef::Prompt("other"), "arg1", "");
        assert_eq!(none["completion"]["values"], json!([]));
    }
}
