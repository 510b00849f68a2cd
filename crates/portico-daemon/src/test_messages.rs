//! MCP request bodies for the daemon's tests. Their method names come from rmcp's model, so the
//! daemon's source spells none: what the daemon must know of MCP it asks the MCP door
//! (`portico_mcp_server::requests`, `portico_mcp_server::pricing`), and the tidy test
//! `no_mcp_wire_names_outside_the_edges` keeps it so.

use rmcp::model::{
    CallToolRequestMethod, ConstString, InitializeResultMethod, ListToolsRequestMethod,
    PingRequestMethod, SubscriptionsListenRequestMethod,
};

pub(crate) const PING: &str = PingRequestMethod::VALUE;
pub(crate) const INITIALIZE: &str = InitializeResultMethod::VALUE;
pub(crate) const LIST_TOOLS: &str = ListToolsRequestMethod::VALUE;
pub(crate) const CALL_TOOL: &str = CallToolRequestMethod::VALUE;
pub(crate) const LISTEN: &str = SubscriptionsListenRequestMethod::VALUE;

/// `{"jsonrpc":"2.0","id":id,"method":method}`, with `params` (JSON text) when given.
pub(crate) fn request(id: u64, method: &str, params: Option<&str>) -> String {
    match params {
        Some(params) => {
            format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}","params":{params}}}"#)
        }
        None => format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}"}}"#),
    }
}

/// A call of the tool `name` (written into the JSON as it is, so it may hold escapes).
pub(crate) fn call_tool(name: &str) -> String {
    request(1, CALL_TOOL, Some(&format!(r#"{{"name":"{name}"}}"#)))
}
