//! Turning decoder output into rmcp messages or JSON-RPC error replies.
//!
//! Everything the transport answers by itself is decided here: unparseable
//! input (`-32700`, id `null`), JSON that is not a JSON-RPC message
//! (`-32600`, with the id when there is one), batches (`-32600`), and the
//! framing-level failures reported by the decoder. Notifications rmcp cannot
//! parse are dropped without an answer, as JSON-RPC requires.

use rmcp::model::{ClientJsonRpcMessage, ErrorCode};
use serde::Serialize;
use serde_json::Value;

use crate::decoder::Event;

/// UTF-8 byte order mark, which RFC 8259 §8.1 lets a parser ignore.
const UTF8_BOM: &[u8] = b"\xEF\xBB\xBF";

/// A JSON-RPC error response written by the transport itself.
///
/// Serialised by hand (not through rmcp's `JsonRpcError`, which omits an
/// unknown id) so that an unknown id is sent as `"id": null`, as JSON-RPC 2.0
/// requires.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct ErrorReply {
    jsonrpc: &'static str,
    id: Option<Value>,
    error: ErrorBody,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
struct ErrorBody {
    code: i32,
    message: String,
}

impl ErrorReply {
    pub(crate) fn new(code: ErrorCode, message: String, id: Option<Value>) -> Self {
        Self {
            jsonrpc: "2.0",
            id,
            error: ErrorBody {
                code: code.0,
                message,
            },
        }
    }

    fn parse_error(message: String, id: Option<Value>) -> Self {
        Self::new(ErrorCode::PARSE_ERROR, message, id)
    }

    fn invalid_request(message: String, id: Option<Value>) -> Self {
        Self::new(ErrorCode::INVALID_REQUEST, message, id)
    }

    #[cfg(test)]
    pub(crate) fn code(&self) -> i32 {
        self.error.code
    }

    #[cfg(test)]
    pub(crate) fn message(&self) -> &str {
        &self.error.message
    }

    #[cfg(test)]
    pub(crate) fn id(&self) -> Option<&Value> {
        self.id.as_ref()
    }
}

/// What the transport does with one complete message body.
#[derive(Debug)]
pub(crate) enum Inbound {
    /// Hand it to rmcp.
    Message(Box<ClientJsonRpcMessage>),
    /// Answer it directly.
    Reply(ErrorReply),
    /// Drop it silently (a notification rmcp cannot represent).
    Ignore,
}

/// Only strings and numbers are JSON-RPC ids worth echoing back.
fn usable_id(id: &Value) -> Option<Value> {
    match id {
        Value::String(_) | Value::Number(_) => Some(id.clone()),
        _ => None,
    }
}

/// Classify a complete message body.
pub(crate) fn classify(body: &[u8]) -> Inbound {
    let body = body.strip_prefix(UTF8_BOM).unwrap_or(body);
    let error = match serde_json::from_slice::<ClientJsonRpcMessage>(body) {
        Ok(message) => return Inbound::Message(Box::new(message)),
        Err(error) => error,
    };
    // Valid JSON of the wrong shape is a data error; anything else means the
    // bytes are not JSON (or not UTF-8) at all.
    let value = if error.is_data() {
        serde_json::from_slice::<Value>(body).ok()
    } else {
        None
    };
    let Some(value) = value else {
        return Inbound::Reply(ErrorReply::parse_error(
            format!("Parse error: message is not valid JSON ({error})"),
            None,
        ));
    };
    match value {
        Value::Array(_) => Inbound::Reply(ErrorReply::invalid_request(
            "Invalid Request: JSON-RPC batches are not supported (MCP removed them in \
             2025-06-18); send each message on its own"
                .to_owned(),
            None,
        )),
        Value::Object(object) => {
            let is_notification =
                object.get("method").is_some_and(Value::is_string) && !object.contains_key("id");
            if is_notification {
                tracing::debug!(%error, "ignoring a notification rmcp cannot parse");
                return Inbound::Ignore;
            }
            let id = object.get("id").and_then(usable_id);
            Inbound::Reply(ErrorReply::invalid_request(
                format!("Invalid Request: not a valid JSON-RPC 2.0 message ({error})"),
                id,
            ))
        }
        _ => Inbound::Reply(ErrorReply::invalid_request(
            "Invalid Request: a JSON-RPC message must be a JSON object".to_owned(),
            None,
        )),
    }
}

/// The reply to a framing-level failure reported by the decoder, or `None`
/// for an event that carries a message body (use [`classify`]).
pub(crate) fn event_reply(event: &Event, max_message_bytes: usize) -> Option<ErrorReply> {
    Some(match event {
        Event::Message { .. } => return None,
        Event::Oversized { size, prefix, .. } => ErrorReply::invalid_request(
            format!(
                "Invalid Request: message of {size} bytes exceeds the maximum message size of \
                 {max_message_bytes} bytes and was discarded"
            ),
            recover_id(prefix),
        ),
        Event::BadHeader { reason, prefix } => ErrorReply::invalid_request(
            format!(
                "Invalid Request: malformed Content-Length header ({reason}); message discarded"
            ),
            recover_id(prefix),
        ),
        Event::Truncated {
            received,
            expected,
            prefix,
        } => {
            let detail = match (received, expected) {
                (Some(received), Some(expected)) => {
                    format!("after {received} of {expected} body bytes")
                }
                _ => "inside a Content-Length header block".to_owned(),
            };
            ErrorReply::parse_error(
                format!("Parse error: input ended in the middle of a message, {detail}"),
                recover_id(prefix),
            )
        }
    })
}

/// Best-effort recovery of the top-level `"id"` from the start of a JSON
/// object that was not (or not entirely) read, so that a client waiting on
/// a discarded request gets an answer it can match. Only looks at the
/// object's own members, never at nested ones.
pub(crate) fn recover_id(prefix: &[u8]) -> Option<Value> {
    let mut rest = skip_ws(prefix.strip_prefix(UTF8_BOM).unwrap_or(prefix));
    rest = skip_ws(rest.strip_prefix(b"{")?);
    loop {
        // A member: "key" : value
        let (key, after) = json_string(rest)?;
        rest = skip_ws(skip_ws(after).strip_prefix(b":")?);
        if key == b"id" {
            let mut values = serde_json::Deserializer::from_slice(rest).into_iter::<Value>();
            let value = values.next()?.ok()?;
            // A number that runs to the very end of the prefix may be cut
            // short (`12` of `123`).
            if value.is_number() && values.byte_offset() == rest.len() {
                return None;
            }
            return usable_id(&value);
        }
        rest = skip_value(rest)?;
        rest = skip_ws(skip_ws(rest).strip_prefix(b",")?);
    }
}

fn skip_ws(s: &[u8]) -> &[u8] {
    let n = s
        .iter()
        .take_while(|b| matches!(b, b' ' | b'\t' | b'\r' | b'\n'))
        .count();
    &s[n..]
}

/// Split a JSON string literal (raw contents, escapes untouched) off `s`.
fn json_string(s: &[u8]) -> Option<(&[u8], &[u8])> {
    let body = s.strip_prefix(b"\"")?;
    let mut escaped = false;
    for (i, &b) in body.iter().enumerate() {
        match (escaped, b) {
            (true, _) => escaped = false,
            (false, b'\\') => escaped = true,
            (false, b'"') => return Some((&body[..i], &body[i + 1..])),
            _ => {}
        }
    }
    None
}

/// Skip one JSON value; returns what follows it, or `None` if it runs past
/// the end of `s`.
fn skip_value(s: &[u8]) -> Option<&[u8]> {
    match s.first()? {
        b'"' => json_string(s).map(|(_, rest)| rest),
        b'{' | b'[' => {
            let mut scan = crate::decoder::JsonScan::default();
            scan.feed(s).map(|n| &s[n..])
        }
        _ => {
            let n = s
                .iter()
                .take_while(|b| !matches!(b, b',' | b'}' | b']' | b' ' | b'\t' | b'\r' | b'\n'))
                .count();
            (n < s.len()).then(|| &s[n..])
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn reply(body: &str) -> ErrorReply {
        match classify(body.as_bytes()) {
            Inbound::Reply(reply) => reply,
            other => panic!("expected a reply for {body:?}, got {other:?}"),
        }
    }

    #[test]
    fn requests_and_notifications_pass_through() {
        for body in [
            r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":"a","method":"made/up","params":{}}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            "\u{feff}{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{}}",
        ] {
            assert!(
                matches!(classify(body.as_bytes()), Inbound::Message(_)),
                "{body}"
            );
        }
    }

    #[test]
    fn parse_errors() {
        for body in [
            &b"{\"jsonrpc\":\"2.0\",\"id\":1,"[..],
            b"not json",
            b"\x00\xff\xfe\x01garbage",
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xff\"}",
            b"",
            b"{} {}",
        ] {
            let reply = match classify(body) {
                Inbound::Reply(reply) => reply,
                other => panic!("{body:?}: {other:?}"),
            };
            assert_eq!(reply.code(), -32700, "{body:?}");
            assert_eq!(reply.id(), None);
            assert!(reply.message().starts_with("Parse error"));
        }
    }

    #[test]
    fn invalid_requests() {
        assert_eq!(reply("42").code(), -32600);
        assert_eq!(reply("\"x\"").id(), None);
        let foo = reply(r#"{"foo":1}"#);
        assert_eq!((foo.code(), foo.id()), (-32600, None));
        let with_id = reply(r#"{"jsonrpc":"2.0","id":9}"#);
        assert_eq!((with_id.code(), with_id.id()), (-32600, Some(&json!(9))));
        let null_id = reply(r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#);
        assert_eq!((null_id.code(), null_id.id()), (-32600, None));
        let batch = reply(r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#);
        assert_eq!(batch.code(), -32600);
        assert!(batch.message().contains("batches are not supported"));
        assert_eq!(reply("[]").code(), -32600);
    }

    #[test]
    fn error_reply_wire_format() {
        let reply = ErrorReply::new(ErrorCode::PARSE_ERROR, "Parse error".to_owned(), None);
        assert_eq!(
            serde_json::to_string(&reply).unwrap(),
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}"#
        );
    }

    #[test]
    fn recovers_top_level_ids_only() {
        assert_eq!(
            recover_id(br#"{"jsonrpc":"2.0","id":17,"method":"tools/call","params":{"#),
            Some(json!(17))
        );
        assert_eq!(
            recover_id(br#" { "params" : {"id": 1, "s": "}\""}, "x": [1, {"id":2}], "n": -1.5e3, "id" : "abc""#),
            Some(json!("abc"))
        );
        assert_eq!(recover_id(br#"{"method":"x","params":{"id":3,"#), None);
        assert_eq!(recover_id(br#"{"id":null}"#), None);
        assert_eq!(recover_id(br#"{"id":12"#), None);
        assert_eq!(recover_id(b"garbage"), None);
        assert_eq!(recover_id(b""), None);
    }
}
