//! WAL checkpoints off the write path.
//!
//! A checkpoint copies committed pages from the WAL back into the database file and, in
//! `synchronous = NORMAL`, syncs both files: two fsyncs, several milliseconds on an ordinary disk.
//! SQLite's automatic checkpoint runs inside the commit that crosses its threshold, that is on the one
//! connection every write of this process shares, so every writer and reader waits for those fsyncs;
//! under load that was a checkpoint every few dozen requests. Here a thread with its own connection
//! checkpoints in the background (`PASSIVE`: it never waits for, and never blocks, the writer) shortly
//! after writes, and the automatic checkpoint stays on with a higher threshold as the backstop: if the
//! background thread falls behind (or cannot start), the commit that finds the WAL that long checkpoints
//! the rest itself, which also lets the WAL start over from its beginning.

use std::path::Path;
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::time::Duration;

use rusqlite::Connection;

/// How long the background thread lets writes accumulate after the first one, so that one checkpoint
/// (two fsyncs) covers many commits.
const DELAY: Duration = Duration::from_millis(50);

/// WAL pages after which a commit checkpoints by itself (SQLite's default is 1,000): about 40 MB.
///
/// Under steady writes the background thread cannot let the WAL start over from its beginning (that
/// needs a moment at which every committed page has been copied back, and the writer keeps adding
/// pages), so the WAL grows until a commit reaches this length and checkpoints the last pages itself,
/// with two fsyncs while every writer waits. The background thread has copied the rest by then, so
/// that stall is short; a long threshold makes it rare. Idle moments let the WAL start over early.
pub(crate) const AUTOCHECKPOINT_PAGES: u32 = 10_000;

/// Wakes the background checkpoint thread; dropping it stops the thread.
pub(crate) struct Checkpointer {
    wake: SyncSender<()>,
}

impl Checkpointer {
    /// Starts the thread with its own connection to `path`; `None` if either cannot be made (the
    /// automatic checkpoint then does all the work, as SQLite does by default).
    pub(crate) fn start(path: &Path) -> Option<Checkpointer> {
        let conn = match open(path) {
            Ok(conn) => conn,
            Err(error) => {
                tracing::warn!(path = %path.display(), %error, "no background checkpoints: cannot open a second connection");
                return None;
            }
        };
        let (wake, woken) = sync_channel(1);
        let label = path.to_path_buf();
        std::thread::Builder::new()
            .name("portico-store-checkpoint".into())
            .spawn(move || run(conn, woken, &label))
            .map_err(|error| {
                tracing::warn!(path = %path.display(), %error, "no background checkpoints: cannot start the thread");
            })
            .ok()?;
        Some(Checkpointer { wake })
    }

    /// Says that something was committed. Never blocks: a wake-up already pending covers this one.
    pub(crate) fn wake(&self) {
        match self.wake.try_send(()) {
            Ok(()) | Err(TrySendError::Full(())) | Err(TrySendError::Disconnected(())) => {}
        }
    }
}

fn open(path: &Path) -> rusqlite::Result<Connection> {
    let conn = Connection::open(path)?;
    conn.busy_timeout(Duration::from_secs(5))?;
    // The checkpoint's syncs follow this connection's setting; the same as the writer's (see `open`).
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    Ok(conn)
}

fn run(conn: Connection, woken: Receiver<()>, path: &Path) {
    // Ends when the store is dropped (the sender with it).
    while woken.recv().is_ok() {
        std::thread::sleep(DELAY);
        let checkpointed = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |row| {
            Ok((row.get::<_, i64>(1)?, row.get::<_, i64>(2)?))
        });
        match checkpointed {
            Ok((wal_pages, copied)) => {
                tracing::trace!(path = %path.display(), wal_pages, copied, "background checkpoint");
            }
            // Not fatal: the next wake-up tries again, and the automatic checkpoint is the backstop.
            Err(error) => {
                tracing::debug!(path = %path.display(), %error, "background checkpoint failed");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;
    use crate::{Store, TaskLimits, TaskRecord};

    /// Whether the database file alone (without its WAL) already holds task `id`.
    fn in_database_file(path: &Path, id: &str) -> bool {
        let dir = path.parent().unwrap();
        let copy = dir.join("copy.db");
        for leftover in ["copy.db", "copy.db-wal", "copy.db-shm"] {
            let _ = std::fs::remove_file(dir.join(leftover));
        }
        std::fs::copy(path, &copy).unwrap();
        let Ok(conn) = Connection::open(&copy) else {
            return false;
        };
        conn.query_row(
            "SELECT count(*) FROM a2a_tasks WHERE id = ?1",
            [id],
            |row| row.get::<_, i64>(0),
        )
        .is_ok_and(|n| n == 1)
    }

    #[test]
    fn commits_reach_the_database_file_without_waiting_for_the_wal_to_fill() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("portico.db");
        let store = Store::open(&path).unwrap();
        let task = TaskRecord {
            id: "t1".into(),
            context_id: "c".into(),
            owner: "alice".into(),
            agent: "echo".into(),
            state: portico_core::TaskState::Submitted,
            status: serde_json::json!({"state": "TASK_STATE_SUBMITTED"}),
            history: Vec::new(),
            artifacts: Vec::new(),
            metadata: serde_json::json!({}),
            created_at_ms: 1,
            updated_at_ms: 1,
        };
        store.create_task(&task, &TaskLimits::default()).unwrap();
        // A handful of pages, far below the automatic checkpoint's threshold: only the background
        // thread copies them into the database file. There is no signal for that, so poll.
        let deadline = Instant::now() + Duration::from_secs(30);
        while !in_database_file(&path, "t1") {
            assert!(
                Instant::now() < deadline,
                "no background checkpoint within 30 s (test guard)"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}
