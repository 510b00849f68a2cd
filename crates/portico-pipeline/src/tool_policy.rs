//! Host policies: an embedding program's own checks in front of chosen tools (the embedding
//! API's `toolPolicies`). A [`ToolPolicy`] declares its failure type, whose JSON Schema comes
//! from `schemars`, and an async [`ToolPolicy::before_call`] that gets a detached copy of the call's
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
        let schema = crate::standard_schema_for::<P::Failure>();
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
        let size = portico_core::json_size(&failure);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::{ToolContext, ToolPatterns};
    use crate::local::{LocalTool, LocalTools};
    use crate::pipeline::{Outcome, PipelineError, PipelineSettings};
    use serde_json::json;

    #[derive(serde::Deserialize, schemars::JsonSchema)]
    struct Input {
        text: String,
    }

    #[derive(serde::Serialize, schemars::JsonSchema)]
    struct Output {
        echoed: String,
    }

    #[derive(serde::Serialize, schemars::JsonSchema)]
    struct Refusal {
        ok: bool,
        why: String,
    }

    struct Refuses(usize);

    impl ToolPolicy for Refuses {
        type Failure = Refusal;
        type Error = String;

        async fn before_call(&self, _call: PolicyCall) -> Result<BeforeCall<Refusal>, String> {
            Ok(BeforeCall::Fail(Refusal {
                ok: false,
                why: "w".repeat(self.0),
            }))
        }
    }

    async fn pipeline(max_result_chars: usize, policies: ToolPolicies) -> Pipeline {
        let pipeline = Pipeline::new(PipelineSettings {
            max_result_chars,
            ..PipelineSettings::default()
        });
        let tools = LocalTools::default();
        tools.register(LocalTool::typed(
            "echo",
            "Echoes",
            |input: Input| async move {
                Ok::<_, std::convert::Infallible>(Output { echoed: input.text })
            },
        ));
        pipeline.add_source(Arc::new(tools));
        pipeline.add_tool_policies(policies).await.unwrap();
        pipeline
    }

    #[tokio::test]
    async fn an_agent_reads_a_policy_failure_cut_like_any_result() {
        let pipeline = pipeline(100, ToolPolicies::new().with("echo", Refuses(5_000))).await;
        let agent = ToolContext {
            principal: Principal::agent("a", ToolPatterns::new(&["*"]).unwrap()),
            ..ToolContext::client("unused")
        };
        let arguments = json!({"text": "hi"}).as_object().cloned();
        let outcome = pipeline
            .call("echo", arguments.clone(), &agent)
            .await
            .unwrap();
        assert_eq!(outcome.outcome, Outcome::PolicyFailed);
        assert!(outcome.truncated);
        assert!(outcome.result.is_error());
        assert_eq!(outcome.result.structured_content, None);
        let text = outcome.result.first_text().unwrap();
        assert!(text.starts_with(r#"{"ok":false,"why":"www"#), "{text}");
        assert!(
            text.contains("showing the first 100 of 5021 characters"),
            "{text}"
        );

        // A client gets it whole, as the error the doors turn into structured content.
        let client = ToolContext::client("stdio");
        let outcome = pipeline.call("echo", arguments, &client).await.unwrap();
        assert!(!outcome.truncated);
        let failure = outcome
            .error
            .as_ref()
            .and_then(PipelineError::policy_failure);
        assert_eq!(
            failure,
            Some(&json!({"ok": false, "why": "w".repeat(5_000)}))
        );
    }

    #[tokio::test]
    async fn the_failure_bound_is_the_policies_own_setting() {
        let policies = ToolPolicies::new()
            .with("echo", Refuses(100))
            .max_failure_bytes(64);
        let pipeline = pipeline(50_000, policies).await;
        let outcome = pipeline
            .call(
                "echo",
                json!({"text": "hi"}).as_object().cloned(),
                &ToolContext::client("stdio"),
            )
            .await
            .unwrap();
        assert_eq!(outcome.outcome, Outcome::PolicyError);
        assert!(matches!(
            outcome.error,
            Some(PipelineError::PolicyError { ref problem, .. })
                if problem == "returned a failure of 121 bytes, over the 64 bytes a failure may take"
        ));
    }

    #[tokio::test]
    async fn tools_without_a_policy_are_not_asked_about() {
        let pipeline = pipeline(50_000, ToolPolicies::new()).await;
        let outcome = pipeline
            .call(
                "echo",
                json!({"text": "hi"}).as_object().cloned(),
                &ToolContext::client("stdio"),
            )
            .await
            .unwrap();
        assert_eq!(outcome.outcome, Outcome::Ok);
        assert_eq!(
            outcome.result.structured_content,
            Some(json!({"echoed": "hi"}))
        );
        let listed = pipeline
            .list_with_failures(&Principal::client("stdio"))
            .await;
        assert_eq!(listed.len(), 1);
        assert_eq!(
            (listed[0].mark.clone(), listed[0].failure_schemas.len()),
            (None, 0)
        );
    }
}
