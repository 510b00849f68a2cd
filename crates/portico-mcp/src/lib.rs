//! Portico's MCP edge, client side: connections to upstream MCP servers.
//!
//! One [`Upstream`] is one live session with one configured server, over stdio (a child process),
//! Streamable HTTP, or the legacy HTTP+SSE transport. It negotiates the newest protocol era the server
//! speaks (`server/discover` for 2026-07-28, falling back to `initialize`), lists the server's catalog, and
//! forwards calls. Tool results become `portico_core::ToolResult`s (content blocks untouched); other
//! results are handed back as the server's JSON.
//!
//! The MCP wire format ends here: what leaves this crate are `portico_core` types and opaque JSON objects.
//! An HTTP server that requires OAuth is authorized through [`oauth`]: its tokens are stored in the
//! data dir, refreshed, and obtained by a browser login when this process may start one.
//!
//! A call's trace context goes to the server in the request's `_meta` and, over HTTP, as the
//! `traceparent` header ([`trace_context`]).
//!
//! A client that answers an upstream's requests itself (`portico call`) reads them as typed values
//! here too: [`elicitation_form`] for forms and URLs, [`sampling_request`] for completions,
//! [`call_notices`] for progress and log messages.
//!
//! This crate does not supervise or restart anything (that is the hub's job) and does not serve MCP.

pub mod call_notices;
mod client_handler;
mod confirm;
mod elicitation;
pub mod elicitation_form;
mod era_probe;
pub mod legacy_sse;
mod methods;
pub mod oauth;
mod ordering;
mod resource_updates;
mod results;
mod sampling;
mod server_log;
mod stderr_tail;
mod stdio;
pub mod trace_context;
mod upstream;

pub use client_handler::UpstreamEvent;
pub use confirm::{confirm_params, confirm_through, confirmation};
pub use methods::{notification_method, request_method};
pub use results::{tool_result_from_object, tool_result_into_object};
pub use sampling::{
    sample_through, sampling_answer, sampling_params, sampling_request, sampling_result,
};
pub use server_log::{LogLine, SERVER_LOG_BYTES, SERVER_LOG_LINES, ServerLog};
pub use stderr_tail::{CA_BUNDLE_VARS, STDERR_TAIL_BYTES, STDERR_TAIL_LINES};
pub use stdio::{StopGrace, kill_child_group_now, reap_dropped_children};
pub use upstream::{HandshakeInfo, Upstream, UpstreamError, UpstreamExit};
