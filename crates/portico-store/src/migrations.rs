//! The schema, as an append-only list of migrations.
//!
//! To change the schema, append a new entry to [`MIGRATIONS`]; never edit or reorder an entry that has
//! shipped, because databases in the field record only how many entries they have applied (in
//! `PRAGMA user_version`), not what those entries said.

use std::path::Path;

use rusqlite::{Connection, TransactionBehavior};

use crate::db::pg::PgConn;
use crate::db::{Db, DbError, params};
use crate::error::{StoreError, hint_for};

/// Migration `i` (0-based) takes the schema from version `i` to version `i + 1`.
pub(crate) const MIGRATIONS: &[&str] = &[
    // 1: conversations, messages, agent memory, audit log.
    r#"
    CREATE TABLE conversations (
        id            TEXT    NOT NULL PRIMARY KEY,
        agent         TEXT    NOT NULL,
        created_at_ms INTEGER NOT NULL,
        updated_at_ms INTEGER NOT NULL,
        input_tokens  INTEGER NOT NULL DEFAULT 0,
        output_tokens INTEGER NOT NULL DEFAULT 0,
        message_count INTEGER NOT NULL DEFAULT 0
    ) STRICT;
    CREATE INDEX conversations_by_updated ON conversations (updated_at_ms);
    CREATE INDEX conversations_by_agent ON conversations (agent, updated_at_ms);

    CREATE TABLE messages (
        conversation_id TEXT    NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
        seq             INTEGER NOT NULL,
        role            TEXT    NOT NULL,
        content         TEXT    NOT NULL,
        input_tokens    INTEGER NOT NULL,
        output_tokens   INTEGER NOT NULL,
        created_at_ms   INTEGER NOT NULL,
        PRIMARY KEY (conversation_id, seq)
    ) STRICT;

    CREATE TABLE memory (
        scope         TEXT    NOT NULL,
        key           TEXT    NOT NULL,
        value         TEXT    NOT NULL,
        updated_at_ms INTEGER NOT NULL,
        PRIMARY KEY (scope, key)
    ) STRICT;
    CREATE INDEX memory_by_updated ON memory (scope, updated_at_ms);

    -- AUTOINCREMENT so that ids are never reused after old rows are pruned: an id seen in an export
    -- keeps meaning the same record.
    CREATE TABLE audit (
        id               INTEGER PRIMARY KEY AUTOINCREMENT,
        at_ms            INTEGER NOT NULL,
        caller           TEXT    NOT NULL,
        tool             TEXT    NOT NULL,
        arguments_digest TEXT    NOT NULL,
        outcome          TEXT    NOT NULL,
        detail           TEXT,
        duration_ms      INTEGER NOT NULL
    ) STRICT;
    CREATE INDEX audit_by_at ON audit (at_ms);
    CREATE INDEX audit_by_caller ON audit (caller, at_ms);
    CREATE INDEX audit_by_tool ON audit (tool, at_ms);
    "#,
    // 2: A2A tasks, their message and status histories, and their push-notification configs. Status,
    // messages, artifacts, metadata and configs are opaque JSON text; `state` is the A2A 1.0 enum name.
    r#"
    CREATE TABLE a2a_tasks (
        id            TEXT    NOT NULL PRIMARY KEY,
        context_id    TEXT    NOT NULL,
        owner         TEXT    NOT NULL,
        agent         TEXT    NOT NULL,
        state         TEXT    NOT NULL,
        status        TEXT    NOT NULL,
        artifacts     TEXT    NOT NULL,
        metadata      TEXT    NOT NULL,
        created_at_ms INTEGER NOT NULL,
        updated_at_ms INTEGER NOT NULL
    ) STRICT;
    -- Listing (always per owner, newest first, id breaking ties), eviction and recovery (by state,
    -- oldest first), and filtering by context.
    CREATE INDEX a2a_tasks_by_owner ON a2a_tasks (owner, updated_at_ms, id);
    CREATE INDEX a2a_tasks_by_state ON a2a_tasks (state, updated_at_ms, id);
    CREATE INDEX a2a_tasks_by_context ON a2a_tasks (context_id, updated_at_ms, id);

    CREATE TABLE a2a_task_messages (
        task_id TEXT    NOT NULL REFERENCES a2a_tasks (id) ON DELETE CASCADE,
        seq     INTEGER NOT NULL,
        message TEXT    NOT NULL,
        PRIMARY KEY (task_id, seq)
    ) STRICT;

    CREATE TABLE a2a_task_status (
        task_id TEXT    NOT NULL REFERENCES a2a_tasks (id) ON DELETE CASCADE,
        seq     INTEGER NOT NULL,
        state   TEXT    NOT NULL,
        status  TEXT    NOT NULL,
        at_ms   INTEGER NOT NULL,
        PRIMARY KEY (task_id, seq)
    ) STRICT;

    -- The integer key only orders a task's configs by first registration; configs are addressed by
    -- (task_id, config_id).
    CREATE TABLE a2a_push_configs (
        id        INTEGER PRIMARY KEY,
        task_id   TEXT    NOT NULL REFERENCES a2a_tasks (id) ON DELETE CASCADE,
        config_id TEXT    NOT NULL,
        config    TEXT    NOT NULL,
        UNIQUE (task_id, config_id)
    ) STRICT;
    "#,
    // 3: approval requests and their single-use grants. A request binds principal, tool, argument
    // digest, policy and definition digest; `arguments` is the validated arguments as JSON text, kept
    // for the approver until the row is swept. `status` is pending, approved, denied, consumed or
    // expired.
    r#"
    CREATE TABLE approvals (
        id                TEXT    NOT NULL PRIMARY KEY,
        principal         TEXT    NOT NULL,
        tool              TEXT    NOT NULL,
        arguments_digest  TEXT    NOT NULL,
        policy            TEXT    NOT NULL,
        definition_digest TEXT    NOT NULL,
        arguments         TEXT    NOT NULL,
        reason            TEXT    NOT NULL,
        status            TEXT    NOT NULL,
        created_at_ms     INTEGER NOT NULL,
        expires_at_ms     INTEGER NOT NULL,
        decided_at_ms     INTEGER,
        decided_by        TEXT,
        decided_via       TEXT,
        deny_reason       TEXT,
        consumed_at_ms    INTEGER
    ) STRICT;
    -- Finding a call's request or grant (reuse, consume, a standing denial), listing and counting by
    -- status, and sweeping by age.
    CREATE INDEX approvals_by_binding
        ON approvals (principal, tool, arguments_digest, policy, definition_digest, status);
    CREATE INDEX approvals_by_status ON approvals (status, created_at_ms);
    "#,
    // 4: the audit log's hash chain (see `audit::chain`): each record's own hash and the hash of the
    // record before it, hex. Records written before this migration have neither and stay unchained.
    r#"
    ALTER TABLE audit ADD COLUMN prev_hash TEXT;
    ALTER TABLE audit ADD COLUMN hash TEXT;
    "#,
    // 5: tool pinning (see `pins`): the digest and definition of each upstream tool as first seen
    // (or as last approved), keyed by server and the upstream's own tool name; and approval requests
    // of a second kind, `definition`, which carry the pinned and the new definition (JSON text) for
    // the approver to compare. Requests made before this migration are calls.
    r#"
    CREATE TABLE tool_pins (
        server        TEXT    NOT NULL,
        tool          TEXT    NOT NULL,
        digest        TEXT    NOT NULL,
        definition    TEXT    NOT NULL,
        pinned_at_ms  INTEGER NOT NULL,
        PRIMARY KEY (server, tool)
    ) STRICT;
    ALTER TABLE approvals ADD COLUMN kind TEXT NOT NULL DEFAULT 'call';
    ALTER TABLE approvals ADD COLUMN previous_definition TEXT;
    ALTER TABLE approvals ADD COLUMN new_definition TEXT;
    "#,
    // 6: the client an agent's held call was made for (`client:a` when its call started the run),
    // part of the binding: a grant for one client's run is not another's. NULL for a client's own
    // call, and for every request stored before. And the client that started each conversation,
    // the only one that may read or continue it (NULL for conversations stored before).
    r#"
    ALTER TABLE approvals ADD COLUMN on_behalf_of TEXT;
    ALTER TABLE conversations ADD COLUMN owner TEXT;
    "#,
    // 7: several replicas on one store (see `replicas`): each replica's heartbeat, the secrets every
    // replica must agree on (the audit digest key), and the replica running each A2A task, whose
    // lease is that replica's heartbeat. NULL for tasks stored before, and for tasks no run drives.
    r#"
    CREATE TABLE replicas (
        name            TEXT    NOT NULL PRIMARY KEY,
        incarnation     TEXT    NOT NULL,
        started_at_ms   INTEGER NOT NULL,
        heartbeat_at_ms INTEGER NOT NULL
    ) STRICT;
    CREATE TABLE shared_secrets (
        name   TEXT NOT NULL PRIMARY KEY,
        secret BLOB NOT NULL
    ) STRICT;
    ALTER TABLE a2a_tasks ADD COLUMN runner TEXT;
    CREATE INDEX a2a_tasks_by_runner ON a2a_tasks (runner, state);
    "#,
];

/// The number of migrations applied to the database `db` talks to.
pub(crate) fn schema_version(db: &Db<'_>) -> Result<u32, DbError> {
    match db.as_sqlite() {
        Some(conn) => Ok(user_version(conn)?),
        None => db.query_one(
            "SELECT version FROM portico_schema_version",
            params![],
            |row| row.get::<u32>(0),
        ),
    }
}

pub(crate) fn user_version(conn: &Connection) -> rusqlite::Result<u32> {
    conn.query_row("PRAGMA user_version", [], |row| row.get(0))
}

/// Brings the database up to `migrations.len()`, one transaction per step so that a crash leaves it at
/// a well-defined version. Taking the write lock before reading the version makes two processes opening
/// the same fresh file at once apply each step exactly once: the second waits, then sees it done.
pub(crate) fn migrate(
    conn: &mut Connection,
    path: &Path,
    migrations: &[&str],
) -> Result<(), StoreError> {
    let supported = migrations.len() as u32;
    loop {
        let migration_error = |version: u32| {
            move |source: rusqlite::Error| {
                let source = DbError::from(source);
                StoreError::Migration {
                    path: path.to_path_buf(),
                    version,
                    hint: hint_for(&source),
                    source,
                }
            }
        };
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(migration_error(0))?;
        let found = user_version(&tx).map_err(migration_error(0))?;
        if found > supported {
            return Err(StoreError::TooNew {
                path: path.to_path_buf(),
                found,
                supported,
            });
        }
        if found == supported {
            // Nothing was written; the drop rolls back the empty transaction.
            return Ok(());
        }
        let next = found + 1;
        tx.execute_batch(migrations[found as usize])
            .map_err(migration_error(next))?;
        // user_version lives in the database header, so setting it inside the transaction commits or
        // rolls back together with the schema change.
        tx.pragma_update(None, "user_version", next)
            .map_err(migration_error(next))?;
        tx.commit().map_err(migration_error(next))?;
        tracing::debug!(path = %path.display(), version = next, "applied store migration");
    }
}

/// The advisory lock key under which PostgreSQL migrations run ("PORTICO" in ASCII), so that replicas
/// starting together apply each migration once: the second waits, then finds it applied.
const MIGRATION_LOCK: i64 = 0x0050_4F52_5449_434F;

/// [`migrate`] for a PostgreSQL database: the same list, each entry translated by [`postgres_ddl`],
/// the version kept in the one-row table `portico_schema_version`.
pub(crate) fn migrate_postgres(
    conn: &PgConn,
    label: &Path,
    migrations: &[&str],
) -> Result<(), StoreError> {
    let supported = migrations.len() as u32;
    let migration_error = |version: u32| {
        move |source: DbError| StoreError::Migration {
            path: label.to_path_buf(),
            version,
            hint: hint_for(&source),
            source,
        }
    };
    let db = Db::postgres(conn);
    db.query_one(
        "SELECT pg_advisory_lock(?1)",
        params![MIGRATION_LOCK],
        |_| Ok(()),
    )
    .map_err(migration_error(0))?;
    let result = (|| {
        db.execute_batch(
            "CREATE TABLE IF NOT EXISTS portico_schema_version (version BIGINT NOT NULL); \
             INSERT INTO portico_schema_version (version) \
                 SELECT 0 WHERE NOT EXISTS (SELECT 1 FROM portico_schema_version)",
        )
        .map_err(migration_error(0))?;
        loop {
            let found = schema_version(&db).map_err(migration_error(0))?;
            if found > supported {
                return Err(StoreError::TooNew {
                    path: label.to_path_buf(),
                    found,
                    supported,
                });
            }
            if found == supported {
                return Ok(());
            }
            let next = found + 1;
            conn.begin().map_err(migration_error(next))?;
            let step = db
                .execute_batch(&postgres_ddl(migrations[found as usize]))
                .and_then(|()| {
                    db.execute(
                        "UPDATE portico_schema_version SET version = ?1",
                        params![next],
                    )
                })
                .and_then(|_| conn.commit());
            if let Err(error) = step {
                let _ = conn.rollback();
                return Err(migration_error(next)(error));
            }
            tracing::debug!(store = %label.display(), version = next, "applied store migration");
        }
    })();
    let unlocked = db.query_one(
        "SELECT pg_advisory_unlock(?1)",
        params![MIGRATION_LOCK],
        |_| Ok(()),
    );
    let () = result?;
    unlocked.map_err(migration_error(supported))
}

/// A migration of [`MIGRATIONS`] (SQLite's DDL) as PostgreSQL's: SQLite's 64-bit `INTEGER` is
/// `BIGINT`, `BLOB` is `BYTEA`, an integer primary key is an identity column, `STRICT` goes (a
/// PostgreSQL table is always strict), and every new table gets the `rowid` SQLite gives each of its
/// tables, an identity counting insertions, which queries use to order rows inserted in the same
/// millisecond.
pub(crate) fn postgres_ddl(sqlite: &str) -> String {
    let mut out = String::with_capacity(sqlite.len() + 64);
    for line in sqlite.lines() {
        let mut line = line.to_string();
        if !line.trim_start().starts_with("--") {
            line = line
                .replace(
                    "INTEGER PRIMARY KEY AUTOINCREMENT",
                    "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY",
                )
                .replace(
                    "INTEGER PRIMARY KEY",
                    "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY",
                )
                .replace("INTEGER", "BIGINT")
                .replace("BLOB", "BYTEA")
                .replace(") STRICT;", ");");
            if line.trim_start().starts_with("CREATE TABLE") && line.trim_end().ends_with('(') {
                line.push_str("\n        rowid BIGINT GENERATED ALWAYS AS IDENTITY,");
            }
        }
        out.push_str(&line);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One schema: the same list applied to each database leaves the same tables with the same
    /// columns (but for PostgreSQL's `rowid`, which SQLite has implicitly, and its version table).
    #[test]
    fn both_databases_end_with_the_same_tables_and_columns() {
        let Some(url) = crate::testing::postgres_test_url() else {
            return;
        };
        let columns = |store: &crate::Store, sql: &str| -> Vec<(String, String)> {
            let mut found = store
                .with_db("listing columns", |db| {
                    db.query_map(sql, params![], |row| Ok((row.get(0)?, row.get(1)?)))
                })
                .unwrap();
            found.sort();
            found
        };
        let sqlite = columns(
            &crate::Store::open_in_memory().unwrap(),
            "SELECT m.name, p.name FROM sqlite_schema m JOIN pragma_table_info(m.name) p \
             WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%'",
        );
        let postgres = columns(
            &crate::Store::open_postgres(&url, 2).unwrap(),
            "SELECT table_name::text, column_name::text FROM information_schema.columns \
             WHERE table_schema = current_schema() AND table_name <> 'portico_schema_version' \
               AND column_name <> 'rowid'",
        );
        assert!(sqlite.len() > 60, "{sqlite:?}");
        assert_eq!(sqlite, postgres);
    }

    #[test]
    fn sqlite_ddl_becomes_postgres_ddl() {
        let translated = postgres_ddl(
            "CREATE TABLE t (\n    id INTEGER PRIMARY KEY AUTOINCREMENT,\n    n INTEGER NOT NULL,\n    b BLOB\n) STRICT;\n-- INTEGER in a comment stays\n",
        );
        assert_eq!(
            translated,
            "CREATE TABLE t (\n        rowid BIGINT GENERATED ALWAYS AS IDENTITY,\n    id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,\n    n BIGINT NOT NULL,\n    b BYTEA\n);\n-- INTEGER in a comment stays\n"
        );
    }

    fn count(conn: &Connection, sql: &str) -> i64 {
        conn.query_row(sql, [], |row| row.get(0)).unwrap()
    }

    #[test]
    fn applies_each_migration_once_across_reopens() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.db");
        let v1: &[&str] = &["CREATE TABLE t (x INTEGER); INSERT INTO t VALUES (1);"];
        let v2: &[&str] = &[v1[0], "INSERT INTO t VALUES (2);"];

        let mut conn = Connection::open(&path).unwrap();
        migrate(&mut conn, &path, v1).unwrap();
        assert_eq!(user_version(&conn).unwrap(), 1);
        drop(conn);

        // Re-running migration 1 would fail on CREATE TABLE and would insert a second row.
        let mut conn = Connection::open(&path).unwrap();
        migrate(&mut conn, &path, v1).unwrap();
        assert_eq!(count(&conn, "SELECT count(*) FROM t"), 1);

        migrate(&mut conn, &path, v2).unwrap();
        assert_eq!(user_version(&conn).unwrap(), 2);
        assert_eq!(count(&conn, "SELECT sum(x) FROM t"), 3);
        drop(conn);

        let mut conn = Connection::open(&path).unwrap();
        migrate(&mut conn, &path, v2).unwrap();
        assert_eq!(count(&conn, "SELECT count(*) FROM t"), 2);
    }

    #[test]
    fn failed_migration_leaves_previous_version_intact() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.db");
        let good: &[&str] = &["CREATE TABLE t (x INTEGER);"];
        let bad: &[&str] = &[
            good[0],
            "INSERT INTO t VALUES (1); INSERT INTO nope VALUES (1);",
        ];

        let mut conn = Connection::open(&path).unwrap();
        migrate(&mut conn, &path, good).unwrap();
        let err = migrate(&mut conn, &path, bad).unwrap_err();
        assert!(
            matches!(err, StoreError::Migration { version: 2, .. }),
            "{err}"
        );
        assert_eq!(user_version(&conn).unwrap(), 1);
        assert_eq!(count(&conn, "SELECT count(*) FROM t"), 0);
    }

    #[test]
    fn refuses_a_database_newer_than_the_code() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.db");
        let mut conn = Connection::open(&path).unwrap();
        conn.pragma_update(None, "user_version", 7).unwrap();
        let err = migrate(&mut conn, &path, &["SELECT 1;"]).unwrap_err();
        match &err {
            StoreError::TooNew {
                path: p,
                found,
                supported,
            } => {
                assert_eq!((p.as_path(), *found, *supported), (path.as_path(), 7, 1));
            }
            other => panic!("expected TooNew, got {other}"),
        }
        assert!(err.to_string().contains("upgrade Portico"), "{err}");
    }
}
