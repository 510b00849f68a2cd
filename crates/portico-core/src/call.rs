//! What a tool call comes back with: the tool's answer ([`ToolResult`]) or why there is none
//! ([`CallError`]).
//!
//! These are domain values, not a wire format: the MCP edges (`portico-mcp` for upstream answers,
//! `portico-mcp-server` for the doors) convert them to and from protocol JSON; everyone between reads
//! fields. Content blocks stay opaque JSON, so whatever block types a tool returns pass on unchanged.

use serde_json::Value;

use crate::JsonObject;

/// A tool's answer, as the tool gave it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolResult {
    /// Content blocks (text, images, resources, links, types added later), kept verbatim.
    pub content: Vec<Value>,
    /// The result as data, checked against the tool's `outputSchema` when it has one. Any JSON value,
    /// `null` included; `None` when the tool sent none.
    pub structured_content: Option<Value>,
    /// Whether the tool reported a failure, as it said it: `None` when it did not say (a success),
    /// kept apart from an explicit `Some(false)` so results pass on exactly as they came.
    pub is_error: Option<bool>,
    /// Metadata the tool attached to the result.
    pub meta: Option<JsonObject>,
    /// The call became a task on its server (the MCP tasks extension): the other fields are empty
    /// and the task's first state is here; boxed, as it is rare.
    pub task: Option<Box<CreatedTask>>,
}

/// A task an upstream created for a call, as a door relays it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CreatedTask {
    /// The upstream that runs the task, which answers for it later.
    pub server: String,
    /// The task's first state, opaque (its id, status, timestamps, ttl), as the server sent it.
    pub state: JsonObject,
}

/// A question about a task, for the upstream that runs it.
#[derive(Debug, Clone, PartialEq)]
pub enum TaskOperation {
    /// The task's current state, with its result, error or questions inlined.
    Get { task_id: String },
    /// Answers to some of the task's questions, keyed as the task asked them.
    Update {
        task_id: String,
        answers: JsonObject,
    },
    /// Asks the server to stop the task.
    Cancel { task_id: String },
}

impl TaskOperation {
    pub fn task_id(&self) -> &str {
        match self {
            TaskOperation::Get { task_id }
            | TaskOperation::Update { task_id, .. }
            | TaskOperation::Cancel { task_id } => task_id,
        }
    }
}

impl ToolResult {
    /// A success carrying one text block.
    pub fn text(text: impl Into<String>) -> Self {
        ToolResult {
            content: vec![text_block(text)],
            ..ToolResult::default()
        }
    }

    /// A failure the caller's model should read: one text block, marked as an error.
    pub fn error(message: impl Into<String>) -> Self {
        ToolResult {
            content: vec![text_block(message)],
            is_error: Some(true),
            ..ToolResult::default()
        }
    }

    /// Whether the tool reported a failure.
    pub fn is_error(&self) -> bool {
        self.is_error == Some(true)
    }

    /// The first text block's text, if there is one.
    pub fn first_text(&self) -> Option<&str> {
        self.content
            .iter()
            .find_map(|block| block.get("text")?.as_str())
    }
}

/// A text content block.
pub fn text_block(text: impl Into<String>) -> Value {
    let mut block = JsonObject::new();
    block.insert("type".into(), Value::String("text".into()));
    block.insert("text".into(), Value::String(text.into()));
    Value::Object(block)
}

/// Why a tool source could not give a tool's answer. Each says what failed and what to do in its
/// message; the kind lets callers (the audit log, metrics, retries) tell the cases apart without
/// reading it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    /// No tool by that name any more: the source's tools changed between lookup and call.
    #[error("{0}")]
    NotFound(String),
    /// The call ran out of time (an upstream's or an agent's `timeout_secs`).
    #[error("{0}")]
    Timeout(String),
    /// A limit was reached: a server's `max_concurrent_calls`, an agent's `max_iterations` or the
    /// depth of agents calling agents.
    #[error("{0}")]
    Budget(String),
    /// What runs the tool is not there: a server not connected, restarting, or whose connection
    /// closed during the call.
    #[error("{0}")]
    UpstreamGone(String),
    /// What runs the tool answered with an error: an upstream server, a model, a remote agent.
    #[error("{0}")]
    UpstreamFailed(String),
    /// The call was stopped before it finished.
    #[error("{0}")]
    Cancelled(String),
    /// The tool could not run for a reason of Portico's own (its store failed, it is shutting down,
    /// the request named something that does not exist).
    #[error("{0}")]
    Failed(String),
    /// The one upstream of a gateway that passes its upstream through (`[expose] prefix = false`
    /// and a single server) answered with a protocol error, which the doors pass on as it is:
    /// code, message and data.
    #[error("{}", .0.message)]
    Protocol(ProtocolError),
}

/// An upstream's own protocol error (a JSON-RPC error), kept whole so a door can answer with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtocolError {
    pub code: i32,
    pub message: String,
    pub data: Option<Value>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_result_is_one_text_block_marked_as_an_error() {
        let result = ToolResult::error("it broke");
        assert!(result.is_error());
        assert_eq!(result.first_text(), Some("it broke"));
        assert_eq!(result.content[0]["type"], "text");
        assert!(!ToolResult::text("fine").is_error());
        let said_no = ToolResult {
            is_error: Some(false),
            ..ToolResult::default()
        };
        assert!(!said_no.is_error());
    }
}
