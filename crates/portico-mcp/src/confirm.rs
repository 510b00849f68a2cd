//! A yes/no question for the person at a client, as MCP elicitation: Portico's own request (an
//! approval of a held call), typed in core as [`Caller::confirm`] and written here.

use portico_core::JsonObject;
use portico_core::relay::{BoxFuture, Caller, Confirmation, RelayError, RelayRequest};
use serde_json::{Value, json};

/// The one field of the form: a boolean the person ticks to say yes.
pub const CONFIRM_FIELD: &str = "approve";

/// Asks through `caller`'s `elicitation/create` (or a 2026-07-28 input round of it): `accept` with
/// the field true is yes, `accept` with it false and `decline` are no, `cancel` is cancelled.
pub fn confirm_through<'a>(
    caller: &'a dyn Caller,
    question: String,
) -> BoxFuture<'a, Result<Confirmation, RelayError>> {
    Box::pin(async move {
        let result = caller
            .request(RelayRequest::Elicitation, confirm_params(&question))
            .await?;
        confirmation(&result)
    })
}

/// `elicitation/create` params: the question and a form of one required boolean.
pub fn confirm_params(question: &str) -> JsonObject {
    let params = json!({
        "message": question,
        "requestedSchema": {
            "type": "object",
            "properties": {
                CONFIRM_FIELD: {
                    "type": "boolean",
                    "title": "Approve this call",
                    "default": false,
                },
            },
            "required": [CONFIRM_FIELD],
        },
    });
    match params {
        Value::Object(params) => params,
        _ => JsonObject::new(),
    }
}

/// The client's `ElicitResult` as an answer; anything else is an error naming what came.
pub fn confirmation(result: &JsonObject) -> Result<Confirmation, RelayError> {
    let malformed = || RelayError {
        code: -32602,
        message: format!(
            "the client's answer to an approval question is not an elicitation result: {}",
            Value::Object(result.clone())
        ),
    };
    match result.get("action").and_then(Value::as_str) {
        Some("accept") => {
            let yes = result
                .get("content")
                .and_then(|content| content.get(CONFIRM_FIELD))
                .and_then(Value::as_bool)
                .unwrap_or(false);
            Ok(if yes {
                Confirmation::Yes
            } else {
                Confirmation::No
            })
        }
        Some("decline") => Ok(Confirmation::No),
        Some("cancel") => Ok(Confirmation::Cancelled),
        _ => Err(malformed()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(value: Value) -> JsonObject {
        value.as_object().cloned().unwrap()
    }

    #[test]
    fn answers_read_as_yes_no_or_cancelled() {
        for (result, expected) in [
            (
                json!({"action": "accept", "content": {"approve": true}}),
                Ok(Confirmation::Yes),
            ),
            (
                json!({"action": "accept", "content": {"approve": false}}),
                Ok(Confirmation::No),
            ),
            (json!({"action": "accept"}), Ok(Confirmation::No)),
            (json!({"action": "decline"}), Ok(Confirmation::No)),
            (json!({"action": "cancel"}), Ok(Confirmation::Cancelled)),
        ] {
            assert_eq!(confirmation(&object(result.clone())), expected, "{result}");
        }
        assert_eq!(
            confirmation(&object(json!({"x": 1}))).unwrap_err().code,
            -32602
        );
        let params = confirm_params("Approve?");
        assert_eq!(params["message"], "Approve?");
        assert_eq!(params["requestedSchema"]["required"], json!(["approve"]));
    }
}
