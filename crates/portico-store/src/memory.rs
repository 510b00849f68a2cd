//! Agent memory: a persistent key/value map per scope (the agent's name), which agents read and write
//! through their memory tools.

use serde::{Deserialize, Serialize};

use crate::db::{DbError, Dialect, Row, params};
use crate::{Store, StoreError, now_ms, sql_limit};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryEntry {
    pub scope: String,
    pub key: String,
    pub value: String,
    pub updated_at_ms: i64,
}

fn entry_from_row(row: &Row<'_>) -> Result<MemoryEntry, DbError> {
    Ok(MemoryEntry {
        scope: row.get(0)?,
        key: row.get(1)?,
        value: row.get(2)?,
        updated_at_ms: row.get(3)?,
    })
}

/// A LIKE pattern matching `query` literally anywhere, so that a user searching for `50%` or `a_b` gets
/// exactly that and not wildcards.
fn contains_pattern(query: &str) -> String {
    let mut pattern = String::with_capacity(query.len() + 2);
    pattern.push('%');
    for c in query.chars() {
        if matches!(c, '%' | '_' | '\\') {
            pattern.push('\\');
        }
        pattern.push(c);
    }
    pattern.push('%');
    pattern
}

impl Store {
    /// Sets `key` in `scope` to `value`, replacing any previous value.
    pub fn memory_store(&self, scope: &str, key: &str, value: &str) -> Result<(), StoreError> {
        self.with_db("storing a memory entry", |db| {
            db.execute(
                "INSERT INTO memory (scope, key, value, updated_at_ms) VALUES (?1, ?2, ?3, ?4) \
                 ON CONFLICT (scope, key) DO UPDATE SET \
                   value = excluded.value, updated_at_ms = excluded.updated_at_ms",
                params![scope, key, value, now_ms()],
            )
            .map(|_| ())
        })
    }

    pub fn memory_get(&self, scope: &str, key: &str) -> Result<Option<MemoryEntry>, StoreError> {
        self.with_db("reading a memory entry", |db| {
            db.query_opt(
                "SELECT scope, key, value, updated_at_ms FROM memory WHERE scope = ?1 AND key = ?2",
                params![scope, key],
                entry_from_row,
            )
        })
    }

    /// Entries of `scope`, most recently updated first (ties by key). With a `query`, only entries whose
    /// key or value contains it; case is ignored for ASCII letters only, as SQLite's LIKE does (on
    /// PostgreSQL, `ILIKE` ignores the case of every letter). A `limit` of 0 means
    /// [`crate::DEFAULT_LIMIT`].
    pub fn memory_recall(
        &self,
        scope: &str,
        query: Option<&str>,
        limit: usize,
    ) -> Result<Vec<MemoryEntry>, StoreError> {
        let pattern = contains_pattern(query.unwrap_or(""));
        self.with_db("recalling memory entries", |db| {
            if query.is_some_and(|q| !q.is_empty()) {
                let sql = match db.dialect() {
                    Dialect::Sqlite => {
                        "SELECT scope, key, value, updated_at_ms FROM memory \
                         WHERE scope = ?1 AND (key LIKE ?2 ESCAPE '\\' OR value LIKE ?2 ESCAPE '\\') \
                         ORDER BY updated_at_ms DESC, key LIMIT ?3"
                    }
                    Dialect::Postgres => {
                        "SELECT scope, key, value, updated_at_ms FROM memory \
                         WHERE scope = ?1 AND (key ILIKE ?2 ESCAPE '\\' OR value ILIKE ?2 ESCAPE '\\') \
                         ORDER BY updated_at_ms DESC, key LIMIT ?3"
                    }
                };
                db.query_map(sql, params![scope, pattern, sql_limit(limit)], entry_from_row)
            } else {
                db.query_map(
                    "SELECT scope, key, value, updated_at_ms FROM memory WHERE scope = ?1 \
                     ORDER BY updated_at_ms DESC, key LIMIT ?2",
                    params![scope, sql_limit(limit)],
                    entry_from_row,
                )
            }
        })
    }

    /// Removes `key` from `scope`; `true` if it was there.
    pub fn memory_delete(&self, scope: &str, key: &str) -> Result<bool, StoreError> {
        self.with_db("deleting a memory entry", |db| {
            db.execute(
                "DELETE FROM memory WHERE scope = ?1 AND key = ?2",
                params![scope, key],
            )
            .map(|deleted| deleted > 0)
        })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::both_backends;

    fn keys(entries: Vec<MemoryEntry>) -> Vec<String> {
        entries.into_iter().map(|e| e.key).collect()
    }

    both_backends! {
        fn store_get_overwrite_delete(store) {
            assert_eq!(store.memory_get("a", "k").unwrap(), None);

            store.memory_store("a", "k", "one").unwrap();
            let first = store.memory_get("a", "k").unwrap().unwrap();
            assert_eq!(
                (
                    first.scope.as_str(),
                    first.key.as_str(),
                    first.value.as_str()
                ),
                ("a", "k", "one")
            );

            std::thread::sleep(Duration::from_millis(3));
            store.memory_store("a", "k", "two").unwrap();
            let second = store.memory_get("a", "k").unwrap().unwrap();
            assert_eq!(second.value, "two");
            assert!(second.updated_at_ms > first.updated_at_ms);
            assert_eq!(store.memory_recall("a", None, 0).unwrap().len(), 1);

            assert!(store.memory_delete("a", "k").unwrap());
            assert!(!store.memory_delete("a", "k").unwrap());
            assert_eq!(store.memory_get("a", "k").unwrap(), None);
        }
    }

    both_backends! {
        fn scopes_are_separate(store) {
            store.memory_store("planner", "k", "p").unwrap();
            store.memory_store("coder", "k", "c").unwrap();
            assert_eq!(
                store.memory_get("planner", "k").unwrap().unwrap().value,
                "p"
            );
            assert_eq!(store.memory_get("coder", "k").unwrap().unwrap().value, "c");
            assert!(store.memory_delete("coder", "k").unwrap());
            assert_eq!(
                store.memory_get("planner", "k").unwrap().unwrap().value,
                "p"
            );
            assert_eq!(
                keys(store.memory_recall("coder", None, 10).unwrap()),
                Vec::<String>::new()
            );
        }
    }

    both_backends! {
        fn recall_is_newest_first_and_limited(store) {
            for key in ["old", "mid", "new"] {
                store.memory_store("s", key, "v").unwrap();
                std::thread::sleep(Duration::from_millis(3));
            }
            assert_eq!(
                keys(store.memory_recall("s", None, 0).unwrap()),
                ["new", "mid", "old"]
            );
            assert_eq!(
                keys(store.memory_recall("s", None, 2).unwrap()),
                ["new", "mid"]
            );
            // Updating an entry makes it the newest.
            store.memory_store("s", "old", "v2").unwrap();
            assert_eq!(
                keys(store.memory_recall("s", Some(""), 1).unwrap()),
                ["old"]
            );
        }
    }

    both_backends! {
        fn recall_matches_key_or_value_case_insensitively(store) {
            store.memory_store("s", "Deploy-Target", "staging").unwrap();
            store.memory_store("s", "owner", "Team DEPLOY").unwrap();
            store.memory_store("s", "colour", "blue").unwrap();
            let mut found = keys(store.memory_recall("s", Some("deploy"), 10).unwrap());
            found.sort();
            assert_eq!(found, ["Deploy-Target", "owner"]);
            assert_eq!(
                keys(store.memory_recall("s", Some("BLU"), 10).unwrap()),
                ["colour"]
            );
            assert_eq!(
                keys(store.memory_recall("s", Some("absent"), 10).unwrap()),
                Vec::<String>::new()
            );
        }
    }

    both_backends! {
        fn recall_treats_wildcards_literally(store) {
            store.memory_store("s", "discount", "50% off").unwrap();
            store.memory_store("s", "plain", "500 off").unwrap();
            store.memory_store("s", "snake_case", "x").unwrap();
            store.memory_store("s", "snakeXcase", "x").unwrap();
            store.memory_store("s", "path", "C:\\tmp").unwrap();
            store.memory_store("s", "other", "C:tmp").unwrap();
            assert_eq!(
                keys(store.memory_recall("s", Some("50%"), 10).unwrap()),
                ["discount"]
            );
            assert_eq!(
                keys(store.memory_recall("s", Some("e_c"), 10).unwrap()),
                ["snake_case"]
            );
            assert_eq!(
                keys(store.memory_recall("s", Some(":\\t"), 10).unwrap()),
                ["path"]
            );
        }
    }

    #[test]
    fn pattern_escapes_wildcards_and_escape_char() {
        assert_eq!(contains_pattern("a%b_c\\d"), "%a\\%b\\_c\\\\d%");
        assert_eq!(contains_pattern(""), "%%");
    }
}
