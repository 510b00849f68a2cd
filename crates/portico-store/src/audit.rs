//! The audit log: one record per tool call, appended and never edited.
//!
//! Records carry a digest of the arguments, not the arguments themselves, so that the log can be kept
//! and shared without becoming a store of secrets.

mod writer;

use rusqlite::params_from_iter;
use rusqlite::types::Value;
use serde::{Deserialize, Serialize};

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

/// Which records [`Store::audit`] returns. The default is the newest [`crate::DEFAULT_LIMIT`] records.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct AuditQuery {
    pub caller: Option<String>,
    pub tool: Option<String>,
    /// 0 means [`crate::DEFAULT_LIMIT`].
    pub limit: usize,
}

impl Store {
    /// Appends `records` in one transaction, in slice order: all are stored or none is.
    pub fn append_audit(&self, records: &[AuditRecord]) -> Result<(), StoreError> {
        if records.is_empty() {
            return Ok(());
        }
        self.in_immediate_transaction("appending audit records", |conn| {
            records
                .iter()
                .try_for_each(|record| self.insert_audit(conn, record))
        })
    }

    /// One audit record, on the caller's connection or transaction.
    pub(crate) fn insert_audit(
        &self,
        conn: &rusqlite::Connection,
        record: &AuditRecord,
    ) -> Result<(), StoreError> {
        conn.prepare_cached(
            "INSERT INTO audit \
               (at_ms, caller, tool, arguments_digest, outcome, detail, duration_ms) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
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
            ])
        })
        .map(|_| ())
        .map_err(self.sql_error("appending audit records"))
    }

    /// Records matching `query`, newest first; records with the same `at_ms` come latest-appended first.
    pub fn audit(&self, query: &AuditQuery) -> Result<Vec<AuditRecord>, StoreError> {
        // Only the filters that are set appear in the SQL, so SQLite can use the matching index.
        let mut sql = String::from(
            "SELECT at_ms, caller, tool, arguments_digest, outcome, detail, duration_ms FROM audit",
        );
        let mut values: Vec<Value> = Vec::new();
        for (column, filter) in [("caller", &query.caller), ("tool", &query.tool)] {
            if let Some(filter) = filter {
                sql.push_str(if values.is_empty() {
                    " WHERE "
                } else {
                    " AND "
                });
                sql.push_str(column);
                sql.push_str(" = ?");
                values.push(Value::Text(filter.clone()));
            }
        }
        sql.push_str(" ORDER BY at_ms DESC, id DESC LIMIT ?");
        values.push(Value::Integer(sql_limit(query.limit)));

        let conn = self.conn();
        conn.prepare_cached(&sql)
            .and_then(|mut stmt| {
                stmt.query_map(params_from_iter(values), |row| {
                    Ok(AuditRecord {
                        at_ms: row.get(0)?,
                        caller: row.get(1)?,
                        tool: row.get(2)?,
                        arguments_digest: row.get(3)?,
                        outcome: row.get(4)?,
                        detail: row.get(5)?,
                        duration_ms: from_sql_int(row.get(6)?),
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
        };
        assert_eq!(at(query(Some("ide"), None, 0)), [4, 2, 1]);
        assert_eq!(at(query(None, Some("a"), 0)), [4, 3, 1]);
        assert_eq!(at(query(Some("ide"), Some("a"), 0)), [4, 1]);
        assert_eq!(at(query(None, None, 2)), [4, 3]);
        assert_eq!(at(query(Some("nobody"), None, 0)), Vec::<i64>::new());
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
                limit: 0
            }
        );
    }
}
