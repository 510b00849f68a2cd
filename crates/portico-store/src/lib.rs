//! Portico's embedded SQLite store: conversations and their messages, per-agent memory, the audit log
//! of tool calls (hash-chained, so edits show: [`Store::verify_audit`]), the tasks of Portico's A2A
//! server, approval requests with their single-use grants, and tool pins (upstream tool definitions as
//! first seen or last approved), in one file under the data directory.
//!
//! It is a persistence layer and nothing more: it does not decide who may call what, does not talk to
//! models or upstreams, and does not interpret message content (kept as opaque JSON). The schema is
//! versioned by an append-only migration list (see `migrations.rs`); a database written by a newer
//! Portico is refused rather than guessed at.
//!
//! # Calling from async code
//!
//! [`Store`] methods are synchronous, and may block for long: on PostgreSQL a call can wait up to
//! 30 s for a pooled connection, and as long again for a lock. Async code never calls them inline:
//! it goes through [`Store::run`], which runs the work on tokio's blocking pool with a bound on how
//! many such jobs run and wait (see `offload`), so a stalled database stalls only its own callers,
//! never a runtime worker. Hot paths write
//! through [`BatchWriter`] (A2A tasks, agent conversations): its async methods queue the write for the
//! store's writer thread, which group-commits everything queued at the same time, and resolve once that
//! commit is done. [`AuditWriter`] queues onto the same thread without waiting.

mod approvals;
mod audit;
mod batch;
mod checkpoint;
mod conversation_pages;
mod conversations;
mod db;
mod error;
mod memory;
mod migrations;
mod offload;
mod pins;
mod private;
mod replicas;
mod tasks;
#[doc(hidden)]
pub mod testing;
/// The tests' way to run one test on both databases (see `testing`).
#[cfg(test)]
pub(crate) use testing::both_backends;

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use rusqlite::Connection;

pub use approvals::{
    ApprovalAnswer, ApprovalBinding, ApprovalKind, ApprovalLimits, ApprovalRecord, ApprovalStatus,
    Decided, NewApproval, Requested,
};
pub use audit::{
    AuditEntry, AuditQuery, AuditRecord, AuditVerification, AuditWriter, BrokenLink, ChainProblem,
    GENESIS_HASH,
};
pub use batch::BatchWriter;
pub use conversation_pages::{ConversationCursor, ConversationSummary, MAX_CONVERSATION_PAGE};
pub use conversations::{Conversation, NewMessage, StoredMessage};
pub use db::DbError;
pub use db::pg::DEFAULT_POOL_SIZE;
pub use error::StoreError;
pub use memory::MemoryEntry;
pub use pins::ToolPin;
/// The state a task record is in: the domain's, re-exported so callers of the store need no other import.
pub use portico_core::TaskState;
pub use private::load_or_create_secret;
pub use replicas::{REPLICA_HEARTBEAT, REPLICA_LEASE, ReplicaRecord};
pub use tasks::{
    DEFAULT_MAX_TASKS, DEFAULT_TASK_PAGE_SIZE, EarlierStatus, MAX_TASK_PAGE_SIZE, StatusChange,
    TaskHead, TaskLimits, TaskPage, TaskQuery, TaskRecord, TaskStatusUpdate, TaskUpdate,
};

use error::hint_for;

/// What a `limit` of 0 means wherever a method takes one.
pub const DEFAULT_LIMIT: usize = 100;

/// A handle on the store. Cheap to clone; clones share one connection and can be used from any thread.
#[derive(Clone)]
pub struct Store {
    inner: Arc<Inner>,
}

struct Inner {
    backend: Backend,
    path: Option<PathBuf>,
    /// `path`, `:memory:`, or the PostgreSQL server and database (no password), for error messages.
    label: PathBuf,
    /// The queue of the writer thread that group-commits [`BatchWriter`] writes; started on first use.
    writes: OnceLock<batch::Queue>,
    /// How many writes the queue holds before writers wait ([`batch::MAX_QUEUED`]; tests lower it
    /// before first use).
    queue_bound: std::sync::atomic::AtomicUsize,
    /// Transactions that thread has committed.
    committed_batches: AtomicU64,
    /// Where the writer thread times its commits (`/metrics`); set once, by the engine.
    metrics: OnceLock<portico_metrics::Metrics>,
    /// The audit chain's head within the transaction appending records (see `audit::chain`).
    audit_head: Mutex<audit::ChainHead>,
    /// The replica this process is among those sharing the store (the runner it records on the
    /// A2A tasks it writes); set once, by the engine.
    replica: OnceLock<String>,
    /// Background WAL checkpoints; `None` for an in-memory store (or if the thread could not start).
    checkpointer: Option<checkpoint::Checkpointer>,
    /// The bound on store work run from async code ([`Store::run`]), and the heartbeat's own.
    jobs: offload::Lane,
    heartbeat_jobs: offload::Lane,
}

/// Where the store's rows live.
enum Backend {
    /// The embedded default: one connection, each operation holding it for its statement or
    /// transaction.
    Sqlite(Mutex<Connection>),
    /// A PostgreSQL server shared by several replicas (`[store] url`). `beats` is a connection of
    /// its own for the replica's heartbeat and its view of the others, so that a pool busy with
    /// calls (or waiting on a lock) never delays the heartbeat past its lease.
    Postgres {
        pool: db::pg::Pool,
        beats: db::pg::Pool,
    },
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("path", &self.inner.label)
            .finish_non_exhaustive()
    }
}

impl Store {
    /// Opens (creating if needed) the store at `path`, creating missing parent directories, and brings
    /// its schema up to date. Its directory is created 0700 and its files 0600 (see `private`).
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            private::create_dir(dir, path)?;
        }
        private::prepare_database_files(path)?;
        let open_error = |source: rusqlite::Error| open_error(path, source.into());
        let conn = Connection::open(path).map_err(open_error)?;
        let mode: String = conn
            .pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))
            .map_err(open_error)?;
        if !mode.eq_ignore_ascii_case("wal") {
            // Still correct, only slower and with readers blocking the writer.
            tracing::warn!(path = %path.display(), journal_mode = %mode, "SQLite store could not switch to WAL mode");
        }
        // NORMAL rather than FULL: in WAL mode a commit has reached the WAL file (the OS page cache) before
        // it returns, so an acknowledged write survives the process being killed (kill -9, panic, OOM);
        // that is the guarantee Portico makes (an acknowledged A2A task is never lost to a crash of
        // Portico). What FULL adds is durability against an OS crash or power loss: without it the last
        // commits before such a crash can be lost, though the database stays consistent. FULL costs an
        // fsync on every commit (each group commit of `BatchWriter`, each audit batch), milliseconds each
        // on ordinary disks, for a guarantee Portico does not make; so NORMAL. Checkpoints still sync,
        // off the write path (see `checkpoint`).
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(open_error)?;
        conn.pragma_update(None, "wal_autocheckpoint", checkpoint::AUTOCHECKPOINT_PAGES)
            .map_err(open_error)?;
        let checkpointer = checkpoint::Checkpointer::start(path);
        Self::finish_sqlite_open(
            conn,
            Some(path.to_path_buf()),
            path.to_path_buf(),
            checkpointer,
        )
    }

    /// A private, empty store that disappears when the last clone is dropped. For tests and for running
    /// without a data directory.
    pub fn open_in_memory() -> Result<Store, StoreError> {
        let label = PathBuf::from(":memory:");
        let conn =
            Connection::open_in_memory().map_err(|source| open_error(&label, source.into()))?;
        Self::finish_sqlite_open(conn, None, label, None)
    }

    /// Connects to the PostgreSQL database at `url` (`postgres://USER:PASSWORD@HOST:PORT/DATABASE`,
    /// or any form tokio-postgres reads), keeping at most `pool_size` connections, and brings its
    /// schema up to date. Several Portico processes may share it: each migration is applied once,
    /// whichever process gets there first. The URL itself never appears in errors or logs (a
    /// password can hide anywhere in it): the store is named by user, host, port and database.
    pub fn open_postgres(url: &str, pool_size: usize) -> Result<Store, StoreError> {
        let target = db::pg::tls::target(url)?;
        let label = PathBuf::from(db::pg::describe_target(&target.config));
        let pool = db::pg::Pool::connect(target.config.clone(), target.tls.clone(), pool_size)
            .map_err(|source| open_error(&label, source))?;
        {
            let conn = pool.get().map_err(|source| open_error(&label, source))?;
            migrations::migrate_postgres(&conn, &label, migrations::MIGRATIONS)?;
        }
        let beats = db::pg::Pool::connect(target.config, target.tls, 1)
            .map_err(|source| open_error(&label, source))?;
        Ok(Self::from_backend(
            Backend::Postgres { pool, beats },
            None,
            label,
            None,
            // More would only wait for a connection, each in a blocking thread of its own.
            pool_size,
        ))
    }

    fn finish_sqlite_open(
        mut conn: Connection,
        path: Option<PathBuf>,
        label: PathBuf,
        checkpointer: Option<checkpoint::Checkpointer>,
    ) -> Result<Store, StoreError> {
        let open_error = |source: rusqlite::Error| open_error(&label, source.into());
        // Another Portico process (a CLI next to the daemon) may briefly hold the write lock.
        conn.busy_timeout(Duration::from_secs(5))
            .map_err(open_error)?;
        conn.pragma_update(None, "foreign_keys", "ON")
            .map_err(open_error)?;
        // Every statement of the hot paths (tasks, conversations, audit) stays prepared; rusqlite's
        // default of 16 made them evict one another.
        conn.set_prepared_statement_cache_capacity(64);
        migrations::migrate(&mut conn, &label, migrations::MIGRATIONS)?;
        Ok(Self::from_backend(
            Backend::Sqlite(Mutex::new(conn)),
            path,
            label,
            checkpointer,
            offload::SQLITE_RUNNING,
        ))
    }

    fn from_backend(
        backend: Backend,
        path: Option<PathBuf>,
        label: PathBuf,
        checkpointer: Option<checkpoint::Checkpointer>,
        running_jobs: usize,
    ) -> Store {
        Store {
            inner: Arc::new(Inner {
                backend,
                path,
                label,
                writes: OnceLock::new(),
                queue_bound: std::sync::atomic::AtomicUsize::new(batch::MAX_QUEUED),
                committed_batches: AtomicU64::new(0),
                metrics: OnceLock::new(),
                audit_head: Mutex::default(),
                replica: OnceLock::new(),
                checkpointer,
                jobs: offload::Lane::new(running_jobs),
                heartbeat_jobs: offload::Lane::new(1),
            }),
        }
    }

    /// Times every group commit of the writer thread into `metrics` from now on (`/metrics`). Set
    /// once; a second handle is ignored.
    pub fn set_metrics(&self, metrics: portico_metrics::Metrics) {
        let _ = self.inner.metrics.set(metrics);
    }

    /// Names the replica this process is (`[store] replica`): the A2A tasks it writes are recorded
    /// as run by it. Set once; a second name is ignored.
    pub fn set_replica(&self, name: &str) {
        let _ = self.inner.replica.set(name.to_string());
    }

    /// The replica this process is, if named.
    pub fn replica(&self) -> Option<&str> {
        self.inner.replica.get().map(String::as_str)
    }

    /// The file backing the store; `None` for an in-memory or a PostgreSQL store.
    pub fn path(&self) -> Option<&Path> {
        self.inner.path.as_deref()
    }

    /// Which database holds the store: `"sqlite"` or `"postgres"`.
    pub fn backend_name(&self) -> &'static str {
        match self.inner.backend {
            Backend::Sqlite(_) => "sqlite",
            Backend::Postgres { .. } => "postgres",
        }
    }

    /// Where the store is, for operators: the file, `:memory:`, or the PostgreSQL server and database
    /// (`postgres://USER@HOST:PORT/DATABASE`, never a password).
    pub fn location(&self) -> &Path {
        &self.inner.label
    }

    /// The schema version this store was brought to when it opened (every migration this Portico
    /// knows), without asking the database.
    pub fn schema_version_applied(&self) -> u32 {
        migrations::MIGRATIONS.len() as u32
    }

    /// The schema version of the database: the number of migrations applied.
    pub fn schema_version(&self) -> Result<u32, StoreError> {
        self.with_db("reading the schema version", |db| {
            migrations::schema_version(db)
        })
    }

    /// The SQLite connection, for tests that hold it (to stall the writer) or read SQLite's own
    /// tables; panics on a PostgreSQL store.
    #[cfg(test)]
    fn conn(&self) -> MutexGuard<'_, Connection> {
        match &self.inner.backend {
            Backend::Sqlite(conn) => lock_sqlite(conn),
            Backend::Postgres { .. } => {
                unreachable!("a SQLite-only statement ran on a PostgreSQL store")
            }
        }
    }

    /// Runs `work` on a connection, outside any explicit transaction: each statement commits on its
    /// own. For reads, and for writes of a single statement.
    fn with_db<T>(
        &self,
        operation: &'static str,
        work: impl FnOnce(&db::Db<'_>) -> Result<T, DbError>,
    ) -> Result<T, StoreError> {
        self.with_db_store_error(operation, |db| work(db).map_err(self.sql_error(operation)))
    }

    /// [`Store::with_db`] for work that reports the store's own errors.
    fn with_db_store_error<T>(
        &self,
        operation: &'static str,
        work: impl FnOnce(&db::Db<'_>) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        match &self.inner.backend {
            Backend::Sqlite(conn) => work(&db::Db::sqlite(&lock_sqlite(conn))),
            Backend::Postgres { pool, .. } => {
                let conn = pool.get().map_err(self.sql_error(operation))?;
                work(&db::Db::postgres(&conn))
            }
        }
    }

    /// Runs the reads of `work` on one snapshot (see [`Snapshot`]), so that a task and its messages,
    /// or a page and its total, agree.
    pub(crate) fn read_snapshot<T>(
        &self,
        operation: &'static str,
        work: impl FnOnce(&db::Db<'_>) -> Result<T, DbError>,
    ) -> Result<T, StoreError> {
        self.with_db(operation, |db| {
            let snapshot = Snapshot::begin(db)?;
            let value = work(db)?;
            snapshot.finish()?;
            Ok(value)
        })
    }

    /// [`Store::in_immediate_transaction`] for work that reports only database errors.
    pub(crate) fn in_db_transaction<T>(
        &self,
        operation: &'static str,
        mut work: impl FnMut(&db::Db<'_>) -> Result<T, DbError>,
    ) -> Result<T, StoreError> {
        self.in_immediate_transaction(operation, |db| work(db).map_err(self.sql_error(operation)))
    }

    /// [`Store::with_db_store_error`] on the heartbeat's own connection (see [`Backend::Postgres`]).
    fn with_heartbeat_db<T>(
        &self,
        operation: &'static str,
        work: impl FnOnce(&db::Db<'_>) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        match &self.inner.backend {
            Backend::Postgres { beats, .. } => {
                let conn = beats.get().map_err(self.sql_error(operation))?;
                work(&db::Db::postgres(&conn))
            }
            Backend::Sqlite(_) => self.with_db_store_error(operation, work),
        }
    }

    /// Runs `work` in a transaction of its own, committing if it succeeds and rolling back if it fails.
    /// On SQLite the write lock is taken up front (`IMMEDIATE`), so another process cannot slip in
    /// between a read and the write that depends on it. On PostgreSQL the transaction is
    /// `SERIALIZABLE`, which gives the same guarantee by failing one of two transactions that would
    /// contradict each other; that one is run again, up to [`CONFLICT_RETRIES`] times, so `work` may
    /// run more than once and must not have effects outside the transaction.
    fn in_immediate_transaction<T>(
        &self,
        operation: &'static str,
        mut work: impl FnMut(&db::Db<'_>) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        match &self.inner.backend {
            Backend::Sqlite(conn) => {
                let mut conn = lock_sqlite(conn);
                let tx = conn
                    .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
                    .map_err(self.sql_error(operation))?;
                let value = work(&db::Db::sqlite(&tx))?;
                tx.commit().map_err(self.sql_error(operation))?;
                self.committed();
                Ok(value)
            }
            Backend::Postgres { pool, .. } => {
                self.retried(pool, db::pg::PgConn::begin, operation, work)
            }
        }
    }

    /// [`Store::in_immediate_transaction`] for work whose first statement locks the one row that
    /// every concurrent writer of the same data locks first (an `UPDATE` of a conversation's row,
    /// before its messages are numbered). On PostgreSQL concurrent writers then wait for that lock
    /// in turn rather than fail and retry (see [`db::pg::PgConn::begin_row_locked`]), so a burst
    /// of appends to one conversation never runs out of retries.
    fn in_row_locked_transaction<T>(
        &self,
        operation: &'static str,
        work: impl FnMut(&db::Db<'_>) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        match &self.inner.backend {
            Backend::Postgres { pool, .. } => {
                self.retried(pool, db::pg::PgConn::begin_row_locked, operation, work)
            }
            Backend::Sqlite(_) => self.in_immediate_transaction(operation, work),
        }
    }

    /// [`Store::in_immediate_transaction`] on the heartbeat's own connection (see
    /// [`Backend::Postgres`]).
    fn in_heartbeat_transaction<T>(
        &self,
        operation: &'static str,
        work: impl FnMut(&db::Db<'_>) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        match &self.inner.backend {
            Backend::Postgres { beats, .. } => {
                self.retried(beats, db::pg::PgConn::begin, operation, work)
            }
            Backend::Sqlite(_) => self.in_immediate_transaction(operation, work),
        }
    }

    /// A transaction on a connection of `pool`, started by `begin`, run again when it loses a race
    /// (a serialization failure or a deadlock).
    fn retried<T>(
        &self,
        pool: &db::pg::Pool,
        begin: fn(&db::pg::PgConn) -> Result<(), DbError>,
        operation: &'static str,
        mut work: impl FnMut(&db::Db<'_>) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let conn = pool.get().map_err(self.sql_error(operation))?;
        let mut attempt = 0;
        loop {
            attempt += 1;
            let result = begin(&conn)
                .map_err(self.sql_error(operation))
                .and_then(|()| work(&db::Db::postgres(&conn)))
                .and_then(|value| {
                    conn.commit().map_err(self.sql_error(operation))?;
                    Ok(value)
                });
            match result {
                Ok(value) => return Ok(value),
                Err(error) => {
                    // A rollback that fails (a dead connection) leaves the connection noted as in
                    // a transaction, and the pool drops it; the error that matters is the
                    // transaction's own.
                    let rolled_back = conn.rollback().is_ok();
                    if !rolled_back || !error.is_retryable_conflict() || attempt > CONFLICT_RETRIES
                    {
                        return Err(error);
                    }
                    conflict_pause(attempt);
                }
            }
        }
    }

    /// Says that a transaction was committed, so that its pages get checkpointed in the background.
    fn committed(&self) {
        if let Some(checkpointer) = &self.inner.checkpointer {
            checkpointer.wake();
        }
    }

    fn label(&self) -> &Path {
        &self.inner.label
    }

    fn sql_error<E: Into<DbError>>(
        &self,
        operation: &'static str,
    ) -> impl FnOnce(E) -> StoreError + '_ {
        move |source| {
            let source = source.into();
            StoreError::Database {
                path: self.inner.label.clone(),
                operation,
                hint: hint_for(&source),
                source,
            }
        }
    }
}

/// An open read transaction on a [`db::Db`]: every statement run until [`Snapshot::finish`] sees the
/// database as it was at the first, whatever other connections (replicas, on PostgreSQL) commit
/// meanwhile. Rolled back if dropped unfinished (an error, or a panic), so a pooled PostgreSQL
/// connection never goes back to its pool inside it.
pub(crate) struct Snapshot<'d, 'c> {
    db: &'d db::Db<'c>,
    open: bool,
}

impl<'d, 'c> Snapshot<'d, 'c> {
    fn begin(db: &'d db::Db<'c>) -> Result<Self, DbError> {
        db.execute_batch(match db.dialect() {
            // Deferred: a read lock on the WAL's current end, and no write lock.
            db::Dialect::Sqlite => "BEGIN",
            // A snapshot taken at the first statement; being read-only, it never fails on a conflict
            // with the SERIALIZABLE writers, so it needs no retries.
            db::Dialect::Postgres => "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY",
        })?;
        Ok(Snapshot { db, open: true })
    }

    fn finish(mut self) -> Result<(), DbError> {
        self.open = false;
        self.db.execute_batch("COMMIT")
    }
}

impl Drop for Snapshot<'_, '_> {
    fn drop(&mut self) {
        if self.open {
            let _ = self.db.execute_batch("ROLLBACK");
        }
    }
}

/// How many times a PostgreSQL transaction that lost a race with another is run again before its
/// error is reported. Each run after the first waits a little longer (see [`conflict_pause`]).
const CONFLICT_RETRIES: u32 = 8;

/// A short pause, growing with each attempt and jittered, so that two replicas whose transactions
/// collided do not collide again in lockstep.
fn conflict_pause(attempt: u32) {
    let ceiling_ms = 2_u64.saturating_pow(attempt.min(7));
    std::thread::sleep(Duration::from_millis(
        rand::random::<u64>() % (ceiling_ms + 1),
    ));
}

fn lock_sqlite(conn: &Mutex<Connection>) -> MutexGuard<'_, Connection> {
    // A panic while it was held cannot have left a transaction open (rusqlite rolls back on drop), so
    // a poisoned lock is safe to take over.
    conn.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn open_error(label: &Path, source: DbError) -> StoreError {
    StoreError::Open {
        path: label.to_path_buf(),
        hint: hint_for(&source),
        source,
    }
}

/// Milliseconds since the Unix epoch; a clock before 1970 reads as 0 rather than failing a write.
fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// SQLite integers are signed; counts beyond `i64::MAX` cannot occur, so saturate instead of erroring.
fn to_sql_int(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

fn from_sql_int(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}

fn sql_limit(limit: usize) -> i64 {
    let limit = if limit == 0 { DEFAULT_LIMIT } else { limit };
    i64::try_from(limit).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_is_send_sync_and_clone() {
        fn assert_traits<T: Send + Sync + Clone + 'static>() {}
        assert_traits::<Store>();
        assert_traits::<AuditWriter>();
    }

    #[test]
    fn open_creates_parent_dirs_and_sets_pragmas() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nested/deeper/portico.db");
        let store = Store::open(&path).unwrap();
        assert_eq!(store.path(), Some(path.as_path()));
        assert!(path.is_file());
        assert_eq!(
            store.schema_version().unwrap(),
            migrations::MIGRATIONS.len() as u32
        );

        let conn = store.conn();
        let pragma = |name: &str| -> String {
            conn.query_row(&format!("PRAGMA {name}"), [], |row| {
                row.get::<_, rusqlite::types::Value>(0)
            })
            .map(|v| match v {
                rusqlite::types::Value::Integer(i) => i.to_string(),
                rusqlite::types::Value::Text(s) => s,
                other => format!("{other:?}"),
            })
            .unwrap()
        };
        assert_eq!(pragma("journal_mode"), "wal");
        assert_eq!(pragma("synchronous"), "1"); // NORMAL
        assert_eq!(
            pragma("wal_autocheckpoint"),
            checkpoint::AUTOCHECKPOINT_PAGES.to_string()
        );
        assert_eq!(pragma("foreign_keys"), "1");
        assert_eq!(pragma("busy_timeout"), "5000");
    }

    #[test]
    fn in_memory_store_has_no_path_and_full_schema() {
        let store = Store::open_in_memory().unwrap();
        assert_eq!(store.path(), None);
        assert_eq!(
            store.schema_version().unwrap(),
            migrations::MIGRATIONS.len() as u32
        );
        assert_eq!(format!("{store:?}"), "Store { path: \":memory:\", .. }");
    }

    #[test]
    fn open_refuses_a_newer_database_and_names_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("portico.db");
        Connection::open(&path)
            .unwrap()
            .pragma_update(None, "user_version", 999)
            .unwrap();
        let err = Store::open(&path).unwrap_err();
        assert!(
            matches!(&err, StoreError::TooNew { found: 999, supported, path: p }
                if p == &path && *supported == migrations::MIGRATIONS.len() as u32),
            "{err}"
        );
        assert!(err.to_string().contains(&path.display().to_string()));
    }

    #[test]
    fn open_reports_a_file_that_is_not_a_database() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("portico.db");
        std::fs::write(&path, vec![b'x'; 4096]).unwrap();
        let err = Store::open(&path).unwrap_err();
        let message = err.to_string();
        assert!(message.contains(&path.display().to_string()), "{message}");
        assert!(message.contains("move it aside"), "{message}");
    }

    #[test]
    fn data_persists_across_reopen_without_rerunning_migrations() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("portico.db");
        let store = Store::open(&path).unwrap();
        let conversation = store.create_conversation("planner").unwrap();
        store.memory_store("planner", "goal", "ship").unwrap();
        drop(store);

        let store = Store::open(&path).unwrap();
        assert_eq!(
            store.schema_version().unwrap(),
            migrations::MIGRATIONS.len() as u32
        );
        assert_eq!(
            store.conversation(&conversation.id).unwrap(),
            Some(conversation)
        );
        assert_eq!(
            store
                .memory_get("planner", "goal")
                .unwrap()
                .map(|m| m.value),
            Some("ship".to_string())
        );
    }

    #[test]
    fn a_wrong_postgres_password_fails_at_open_naming_the_url_without_it() {
        let Some(url) = testing::postgres_test_url() else {
            return;
        };
        let (scheme, after) = url.split_once("://").unwrap();
        let (userinfo, host_and_more) = after.split_once('@').unwrap();
        let user = userinfo.split(':').next().unwrap();
        let wrong = format!("{scheme}://{user}:portico-wrong-password@{host_and_more}");
        let err = Store::open_postgres(&wrong, 2).unwrap_err();
        let message = err.to_string();
        assert!(matches!(err, StoreError::Open { .. }), "{message}");
        assert!(!message.contains("portico-wrong-password"), "{message}");
        assert!(
            message.contains("postgres://portico@127.0.0.1:"),
            "{message}"
        );
        assert!(message.contains("user or password"), "{message}");
        assert!(matches!(
            Store::open_postgres("postgres://db:notaport/x", 2),
            Err(StoreError::BadUrl { .. })
        ));
    }

    #[test]
    fn limits_default_and_saturate() {
        assert_eq!(sql_limit(0), DEFAULT_LIMIT as i64);
        assert_eq!(sql_limit(7), 7);
        assert_eq!(to_sql_int(u64::MAX), i64::MAX);
        assert_eq!(from_sql_int(-3), 0);
        assert_eq!(from_sql_int(42), 42);
    }
}
