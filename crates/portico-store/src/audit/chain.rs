//! The audit log's hash chain: every record stores the hash of the one before it and its own,
//! `hash = sha256(prev_hash || canonical encoding of its fields)`, so editing, deleting, inserting
//! or reordering records breaks a link that [`Store::verify_audit`] finds.
//!
//! The chain is computed where records are appended, on the writer thread, inside the transaction
//! that inserts them: the head (the last record's hash) is read once per transaction, under the
//! write lock, so two processes appending to one file extend one chain, and a batch that is rolled
//! back and run again starts from the head it would have committed on.
//!
//! What it does not do: stop someone who can write the file from recomputing every hash after
//! their edit (the hashes are not keyed). It makes tampering visible to a verifier that knows an
//! earlier head: `portico audit verify` prints the newest hash, which can be kept elsewhere.
//! Records written before the chain existed (no hash) are reported as unchained; the chain starts
//! at the first hashed record, whose `prev_hash` is trusted as its start (the genesis value, 64
//! zeros, when nothing came before it).

use rusqlite::{Connection, OptionalExtension};
use serde::Serialize;
use sha2::{Digest, Sha256};

use super::AuditRecord;
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

/// The last hash of the chain as the current transaction has it. Valid only inside the transaction
/// that read it: every transaction that appends starts with [`Store::forget_audit_head`].
#[derive(Debug, Clone, Default)]
pub(crate) enum ChainHead {
    /// Not read in this transaction yet.
    #[default]
    Unknown,
    Known(String),
}

impl Store {
    /// Forgets the cached head; the next append reads it again. Called at the start of every
    /// transaction that may append records (and so after a rollback).
    pub(crate) fn forget_audit_head(&self) {
        *self.audit_head() = ChainHead::Unknown;
    }

    fn audit_head(&self) -> std::sync::MutexGuard<'_, ChainHead> {
        self.inner
            .audit_head
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The `prev_hash` for the next record: the cached head, or the last record's hash read once.
    /// A last record without a hash (written before the chain existed) starts a new chain.
    pub(crate) fn audit_prev_hash(&self, conn: &Connection) -> Result<String, StoreError> {
        if let ChainHead::Known(hash) = &*self.audit_head() {
            return Ok(hash.clone());
        }
        let last: Option<Option<String>> = conn
            .prepare_cached("SELECT hash FROM audit ORDER BY id DESC LIMIT 1")
            .and_then(|mut stmt| stmt.query_row([], |row| row.get(0)).optional())
            .map_err(self.sql_error("reading the audit chain's head"))?;
        let hash = last.flatten().unwrap_or_else(|| GENESIS_HASH.to_string());
        *self.audit_head() = ChainHead::Known(hash.clone());
        Ok(hash)
    }

    /// Records that `hash` is now the chain's head (after its record was inserted).
    pub(crate) fn advance_audit_head(&self, hash: String) {
        *self.audit_head() = ChainHead::Known(hash);
    }

    /// Walks the whole audit log in id order and checks every link of the chain: each record's
    /// hash against its fields, and its `prev_hash` against the hash of the record before it.
    /// Reads in one transaction (a snapshot: appends made meanwhile are not seen), on the store's
    /// connection; a CLI with a store of its own does not hold up a daemon's writes.
    pub fn verify_audit(&self) -> Result<AuditVerification, StoreError> {
        let mut conn = self.conn();
        let tx = conn
            .transaction()
            .map_err(self.sql_error("verifying the audit chain"))?;
        let verification = verify(&tx).map_err(self.sql_error("verifying the audit chain"))?;
        drop(tx);
        Ok(verification)
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

/// One row as stored.
struct Row {
    id: i64,
    record: AuditRecord,
    prev_hash: Option<String>,
    hash: Option<String>,
}

fn verify(conn: &Connection) -> rusqlite::Result<AuditVerification> {
    let mut verification = AuditVerification {
        checked: 0,
        first_id: None,
        last_id: None,
        from_genesis: false,
        unchained: 0,
        head: None,
        broken: None,
    };
    let mut stmt = conn.prepare(
        "SELECT id, at_ms, caller, tool, arguments_digest, outcome, detail, duration_ms, prev_hash, hash \
         FROM audit ORDER BY id",
    )?;
    let mut rows = stmt.query([])?;
    // The previous record's id and hash, once the chain has started.
    let mut previous: Option<(i64, String)> = None;
    let mut last_unchained: Option<i64> = None;
    while let Some(row) = rows.next()? {
        let row = Row {
            id: row.get(0)?,
            record: AuditRecord {
                at_ms: row.get(1)?,
                caller: row.get(2)?,
                tool: row.get(3)?,
                arguments_digest: row.get(4)?,
                outcome: row.get(5)?,
                detail: row.get(6)?,
                duration_ms: crate::from_sql_int(row.get(7)?),
            },
            prev_hash: row.get(8)?,
            hash: row.get(9)?,
        };
        let mut checked = check_row(conn, &row, previous.as_ref())?;
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
                break;
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
    Ok(verification)
}

enum Check {
    /// Before the chain's start and without a hash.
    Unchained,
    Whole(String),
    Broken(ChainProblem),
}

fn check_row(
    conn: &Connection,
    row: &Row,
    previous: Option<&(i64, String)>,
) -> rusqlite::Result<Check> {
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
        return broken_link(conn, row.id, *previous_id, prev_hash).map(Check::Broken);
    }
    // Ids are given out one after the other and never reused, and a rolled-back insert gives its
    // id back; so a gap in a whole chain is records removed from its end.
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
    conn: &Connection,
    id: i64,
    previous_id: i64,
    prev_hash: &str,
) -> rusqlite::Result<ChainProblem> {
    let follows: Option<i64> = conn
        .query_row(
            "SELECT id FROM audit WHERE hash = ?1 ORDER BY id LIMIT 1",
            [prev_hash],
            |row| row.get(0),
        )
        .optional()?;
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
    use crate::{AuditQuery, StoreError};

    fn records(count: i64) -> Vec<AuditRecord> {
        (1..=count)
            .map(|i| record(i, "client:http", &format!("tool{i}")))
            .collect()
    }

    fn store_with(count: i64) -> Store {
        let store = Store::open_in_memory().unwrap();
        store.append_audit(&records(count)).unwrap();
        store
    }

    fn sql(store: &Store, statement: &str) {
        store.conn().execute_batch(statement).unwrap();
    }

    fn hash_of(store: &Store, id: i64) -> String {
        store
            .conn()
            .query_row("SELECT hash FROM audit WHERE id = ?1", [id], |row| {
                row.get(0)
            })
            .unwrap()
    }

    fn broken(store: &Store) -> BrokenLink {
        let verification = store.verify_audit().unwrap();
        match verification.broken.clone() {
            Some(broken) => broken,
            None => panic!("expected a broken link: {verification:?}"),
        }
    }

    #[test]
    fn a_clean_chain_verifies_from_genesis_with_its_count_range_and_head() {
        let store = store_with(5);
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

    #[test]
    fn an_empty_log_verifies_with_nothing_checked() {
        let store = Store::open_in_memory().unwrap();
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

    #[test]
    fn an_edited_field_breaks_the_chain_at_that_record() {
        let store = store_with(6);
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

    #[test]
    fn a_deleted_middle_record_breaks_the_chain_at_the_next_one() {
        let store = store_with(6);
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

    #[test]
    fn forged_records_are_found_where_they_are() {
        // Inserted around the store, without a hash.
        let store = store_with(4);
        sql(
            &store,
            "INSERT INTO audit (at_ms, caller, tool, arguments_digest, outcome, duration_ms) \
             VALUES (5, 'client:http', 'forged', 'd', 'ok', 1)",
        );
        assert_eq!(
            broken(&store),
            BrokenLink {
                id: 5,
                problem: ChainProblem::Unhashed
            }
        );

        // Linked to the head but with a made-up hash.
        let store = store_with(4);
        let head = hash_of(&store, 4);
        store
            .conn()
            .execute(
                "INSERT INTO audit (at_ms, caller, tool, arguments_digest, outcome, duration_ms, prev_hash, hash) \
                 VALUES (5, 'client:http', 'forged', 'd', 'ok', 1, ?1, ?2)",
                [&head, &"f".repeat(64)],
            )
            .unwrap();
        assert_eq!(
            broken(&store),
            BrokenLink {
                id: 5,
                problem: ChainProblem::Edited
            }
        );

        // A record replaced by a well-hashed forgery: the one after it no longer follows.
        let store = store_with(5);
        let forged = record(3, "client:http", "forged");
        let prev = hash_of(&store, 2);
        let hash = record_hash(&prev, &forged);
        sql(&store, "DELETE FROM audit WHERE id = 3");
        store
            .conn()
            .execute(
                "INSERT INTO audit (id, at_ms, caller, tool, arguments_digest, outcome, duration_ms, prev_hash, hash) \
                 VALUES (3, 3, 'client:http', 'forged', ?1, 'ok', 7, ?2, ?3)",
                [&forged.arguments_digest, &prev, &hash],
            )
            .unwrap();
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

    #[test]
    fn swapped_records_are_reported_as_reordered() {
        let store = store_with(5);
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

    #[test]
    fn records_deleted_from_the_end_show_as_a_gap_once_more_are_appended() {
        let store = store_with(5);
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

    #[test]
    fn a_pruned_start_is_trusted_as_the_chains_anchor() {
        let store = store_with(5);
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

    #[tokio::test]
    async fn a_batch_rolled_back_and_run_again_keeps_the_chain_whole() {
        let store = Store::open_in_memory().unwrap();
        let writer = store.audit_writer();
        let batch = store.batch_writer();
        let failing = {
            // While the connection is held, everything queued lands in one batch: records, a write
            // that appends a record and then fails (so the batch is rolled back and run again
            // without it), and more records.
            let _held = store.conn();
            for i in 0..3 {
                writer.record(record(i, "ide", "before"));
            }
            let failing = batch.submit(|store: &Store, db: &crate::db::Db<'_>| {
                store.insert_audit(db.legacy_sqlite(), &record(99, "ide", "rolled back"))?;
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

    #[test]
    fn a_removed_hash_at_the_start_is_not_taken_for_a_record_from_before_the_chain() {
        let store = store_with(4);
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
        // Further in, it is a record without a hash after the chain started.
        let store = store_with(4);
        sql(&store, "UPDATE audit SET hash = NULL WHERE id = 3");
        assert_eq!(
            broken(&store),
            BrokenLink {
                id: 3,
                problem: ChainProblem::Unhashed
            }
        );
    }

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
}
