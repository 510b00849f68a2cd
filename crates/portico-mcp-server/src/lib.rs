//! Portico's MCP edge, server side: serves the hub's aggregated catalog to MCP clients (IDEs, agents).
//!
//! [`PorticoServer`] is an rmcp `ServerHandler` over a [`portico_engine::Engine`]: it lists the tools the
//! call pipeline offers (built-ins, agents as `portico_agent_*`, upstream tools) and the catalog's
//! resources, resource templates and prompts under their exposed names, runs calls through the pipeline,
//! announces catalog changes as list-changed notifications, and turns results over the response budget
//! into clear errors instead of half-written frames. A call a policy refuses is answered with seed
//! 002's failure envelope, and a tool a policy denies or holds is marked in its listing, its
//! `outputSchema` admitting the failure branch ([`host_policy`]). Embedders put their own
//! [`ToolPolicy`]s in front of chosen tools ([`PorticoServer::with_tool_policies`]). Tasks an
//! upstream creates for a client's call (the MCP tasks extension) are relayed, their
//! `tasks/get|update|cancel` routed to that upstream for that client only ([`task_routes`]). A
//! session's resource subscriptions are bounded ([`MAX_SUBSCRIPTIONS_PER_SESSION`]) and given back
//! upstream when it ends. Transports (stdio with dual framing, Streamable
//! HTTP) are chosen by the caller; this crate only speaks the protocol.
//!
//! It does not connect to upstreams (the hub does) and does not own HTTP routing or authentication (the
//! daemon does).

mod backend;
mod handler;
pub mod host_policy;
mod input_rounds;
pub mod pricing;
mod relay;
pub mod requests;
mod subscriptions;
pub mod task_routes;
pub mod tool_search;

pub use backend::{Backend, BackendError, DaemonLink, Listing, asks_for_input};
pub use handler::{DEFAULT_MAX_RESPONSE_BYTES, Exposure, PorticoServer, ServerOptions};
pub use input_rounds::{
    ClientKey, MAX_LIVE_CALLS, MAX_LIVE_CALLS_PER_CLIENT, MAX_REQUESTS_PER_ROUND, PARKED_FOR,
};
/// What a host tool's handler returns.
pub use portico_core::ToolResult;
/// Host policies in front of chosen tools ([`PorticoServer::with_tool_policies`]).
pub use portico_pipeline::{BeforeCall, PolicyCall, ToolPolicies, ToolPolicy, ToolPolicyError};
/// Host tools are the engine's local tools; the old names stay for embedders.
pub use portico_pipeline::{LocalTool as HostTool, LocalTools as HostTools, ToolFailure};
pub use subscriptions::MAX_SUBSCRIPTIONS_PER_SESSION;

/// A tool result as MCP's `CallToolResult` JSON, with `isError` always written (false when the
/// tool said nothing): what the daemon's `POST /api/tools/{name}/call` answers with, so that no
/// crate but the edges spells MCP's keys.
pub fn call_result_json(result: ToolResult) -> serde_json::Map<String, serde_json::Value> {
    let is_error = result.is_error();
    let mut object = portico_mcp::tool_result_into_object(result);
    object
        .entry("isError")
        .or_insert(serde_json::Value::Bool(is_error));
    object
}
