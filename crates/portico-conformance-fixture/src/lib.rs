//! A test fixture: an MCP server exposing exactly the surface that the official MCP conformance
//! suite (`@modelcontextprotocol/conformance` 0.2.0-alpha.12, `server` mode, both requirement sets,
//! 2025-11-25 and 2026-07-28) expects of the server under test.
//!
//! The suite's server scenarios call fixed names — tools such as `test_simple_text`,
//! `test_sampling`, `test_reconnection` and `test_input_required_result_elicitation`, resources under
//! `test://`, the template `test://template/{id}/data`, prompts such as `test_prompt_with_arguments` —
//! and check the shape of what comes back, plus the traffic around it. This crate answers all of them,
//! over Streamable HTTP (`/mcp` on 127.0.0.1) or over stdio, in the era each request speaks:
//!
//! - a handshake-era session (`initialize`, 2025-11-25 and older): logging and progress
//!   notifications, `sampling/createMessage` and `elicitation/create` requests sent back to the
//!   client mid-call, `resources/subscribe`, completions, SSE priming/resumption;
//! - a 2026-07-28 request (stateless, its own `_meta`): `resultType` on every result, caching hints,
//!   [`input_required`] rounds instead of mid-call requests (with an HMAC-sealed `requestState`),
//!   the `server-stateless` diagnostic tools, and change notifications on [`listen`] streams;
//! - both: DNS-rebinding protection (Host/Origin checks), `Mcp-Method`/`Mcp-Name`/`Mcp-Param-*`
//!   header validation (rmcp's, fed by the tool schemas), JSON Schema 2020-12 input schemas.
//!
//! Run directly against the suite it shows the suite and the fixture agree; placed behind Portico (as
//! a stdio or HTTP upstream) it lets the same suite measure what Portico relays. Portico negotiates
//! 2026-07-28 with it, so a 2025-11-25 client's sampling and elicitation reach the fixture as
//! `input_required` rounds that Portico relays.
//!
//! The tasks extension (SEP-2663) is there too, for requests that declare it: [`tasks`] keeps the
//! tasks behind `greet`, `slow_compute`, `failing_job`, `confirm_delete` and the others the `tasks-*`
//! scenarios call; rmcp 3.11 carries its wire (`CreateTaskResult`, `tasks/get|update|cancel`).
//!
//! It is **not** part of Portico's product: nothing in Portico depends on it, it is not published, and
//! its behaviour is dictated by the suite, not by what a useful server would do.
//!
//! Built on rmcp 3.11. The one place that needs more than rmcp's public handler API is
//! [`reconnect`]: `test_reconnection` must end its own SSE stream mid-call.

pub mod catalog;
pub mod http;
pub mod input_required;
pub mod listen;
pub mod reconnect;
pub mod server;
pub mod tasks;

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
