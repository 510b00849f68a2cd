//! `portico-pipeline` is the one call pipeline: every tool call Portico runs, from an MCP door, the HTTP
//! API, an A2A run, the CLI or an agent's loop, goes through [`Pipeline::call`], which resolves the
//! name, checks the caller may use the tool, validates the arguments against the tool's
//! `inputSchema`, runs the policy hooks (the config's `[[policies]]` as [`ToolRules`], the taint
//! rule, and an embedder's [`ToolPolicies`]; a call they hold for approval runs once with a grant for
//! exactly that call, [`Approvals`]; with `[policy] pin_tools`, an upstream tool whose definition
//! changed since it was pinned is neither listed nor run until its new definition is approved,
//! [`ToolPins`]), applies the timeout, executes, validates structured
//! content against the `outputSchema`, cuts results for agents, and writes an audit record (arguments as keyed digests, [`AuditKey`]).
//!
//! Tools come from [`ToolSource`]s: [`LocalTools`] (built-ins and tools an embedder registers), the
//! agents (`portico-agents`), external A2A agents (`portico-a2a-client`), and the hub's `HubTools`
//! (the upstream MCP catalog, in `portico-hub`). The trait and the call's context are `portico-core`'s,
//! so sources need not depend on this crate. It also holds [`credential_identity`], the one hash of a
//! credential that rate limits and A2A task ownership share.
//! And [`arguments_text`], the arguments as an approver is shown them (exact numbers, invisible
//! characters escaped by [`escape_invisible`]).
//!
//! What it is not: a protocol edge (results are `portico_core::ToolResult`s, failures typed
//! [`PipelineError`]s; no crate here speaks a wire format), the agent loop (`portico-agents`), or the built-in tools
//! themselves (`portico-builtins`).

mod approvals;
mod arguments_text;
mod audit;
mod credential;
mod local;
mod pins;
mod pipeline;
mod policy;
mod progress;
mod rules;
mod schema;
mod tool_policy;

// The source contract lives in core, where the hub implements it too; the old paths stay.
use portico_core::{context, source};

pub use approvals::{
    ApprovalChannel, ApprovalError, ApprovalObserver, ApprovalSettings, ApprovalVia, Approvals,
    DEFAULT_APPROVAL_TTL, KEEP_DECIDED, MAX_APPROVAL_TTL, MAX_APPROVAL_WAIT, approval_link,
    approval_path, outcome as approval_outcome, set_approval_base_url,
};
pub use arguments_text::{arguments_text, escape_invisible};
pub use audit::{AuditKey, AuditSink, arguments_digest};
pub use credential::credential_identity;
pub use local::{LocalTool, LocalTools, ToolFailure, standard_schema_for};
pub use pins::{
    FieldChange, PIN_POLICY, PINNED_FIELDS, ToolPins, definition_diff, definition_digest,
    outcome as pin_outcome, pinned_definition,
};
pub use pipeline::{
    CallOutcome, DEFAULT_MAX_RESULT_CHARS, DEFAULT_TOOL_TIMEOUT, ListedTool, Outcome, Pipeline,
    PipelineError, PipelineSettings, PolicyRefusal, RefusalCode, UNTRUSTED_META, WeakPipeline,
    for_model, model_text,
};
pub use policy::{
    MarkedAction, Policy, PolicyDecision, PolicyMark, PolicyRequest, TAINT_POLICY_ID, TaintMode,
    TaintPolicy,
};
pub use portico_core::context::{
    AgentScope, ArtifactPart, PatternError, Principal, ProgressEvent, ProgressSink, ToolContext,
    ToolPatterns, TurnState, Untrusted,
};
pub use portico_core::source::{ToolEntry, ToolOrigin, ToolSource, Trust};
pub use portico_store::{
    ApprovalAnswer, ApprovalKind, ApprovalLimits, ApprovalRecord, ApprovalStatus, ToolPin,
};
pub use progress::{ProgressMessages, progress_messages};
pub use rules::{
    ConditionSpec, DefaultAction, RuleAction, RuleDecision, RuleError, RuleSpec, ToolRules,
};
pub use tool_policy::{
    BeforeCall, DEFAULT_MAX_FAILURE_BYTES, PolicyCall, ToolPolicies, ToolPolicy, ToolPolicyError,
};
