//! What the HTTP door must know of an MCP request before rmcp reads it, said here, where MCP is
//! understood: which requests open a stream of events instead of making a call (shutdown ends those
//! rather than waiting for them), and which one starts a session (the door counts sessions from it).
//! The door reads a JSON-RPC message's `method` and asks; it spells no MCP method itself. What a
//! request costs the rate limit is [`crate::pricing`]'s.

use rmcp::model::{
    CallToolRequestMethod, ConstString, InitializeResultMethod, SubscriptionsListenRequestMethod,
};

/// Methods whose request opens a stream of events rather than making a call: `subscriptions/listen`,
/// which `portico mcp` keeps open for as long as it is attached. Each is also text every such body
/// contains (unless a `\u` escape spells it), so a body without any of them opens no stream and need
/// not be parsed.
pub const STREAM_METHODS: &[&str] = &[SubscriptionsListenRequestMethod::VALUE];

/// Whether a request of `method` opens a stream of events rather than making a call.
pub fn opens_stream(method: &str) -> bool {
    STREAM_METHODS.contains(&method)
}

/// Methods whose request runs a tool: what a stopping door refuses rather than takes. Each is also
/// text every such body contains (unless a `\u` escape spells it), as for [`STREAM_METHODS`].
pub const CALL_METHODS: &[&str] = &[CallToolRequestMethod::VALUE];

/// Whether a request of `method` runs a tool.
pub fn runs_tool(method: &str) -> bool {
    CALL_METHODS.contains(&method)
}

/// Whether a request of `method` starts a session: `initialize`, the only request that creates one.
pub fn starts_session(method: &str) -> bool {
    method == InitializeResultMethod::VALUE
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_opens_a_stream_and_calls_do_not() {
        assert!(opens_stream("subscriptions/listen"));
        assert!(!opens_stream("tools/call"));
        assert!(!opens_stream("subscriptions/listen/"));
        assert!(!opens_stream(""));
    }

    #[test]
    fn only_initialize_starts_a_session() {
        assert!(starts_session("initialize"));
        assert!(!starts_session("tools/list"));
        assert!(!starts_session("notifications/initialized"));
        assert!(!starts_session("Initialize"));
    }
}
