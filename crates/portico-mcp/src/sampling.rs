//! MCP sampling as JSON: a [`SamplingRequest`] written as `sampling/createMessage` params in the MCP
//! 2025-11-25 shape (sampling with tools), and the client's `CreateMessageResult` read into a
//! [`SamplingAnswer`]. Shared with the server edge, whose callers send it (as [`crate::request_method`]
//! is). The other way round, for a client that answers sampling itself (`portico call` with a
//! model): an upstream's params read by [`sampling_request`], the answer written by
//! [`sampling_result`].

use portico_core::relay::{
    BoxFuture, Caller, RelayRequest, SamplingAnswer, SamplingContent, SamplingError,
    SamplingMessage, SamplingRequest, SamplingRole, SamplingToolChoice, SamplingToolUse,
};
use portico_core::{JsonObject, json_f32};
use serde_json::{Value, json};

/// [`Caller::sample`] for a caller that relays requests as protocol JSON: the request written as
/// params, sent as [`RelayRequest::Sampling`], and the answer read back.
pub fn sample_through<'a>(
    caller: &'a dyn Caller,
    request: SamplingRequest,
) -> BoxFuture<'a, Result<SamplingAnswer, SamplingError>> {
    Box::pin(async move {
        let result = caller
            .request(RelayRequest::Sampling, sampling_params(&request))
            .await
            .map_err(SamplingError::Refused)?;
        sampling_answer(&result).map_err(SamplingError::Malformed)
    })
}

/// `sampling/createMessage` params. A message of one text block carries it as an object, as
/// clients without tools expect; any other content is an array.
pub fn sampling_params(request: &SamplingRequest) -> JsonObject {
    let messages: Vec<Value> = request.messages.iter().map(message).collect();
    let mut params = JsonObject::new();
    params.insert("messages".into(), Value::Array(messages));
    if let Some(system) = &request.system_prompt {
        params.insert("systemPrompt".into(), json!(system));
    }
    params.insert("maxTokens".into(), json!(request.max_tokens));
    if let Some(t) = request.temperature {
        params.insert("temperature".into(), json_f32(t));
    }
    if !request.tools.is_empty() {
        let tools: Vec<Value> = request
            .tools
            .iter()
            .map(|tool| {
                json!({
                    "name": tool.name,
                    "description": tool.description,
                    "inputSchema": tool.input_schema,
                })
            })
            .collect();
        params.insert("tools".into(), Value::Array(tools));
    }
    if let Some(choice) = request.tool_choice {
        let mode = match choice {
            SamplingToolChoice::Auto => "auto",
        };
        params.insert("toolChoice".into(), json!({"mode": mode}));
    }
    params
}

fn message(message: &SamplingMessage) -> Value {
    let role = match message.role {
        SamplingRole::User => "user",
        SamplingRole::Assistant => "assistant",
    };
    let content = match message.content.as_slice() {
        [text @ SamplingContent::Text(_)] => block(text),
        blocks => Value::Array(blocks.iter().map(block).collect()),
    };
    json!({"role": role, "content": content})
}

fn block(content: &SamplingContent) -> Value {
    match content {
        SamplingContent::Text(text) => json!({"type": "text", "text": text}),
        SamplingContent::ToolUse(call) => json!({
            "type": "tool_use",
            "id": call.id,
            "name": call.name,
            "input": call.input,
        }),
        SamplingContent::ToolResult {
            tool_use_id,
            content,
            is_error,
        } => json!({
            "type": "tool_result",
            "toolUseId": tool_use_id,
            "content": content,
            "isError": is_error,
        }),
    }
}

/// Reads a `CreateMessageResult`: `content` is one block or (with tools) an array of them. The
/// error says what is wrong with the result.
pub fn sampling_answer(result: &JsonObject) -> Result<SamplingAnswer, String> {
    let blocks: Vec<&Value> = match result.get("content") {
        Some(Value::Array(blocks)) => blocks.iter().collect(),
        Some(block @ Value::Object(_)) => vec![block],
        _ => {
            return Err(format!(
                "the client's result has no content: {}",
                excerpt(&Value::Object(result.clone()).to_string(), 300)
            ));
        }
    };
    let text_of = |key: &str| result.get(key).and_then(Value::as_str).map(str::to_owned);
    let mut answer = SamplingAnswer {
        stop_reason: text_of("stopReason"),
        model: text_of("model"),
        ..SamplingAnswer::default()
    };
    for block in blocks {
        match block["type"].as_str() {
            Some("text") => answer
                .text
                .push_str(block["text"].as_str().unwrap_or_default()),
            Some("tool_use") => {
                let name = block["name"].as_str().unwrap_or_default();
                if name.is_empty() {
                    return Err(
                        "the client's result has a tool_use block without a name".to_owned()
                    );
                }
                let input = match &block["input"] {
                    Value::Object(map) => map.clone(),
                    Value::Null => JsonObject::new(),
                    other => {
                        return Err(format!(
                            "the client's tool_use block for {name:?} has a non-object input: {}",
                            excerpt(&other.to_string(), 200)
                        ));
                    }
                };
                // The id links the result back to the call; a client that leaves it out still
                // gets distinct ones.
                let id = match block["id"].as_str().filter(|id| !id.is_empty()) {
                    Some(id) => id.to_owned(),
                    None => format!("call_{}", answer.tool_uses.len() + 1),
                };
                answer.tool_uses.push(SamplingToolUse {
                    id,
                    name: name.to_owned(),
                    input,
                });
            }
            // Images and audio have no place in a text agent's turn.
            other => tracing::debug!(
                block_type = other.unwrap_or("(none)"),
                "ignoring a sampling result block"
            ),
        }
    }
    Ok(answer)
}

/// Reads `sampling/createMessage` params an upstream sent (a message's `content` is one block or an
/// array of them). Text, tool use and tool result blocks are kept; a block of another kind (an
/// image, audio) is refused, since the models Portico drives read text. The error says what is
/// wrong with the params.
pub fn sampling_request(params: &JsonObject) -> Result<SamplingRequest, String> {
    let Some(Value::Array(messages)) = params.get("messages") else {
        return Err("the request has no `messages` list".to_owned());
    };
    let mut request = SamplingRequest {
        system_prompt: params
            .get("systemPrompt")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_owned),
        max_tokens: params
            .get("maxTokens")
            .and_then(Value::as_u64)
            .and_then(|n| u32::try_from(n).ok())
            .ok_or("the request has no `maxTokens` (a positive integer)")?,
        temperature: params
            .get("temperature")
            .and_then(Value::as_f64)
            .map(|t| t as f32),
        ..SamplingRequest::default()
    };
    for (n, message) in messages.iter().enumerate() {
        let role = match message["role"].as_str() {
            Some("user") => SamplingRole::User,
            Some("assistant") => SamplingRole::Assistant,
            other => {
                return Err(format!(
                    "message {} has role {}, not user or assistant",
                    n + 1,
                    other.map_or("(none)".to_owned(), |r| format!("{r:?}"))
                ));
            }
        };
        let blocks: Vec<&Value> = match &message["content"] {
            Value::Array(blocks) => blocks.iter().collect(),
            block @ Value::Object(_) => vec![block],
            _ => return Err(format!("message {} has no content", n + 1)),
        };
        let content = blocks
            .into_iter()
            .map(|block| request_block(block).map_err(|e| format!("message {}: {e}", n + 1)))
            .collect::<Result<Vec<_>, _>>()?;
        request.messages.push(SamplingMessage { role, content });
    }
    for tool in params
        .get("tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let name = tool["name"].as_str().unwrap_or_default();
        if name.is_empty() {
            return Err("a tool in the request has no name".to_owned());
        }
        request.tools.push(portico_core::relay::SamplingTool {
            name: name.to_owned(),
            description: tool["description"].as_str().unwrap_or_default().to_owned(),
            input_schema: tool["inputSchema"].as_object().cloned().unwrap_or_default(),
        });
    }
    if !request.tools.is_empty() {
        request.tool_choice = Some(SamplingToolChoice::Auto);
    }
    Ok(request)
}

fn request_block(block: &Value) -> Result<SamplingContent, String> {
    match block["type"].as_str() {
        Some("text") => Ok(SamplingContent::Text(
            block["text"].as_str().unwrap_or_default().to_owned(),
        )),
        Some("tool_use") => Ok(SamplingContent::ToolUse(SamplingToolUse {
            id: block["id"].as_str().unwrap_or_default().to_owned(),
            name: block["name"].as_str().unwrap_or_default().to_owned(),
            input: block["input"].as_object().cloned().unwrap_or_default(),
        })),
        Some("tool_result") => Ok(SamplingContent::ToolResult {
            tool_use_id: block["toolUseId"].as_str().unwrap_or_default().to_owned(),
            content: match &block["content"] {
                Value::Array(content) => content.clone(),
                Value::Null => Vec::new(),
                one => vec![one.clone()],
            },
            is_error: block["isError"].as_bool().unwrap_or(false),
        }),
        other => Err(format!(
            "a {} block, which the model cannot be given (only text, tool_use and tool_result)",
            other.unwrap_or("(untyped)")
        )),
    }
}

/// A `CreateMessageResult` of `answer` (a model driver's: its stop reason in the provider's
/// spelling is written in MCP's): its text, then its tool uses, as content blocks (one block as an
/// object, as clients without tools send it).
pub fn sampling_result(answer: &SamplingAnswer) -> JsonObject {
    let mut blocks = Vec::new();
    if !answer.text.is_empty() || answer.tool_uses.is_empty() {
        blocks.push(SamplingContent::Text(answer.text.clone()));
    }
    blocks.extend(
        answer
            .tool_uses
            .iter()
            .cloned()
            .map(SamplingContent::ToolUse),
    );
    let content = match blocks.as_slice() {
        [one] => block(one),
        many => Value::Array(many.iter().map(block).collect()),
    };
    let mut result = JsonObject::new();
    result.insert("role".into(), json!("assistant"));
    result.insert("content".into(), content);
    result.insert(
        "model".into(),
        json!(answer.model.as_deref().unwrap_or("unknown")),
    );
    let stop_reason = match answer.stop_reason.as_deref() {
        Some(reason) => mcp_stop_reason(reason),
        None if answer.tool_uses.is_empty() => "endTurn",
        None => "toolUse",
    };
    result.insert("stopReason".into(), json!(stop_reason));
    result
}

/// A model provider's stop reason as MCP spells it (`end_turn`, `stop` → `endTurn`, ...); one MCP
/// does not name is kept as it is.
fn mcp_stop_reason(reason: &str) -> &str {
    match reason {
        "end_turn" | "stop" => "endTurn",
        "tool_use" | "tool_calls" => "toolUse",
        "max_tokens" | "length" => "maxTokens",
        "stop_sequence" => "stopSequence",
        other => other,
    }
}

/// At most `max` characters of `text`, marked when cut.
fn excerpt(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use portico_core::call::text_block;
    use portico_core::relay::SamplingTool;

    use super::*;

    fn object(value: Value) -> JsonObject {
        value.as_object().cloned().unwrap()
    }

    fn text(text: &str) -> SamplingContent {
        SamplingContent::Text(text.into())
    }

    fn tool_use(id: &str, input: Value) -> SamplingToolUse {
        SamplingToolUse {
            id: id.into(),
            name: "search".into(),
            input: object(input),
        }
    }

    fn tool_result(id: &str, answer: &str, is_error: bool) -> SamplingContent {
        SamplingContent::ToolResult {
            tool_use_id: id.into(),
            content: vec![text_block(answer)],
            is_error,
        }
    }

    /// The conversation of the sampling driver's tests (`portico-llm`'s `drivers::sampling`).
    fn conversation() -> SamplingRequest {
        SamplingRequest {
            messages: vec![
                SamplingMessage {
                    role: SamplingRole::User,
                    content: vec![text("Find docs")],
                },
                SamplingMessage {
                    role: SamplingRole::Assistant,
                    content: vec![
                        text("Searching."),
                        SamplingContent::ToolUse(tool_use("t1", json!({"q": "docs"}))),
                        SamplingContent::ToolUse(tool_use("t2", json!({}))),
                    ],
                },
                SamplingMessage {
                    role: SamplingRole::User,
                    content: vec![
                        tool_result("t1", "found 3", false),
                        tool_result("t2", "bad query", true),
                    ],
                },
            ],
            system_prompt: Some("Be helpful.".into()),
            max_tokens: 1024,
            temperature: Some(0.2),
            tools: vec![SamplingTool {
                name: "search".into(),
                description: "Search docs".into(),
                input_schema: object(
                    json!({"type": "object", "properties": {"q": {"type": "string"}}}),
                ),
            }],
            tool_choice: Some(SamplingToolChoice::Auto),
        }
    }

    #[test]
    fn params_follow_sampling_with_tools() {
        let params = Value::Object(sampling_params(&conversation()));
        let expected = json!({
            "messages": [
                {"role": "user", "content": {"type": "text", "text": "Find docs"}},
                {"role": "assistant", "content": [
                    {"type": "text", "text": "Searching."},
                    {"type": "tool_use", "id": "t1", "name": "search", "input": {"q": "docs"}},
                    {"type": "tool_use", "id": "t2", "name": "search", "input": {}},
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "toolUseId": "t1",
                     "content": [{"type": "text", "text": "found 3"}], "isError": false},
                    {"type": "tool_result", "toolUseId": "t2",
                     "content": [{"type": "text", "text": "bad query"}], "isError": true},
                ]},
            ],
            "systemPrompt": "Be helpful.",
            "maxTokens": 1024,
            "temperature": 0.2,
            "tools": [{"name": "search", "description": "Search docs",
                       "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}}}],
            "toolChoice": {"mode": "auto"},
        });
        assert_eq!(params, expected);
        // Keys in the order the driver wrote them before the request was typed (serde_json keeps
        // insertion order here), so what is passed on verbatim is byte for byte the same.
        assert_eq!(params.to_string(), expected.to_string());
    }

    #[test]
    fn without_tools_nothing_about_tools_is_sent() {
        let request = SamplingRequest {
            messages: vec![SamplingMessage {
                role: SamplingRole::User,
                content: vec![text("hi")],
            }],
            max_tokens: 50,
            ..SamplingRequest::default()
        };
        assert_eq!(
            Value::Object(sampling_params(&request)),
            json!({"messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}], "maxTokens": 50})
        );
    }

    #[test]
    fn a_text_result_is_read_with_its_stop_reason_and_model() {
        let answer = sampling_answer(&object(json!({"role": "assistant",
            "content": {"type": "text", "text": "Here they are."},
            "model": "client-model", "stopReason": "endTurn"})))
        .unwrap();
        assert_eq!(
            answer,
            SamplingAnswer {
                text: "Here they are.".into(),
                tool_uses: vec![],
                stop_reason: Some("endTurn".into()),
                model: Some("client-model".into()),
            }
        );
    }

    #[test]
    fn tool_use_blocks_become_tool_uses() {
        let answer = sampling_answer(&object(json!({"role": "assistant", "model": "m",
        "stopReason": "toolUse", "content": [
            {"type": "text", "text": "Let me look."},
            {"type": "tool_use", "id": "u1", "name": "search", "input": {"q": "x"}},
            {"type": "tool_use", "name": "search"},
            {"type": "image", "data": "…", "mimeType": "image/png"},
        ]})))
        .unwrap();
        assert_eq!(answer.text, "Let me look.");
        assert_eq!(answer.stop_reason.as_deref(), Some("toolUse"));
        assert_eq!(
            answer.tool_uses,
            vec![
                tool_use("u1", json!({"q": "x"})),
                // No id: one is made up, so results still link back.
                tool_use("call_2", json!({})),
            ]
        );
    }

    #[test]
    fn params_read_back_are_the_request_that_wrote_them() {
        let request = conversation();
        assert_eq!(sampling_request(&sampling_params(&request)), Ok(request));
    }

    #[test]
    fn params_the_model_cannot_read_are_refused_with_the_reason() {
        let error = sampling_request(&object(json!({"messages": [{"role": "user",
            "content": {"type": "image", "data": "", "mimeType": "image/png"}}], "maxTokens": 5})))
        .unwrap_err();
        assert_eq!(
            error,
            "message 1: a image block, which the model cannot be given (only text, tool_use and tool_result)"
        );
        let error = sampling_request(&object(json!({"messages": []}))).unwrap_err();
        assert_eq!(error, "the request has no `maxTokens` (a positive integer)");
    }

    #[test]
    fn an_answer_is_written_as_a_result_and_read_back_alike() {
        let answer = SamplingAnswer {
            text: "Let me look.".into(),
            tool_uses: vec![tool_use("u1", json!({"q": "x"}))],
            stop_reason: None,
            model: Some("gpt-test".into()),
        };
        let result = sampling_result(&answer);
        assert_eq!(
            Value::Object(result.clone()),
            json!({"role": "assistant", "content": [
                {"type": "text", "text": "Let me look."},
                {"type": "tool_use", "id": "u1", "name": "search", "input": {"q": "x"}},
            ], "model": "gpt-test", "stopReason": "toolUse"})
        );
        assert_eq!(
            sampling_answer(&result).unwrap(),
            SamplingAnswer {
                stop_reason: Some("toolUse".into()),
                ..answer
            }
        );
        let plain = sampling_result(&SamplingAnswer {
            text: "hi".into(),
            ..SamplingAnswer::default()
        });
        let provider_spelled = sampling_result(&SamplingAnswer {
            stop_reason: Some("length".into()),
            ..SamplingAnswer::default()
        });
        assert_eq!(provider_spelled["stopReason"], "maxTokens");
        assert_eq!(
            Value::Object(plain),
            json!({"role": "assistant", "content": {"type": "text", "text": "hi"},
                   "model": "unknown", "stopReason": "endTurn"})
        );
    }

    #[test]
    fn malformed_results_say_what_is_wrong() {
        let error = sampling_answer(&object(json!({"role": "assistant"}))).unwrap_err();
        assert!(
            error.starts_with("the client's result has no content: "),
            "{error}"
        );
        let error = sampling_answer(&object(
            json!({"content": [{"type": "tool_use", "input": {}}]}),
        ))
        .unwrap_err();
        assert_eq!(
            error,
            "the client's result has a tool_use block without a name"
        );
        let error = sampling_answer(&object(
            json!({"content": [{"type": "tool_use", "name": "search", "input": [1]}]}),
        ))
        .unwrap_err();
        assert_eq!(
            error,
            "the client's tool_use block for \"search\" has a non-object input: [1]"
        );
    }
}
