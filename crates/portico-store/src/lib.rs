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
//! [`Store`] methods are synchronous. Each holds a mutex over the one connection only for its own
//! statement or transaction, which on a local WAL database takes microseconds to low milliseconds, so
//! occasional calls (storing a memory, reading a task) are cheap enough to make inline from async code,
//! or through `tokio::task::spawn_blocking` where a stall must never reach the runtime. Hot paths write
//! through [`BatchWriter`] (A2A tasks, agent conversations): its async methods queue the write for the
//! store's writer thread, which group-commits everything queued at the same time, and resolve once that
//! commit is done. [`AuditWriter`] queues onto the same thread without waiting.

mod approvals;
mod audit;
mod batch;
mod checkpoint;
mod conversation_pages;
mod conversations;
mod error;
mod memory;
mod migrations;
mod pins;
mod private;
mod tasks;

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
pub use error::StoreError;
pub use memory::MemoryEntry;
pub use pins::ToolPin;
/// The state a task record is in: the domain's, re-exported so callers of the store need no other import.
pub use portico_core::TaskState;
pub use private::load_or_create_secret;
pub use tasks::{
    DEFAULT_MAX_TASKS, DEFAULT_TASK_PAGE_SIZE, EarlierStatus, MAX_TASK_PAGE_SIZE, StatusChange,
    TaskLimits, TaskPage, TaskQuery, TaskRecord, TaskStatusUpdate, TaskUpdate,
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
    conn: Mutex<Connection>,
    path: Option<PathBuf>,
    /// `path`, or `:memory:`, for error messages.
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
    /// Background WAL checkpoints; `None` for an in-memory store (or if the thread could not start).
    checkpointer: Option<checkpoint::Checkpointer>,
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
        let open_error = |source: rusqlite::Error| StoreError::Open {
            path: path.to_path_buf(),
            hint: hint_for(&source),
            source,
        };
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
        Self::finish_open(
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
        let conn = Connection::open_in_memory().map_err(|source| StoreError::Open {
            path: label.clone(),
            hint: hint_for(&source),
            source,
        })?;
        Self::finish_open(conn, None, label, None)
    }

    fn finish_open(
        mut conn: Connection,
        path: Option<PathBuf>,
        label: PathBuf,
        checkpointer: Option<checkpoint::Checkpointer>,
    ) -> Result<Store, StoreError> {
        let open_error = |source: rusqlite::Error| StoreError::Open {
            path: label.clone(),
            hint: hint_for(&source),
            source,
        };
        // Another Portico process (a CLI next to the daemon) may briefly hold the write lock.
        conn.busy_timeout(Duration::from_secs(5))
            .map_err(open_error)?;
        conn.pragma_update(None, "foreign_keys", "ON")
            .map_err(open_error)?;
        // Every statement of the hot paths (tasks, conversations, audit) stays prepared; rusqlite's
        // default of 16 made them evict one another.
        conn.set_prepared_statement_cache_capacity(64);
        migrations::migrate(&mut conn, &label, migrations::MIGRATIONS)?;
        Ok(Store {
            inner: Arc::new(Inner {
                conn: Mutex::new(conn),
                path,
                label,
                writes: OnceLock::new(),
                queue_bound: std::sync::atomic::AtomicUsize::new(batch::MAX_QUEUED),
                committed_batches: AtomicU64::new(0),
                metrics: OnceLock::new(),
                audit_head: Mutex::default(),
                checkpointer,
            }),
        })
    }

    /// Times every group commit of the writer thread into `metrics` from now on (`/metrics`). Set
    /// once; a second handle is ignored.
    pub fn set_metrics(&self, metrics: portico_metrics::Metrics) {
        let _ = self.inner.metrics.set(metrics);
    }

    /// The file backing the store; `None` for an in-memory store.
    pub fn path(&self) -> Option<&Path> {
        self.inner.path.as_deref()
    }

    /// The schema version of the database (`PRAGMA user_version`): the number of migrations applied.
    pub fn schema_version(&self) -> Result<u32, StoreError> {
        migrations::user_version(&self.conn()).map_err(self.sql_error("reading the schema version"))
    }

    /// The connection, for one statement or transaction. A panic while it was held cannot have left a
    /// transaction open (rusqlite rolls back on drop), so a poisoned lock is safe to take over.
    fn conn(&self) -> MutexGuard<'_, Connection> {
        self.inner
            .conn
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Runs `work` in an `IMMEDIATE` transaction of its own (the write lock taken up front, so another
    /// process cannot slip in between a read and the write that depends on it), committing if it
    /// succeeds and rolling back if it fails.
    fn in_immediate_transaction<T>(
        &self,
        operation: &'static str,
        work: impl FnOnce(&Connection) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let mut conn = self.conn();
        let tx = conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(self.sql_error(operation))?;
        let value = work(&tx)?;
        tx.commit().map_err(self.sql_error(operation))?;
        self.committed();
        Ok(value)
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

    fn sql_error(
        &self,
        operation: &'static str,
    ) -> impl FnOnce(rusqlite::Error) -> StoreError + '_ {
        move |source| StoreError::Sqlite {
            path: self.inner.label.clone(),
            operation,
            hint: hint_for(&source),
            source,
        }
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
    fn limits_default_and_saturate() {
        assert_eq!(sql_limit(0), DEFAULT_LIMIT as i64);
        assert_eq!(sql_limit(7), 7);
        assert_eq!(to_sql_int(u64::MAX), i64::MAX);
        assert_eq!(from_sql_int(-3), 0);
        assert_eq!(from_sql_int(42), 42);
    }
}
