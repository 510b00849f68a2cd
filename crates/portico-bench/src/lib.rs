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

/// The thinnest MCP gateway rmcp can build: a server whose one tool, `echo`, forwards each call
/// through an rmcp client to an upstream that has it, answering with whatever the upstream answered.
/// No catalog, no policy, no audit: the floor under any gateway's cost of being a server and a client
/// at once, for `scripts/bench`'s "rmcp proxy, same upstream" baseline.
#[derive(Clone)]
pub struct ProxyServer {
    upstream: rmcp::service::Peer<rmcp::service::RoleClient>,
}

impl ProxyServer {
    pub fn new(upstream: rmcp::service::Peer<rmcp::service::RoleClient>) -> Self {
        ProxyServer { upstream }
    }

    /// Connects an rmcp client over `transport` with the lifecycle Portico's upstream sessions use
    /// (2026-07-28 preferred, `initialize` as the fallback), so the proxy and Portico speak the same
    /// era to the same upstream.
    pub async fn connect<T, E, A>(
        transport: T,
    ) -> Result<
        rmcp::service::RunningService<rmcp::service::RoleClient, ()>,
        rmcp::service::ClientInitializeError,
    >
    where
        T: rmcp::transport::IntoTransport<rmcp::service::RoleClient, E, A>,
        E: std::error::Error + Send + Sync + 'static,
    {
        use rmcp::model::ProtocolVersion;
        use rmcp::service::{ClientLifecycleMode, ClientServiceExt};
        ().serve_with_lifecycle(
            transport,
            ClientLifecycleMode::Auto {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
                legacy_version: Some(ProtocolVersion::LATEST_WITH_INITIALIZE),
            },
        )
        .await
    }
}

impl ServerHandler for ProxyServer {
    fn get_info(&self) -> ServerConfig {
        EchoServer.get_info()
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(vec![
            EchoServer::echo_tool(),
        ]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        // A fresh request, as any gateway makes: the client's `_meta` is its own, not the upstream's.
        let mut forwarded = CallToolRequestParams::new(request.name);
        forwarded.arguments = request.arguments;
        // Boxed, as Portico boxes its own: rmcp's request future is kilobytes, and unboxed it makes
        // every future holding a call (and each task rmcp spawns per request) as large, and copied.
        Box::pin(self.upstream.call_tool_once(forwarded))
            .await
            .map_err(|e| McpError::internal_error(format!("upstream: {e}"), None))
    }
}
