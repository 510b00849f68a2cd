//! The audit log: one record per tool call, appended and never edited.
//!
//! Records carry a digest of the arguments, not the arguments themselves, so that the log can be kept
//! and shared without becoming a store of secrets.

mod chain;
mod writer;

use serde::{Deserialize, Serialize};

pub(crate) use chain::{AppendLock, ChainHead};
pub use chain::{AuditVerification, BrokenLink, ChainProblem, GENESIS_HASH};
pub use writer::AuditWriter;

use crate::db::{Db, DbError, Dialect, Row, ToParam, params};
use crate::{Store, StoreError, from_sql_int, sql_limit, to_sql_int};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditRecord {
    pub at_ms: i64,
    pub caller: String,
    pub tool: String,
    pub arguments_digest: String,
    /// `"ok"`, `"error"`, `"denied"`, `"invalid"`, `"timeout"`, ...; open-ended so that new outcomes need
    /// no migration.
    pub outcome: String,
    pub detail: Option<String>,
    pub duration_ms: u64,
}

/// A record as stored: its id (never reused) and its links in the hash chain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditEntry {
    pub id: i64,
    #[serde(flatten)]
    pub record: AuditRecord,
    /// `None` for records written before the chain existed.
    pub prev_hash: Option<String>,
    pub hash: Option<String>,
}

/// Which records [`Store::audit`] returns. The default is the newest [`crate::DEFAULT_LIMIT`] records.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct AuditQuery {
    /// The principal's label (`client:http`, `agent:planner`); `principal` is the same filter.
    #[serde(alias = "principal")]
    pub caller: Option<String>,
    pub tool: Option<String>,
    /// Only records at or after this instant (milliseconds since the epoch).
    pub since_ms: Option<i64>,
    /// Only records at or before this instant (milliseconds since the epoch).
    pub until_ms: Option<i64>,
    /// Only records with this outcome (`ok`, `denied`, `approval_requested`, ...).
    pub outcome: Option<String>,
    /// 0 means [`crate::DEFAULT_LIMIT`].
    pub limit: usize,
}

/// The columns of an [`AuditEntry`], in the order [`entry_from_row`] reads them.
pub(crate) const AUDIT_COLUMNS: &str =
    "id, at_ms, caller, tool, arguments_digest, outcome, detail, duration_ms, prev_hash, hash";

pub(crate) fn entry_from_row(row: &Row<'_>) -> Result<AuditEntry, DbError> {
    Ok(AuditEntry {
        id: row.get(0)?,
        record: AuditRecord {
            at_ms: row.get(1)?,
            caller: row.get(2)?,
            tool: row.get(3)?,
            arguments_digest: row.get(4)?,
            outcome: row.get(5)?,
            detail: row.get(6)?,
            duration_ms: from_sql_int(row.get(7)?),
        },
        prev_hash: row.get(8)?,
        hash: row.get(9)?,
    })
}

impl Store {
    /// Appends `records` in one transaction, in slice order: all are stored or none is. Blocks until
    /// they are committed.
    ///
    /// The records go through the store's writer thread, like [`AuditWriter`]'s: every record of a
    /// store is appended there, so the chain's head is only ever cached by that thread (see `chain`),
    /// and on PostgreSQL only that thread's transactions take the append lock.
    pub fn append_audit(&self, records: &[AuditRecord]) -> Result<(), StoreError> {
        if records.is_empty() {
            return Ok(());
        }
        let records = records.to_vec();
        futures::executor::block_on(self.batch_writer().submit_appending_audit(
            move |store: &Store, db: &Db<'_>| {
                records
                    .iter()
                    .try_for_each(|record| store.insert_audit(db, record))
            },
        ))
    }

    /// One audit record, on the caller's transaction, chained to the record before it (see
    /// `chain`). Only for the jobs of the writer thread's batches, each attempt of which begins with
    /// [`Store::forget_audit_head`] (and on PostgreSQL holds [`AppendLock`]).
    pub(crate) fn insert_audit(&self, db: &Db<'_>, record: &AuditRecord) -> Result<(), StoreError> {
        let head = self.audit_chain_head(db)?;
        let hash = chain::record_hash(&head.hash, record);
        // SQLite gives out the id (AUTOINCREMENT: never reused, and a rolled-back insert gives its id
        // back). PostgreSQL's identity does neither (a sequence is not rolled back, so every retried
        // batch would leave a gap that `verify_audit` reports), so there the id is the head's next,
        // read under the append lock.
        let id = match db.dialect() {
            Dialect::Sqlite => None,
            Dialect::Postgres => Some(head.next_id),
        };
        db.execute(
            "INSERT INTO audit \
               (id, at_ms, caller, tool, arguments_digest, outcome, detail, duration_ms, prev_hash, hash) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
            params![
                id,
                record.at_ms,
                record.caller,
                record.tool,
                record.arguments_digest,
                record.outcome,
                record.detail,
                to_sql_int(record.duration_ms),
                head.hash,
                hash,
            ],
        )
        .map_err(self.sql_error("appending audit records"))?;
        self.advance_audit_head(hash);
        Ok(())
    }

    /// Records matching `query`, newest first; records with the same `at_ms` come latest-appended first.
    pub fn audit(&self, query: &AuditQuery) -> Result<Vec<AuditRecord>, StoreError> {
        Ok(self
            .audit_entries(query)?
            .into_iter()
            .map(|entry| entry.record)
            .collect())
    }

    /// [`Store::audit`], each record with its id and chain links.
    pub fn audit_entries(&self, query: &AuditQuery) -> Result<Vec<AuditEntry>, StoreError> {
        // Only the filters that are set appear in the SQL, so the database can use the matching index.
        let mut filters: Vec<(&str, &dyn ToParam)> = Vec::new();
        if let Some(caller) = &query.caller {
            filters.push(("caller = ?", caller));
        }
        if let Some(tool) = &query.tool {
            filters.push(("tool = ?", tool));
        }
        if let Some(since_ms) = &query.since_ms {
            filters.push(("at_ms >= ?", since_ms));
        }
        if let Some(until_ms) = &query.until_ms {
            filters.push(("at_ms <= ?", until_ms));
        }
        if let Some(outcome) = &query.outcome {
            filters.push(("outcome = ?", outcome));
        }
        let mut sql = format!("SELECT {AUDIT_COLUMNS} FROM audit");
        for (i, (condition, _)) in filters.iter().enumerate() {
            sql.push_str(if i == 0 { " WHERE " } else { " AND " });
            sql.push_str(condition);
        }
        sql.push_str(" ORDER BY at_ms DESC, id DESC LIMIT ?");
        let limit = sql_limit(query.limit);
        let mut values: Vec<&dyn ToParam> = filters.iter().map(|(_, value)| *value).collect();
        values.push(&limit);
        self.with_db("reading the audit log", |db| {
            db.query_map(&sql, &values, entry_from_row)
        })
    }

    /// A writer that records without blocking: records join the store's group commit (see
    /// [`Store::batch_writer`]). Every writer of one store shares its one writer thread.
    pub fn audit_writer(&self) -> AuditWriter {
        AuditWriter::new(self.batch_writer())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::both_backends;

    pub(crate) fn record(at_ms: i64, caller: &str, tool: &str) -> AuditRecord {
        AuditRecord {
            at_ms,
            caller: caller.to_string(),
            tool: tool.to_string(),
            arguments_digest: format!("sha256:{at_ms:064x}"),
            outcome: "ok".to_string(),
            detail: None,
            duration_ms: 7,
        }
    }

    both_backends! {
        fn append_and_read_back_newest_first(store) {
            let mut denied = record(20, "ide", "mcp_git_push");
            denied.outcome = "denied".to_string();
            denied.detail = Some("policy: push requires approval".to_string());
            denied.duration_ms = 0;
            let records = vec![
                record(10, "ide", "mcp_git_status"),
                denied.clone(),
                record(30, "agent:planner", "mcp_git_status"),
            ];
            store.append_audit(&records).unwrap();

            let all = store.audit(&AuditQuery::default()).unwrap();
            assert_eq!(all, vec![records[2].clone(), denied, records[0].clone()]);
        }
    }

    both_backends! {
        fn filters_by_caller_tool_and_limit(store) {
            store
                .append_audit(&[
                    record(1, "ide", "a"),
                    record(2, "ide", "b"),
                    record(3, "cli", "a"),
                    record(4, "ide", "a"),
                ])
                .unwrap();
            let at = |query: AuditQuery| -> Vec<i64> {
                store
                    .audit(&query)
                    .unwrap()
                    .into_iter()
                    .map(|r| r.at_ms)
                    .collect()
            };
            let query = |caller: Option<&str>, tool: Option<&str>, limit| AuditQuery {
                caller: caller.map(str::to_string),
                tool: tool.map(str::to_string),
                limit,
                ..AuditQuery::default()
            };
            assert_eq!(at(query(Some("ide"), None, 0)), [4, 2, 1]);
            assert_eq!(at(query(None, Some("a"), 0)), [4, 3, 1]);
            assert_eq!(at(query(Some("ide"), Some("a"), 0)), [4, 1]);
            assert_eq!(at(query(None, None, 2)), [4, 3]);
            assert_eq!(at(query(Some("nobody"), None, 0)), Vec::<i64>::new());
        }
    }

    both_backends! {
        fn filters_by_outcome_and_a_time_window(store) {
            let mut denied = record(3, "ide", "a");
            denied.outcome = "denied".to_string();
            store
                .append_audit(&[
                    record(1, "ide", "a"),
                    record(2, "ide", "a"),
                    denied,
                    record(4, "ide", "a"),
                ])
                .unwrap();
            let at = |query: AuditQuery| -> Vec<i64> {
                store
                    .audit(&query)
                    .unwrap()
                    .into_iter()
                    .map(|r| r.at_ms)
                    .collect()
            };
            let window = |since_ms, until_ms| AuditQuery {
                since_ms,
                until_ms,
                ..AuditQuery::default()
            };
            assert_eq!(at(window(Some(2), Some(3))), [3, 2]);
            assert_eq!(at(window(None, Some(1))), [1]);
            assert_eq!(
                at(AuditQuery {
                    outcome: Some("ok".into()),
                    until_ms: Some(3),
                    ..AuditQuery::default()
                }),
                [2, 1]
            );
            assert_eq!(
                at(AuditQuery {
                    outcome: Some("denied".into()),
                    ..AuditQuery::default()
                }),
                [3]
            );
        }
    }

    both_backends! {
        fn same_millisecond_keeps_append_order_reversed(store) {
            store
                .append_audit(&[record(5, "a", "first"), record(5, "a", "second")])
                .unwrap();
            store.append_audit(&[record(5, "a", "third")]).unwrap();
            let tools: Vec<String> = store
                .audit(&AuditQuery::default())
                .unwrap()
                .into_iter()
                .map(|r| r.tool)
                .collect();
            assert_eq!(tools, ["third", "second", "first"]);
        }
    }

    both_backends! {
        fn default_limit_is_100(store) {
            let records: Vec<_> = (0..150).map(|i| record(i, "c", "t")).collect();
            store.append_audit(&records).unwrap();
            let read = store.audit(&AuditQuery::default()).unwrap();
            assert_eq!(read.len(), 100);
            assert_eq!((read[0].at_ms, read[99].at_ms), (149, 50));
        }
    }

    both_backends! {
        fn empty_append_is_a_no_op(store) {
            store.append_audit(&[]).unwrap();
            assert_eq!(store.audit(&AuditQuery::default()).unwrap(), vec![]);
        }
    }

    #[test]
    fn query_deserialises_with_defaults() {
        let query: AuditQuery = serde_json::from_str(r#"{"tool":"x"}"#).unwrap();
        assert_eq!(
            query,
            AuditQuery {
                caller: None,
                tool: Some("x".to_string()),
                ..AuditQuery::default()
            }
        );
    }
}
