//! Elicitation answers on their way back to the upstream that asked.
//!
//! SEP-1034 lets a form's fields declare a `default`, and the client applies it to a field the user
//! left out. Portico is that client to the upstream, but the form is filled in by Portico's own
//! client, which may be of an era without defaults or may simply send only what was changed; so
//! Portico fills each omitted field that has a default before the answer leaves, in every era
//! (a relayed `elicitation/create` and a 2026-07-28 input round alike).

use portico_core::JsonObject;
use serde_json::Value;

/// Fills, in an accepted answer, every field of `params`' requested schema that the answer leaves
/// out and that declares a `default`. A declined or cancelled answer, a field the answer gives
/// (even as `null`) and content that is not an object stay as they are.
pub(crate) fn apply_defaults(params: &JsonObject, answer: &mut JsonObject) {
    if answer.get("action").and_then(Value::as_str) != Some("accept") {
        return;
    }
    let Some(properties) = params
        .get("requestedSchema")
        .and_then(|schema| schema.get("properties"))
        .and_then(Value::as_object)
    else {
        return;
    };
    let defaults: Vec<(&String, &Value)> = properties
        .iter()
        .filter_map(|(name, field)| field.get("default").map(|default| (name, default)))
        .collect();
    if defaults.is_empty() {
        return;
    }
    let content = answer
        .entry("content")
        .or_insert_with(|| Value::Object(JsonObject::new()));
    let Some(content) = content.as_object_mut() else {
        return;
    };
    for (name, default) in defaults {
        if !content.contains_key(name) {
            content.insert(name.clone(), default.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(value: Value) -> JsonObject {
        value.as_object().cloned().unwrap()
    }

    /// The form of the conformance suite's `elicitation-sep1034-client-defaults` scenario.
    fn form() -> JsonObject {
        object(json!({
            "message": "please accept with defaults",
            "requestedSchema": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "default": "John Doe"},
                    "age": {"type": "integer", "default": 30},
                    "score": {"type": "number", "default": 95.5},
                    "status": {"type": "string", "enum": ["active", "inactive"], "default": "active"},
                    "verified": {"type": "boolean", "default": true},
                    "note": {"type": "string"}
                },
                "required": []
            }
        }))
    }

    #[test]
    fn an_accepted_answer_without_content_gets_every_default_and_nothing_else() {
        let mut answer = object(json!({"action": "accept"}));
        apply_defaults(&form(), &mut answer);
        assert_eq!(
            Value::Object(answer),
            json!({"action": "accept", "content": {
                "name": "John Doe", "age": 30, "score": 95.5, "status": "active", "verified": true
            }})
        );
    }

    #[test]
    fn given_fields_are_kept_even_null_and_only_the_omitted_ones_are_filled() {
        let mut answer = object(json!({
            "action": "accept",
            "content": {"name": "Ada", "age": null, "note": "hi"}
        }));
        apply_defaults(&form(), &mut answer);
        assert_eq!(
            Value::Object(answer),
            json!({"action": "accept", "content": {
                "name": "Ada", "age": null, "note": "hi",
                "score": 95.5, "status": "active", "verified": true
            }})
        );
    }

    #[test]
    fn declined_cancelled_and_odd_answers_are_left_alone() {
        for original in [
            json!({"action": "decline"}),
            json!({"action": "cancel"}),
            json!({"action": "accept", "content": "not an object"}),
            json!({"content": {}}),
        ] {
            let mut answer = object(original.clone());
            apply_defaults(&form(), &mut answer);
            assert_eq!(Value::Object(answer), original);
        }
    }

    #[test]
    fn a_form_without_defaults_or_without_a_schema_adds_nothing() {
        let mut answer = object(json!({"action": "accept", "content": {}}));
        apply_defaults(
            &object(json!({"message": "m", "requestedSchema": {"type": "object",
                "properties": {"x": {"type": "string"}}}})),
            &mut answer,
        );
        apply_defaults(&object(json!({"message": "m"})), &mut answer);
        assert_eq!(
            Value::Object(answer),
            json!({"action": "accept", "content": {}})
        );
    }
}
