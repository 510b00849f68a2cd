//! Host policies: an embedding program's own checks in front of chosen tools (seed 002's
//! `toolPolicies`). A [`ToolPolicy`] declares its failure type, whose JSON Schema comes from
//! `schemars`, and an async [`ToolPolicy::before_call`] that gets a detached copy of the call's
//! validated arguments and says proceed (the tool then runs once, with the original arguments) or
//! fails the call with a value of that type.
//!
//! Policies are registered by tool name in [`ToolPolicies`] and installed with
//! [`Pipeline::add_tool_policies`], which refuses a name no source knows. They are a [`Policy`]
//! like the config's `[[policies]]`, so they run where every policy runs: after the input schema
//! (invalid arguments never reach them) and before the tool. A policy that fails with a value its
//! schema does not admit, a value over [`ToolPolicies::max_failure_bytes`], returns an error or
//! panics stops the call before the tool runs, as a [`PolicyDecision::Error`].

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use portico_core::JsonObject;
use portico_core::relay::BoxFuture;
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value;

use crate::context::Principal;
use crate::pipeline::Pipeline;
use crate::policy::{MarkedAction, Policy, PolicyDecision, PolicyMark, PolicyRequest};
use crate::source::ToolEntry;

/// The default bound on one failure value, as JSON: a failure is a short answer, and one that is
/// not must not reach a client or a model unbounded.
pub const DEFAULT_MAX_FAILURE_BYTES: usize = 64 * 1024;

/// What [`ToolPolicy::before_call`] decides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BeforeCall<F> {
    /// Run the tool, once, with the call's original arguments.
    Proceed,
    /// Do not run it; the caller gets this value (as the result's structured content at the MCP
    /// edge, and as its text).
    Fail(F),
}

/// The call a [`ToolPolicy`] decides: owned copies, so the policy cannot change what the tool gets.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyCall {
    /// The exposed tool name.
    pub tool: String,
    /// The caller's principal label (`client:http`, `agent:planner`).
    pub caller: String,
    /// The arguments, already validated against the tool's `inputSchema`.
    pub arguments: JsonObject,
}

/// An embedder's check in front of one tool.
pub trait ToolPolicy: Send + Sync + 'static {
    /// What a refused call answers. Its `JsonSchema` is the failure branch the tool's listing
    /// advertises, and every value is checked against it before it leaves.
    type Failure: Serialize + JsonSchema + Send;
    /// Why the policy could not decide; the call is stopped with `policy_error`.
    type Error: std::fmt::Display + Send;

    fn before_call(
        &self,
        call: PolicyCall,
    ) -> impl Future<Output = Result<BeforeCall<Self::Failure>, Self::Error>> + Send;
}

/// Why [`Pipeline::add_tool_policies`] refused the policies.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolPolicyError {
    #[error(
        "a tool policy is registered for `{name}`, but no tool has that name{hint}; register the tool \
         first, or fix the name (policies are keyed by the exposed name, e.g. mcp_github_create_issue)"
    )]
    UnknownTool { name: String, hint: String },
    #[error("the failure schema of the tool policy for `{name}` cannot be compiled: {problem}")]
    Schema { name: String, problem: String },
}

type Run = Box<dyn Fn(PolicyCall) -> BoxFuture<'static, Decided> + Send + Sync>;

/// A policy's answer, its failure already serialised.
type Decided = Result<Option<Value>, String>;

struct Registered {
    schema: Arc<Value>,
    run: Run,
}

/// Tool policies by exposed tool name, to install with [`Pipeline::add_tool_policies`].
pub struct ToolPolicies {
    by_tool: BTreeMap<String, Registered>,
    max_failure_bytes: usize,
}

impl Default for ToolPolicies {
    fn default() -> Self {
        ToolPolicies {
            by_tool: BTreeMap::new(),
            max_failure_bytes: DEFAULT_MAX_FAILURE_BYTES,
        }
    }
}

impl ToolPolicies {
    pub fn new() -> Self {
        Self::default()
    }

    /// Puts `policy` in front of `tool` (replacing an earlier one for the same name).
    pub fn with<P: ToolPolicy>(mut self, tool: impl Into<String>, policy: P) -> Self {
        let policy = Arc::new(policy);
        let schema =
            serde_json::to_value(schemars::schema_for!(P::Failure)).unwrap_or(Value::Bool(false));
        let run: Run = Box::new(move |call| {
            let policy = policy.clone();
            Box::pin(async move {
                match policy.before_call(call).await {
                    Ok(BeforeCall::Proceed) => Ok(None),
                    Ok(BeforeCall::Fail(failure)) => serde_json::to_value(failure)
                        .map(Some)
                        .map_err(|e| format!("returned a failure that cannot be serialised: {e}")),
                    Err(error) => Err(format!("failed: {error}")),
                }
            })
        });
        self.by_tool.insert(
            tool.into(),
            Registered {
                schema: Arc::new(schema),
                run,
            },
        );
        self
    }

    /// Bounds one failure value, as JSON ([`DEFAULT_MAX_FAILURE_BYTES`] unless set); a bigger one
    /// stops the call with `policy_error` instead of reaching the caller.
    pub fn max_failure_bytes(mut self, bytes: usize) -> Self {
        self.max_failure_bytes = bytes;
        self
    }

    /// The tools that have a policy.
    pub fn tools(&self) -> impl Iterator<Item = &str> {
        self.by_tool.keys().map(String::as_str)
    }
}

impl Pipeline {
    /// Installs `policies` after the policies already added (the config's rules run first). Waits
    /// for the sources' first listings, then refuses the lot if any policy names a tool no source
    /// knows, naming it: a policy for a misspelt tool would guard nothing.
    pub async fn add_tool_policies(&self, policies: ToolPolicies) -> Result<(), ToolPolicyError> {
        self.settle().await;
        let known = self.all_tool_names();
        for name in policies.tools() {
            if !known.iter().any(|known| known == name) {
                return Err(ToolPolicyError::UnknownTool {
                    name: name.to_string(),
                    hint: portico_core::naming::suggest(name, known.iter().map(String::as_str)),
                });
            }
        }
        let validators = policies
            .by_tool
            .iter()
            .map(|(name, registered)| {
                compile(&registered.schema)
                    .map(|validator| (name.clone(), validator))
                    .map_err(|problem| ToolPolicyError::Schema {
                        name: name.clone(),
                        problem,
                    })
            })
            .collect::<Result<BTreeMap<_, _>, _>>()?;
        self.add_policy(Arc::new(HostPolicies {
            policies,
            validators,
        }));
        Ok(())
    }
}

fn compile(schema: &Value) -> Result<jsonschema::Validator, String> {
    jsonschema::options()
        .with_draft(jsonschema::Draft::Draft202012)
        .build(schema)
        .map_err(|e| e.to_string())
}

/// Installed tool policies, as one pipeline [`Policy`].
struct HostPolicies {
    policies: ToolPolicies,
    validators: BTreeMap<String, jsonschema::Validator>,
}

impl HostPolicies {
    /// The decision for what `run` answered (or how it ended).
    fn decision(&self, tool: &str, ended: Result<Decided, Panicked>) -> PolicyDecision {
        let failure = match ended {
            Err(Panicked) => {
                tracing::warn!(tool, "a host tool policy panicked; the call was stopped");
                return PolicyDecision::Error("panicked".into());
            }
            Ok(Err(problem)) => return PolicyDecision::Error(problem),
            Ok(Ok(None)) => return PolicyDecision::Allow,
            Ok(Ok(Some(failure))) => failure,
        };
        let size = crate::pipeline::json_size(&failure);
        if size > self.policies.max_failure_bytes {
            return PolicyDecision::Error(format!(
                "returned a failure of {size} bytes, over the {} bytes a failure may take",
                self.policies.max_failure_bytes
            ));
        }
        if let Some(validator) = self.validators.get(tool) {
            let problems: Vec<String> = validator
                .iter_errors(&failure)
                .take(3)
                .map(|error| {
                    let at = error.instance_path().to_string();
                    if at.is_empty() {
                        error.to_string()
                    } else {
                        format!("{at}: {error}")
                    }
                })
                .collect();
            if !problems.is_empty() {
                return PolicyDecision::Error(format!(
                    "returned a failure that does not match its declared failure schema: {}",
                    problems.join("; ")
                ));
            }
        }
        PolicyDecision::Fail(failure)
    }
}

impl Policy for HostPolicies {
    fn check<'a>(&'a self, request: &'a PolicyRequest<'a>) -> BoxFuture<'a, PolicyDecision> {
        let tool = request.entry.name.as_str();
        let Some(registered) = self.policies.by_tool.get(tool) else {
            return Box::pin(std::future::ready(PolicyDecision::Allow));
        };
        // A detached copy: whatever the policy does with it, the tool gets the original.
        let call = PolicyCall {
            tool: tool.to_string(),
            caller: request.principal.label(),
            arguments: request.arguments.clone(),
        };
        let deciding = CatchUnwind((registered.run)(call));
        Box::pin(async move { self.decision(tool, deciding.await) })
    }

    fn mark(&self, entry: &ToolEntry, _principal: &Principal) -> Option<PolicyMark> {
        self.policies
            .by_tool
            .contains_key(&entry.name)
            .then(|| PolicyMark {
                action: MarkedAction::Host,
                reason: "the host's policy decides each call before the tool runs".into(),
                conditional: true,
            })
    }

    fn failure_schema(&self, entry: &ToolEntry, _principal: &Principal) -> Option<Arc<Value>> {
        self.policies
            .by_tool
            .get(&entry.name)
            .map(|registered| registered.schema.clone())
    }
}

/// The policy's future panicked.
struct Panicked;

/// Polls a future, turning a panic in it into [`Panicked`]: an embedder's bug stops its call,
/// not the task serving the client's connection.
struct CatchUnwind<F>(F);

impl<F: Future + Unpin> Future for CatchUnwind<F> {
    type Output = Result<F::Output, Panicked>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let inner = &mut self.0;
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| Pin::new(inner).poll(cx))) {
            Ok(Poll::Ready(output)) => Poll::Ready(Ok(output)),
            Ok(Poll::Pending) => Poll::Pending,
            Err(_) => Poll::Ready(Err(Panicked)),
        }
    }
}
