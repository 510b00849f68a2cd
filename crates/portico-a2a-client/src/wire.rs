//! The two JSON forms of A2A objects. Inside Portico a task, message or event is kept in the 1.0 form
//! (ProtoJSON: camelCase fields, `TASK_STATE_*` and `ROLE_*` enums, `Part` as a oneof of `text`, `raw`,
//! `url`, `data`); 0.3 clients get and send the 0.3 form (`kind`-tagged objects, lower-case states,
//! `parts` with `kind` text/file/data). These functions translate both ways.

use portico_core::TaskState;
use serde_json::{Map, Value, json};

/// A2A protocol versions this server speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    V1,
    V03,
}

impl Version {
    pub fn label(self) -> &'static str {
        match self {
            Version::V1 => "1.0",
            Version::V03 => "0.3",
        }
    }
}

/// The message metadata key that says the sender's turn had read untrusted output (its value: the
/// tool). Portico's A2A server starts the run of such a message tainted; a client can only make its
/// own task stricter by setting it.
pub const UNTRUSTED_METADATA: &str = "portico/untrusted";

/// `TASK_STATE_WORKING` → `working` (`unknown` for anything else).
pub fn state_to_v03(state: &str) -> &'static str {
    TaskState::from_v1_name(state).map_or("unknown", TaskState::v03_name)
}

/// `working` or `TASK_STATE_WORKING` → `TASK_STATE_WORKING`.
pub fn state_from_any(state: &str) -> Option<&'static str> {
    TaskState::from_any_name(state).map(TaskState::v1_name)
}

/// Whether a 1.0 state name is terminal (see [`TaskState::is_terminal`]).
pub fn is_terminal(state: &str) -> bool {
    TaskState::from_v1_name(state).is_some_and(TaskState::is_terminal)
}

/// Waiting for the client (more input, or authorization): the task is not finished, but no work runs.
pub fn is_interrupted(state: &str) -> bool {
    TaskState::from_v1_name(state).is_some_and(TaskState::is_interrupted)
}

pub(crate) fn object(value: &Value) -> Map<String, Value> {
    value.as_object().cloned().unwrap_or_default()
}

fn part_to_v03(part: &Value) -> Value {
    let mut out = Map::new();
    if let Some(text) = part.get("text") {
        out.insert("kind".into(), json!("text"));
        out.insert("text".into(), text.clone());
    } else if let Some(data) = part.get("data") {
        out.insert("kind".into(), json!("data"));
        out.insert("data".into(), data.clone());
    } else {
        let mut file = Map::new();
        if let Some(raw) = part.get("raw") {
            file.insert("bytes".into(), raw.clone());
        }
        if let Some(url) = part.get("url") {
            file.insert("uri".into(), url.clone());
        }
        if let Some(media_type) = part.get("mediaType") {
            file.insert("mimeType".into(), media_type.clone());
        }
        if let Some(name) = part.get("filename") {
            file.insert("name".into(), name.clone());
        }
        out.insert("kind".into(), json!("file"));
        out.insert("file".into(), Value::Object(file));
    }
    if let Some(metadata) = part.get("metadata") {
        out.insert("metadata".into(), metadata.clone());
    }
    Value::Object(out)
}

/// A 0.3 part (`kind` text/file/data) as a 1.0 part; a 1.0 part (no `kind`) passes through.
pub(crate) fn part_from_v03(part: &Value) -> Value {
    let Some(kind) = part
        .get("kind")
        .or_else(|| part.get("type"))
        .and_then(Value::as_str)
    else {
        return part.clone();
    };
    let mut out = Map::new();
    match kind {
        "data" => {
            out.insert(
                "data".into(),
                part.get("data").cloned().unwrap_or(Value::Null),
            );
        }
        "file" => {
            let file = part.get("file").cloned().unwrap_or_default();
            if let Some(bytes) = file.get("bytes") {
                out.insert("raw".into(), bytes.clone());
            }
            if let Some(uri) = file.get("uri") {
                out.insert("url".into(), uri.clone());
            }
            if let Some(mime) = file.get("mimeType") {
                out.insert("mediaType".into(), mime.clone());
            }
            if let Some(name) = file.get("name") {
                out.insert("filename".into(), name.clone());
            }
        }
        _ => {
            out.insert(
                "text".into(),
                part.get("text").cloned().unwrap_or(json!("")),
            );
        }
    }
    if let Some(metadata) = part.get("metadata") {
        out.insert("metadata".into(), metadata.clone());
    }
    Value::Object(out)
}

pub(crate) fn parts(value: &Value, convert: fn(&Value) -> Value) -> Value {
    Value::Array(
        value
            .get("parts")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(convert)
            .collect(),
    )
}

pub fn message_to_v03(message: &Value) -> Value {
    let mut out = object(message);
    out.insert("kind".into(), json!("message"));
    let role = match message.get("role").and_then(Value::as_str) {
        Some("ROLE_AGENT") => "agent",
        _ => "user",
    };
    out.insert("role".into(), json!(role));
    out.insert("parts".into(), parts(message, part_to_v03));
    Value::Object(out)
}

/// Accepts either form (0.3 clients send the 0.3 form; a lenient reader costs nothing).
pub fn message_from_any(message: &Value) -> Value {
    let mut out = object(message);
    out.remove("kind");
    let role = match message.get("role").and_then(Value::as_str) {
        Some("agent" | "ROLE_AGENT") => "ROLE_AGENT",
        _ => "ROLE_USER",
    };
    out.insert("role".into(), json!(role));
    let is_v03 = message
        .get("parts")
        .and_then(Value::as_array)
        .is_some_and(|parts| {
            parts
                .iter()
                .any(|p| p.get("kind").is_some() || p.get("type").is_some())
        });
    if is_v03 {
        out.insert("parts".into(), parts(message, part_from_v03));
    }
    Value::Object(out)
}

fn status_to_v03(status: &Value) -> Value {
    let mut out = object(status);
    let state = status
        .get("state")
        .and_then(Value::as_str)
        .unwrap_or_default();
    out.insert("state".into(), json!(state_to_v03(state)));
    if let Some(message) = status.get("message") {
        out.insert("message".into(), message_to_v03(message));
    }
    Value::Object(out)
}

fn artifact_to_v03(artifact: &Value) -> Value {
    let mut out = object(artifact);
    out.insert("parts".into(), parts(artifact, part_to_v03));
    Value::Object(out)
}

pub fn task_to_v03(task: &Value) -> Value {
    let mut out = object(task);
    out.insert("kind".into(), json!("task"));
    if let Some(status) = task.get("status") {
        out.insert("status".into(), status_to_v03(status));
    }
    for (key, convert) in [
        ("history", message_to_v03 as fn(&Value) -> Value),
        ("artifacts", artifact_to_v03),
    ] {
        if let Some(items) = task.get(key).and_then(Value::as_array) {
            out.insert(
                key.into(),
                Value::Array(items.iter().map(convert).collect()),
            );
        }
    }
    Value::Object(out)
}

/// One streamed event in the 1.0 form: `{"task"|"message"|"statusUpdate"|"artifactUpdate": ...}`.
pub fn stream_event_to_v03(event: &Value) -> Value {
    if let Some(task) = event.get("task") {
        return task_to_v03(task);
    }
    if let Some(message) = event.get("message") {
        return message_to_v03(message);
    }
    if let Some(update) = event.get("statusUpdate") {
        let mut out = object(update);
        out.insert("kind".into(), json!("status-update"));
        let status = update.get("status").cloned().unwrap_or_default();
        let state = status
            .get("state")
            .and_then(Value::as_str)
            .unwrap_or_default();
        out.insert(
            "final".into(),
            json!(is_terminal(state) || is_interrupted(state)),
        );
        out.insert("status".into(), status_to_v03(&status));
        return Value::Object(out);
    }
    if let Some(update) = event.get("artifactUpdate") {
        let mut out = object(update);
        out.insert("kind".into(), json!("artifact-update"));
        if let Some(artifact) = update.get("artifact") {
            out.insert("artifact".into(), artifact_to_v03(artifact));
        }
        return Value::Object(out);
    }
    event.clone()
}

/// The text of a message's parts, as an agent reads it: text parts joined; data as JSON; files named.
pub fn message_text(message: &Value) -> String {
    let mut pieces = Vec::new();
    for part in message
        .get("parts")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let Some(text) = part.get("text").and_then(Value::as_str) {
            pieces.push(text.to_string());
        } else if let Some(data) = part.get("data") {
            pieces.push(data.to_string());
        } else {
            let name = part
                .get("filename")
                .or_else(|| part.get("url"))
                .and_then(Value::as_str)
                .unwrap_or("a file");
            pieces.push(format!("[attached: {name}]"));
        }
    }
    pieces.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_1_0_part_in_a_0_3_message_passes_through_whole() {
        let mixed = json!({"role": "user", "parts": [{"kind": "text", "text": "hi"},
            {"data": {"a": 1}}, {"url": "https://x/y.pdf", "mediaType": "application/pdf"}]});
        assert_eq!(
            message_from_any(&mixed)["parts"],
            json!([{"text": "hi"}, {"data": {"a": 1}},
                   {"url": "https://x/y.pdf", "mediaType": "application/pdf"}])
        );
    }

    #[test]
    fn messages_cross_between_forms() {
        let v03 = json!({"kind": "message", "messageId": "m1", "role": "user", "contextId": "c",
            "parts": [{"kind": "text", "text": "hi"}, {"kind": "data", "data": {"a": 1}},
                      {"kind": "file", "file": {"uri": "https://x/y.pdf", "mimeType": "application/pdf", "name": "y.pdf"}}]});
        let v1 = message_from_any(&v03);
        assert_eq!(
            v1,
            json!({"messageId": "m1", "role": "ROLE_USER", "contextId": "c",
            "parts": [{"text": "hi"}, {"data": {"a": 1}}, {"url": "https://x/y.pdf", "mediaType": "application/pdf", "filename": "y.pdf"}]})
        );
        assert_eq!(message_to_v03(&v1), v03);
        assert_eq!(message_text(&v1), "hi\n{\"a\":1}\n[attached: y.pdf]");
        // A 1.0 message passes through.
        let native = json!({"messageId": "m2", "role": "ROLE_AGENT", "parts": [{"text": "yo"}]});
        assert_eq!(message_from_any(&native), native);
    }

    #[test]
    fn tasks_and_events_take_the_v03_shape() {
        let task = json!({"id": "t", "contextId": "c", "status": {"state": "TASK_STATE_INPUT_REQUIRED",
            "message": {"messageId": "m", "role": "ROLE_AGENT", "parts": [{"text": "which?"}]}},
            "artifacts": [{"artifactId": "a", "parts": [{"text": "x"}]}], "history": []});
        let v03 = task_to_v03(&task);
        assert_eq!(v03["kind"], "task");
        assert_eq!(v03["status"]["state"], "input-required");
        assert_eq!(v03["status"]["message"]["role"], "agent");
        assert_eq!(
            v03["artifacts"][0]["parts"][0],
            json!({"kind": "text", "text": "x"})
        );
        let event = stream_event_to_v03(&json!({"statusUpdate": {"taskId": "t", "contextId": "c",
            "status": {"state": "TASK_STATE_COMPLETED"}}}));
        assert_eq!(
            event,
            json!({"kind": "status-update", "taskId": "t", "contextId": "c", "final": true,
            "status": {"state": "completed"}})
        );
        assert_eq!(state_from_any("canceled"), Some("TASK_STATE_CANCELED"));
        assert_eq!(
            state_from_any("TASK_STATE_WORKING"),
            Some("TASK_STATE_WORKING")
        );
        assert_eq!(state_from_any("bogus"), None);
    }
}
