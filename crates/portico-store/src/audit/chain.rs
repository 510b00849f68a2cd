//! The audit log's hash chain: every record stores the hash of the one before it and its own,
//! `hash = sha256(prev_hash || canonical encoding of its fields)`, so editing, deleting, inserting
//! or reordering records breaks a link that [`Store::verify_audit`] finds.
//!
//! The chain is computed where records are appended, on the store's writer thread, inside the
//! transaction that inserts them: the head (the last record's hash) is read once per transaction
//! attempt and cached until the attempt ends, so a batch that is rolled back and run again starts
//! from the head it would have committed on. Appenders of one database take turns: on SQLite the
//! transaction holds the file's write lock from its start (`IMMEDIATE`), so two processes appending
//! to one file extend one chain. On PostgreSQL several replicas append to one table, and a
//! transaction does not lock anything up front; there the writer thread holds [`AppendLock`] from
//! before `BEGIN` until after `COMMIT` or `ROLLBACK`, so records are chained, and given ids, in the
//! order they commit.
//!
//! What it does not do: stop someone who can write the file from recomputing every hash after
//! their edit (the hashes are not keyed). It makes tampering visible to a verifier that knows an
//! earlier head: `portico audit verify` prints the newest hash, which can be kept elsewhere.
//! Records written before the chain existed (no hash) are reported as unchained; the chain starts
//! at the first hashed record, whose `prev_hash` is trusted as its start (the genesis value, 64
//! zeros, when nothing came before it).

use serde::Serialize;
use sha2::{Digest, Sha256};

use super::{AUDIT_COLUMNS, AuditEntry, AuditRecord, entry_from_row};
use crate::db::pg::PgConn;
use crate::db::{Db, DbError, Dialect, params};
use crate::{Store, StoreError};

/// The `prev_hash` of the first record of a chain.
pub const GENESIS_HASH: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// Ties the encoding to its version, so that a later change of the encoding cannot collide with it.
const ENCODING_TAG: &[u8] = b"portico.audit.v1\0";

/// The hash of a record following `prev_hash`: SHA-256 over the previous hash (as its 64 hex
/// characters) and the record's fields, each length-prefixed (strings) or fixed-width big-endian
/// (integers), `detail` with a presence byte. `duration_ms` as SQLite stores it (saturated to
/// `i64`), so the hash a verifier recomputes from the row is the one that was written.
pub(crate) fn record_hash(prev_hash: &str, record: &AuditRecord) -> String {
    let mut hasher = Sha256::new();
    hasher.update(prev_hash.as_bytes());
    hasher.update(ENCODING_TAG);
    hasher.update(record.at_ms.to_be_bytes());
    for text in [
        &record.caller,
        &record.tool,
        &record.arguments_digest,
        &record.outcome,
    ] {
        update_text(&mut hasher, text);
    }
    match &record.detail {
        None => hasher.update([0u8]),
        Some(detail) => {
            hasher.update([1u8]);
            update_text(&mut hasher, detail);
        }
    }
    hasher.update(crate::to_sql_int(record.duration_ms).to_be_bytes());
    hex(&hasher.finalize())
}

fn update_text(hasher: &mut Sha256, text: &str) {
    hasher.update((text.len() as u64).to_be_bytes());
    hasher.update(text.as_bytes());
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut hex = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        hex.push(DIGITS[usize::from(byte >> 4)] as char);
        hex.push(DIGITS[usize::from(byte & 0xf)] as char);
    }
    hex
}

/// The chain's head as the current transaction attempt has it. Valid only inside the attempt that
/// read it: every attempt of a batch starts with [`Store::forget_audit_head`].
#[derive(Debug, Clone, Default)]
pub(crate) enum ChainHead {
    /// Not read in this attempt yet.
    #[default]
    Unknown,
    Known(Head),
}

#[derive(Debug, Clone)]
pub(crate) struct Head {
    /// The last record's hash: the next record's `prev_hash`.
    pub(crate) hash: String,
    /// The id the next record takes, on PostgreSQL (SQLite gives ids out itself).
    pub(crate) next_id: i64,
}

/// The PostgreSQL advisory lock key of the audit table's appenders ("PORTICO AUDIT" squeezed into
/// 64 bits). Distinct from the migrations' key.
const AUDIT_APPEND_LOCK: i64 = 0x504F_5254_4175_6474;

/// The turn of one replica's writer thread at appending to PostgreSQL's audit table.
///
/// Why a session lock taken before `BEGIN`, and not `pg_advisory_xact_lock` as the transaction's
/// first statement: a `SERIALIZABLE` transaction takes its snapshot at its first statement, before
/// that statement waits for the lock. A transaction that had to wait would then read the head
/// from a snapshot older than the commit of the appender it waited for, chain to a stale hash, and
/// fail with a serialization error: every contended append would cost a retry, and a busy pair of
/// replicas could use up the retries and lose records. Taken before `BEGIN`, the lock is held when
/// the snapshot is taken, so the head read is the last committed one, and ids follow commit order
/// (an appender commits before the next one may begin). The lock is held across the batch's
/// retries and released after it ends, when the highest id given out is recorded (see
/// [`AppendLock::release`]).
///
/// Only batches that append audit records take it, so tasks and conversations of different
/// replicas still commit side by side. A transaction holding row locks never waits for it (it is
/// taken before any statement), so it cannot deadlock with them.
pub(crate) struct AppendLock<'c> {
    conn: &'c PgConn,
    held: bool,
}

impl<'c> AppendLock<'c> {
    /// Waits for the turn (as long as the replica holding it takes to commit one batch).
    pub(crate) fn acquire(conn: &'c PgConn) -> Result<AppendLock<'c>, DbError> {
        Db::postgres(conn).query_one(
            "SELECT pg_advisory_lock(?1)",
            params![AUDIT_APPEND_LOCK],
            |_| Ok(()),
        )?;
        Ok(AppendLock { conn, held: true })
    }

    /// Ends the turn, once the batch's transaction has ended. If it committed records, their last
    /// id is first recorded as the audit table's high-water mark (the identity's sequence, which
    /// nothing else advances), so that ids stay unique after the last records are deleted, as
    /// SQLite's AUTOINCREMENT keeps them: the next record then shows the gap. Recorded only after
    /// the commit, since a sequence is not rolled back and a mark set by a transaction that then
    /// rolled back would itself leave a gap. A mark not recorded (the process died in between) only
    /// lags: ids still follow the last record.
    pub(crate) fn release(mut self, store: &Store, committed: bool) {
        let db = Db::postgres(self.conn);
        if committed
            && let ChainHead::Known(head) = &*store.audit_head()
            && head.next_id > 1
        {
            let marked = db.query_one(
                "SELECT setval(CAST(pg_get_serial_sequence('audit', 'id') AS regclass), ?1)",
                params![head.next_id - 1],
                |_| Ok(()),
            );
            if let Err(error) = marked {
                tracing::warn!(%error, "could not record the audit log's last id; records deleted from its end will not show as a gap");
            }
        }
        self.held = false;
        if let Err(error) = db.query_one(
            "SELECT pg_advisory_unlock(?1)",
            params![AUDIT_APPEND_LOCK],
            |_| Ok(()),
        ) {
            tracing::warn!(%error, "could not release the audit append lock; closing the connection, whose end releases it");
            self.conn.discard();
        }
    }
}

impl Drop for AppendLock<'_> {
    /// A batch that ended without [`AppendLock::release`] (a job panicked): the connection goes back
    /// to the pool, and must not keep every replica from appending.
    fn drop(&mut self) {
        if self.held {
            let _ = self.conn.rollback();
            let unlocked = Db::postgres(self.conn).query_one(
                "SELECT pg_advisory_unlock(?1)",
                params![AUDIT_APPEND_LOCK],
                |_| Ok(()),
            );
            if unlocked.is_err() {
                self.conn.discard();
            }
        }
    }
}

impl Store {
    /// Forgets the cached head; the next append reads it again. Called at the start of every
    /// transaction attempt that may append records (and so after a rollback).
    pub(crate) fn forget_audit_head(&self) {
        *self.audit_head() = ChainHead::Unknown;
    }

    fn audit_head(&self) -> std::sync::MutexGuard<'_, ChainHead> {
        self.inner
            .audit_head
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The head the next record follows: the cached one, or the last record's, read once. A last
    /// record without a hash (written before the chain existed) starts a new chain.
    pub(crate) fn audit_chain_head(&self, db: &Db<'_>) -> Result<Head, StoreError> {
        if let ChainHead::Known(head) = &*self.audit_head() {
            return Ok(head.clone());
        }
        let error = || self.sql_error("reading the audit chain's head");
        let (hash, next_id) = match db.dialect() {
            Dialect::Sqlite => {
                let hash = db
                    .query_opt(
                        "SELECT hash FROM audit ORDER BY id DESC LIMIT 1",
                        params![],
                        |row| row.get::<Option<String>>(0),
                    )
                    .map_err(error())?
                    .flatten();
                (hash, 0)
            }
            Dialect::Postgres => {
                let (hash, next_id, locked) = db
                    .query_one(
                        "SELECT (SELECT hash FROM audit ORDER BY id DESC LIMIT 1), \
                           greatest(coalesce((SELECT max(id) FROM audit), 0), coalesce(pg_sequence_last_value( \
                             CAST(pg_get_serial_sequence('audit', 'id') AS regclass)), 0)) + 1, \
                           EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted \
                             AND pid = pg_backend_pid() AND objsubid = 1 \
                             AND CAST(classid AS BIGINT) * 4294967296 + CAST(objid AS BIGINT) = ?1)",
                        params![AUDIT_APPEND_LOCK],
                        |row| {
                            Ok((
                                row.get::<Option<String>>(0)?,
                                row.get::<i64>(1)?,
                                row.get::<bool>(2)?,
                            ))
                        },
                    )
                    .map_err(error())?;
                if !locked {
                    return Err(StoreError::BatchCommit {
                        path: self.label().to_path_buf(),
                        message: "an audit record was appended without the audit append lock"
                            .into(),
                        hint: "this is a bug in Portico (audit records must be appended through the writer thread); please report it",
                    });
                }
                (hash, next_id)
            }
        };
        let head = Head {
            hash: hash.unwrap_or_else(|| GENESIS_HASH.to_string()),
            next_id,
        };
        *self.audit_head() = ChainHead::Known(head.clone());
        Ok(head)
    }

    /// Records that the record with `hash` is now the chain's head (after it was inserted).
    pub(crate) fn advance_audit_head(&self, hash: String) {
        let mut cached = self.audit_head();
        if let ChainHead::Known(head) = &mut *cached {
            head.hash = hash;
            head.next_id += 1;
        }
    }

    /// Walks the whole audit log in id order and checks every link of the chain: each record's
    /// hash against its fields, and its `prev_hash` against the hash of the record before it.
    /// Reads one snapshot (appends made meanwhile are not seen) a page at a time, so a long log is
    /// never held in memory whole; a CLI with a store of its own does not hold up a daemon's writes.
    pub fn verify_audit(&self) -> Result<AuditVerification, StoreError> {
        self.read_snapshot("verifying the audit chain", verify)
    }
}

/// What [`Store::verify_audit`] found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AuditVerification {
    /// Records whose hash and link were checked and found whole, before the first break if any.
    pub checked: u64,
    /// The first and last id of the records checked and found whole.
    pub first_id: Option<i64>,
    pub last_id: Option<i64>,
    /// Whether the first hashed record starts at the genesis hash. When it does not, records before
    /// it were removed (pruned); its `prev_hash` is trusted as the chain's start.
    pub from_genesis: bool,
    /// Records before the chain's start that carry no hash (written before the chain existed).
    pub unchained: u64,
    /// The hash of the last record checked: keep it elsewhere to detect a later rewrite.
    pub head: Option<String>,
    /// The first broken link; `None` when the chain is whole.
    pub broken: Option<BrokenLink>,
}

impl AuditVerification {
    pub fn is_ok(&self) -> bool {
        self.broken.is_none()
    }
}

/// The first record at which the chain does not hold, and what is wrong there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BrokenLink {
    pub id: i64,
    pub problem: ChainProblem,
}

/// What is wrong at a broken link.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ChainProblem {
    /// The record's fields do not give its stored hash: the record was edited (or forged with a
    /// made-up hash).
    Edited,
    /// The record has no hash although the chain had started before it: written around Portico's
    /// store (a forged insert), or its hash was removed.
    Unhashed,
    /// The record follows a record that is not in the log: the records between `after` and it
    /// were deleted (`missing` of them by id), or the record before it was replaced.
    Deleted { after: i64, missing: i64 },
    /// The record follows `follows`, which comes after it in the log: records were moved.
    Reordered { follows: i64 },
    /// The record follows `follows`, an earlier record than the one before it: the records between
    /// were inserted.
    Inserted { follows: i64 },
    /// The link holds but ids between `after` and this record are missing: records were deleted
    /// from the end of the log and later records appended.
    Gap { after: i64, missing: i64 },
    /// The chain's first hashed record follows a hashed record, but the record before it, `after`,
    /// has none: its hash was removed (records from before the chain are followed by the genesis
    /// hash).
    HashRemoved { after: i64 },
}

impl std::fmt::Display for BrokenLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let id = self.id;
        match &self.problem {
            ChainProblem::Edited => write!(
                f,
                "record {id}: its fields do not match its hash: the record was edited"
            ),
            ChainProblem::Unhashed => write!(
                f,
                "record {id}: it has no hash although the chain started before it: it was inserted around Portico, or its hash was removed"
            ),
            ChainProblem::Deleted { after, missing } if *missing > 0 => write!(
                f,
                "record {id}: it does not follow record {after}: {missing} record(s) between them were deleted"
            ),
            ChainProblem::Deleted { after, .. } => write!(
                f,
                "record {id}: it does not follow record {after}, and the record it follows is not in the log: record {after} was replaced, or records were deleted"
            ),
            ChainProblem::Reordered { follows } => write!(
                f,
                "record {id}: it follows record {follows}, which comes after it: records were reordered"
            ),
            ChainProblem::Inserted { follows } => write!(
                f,
                "record {id}: it follows record {follows}, so the records between {follows} and {id} were inserted"
            ),
            ChainProblem::HashRemoved { after } => write!(
                f,
                "record {id}: it follows a hashed record, but record {after} before it has no hash: its hash was removed"
            ),
            ChainProblem::Gap { after, missing } => write!(
                f,
                "record {id}: {missing} record(s) after record {after} are missing: records were deleted from the end of the log before this one was appended"
            ),
        }
    }
}

/// Rows read per statement while verifying.
const VERIFY_PAGE: i64 = 1000;

fn verify(db: &Db<'_>) -> Result<AuditVerification, DbError> {
    let mut verification = AuditVerification {
        checked: 0,
        first_id: None,
        last_id: None,
        from_genesis: false,
        unchained: 0,
        head: None,
        broken: None,
    };
    // The previous record's id and hash, once the chain has started.
    let mut previous: Option<(i64, String)> = None;
    let mut last_unchained: Option<i64> = None;
    let mut after = i64::MIN;
    loop {
        let page = db.query_map(
            &format!("SELECT {AUDIT_COLUMNS} FROM audit WHERE id > ?1 ORDER BY id LIMIT ?2"),
            params![after, VERIFY_PAGE],
            entry_from_row,
        )?;
        for row in &page {
            let mut checked = check_row(db, row, previous.as_ref())?;
            // Records from before the chain are followed by a record at the genesis hash; one that
            // follows anything else had a hashed record before it.
            if let (Check::Whole(_), None, Some(after)) = (&checked, &previous, last_unchained)
                && row.prev_hash.as_deref() != Some(GENESIS_HASH)
            {
                checked = Check::Broken(ChainProblem::HashRemoved { after });
            }
            match checked {
                Check::Unchained => {
                    verification.unchained += 1;
                    last_unchained = Some(row.id);
                }
                Check::Broken(problem) => {
                    verification.broken = Some(BrokenLink {
                        id: row.id,
                        problem,
                    });
                    return Ok(verification);
                }
                Check::Whole(hash) => {
                    if previous.is_none() {
                        verification.first_id = Some(row.id);
                        verification.from_genesis = row.prev_hash.as_deref() == Some(GENESIS_HASH);
                    }
                    verification.checked += 1;
                    verification.last_id = Some(row.id);
                    verification.head = Some(hash.clone());
                    previous = Some((row.id, hash));
                }
            }
        }
        match page.last() {
            Some(last) if page.len() as i64 == VERIFY_PAGE => after = last.id,
            _ => return Ok(verification),
        }
    }
}

enum Check {
    /// Before the chain's start and without a hash.
    Unchained,
    Whole(String),
    Broken(ChainProblem),
}

fn check_row(
    db: &Db<'_>,
    row: &AuditEntry,
    previous: Option<&(i64, String)>,
) -> Result<Check, DbError> {
    let Some(hash) = &row.hash else {
        return Ok(match previous {
            None => Check::Unchained,
            Some(_) => Check::Broken(ChainProblem::Unhashed),
        });
    };
    let Some(prev_hash) = &row.prev_hash else {
        return Ok(Check::Broken(ChainProblem::Edited));
    };
    if &record_hash(prev_hash, &row.record) != hash {
        return Ok(Check::Broken(ChainProblem::Edited));
    }
    let Some((previous_id, previous_hash)) = previous else {
        // The chain's start: its prev_hash is trusted.
        return Ok(Check::Whole(hash.clone()));
    };
    if prev_hash != previous_hash {
        return broken_link(db, row.id, *previous_id, prev_hash).map(Check::Broken);
    }
    // Ids are given out one after the other and never reused, and a rolled-back insert gives its
    // id back (on PostgreSQL the id is chosen under the append lock, see `AppendLock`); so a gap
    // in a whole chain is records removed from its end.
    let missing = row.id - previous_id - 1;
    if missing > 0 {
        return Ok(Check::Broken(ChainProblem::Gap {
            after: *previous_id,
            missing,
        }));
    }
    Ok(Check::Whole(hash.clone()))
}

/// Why `id` does not follow `previous_id`: where the record it claims to follow is, if anywhere.
/// One scan, made only at the first broken link.
fn broken_link(
    db: &Db<'_>,
    id: i64,
    previous_id: i64,
    prev_hash: &str,
) -> Result<ChainProblem, DbError> {
    let follows: Option<i64> = db.query_opt(
        "SELECT id FROM audit WHERE hash = ?1 ORDER BY id LIMIT 1",
        params![prev_hash],
        |row| row.get(0),
    )?;
    Ok(match follows {
        Some(follows) if follows > id => ChainProblem::Reordered { follows },
        Some(follows) if follows < previous_id => ChainProblem::Inserted { follows },
        _ => ChainProblem::Deleted {
            after: previous_id,
            missing: id - previous_id - 1,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::tests::record;
    use crate::both_backends;
    use crate::{AuditQuery, StoreError};

    fn records(count: i64) -> Vec<AuditRecord> {
        (1..=count)
            .map(|i| record(i, "client:http", &format!("tool{i}")))
            .collect()
    }

    fn fill(store: &Store, count: i64) {
        store.append_audit(&records(count)).unwrap();
    }

    /// Tampering, as someone with write access to the database would.
    fn sql(store: &Store, statements: &str) {
        store
            .with_db("test", |db| db.execute_batch(statements))
            .unwrap();
    }

    fn sql_with(store: &Store, statement: &str, values: &[&str]) {
        let values: Vec<&dyn crate::db::ToParam> = values
            .iter()
            .map(|value| value as &dyn crate::db::ToParam)
            .collect();
        store
            .with_db("test", |db| db.execute(statement, &values))
            .unwrap();
    }

    fn hash_of(store: &Store, id: i64) -> String {
        store
            .with_db("test", |db| {
                db.query_one("SELECT hash FROM audit WHERE id = ?1", params![id], |row| {
                    row.get(0)
                })
            })
            .unwrap()
    }

    fn ids(store: &Store) -> Vec<i64> {
        let mut ids: Vec<i64> = store
            .audit_entries(&AuditQuery {
                limit: 100_000,
                ..AuditQuery::default()
            })
            .unwrap()
            .into_iter()
            .map(|entry| entry.id)
            .collect();
        ids.sort_unstable();
        ids
    }

    fn broken(store: &Store) -> BrokenLink {
        let verification = store.verify_audit().unwrap();
        match verification.broken.clone() {
            Some(broken) => broken,
            None => panic!("expected a broken link: {verification:?}"),
        }
    }

    both_backends! {
    fn a_clean_chain_verifies_from_genesis_with_its_count_range_and_head(store) {
        fill(&store, 5);
        let verification = store.verify_audit().unwrap();
        assert_eq!(
            verification,
            AuditVerification {
                checked: 5,
                first_id: Some(1),
                last_id: Some(5),
                from_genesis: true,
                unchained: 0,
                head: Some(hash_of(&store, 5)),
                broken: None,
            }
        );
        // Each record's prev_hash is the hash of the one before it, and the hash is its fields'.
        let entries = store.audit_entries(&AuditQuery::default()).unwrap();
        let oldest_first: Vec<_> = entries.iter().rev().collect();
        assert_eq!(oldest_first[0].prev_hash.as_deref(), Some(GENESIS_HASH));
        for pair in oldest_first.windows(2) {
            assert_eq!(pair[1].prev_hash, pair[0].hash);
        }
        for entry in oldest_first {
            assert_eq!(
                entry.hash.as_deref(),
                Some(record_hash(entry.prev_hash.as_deref().unwrap(), &entry.record).as_str())
            );
        }
    }
    }

    both_backends! {
        fn an_empty_log_verifies_with_nothing_checked(store) {
            let verification = store.verify_audit().unwrap();
            assert!(verification.is_ok());
            assert_eq!(
                (
                    verification.checked,
                    verification.first_id,
                    verification.head
                ),
                (0, None, None)
            );
        }
    }

    #[test]
    fn every_field_is_covered_by_the_hash() {
        let base = record(1, "client:http", "t");
        let genesis = record_hash(GENESIS_HASH, &base);
        let variants = [
            AuditRecord {
                at_ms: 2,
                ..base.clone()
            },
            AuditRecord {
                caller: "client:htt".into(),
                ..base.clone()
            },
            AuditRecord {
                tool: "u".into(),
                ..base.clone()
            },
            AuditRecord {
                arguments_digest: "x".into(),
                ..base.clone()
            },
            AuditRecord {
                outcome: "denied".into(),
                ..base.clone()
            },
            AuditRecord {
                detail: Some(String::new()),
                ..base.clone()
            },
            AuditRecord {
                duration_ms: 8,
                ..base.clone()
            },
        ];
        for variant in variants {
            assert_ne!(record_hash(GENESIS_HASH, &variant), genesis, "{variant:?}");
        }
        assert_ne!(record_hash(&"1".repeat(64), &base), genesis);
        // Length prefixes: moving a character from one field to the next changes the hash.
        let shifted = AuditRecord {
            caller: "client:httpt".into(),
            tool: String::new(),
            ..base.clone()
        };
        let unshifted = AuditRecord {
            tool: "t".into(),
            ..base
        };
        assert_ne!(
            record_hash(GENESIS_HASH, &shifted),
            record_hash(GENESIS_HASH, &unshifted)
        );
    }

    both_backends! {
        fn an_edited_field_breaks_the_chain_at_that_record(store) {
            fill(&store, 6);
            sql(
                &store,
                "UPDATE audit SET outcome = 'ok', detail = NULL WHERE id = 4",
            );
            assert_eq!(
                store.verify_audit().unwrap().checked,
                6,
                "the same values: still whole"
            );
            sql(&store, "UPDATE audit SET outcome = 'denied' WHERE id = 4");
            let verification = store.verify_audit().unwrap();
            assert_eq!((verification.checked, verification.last_id), (3, Some(3)));
            assert_eq!(
                verification.broken,
                Some(BrokenLink {
                    id: 4,
                    problem: ChainProblem::Edited
                })
            );
            assert_eq!(
                verification.broken.unwrap().to_string(),
                "record 4: its fields do not match its hash: the record was edited"
            );
        }
    }

    both_backends! {
        fn a_deleted_middle_record_breaks_the_chain_at_the_next_one(store) {
            fill(&store, 6);
            sql(&store, "DELETE FROM audit WHERE id = 3");
            assert_eq!(
                broken(&store),
                BrokenLink {
                    id: 4,
                    problem: ChainProblem::Deleted {
                        after: 2,
                        missing: 1
                    }
                }
            );
            assert_eq!(
                broken(&store).to_string(),
                "record 4: it does not follow record 2: 1 record(s) between them were deleted"
            );
        }
    }

    both_backends! {
        fn a_record_inserted_around_the_store_without_a_hash_is_found(store) {
            fill(&store, 4);
            sql(
                &store,
                "INSERT INTO audit (id, at_ms, caller, tool, arguments_digest, outcome, duration_ms) \
                 VALUES (5, 5, 'client:http', 'forged', 'd', 'ok', 1)",
            );
            assert_eq!(
                broken(&store),
                BrokenLink {
                    id: 5,
                    problem: ChainProblem::Unhashed
                }
            );
        }
    }

    both_backends! {
        fn a_record_linked_to_the_head_with_a_made_up_hash_is_found(store) {
            fill(&store, 4);
            let head = hash_of(&store, 4);
            sql_with(
                &store,
                "INSERT INTO audit (id, at_ms, caller, tool, arguments_digest, outcome, duration_ms, prev_hash, hash) \
                 VALUES (5, 5, 'client:http', 'forged', 'd', 'ok', 1, ?1, ?2)",
                &[&head, &"f".repeat(64)],
            );
            assert_eq!(
                broken(&store),
                BrokenLink {
                    id: 5,
                    problem: ChainProblem::Edited
                }
            );
        }
    }

    both_backends! {
        fn a_record_replaced_by_a_well_hashed_forgery_breaks_the_link_after_it(store) {
            fill(&store, 5);
            let forged = record(3, "client:http", "forged");
            let prev = hash_of(&store, 2);
            let hash = record_hash(&prev, &forged);
            sql(&store, "DELETE FROM audit WHERE id = 3");
            sql_with(
                &store,
                "INSERT INTO audit (id, at_ms, caller, tool, arguments_digest, outcome, duration_ms, prev_hash, hash) \
                 VALUES (3, 3, 'client:http', 'forged', ?1, 'ok', 7, ?2, ?3)",
                &[&forged.arguments_digest, &prev, &hash],
            );
            assert_eq!(
                broken(&store),
                BrokenLink {
                    id: 4,
                    problem: ChainProblem::Deleted {
                        after: 3,
                        missing: 0
                    }
                }
            );
        }
    }

    both_backends! {
        fn swapped_records_are_reported_as_reordered(store) {
            fill(&store, 5);
            sql(
                &store,
                "UPDATE audit SET id = 100 WHERE id = 2; \
                 UPDATE audit SET id = 2 WHERE id = 3; \
                 UPDATE audit SET id = 3 WHERE id = 100;",
            );
            assert_eq!(
                broken(&store),
                BrokenLink {
                    id: 2,
                    problem: ChainProblem::Reordered { follows: 3 }
                }
            );
        }
    }

    both_backends! {
        fn records_deleted_from_the_end_show_as_a_gap_once_more_are_appended(store) {
            fill(&store, 5);
            sql(&store, "DELETE FROM audit WHERE id > 3");
            // Truncation alone is not visible without an earlier head kept elsewhere...
            let truncated = store.verify_audit().unwrap();
            assert!(truncated.is_ok());
            assert_eq!(truncated.last_id, Some(3));
            // ...but ids are never reused, so the next record shows the gap.
            store
                .append_audit(&[record(6, "client:http", "later")])
                .unwrap();
            assert_eq!(
                broken(&store),
                BrokenLink {
                    id: 6,
                    problem: ChainProblem::Gap {
                        after: 3,
                        missing: 2
                    }
                }
            );
        }
    }

    both_backends! {
        fn a_pruned_start_is_trusted_as_the_chains_anchor(store) {
            fill(&store, 5);
            sql(&store, "DELETE FROM audit WHERE id <= 2");
            let verification = store.verify_audit().unwrap();
            assert!(verification.is_ok(), "{verification:?}");
            assert_eq!(
                (
                    verification.checked,
                    verification.first_id,
                    verification.last_id,
                    verification.from_genesis
                ),
                (3, Some(3), Some(5), false)
            );
        }
    }

    both_backends! {
        fn a_long_log_is_verified_across_pages(store) {
            let count = VERIFY_PAGE * 2 + 3;
            fill(&store, count);
            let verification = store.verify_audit().unwrap();
            assert!(verification.is_ok(), "{verification:?}");
            assert_eq!(
                (verification.checked, verification.last_id),
                (count as u64, Some(count))
            );
            // A break on a later page is found there.
            sql(
                &store,
                &format!("UPDATE audit SET tool = 'edited' WHERE id = {}", VERIFY_PAGE + 7),
            );
            assert_eq!(
                broken(&store),
                BrokenLink {
                    id: VERIFY_PAGE + 7,
                    problem: ChainProblem::Edited
                }
            );
        }
    }

    /// SQLite only: a file reopened, and a second process on it (two stores on one file); on
    /// PostgreSQL, `replicas_appending_at_once_extend_one_chain` is the same story.
    #[tokio::test]
    async fn the_chain_continues_across_batches_reopen_and_a_second_connection() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("portico.db");
        {
            let store = Store::open(&path).unwrap();
            let writer = store.audit_writer();
            for batch in 0..3 {
                for i in 0..50 {
                    writer.record(record(batch * 100 + i, "client:http", "t"));
                }
                writer.flush().await;
            }
            assert!(store.committed_batches() >= 3);
        }
        let store = Store::open(&path).unwrap();
        // Another process appending to the same file extends the same chain.
        let other = Store::open(&path).unwrap();
        store.append_audit(&[record(1000, "cli", "a")]).unwrap();
        other.append_audit(&[record(1001, "cli", "b")]).unwrap();
        let writer = store.audit_writer();
        writer.record(record(1002, "cli", "c"));
        writer.flush().await;
        other.append_audit(&[record(1003, "cli", "d")]).unwrap();
        let verification = other.verify_audit().unwrap();
        assert!(verification.is_ok(), "{verification:?}");
        assert_eq!(
            (
                verification.checked,
                verification.first_id,
                verification.last_id
            ),
            (154, Some(1), Some(154))
        );
    }

    /// Two replicas (two stores on one PostgreSQL schema), each appending from its writer thread
    /// and from `append_audit` callers at once: one chain, ids in commit order without a gap.
    #[test]
    fn replicas_appending_at_once_extend_one_chain() {
        let Some(url) = crate::testing::postgres_test_url() else {
            return;
        };
        let replicas = [
            Store::open_postgres(&url, 4).unwrap(),
            Store::open_postgres(&url, 4).unwrap(),
        ];
        const RECORDED: i64 = 300;
        const APPENDS: i64 = 40;
        const PER_APPEND: i64 = 3;
        std::thread::scope(|scope| {
            for (r, replica) in replicas.iter().enumerate() {
                let writer = replica.audit_writer();
                scope.spawn(move || {
                    for i in 0..RECORDED {
                        writer.record(record(i, &format!("replica{r}"), "recorded"));
                        if i % 25 == 0 {
                            futures::executor::block_on(writer.flush());
                        }
                    }
                    futures::executor::block_on(writer.flush());
                });
                for caller in 0..2 {
                    scope.spawn(move || {
                        for i in 0..APPENDS {
                            let batch: Vec<AuditRecord> = (0..PER_APPEND)
                                .map(|j| {
                                    record(i * 10 + j, &format!("replica{r}/{caller}"), "appended")
                                })
                                .collect();
                            replica.append_audit(&batch).unwrap();
                        }
                    });
                }
            }
        });
        let total = 2 * (RECORDED + 2 * APPENDS * PER_APPEND);
        for replica in &replicas {
            let verification = replica.verify_audit().unwrap();
            assert!(verification.is_ok(), "{verification:?}");
            assert_eq!(
                (
                    verification.checked,
                    verification.first_id,
                    verification.last_id,
                    verification.from_genesis
                ),
                (total as u64, Some(1), Some(total), true)
            );
        }
        assert_eq!(ids(&replicas[0]), (1..=total).collect::<Vec<_>>());
        // Each append_audit call's records are consecutive: one transaction, nobody in between.
        let entries = replicas[1]
            .audit_entries(&AuditQuery {
                tool: Some("appended".into()),
                limit: 100_000,
                ..AuditQuery::default()
            })
            .unwrap();
        for entry in &entries {
            if entry.record.at_ms % 10 == 0 {
                let next: Vec<&AuditEntry> = entries
                    .iter()
                    .filter(|e| e.id > entry.id && e.id < entry.id + PER_APPEND)
                    .collect();
                assert!(
                    next.len() as i64 == PER_APPEND - 1
                        && next.iter().all(|e| e.record.caller == entry.record.caller),
                    "{entry:?} then {next:?}"
                );
            }
        }
    }

    /// On PostgreSQL only the writer thread's batches hold the append lock; a write that appends
    /// without saying so is refused rather than chained to a head another replica may be moving.
    #[tokio::test]
    async fn an_append_outside_the_append_lock_is_refused() {
        let Some(store) = crate::testing::postgres_store() else {
            return;
        };
        let error = store
            .batch_writer()
            .submit(|store: &Store, db: &crate::db::Db<'_>| {
                store.insert_audit(db, &record(1, "ide", "unlocked"))
            })
            .await
            .unwrap_err();
        assert!(error.to_string().contains("append lock"), "{error}");
        store.append_audit(&records(2)).unwrap();
        assert_eq!(store.verify_audit().unwrap().checked, 2);
    }

    /// The SQLite connection, held so that the writer thread cannot commit meanwhile; `None` on
    /// PostgreSQL, where nothing holds a batch open.
    fn hold(store: &Store) -> Option<std::sync::MutexGuard<'_, rusqlite::Connection>> {
        (store.backend_name() == "sqlite").then(|| store.conn())
    }

    both_backends! {
        async fn a_batch_rolled_back_and_run_again_keeps_the_chain_whole(store) {
            let writer = store.audit_writer();
            let batch = store.batch_writer();
            let failing = {
                // While the connection is held (SQLite), everything queued lands in one batch:
                // records, a write that appends a record and then fails (so the batch is rolled back
                // and run again without it), and more records. On PostgreSQL the batches fall as
                // they may; the failing write's batch is rolled back all the same, and the id its
                // record took must not be missing from the log.
                let _held = hold(&store);
                for i in 0..3 {
                    writer.record(record(i, "ide", "before"));
                }
                let failing = batch.submit_appending_audit(|store: &Store, db: &crate::db::Db<'_>| {
                    store.insert_audit(db, &record(99, "ide", "rolled back"))?;
                    Err::<(), _>(StoreError::ConversationNotFound {
                        path: "test".into(),
                        id: "x".into(),
                    })
                });
                for i in 3..6 {
                    writer.record(record(i, "ide", "after"));
                }
                failing
            };
            assert!(failing.await.is_err());
            writer.flush().await;
            let tools: Vec<String> = store
                .audit(&AuditQuery::default())
                .unwrap()
                .into_iter()
                .map(|r| r.tool)
                .collect();
            assert_eq!(
                tools,
                ["after", "after", "after", "before", "before", "before"]
            );
            let verification = store.verify_audit().unwrap();
            assert!(verification.is_ok(), "{verification:?}");
            assert_eq!((verification.checked, verification.last_id), (6, Some(6)));
        }
    }

    both_backends! {
        fn a_removed_hash_at_the_start_is_not_taken_for_a_record_from_before_the_chain(store) {
            fill(&store, 4);
            sql(
                &store,
                "UPDATE audit SET hash = NULL, prev_hash = NULL WHERE id = 1",
            );
            assert_eq!(
                broken(&store),
                BrokenLink {
                    id: 2,
                    problem: ChainProblem::HashRemoved { after: 1 }
                }
            );
        }
    }

    both_backends! {
        fn a_removed_hash_further_in_is_an_unhashed_record(store) {
            fill(&store, 4);
            sql(&store, "UPDATE audit SET hash = NULL WHERE id = 3");
            assert_eq!(
                broken(&store),
                BrokenLink {
                    id: 3,
                    problem: ChainProblem::Unhashed
                }
            );
        }
    }

    /// SQLite only: a file written before the chain's migration (opened here with rusqlite at the
    /// schema of that time), upgraded by opening it.
    #[test]
    fn records_from_before_the_chain_are_unchained_and_the_chain_starts_after_them() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("portico.db");
        {
            let mut conn = rusqlite::Connection::open(&path).unwrap();
            crate::migrations::migrate(&mut conn, &path, &crate::migrations::MIGRATIONS[..2])
                .unwrap();
            conn.execute_batch(
                "INSERT INTO audit (at_ms, caller, tool, arguments_digest, outcome, duration_ms) \
                   VALUES (1, 'ide', 'old', 'd', 'ok', 1), (2, 'ide', 'old', 'd', 'ok', 1);",
            )
            .unwrap();
        }
        let store = Store::open(&path).unwrap();
        store.append_audit(&records(2)).unwrap();
        let verification = store.verify_audit().unwrap();
        assert!(verification.is_ok(), "{verification:?}");
        assert_eq!(
            (
                verification.unchained,
                verification.checked,
                verification.first_id,
                verification.from_genesis
            ),
            (2, 2, Some(3), true)
        );
    }

    both_backends! {
        /// The rows a store from before the chain left (no hashes; on PostgreSQL, rows copied over
        /// from such a file): the chain starts after them, and on PostgreSQL their ids are skipped.
        fn unhashed_rows_at_the_start_are_unchained(store) {
            sql(
                &store,
                "INSERT INTO audit (id, at_ms, caller, tool, arguments_digest, outcome, duration_ms) \
                   VALUES (1, 1, 'ide', 'old', 'd', 'ok', 1), (2, 2, 'ide', 'old', 'd', 'ok', 1);",
            );
            store.append_audit(&records(2)).unwrap();
            let verification = store.verify_audit().unwrap();
            assert!(verification.is_ok(), "{verification:?}");
            assert_eq!(
                (
                    verification.unchained,
                    verification.checked,
                    verification.first_id,
                    verification.last_id,
                    verification.from_genesis
                ),
                (2, 2, Some(3), Some(4), true)
            );
        }
    }
}
