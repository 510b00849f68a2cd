//! What an A2A request costs the HTTP door's rate limit, said here, where A2A is understood: a send
//! runs an agent and costs more; reading cards and tasks does not. The daemon's limiter combines this
//! with the other doors' pricing.

use serde_json::Value;

/// JSON-RPC methods whose requests run an agent: the 1.0 sends, their 0.3 names, and the early
/// draft's `tasks/send`. Each is also text every such body contains (unless a `\u` escape spells
/// it), so a body without any of them is priced by a byte scan, unparsed.
pub const AGENT_METHODS: &[&str] = &[
    "SendMessage",
    "SendStreamingMessage",
    "message/send",
    "message/stream",
    "tasks/send",
];

/// JSON-RPC methods whose request opens a task's event stream instead of making a call (1.0's and
/// 0.3's task subscriptions): the door's shutdown ends those rather than waiting for them. Each is
/// text every such body contains, as for [`AGENT_METHODS`].
pub const STREAM_METHODS: &[&str] = &["SubscribeToTask", "tasks/resubscribe"];

/// Whether the path alone says the request runs an agent: the HTTP+JSON sends (1.0, and 0.3 under
/// `/v1`) and the draft's `POST {listen_path}/tasks/send`, whose bodies are A2A messages, not
/// JSON-RPC.
pub fn path_runs_agent(path: &str) -> bool {
    let path = path.trim_end_matches('/');
    path.ends_with("/message:send")
        || path.ends_with("/message:stream")
        || path.ends_with("/tasks/send")
}

/// Whether one JSON-RPC message runs an agent.
pub fn message_runs_agent(message: &Value) -> bool {
    message
        .get("method")
        .and_then(Value::as_str)
        .is_some_and(|method| AGENT_METHODS.contains(&method))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn sends_run_an_agent_and_reads_do_not() {
        assert!(path_runs_agent("/a2a/x/message:send"));
        assert!(path_runs_agent("/a2a/x/v1/message:stream/"));
        assert!(path_runs_agent("/a2a/tasks/send"));
        assert!(!path_runs_agent("/a2a/x/tasks/t1"));
        assert!(message_runs_agent(&json!({"method": "SendMessage"})));
        assert!(message_runs_agent(&json!({"method": "message/stream"})));
        assert!(!message_runs_agent(&json!({"method": "GetTask"})));
        assert!(!message_runs_agent(&json!({"method": 1})));
    }
}
