//! Policy hooks: checks that run after a call's arguments are known to be valid and before it executes.
//! The config's `[[policies]]` ([`crate::ToolRules`]), the taint rule and an embedder's tool
//! policies ([`crate::ToolPolicies`]) are policies; a call one holds for approval goes to the
//! pipeline's approvals (`crate::approvals`).

use portico_core::JsonObject;
use portico_core::relay::BoxFuture;

use crate::context::{Principal, ToolPatterns, TurnState};
use crate::source::ToolEntry;

/// What a policy sees of a call.
pub struct PolicyRequest<'a> {
    pub entry: &'a ToolEntry,
    pub arguments: &'a JsonObject,
    pub principal: &'a Principal,
    pub turn: Option<&'a TurnState>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum PolicyDecision {
    Allow,
    Deny(String),
    /// The call may run only once someone approves it: with the pipeline's approvals, a grant for
    /// exactly this call lets it run once; otherwise it does not run, and the caller is told why.
    RequireApproval {
        /// Which policy holds it, in a form that changes when the policy's config changes (an
        /// approval given under one version of a policy does not pass another): `taint`, or a
        /// `[[policies]]` entry's [`crate::ToolRules`] id.
        policy: String,
        reason: String,
    },
    /// A host policy ([`crate::ToolPolicy`]) stopped the call with its own failure value, already
    /// checked against its declared schema; the caller gets that value.
    Fail(serde_json::Value),
    /// The policy could not decide (it failed, panicked, or answered outside its declared
    /// schema): the call is stopped, and the caller is told why (`policy_error`).
    Error(String),
}

pub trait Policy: Send + Sync {
    fn check<'a>(&'a self, request: &'a PolicyRequest<'a>) -> BoxFuture<'a, PolicyDecision>;

    /// What a listing for `principal` should say of `entry` before any call: whether a call of it
    /// may be denied or held for approval, and why. `None`: nothing to say (the default).
    fn mark(&self, entry: &ToolEntry, principal: &Principal) -> Option<PolicyMark> {
        let _ = (entry, principal);
        None
    }

    /// The JSON Schema of the failure values this policy may stop `entry`'s calls with, beyond
    /// the refusal envelopes every policy shares: what a listing advertises as the tool's failure
    /// branch. `None` (the default): only those envelopes.
    fn failure_schema(
        &self,
        entry: &ToolEntry,
        principal: &Principal,
    ) -> Option<std::sync::Arc<serde_json::Value>> {
        let _ = (entry, principal);
        None
    }
}

/// A listed tool's annotation: a policy denies its calls or holds them for approval. The MCP
/// edge shows it to clients in the tool's `_meta`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyMark {
    pub action: MarkedAction,
    pub reason: String,
    /// Whether it depends on the call's arguments (a rule with `when` conditions decides it or was
    /// passed on the way): some calls of the tool may run.
    pub conditional: bool,
}

/// What a policy does to the calls of a marked tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MarkedAction {
    Deny,
    Approve,
    /// A host policy ([`crate::ToolPolicy`]) decides each call.
    Host,
}

impl MarkedAction {
    /// The word the config uses for it: `deny`, `approve`; `host` for a host policy.
    pub fn as_str(self) -> &'static str {
        match self {
            MarkedAction::Deny => "deny",
            MarkedAction::Approve => "approve",
            MarkedAction::Host => "host",
        }
    }
}

/// The policy id of approvals the taint rule asks for.
pub const TAINT_POLICY_ID: &str = "taint";

/// What the taint rule does with a sensitive call that follows untrusted content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaintMode {
    Refuse,
    RequireApproval,
    /// No taint rule (not recommended).
    Off,
}

/// The taint rule: within one agent turn, once the agent has read output from an untrusted source (an
/// upstream MCP server, `web_fetch`, a remote agent), a call to a sensitive tool is refused or held for
/// approval.
///
/// What it protects against: content an attacker controls (a web page, an issue body, a remote agent's
/// answer) telling the model to run a command, write a file or call another sensitive tool, and the
/// agent doing it in the same turn without a person seeing it.
///
/// What it does not protect against: a sensitive call made before any untrusted content was read in the
/// turn; untrusted content that persists and comes back later as trusted (written to memory or a file in
/// an earlier turn, or already in the conversation history); tools that are sensitive but not marked
/// so; an MCP client calling sensitive tools directly (only agent turns are tracked: a client's own
/// calls are its user's decisions); and exfiltration through tools that are not sensitive (for example
/// `web_fetch` with data in the URL).
pub struct TaintPolicy {
    mode: TaintMode,
    /// Tools that are sensitive besides the ones marked so by their source.
    also_sensitive: ToolPatterns,
}

impl TaintPolicy {
    pub fn new(mode: TaintMode, also_sensitive: ToolPatterns) -> Self {
        TaintPolicy {
            mode,
            also_sensitive,
        }
    }
}

impl Policy for TaintPolicy {
    fn check<'a>(&'a self, request: &'a PolicyRequest<'a>) -> BoxFuture<'a, PolicyDecision> {
        let decision = (|| {
            if self.mode == TaintMode::Off {
                return PolicyDecision::Allow;
            }
            let sensitive =
                request.entry.sensitive || self.also_sensitive.matches(&request.entry.name);
            if !sensitive {
                return PolicyDecision::Allow;
            }
            let Some(from) = request.turn.and_then(|turn| turn.untrusted()) else {
                return PolicyDecision::Allow;
            };
            let name = &request.entry.name;
            let source = &from.tool;
            let reason = match &from.via {
                None => format!(
                    "`{name}` is sensitive and this turn has read untrusted content from `{source}`, \
                     which may be trying to steer the agent"
                ),
                Some(via) => format!(
                    "`{name}` is sensitive and this turn was started by `{via}`, whose turn had read \
                     untrusted content from `{source}`, which may be trying to steer the agent"
                ),
            };
            match self.mode {
                TaintMode::RequireApproval => PolicyDecision::RequireApproval {
                    policy: TAINT_POLICY_ID.to_string(),
                    reason,
                },
                _ => PolicyDecision::Deny(reason),
            }
        })();
        Box::pin(async move { decision })
    }
}
