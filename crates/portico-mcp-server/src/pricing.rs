//! What an MCP request costs the HTTP door's rate limit, said here, where MCP is understood: a
//! `tools/call` of an agent (`portico_agent_*`) runs a model loop and costs more than any other
//! request. The daemon's limiter combines this with the other doors' pricing.

use serde_json::Value;

/// Text every MCP message that runs an agent contains (unless a `\u` escape spells it), so a body
/// without any of them is priced by a byte scan, unparsed.
pub const AGENT_MARKERS: &[&str] = &[AGENT_TOOL_PREFIX];

/// The tools agents are served as (`portico_config::agent_tool_name`).
const AGENT_TOOL_PREFIX: &str = "portico_agent_";

/// Whether one JSON-RPC message runs an agent.
pub fn message_runs_agent(message: &Value) -> bool {
    message.get("method").and_then(Value::as_str) == Some("tools/call")
        && message
            .get("params")
            .and_then(|params| params.get("name"))
            .and_then(Value::as_str)
            .is_some_and(|name| name.starts_with(AGENT_TOOL_PREFIX))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_calls_of_agent_tools_run_an_agent() {
        assert!(message_runs_agent(
            &json!({"method": "tools/call", "params": {"name": "portico_agent_x"}})
        ));
        assert!(!message_runs_agent(
            &json!({"method": "tools/call", "params": {"name": "mcp_a_b"}})
        ));
        assert!(!message_runs_agent(
            &json!({"method": "tools/list", "params": {"name": "portico_agent_x"}})
        ));
        assert!(!message_runs_agent(
            &json!({"method": "tools/call", "params": 3})
        ));
        assert!(!message_runs_agent(&json!("tools/call")));
    }
}
