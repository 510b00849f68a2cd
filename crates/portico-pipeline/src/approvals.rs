//! Approvals: a call a policy holds (`approve`, the taint rule's `approval`) becomes a request bound
//! to exactly that call; once someone approves it, one retry of the same call consumes the grant and
//! runs. The store keeps requests and grants ([`portico_store::ApprovalRecord`]); this module decides
//! what a held call does and audits every decision.
//!
//! A grant binds the principal, the client an agent's run is for (`on_behalf_of`), the exposed tool name, the keyed digest of the canonical arguments
//! (the audit log's, stable across restarts), the policy's id (which changes with that policy's
//! config) and a digest of the tool's definition. It is consumed by one conditional `UPDATE` before
//! the call runs, so two concurrent retries run the tool at most once.

use std::sync::{Arc, RwLock, Weak};
use std::time::Duration;

use portico_store::{
    ApprovalAnswer, ApprovalBinding, ApprovalLimits, ApprovalRecord, ApprovalStatus, AuditRecord,
    Decided, NewApproval, Requested, Store, StoreError,
};
use serde_json::Value;

use portico_core::relay::Confirmation;

use crate::audit::{AuditSink, arguments_digest};
use crate::context::ToolContext;
use crate::pipeline::PipelineError;
use crate::progress::progress_messages;
use crate::source::ToolEntry;

/// How long a request waits for an answer, and a grant for its retry, unless configured.
pub const DEFAULT_APPROVAL_TTL: Duration = Duration::from_secs(600);

/// How long final requests (denied, consumed, expired), with the arguments they hold, are kept
/// after their time ran out, so an approver can still look one up.
pub const KEEP_DECIDED: Duration = Duration::from_secs(24 * 60 * 60);

/// The longest a request may wait, and a grant last, whatever the settings say (`config check`
/// refuses more): times are added to clocks, and an unbounded one would overflow them.
pub const MAX_APPROVAL_TTL: Duration = Duration::from_secs(7 * 24 * 60 * 60);

/// The longest a held call waits for an answer, whatever the settings say.
pub const MAX_APPROVAL_WAIT: Duration = Duration::from_secs(60 * 60);

/// How often a held call that waits tells its client it is still waiting.
const WAITING_NOTICE_EVERY: Duration = Duration::from_secs(15);

/// Who is asked to approve a held call (`[policy] approval_via`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ApprovalVia {
    /// Only the calling client, through elicitation; a client that cannot be asked is refused.
    Elicitation,
    /// Only out of band: the API, the CLI, the web page.
    OutOfBand,
    /// The calling client when it can be asked, else out of band.
    #[default]
    Both,
}

#[derive(Debug, Clone)]
pub struct ApprovalSettings {
    /// How long a request may wait for an answer; an approval gives its grant as long again.
    pub ttl: Duration,
    /// How long a held call waits for an answer before it returns `approval_required`.
    pub wait: Duration,
    pub limits: ApprovalLimits,
    pub via: ApprovalVia,
}

impl Default for ApprovalSettings {
    fn default() -> Self {
        ApprovalSettings {
            ttl: DEFAULT_APPROVAL_TTL,
            wait: Duration::ZERO,
            limits: ApprovalLimits::default(),
            via: ApprovalVia::default(),
        }
    }
}

/// Who answered a request, and through what.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApprovalChannel {
    Api,
    Cli,
    Web,
    Elicitation,
}

impl ApprovalChannel {
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalChannel::Api => "api",
            ApprovalChannel::Cli => "cli",
            ApprovalChannel::Web => "web",
            ApprovalChannel::Elicitation => "elicitation",
        }
    }

    pub fn parse(text: &str) -> Option<ApprovalChannel> {
        [
            ApprovalChannel::Api,
            ApprovalChannel::Cli,
            ApprovalChannel::Web,
            ApprovalChannel::Elicitation,
        ]
        .into_iter()
        .find(|channel| channel.as_str() == text)
    }
}

/// The audit log's outcomes of approval decisions (beside each call's own record).
pub mod outcome {
    pub const REQUESTED: &str = "approval_requested";
    pub const APPROVED: &str = "approval_granted";
    pub const DENIED: &str = "approval_denied";
    pub const CONSUMED: &str = "approval_consumed";
    pub const EXPIRED: &str = "approval_expired";
}

/// Why an approval could not be answered.
#[derive(Debug, thiserror::Error)]
pub enum ApprovalError {
    #[error(
        "no approval request {id}; it never existed or was swept after it ended (GET /api/approvals?status=all lists those kept)"
    )]
    NotFound { id: String },
    #[error(
        "approval {id} is {status}, not pending: {why}",
        status = .record.status.as_str(),
        why = not_pending_why(.record.status)
    )]
    NotPending {
        id: String,
        record: Box<ApprovalRecord>,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
}

fn not_pending_why(status: ApprovalStatus) -> &'static str {
    match status {
        ApprovalStatus::Approved => "it was already approved; retry the call to use it",
        ApprovalStatus::Denied => "it was denied, and a denied request can never be approved",
        ApprovalStatus::Consumed => "its grant was used; a new call needs a new approval",
        ApprovalStatus::Expired => "its time ran out; retry the call to request a new approval",
        ApprovalStatus::Pending => "it is pending",
    }
}

/// The approvals of one store. Cheap to clone.
#[derive(Clone)]
pub struct Approvals {
    inner: Arc<Inner>,
}

struct Inner {
    store: Store,
    settings: ApprovalSettings,
    audit: RwLock<Option<Arc<dyn AuditSink>>>,
    /// Bumped on every answer, so held calls that wait are woken by it instead of polling.
    answers: tokio::sync::watch::Sender<u64>,
    /// Told of every request made, answered or expired (the engine's live events).
    observer: RwLock<Option<ApprovalObserver>>,
}

/// What [`Approvals::set_observer`] installs: called with each request as it is once made,
/// answered, or expired.
pub type ApprovalObserver = Arc<dyn Fn(&ApprovalRecord) + Send + Sync>;

impl Approvals {
    /// `settings`' times are capped at [`MAX_APPROVAL_TTL`] and [`MAX_APPROVAL_WAIT`] (and the
    /// wait at the ttl): an embedder's huge value must not overflow a held call's clock.
    pub fn new(store: Store, mut settings: ApprovalSettings) -> Self {
        settings.ttl = settings.ttl.min(MAX_APPROVAL_TTL);
        settings.wait = settings.wait.min(MAX_APPROVAL_WAIT).min(settings.ttl);
        Approvals {
            inner: Arc::new(Inner {
                store,
                settings,
                audit: RwLock::default(),
                answers: tokio::sync::watch::Sender::new(0),
                observer: RwLock::default(),
            }),
        }
    }

    pub fn set_audit(&self, sink: Arc<dyn AuditSink>) {
        *self.inner.audit.write().expect("approvals audit lock") = Some(sink);
    }

    /// Calls `observer` with every request once it is made (pending), answered (approved or
    /// denied) or expired; never with a grant's use.
    pub fn set_observer(&self, observer: ApprovalObserver) {
        *self
            .inner
            .observer
            .write()
            .expect("approvals observer lock") = Some(observer);
    }

    fn observe(&self, record: &ApprovalRecord) {
        let observer = self
            .inner
            .observer
            .read()
            .expect("approvals observer lock")
            .clone();
        if let Some(observer) = observer {
            observer(record);
        }
    }

    /// Changes on every answer and expiry (what tool pins follow to repin an approved definition).
    pub fn answers(&self) -> tokio::sync::watch::Receiver<u64> {
        self.inner.answers.subscribe()
    }

    pub fn settings(&self) -> &ApprovalSettings {
        &self.inner.settings
    }

    fn ttl_ms(&self) -> i64 {
        i64::try_from(self.inner.settings.ttl.as_millis()).unwrap_or(i64::MAX)
    }

    /// One request, as it is now (expired if its time ran out).
    pub fn get(&self, id: &str) -> Result<Option<ApprovalRecord>, StoreError> {
        self.expire()?;
        self.inner.store.approval(id)
    }

    /// Requests with `status` (all when `None`), newest first.
    pub fn list(
        &self,
        status: Option<ApprovalStatus>,
        limit: usize,
    ) -> Result<Vec<ApprovalRecord>, StoreError> {
        self.expire()?;
        self.inner.store.approvals(status, limit)
    }

    /// Requests no longer pending, the most recently decided first (expired ones included).
    pub fn decisions(&self, limit: usize) -> Result<Vec<ApprovalRecord>, StoreError> {
        self.expire()?;
        self.inner.store.approval_decisions(limit)
    }

    /// Answers a pending request as `by` (a principal's label) through `via`; audited, and wakes the
    /// held calls waiting for it.
    pub fn decide(
        &self,
        id: &str,
        answer: ApprovalAnswer,
        by: &str,
        via: ApprovalChannel,
    ) -> Result<ApprovalRecord, ApprovalError> {
        let now = portico_core::time::now_ms();
        let decided =
            self.inner
                .store
                .approval_decide(id, &answer, by, via.as_str(), now, self.ttl_ms())?;
        let answered = match decided {
            Decided::Done(record) => {
                let (outcome, detail) = match &answer {
                    ApprovalAnswer::Approve => (
                        outcome::APPROVED,
                        format!("{id} approved by {by} via {}", via.as_str()),
                    ),
                    ApprovalAnswer::Deny { reason } => (
                        outcome::DENIED,
                        format!(
                            "{id} denied by {by} via {}{}",
                            via.as_str(),
                            reason
                                .as_deref()
                                .map(|r| format!(": {r}"))
                                .unwrap_or_default()
                        ),
                    ),
                };
                self.audit(by, &record, outcome, detail);
                self.observe(&record);
                Ok(record)
            }
            Decided::NotFound => Err(ApprovalError::NotFound { id: id.to_string() }),
            Decided::NotPending(record) => Err(ApprovalError::NotPending {
                id: id.to_string(),
                record: Box::new(record),
            }),
        };
        // After the audit: what an answer wakes (a waiting call, a repinned tool) is recorded after it.
        self.inner.answers.send_modify(|n| *n = n.wrapping_add(1));
        answered
    }

    /// Runs `work` on these approvals off the async runtime (see [`Store::run`]): the way async
    /// code uses the synchronous methods here, which wait on the store.
    pub async fn run<T, E>(
        &self,
        operation: &'static str,
        work: impl FnOnce(&Approvals) -> Result<T, E> + Send + 'static,
    ) -> Result<T, E>
    where
        T: Send + 'static,
        E: From<StoreError> + Send + 'static,
    {
        let approvals = self.clone();
        self.inner
            .store
            .run(operation, move |_| work(&approvals))
            .await
    }

    /// Marks requests whose time ran out as expired, auditing each once.
    pub fn expire(&self) -> Result<usize, StoreError> {
        let expired = self
            .inner
            .store
            .approvals_expire(portico_core::time::now_ms())?;
        for record in &expired {
            let was = if record.decided_at_ms.is_some() {
                "its grant was not used"
            } else {
                "nobody answered"
            };
            self.audit(
                &record.binding.principal,
                record,
                outcome::EXPIRED,
                format!("{} expired: {was} in time", record.id),
            );
            self.observe(record);
        }
        if !expired.is_empty() {
            self.inner.answers.send_modify(|n| *n = n.wrapping_add(1));
        }
        Ok(expired.len())
    }

    /// Expires what ran out and deletes final requests older than [`KEEP_DECIDED`].
    pub fn sweep(&self) -> Result<(), StoreError> {
        self.expire()?;
        let keep = i64::try_from(KEEP_DECIDED.as_millis()).unwrap_or(i64::MAX);
        self.inner
            .store
            .approvals_sweep(portico_core::time::now_ms().saturating_sub(keep))?;
        Ok(())
    }

    /// Sweeps every `every` until the last handle on these approvals is dropped.
    pub fn sweep_every(&self, every: Duration) {
        let weak: Weak<Inner> = Arc::downgrade(&self.inner);
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(every);
            ticks.tick().await;
            loop {
                ticks.tick().await;
                let Some(inner) = weak.upgrade() else { return };
                let approvals = Approvals { inner };
                let swept = approvals
                    .run("sweeping approval requests", Approvals::sweep)
                    .await;
                if let Err(error) = swept {
                    tracing::warn!("sweeping approval requests failed: {error}");
                }
            }
        });
    }

    fn audit(&self, caller: &str, record: &ApprovalRecord, outcome: &str, detail: String) {
        let sink = self
            .inner
            .audit
            .read()
            .expect("approvals audit lock")
            .clone();
        if let Some(sink) = sink {
            sink.record(AuditRecord {
                at_ms: portico_core::time::now_ms(),
                caller: caller.to_string(),
                tool: record.binding.tool.clone(),
                arguments_digest: record.binding.arguments_digest.clone(),
                outcome: outcome.to_string(),
                detail: Some(detail.chars().take(500).collect()),
                duration_ms: 0,
            });
        }
    }

    /// What a call a policy holds does: with a grant for exactly this call, uses it and lets the call
    /// run (`Ok`); after a denial that still stands, is refused; else requests (or reuses the pending
    /// request for) an approval, waits for an answer as long as configured, and is held.
    pub(crate) async fn gate(
        &self,
        hold: Hold<'_>,
        context: &ToolContext,
    ) -> Result<(), PipelineError> {
        let tool = hold.entry.name.as_str();
        let binding = ApprovalBinding {
            principal: context.principal.label(),
            tool: tool.to_string(),
            arguments_digest: hold.arguments_digest.to_string(),
            policy: hold.policy.to_string(),
            definition_digest: arguments_digest(&Value::Object((*hold.entry.definition).clone())),
            on_behalf_of: context.on_behalf_of.clone(),
        };
        // Who the relay below asks: the client at the far end, which answers as itself (an agent
        // asking its client does not approve its own call).
        let asked = context.client_label();
        let failed = |error: StoreError| {
            PipelineError::Source(portico_core::CallError::Failed(format!(
                "call to `{tool}` needs an approval, but the approvals store failed: {error}"
            )))
        };
        let now = portico_core::time::now_ms();
        if self
            .consume_off_runtime(&binding, now)
            .await
            .map_err(failed)?
        {
            return Ok(());
        }
        let denial = {
            let binding = binding.clone();
            self.run("reading approval denials", move |a| {
                a.inner.store.approval_denial(&binding, now)
            })
            .await
        };
        if let Some(denial) = denial.map_err(failed)? {
            return Err(denied(tool, &denial));
        }
        // Only the client the call came from is asked: its relay is the downstream client, never
        // an upstream.
        let askable = context
            .relay
            .caller
            .clone()
            .filter(|caller| caller.can_confirm());
        let via = self.inner.settings.via;
        if via == ApprovalVia::Elicitation && askable.is_none() {
            return Err(PipelineError::Refused {
                tool: tool.to_string(),
                reason: format!(
                    "{}; it must be approved by the calling client, which cannot be asked (it \
                     declared no elicitation), and [policy] approval_via is \"elicitation\"",
                    hold.reason
                ),
            });
        }
        let request = NewApproval {
            binding: binding.clone(),
            arguments: Value::Object(hold.arguments.clone()).to_string(),
            reason: hold.reason.to_string(),
            now_ms: now,
            ttl_ms: self.ttl_ms(),
        };
        let requested = self
            .run("requesting an approval", move |a| {
                a.inner
                    .store
                    .approval_request(&request, a.inner.settings.limits)
            })
            .await
            .map_err(|error| match error {
                full @ StoreError::ApprovalsFull { .. } => PipelineError::Refused {
                    tool: tool.to_string(),
                    reason: full.to_string(),
                },
                other => failed(other),
            })?;
        if let Requested::Created(record) = &requested {
            self.audit(
                &binding.principal,
                record,
                outcome::REQUESTED,
                format!(
                    "{} by {}{}: {}",
                    record.id,
                    hold.policy,
                    on_behalf(&binding),
                    hold.reason
                ),
            );
            self.observe(record);
        }
        let id = requested.record().id.clone();
        let held = || PipelineError::ApprovalRequired {
            tool: tool.to_string(),
            reason: hold.reason.to_string(),
            request_id: Some(id.clone()),
        };
        if let Some(caller) = askable.filter(|_| via != ApprovalVia::OutOfBand) {
            let record = requested.record();
            let question = format!(
                "Approve this call of `{tool}` by {}{}?\nArguments: {}\nWhy it needs approval: {}\n\
                 (approval request {id}, also at {})",
                binding.principal,
                on_behalf(&binding),
                // Escaped as the page and the CLI show them: nothing in them is invisible.
                crate::escape_invisible(&record.arguments),
                hold.reason,
                approval_link(&id)
            );
            match caller.confirm(question).await {
                Ok(confirmation) => {
                    let answer = match confirmation {
                        Confirmation::Yes => ApprovalAnswer::Approve,
                        Confirmation::No => ApprovalAnswer::Deny {
                            reason: Some("declined at the calling client".into()),
                        },
                        Confirmation::Cancelled => ApprovalAnswer::Deny {
                            reason: Some("cancelled at the calling client".into()),
                        },
                    };
                    let decided = {
                        let (id, asked) = (id.clone(), asked.clone());
                        self.run("answering an approval request", move |a| {
                            a.decide(&id, answer, &asked, ApprovalChannel::Elicitation)
                        })
                        .await
                    };
                    match decided {
                        Ok(record) if record.status == ApprovalStatus::Approved => {
                            let now = portico_core::time::now_ms();
                            return if self
                                .consume_off_runtime(&binding, now)
                                .await
                                .map_err(failed)?
                            {
                                Ok(())
                            } else {
                                Err(held())
                            };
                        }
                        Ok(record) => return Err(denied(tool, &record)),
                        // Answered out of band meanwhile: that answer stands (below).
                        Err(ApprovalError::NotPending { .. }) => {}
                        Err(ApprovalError::Store(error)) => return Err(failed(error)),
                        Err(ApprovalError::NotFound { .. }) => return Err(held()),
                    }
                }
                Err(error) => {
                    tracing::debug!(
                        "asking the calling client to approve `{tool}` failed: {error}"
                    );
                    if via == ApprovalVia::Elicitation {
                        return Err(held());
                    }
                }
            }
            if let Some(record) = self.record_off_runtime(&id).await.map_err(failed)? {
                match record.status {
                    ApprovalStatus::Approved => {
                        let now = portico_core::time::now_ms();
                        if self
                            .consume_off_runtime(&binding, now)
                            .await
                            .map_err(failed)?
                        {
                            return Ok(());
                        }
                    }
                    ApprovalStatus::Denied => return Err(denied(tool, &record)),
                    _ => {}
                }
            }
        }
        let wait = self.inner.settings.wait;
        if wait.is_zero() {
            return Err(held());
        }

        // Waiting: woken by every answer (and expiry), never polling the store on a timer.
        let started = tokio::time::Instant::now();
        let deadline = started
            .checked_add(wait)
            .unwrap_or_else(|| started + MAX_APPROVAL_WAIT);
        let mut answers = self.inner.answers.subscribe();
        let progress = progress_messages(context);
        let notice = format!("waiting for approval at {}", approval_link(&id));
        let mut next_notice = tokio::time::Instant::now();
        let outcome = loop {
            let record = self.record_off_runtime(&id).await.map_err(failed)?;
            match record.as_ref().map(|r| r.status) {
                Some(ApprovalStatus::Pending) => {}
                Some(ApprovalStatus::Approved) => {
                    let now = portico_core::time::now_ms();
                    break if self
                        .consume_off_runtime(&binding, now)
                        .await
                        .map_err(failed)?
                    {
                        Ok(())
                    } else {
                        // Another call of the same binding took the grant first.
                        Err(held())
                    };
                }
                Some(ApprovalStatus::Denied) => {
                    break Err(denied(tool, record.as_ref().expect("a denied record")));
                }
                _ => break Err(held()),
            }
            // The notice's clock runs whether or not anyone listens: it is also what the sleep
            // below waits for, and must not stay in the past.
            if tokio::time::Instant::now() >= next_notice {
                if let Some(progress) = &progress {
                    progress.send(notice.clone());
                }
                next_notice = tokio::time::Instant::now() + WAITING_NOTICE_EVERY;
            }
            tokio::select! {
                changed = answers.changed() => {
                    if changed.is_err() {
                        break Err(held());
                    }
                }
                _ = tokio::time::sleep_until(next_notice.min(deadline)) => {
                    if tokio::time::Instant::now() >= deadline {
                        break Err(held());
                    }
                }
            }
        };
        if let Some(progress) = &progress {
            progress.flush().await;
        }
        outcome
    }

    /// [`Approvals::consume`] off the async runtime.
    async fn consume_off_runtime(
        &self,
        binding: &ApprovalBinding,
        now: i64,
    ) -> Result<bool, StoreError> {
        let binding = binding.clone();
        self.run("using an approval grant", move |a| a.consume(&binding, now))
            .await
    }

    /// One request as stored (not expired first: the waiting loop reads it often), off the
    /// async runtime.
    async fn record_off_runtime(&self, id: &str) -> Result<Option<ApprovalRecord>, StoreError> {
        let id = id.to_string();
        self.run("reading an approval request", move |a| {
            a.inner.store.approval(&id)
        })
        .await
    }

    /// Uses a grant for `binding` if there is one; audited.
    fn consume(&self, binding: &ApprovalBinding, now: i64) -> Result<bool, StoreError> {
        let Some(grant) = self.inner.store.approval_consume(binding, now)? else {
            return Ok(false);
        };
        self.audit(
            &binding.principal,
            &grant,
            outcome::CONSUMED,
            format!(
                "{} (approved by {} via {})",
                grant.id,
                grant.decided_by.as_deref().unwrap_or("?"),
                grant.decided_via.as_deref().unwrap_or("?")
            ),
        );
        Ok(true)
    }
}

/// A call a policy holds, as the pipeline hands it to [`Approvals::gate`].
pub(crate) struct Hold<'a> {
    pub entry: &'a ToolEntry,
    pub arguments: &'a portico_core::JsonObject,
    pub arguments_digest: &'a str,
    pub policy: &'a str,
    pub reason: &'a str,
}

/// ` on behalf of client:a` when an agent's run for a client made the call, else nothing.
fn on_behalf(binding: &ApprovalBinding) -> String {
    binding
        .on_behalf_of
        .as_deref()
        .map(|client| format!(" on behalf of {client}"))
        .unwrap_or_default()
}

/// Where the daemon shows a request: `/approvals/{id}`.
pub fn approval_path(id: &str) -> String {
    format!("/approvals/{id}")
}

/// The daemon's own address (`http://127.0.0.1:4200`) once its door listens: one per process.
static APPROVAL_BASE_URL: std::sync::RwLock<Option<String>> = std::sync::RwLock::new(None);

/// Makes the messages that point at an approval page name it in full, at `base_url` (the
/// daemon's `scheme://addr`), so a person can open it from wherever the message is shown.
pub fn set_approval_base_url(base_url: &str) {
    *APPROVAL_BASE_URL.write().unwrap_or_else(|e| e.into_inner()) =
        Some(base_url.trim_end_matches('/').to_string());
}

/// Where a person opens a request: the page's full URL on the daemon once its door listens, else
/// (no door in this process) its path on the daemon.
pub fn approval_link(id: &str) -> String {
    let base = APPROVAL_BASE_URL
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    match base {
        Some(base) => format!("{base}{}", approval_path(id)),
        None => format!("{} on the daemon", approval_path(id)),
    }
}

/// The refusal of a retry while a denial of the same call stands.
fn denied(tool: &str, denial: &ApprovalRecord) -> PipelineError {
    PipelineError::Refused {
        tool: tool.to_string(),
        reason: format!(
            "approval {} of this exact call was denied by {} via {}{}; the same call is refused \
             until {}",
            denial.id,
            denial.decided_by.as_deref().unwrap_or("?"),
            denial.decided_via.as_deref().unwrap_or("?"),
            denial
                .deny_reason
                .as_deref()
                .map(|r| format!(" ({r})"))
                .unwrap_or_default(),
            portico_core::time::rfc3339(denial.expires_at_ms),
        ),
    }
}
