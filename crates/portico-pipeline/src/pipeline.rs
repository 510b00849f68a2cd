//! [`Pipeline::call`]: the one function every tool call passes.

use std::borrow::Cow;
use std::sync::{Arc, OnceLock, RwLock, Weak};
use std::time::{Duration, Instant};

use portico_core::trace::{APPROVAL, EXECUTE, PIPELINE, POLICY, RESOLVE, SPAN_TARGET};
use portico_core::{CallError, JsonObject, ToolResult};
use portico_metrics::{CallRecord, Metrics, PrincipalClass, Stage};
use portico_store::AuditRecord;
use serde_json::Value;
use tracing::Instrument;

use crate::approvals::{Approvals, Hold};
use crate::audit::{AuditKey, AuditSink};
use crate::context::{Principal, ToolContext};
use crate::pins::ToolPins;
use crate::policy::{Policy, PolicyDecision, PolicyMark, PolicyRequest};
use crate::schema::SchemaCache;
use crate::source::{ToolEntry, ToolSource, Trust};

pub const DEFAULT_TOOL_TIMEOUT: Duration = Duration::from_secs(60);
pub const DEFAULT_MAX_RESULT_CHARS: usize = 50_000;
/// A `_meta` key a source sets on a result whose content is untrusted although the tool is not (an
/// agent whose run read untrusted content). The pipeline removes it before anyone else sees it.
pub const UNTRUSTED_META: &str = "portico/untrusted";

#[derive(Debug, Clone)]
pub struct PipelineSettings {
    /// A call that takes longer is abandoned (and cancelled upstream) with a clear error.
    pub tool_timeout: Duration,
    /// What an agent reads of one result; longer output is cut with a marker saying so.
    pub max_result_chars: usize,
}

impl Default for PipelineSettings {
    fn default() -> Self {
        PipelineSettings {
            tool_timeout: DEFAULT_TOOL_TIMEOUT,
            max_result_chars: DEFAULT_MAX_RESULT_CHARS,
        }
    }
}

/// How a call ended, as the audit log records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Ok,
    /// The tool ran and reported an error, or could not be reached.
    Error,
    /// The caller may not use the tool, or a policy refused the call.
    Denied,
    /// A policy requires approval first.
    ApprovalRequired,
    /// The arguments do not match the tool's inputSchema.
    InvalidArguments,
    /// The result's structuredContent does not match the tool's outputSchema.
    InvalidOutput,
    Timeout,
    UnknownTool,
    /// The caller went away before the call finished; its work was dropped.
    Cancelled,
    /// A host policy stopped the call with its own failure value.
    PolicyFailed,
    /// A host policy could not decide (failed, panicked, answered outside its schema).
    PolicyError,
}

impl Outcome {
    pub fn label(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Error => "error",
            Outcome::Denied => "denied",
            Outcome::ApprovalRequired => "approval_required",
            Outcome::InvalidArguments => "invalid_arguments",
            Outcome::InvalidOutput => "invalid_output",
            Outcome::Timeout => "timeout",
            Outcome::UnknownTool => "unknown_tool",
            Outcome::Cancelled => "cancelled",
            Outcome::PolicyFailed => "policy_failed",
            Outcome::PolicyError => "policy_error",
        }
    }
}

/// A finished call.
#[derive(Debug, Clone)]
pub struct CallOutcome {
    /// What the caller sees: the tool's answer, or (when `error` is set) an error result saying why
    /// there is none.
    pub result: ToolResult,
    pub outcome: Outcome,
    /// Why the tool gave no answer of its own: refused, invalid, timed out, its source failed.
    /// `None` when the tool answered, even if its answer reports a failure.
    pub error: Option<PipelineError>,
    /// The result carries content from an untrusted source.
    pub untrusted: bool,
    /// The result was cut to the agent's limit.
    pub truncated: bool,
}

impl CallOutcome {
    pub fn is_error(&self) -> bool {
        self.result.is_error()
    }
}

/// Why a call did not get the tool's own answer. [`Pipeline::call`] returns only `UnknownTool` as an
/// `Err` (there is nothing to call); the others are results the caller's model should see, so they
/// come back in [`CallOutcome::error`] beside an error result carrying the same message.
#[derive(Debug, Clone, thiserror::Error)]
pub enum PipelineError {
    #[error("no tool named `{name}`{hint}")]
    UnknownTool { name: String, hint: String },
    #[error(
        "tool `{tool}` is not available to agent `{agent}`: it is outside the agent's `tools` patterns"
    )]
    NotPermitted { tool: String, agent: String },
    /// A client whose `[[server.clients]]` entry has a `tools` scope (or whose OAuth token's scopes
    /// grant some tools) called a tool outside it.
    #[error(
        "tool `{tool}` is not available to client `{client}`: it is outside the client's `tools` scope ({scope}); widen that [[server.clients]] entry's `tools` (for an OAuth token: what its scopes grant in [server.oauth] scopes) to allow it"
    )]
    OutsideClientScope {
        tool: String,
        client: String,
        scope: String,
    },
    #[error("invalid arguments for `{tool}`: {problems}")]
    InvalidArguments { tool: String, problems: String },
    /// A policy refused the call.
    #[error("call to `{tool}` refused: {reason}")]
    Refused { tool: String, reason: String },
    /// A policy holds the call until someone approves it. `request_id` names the approval request
    /// when the pipeline has approvals (`Pipeline::set_approvals`); without them nothing can approve.
    #[error(
        "call to `{tool}` requires approval and was not run: {reason}{}",
        how_to_approve(.request_id.as_deref())
    )]
    ApprovalRequired {
        tool: String,
        reason: String,
        request_id: Option<String>,
    },
    /// A host policy stopped the call with its own failure value (its text is the value's JSON).
    #[error("{}", json_text(.failure))]
    PolicyFailed { tool: String, failure: Value },
    /// A host policy could not decide, so the call was stopped before the tool ran.
    #[error("call to `{tool}` was stopped before it ran: its host policy {problem}")]
    PolicyError { tool: String, problem: String },
    /// The pipeline's own timeout (the tool's, or `PipelineSettings::tool_timeout`) ran out.
    #[error("tool `{tool}` did not finish within {}s and was cancelled", .after.as_secs_f64())]
    Timeout { tool: String, after: Duration },
    #[error(
        "tool `{tool}` returned structuredContent that does not match its outputSchema: {problems}"
    )]
    InvalidOutput { tool: String, problems: String },
    /// The tool's source could not give an answer; the kind says why.
    #[error(transparent)]
    Source(#[from] CallError),
}

impl PipelineError {
    /// How the audit log records a call that ended this way.
    pub fn outcome(&self) -> Outcome {
        match self {
            PipelineError::UnknownTool { .. } => Outcome::UnknownTool,
            PipelineError::NotPermitted { .. }
            | PipelineError::OutsideClientScope { .. }
            | PipelineError::Refused { .. } => Outcome::Denied,
            PipelineError::InvalidArguments { .. } => Outcome::InvalidArguments,
            PipelineError::ApprovalRequired { .. } => Outcome::ApprovalRequired,
            PipelineError::Timeout { .. } => Outcome::Timeout,
            PipelineError::InvalidOutput { .. } => Outcome::InvalidOutput,
            PipelineError::PolicyFailed { .. } => Outcome::PolicyFailed,
            PipelineError::PolicyError { .. } => Outcome::PolicyError,
            PipelineError::Source(error) => match error {
                CallError::Timeout(_) => Outcome::Timeout,
                CallError::NotFound(_) => Outcome::UnknownTool,
                CallError::Cancelled(_) => Outcome::Cancelled,
                CallError::Budget(_)
                | CallError::UpstreamGone(_)
                | CallError::UpstreamFailed(_)
                | CallError::Protocol(_)
                | CallError::Failed(_) => Outcome::Error,
            },
        }
    }

    /// What the audit record says: a policy's own reason, else the whole message.
    fn audit_detail(&self) -> String {
        match self {
            PipelineError::Refused { reason, .. }
            | PipelineError::ApprovalRequired { reason, .. }
            | PipelineError::PolicyError {
                problem: reason, ..
            } => reason.clone(),
            other => other.to_string(),
        }
    }

    /// The error result the caller's model reads: the message as its one text block. A door adds
    /// what its protocol carries besides (the MCP edge: a policy refusal's envelope, from
    /// [`PipelineError::refusal`]).
    fn result(&self) -> ToolResult {
        ToolResult::error(self.to_string())
    }

    /// A policy's refusal of the call, typed for the doors: denied, or held for an approval.
    pub fn refusal(&self) -> Option<PolicyRefusal<'_>> {
        let (code, tool, reason, approval_request_id) = match self {
            PipelineError::Refused { tool, reason } => {
                (RefusalCode::PolicyDenied, tool, reason, None)
            }
            PipelineError::ApprovalRequired {
                tool,
                reason,
                request_id,
            } => (
                RefusalCode::ApprovalRequired,
                tool,
                reason,
                request_id.as_deref(),
            ),
            PipelineError::PolicyError { tool, problem } => {
                (RefusalCode::PolicyError, tool, problem, None)
            }
            _ => return None,
        };
        Some(PolicyRefusal {
            code,
            tool,
            reason,
            approval_request_id,
        })
    }

    /// A host policy's own failure value, which the doors answer as the call's structured result.
    pub fn policy_failure(&self) -> Option<&Value> {
        match self {
            PipelineError::PolicyFailed { failure, .. } => Some(failure),
            _ => None,
        }
    }
}

/// What the message of a held call adds to say how to approve it.
fn how_to_approve(request_id: Option<&str>) -> String {
    match request_id {
        Some(id) => format!(
            "; approve it with `portico approvals approve {id}` or open {}, then retry the same \
             call",
            crate::approvals::approval_link(id)
        ),
        None => String::new(),
    }
}

/// A call a policy did not let run: what the doors tell the client (the failure envelope:
/// `{"ok": false, "error": {"code", "tool", "reason"}}`, written by the MCP edge).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PolicyRefusal<'a> {
    pub code: RefusalCode,
    /// The exposed name the call was for.
    pub tool: &'a str,
    pub reason: &'a str,
    /// The approval request of a held call, when one was made.
    pub approval_request_id: Option<&'a str>,
}

/// Why a policy did not let a call run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefusalCode {
    /// A policy denies it (`deny`, `[policy] default = "deny"`, the taint rule's `refuse`).
    PolicyDenied,
    /// It needs an approval (`approve`, the taint rule's `approval`); the request's id comes with
    /// it when the pipeline has approvals.
    ApprovalRequired,
    /// A host policy could not decide: it failed, panicked, or answered outside its schema.
    PolicyError,
}

impl RefusalCode {
    /// The envelope's `code`: `policy_denied`, `approval_required`, `policy_error`.
    pub fn as_str(self) -> &'static str {
        match self {
            RefusalCode::PolicyDenied => "policy_denied",
            RefusalCode::ApprovalRequired => "approval_required",
            RefusalCode::PolicyError => "policy_error",
        }
    }
}

/// The one call pipeline. Cheap to clone.
#[derive(Clone)]
pub struct Pipeline {
    inner: Arc<Inner>,
}

/// A pipeline handle that does not keep it alive, for sources (agents) the pipeline itself owns.
#[derive(Clone)]
pub struct WeakPipeline(Weak<Inner>);

impl WeakPipeline {
    pub fn upgrade(&self) -> Option<Pipeline> {
        self.0.upgrade().map(|inner| Pipeline { inner })
    }
}

struct Inner {
    sources: RwLock<Vec<Arc<dyn ToolSource>>>,
    policies: RwLock<Vec<Arc<dyn Policy>>>,
    audit: RwLock<Option<Arc<dyn AuditSink>>>,
    audit_key: RwLock<AuditKey>,
    approvals: RwLock<Option<Approvals>>,
    pins: RwLock<Option<ToolPins>>,
    /// Set once, by the engine; read without a lock on every call.
    metrics: OnceLock<Metrics>,
    schemas: SchemaCache,
    settings: PipelineSettings,
}

impl Pipeline {
    pub fn new(settings: PipelineSettings) -> Self {
        Pipeline {
            inner: Arc::new(Inner {
                sources: RwLock::default(),
                policies: RwLock::default(),
                audit: RwLock::default(),
                audit_key: RwLock::new(AuditKey::ephemeral()),
                approvals: RwLock::default(),
                pins: RwLock::default(),
                metrics: OnceLock::new(),
                schemas: SchemaCache::default(),
                settings,
            }),
        }
    }

    pub fn settings(&self) -> &PipelineSettings {
        &self.inner.settings
    }

    pub fn downgrade(&self) -> WeakPipeline {
        WeakPipeline(Arc::downgrade(&self.inner))
    }

    /// Adds a source after those already added; earlier sources win a name.
    pub fn add_source(&self, source: Arc<dyn ToolSource>) {
        self.inner
            .sources
            .write()
            .expect("pipeline sources lock")
            .push(source);
    }

    /// Adds a policy after those already added. Each call must pass every policy; the first that
    /// refuses it decides what the caller is told.
    pub fn add_policy(&self, policy: Arc<dyn Policy>) {
        self.inner
            .policies
            .write()
            .expect("pipeline policies lock")
            .push(policy);
    }

    pub fn set_audit(&self, sink: Arc<dyn AuditSink>) {
        *self.inner.audit.write().expect("pipeline audit lock") = Some(sink);
    }

    /// Keys the argument digests of audit records (a key for this process only until set).
    pub fn set_audit_key(&self, key: AuditKey) {
        *self
            .inner
            .audit_key
            .write()
            .expect("pipeline audit key lock") = key;
    }

    /// Where calls a policy holds get their approvals. Without, such a call never runs.
    pub fn set_approvals(&self, approvals: Approvals) {
        *self
            .inner
            .approvals
            .write()
            .expect("pipeline approvals lock") = Some(approvals);
    }

    pub fn approvals(&self) -> Option<Approvals> {
        self.inner
            .approvals
            .read()
            .expect("pipeline approvals lock")
            .clone()
    }

    /// Pins upstream tools' definitions (`[policy] pin_tools`): a tool whose definition changed is
    /// neither listed nor callable until its new definition is approved.
    pub fn set_pins(&self, pins: ToolPins) {
        *self.inner.pins.write().expect("pipeline pins lock") = Some(pins);
    }

    pub fn pins(&self) -> Option<ToolPins> {
        self.inner.pins.read().expect("pipeline pins lock").clone()
    }

    /// Where calls are counted and their stages timed (`/metrics`). Set once; a second handle is
    /// ignored, so every count lands in the first.
    pub fn set_metrics(&self, metrics: Metrics) {
        let _ = self.inner.metrics.set(metrics);
    }

    /// Times `stage` of a call, when the pipeline has metrics.
    fn time(&self, stage: Stage, took: Duration) {
        if let Some(metrics) = self.inner.metrics.get() {
            metrics.time_stage(stage, took);
        }
    }

    /// Counts a finished call and times it whole, when the pipeline has metrics.
    fn count(
        &self,
        principal: &Principal,
        tool: &str,
        server: &str,
        outcome: Outcome,
        took: Duration,
    ) {
        if let Some(metrics) = self.inner.metrics.get() {
            metrics.count_call(CallRecord {
                tool,
                server: Cow::Borrowed(server),
                principal: PrincipalClass::of(principal),
                outcome: outcome.label(),
            });
            metrics.time_stage(Stage::Pipeline, took);
        }
    }

    /// Whether the pins let `entry` of `source` be listed and called (`Ok` without pins, and for
    /// tools from Portico itself).
    /// After a held call's approval: refuses it if, while it waited, its name came to mean another
    /// tool (another source or server took it) or its definition changed. The grant it used is
    /// spent; a new call gets a request bound to what the tool is now.
    async fn unchanged_while_held(
        &self,
        source: &dyn ToolSource,
        entry: &ToolEntry,
        origin_when_checked: Option<&portico_core::source::ToolOrigin>,
    ) -> Result<(), PipelineError> {
        let unchanged = self
            .find(&entry.name)
            .is_some_and(|(now_source, now_entry)| {
                std::ptr::addr_eq(Arc::as_ptr(&now_source), source as *const dyn ToolSource)
                    && now_source.origin(&entry.name).as_ref() == origin_when_checked
                    && now_entry.definition == entry.definition
            });
        if !unchanged {
            return Err(PipelineError::Refused {
                tool: entry.name.clone(),
                reason: format!(
                    "`{}` changed while the call waited for its approval (its definition, or the \
                     server that serves it), so the approved call did not run; call it again to \
                     have the tool as it is now approved",
                    entry.name
                ),
            });
        }
        Self::admitted(self.pins().as_ref(), source, entry).await
    }

    async fn admitted(
        pins: Option<&ToolPins>,
        source: &dyn ToolSource,
        entry: &ToolEntry,
    ) -> Result<(), PipelineError> {
        match (pins, source.origin(&entry.name)) {
            (Some(pins), Some(origin)) => pins.admit(&origin, entry).await,
            _ => Ok(()),
        }
    }

    /// Checks every upstream tool against its pin now (pins new ones, holds changed ones, repins
    /// approved ones), so that happens when definitions arrive rather than when someone lists.
    pub async fn check_pins(&self) {
        let Some(pins) = self.pins() else { return };
        for source in self.sources() {
            for entry in source.entries() {
                let _ = Self::admitted(Some(&pins), &*source, &entry).await;
            }
        }
    }

    fn sources(&self) -> Vec<Arc<dyn ToolSource>> {
        self.inner
            .sources
            .read()
            .expect("pipeline sources lock")
            .clone()
    }

    /// Waits (bounded) for every source's first listing.
    pub async fn settle(&self) {
        for source in self.sources() {
            source.settle().await;
        }
    }

    /// The tools `principal` may see, first source first, each name once.
    pub async fn list(&self, principal: &Principal) -> Vec<ToolEntry> {
        self.settle().await;
        let mut seen = std::collections::HashSet::new();
        let mut tools = Vec::new();
        let pins = self.pins();
        for source in self.sources() {
            for entry in source.entries() {
                // A held tool keeps its name (a call to it is answered with its approval), but
                // nobody is offered it.
                if principal.may_use(&entry.name)
                    && seen.insert(entry.name.clone())
                    && Self::admitted(pins.as_ref(), &*source, &entry)
                        .await
                        .is_ok()
                {
                    tools.push(entry);
                }
            }
        }
        tools
    }

    /// [`Pipeline::list`], each tool with what the policies say of it to `principal` before any
    /// call ([`Policy::mark`]: the first policy with something to say).
    pub async fn list_marked(&self, principal: &Principal) -> Vec<(ToolEntry, Option<PolicyMark>)> {
        let tools = self.list(principal).await;
        let policies = self.policies();
        tools
            .into_iter()
            .map(|entry| {
                let mark = policies
                    .iter()
                    .find_map(|policy| policy.mark(&entry, principal));
                (entry, mark)
            })
            .collect()
    }

    fn policies(&self) -> Vec<Arc<dyn Policy>> {
        self.inner
            .policies
            .read()
            .expect("pipeline policies lock")
            .clone()
    }

    /// The [`ToolSource::kind`] of the source that knows `name` now, without waiting for sources
    /// still settling.
    pub fn source_kind(&self, name: &str) -> Option<&'static str> {
        self.find(name).map(|(source, _)| source.kind())
    }

    fn find(&self, name: &str) -> Option<(Arc<dyn ToolSource>, ToolEntry)> {
        self.sources()
            .into_iter()
            .find_map(|source| source.find(name).map(|entry| (source, entry)))
    }

    /// A name no source lists that one still takes ([`ToolSource::unlisted`]). Never with
    /// `[policy] pin_tools`: a tool without a definition has nothing to pin, so it is not called.
    fn unlisted(&self, name: &str) -> Option<(Arc<dyn ToolSource>, ToolEntry)> {
        if self.pins().is_some() {
            return None;
        }
        self.sources()
            .into_iter()
            .find_map(|source| source.unlisted(name).map(|entry| (source, entry)))
    }

    /// Runs one call through every stage: resolve, capability, input schema, policies, timeout,
    /// execute, output schema, truncation (for agents), audit.
    pub async fn call(
        &self,
        name: &str,
        arguments: Option<JsonObject>,
        context: &ToolContext,
    ) -> Result<CallOutcome, PipelineError> {
        // The call's span for traces (`portico_core::trace`): names and kinds, never arguments.
        let span = tracing::trace_span!(
            target: SPAN_TARGET,
            PIPELINE,
            tool = %recorded_name(name),
            principal = principal_class(&context.principal),
            outcome = tracing::field::Empty,
            error.kind = tracing::field::Empty,
            otel.status_code = tracing::field::Empty,
        );
        let outcome = self
            .call_recorded(name, arguments, context)
            .instrument(span.clone())
            .await;
        record_outcome(&span, &outcome);
        // The call has queued its audit record; it returns once the audit queue has room.
        let sink = self
            .inner
            .audit
            .read()
            .expect("pipeline audit lock")
            .clone();
        if let Some(sink) = sink {
            sink.room().await;
        }
        outcome
    }

    async fn call_recorded(
        &self,
        name: &str,
        arguments: Option<JsonObject>,
        context: &ToolContext,
    ) -> Result<CallOutcome, PipelineError> {
        let started = Instant::now();
        let arguments = arguments.unwrap_or_default();
        let digest = self
            .inner
            .audit_key
            .read()
            .expect("pipeline audit key lock")
            .digest_object(&arguments);
        let audit = |outcome: Outcome, detail: Option<String>| {
            self.audit(context, name, &digest, outcome, detail, started.elapsed());
        };

        let found = async {
            match self.find(name) {
                Some(found) => Some(found),
                None => {
                    self.settle().await;
                    self.find(name).or_else(|| self.unlisted(name))
                }
            }
        }
        .instrument(tracing::trace_span!(target: SPAN_TARGET, RESOLVE))
        .await;
        let Some((source, entry)) = found else {
            audit(Outcome::UnknownTool, None);
            self.count(
                &context.principal,
                portico_metrics::UNKNOWN,
                "(none)",
                Outcome::UnknownTool,
                started.elapsed(),
            );
            let candidates: Vec<String> = self
                .list(&context.principal)
                .await
                .into_iter()
                .map(|e| e.name)
                .collect();
            return Err(PipelineError::UnknownTool {
                name: name.to_string(),
                hint: portico_core::naming::suggest(name, candidates.iter().map(String::as_str)),
            });
        };

        // Only a pipeline with metrics pays for this lookup (an upstream tool's catalog entry).
        let (tool_label, server) = match self.inner.metrics.get() {
            Some(_) => call_labels(&*source, &entry.name),
            None => (name, Cow::Borrowed("")),
        };
        // A call whose caller goes away (a cancelled A2A task, a client that hung up) is dropped
        // mid-run; the guard still records that it was called and did not finish.
        let mut unfinished = Unfinished {
            pipeline: self,
            context,
            name,
            tool_label,
            server: &server,
            digest: &digest,
            started,
            armed: true,
        };
        let finished = self
            .run(&*source, &entry, arguments, &digest, context)
            .await;
        unfinished.armed = false;
        let (mut result, outcome, detail, error) = match finished {
            Ok(result) if result.is_error() => {
                let detail = result.first_text().map(str::to_string);
                (result, Outcome::Error, detail, None)
            }
            Ok(result) => (result, Outcome::Ok, None, None),
            Err(error) => (
                error.result(),
                error.outcome(),
                Some(error.audit_detail()),
                Some(error),
            ),
        };
        // An agent's answer is untrusted when its own run read untrusted content.
        let flagged = result
            .meta
            .as_mut()
            .and_then(|meta| meta.remove(UNTRUSTED_META))
            .is_some_and(|v| v == Value::Bool(true));
        if result.meta.as_ref().is_some_and(JsonObject::is_empty) {
            result.meta = None;
        }
        let untrusted = (entry.trust == Trust::Untrusted || flagged) && outcome == Outcome::Ok;
        if untrusted && let Some(turn) = &context.turn {
            turn.mark_untrusted(&entry.name);
        }
        let truncated = match &context.principal {
            Principal::Agent(_) => for_model(&mut result, self.inner.settings.max_result_chars),
            Principal::Client { .. } => false,
        };
        audit(outcome, detail);
        self.count(
            &context.principal,
            tool_label,
            &server,
            outcome,
            started.elapsed(),
        );
        Ok(CallOutcome {
            result,
            outcome,
            error,
            untrusted,
            truncated,
        })
    }

    /// The stages after resolution: the tool's answer, or why there is none.
    async fn run(
        &self,
        source: &dyn ToolSource,
        entry: &ToolEntry,
        arguments: JsonObject,
        digest: &str,
        context: &ToolContext,
    ) -> Result<ToolResult, PipelineError> {
        let name = entry.name.as_str();
        let (arguments, held) = self
            .checked(source, entry, arguments, context)
            .instrument(tracing::trace_span!(target: SPAN_TARGET, POLICY))
            .await?;
        if let Some((policy, reason)) = held {
            let waited = Instant::now();
            let approved = self
                .approved(source, entry, &arguments, digest, context, policy, reason)
                .instrument(tracing::trace_span!(target: SPAN_TARGET, APPROVAL))
                .await;
            self.time(Stage::Approval, waited.elapsed());
            approved?;
        }

        let timeout = entry.timeout.unwrap_or(self.inner.settings.tool_timeout);
        let executing = Instant::now();
        let result = tokio::time::timeout(timeout, source.call(entry, arguments, context))
            .instrument(tracing::trace_span!(target: SPAN_TARGET, EXECUTE))
            .await;
        self.time(Stage::Execute, executing.elapsed());
        let result = result.map_err(|_| PipelineError::Timeout {
            tool: name.to_string(),
            after: timeout,
        })??;

        if result.is_error() {
            return Ok(result);
        }
        if let (Some(schema), Some(structured)) = (
            entry.definition.get("outputSchema"),
            &result.structured_content,
        ) && let Err(problems) =
            self.inner
                .schemas
                .check(name, "outputSchema", entry.generation, schema, structured)
        {
            return Err(PipelineError::InvalidOutput {
                tool: name.to_string(),
                problems,
            });
        }
        Ok(result)
    }

    /// The caller's limits, the pins, the input schema and every policy: the arguments to run
    /// with, and the first hold a policy put on the call (its policy and reason), if any.
    async fn checked(
        &self,
        source: &dyn ToolSource,
        entry: &ToolEntry,
        arguments: JsonObject,
        context: &ToolContext,
    ) -> Result<(JsonObject, Option<(String, String)>), PipelineError> {
        let name = entry.name.as_str();
        if let Some((client, scope)) = context.principal.client_scope()
            && !scope.matches(name)
        {
            return Err(PipelineError::OutsideClientScope {
                tool: name.to_string(),
                client: client.to_string(),
                scope: scope.patterns().join(", "),
            });
        }
        if !context.principal.may_use(name) {
            return Err(PipelineError::NotPermitted {
                tool: name.to_string(),
                agent: context
                    .principal
                    .agent_name()
                    .unwrap_or("caller")
                    .to_string(),
            });
        }
        // After the caller's own limits: a tool outside them is refused as such, held or not.
        Self::admitted(self.pins().as_ref(), source, entry).await?;

        let mut arguments_value = Value::Object(arguments);
        if let Some(schema) = entry.definition.get("inputSchema") {
            let check = |value: &Value| {
                self.inner
                    .schemas
                    .check(name, "inputSchema", entry.generation, schema, value)
            };
            if let Err(problems) = check(&arguments_value) {
                // MCP reads a `null` for an optional parameter as the parameter not provided
                // (SEP-2243: "null or not provided"): such a call is made without it, not refused
                // because `null` is not of the parameter's type.
                match without_optional_nulls(schema, &arguments_value) {
                    Some(omitted) if check(&omitted).is_ok() => arguments_value = omitted,
                    _ => {
                        return Err(PipelineError::InvalidArguments {
                            tool: name.to_string(),
                            problems,
                        });
                    }
                }
            }
        }
        let Value::Object(arguments) = arguments_value else {
            unreachable!("arguments were an object a moment ago")
        };

        let asked = Instant::now();
        let held = self.ask_policies(entry, &arguments, context).await;
        self.time(Stage::Policy, asked.elapsed());
        Ok((arguments, held?))
    }

    /// Asks every policy about the call: a refusal, or the approval the first policy that holds
    /// it needs (its id and reason), or `None` when all allow it.
    async fn ask_policies(
        &self,
        entry: &ToolEntry,
        arguments: &JsonObject,
        context: &ToolContext,
    ) -> Result<Option<(String, String)>, PipelineError> {
        let name = entry.name.as_str();
        // Every policy is asked before an approval is used: a call another policy denies must not
        // spend a grant (or ask someone to approve it). The first policy that holds it decides
        // which approval it needs.
        let mut held: Option<(String, String)> = None;
        for policy in self.policies() {
            let request = PolicyRequest {
                entry,
                arguments,
                principal: &context.principal,
                turn: context.turn.as_deref(),
            };
            match policy.check(&request).await {
                PolicyDecision::Allow => {}
                PolicyDecision::Deny(reason) => {
                    return Err(PipelineError::Refused {
                        tool: name.to_string(),
                        reason,
                    });
                }
                PolicyDecision::RequireApproval { policy, reason } => {
                    held.get_or_insert((policy, reason));
                }
                PolicyDecision::Fail(failure) => {
                    return Err(PipelineError::PolicyFailed {
                        tool: name.to_string(),
                        failure,
                    });
                }
                PolicyDecision::Error(problem) => {
                    return Err(PipelineError::PolicyError {
                        tool: name.to_string(),
                        problem,
                    });
                }
            }
        }
        Ok(held)
    }

    /// A held call's approval: asked for and waited on, then the tool checked to be the one that
    /// was approved.
    #[allow(clippy::too_many_arguments)]
    async fn approved(
        &self,
        source: &dyn ToolSource,
        entry: &ToolEntry,
        arguments: &JsonObject,
        digest: &str,
        context: &ToolContext,
        policy: String,
        reason: String,
    ) -> Result<(), PipelineError> {
        let name = entry.name.as_str();
        // Only a held call pays for this lookup: what it is served by before the wait.
        let origin_when_checked = source.origin(name);
        let Some(approvals) = self.approvals() else {
            return Err(PipelineError::ApprovalRequired {
                tool: name.to_string(),
                reason,
                request_id: None,
            });
        };
        let hold = Hold {
            entry,
            arguments,
            arguments_digest: digest,
            policy: &policy,
            reason: &reason,
        };
        approvals.gate(hold, context).await?;
        // The wait for an answer can be long: what runs must still be the tool that was
        // approved, served by the same source and server.
        self.unchanged_while_held(source, entry, origin_when_checked.as_ref())
            .await
    }

    fn audit(
        &self,
        context: &ToolContext,
        tool: &str,
        digest: &str,
        outcome: Outcome,
        detail: Option<String>,
        duration: Duration,
    ) {
        let sink = self
            .inner
            .audit
            .read()
            .expect("pipeline audit lock")
            .clone();
        if let Some(sink) = sink {
            sink.record(AuditRecord {
                at_ms: portico_core::time::now_ms(),
                caller: context.principal.label(),
                tool: recorded_name(tool).into_owned(),
                arguments_digest: digest.to_string(),
                outcome: outcome.label().to_string(),
                detail: detail.map(|d| d.chars().take(500).collect()),
                duration_ms: duration.as_millis() as u64,
            });
        }
    }
}

/// The most characters of a tool's name an audit record, an event or a span keeps.
const MAX_RECORDED_NAME_CHARS: usize = 256;

/// A tool name as records keep it: a name the catalog could hold is kept whole (every catalog name
/// is far shorter); a longer one, which only a client inventing names sends, is cut, so a client
/// cannot make every copy of a record (the store, `/api/events` followers, the trace exporter) as
/// large as its request.
fn recorded_name(name: &str) -> Cow<'_, str> {
    match name.char_indices().nth(MAX_RECORDED_NAME_CHARS) {
        None => Cow::Borrowed(name),
        Some((cut, _)) => Cow::Owned(format!("{}…", &name[..cut])),
    }
}

/// The tool and server labels of a resolved call (`/metrics`): an upstream tool by its name and
/// server, any other as its source's kind says ([`CallRecord::own_labels`]).
fn call_labels<'n>(source: &dyn ToolSource, name: &'n str) -> (&'n str, Cow<'static, str>) {
    match source.origin(name) {
        Some(origin) => (name, Cow::Owned(origin.server)),
        None => {
            let (tool, server) = CallRecord::own_labels(source.kind(), name);
            (tool, Cow::Borrowed(server))
        }
    }
}

/// Who calls, as a trace says it: `client` or `agent` (which one is the audit log's to say).
fn principal_class(principal: &Principal) -> &'static str {
    match principal {
        Principal::Client { .. } => "client",
        Principal::Agent(_) => "agent",
    }
}

/// The call's outcome on its span: the audit log's label, and for a call without the tool's own
/// answer, an error status.
fn record_outcome(span: &tracing::Span, outcome: &Result<CallOutcome, PipelineError>) {
    let (label, failed) = match outcome {
        Ok(call) => (call.outcome.label(), call.outcome != Outcome::Ok),
        Err(error) => (error.outcome().label(), true),
    };
    span.record("outcome", label);
    if failed {
        span.record("error.kind", label);
        span.record("otel.status_code", "ERROR");
    }
}

/// A failure value as the text block beside it.
fn json_text(value: &Value) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

/// A listed tool with what the policies say of it: its mark ([`Pipeline::list_marked`]) and the
/// failure schemas host policies declare for it.
#[derive(Debug, Clone)]
pub struct ListedTool {
    pub entry: ToolEntry,
    pub mark: Option<PolicyMark>,
    pub failure_schemas: Vec<Arc<Value>>,
}

impl Pipeline {
    /// [`Pipeline::list_marked`], with each tool's declared failure schemas
    /// ([`Policy::failure_schema`], from every policy), for a door to advertise the failure branch.
    pub async fn list_with_failures(&self, principal: &Principal) -> Vec<ListedTool> {
        let marked = self.list_marked(principal).await;
        let policies = self.policies();
        marked
            .into_iter()
            .map(|(entry, mark)| {
                let failure_schemas = policies
                    .iter()
                    .filter_map(|policy| policy.failure_schema(&entry, principal))
                    .collect();
                ListedTool {
                    entry,
                    mark,
                    failure_schemas,
                }
            })
            .collect()
    }

    /// Every tool name the sources know now, whoever may call it.
    pub(crate) fn all_tool_names(&self) -> Vec<String> {
        self.sources()
            .iter()
            .flat_map(|source| source.entries())
            .map(|entry| entry.name)
            .collect()
    }
}

/// Records a call that was dropped before it finished.
struct Unfinished<'a> {
    pipeline: &'a Pipeline,
    context: &'a ToolContext,
    name: &'a str,
    /// The call's tool and server labels (`/metrics`).
    tool_label: &'a str,
    server: &'a str,
    digest: &'a str,
    started: Instant,
    armed: bool,
}

impl Drop for Unfinished<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.pipeline.audit(
                self.context,
                self.name,
                self.digest,
                Outcome::Cancelled,
                Some("the caller went away before the call finished".into()),
                self.started.elapsed(),
            );
            self.pipeline.count(
                &self.context.principal,
                self.tool_label,
                self.server,
                Outcome::Cancelled,
                self.started.elapsed(),
            );
        }
    }
}

/// Cuts what a model reads of a result ([`model_text`]) at `limit` characters, with a marker that says
/// so. Returns whether it cut; a cut result is replaced by its text (keeping the error flag), an uncut
/// one is left whole.
pub fn for_model(result: &mut ToolResult, limit: usize) -> bool {
    let text = model_text(result);
    let total = text.chars().count();
    if total <= limit {
        return false;
    }
    let kept: String = text.chars().take(limit).collect();
    let text = format!(
        "{kept}\n\n[portico: result truncated: showing the first {limit} of {total} characters; \
         ask for less (a narrower query, a range, a page) to see the rest]"
    );
    let is_error = result.is_error();
    *result = if is_error {
        ToolResult::error(text)
    } else {
        ToolResult::text(text)
    };
    true
}

/// The text of a result's content blocks; other block types are described, not inlined.
pub fn model_text(result: &ToolResult) -> String {
    let mut parts = Vec::new();
    for block in &result.content {
        match block.get("type").and_then(Value::as_str) {
            Some("text") => parts.push(
                block
                    .get("text")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
            ),
            Some("resource") => {
                let resource = block.get("resource").cloned().unwrap_or_default();
                match resource.get("text").and_then(Value::as_str) {
                    Some(text) => parts.push(text.to_string()),
                    None => parts.push(format!(
                        "[binary resource {}]",
                        resource.get("uri").and_then(Value::as_str).unwrap_or("?")
                    )),
                }
            }
            Some("resource_link") => parts.push(format!(
                "[resource link {}]",
                block.get("uri").and_then(Value::as_str).unwrap_or("?")
            )),
            Some(other) => parts.push(format!(
                "[{other} content, {}]",
                block
                    .get("mimeType")
                    .and_then(Value::as_str)
                    .unwrap_or("unknown type")
            )),
            None => {}
        }
    }
    if parts.is_empty()
        && let Some(structured) = &result.structured_content
    {
        return structured.to_string();
    }
    parts.join("\n")
}

/// `arguments` without the top-level `null`s of parameters `schema` does not require, or `None`
/// when it has none.
fn without_optional_nulls(schema: &Value, arguments: &Value) -> Option<Value> {
    let Value::Object(arguments) = arguments else {
        return None;
    };
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut omitted = arguments.clone();
    omitted.retain(|name, value| !value.is_null() || required.contains(&name.as_str()));
    (omitted.len() < arguments.len()).then_some(Value::Object(omitted))
}
