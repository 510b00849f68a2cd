//! What can go wrong in the store, phrased so that the message alone tells an operator which database,
//! which operation and what to try next.

use std::path::PathBuf;

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

    #[error("cannot open the SQLite store {path}: {source}; {hint}")]
    Open {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
        hint: &'static str,
    },

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
        source: rusqlite::Error,
        hint: &'static str,
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
    Sqlite {
        path: PathBuf,
        operation: &'static str,
        #[source]
        source: rusqlite::Error,
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

/// Advice matching the SQLite failure, because a bare "database is locked" leaves operators guessing.
pub(crate) fn hint_for(error: &rusqlite::Error) -> &'static str {
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
