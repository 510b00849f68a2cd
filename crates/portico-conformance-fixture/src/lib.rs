//! A test fixture: an MCP server exposing exactly the surface that the official MCP conformance
//! suite (`@modelcontextprotocol/conformance` 0.1.16, `server` mode) expects of the server under test.
//!
//! The suite's server scenarios call fixed names — tools such as `test_simple_text`,
//! `test_sampling` and `test_reconnection`, resources under `test://`, the template
//! `test://template/{id}/data`, prompts such as `test_prompt_with_arguments` — and check the shape of
//! what comes back, plus the traffic around it: logging and progress notifications,
//! `sampling/createMessage` and `elicitation/create` requests sent back to the client, resource
//! subscriptions, completions, SSE priming/resumption and DNS-rebinding protection. This crate answers
//! all of them, over Streamable HTTP (`/mcp` on 127.0.0.1) or over stdio. Run directly against the
//! suite it shows the suite and the fixture agree; placed behind Portico (as a stdio or HTTP upstream)
//! it lets the same suite measure what Portico relays.
//!
//! It is **not** part of Portico's product: nothing in Portico depends on it, it is not published, and
//! its behaviour is dictated by the suite, not by what a useful server would do.
//!
//! Built on rmcp 3.11. The one place that needs more than rmcp's public handler API is
//! [`reconnect`]: `test_reconnection` must end its own SSE stream mid-call.

pub mod catalog;
pub mod http;
pub mod reconnect;
pub mod server;

pub use server::ConformanceServer;

use rmcp::ServiceExt;

/// Serves one MCP session over stdin/stdout (newline-delimited JSON-RPC) until stdin closes.
pub async fn serve_stdio() -> anyhow::Result<()> {
    let service = ConformanceServer::new()
        .serve(rmcp::transport::stdio())
        .await?;
    service.waiting().await?;
    Ok(())
}
