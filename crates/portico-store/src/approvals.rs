//! Approval requests and their single-use grants: a call a policy holds is stored as a request bound
//! to exactly that call (principal, the client an agent runs for, tool, argument digest, policy,
//! definition digest); someone
//! approves or denies it; an approved request is a grant that one retry of the same call consumes.
//!
//! States: `pending` -> `approved` | `denied` | `expired`; `approved` -> `consumed` | `expired`.
//! `denied`, `consumed` and `expired` are final. Every transition is one conditional `UPDATE` whose
//! changed-row count says whether it happened, so two replicas or two concurrent retries cannot both
//! move the same request (two retries of one grant: one consumes it, the other finds none). What
//! reads before it writes (a new request, an answer, a use) is one transaction of its own.
//!
//! Unlike the audit log, a request keeps the call's arguments (the approver must see what they
//! approve) until it is swept ([`Store::approvals_sweep`]).

use crate::db::{Db, DbError, Row, ToParam, params};

use crate::{Store, StoreError};

/// A request's status, as stored and shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ApprovalStatus {
    Pending,
    Approved,
    Denied,
    Consumed,
    Expired,
}

impl ApprovalStatus {
    pub const ALL: [ApprovalStatus; 5] = [
        ApprovalStatus::Pending,
        ApprovalStatus::Approved,
        ApprovalStatus::Denied,
        ApprovalStatus::Consumed,
        ApprovalStatus::Expired,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalStatus::Pending => "pending",
            ApprovalStatus::Approved => "approved",
            ApprovalStatus::Denied => "denied",
            ApprovalStatus::Consumed => "consumed",
            ApprovalStatus::Expired => "expired",
        }
    }

    pub fn parse(text: &str) -> Option<ApprovalStatus> {
        ApprovalStatus::ALL
            .into_iter()
            .find(|status| status.as_str() == text)
    }
}

/// What a request (and its grant) is bound to: a grant is used only by a call that matches all of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalBinding {
    /// The caller's label (`client:http`, `agent:x`).
    pub principal: String,
    /// The exposed tool name.
    pub tool: String,
    /// The keyed digest of the canonical arguments (the audit log's).
    pub arguments_digest: String,
    /// Which policy required it, in a form that changes when that policy's config changes.
    pub policy: String,
    /// A digest of the tool's definition when the request was made.
    pub definition_digest: String,
    /// The client whose call started the agent run that made this call (`client:a`); `None` for
    /// a client's own call.
    pub on_behalf_of: Option<String>,
}

/// A request to store.
#[derive(Debug, Clone)]
pub struct NewApproval {
    pub binding: ApprovalBinding,
    /// The validated arguments, as JSON text.
    pub arguments: String,
    pub reason: String,
    pub now_ms: i64,
    /// How long it may wait for an answer.
    pub ttl_ms: i64,
}

/// How many pending requests the store keeps: a flood of held calls is refused, not stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApprovalLimits {
    pub per_principal: usize,
    pub total: usize,
}

impl Default for ApprovalLimits {
    fn default() -> Self {
        ApprovalLimits {
            per_principal: 64,
            total: 1024,
        }
    }
}

/// One stored request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalRecord {
    pub id: String,
    pub binding: ApprovalBinding,
    pub arguments: String,
    pub reason: String,
    pub status: ApprovalStatus,
    pub created_at_ms: i64,
    /// Until when a pending request may be answered, an approved one used, a denial stands.
    pub expires_at_ms: i64,
    pub decided_at_ms: Option<i64>,
    pub decided_by: Option<String>,
    pub decided_via: Option<String>,
    pub deny_reason: Option<String>,
    pub consumed_at_ms: Option<i64>,
    /// What is to be approved: one call, or an upstream tool's changed definition.
    pub kind: ApprovalKind,
    /// For a `definition` request: the pinned definition (JSON text) the tool had.
    pub previous_definition: Option<String>,
    /// For a `definition` request: the definition (JSON text) the upstream offers now.
    pub new_definition: Option<String>,
}

/// What a request asks someone to approve.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ApprovalKind {
    /// One call, bound to its principal, tool, arguments, policy and the tool's definition.
    Call,
    /// A pinned upstream tool's new definition (`[policy] pin_tools`).
    Definition,
}

impl ApprovalKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalKind::Call => "call",
            ApprovalKind::Definition => "definition",
        }
    }

    /// Only this crate writes the column; anything but `definition` reads as a call.
    fn parse(text: &str) -> ApprovalKind {
        if text == "definition" {
            ApprovalKind::Definition
        } else {
            ApprovalKind::Call
        }
    }
}

/// What [`Store::approval_request`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Requested {
    /// A new pending request.
    Created(ApprovalRecord),
    /// The same call was already pending: its request, unchanged.
    Reused(ApprovalRecord),
}

impl Requested {
    pub fn record(&self) -> &ApprovalRecord {
        match self {
            Requested::Created(record) | Requested::Reused(record) => record,
        }
    }
}

/// An answer to a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApprovalAnswer {
    Approve,
    Deny { reason: Option<String> },
}

/// What [`Store::approval_decide`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decided {
    /// The request was pending and now carries the answer.
    Done(ApprovalRecord),
    /// No request has that id.
    NotFound,
    /// The request was not pending (answered, used or expired): it is unchanged.
    NotPending(ApprovalRecord),
}

pub(crate) const COLUMNS: &str = "id, principal, tool, arguments_digest, policy, definition_digest, \
     arguments, reason, status, created_at_ms, expires_at_ms, decided_at_ms, decided_by, decided_via, \
     deny_reason, consumed_at_ms, kind, previous_definition, new_definition, on_behalf_of";

/// The binding as a `WHERE` clause over parameters ?1..?6 (see [`ApprovalBinding::params`]).
/// `IS NOT DISTINCT FROM` so that a NULL `on_behalf_of` (a client's own call) matches NULL; both
/// databases spell it so (SQLite's shorter `IS` is its own).
pub(crate) const SAME_BINDING: &str = "principal = ?1 AND tool = ?2 AND arguments_digest = ?3 AND policy = ?4 \
     AND definition_digest = ?5 AND on_behalf_of IS NOT DISTINCT FROM ?6";

impl ApprovalBinding {
    /// The parameters [`SAME_BINDING`] reads, ?1..?6.
    pub(crate) fn params(&self) -> [&dyn ToParam; 6] {
        [
            &self.principal,
            &self.tool,
            &self.arguments_digest,
            &self.policy,
            &self.definition_digest,
            &self.on_behalf_of,
        ]
    }

    /// [`ApprovalBinding::params`] and `now_ms` as ?7, for a statement that also checks the time.
    /// (Each statement binds exactly the parameters it names: PostgreSQL cannot prepare one that
    /// skips a number, nor bind more than it names.)
    pub(crate) fn params_at<'a>(&'a self, now_ms: &'a i64) -> [&'a dyn ToParam; 7] {
        let [
            principal,
            tool,
            arguments_digest,
            policy,
            definition_digest,
            on_behalf_of,
        ] = self.params();
        [
            principal,
            tool,
            arguments_digest,
            policy,
            definition_digest,
            on_behalf_of,
            now_ms,
        ]
    }
}

pub(crate) fn record_from_row(row: &Row<'_>) -> Result<ApprovalRecord, DbError> {
    let status: String = row.get(8)?;
    Ok(ApprovalRecord {
        id: row.get(0)?,
        binding: ApprovalBinding {
            principal: row.get(1)?,
            tool: row.get(2)?,
            arguments_digest: row.get(3)?,
            policy: row.get(4)?,
            definition_digest: row.get(5)?,
            on_behalf_of: row.get(19)?,
        },
        arguments: row.get(6)?,
        reason: row.get(7)?,
        // Only this module writes `status`; an unknown word can only be a damaged row, and
        // reading it as expired makes it unusable rather than unreadable.
        status: ApprovalStatus::parse(&status).unwrap_or(ApprovalStatus::Expired),
        created_at_ms: row.get(9)?,
        expires_at_ms: row.get(10)?,
        decided_at_ms: row.get(11)?,
        decided_by: row.get(12)?,
        decided_via: row.get(13)?,
        deny_reason: row.get(14)?,
        consumed_at_ms: row.get(15)?,
        kind: ApprovalKind::parse(&row.get::<String>(16)?),
        previous_definition: row.get(17)?,
        new_definition: row.get(18)?,
    })
}

/// A new request id: `apr_` and 128 random bits in hex (URL-safe).
pub(crate) fn new_id() -> String {
    format!("apr_{:032x}", rand::random::<u128>())
}

/// The request `id`, read on `db` (inside the caller's transaction, if any).
fn approval_by_id(db: &Db<'_>, id: &str) -> Result<Option<ApprovalRecord>, DbError> {
    db.query_opt(
        &format!("SELECT {COLUMNS} FROM approvals WHERE id = ?1"),
        params![id],
        record_from_row,
    )
}

/// Moves the oldest approved, unexpired grant for `binding` to consumed (see
/// [`Store::approval_consume`] for why in a transaction of its own).
fn consume_grant(
    db: &Db<'_>,
    binding: &ApprovalBinding,
    now_ms: i64,
) -> Result<Option<ApprovalRecord>, DbError> {
    db.query_opt(
        &format!(
            "UPDATE approvals SET status = 'consumed', consumed_at_ms = ?7 \
             WHERE id = (SELECT id FROM approvals WHERE {SAME_BINDING} \
                         AND kind = 'call' AND status = 'approved' AND expires_at_ms > ?7 \
                         ORDER BY decided_at_ms, id LIMIT 1) \
               AND status = 'approved' AND expires_at_ms > ?7 \
             RETURNING {COLUMNS}"
        ),
        &binding.params_at(&now_ms),
        record_from_row,
    )
}

impl Store {
    /// Stores a pending request for `new`'s call, or returns the one already pending for the same
    /// binding. Refused with [`StoreError::ApprovalsFull`] when the caller, or everyone together, has
    /// as many pending requests as `limits` allow.
    pub fn approval_request(
        &self,
        new: &NewApproval,
        limits: ApprovalLimits,
    ) -> Result<Requested, StoreError> {
        self.request_of_kind(new, limits, ApprovalKind::Call, None)
    }

    /// [`Store::approval_request`] for a request of `kind`; a `definition` request carries the
    /// pinned and the new definition.
    ///
    /// The lookup of a pending request, the count against `limits` and the insert are one
    /// transaction: on SQLite it holds the write lock throughout, on PostgreSQL it is SERIALIZABLE,
    /// so two replicas storing the same call, or the last request that fits, cannot both succeed:
    /// one of them is run again and then finds the other's request (reused, or counted).
    pub(crate) fn request_of_kind(
        &self,
        new: &NewApproval,
        limits: ApprovalLimits,
        kind: ApprovalKind,
        definitions: Option<(&str, &str)>,
    ) -> Result<Requested, StoreError> {
        const OPERATION: &str = "storing an approval request";
        let binding = &new.binding;
        let counted_as = binding.on_behalf_of.as_ref().unwrap_or(&binding.principal);
        self.in_immediate_transaction(OPERATION, |db| {
            let existing = db
                .query_opt(
                    &format!(
                        "SELECT {COLUMNS} FROM approvals WHERE {SAME_BINDING} \
                         AND status = 'pending' AND expires_at_ms > ?7 \
                         ORDER BY created_at_ms DESC LIMIT 1"
                    ),
                    &binding.params_at(&new.now_ms),
                    record_from_row,
                )
                .map_err(self.sql_error(OPERATION))?;
            if let Some(existing) = existing {
                return Ok(Requested::Reused(existing));
            }
            let (mine, all): (usize, usize) = db
                .query_one(
                    // Counted per client: an agent's requests count for the client it runs for,
                    // so one client cannot fill an agent's share for everyone. (A CASE rather than
                    // summing the comparison: PostgreSQL does not sum booleans.)
                    "SELECT coalesce(sum(CASE WHEN coalesce(on_behalf_of, principal) = ?1 \
                                         THEN 1 ELSE 0 END), 0), count(*) \
                     FROM approvals WHERE status = 'pending' AND expires_at_ms > ?2",
                    params![counted_as, new.now_ms],
                    |row| Ok((row.get(0)?, row.get(1)?)),
                )
                .map_err(self.sql_error("counting pending approval requests"))?;
            if mine >= limits.per_principal || all >= limits.total {
                return Err(StoreError::ApprovalsFull {
                    path: self.label().to_path_buf(),
                    principal: counted_as.clone(),
                    pending: mine,
                    per_principal: limits.per_principal,
                    total_pending: all,
                    total: limits.total,
                });
            }
            let record = ApprovalRecord {
                id: new_id(),
                binding: binding.clone(),
                arguments: new.arguments.clone(),
                reason: new.reason.clone(),
                status: ApprovalStatus::Pending,
                created_at_ms: new.now_ms,
                expires_at_ms: new.now_ms.saturating_add(new.ttl_ms),
                decided_at_ms: None,
                decided_by: None,
                decided_via: None,
                deny_reason: None,
                consumed_at_ms: None,
                kind,
                previous_definition: definitions.map(|(previous, _)| previous.to_string()),
                new_definition: definitions.map(|(_, new)| new.to_string()),
            };
            db.execute(
                "INSERT INTO approvals (id, principal, tool, arguments_digest, policy, \
                   definition_digest, arguments, reason, status, created_at_ms, expires_at_ms, \
                   kind, previous_definition, new_definition, on_behalf_of) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 'pending', ?9, ?10, ?11, ?12, ?13, ?14)",
                params![
                    record.id,
                    binding.principal,
                    binding.tool,
                    binding.arguments_digest,
                    binding.policy,
                    binding.definition_digest,
                    record.arguments,
                    record.reason,
                    record.created_at_ms,
                    record.expires_at_ms,
                    record.kind.as_str(),
                    record.previous_definition,
                    record.new_definition,
                    binding.on_behalf_of
                ],
            )
            .map_err(self.sql_error(OPERATION))?;
            Ok(Requested::Created(record))
        })
    }

    pub fn approval(&self, id: &str) -> Result<Option<ApprovalRecord>, StoreError> {
        self.with_db("reading an approval request", |db| approval_by_id(db, id))
    }

    /// How many requests are `pending` (waiting for an answer), for `/metrics`.
    pub fn pending_approval_count(&self) -> Result<usize, StoreError> {
        self.with_db("counting pending approval requests", |db| {
            db.query_one(
                "SELECT count(*) FROM approvals WHERE status = ?1",
                params![ApprovalStatus::Pending.as_str()],
                |row| row.get(0),
            )
        })
    }

    /// Requests with `status` (all when `None`), newest first, at most `limit`.
    pub fn approvals(
        &self,
        status: Option<ApprovalStatus>,
        limit: usize,
    ) -> Result<Vec<ApprovalRecord>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.with_db("listing approval requests", |db| match status {
            Some(status) => db.query_map(
                &format!(
                    "SELECT {COLUMNS} FROM approvals WHERE status = ?1 \
                     ORDER BY created_at_ms DESC, id LIMIT ?2"
                ),
                params![status.as_str(), limit],
                record_from_row,
            ),
            None => db.query_map(
                &format!(
                    "SELECT {COLUMNS} FROM approvals ORDER BY created_at_ms DESC, id LIMIT ?1"
                ),
                params![limit],
                record_from_row,
            ),
        })
    }

    /// Requests no longer pending, the most recently decided first (one that expired unanswered
    /// counts as decided when it expired), at most `limit`.
    pub fn approval_decisions(&self, limit: usize) -> Result<Vec<ApprovalRecord>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.with_db("listing approval decisions", |db| {
            db.query_map(
                &format!(
                    "SELECT {COLUMNS} FROM approvals WHERE status != 'pending' \
                     ORDER BY coalesce(decided_at_ms, expires_at_ms) DESC, id LIMIT ?1"
                ),
                params![limit],
                record_from_row,
            )
        })
    }

    /// Answers a pending, unexpired request. An approval starts the grant's own clock: it may be used
    /// for `ttl_ms` from now. A denial stands (refusing retries of the same call) for `ttl_ms` from now.
    ///
    /// One transaction: the conditional `UPDATE` lets exactly one of two answers (from two replicas,
    /// or an answer and an expiry) move the request, and the record reported when it did not move is
    /// the one that stopped it.
    pub fn approval_decide(
        &self,
        id: &str,
        answer: &ApprovalAnswer,
        decided_by: &str,
        decided_via: &str,
        now_ms: i64,
        ttl_ms: i64,
    ) -> Result<Decided, StoreError> {
        const OPERATION: &str = "answering an approval request";
        let (status, deny_reason) = match answer {
            ApprovalAnswer::Approve => (ApprovalStatus::Approved, None),
            ApprovalAnswer::Deny { reason } => (ApprovalStatus::Denied, reason.as_deref()),
        };
        let expires_at_ms = now_ms.saturating_add(ttl_ms);
        self.in_db_transaction(OPERATION, |db| {
            let answered = db.query_opt(
                &format!(
                    "UPDATE approvals SET status = ?2, decided_at_ms = ?3, decided_by = ?4, \
                       decided_via = ?5, deny_reason = ?6, expires_at_ms = ?7 \
                     WHERE id = ?1 AND status = 'pending' AND expires_at_ms > ?3 \
                     RETURNING {COLUMNS}"
                ),
                params![
                    id,
                    status.as_str(),
                    now_ms,
                    decided_by,
                    decided_via,
                    deny_reason,
                    expires_at_ms
                ],
                record_from_row,
            )?;
            if let Some(record) = answered {
                return Ok(Decided::Done(record));
            }
            // Not pending, or pending past its time: the latter is expired now, and says so. Only
            // this request: the others whose time ran out are left for `approvals_expire`, whose
            // caller audits each expiry (what this returns for them would be dropped).
            db.execute(
                "UPDATE approvals SET status = 'expired' \
                 WHERE id = ?1 AND status IN ('pending', 'approved') AND expires_at_ms <= ?2",
                params![id, now_ms],
            )?;
            Ok(match approval_by_id(db, id)? {
                Some(record) => Decided::NotPending(record),
                None => Decided::NotFound,
            })
        })
    }

    /// Uses the grant for `binding`, if there is an approved, unexpired one, the oldest first.
    ///
    /// Exactly once across replicas: the `UPDATE` is conditional on the grant still being approved,
    /// so of two callers that chose the same grant only one moves it; and it runs in a transaction of
    /// its own (SERIALIZABLE on PostgreSQL), so the one that lost is run again and then chooses
    /// among the grants still approved, rather than reporting none while another grant for the same
    /// binding is there (which a lone statement at READ COMMITTED would, having chosen its grant
    /// before it waited for the other's lock).
    pub fn approval_consume(
        &self,
        binding: &ApprovalBinding,
        now_ms: i64,
    ) -> Result<Option<ApprovalRecord>, StoreError> {
        self.in_db_transaction("using an approval", |db| consume_grant(db, binding, now_ms))
    }

    /// The denial that still stands for `binding`, if any: the newest denied request whose time has
    /// not run out.
    pub fn approval_denial(
        &self,
        binding: &ApprovalBinding,
        now_ms: i64,
    ) -> Result<Option<ApprovalRecord>, StoreError> {
        self.with_db("reading approval denials", |db| {
            db.query_opt(
                &format!(
                    "SELECT {COLUMNS} FROM approvals WHERE {SAME_BINDING} \
                     AND kind = 'call' AND status = 'denied' AND expires_at_ms > ?7 \
                     ORDER BY decided_at_ms DESC, id LIMIT 1"
                ),
                &binding.params_at(&now_ms),
                record_from_row,
            )
        })
    }

    /// Marks every pending request and unused grant whose time has run out as expired, and returns
    /// them (so each expiry can be audited once).
    ///
    /// One conditional statement, on its own: when replicas expire at the same time, each row
    /// changes (and is returned) in exactly one of them, since on PostgreSQL a statement that waited
    /// for another's row lock checks the row's new status again before it changes it; and an expiry
    /// racing an answer or a use of the same request loses or wins as a whole.
    pub fn approvals_expire(&self, now_ms: i64) -> Result<Vec<ApprovalRecord>, StoreError> {
        let expired = self.with_db("expiring approval requests", |db| {
            db.query_map(
                &format!(
                    "UPDATE approvals SET status = 'expired' \
                     WHERE status IN ('pending', 'approved') AND expires_at_ms <= ?1 \
                     RETURNING {COLUMNS}"
                ),
                params![now_ms],
                record_from_row,
            )
        })?;
        if !expired.is_empty() {
            self.committed();
        }
        Ok(expired)
    }

    /// Deletes final requests (denied, consumed, expired) whose time ran out before `before_ms`, and
    /// with them the arguments they kept. Returns how many. One statement: replicas sweeping at once
    /// delete each row once between them, and a row still in use is never final.
    pub fn approvals_sweep(&self, before_ms: i64) -> Result<usize, StoreError> {
        let deleted = self.with_db("sweeping old approval requests", |db| {
            db.execute(
                // Both times before `before_ms` (SQLite's two-argument `max` is PostgreSQL's
                // `greatest`; two comparisons say the same in both).
                "DELETE FROM approvals WHERE status IN ('denied', 'consumed', 'expired') \
                 AND expires_at_ms < ?1 AND coalesce(consumed_at_ms, 0) < ?1",
                params![before_ms],
            )
        })?;
        if deleted > 0 {
            self.committed();
        }
        Ok(deleted)
    }
}

/// Two replicas racing on one PostgreSQL schema, for the tests of what must happen once across
/// them (here and in `pins`).
#[cfg(test)]
pub(crate) mod replicas {
    use std::sync::Barrier;

    use crate::Store;

    /// Two handles on one fresh schema of the test server, as two `portico serve` processes sharing
    /// `[store] url` would have; `None` when the PostgreSQL tests are skipped.
    pub(crate) fn two() -> Option<(Store, Store)> {
        let url = crate::testing::postgres_test_url()?;
        let open = || Store::open_postgres(&url, 4).expect("opening a replica of the test store");
        Some((open(), open()))
    }

    /// Runs `each(store, replica, thread)` on `threads` threads for each of `stores`, all released
    /// at the same moment, and returns what they returned, replica by replica.
    pub(crate) fn race<T: Send>(
        stores: [&Store; 2],
        threads: usize,
        each: impl Fn(&Store, usize, usize) -> T + Sync,
    ) -> Vec<T> {
        let start = Barrier::new(threads * stores.len());
        std::thread::scope(|scope| {
            let handles: Vec<_> = (0..threads * stores.len())
                .map(|n| {
                    let (replica, thread) = (n % stores.len(), n / stores.len());
                    let (start, each, store) = (&start, &each, stores[replica]);
                    scope.spawn(move || {
                        start.wait();
                        each(store, replica, thread)
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|handle| handle.join().expect("a racing thread panicked"))
                .collect()
        })
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;
    use crate::both_backends;

    fn binding(principal: &str, digest: &str) -> ApprovalBinding {
        ApprovalBinding {
            principal: principal.into(),
            tool: "memory_store".into(),
            arguments_digest: digest.into(),
            policy: "policies[0]@aa".into(),
            definition_digest: "dd".into(),
            on_behalf_of: None,
        }
    }

    fn new(principal: &str, digest: &str, now_ms: i64) -> NewApproval {
        NewApproval {
            binding: binding(principal, digest),
            arguments: r#"{"key":"k"}"#.into(),
            reason: "owners approve".into(),
            now_ms,
            ttl_ms: 1_000,
        }
    }

    fn request(store: &Store, new: &NewApproval) -> Requested {
        store
            .approval_request(new, ApprovalLimits::default())
            .unwrap()
    }

    both_backends! {
        fn only_requests_waiting_for_an_answer_count_as_pending(store) {
            assert_eq!(store.pending_approval_count().unwrap(), 0);
            let first = request(&store, &new("client:a", "d1", 100))
                .record()
                .clone();
            request(&store, &new("client:a", "d2", 100));
            request(&store, &new("client:b", "d3", 100));
            assert_eq!(store.pending_approval_count().unwrap(), 3);
            store
                .approval_decide(&first.id, &ApprovalAnswer::Approve, "me", "cli", 200, 1_000)
                .unwrap();
            assert_eq!(store.pending_approval_count().unwrap(), 2);
        }
    }

    both_backends! {
        fn decisions_are_the_requests_no_longer_pending_most_recently_decided_first(store) {
            let first = request(&store, &new("client:a", "d1", 100))
                .record()
                .clone();
            let second = request(&store, &new("client:a", "d2", 110))
                .record()
                .clone();
            let unanswered = request(&store, &new("client:a", "d3", 120))
                .record()
                .clone();
            let pending = request(&store, &new("client:a", "d4", 5_000))
                .record()
                .clone();
            // Decided in the other order than made.
            store
                .approval_decide(&second.id, &ApprovalAnswer::Approve, "x", "web", 200, 1_000)
                .unwrap();
            store
                .approval_decide(
                    &first.id,
                    &ApprovalAnswer::Deny { reason: None },
                    "x",
                    "api",
                    300,
                    1_000,
                )
                .unwrap();
            // Expires at 1_120 with nobody answering.
            store.approvals_expire(2_000).unwrap();
            let ids: Vec<String> = store
                .approval_decisions(10)
                .unwrap()
                .into_iter()
                .map(|r| r.id)
                .collect();
            assert_eq!(ids, [unanswered.id.clone(), first.id.clone(), second.id]);
            assert!(!ids.contains(&pending.id));
            assert_eq!(store.approval_decisions(1).unwrap()[0].id, unanswered.id);
        }
    }

    both_backends! {
        fn an_agents_calls_for_two_clients_are_two_requests_with_their_own_answers(store) {
            let for_client = |client: &str, now_ms| NewApproval {
                binding: ApprovalBinding {
                    on_behalf_of: Some(client.into()),
                    ..binding("agent:x", "d1")
                },
                ..new("agent:x", "d1", now_ms)
            };
            let a = request(&store, &for_client("client:a", 100))
                .record()
                .clone();
            let Requested::Created(b) = request(&store, &for_client("client:b", 100)) else {
                panic!("client:b's call reused client:a's request")
            };
            assert_ne!(a.id, b.id);
            assert_eq!(
                store
                    .approval(&a.id)
                    .unwrap()
                    .unwrap()
                    .binding
                    .on_behalf_of
                    .as_deref(),
                Some("client:a")
            );
            // The agent's own call (for no client) is a third.
            assert_ne!(
                request(&store, &new("agent:x", "d1", 100)).record().id,
                a.id
            );
            store
                .approval_decide(
                    &a.id,
                    &ApprovalAnswer::Approve,
                    "client:default",
                    "api",
                    200,
                    1_000,
                )
                .unwrap();
            store
                .approval_decide(
                    &b.id,
                    &ApprovalAnswer::Deny { reason: None },
                    "client:b",
                    "elicitation",
                    200,
                    1_000,
                )
                .unwrap();
            // b's denial does not stand against a's call, a's grant is not b's.
            assert_eq!(store.approval_denial(&a.binding, 300).unwrap(), None);
            assert_eq!(
                store.approval_denial(&b.binding, 300).unwrap().unwrap().id,
                b.id
            );
            assert_eq!(store.approval_consume(&b.binding, 300).unwrap(), None);
            assert_eq!(
                store.approval_consume(&a.binding, 300).unwrap().unwrap().id,
                a.id
            );
        }
    }

    both_backends! {
        fn a_request_is_approved_then_consumed_once_by_its_exact_binding(store) {
            let Requested::Created(created) = request(&store, &new("client:a", "d1", 100)) else {
                panic!("not created")
            };
            assert_eq!(created.id.len(), 4 + 32);
            assert!(created.id.starts_with("apr_"));
            assert_eq!(
                (created.status, created.expires_at_ms),
                (ApprovalStatus::Pending, 1_100)
            );
            // The same call again, still pending: the same request.
            assert_eq!(
                request(&store, &new("client:a", "d1", 200)),
                Requested::Reused(created.clone())
            );
            // Nothing to consume before an answer.
            assert_eq!(
                store
                    .approval_consume(&binding("client:a", "d1"), 300)
                    .unwrap(),
                None
            );
            let Decided::Done(approved) = store
                .approval_decide(
                    &created.id,
                    &ApprovalAnswer::Approve,
                    "client:default",
                    "api",
                    500,
                    1_000,
                )
                .unwrap()
            else {
                panic!("not approved")
            };
            assert_eq!(approved.status, ApprovalStatus::Approved);
            // The grant's clock starts at the approval.
            assert_eq!(approved.expires_at_ms, 1_500);
            assert_eq!(approved.decided_by.as_deref(), Some("client:default"));
            assert_eq!(approved.decided_via.as_deref(), Some("api"));
            // Another caller, other arguments, another policy or definition: not this grant.
            for other in [
                binding("client:b", "d1"),
                binding("client:a", "d2"),
                ApprovalBinding {
                    policy: "policies[0]@bb".into(),
                    ..binding("client:a", "d1")
                },
                ApprovalBinding {
                    definition_digest: "ee".into(),
                    ..binding("client:a", "d1")
                },
                ApprovalBinding {
                    on_behalf_of: Some("client:b".into()),
                    ..binding("client:a", "d1")
                },
            ] {
                assert_eq!(store.approval_consume(&other, 600).unwrap(), None);
            }
            let consumed = store
                .approval_consume(&binding("client:a", "d1"), 1_200)
                .unwrap()
                .unwrap();
            assert_eq!(
                (
                    consumed.id.as_str(),
                    consumed.status,
                    consumed.consumed_at_ms
                ),
                (created.id.as_str(), ApprovalStatus::Consumed, Some(1_200))
            );
            assert_eq!(
                store
                    .approval_consume(&binding("client:a", "d1"), 1_201)
                    .unwrap(),
                None
            );
            // A consumed grant cannot be answered again.
            assert!(matches!(
                store.approval_decide(&created.id, &ApprovalAnswer::Approve, "x", "api", 1_300, 1_000).unwrap(),
                Decided::NotPending(r) if r.status == ApprovalStatus::Consumed
            ));
            assert_eq!(
                store
                    .approval_decide(
                        "apr_nope",
                        &ApprovalAnswer::Approve,
                        "x",
                        "api",
                        1_300,
                        1_000
                    )
                    .unwrap(),
                Decided::NotFound
            );
        }
    }

    both_backends! {
        fn a_denied_request_never_becomes_approved_and_its_denial_stands_until_it_runs_out(store) {
            let id = request(&store, &new("client:a", "d1", 0))
                .record()
                .id
                .clone();
            let answer = ApprovalAnswer::Deny {
                reason: Some("no".into()),
            };
            let Decided::Done(denied) = store
                .approval_decide(&id, &answer, "client:default", "web", 10, 1_000)
                .unwrap()
            else {
                panic!()
            };
            assert_eq!(
                (
                    denied.status,
                    denied.deny_reason.as_deref(),
                    denied.expires_at_ms
                ),
                (ApprovalStatus::Denied, Some("no"), 1_010)
            );
            assert!(matches!(
                store.approval_decide(&id, &ApprovalAnswer::Approve, "x", "api", 20, 1_000).unwrap(),
                Decided::NotPending(r) if r.status == ApprovalStatus::Denied
            ));
            assert_eq!(
                store
                    .approval_consume(&binding("client:a", "d1"), 30)
                    .unwrap(),
                None
            );
            assert_eq!(
                store
                    .approval_denial(&binding("client:a", "d1"), 1_000)
                    .unwrap()
                    .map(|r| r.id),
                Some(id.clone())
            );
            assert_eq!(
                store
                    .approval_denial(&binding("client:a", "d1"), 1_010)
                    .unwrap(),
                None
            );
            // Expiry never touches a denial; the sweep removes it once it is old.
            assert!(store.approvals_expire(5_000).unwrap().is_empty());
            assert_eq!(store.approvals_sweep(1_010).unwrap(), 0);
            assert_eq!(store.approvals_sweep(1_011).unwrap(), 1);
            assert_eq!(store.approval(&id).unwrap(), None);
        }
    }

    both_backends! {
        fn pending_requests_and_unused_grants_expire_and_cannot_be_answered_or_used(store) {
            let pending = request(&store, &new("client:a", "d1", 0))
                .record()
                .id
                .clone();
            let granted = request(&store, &new("client:a", "d2", 0))
                .record()
                .id
                .clone();
            store
                .approval_decide(
                    &granted,
                    &ApprovalAnswer::Approve,
                    "client:default",
                    "api",
                    500,
                    1_000,
                )
                .unwrap();
            // At 1_000 the pending one's time is out; the grant has until 1_500.
            assert!(matches!(
                store.approval_decide(&pending, &ApprovalAnswer::Approve, "x", "api", 1_000, 1_000).unwrap(),
                Decided::NotPending(r) if r.status == ApprovalStatus::Expired
            ));
            assert_eq!(
                store
                    .approval_consume(&binding("client:a", "d2"), 1_500)
                    .unwrap(),
                None
            );
            let expired = store.approvals_expire(1_500).unwrap();
            assert_eq!(
                expired.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
                [granted.as_str()]
            );
            assert!(store.approvals_expire(1_500).unwrap().is_empty());
            // An expired request no longer counts as pending: the same call makes a new one.
            let again = request(&store, &new("client:a", "d1", 2_000));
            assert!(matches!(&again, Requested::Created(r) if r.id != pending));
            let statuses = |status| {
                store
                    .approvals(Some(status), 100)
                    .unwrap()
                    .into_iter()
                    .map(|r| r.id)
                    .collect::<Vec<_>>()
            };
            assert_eq!(
                statuses(ApprovalStatus::Pending),
                [again.record().id.clone()]
            );
            assert_eq!(statuses(ApprovalStatus::Expired).len(), 2);
            assert_eq!(store.approvals(None, 100).unwrap().len(), 3);
            assert_eq!(store.approvals(None, 1).unwrap()[0].id, again.record().id);
        }
    }

    both_backends! {
        fn an_agents_pending_requests_count_for_the_client_it_runs_for(store) {
            let limits = ApprovalLimits {
                per_principal: 2,
                total: 10,
            };
            let for_client = |client: &str, digest: &str| NewApproval {
                binding: ApprovalBinding {
                    on_behalf_of: Some(client.into()),
                    ..binding("agent:x", digest)
                },
                ..new("agent:x", digest, 0)
            };
            for digest in ["d1", "d2"] {
                store
                    .approval_request(&for_client("client:a", digest), limits)
                    .unwrap();
            }
            let full = store
                .approval_request(&for_client("client:a", "d3"), limits)
                .unwrap_err();
            assert!(full.to_string().contains("client:a"), "{full}");
            // client:a filling its share leaves agent x's calls for client:b their own.
            store
                .approval_request(&for_client("client:b", "d3"), limits)
                .unwrap();
        }
    }

    both_backends! {
        fn pending_requests_are_bounded_per_principal_and_in_total(store) {
            let limits = ApprovalLimits {
                per_principal: 2,
                total: 3,
            };
            for digest in ["d1", "d2"] {
                store
                    .approval_request(&new("client:a", digest, 0), limits)
                    .unwrap();
            }
            let full = store
                .approval_request(&new("client:a", "d3", 0), limits)
                .unwrap_err();
            assert!(
                matches!(
                    &full,
                    StoreError::ApprovalsFull {
                        pending: 2,
                        per_principal: 2,
                        ..
                    }
                ),
                "{full}"
            );
            assert!(full.to_string().contains("client:a"), "{full}");
            // A retry of a pending call still reuses its request at the bound.
            assert!(matches!(
                store
                    .approval_request(&new("client:a", "d1", 0), limits)
                    .unwrap(),
                Requested::Reused(_)
            ));
            store
                .approval_request(&new("client:b", "d1", 0), limits)
                .unwrap();
            assert!(matches!(
                store
                    .approval_request(&new("client:c", "d1", 0), limits)
                    .unwrap_err(),
                StoreError::ApprovalsFull {
                    total_pending: 3,
                    total: 3,
                    ..
                }
            ));
            assert_eq!(
                store
                    .approvals(Some(ApprovalStatus::Pending), 100)
                    .unwrap()
                    .len(),
                3
            );
        }
    }

    #[test]
    fn concurrent_consumers_of_one_grant_get_it_exactly_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("portico.db");
        let store = Store::open(&path).unwrap();
        let id = request(&store, &new("client:a", "d1", 0))
            .record()
            .id
            .clone();
        store
            .approval_decide(
                &id,
                &ApprovalAnswer::Approve,
                "client:default",
                "api",
                1,
                1_000,
            )
            .unwrap();
        // Separate connections, as separate processes would have.
        let winners: usize = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..8)
                .map(|_| {
                    let store = Store::open(&path).unwrap();
                    scope.spawn(move || {
                        store
                            .approval_consume(&binding("client:a", "d1"), 2)
                            .unwrap()
                            .is_some() as usize
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).sum()
        });
        assert_eq!(winners, 1);
    }

    #[test]
    fn requests_and_grants_survive_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("portico.db");
        let store = Store::open(&path).unwrap();
        let id = request(&store, &new("client:a", "d1", 0))
            .record()
            .id
            .clone();
        store
            .approval_decide(
                &id,
                &ApprovalAnswer::Approve,
                "client:default",
                "cli",
                1,
                1_000,
            )
            .unwrap();
        drop(store);
        let store = Store::open(&path).unwrap();
        let record = store.approval(&id).unwrap().unwrap();
        assert_eq!(record.status, ApprovalStatus::Approved);
        assert_eq!(record.arguments, r#"{"key":"k"}"#);
        assert!(
            store
                .approval_consume(&binding("client:a", "d1"), 2)
                .unwrap()
                .is_some()
        );
    }

    fn approve(store: &Store, id: &str, now_ms: i64, ttl_ms: i64) {
        let decided = store
            .approval_decide(
                id,
                &ApprovalAnswer::Approve,
                "client:default",
                "api",
                now_ms,
                ttl_ms,
            )
            .unwrap();
        assert!(matches!(decided, Decided::Done(_)), "{decided:?}");
    }

    #[test]
    fn postgres_requests_and_grants_survive_reopening() {
        let Some(url) = crate::testing::postgres_test_url() else {
            return;
        };
        let store = Store::open_postgres(&url, 4).unwrap();
        let id = request(&store, &new("client:a", "d1", 0))
            .record()
            .id
            .clone();
        approve(&store, &id, 1, 1_000);
        drop(store);
        let store = Store::open_postgres(&url, 4).unwrap();
        let record = store.approval(&id).unwrap().unwrap();
        assert_eq!(record.status, ApprovalStatus::Approved);
        assert_eq!(record.arguments, r#"{"key":"k"}"#);
        assert!(
            store
                .approval_consume(&binding("client:a", "d1"), 2)
                .unwrap()
                .is_some()
        );
    }

    #[test]
    fn replicas_racing_to_use_one_grant_use_it_exactly_once() {
        let Some((a, b)) = replicas::two() else {
            return;
        };
        // Rounds, each a fresh grant, so that more than one interleaving gets its chance.
        for round in 0..5 {
            let digest = format!("d{round}");
            let id = request(&a, &new("client:a", &digest, 0))
                .record()
                .id
                .clone();
            approve(&b, &id, 1, 1_000);
            let won: Vec<ApprovalRecord> = replicas::race([&a, &b], 12, |store, _, _| {
                store
                    .approval_consume(&binding("client:a", &digest), 2)
                    .unwrap()
            })
            .into_iter()
            .flatten()
            .collect();
            assert_eq!(won.len(), 1, "round {round}: {won:#?}");
            assert_eq!(won[0].id, id);
            let stored = b.approval(&id).unwrap().unwrap();
            assert_eq!(
                (stored.status, stored.consumed_at_ms),
                (ApprovalStatus::Consumed, Some(2))
            );
        }
    }

    #[test]
    fn replicas_racing_for_several_grants_of_one_call_use_each_once_and_all_of_them() {
        let Some((a, b)) = replicas::two() else {
            return;
        };
        // Three approvals of the same call (each asked after the one before was answered).
        let grants: HashSet<String> = (0..3)
            .map(|n| {
                let Requested::Created(created) = request(&a, &new("client:a", "d1", n)) else {
                    panic!("the call's earlier request was still pending")
                };
                approve(&b, &created.id, n, 1_000);
                created.id
            })
            .collect();
        let won: Vec<String> = replicas::race([&a, &b], 12, |store, _, _| {
            store
                .approval_consume(&binding("client:a", "d1"), 10)
                .unwrap()
        })
        .into_iter()
        .flatten()
        .map(|record| record.id)
        .collect();
        // Exactly one caller per grant, and no caller left without one while one was there.
        assert_eq!(won.len(), grants.len(), "{won:?}");
        assert_eq!(won.into_iter().collect::<HashSet<_>>(), grants);
    }

    #[test]
    fn replicas_answering_one_request_at_once_answer_it_once() {
        let Some((a, b)) = replicas::two() else {
            return;
        };
        for round in 0..5 {
            let id = request(&a, &new("client:a", &format!("d{round}"), 0))
                .record()
                .id
                .clone();
            let answers = replicas::race([&a, &b], 6, |store, replica, thread| {
                let answer = if thread % 2 == 0 {
                    ApprovalAnswer::Approve
                } else {
                    ApprovalAnswer::Deny {
                        reason: Some(format!("no from {replica}.{thread}")),
                    }
                };
                let by = format!("client:r{replica}t{thread}");
                store
                    .approval_decide(&id, &answer, &by, "api", 10, 1_000)
                    .unwrap()
            });
            let done: Vec<&ApprovalRecord> = answers
                .iter()
                .filter_map(|d| match d {
                    Decided::Done(record) => Some(record),
                    _ => None,
                })
                .collect();
            assert_eq!(done.len(), 1, "round {round}: {answers:#?}");
            let stored = a.approval(&id).unwrap().unwrap();
            assert_eq!(&stored, done[0]);
            // Everyone else was told who answered first.
            for decided in &answers {
                match decided {
                    Decided::Done(_) => {}
                    Decided::NotPending(record) => assert_eq!(record, &stored),
                    Decided::NotFound => panic!("round {round}: the request went missing"),
                }
            }
        }
    }

    #[test]
    fn an_answer_and_an_expiry_on_two_replicas_do_not_both_happen() {
        let Some((a, b)) = replicas::two() else {
            return;
        };
        for round in 0..8 {
            // Pending until 1_000; an answer at 500 (its clock) gives a grant until 10_500, an expiry
            // at 1_000 (a clock running ahead) ends the request: whichever is first, not both.
            let id = request(&a, &new("client:a", &format!("d{round}"), 0))
                .record()
                .id
                .clone();
            let outcomes = replicas::race([&a, &b], 1, |store, replica, _| {
                if replica == 0 {
                    let decided = store
                        .approval_decide(&id, &ApprovalAnswer::Approve, "x", "api", 500, 10_000)
                        .unwrap();
                    matches!(decided, Decided::Done(_))
                } else {
                    store
                        .approvals_expire(1_000)
                        .unwrap()
                        .iter()
                        .any(|r| r.id == id)
                }
            });
            let (answered, expired) = (outcomes[0], outcomes[1]);
            assert!(
                answered != expired,
                "round {round}: answered {answered}, expired {expired}"
            );
            let status = b.approval(&id).unwrap().unwrap().status;
            let expected = if answered {
                ApprovalStatus::Approved
            } else {
                ApprovalStatus::Expired
            };
            assert_eq!(status, expected, "round {round}");
        }
    }

    #[test]
    fn a_use_and_an_expiry_on_two_replicas_do_not_both_happen() {
        let Some((a, b)) = replicas::two() else {
            return;
        };
        for round in 0..8 {
            let digest = format!("d{round}");
            let id = request(&a, &new("client:a", &digest, 0))
                .record()
                .id
                .clone();
            // A grant until 1_000: used at 999 on one replica, expired at 1_000 on the other.
            approve(&a, &id, 0, 1_000);
            let outcomes = replicas::race([&a, &b], 1, |store, replica, _| {
                if replica == 0 {
                    store
                        .approval_consume(&binding("client:a", &digest), 999)
                        .unwrap()
                        .is_some()
                } else {
                    store
                        .approvals_expire(1_000)
                        .unwrap()
                        .iter()
                        .any(|r| r.id == id)
                }
            });
            let (used, expired) = (outcomes[0], outcomes[1]);
            assert!(
                used != expired,
                "round {round}: used {used}, expired {expired}"
            );
        }
    }

    #[test]
    fn replicas_storing_calls_at_once_stay_within_the_pending_bounds() {
        let Some((a, b)) = replicas::two() else {
            return;
        };
        let limits = ApprovalLimits {
            per_principal: 3,
            total: 5,
        };
        let is_full = |result: &Result<Requested, StoreError>| {
            matches!(result, Err(StoreError::ApprovalsFull { .. }))
        };
        // One caller, sixteen different calls: three fit.
        let results = replicas::race([&a, &b], 8, |store, replica, thread| {
            store.approval_request(&new("client:a", &format!("d{replica}.{thread}"), 0), limits)
        });
        let created = results
            .iter()
            .filter(|r| matches!(r, Ok(Requested::Created(_))))
            .count();
        assert_eq!(created, 3, "{results:#?}");
        assert!(
            results
                .iter()
                .all(|r| is_full(r) || matches!(r, Ok(Requested::Created(_)))),
            "{results:#?}"
        );
        // Sixteen callers: two more fit in the total.
        let results = replicas::race([&a, &b], 8, |store, replica, thread| {
            store.approval_request(
                &new(&format!("client:r{replica}t{thread}"), "d1", 0),
                limits,
            )
        });
        let created = results
            .iter()
            .filter(|r| matches!(r, Ok(Requested::Created(_))))
            .count();
        assert_eq!(created, 2, "{results:#?}");
        assert!(
            results
                .iter()
                .all(|r| is_full(r) || matches!(r, Ok(Requested::Created(_)))),
            "{results:#?}"
        );
        assert_eq!(a.pending_approval_count().unwrap(), 5);
    }

    #[test]
    fn replicas_storing_the_same_call_at_once_share_one_request() {
        let Some((a, b)) = replicas::two() else {
            return;
        };
        let results = replicas::race([&a, &b], 8, |store, _, _| {
            request(store, &new("client:a", "d1", 0))
        });
        let created = results
            .iter()
            .filter(|r| matches!(r, Requested::Created(_)))
            .count();
        assert_eq!(created, 1, "{results:#?}");
        let ids: HashSet<&str> = results.iter().map(|r| r.record().id.as_str()).collect();
        assert_eq!(ids.len(), 1, "{results:#?}");
        assert_eq!(b.pending_approval_count().unwrap(), 1);
    }

    #[test]
    fn a_use_that_waited_for_another_replicas_use_takes_the_next_grant() {
        let Some((a, b)) = replicas::two() else {
            return;
        };
        let grants: Vec<String> = (0..2)
            .map(|n| {
                let id = request(&a, &new("client:a", "d1", n)).record().id.clone();
                approve(&a, &id, n, 1_000);
                id
            })
            .collect();
        let (holding, held) = std::sync::mpsc::channel();
        let (first, second) = std::thread::scope(|scope| {
            // Replica a uses the oldest grant and holds its transaction open a while ...
            let first = scope.spawn(|| {
                a.in_db_transaction("using a grant slowly", |db| {
                    let used = consume_grant(db, &binding("client:a", "d1"), 10)?;
                    let _ = holding.send(());
                    std::thread::sleep(std::time::Duration::from_millis(500));
                    Ok(used)
                })
                .unwrap()
            });
            held.recv().unwrap();
            // ... while replica b, choosing the same grant, waits for it; once a commits, b must
            // not come back empty-handed: the second grant is there.
            let second = b.approval_consume(&binding("client:a", "d1"), 10).unwrap();
            (first.join().unwrap(), second)
        });
        assert_eq!(first.map(|r| r.id).as_ref(), Some(&grants[0]));
        assert_eq!(second.map(|r| r.id).as_ref(), Some(&grants[1]));
    }
}
