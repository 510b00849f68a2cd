//! Tool results between MCP's JSON and Portico's [`ToolResult`]. The one place (with the server edge,
//! which uses these too) that knows a result's wire keys.

use portico_core::{JsonObject, ToolResult};
use serde_json::Value;

const CONTENT: &str = "content";
const STRUCTURED_CONTENT: &str = "structuredContent";
const IS_ERROR: &str = "isError";
const META: &str = "_meta";

/// A `CallToolResult` object as a [`ToolResult`]. Fields are moved out, never copied; `resultType`, the
/// protocol's discriminator of result kinds, is dropped (the serving door adds it back for clients
/// that need it).
pub fn tool_result_from_object(mut object: JsonObject) -> ToolResult {
    let content = match object.remove(CONTENT) {
        Some(Value::Array(blocks)) => blocks,
        _ => Vec::new(),
    };
    ToolResult {
        content,
        structured_content: object.remove(STRUCTURED_CONTENT),
        is_error: object.remove(IS_ERROR).and_then(|v| v.as_bool()),
        meta: match object.remove(META) {
            Some(Value::Object(meta)) => Some(meta),
            _ => None,
        },
        task: None,
    }
}

/// rmcp's `CallToolResult` as a [`ToolResult`], moving its fields: only the content blocks, typed by
/// rmcp, are written out as JSON (each block whole). The same value [`tool_result_from_object`] makes
/// of the result's JSON, without building that JSON first; `resultType` is dropped as there.
pub fn tool_result_from_rmcp(result: rmcp::model::CallToolResult) -> ToolResult {
    ToolResult {
        content: result
            .content
            .iter()
            .map(|block| serde_json::to_value(block).unwrap_or_default())
            .collect(),
        structured_content: result.structured_content,
        is_error: result.is_error,
        meta: result.meta.map(|meta| meta.0),
        task: None,
    }
}

/// A [`ToolResult`] as a `CallToolResult` object, in the order rmcp writes one: `content`,
/// `structuredContent`, `isError`, `_meta`.
pub fn tool_result_into_object(result: ToolResult) -> JsonObject {
    let mut object = JsonObject::new();
    object.insert(CONTENT.into(), Value::Array(result.content));
    if let Some(structured) = result.structured_content {
        object.insert(STRUCTURED_CONTENT.into(), structured);
    }
    if let Some(is_error) = result.is_error {
        object.insert(IS_ERROR.into(), Value::Bool(is_error));
    }
    if let Some(meta) = result.meta {
        object.insert(META.into(), Value::Object(meta));
    }
    object
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_result_survives_the_round_trip_key_for_key_and_in_order() {
        let wire = json!({
            "content": [{"type": "image", "data": "AAAA", "mimeType": "image/png", "x-future": 1}],
            "structuredContent": null,
            "isError": false,
            "_meta": {"vendor/x": 1},
        });
        let Value::Object(object) = wire.clone() else {
            unreachable!()
        };
        let result = tool_result_from_object(object);
        assert_eq!(result.structured_content, Some(Value::Null));
        assert_eq!(result.is_error, Some(false));
        let back = Value::Object(tool_result_into_object(result));
        assert_eq!(back.to_string(), wire.to_string());
    }

    #[test]
    fn rmcp_results_convert_as_their_json_does() {
        for wire in [
            json!({
                "content": [{"type": "text", "text": "hi"}, {"type": "image", "data": "AAAA", "mimeType": "image/png"}],
                "structuredContent": null,
                "isError": false,
                "_meta": {"vendor/x": 1},
            }),
            json!({"content": [{"type": "text", "text": "hi"}], "structuredContent": {"n": 1}}),
            json!({"content": [], "isError": true}),
        ] {
            let typed: rmcp::model::CallToolResult = serde_json::from_value(wire.clone()).unwrap();
            let Value::Object(object) = serde_json::to_value(&typed).unwrap() else {
                unreachable!()
            };
            assert_eq!(
                tool_result_from_rmcp(typed),
                tool_result_from_object(object),
                "{wire}"
            );
        }
    }

    #[test]
    fn the_result_type_discriminator_is_not_part_of_the_domain_value() {
        let Value::Object(object) = json!({"resultType": "complete", "content": []}) else {
            unreachable!()
        };
        let back = tool_result_into_object(tool_result_from_object(object));
        assert_eq!(Value::Object(back), json!({"content": []}));
    }
}
