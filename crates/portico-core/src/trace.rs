//! The spans Portico makes for OpenTelemetry traces, named once so the crates that make them and the
//! binary that exports them agree.
//!
//! Every span meant for export is made with `target: SPAN_TARGET` at TRACE level: the binary's
//! exporting layer takes spans of this target only (no other crate's spans, no log events), and
//! the log's own filter, at its usual levels, never shows them. A call's chain is
//! [`DOOR`] → [`PIPELINE`] → its stages ([`RESOLVE`], [`POLICY`], [`APPROVAL`], [`EXECUTE`]) →
//! [`UPSTREAM`] for a tool an MCP server serves.
//!
//! Fields are names and kinds only: tool, server, principal class, MCP method, outcome, error kind.
//! Never an argument value, a result, a header or a token: a trace leaves the machine.

/// The target of every exported span.
pub const SPAN_TARGET: &str = "portico::trace";

/// One request at a door carrying a call: an HTTP POST (MCP, A2A, API) or a `tools/call` on the
/// stdio door. Its parent is the caller's `traceparent`, when it sent one.
pub const DOOR: &str = "door";
/// `Pipeline::call`: one tool call through every stage.
pub const PIPELINE: &str = "pipeline";
/// Finding the tool in the sources.
pub const RESOLVE: &str = "resolve";
/// The caller's limits, the input schema and every policy.
pub const POLICY: &str = "policy";
/// Waiting for an approval, for a call a policy holds.
pub const APPROVAL: &str = "approval";
/// The tool's source running the call, under the timeout.
pub const EXECUTE: &str = "execute";
/// One `tools/call` to an upstream MCP server; its context goes to the server as `traceparent`.
pub const UPSTREAM: &str = "upstream";

/// The door's span for one HTTP request, kept in the request's extensions: the MCP session runs
/// the request's handler on a task of its own, where the door's span is not the current one.
#[derive(Debug, Clone)]
pub struct DoorSpan(pub tracing::Span);
