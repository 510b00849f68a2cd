//! `portico-pipeline` is the one call pipeline: every tool call Portico runs, from an MCP door, the HTTP
//! API, an A2A run, the CLI or an agent's loop, goes through [`Pipeline::call`], which resolves the
//! name, checks the caller may use the tool, validates the arguments against the tool's
//! `inputSchema`, runs the policy hooks (the taint rule today; approvals and rate limits next), applies
//! the timeout, executes, validates `structuredContent` against the `outputSchema`, cuts results for
//! agents, and writes an audit record (arguments as keyed digests, [`AuditKey`]).
//!
//! Tools come from [`ToolSource`]s: [`LocalTools`] (built-ins and tools an embedder registers), the
//! agents (`portico-agents`), external A2A agents (`portico-a2a-client`), and [`HubTools`] (the
//! upstream MCP catalog, through `portico-hub`). It also holds [`credential_identity`], the one hash
//! of a credential that rate limits and A2A task ownership share.
//!
//! What it is not: a protocol edge (results are the MCP-shaped JSON the catalog already carries; no
//! crate here speaks a wire format), the agent loop (`portico-agents`), or the built-in tools
//! themselves (`portico-builtins`).

mod audit;
mod context;
mod hub_source;
mod local;
mod pipeline;
mod policy;
mod schema;
mod source;

pub use audit::{AuditKey, AuditSink, arguments_digest};
pub use context::{
    AgentScope, PatternError, Principal, ProgressEvent, ProgressMessages, ProgressSink,
    ToolContext, ToolPatterns, TurnState, Untrusted, credential_identity,
};
pub use hub_source::HubTools;
pub use local::{LocalTool, LocalTools, ToolFailure, error_result};
pub use pipeline::{
    CallOutcome, DEFAULT_MAX_RESULT_CHARS, DEFAULT_TOOL_TIMEOUT, Outcome, Pipeline, PipelineError,
    PipelineSettings, UNTRUSTED_META, WeakPipeline, for_model, model_text,
};
pub use policy::{Policy, PolicyDecision, PolicyRequest, TaintMode, TaintPolicy};
pub use source::{ToolEntry, ToolSource, Trust};
