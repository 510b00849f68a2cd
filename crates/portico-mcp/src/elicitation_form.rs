//! An `elicitation/create` request as typed values, for a client that asks its user itself
//! (`portico call` on a terminal, or answering from the form's defaults): the form's fields with
//! their kinds, defaults and whether they are required, or the URL to visit; and the answer
//! written back as the protocol's result. Pure, so every field kind is tested here.
//!
//! The form schema is the restricted one elicitation allows: a flat object of strings (with
//! `enum`, `oneOf` of `const`/`title`, `enumNames`), numbers, integers, booleans, and arrays of
//! enumerated strings (multi-select, SEP-1330).

use portico_core::JsonObject;
use serde_json::{Value, json};

/// What the upstream asks.
#[derive(Debug, Clone, PartialEq)]
pub enum ElicitationAsk {
    /// Fill in a form.
    Form {
        message: String,
        fields: Vec<FormField>,
    },
    /// Visit a URL (and say when done).
    Url { message: String, url: String },
}

/// One field of a form.
#[derive(Debug, Clone, PartialEq)]
pub struct FormField {
    /// The key the answer carries it under.
    pub name: String,
    /// Its `title`, else its name.
    pub label: String,
    pub description: Option<String>,
    pub kind: FieldKind,
    pub default: Option<Value>,
    pub required: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub enum FieldKind {
    Text,
    Number,
    Integer,
    Boolean,
    /// One of these values, each with the label to show.
    Choice(Vec<Choice>),
    /// Any number of these values.
    MultiChoice(Vec<Choice>),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Choice {
    pub value: String,
    pub label: String,
}

/// The user's answer.
#[derive(Debug, Clone, PartialEq)]
pub enum ElicitationAnswer {
    Accept(JsonObject),
    Decline,
    Cancel,
}

/// Reads `elicitation/create` params. The error says what is wrong with them.
pub fn elicitation_ask(params: &JsonObject) -> Result<ElicitationAsk, String> {
    let message = params
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    if params.get("mode").and_then(Value::as_str) == Some("url") {
        let url = params
            .get("url")
            .and_then(Value::as_str)
            .filter(|url| !url.is_empty())
            .ok_or("a URL-mode request without a `url`")?;
        return Ok(ElicitationAsk::Url {
            message,
            url: url.to_owned(),
        });
    }
    let schema = params
        .get("requestedSchema")
        .and_then(Value::as_object)
        .ok_or("a form request without a `requestedSchema` object")?;
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let mut fields = Vec::new();
    for (name, field) in schema
        .get("properties")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        let text = |key: &str| field.get(key).and_then(Value::as_str).map(str::to_owned);
        fields.push(FormField {
            name: name.clone(),
            label: text("title").unwrap_or_else(|| name.clone()),
            description: text("description"),
            kind: field_kind(name, field)?,
            default: field.get("default").cloned(),
            required: required.contains(&name.as_str()),
        });
    }
    Ok(ElicitationAsk::Form { message, fields })
}

fn field_kind(name: &str, field: &Value) -> Result<FieldKind, String> {
    if let Some(choices) = choices(field) {
        return Ok(FieldKind::Choice(choices));
    }
    Ok(match field.get("type").and_then(Value::as_str) {
        Some("string") | None => FieldKind::Text,
        Some("number") => FieldKind::Number,
        Some("integer") => FieldKind::Integer,
        Some("boolean") => FieldKind::Boolean,
        Some("array") => {
            let items = field.get("items").unwrap_or(&Value::Null);
            FieldKind::MultiChoice(
                choices(items)
                    .ok_or_else(|| format!("field `{name}` is a list without enumerated values"))?,
            )
        }
        Some(other) => return Err(format!("field `{name}` has type {other:?}")),
    })
}

/// An enumeration's values with their labels: `enum` (with `enumNames`), or `oneOf`/`anyOf` of
/// `{const, title}`.
fn choices(field: &Value) -> Option<Vec<Choice>> {
    if let Some(values) = field.get("enum").and_then(Value::as_array) {
        let names = field.get("enumNames").and_then(Value::as_array);
        return Some(
            values
                .iter()
                .enumerate()
                .filter_map(|(n, value)| {
                    let value = value.as_str()?.to_owned();
                    let label = names
                        .and_then(|names| names.get(n))
                        .and_then(Value::as_str)
                        .map_or_else(|| value.clone(), str::to_owned);
                    Some(Choice { value, label })
                })
                .collect(),
        );
    }
    let options = field
        .get("oneOf")
        .or_else(|| field.get("anyOf"))
        .and_then(Value::as_array)?;
    Some(
        options
            .iter()
            .filter_map(|option| {
                let value = option.get("const")?.as_str()?.to_owned();
                let label = option
                    .get("title")
                    .and_then(Value::as_str)
                    .map_or_else(|| value.clone(), str::to_owned);
                Some(Choice { value, label })
            })
            .collect(),
    )
}

impl FormField {
    /// The value of what the user typed for this field: `Ok(None)` leaves it out (an empty line
    /// for a field that is not required and has no default). An empty line takes the default.
    /// The error says what to type instead.
    pub fn read(&self, typed: &str) -> Result<Option<Value>, String> {
        let typed = typed.trim();
        if typed.is_empty() {
            return match (&self.default, self.required) {
                (Some(default), _) => Ok(Some(default.clone())),
                (None, true) => Err("this field is required".to_owned()),
                (None, false) => Ok(None),
            };
        }
        match &self.kind {
            FieldKind::Text => Ok(Some(json!(typed))),
            FieldKind::Number => typed
                .parse::<f64>()
                .ok()
                .filter(|n| n.is_finite())
                .map(|n| Some(json!(n)))
                .ok_or_else(|| "type a number".to_owned()),
            FieldKind::Integer => typed
                .parse::<i64>()
                .map(|n| Some(json!(n)))
                .map_err(|_| "type a whole number".to_owned()),
            FieldKind::Boolean => match typed.to_ascii_lowercase().as_str() {
                "y" | "yes" | "true" => Ok(Some(json!(true))),
                "n" | "no" | "false" => Ok(Some(json!(false))),
                _ => Err("type y or n".to_owned()),
            },
            FieldKind::Choice(choices) => pick(choices, typed).map(|value| Some(json!(value))),
            FieldKind::MultiChoice(choices) => typed
                .split(',')
                .map(|one| pick(choices, one.trim()))
                .collect::<Result<Vec<_>, _>>()
                .map(|values| Some(json!(values))),
        }
    }
}

/// A choice by its number (from 1) or its value.
fn pick<'a>(choices: &'a [Choice], typed: &str) -> Result<&'a str, String> {
    let by_number = typed
        .parse::<usize>()
        .ok()
        .and_then(|n| n.checked_sub(1))
        .and_then(|n| choices.get(n));
    by_number
        .or_else(|| choices.iter().find(|c| c.value == typed))
        .map(|c| c.value.as_str())
        .ok_or_else(|| {
            format!(
                "type a number from 1 to {}, or one of the values",
                choices.len()
            )
        })
}

/// The answer that accepts the form with each field's default: `Err` names the required fields
/// without one, which the defaults cannot answer.
pub fn form_defaults(fields: &[FormField]) -> Result<JsonObject, Vec<String>> {
    let missing: Vec<String> = fields
        .iter()
        .filter(|f| f.required && f.default.is_none())
        .map(|f| f.name.clone())
        .collect();
    if !missing.is_empty() {
        return Err(missing);
    }
    Ok(fields
        .iter()
        .filter_map(|f| Some((f.name.clone(), f.default.clone()?)))
        .collect())
}

/// The `ElicitResult` of an answer; an accepted one with no content (a visited URL) has none.
pub fn elicitation_result(answer: &ElicitationAnswer) -> JsonObject {
    let mut result = JsonObject::new();
    match answer {
        ElicitationAnswer::Accept(content) => {
            result.insert("action".into(), json!("accept"));
            if !content.is_empty() {
                result.insert("content".into(), Value::Object(content.clone()));
            }
        }
        ElicitationAnswer::Decline => {
            result.insert("action".into(), json!("decline"));
        }
        ElicitationAnswer::Cancel => {
            result.insert("action".into(), json!("cancel"));
        }
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(value: Value) -> JsonObject {
        value.as_object().cloned().unwrap()
    }

    fn form() -> JsonObject {
        object(json!({
            "message": "Who are you?",
            "requestedSchema": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "title": "Name", "default": "John Doe"},
                    "age": {"type": "integer", "description": "In years"},
                    "score": {"type": "number", "default": 95.5},
                    "status": {"type": "string", "enum": ["active", "inactive"],
                               "enumNames": ["Active", "Inactive"], "default": "active"},
                    "tier": {"type": "string", "oneOf": [{"const": "f", "title": "Free"},
                                                          {"const": "p", "title": "Pro"}]},
                    "verified": {"type": "boolean", "default": true},
                    "tags": {"type": "array", "items": {"anyOf": [{"const": "a", "title": "A"},
                                                                   {"const": "b", "title": "B"}]}},
                },
                "required": ["age"],
            }
        }))
    }

    fn fields() -> Vec<FormField> {
        match elicitation_ask(&form()).unwrap() {
            ElicitationAsk::Form { message, fields } => {
                assert_eq!(message, "Who are you?");
                fields
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_form_is_read_field_by_field_in_order() {
        let fields = fields();
        let summary: Vec<(&str, &str, &FieldKind, bool)> = fields
            .iter()
            .map(|f| (f.name.as_str(), f.label.as_str(), &f.kind, f.required))
            .collect();
        let choice = |value: &str, label: &str| Choice {
            value: value.into(),
            label: label.into(),
        };
        assert_eq!(
            summary,
            [
                ("name", "Name", &FieldKind::Text, false),
                ("age", "age", &FieldKind::Integer, true),
                ("score", "score", &FieldKind::Number, false),
                (
                    "status",
                    "status",
                    &FieldKind::Choice(vec![
                        choice("active", "Active"),
                        choice("inactive", "Inactive")
                    ]),
                    false
                ),
                (
                    "tier",
                    "tier",
                    &FieldKind::Choice(vec![choice("f", "Free"), choice("p", "Pro")]),
                    false
                ),
                ("verified", "verified", &FieldKind::Boolean, false),
                (
                    "tags",
                    "tags",
                    &FieldKind::MultiChoice(vec![choice("a", "A"), choice("b", "B")]),
                    false
                ),
            ]
        );
        assert_eq!(fields[1].description.as_deref(), Some("In years"));
    }

    #[test]
    fn typed_values_are_checked_against_the_field() {
        let fields = fields();
        let by = |name: &str| fields.iter().find(|f| f.name == name).unwrap();
        assert_eq!(by("name").read(""), Ok(Some(json!("John Doe"))));
        assert_eq!(by("name").read(" Ann "), Ok(Some(json!("Ann"))));
        assert_eq!(by("age").read(""), Err("this field is required".into()));
        assert_eq!(by("age").read("4.5"), Err("type a whole number".into()));
        assert_eq!(by("age").read("41"), Ok(Some(json!(41))));
        assert_eq!(by("score").read("nope"), Err("type a number".into()));
        assert_eq!(by("score").read("1.5"), Ok(Some(json!(1.5))));
        assert_eq!(by("status").read("2"), Ok(Some(json!("inactive"))));
        assert_eq!(by("status").read("active"), Ok(Some(json!("active"))));
        assert_eq!(
            by("status").read("3"),
            Err("type a number from 1 to 2, or one of the values".into())
        );
        assert_eq!(by("tier").read(""), Ok(None));
        assert_eq!(by("verified").read("n"), Ok(Some(json!(false))));
        assert_eq!(by("verified").read("maybe"), Err("type y or n".into()));
        assert_eq!(by("tags").read("1, b"), Ok(Some(json!(["a", "b"]))));
    }

    #[test]
    fn defaults_answer_a_form_unless_a_required_field_has_none() {
        assert_eq!(form_defaults(&fields()), Err(vec!["age".to_string()]));
        let mut fields = fields();
        fields.retain(|f| f.name != "age");
        assert_eq!(
            Value::Object(form_defaults(&fields).unwrap()),
            json!({"name": "John Doe", "score": 95.5, "status": "active", "verified": true})
        );
    }

    #[test]
    fn url_requests_and_answers_are_read_and_written() {
        let ask = elicitation_ask(&object(json!({"mode": "url", "message": "Log in",
            "url": "https://example.com/login", "elicitationId": "e1"})))
        .unwrap();
        assert_eq!(
            ask,
            ElicitationAsk::Url {
                message: "Log in".into(),
                url: "https://example.com/login".into()
            }
        );
        assert_eq!(
            Value::Object(elicitation_result(&ElicitationAnswer::Accept(object(
                json!({"a": 1})
            )))),
            json!({"action": "accept", "content": {"a": 1}})
        );
        assert_eq!(
            Value::Object(elicitation_result(&ElicitationAnswer::Decline)),
            json!({"action": "decline"})
        );
        assert_eq!(
            elicitation_ask(&object(json!({"message": "x"}))),
            Err("a form request without a `requestedSchema` object".into())
        );
    }
}
