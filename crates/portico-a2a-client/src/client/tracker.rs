//! Following a task: the events of a send folded into the task, each new thing reported once.

use std::collections::HashMap;

use serde_json::{Map, Value, json};

use crate::wire::{self, is_interrupted, is_terminal};

use super::*;

// Following a task.

/// Folds events into the task and reports what is new.
pub(crate) struct Tracker<'a> {
    pub(crate) on_event: &'a (dyn Fn(A2aEvent) + Send + Sync),
    pub(crate) task: Option<Value>,
    pub(crate) message: Option<Value>,
    /// The last status reported: state and text.
    pub(crate) reported_status: Option<(String, String)>,
    /// The text of each artifact reported so far, by artifact id.
    pub(crate) reported_artifacts: HashMap<String, String>,
    /// The message continues a task (one that was waiting for input).
    pub(crate) continuing: bool,
    /// The task's interrupted state is the one before our message: a server may open the stream of a
    /// continuation with the task as it was (the JS SDK does), still input-required.
    pub(crate) stale: bool,
}

pub(crate) fn text_of(value: &Value) -> String {
    wire::message_text(value)
}

pub(crate) fn normalize_status(status: &Value) -> Value {
    let mut status = status.clone();
    if let Some(state) = status.get("state").and_then(Value::as_str) {
        let state = wire::state_from_any(state).unwrap_or("TASK_STATE_UNSPECIFIED");
        status["state"] = json!(state);
    }
    if let Some(message) = status.get("message").filter(|m| m.is_object()) {
        status["message"] = wire::message_from_any(message);
    }
    status
}

pub(crate) fn artifact_key(artifact: &Value) -> String {
    artifact
        .get("artifactId")
        .or_else(|| artifact.get("name"))
        .and_then(Value::as_str)
        .unwrap_or("artifact")
        .to_string()
}

impl<'a> Tracker<'a> {
    pub(crate) fn new(on_event: &'a (dyn Fn(A2aEvent) + Send + Sync)) -> Self {
        Tracker {
            on_event,
            task: None,
            message: None,
            reported_status: None,
            reported_artifacts: HashMap::new(),
            continuing: false,
            stale: false,
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.task.is_none() && self.message.is_none()
    }

    pub(crate) fn task_id(&self) -> Option<String> {
        self.task
            .as_ref()
            .and_then(|t| t.get("id"))
            .and_then(Value::as_str)
            .filter(|id| !id.is_empty())
            .map(str::to_string)
    }

    pub(crate) fn state(&self) -> Option<&str> {
        self.task.as_ref()?.pointer("/status/state")?.as_str()
    }

    pub(crate) fn settled(&self) -> bool {
        self.message.is_some()
            || (!self.stale
                && self
                    .state()
                    .is_some_and(|s| is_terminal(s) || is_interrupted(s)))
    }

    /// A streamed event. The first event of a continuation that shows the task still interrupted
    /// is the task as it was: not reported, and not the end (the stream goes on, or the task is
    /// polled when it ends).
    pub(crate) fn absorb_streamed(&mut self, event: &Value) {
        let snapshot_state = event
            .pointer("/task/status/state")
            .and_then(Value::as_str)
            .and_then(wire::state_from_any);
        if self.continuing && self.is_empty() && snapshot_state.is_some_and(is_interrupted) {
            if let Some(task) = event.get("task") {
                let mut task = task.clone();
                task["status"] = normalize_status(&task["status"]);
                let text = task
                    .pointer("/status/message")
                    .map(text_of)
                    .unwrap_or_default();
                self.reported_status = snapshot_state.map(|s| (s.to_string(), text));
                self.task = Some(task);
            }
            self.stale = true;
            return;
        }
        self.absorb(event);
    }

    /// The task an update belongs to, made from the update's ids if no task was seen yet.
    pub(crate) fn task_for(&mut self, update: &Value) -> &mut Map<String, Value> {
        let task = self.task.get_or_insert_with(|| {
            json!({
                "id": update.get("taskId").cloned().unwrap_or(json!("")),
                "contextId": update.get("contextId").cloned().unwrap_or(json!("")),
                "status": {"state": "TASK_STATE_SUBMITTED"},
            })
        });
        if !task.is_object() {
            *task = json!({});
        }
        task.as_object_mut().expect("an object")
    }

    pub(crate) fn absorb(&mut self, event: &Value) {
        self.stale = false;
        if let Some(task) = event.get("task").filter(|t| t.is_object()) {
            let mut task = task.clone();
            if let Some(status) = task.get("status") {
                task["status"] = normalize_status(status);
            }
            // A task event without artifacts does not take back the ones streamed so far.
            let has_artifacts = task
                .get("artifacts")
                .and_then(Value::as_array)
                .is_some_and(|a| !a.is_empty());
            if !has_artifacts && let Some(old) = self.task.as_ref().and_then(|t| t.get("artifacts"))
            {
                task["artifacts"] = old.clone();
            }
            self.task = Some(task);
            self.report_status();
            self.report_artifacts();
        } else if let Some(update) = event.get("statusUpdate") {
            let status = normalize_status(update.get("status").unwrap_or(&Value::Null));
            self.task_for(update).insert("status".into(), status);
            self.report_status();
        } else if let Some(update) = event.get("artifactUpdate") {
            self.absorb_artifact(update);
        } else if let Some(message) = event.get("message").filter(|m| m.is_object()) {
            let message = wire::message_from_any(message);
            (self.on_event)(A2aEvent::Message {
                text: text_of(&message),
            });
            self.message = Some(message);
        }
    }

    pub(crate) fn absorb_artifact(&mut self, update: &Value) {
        let Some(artifact) = update.get("artifact").filter(|a| a.is_object()) else {
            return;
        };
        let key = artifact_key(artifact);
        let append = update.get("append").and_then(Value::as_bool) == Some(true);
        let last_chunk = update.get("lastChunk").and_then(Value::as_bool) != Some(false);
        let chunk = text_of(artifact);
        let task = self.task_for(update);
        let artifacts = task
            .entry("artifacts")
            .or_insert_with(|| json!([]))
            .as_array_mut();
        let Some(artifacts) = artifacts else {
            return;
        };
        let existing = artifacts.iter_mut().find(|a| artifact_key(a) == key);
        let full = match (existing, append) {
            (Some(existing), true) => {
                let parts = existing
                    .as_object_mut()
                    .map(|e| e.entry("parts").or_insert_with(|| json!([])));
                if let Some(Value::Array(parts)) = parts {
                    for part in artifact
                        .get("parts")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                    {
                        // Text chunks join the text part before them, so the text reads whole.
                        if let (Some(more), Some(Value::String(last))) = (
                            part.get("text").and_then(Value::as_str),
                            parts.last_mut().and_then(|p| p.get_mut("text")),
                        ) {
                            last.push_str(more);
                            continue;
                        }
                        parts.push(part.clone());
                    }
                }
                text_of(existing)
            }
            (Some(existing), false) => {
                *existing = artifact.clone();
                chunk.clone()
            }
            (None, _) => {
                artifacts.push(artifact.clone());
                chunk.clone()
            }
        };
        let name = artifact
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or(&key)
            .to_string();
        let (text, append) = if append {
            (chunk, true)
        } else {
            self.unreported(&key, &full)
        };
        self.reported_artifacts.insert(key.clone(), full);
        if !text.is_empty() {
            (self.on_event)(A2aEvent::Artifact {
                task_id: self.task_id(),
                artifact_id: key,
                name,
                text,
                append,
                last_chunk,
            });
        }
    }

    /// What of an artifact's whole text `full` has not been reported, and whether it continues what
    /// was (a server may close a streamed artifact by sending it whole again).
    pub(crate) fn unreported(&self, key: &str, full: &str) -> (String, bool) {
        match self.reported_artifacts.get(key) {
            Some(seen) if !seen.is_empty() && full.starts_with(seen.as_str()) => {
                (full[seen.len()..].to_string(), true)
            }
            _ => (full.to_string(), false),
        }
    }

    pub(crate) fn report_status(&mut self) {
        let Some(status) = self.task.as_ref().and_then(|t| t.get("status")) else {
            return;
        };
        let state = status
            .get("state")
            .and_then(Value::as_str)
            .unwrap_or("TASK_STATE_UNSPECIFIED")
            .to_string();
        let text = status.get("message").map(text_of).unwrap_or_default();
        let current = (state.clone(), text.clone());
        if self.reported_status.as_ref() == Some(&current) {
            return;
        }
        self.reported_status = Some(current);
        let task_id = self.task_id();
        (self.on_event)(A2aEvent::Status {
            task_id,
            state,
            text: (!text.is_empty()).then_some(text),
        });
    }

    /// Reports artifact text not reported yet (artifacts seen whole, in a task).
    pub(crate) fn report_artifacts(&mut self) {
        let artifacts: Vec<Value> = self
            .task
            .as_ref()
            .and_then(|t| t.get("artifacts"))
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let task_id = self.task_id();
        for artifact in artifacts {
            let key = artifact_key(&artifact);
            let full = text_of(&artifact);
            if self.reported_artifacts.get(&key) == Some(&full) {
                continue;
            }
            let (text, append) = self.unreported(&key, &full);
            self.reported_artifacts.insert(key.clone(), full);
            if text.is_empty() {
                continue;
            }
            (self.on_event)(A2aEvent::Artifact {
                task_id: task_id.clone(),
                artifact_id: key.clone(),
                name: artifact
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or(&key)
                    .to_string(),
                text,
                append,
                last_chunk: true,
            });
        }
    }

    pub(crate) fn outcome(self) -> SendOutcome {
        let settled_task = self
            .state()
            .is_some_and(|s| is_terminal(s) || is_interrupted(s));
        if let Some(message) = &self.message
            && !settled_task
        {
            let context_id = message
                .get("contextId")
                .and_then(Value::as_str)
                .map(str::to_string);
            return SendOutcome {
                task: json!({
                    "contextId": context_id.clone().unwrap_or_default(),
                    "status": {"state": "TASK_STATE_COMPLETED", "message": message},
                }),
                state: "TASK_STATE_COMPLETED".into(),
                text: text_of(message),
                task_id: None,
                context_id,
            };
        }
        let task = self.task.clone().unwrap_or_else(|| json!({}));
        let state = self.state().unwrap_or("TASK_STATE_UNSPECIFIED").to_string();
        SendOutcome {
            text: answer_text(&task, &state),
            task_id: self.task_id(),
            context_id: task
                .get("contextId")
                .and_then(Value::as_str)
                .filter(|c| !c.is_empty())
                .map(str::to_string),
            state,
            task,
        }
    }
}

/// The text answer of a task: the artifacts' text, else the status message's. A task that waits or
/// failed says why in its status message, which comes first then.
pub(crate) fn answer_text(task: &Value, state: &str) -> String {
    let artifacts: Vec<String> = task
        .get("artifacts")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(text_of)
        .filter(|t| !t.is_empty())
        .collect();
    let status = task
        .pointer("/status/message")
        .map(text_of)
        .unwrap_or_default();
    let explains =
        is_interrupted(state) || matches!(state, "TASK_STATE_FAILED" | "TASK_STATE_REJECTED");
    if explains && !status.is_empty() {
        return status;
    }
    if !artifacts.is_empty() {
        return artifacts.join("\n");
    }
    status
}
