//! What can go wrong in the store, phrased so that the message alone tells an operator which database,
//! which operation and what to try next.

use std::path::PathBuf;

use crate::db::DbError;

/// A failure of the embedded store. Every variant names the database (`:memory:` for in-memory stores).
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error(
        "cannot create the directory {dir} for the store {path}: {source}; check permissions or choose another data directory"
    )]
    CreateDir {
        dir: PathBuf,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error(
        "cannot make the store file {path} owner-only (0600): {source}; check who owns it, or choose another data directory"
    )]
    Permissions {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error(
        "cannot read or create the secret {path}: {source}; delete the file to make a new one (older audit digests then stop matching)"
    )]
    Secret {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error(
        "{operation} in the store {path} did not start: {reason}; the database is slow or stalled \
         (a long lock, an unreachable server): check it, then retry"
    )]
    Busy {
        path: PathBuf,
        operation: &'static str,
        reason: String,
    },

    #[error("cannot open the store {path}: {source}; {hint}")]
    Open {
        path: PathBuf,
        #[source]
        source: DbError,
        hint: &'static str,
    },

    #[error(
        "[store] url is not a PostgreSQL URL Portico can use: {reason}; write it as \
         postgres://USER:PASSWORD@HOST:PORT/DATABASE (or postgres://USER@%2Frun%2Fpostgresql/DATABASE for a Unix socket)"
    )]
    BadUrl { reason: String },

    #[error("TLS to the PostgreSQL server of [store] url: {reason}")]
    Tls { reason: String },

    #[error(
        "the store {path} has schema version {found}, but this Portico supports at most {supported}; \
         upgrade Portico, or point it at another data directory"
    )]
    TooNew {
        path: PathBuf,
        found: u32,
        supported: u32,
    },

    #[error("migrating the store {path} to schema version {version} failed: {source}; {hint}")]
    Migration {
        path: PathBuf,
        version: u32,
        #[source]
        source: DbError,
        hint: &'static str,
    },

    #[error(
        "the shared secret {name:?} in the store {path} is {length} bytes long, not 32; another program changed it: \
         delete its row from shared_secrets (older audit digests then stop matching)"
    )]
    SharedSecret {
        path: PathBuf,
        name: String,
        length: usize,
    },

    #[error(
        "another live Portico process is replica {name:?} of the store {path} (its heartbeat is {seen_ms_ago} ms old); \
         give each replica its own [store] replica name, or leave it out for the host name and process id"
    )]
    ReplicaNameTaken {
        path: PathBuf,
        name: String,
        seen_ms_ago: i64,
    },

    #[error(
        "conversation {id:?} not found in the store {path}; create it with create_conversation or check the id"
    )]
    ConversationNotFound { path: PathBuf, id: String },

    #[error(
        "A2A task {id:?} not found in the store {path}; it was never stored, or it had finished and was evicted \
         to make room for newer tasks (see [a2a] max_tasks)"
    )]
    TaskNotFound { path: PathBuf, id: String },

    #[error(
        "A2A task {id:?} in the store {path} has finished ({state}) and takes no more writes; \
         it may have been cancelled through another replica, or failed when its replica's lease ran out"
    )]
    TaskFinished {
        path: PathBuf,
        id: String,
        state: String,
    },

    #[error(
        "cannot store a new A2A task in {path}: the limit is {limit} tasks and {active} stored tasks are still \
         active (only finished tasks are evicted to make room); raise [a2a] max_tasks or wait for tasks to finish"
    )]
    TasksFull {
        path: PathBuf,
        limit: usize,
        active: usize,
    },

    #[error(
        "cannot hold another call of {principal} for approval in {path}: {pending} of its calls are \
         pending (at most {per_principal}) and {total_pending} in all (at most {total}); answer or \
         let pending requests expire (`portico approvals list`, GET /api/approvals) before retrying"
    )]
    ApprovalsFull {
        path: PathBuf,
        principal: String,
        pending: usize,
        per_principal: usize,
        total_pending: usize,
        total: usize,
    },

    #[error(
        "the page token is not one that the A2A task store {path} issues (damaged or truncated?); \
         list again without a page token"
    )]
    BadPageToken { path: PathBuf },

    #[error(
        "the store {path} holds a task in state {state:?}, which is not an A2A 1.0 task state name \
         (TASK_STATE_SUBMITTED, TASK_STATE_WORKING, TASK_STATE_COMPLETED, ...); this store never writes one, \
         so another program changed the database: restore it, or delete the task"
    )]
    UnknownTaskState { path: PathBuf, state: String },

    #[error("{operation} failed in the store {path}: {source}; {hint}")]
    Database {
        path: PathBuf,
        operation: &'static str,
        #[source]
        source: DbError,
        hint: &'static str,
    },

    #[error(
        "a batch of writes to the store {path} was not committed, so this write was not stored: {message}; {hint}"
    )]
    BatchCommit {
        path: PathBuf,
        message: String,
        hint: &'static str,
    },

    #[error(
        "{what} in the store {path} is not valid JSON: {source}; the row was written by something other than \
         Portico or is damaged, so delete or repair that row"
    )]
    CorruptJson {
        path: PathBuf,
        what: String,
        #[source]
        source: serde_json::Error,
    },
}

impl StoreError {
    /// A write that lost a race with another replica's transaction: running it again is the remedy
    /// (see `Store::in_immediate_transaction`).
    pub(crate) fn is_retryable_conflict(&self) -> bool {
        match self {
            StoreError::Database { source, .. } => source.is_retryable_conflict(),
            _ => false,
        }
    }
}

/// Advice matching the database's failure, because a bare "database is locked" leaves operators
/// guessing.
pub(crate) fn hint_for(error: &DbError) -> &'static str {
    match error {
        DbError::Sqlite(error) => sqlite_hint(error),
        DbError::Postgres(error) => postgres_hint(error),
        DbError::NoRows | DbError::Column { .. } => {
            "the database holds rows this Portico did not write, or this is a bug in Portico; please report it with this message"
        }
        DbError::PoolExhausted { .. } => {
            "every connection was busy for that long; the server may be overloaded"
        }
        DbError::PoolClosed => "the store was closing; retry after the restart",
    }
}

fn postgres_hint(error: &tokio_postgres::Error) -> &'static str {
    use tokio_postgres::error::SqlState;
    let Some(code) = crate::db::pg::sql_state(error) else {
        return match crate::db::pg::tls::failure(error) {
            Some(crate::db::pg::tls::Failure::NotOffered) => {
                "turn on ssl on the server, or lower sslmode in [store] url (prefer encrypts only where the server offers TLS)"
            }
            Some(crate::db::pg::tls::Failure::Certificate) => {
                "point sslrootcert in [store] url at the CA that signed the server's certificate, and for verify-full connect by a host name the certificate carries (or use verify-ca)"
            }
            None => "check that the PostgreSQL server is running and reachable at [store] url",
        };
    };
    match code {
        c if *c == SqlState::INVALID_PASSWORD
            || *c == SqlState::INVALID_AUTHORIZATION_SPECIFICATION =>
        {
            "the server refused the user or password of [store] url; check them"
        }
        c if *c == SqlState::INVALID_CATALOG_NAME => {
            "the database of [store] url does not exist; create it (createdb) or fix the URL"
        }
        c if *c == SqlState::INSUFFICIENT_PRIVILEGE => {
            "the user of [store] url may not do this; grant it ownership of the store's database"
        }
        c if *c == SqlState::TOO_MANY_CONNECTIONS => {
            "the server has no connection slot left; lower [store] pool_size or raise max_connections"
        }
        c if *c == SqlState::DISK_FULL => "the server's disk is full; free space and retry",
        c if *c == SqlState::UNIQUE_VIOLATION => {
            "the write conflicts with existing data; this is likely a bug in the caller"
        }
        _ => "retry; if it persists, report it with this message",
    }
}

fn sqlite_hint(error: &rusqlite::Error) -> &'static str {
    use rusqlite::ErrorCode;
    let Some(code) = error.sqlite_error_code() else {
        return "this is likely a bug in Portico; please report it with this message";
    };
    match code {
        ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked => {
            "another process held the database for longer than the 5 s busy timeout; stop other Portico processes using this data directory"
        }
        ErrorCode::ReadOnly | ErrorCode::PermissionDenied | ErrorCode::CannotOpen => {
            "check that the file and its directory exist and are writable by this user"
        }
        ErrorCode::DiskFull => "free some disk space and retry",
        ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase => {
            "the file is damaged or not a Portico store; move it aside (Portico will create a fresh one) or restore a backup"
        }
        ErrorCode::SystemIoFailure => "the disk reported an I/O error; check the filesystem",
        ErrorCode::ConstraintViolation => {
            "the write conflicts with existing data; this is likely a bug in the caller"
        }
        _ => "retry; if it persists, report it with this message",
    }
}
