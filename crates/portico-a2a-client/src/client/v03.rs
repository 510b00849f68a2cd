//! What a 0.3 server answers, in the 1.0 form the client works in: the reverse of the
//! `wire::*_to_v03` functions the server uses (messages reuse `wire::message_from_any`).

use serde_json::{Value, json};

use crate::wire::{self, object};

pub fn artifact_from_v03(artifact: &Value) -> Value {
    let mut out = object(artifact);
    out.remove("kind");
    out.insert("parts".into(), wire::parts(artifact, wire::part_from_v03));
    Value::Object(out)
}

/// `{"state": "working", "message": {...}}` → `{"state": "TASK_STATE_WORKING", ...}`.
pub fn status_from_v03(status: &Value) -> Value {
    let mut out = object(status);
    let state = status
        .get("state")
        .and_then(Value::as_str)
        .unwrap_or_default();
    out.insert(
        "state".into(),
        json!(wire::state_from_any(state).unwrap_or("TASK_STATE_UNSPECIFIED")),
    );
    if let Some(message) = status.get("message").filter(|m| m.is_object()) {
        out.insert("message".into(), wire::message_from_any(message));
    }
    Value::Object(out)
}

pub fn task_from_v03(task: &Value) -> Value {
    let mut out = object(task);
    out.remove("kind");
    if let Some(status) = task.get("status") {
        out.insert("status".into(), status_from_v03(status));
    }
    if let Some(history) = task.get("history").and_then(Value::as_array) {
        out.insert(
            "history".into(),
            Value::Array(history.iter().map(wire::message_from_any).collect()),
        );
    }
    if let Some(artifacts) = task.get("artifacts").and_then(Value::as_array) {
        out.insert(
            "artifacts".into(),
            Value::Array(artifacts.iter().map(artifact_from_v03).collect()),
        );
    }
    Value::Object(out)
}

/// A 0.3 send result or stream event (`kind`-tagged) as a 1.0 `StreamResponse`
/// (`{"task"|"message"|"statusUpdate"|"artifactUpdate": ...}`); `None` for anything else.
pub fn event_from_v03(event: &Value) -> Option<Value> {
    let kind = event.get("kind").and_then(Value::as_str).or_else(|| {
        // Untagged: a task has a status, a message has a role.
        if event.get("status").is_some() && event.get("id").is_some() {
            Some("task")
        } else if event.get("role").is_some() {
            Some("message")
        } else {
            None
        }
    })?;
    Some(match kind {
        "task" => json!({"task": task_from_v03(event)}),
        "message" => json!({"message": wire::message_from_any(event)}),
        "status-update" => {
            let mut update = object(event);
            update.remove("kind");
            update.remove("final");
            if let Some(status) = event.get("status") {
                update.insert("status".into(), status_from_v03(status));
            }
            json!({"statusUpdate": update})
        }
        "artifact-update" => {
            let mut update = object(event);
            update.remove("kind");
            if let Some(artifact) = event.get("artifact") {
                update.insert("artifact".into(), artifact_from_v03(artifact));
            }
            json!({"artifactUpdate": update})
        }
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_with_the_server_side_converters() {
        let task = json!({"id": "t", "contextId": "c", "status": {"state": "TASK_STATE_INPUT_REQUIRED",
            "message": {"messageId": "m", "role": "ROLE_AGENT", "parts": [{"text": "which?"}]}},
            "artifacts": [{"artifactId": "a", "name": "n", "parts": [{"text": "x"}, {"data": {"k": 1}},
                {"url": "https://x/y.pdf", "mediaType": "application/pdf", "filename": "y.pdf"}]}],
            "history": [{"messageId": "u", "role": "ROLE_USER", "parts": [{"text": "hi"}]}]});
        let v03 = wire::task_to_v03(&task);
        assert_eq!(event_from_v03(&v03), Some(json!({"task": task})));

        for event in [
            json!({"statusUpdate": {"taskId": "t", "contextId": "c", "status": {"state": "TASK_STATE_WORKING",
                "message": {"messageId": "m", "role": "ROLE_AGENT", "parts": [{"text": "busy"}]}}}}),
            json!({"artifactUpdate": {"taskId": "t", "contextId": "c", "append": true, "lastChunk": false,
                "artifact": {"artifactId": "a", "parts": [{"text": "chunk"}]}}}),
            json!({"message": {"messageId": "m", "role": "ROLE_AGENT", "parts": [{"text": "hello"}]}}),
        ] {
            let v03 = wire::stream_event_to_v03(&event);
            assert_eq!(event_from_v03(&v03), Some(event), "{v03}");
        }
    }

    #[test]
    fn sdk_shaped_events() {
        // As the Python SDK's 0.3 compatibility layer writes them.
        let update = json!({"kind": "status-update", "taskId": "t", "contextId": "c", "final": true,
            "status": {"state": "completed", "timestamp": "2025-01-01T00:00:00Z"}});
        assert_eq!(
            event_from_v03(&update),
            Some(json!({"statusUpdate": {"taskId": "t", "contextId": "c",
                "status": {"state": "TASK_STATE_COMPLETED", "timestamp": "2025-01-01T00:00:00Z"}}}))
        );
        assert_eq!(
            event_from_v03(&json!({"id": "t", "status": {"state": "unknown"}})),
            Some(json!({"task": {"id": "t", "status": {"state": "TASK_STATE_UNSPECIFIED"}}}))
        );
        assert_eq!(event_from_v03(&json!({"kind": "bogus"})), None);
    }
}
