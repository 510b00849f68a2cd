//! Benchmark tooling for `scripts/bench`; not part of Portico.
//!
//! What it is: the baselines Portico is measured against (a bare rmcp server with one trivial `echo`
//! tool, on stdio and on Streamable HTTP, the fastest MCP server we can build with the same SDK), and
//! the load generators for the doors wrk cannot drive: MCP over a child's stdio, and the legacy
//! HTTP+SSE transport, whose answers arrive on a separate stream. HTTP request/response paths are
//! driven by wrk, the keep-alive client users' numbers are compared with.
//!
//! What it is not: a test suite. Nothing here asserts a time; it measures and prints.

pub mod load;
pub mod stats;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ErrorData as McpError, ServerHandler};

/// An MCP server with one tool, `echo`, that answers its `message` argument as text.
#[derive(Clone, Default)]
pub struct EchoServer;

impl EchoServer {
    fn echo_tool() -> Tool {
        serde_json::from_value(serde_json::json!({
            "name": "echo",
            "description": "Echoes its message",
            "inputSchema": {"type": "object", "properties": {"message": {"type": "string"}}}
        }))
        .expect("a valid tool definition")
    }
}

impl ServerHandler for EchoServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(vec![Self::echo_tool()]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let message = request
            .arguments
            .as_ref()
            .and_then(|a| a.get("message"))
            .and_then(|m| m.as_str())
            .unwrap_or_default()
            .to_string();
        Ok(CallToolResult::success(vec![ContentBlock::text(message)]).into())
    }
}
