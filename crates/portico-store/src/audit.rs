//! The audit log: one record per tool call, appended and never edited.
//!
//! Records carry a digest of the arguments, not the arguments themselves, so that the log can be kept
//! and shared without becoming a store of secrets.

mod chain;
mod writer;

use rusqlite::params_from_iter;
use rusqlite::types::Value;
use serde::{Deserialize, Serialize};

pub(crate) use chain::ChainHead;
pub use chain::{AuditVerification, BrokenLink, ChainProblem, GENESIS_HASH};
pub use writer::AuditWriter;

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

impl Store {
    /// Appends `records` in one transaction, in slice order: all are stored or none is.
    pub fn append_audit(&self, records: &[AuditRecord]) -> Result<(), StoreError> {
        if records.is_empty() {
            return Ok(());
        }
        self.in_sqlite_transaction("appending audit records", |conn| {
            self.forget_audit_head();
            records
                .iter()
                .try_for_each(|record| self.insert_audit(conn, record))
        })
    }

    /// One audit record, on the caller's transaction, chained to the record before it (see
    /// `chain`). The transaction must have begun with [`Store::forget_audit_head`].
    pub(crate) fn insert_audit(
        &self,
        conn: &rusqlite::Connection,
        record: &AuditRecord,
    ) -> Result<(), StoreError> {
        let prev_hash = self.audit_prev_hash(conn)?;
        let hash = chain::record_hash(&prev_hash, record);
        conn.prepare_cached(
            "INSERT INTO audit \
               (at_ms, caller, tool, arguments_digest, outcome, detail, duration_ms, prev_hash, hash) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        )
        .and_then(|mut insert| {
            insert.execute(rusqlite::params![
                record.at_ms,
                record.caller,
                record.tool,
                record.arguments_digest,
                record.outcome,
                record.detail,
                to_sql_int(record.duration_ms),
                prev_hash,
                hash,
            ])
        })
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
        // Only the filters that are set appear in the SQL, so SQLite can use the matching index.
        let mut sql = String::from(
            "SELECT id, at_ms, caller, tool, arguments_digest, outcome, detail, duration_ms, prev_hash, hash \
             FROM audit",
        );
        let mut values: Vec<Value> = Vec::new();
        let mut filter = |condition: &str, value: Value| {
            sql.push_str(if values.is_empty() {
                " WHERE "
            } else {
                " AND "
            });
            sql.push_str(condition);
            values.push(value);
        };
        if let Some(caller) = &query.caller {
            filter("caller = ?", Value::Text(caller.clone()));
        }
        if let Some(tool) = &query.tool {
            filter("tool = ?", Value::Text(tool.clone()));
        }
        if let Some(since_ms) = query.since_ms {
            filter("at_ms >= ?", Value::Integer(since_ms));
        }
        if let Some(until_ms) = query.until_ms {
            filter("at_ms <= ?", Value::Integer(until_ms));
        }
        if let Some(outcome) = &query.outcome {
            filter("outcome = ?", Value::Text(outcome.clone()));
        }
        sql.push_str(" ORDER BY at_ms DESC, id DESC LIMIT ?");
        values.push(Value::Integer(sql_limit(query.limit)));

        let conn = self.conn();
        conn.prepare_cached(&sql)
            .and_then(|mut stmt| {
                stmt.query_map(params_from_iter(values), |row| {
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
                })?
                .collect()
            })
            .map_err(self.sql_error("reading the audit log"))
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

    #[test]
    fn append_and_read_back_newest_first() {
        let store = Store::open_in_memory().unwrap();
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

    #[test]
    fn filters_by_caller_tool_and_limit() {
        let store = Store::open_in_memory().unwrap();
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

    #[test]
    fn filters_by_outcome_and_a_time_window() {
        let store = Store::open_in_memory().unwrap();
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

    #[test]
    fn same_millisecond_keeps_append_order_reversed() {
        let store = Store::open_in_memory().unwrap();
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

    #[test]
    fn default_limit_is_100() {
        let store = Store::open_in_memory().unwrap();
        let records: Vec<_> = (0..150).map(|i| record(i, "c", "t")).collect();
        store.append_audit(&records).unwrap();
        let read = store.audit(&AuditQuery::default()).unwrap();
        assert_eq!(read.len(), 100);
        assert_eq!((read[0].at_ms, read[99].at_ms), (149, 50));
    }

    #[test]
    fn empty_append_is_a_no_op() {
        let store = Store::open_in_memory().unwrap();
        store.append_audit(&[]).unwrap();
        assert_eq!(store.audit(&AuditQuery::default()).unwrap(), vec![]);
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
