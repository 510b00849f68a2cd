//! Recording audit records off the hot path.
//!
//! Every tool call produces a record, and a call must never wait on SQLite (a checkpoint, another
//! process holding the lock). So recording only pushes onto an unbounded channel; one thread per writer
//! drains it and inserts in batches, which also turns a burst of calls into a few transactions instead
//! of one commit each.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, oneshot};

use super::AuditRecord;
use crate::Store;

/// Most records per transaction: large enough to absorb bursts cheaply, small enough that one batch
/// holds the store's lock for only a few milliseconds.
const BATCH: usize = 1024;

/// How long the writer lets records gather after the first one of a batch. Under load, calls arrive
/// one at a time, so without it nearly every record was its own transaction: at 10,000 calls/s the
/// commits alone took 15% of the CPU. A record is written at most this much later; a flush is not
/// delayed (it ends the gathering at once).
const LINGER: Duration = Duration::from_millis(5);

enum Command {
    Record(AuditRecord),
    /// Answered once every command queued before it has been written.
    Flush(oneshot::Sender<()>),
}

/// Records audit entries without blocking. Clones share one background thread, which stops after
/// writing what is queued once the last clone is dropped.
///
/// A batch that fails to insert (disk full, database damaged) is logged with `tracing` and dropped, so
/// the writer keeps serving later records; the audit log is not a reason to fail tool calls.
#[derive(Debug, Clone)]
pub struct AuditWriter {
    commands: mpsc::UnboundedSender<Command>,
    /// Transactions committed so far (what batching saves is visible to tests).
    batches: Arc<AtomicUsize>,
}

impl AuditWriter {
    pub(crate) fn start(store: Store) -> AuditWriter {
        let (commands, queue) = mpsc::unbounded_channel();
        let batches = Arc::new(AtomicUsize::new(0));
        let spawned = std::thread::Builder::new()
            .name("portico-audit".to_string())
            .spawn({
                let batches = batches.clone();
                move || drain(store, queue, &batches)
            });
        if let Err(error) = spawned {
            // The queue went down with the unspawned closure, so every record will be warned about
            // rather than silently piling up in memory.
            tracing::error!(%error, "cannot start the audit writer thread; audit records will be lost");
        }
        AuditWriter { commands, batches }
    }

    /// Queues `record` for writing. Never blocks and never fails: if the writer thread is gone, the
    /// record is logged as lost.
    pub fn record(&self, record: AuditRecord) {
        if let Err(mpsc::error::SendError(Command::Record(record))) =
            self.commands.send(Command::Record(record))
        {
            tracing::warn!(
                caller = %record.caller,
                tool = %record.tool,
                outcome = %record.outcome,
                "audit writer is gone; audit record lost"
            );
        }
    }

    /// How many transactions the writer has committed records in (a batch is one transaction).
    pub fn transactions(&self) -> usize {
        self.batches.load(Ordering::Relaxed)
    }

    /// Waits until every record queued before this call (by any clone) has been committed, or has been
    /// given up on and logged. Returns at once if the writer thread is gone.
    pub async fn flush(&self) {
        let (done, written) = oneshot::channel();
        if self.commands.send(Command::Flush(done)).is_err() {
            tracing::warn!("audit writer is gone; nothing to flush");
            return;
        }
        // An error here means the thread died mid-batch; there is nothing more to wait for.
        let _ = written.await;
    }
}

fn drain(store: Store, mut queue: mpsc::UnboundedReceiver<Command>, batches: &AtomicUsize) {
    let mut batch = Vec::with_capacity(BATCH);
    let mut waiting = Vec::new();
    // blocking_recv keeps returning what is queued after the last sender is dropped, so nothing recorded
    // is abandoned on shutdown.
    while let Some(first) = queue.blocking_recv() {
        let gathering_until = Instant::now() + LINGER;
        let mut next = Some(first);
        loop {
            while let Some(command) = next.take() {
                match command {
                    Command::Record(record) => batch.push(record),
                    Command::Flush(done) => waiting.push(done),
                }
                if batch.len() < BATCH {
                    next = queue.try_recv().ok();
                }
            }
            let now = Instant::now();
            if batch.len() >= BATCH || !waiting.is_empty() || now >= gathering_until {
                break;
            }
            // Poll in small steps so that a flush queued meanwhile is not held for the whole linger.
            std::thread::sleep((gathering_until - now).min(Duration::from_millis(1)));
            next = queue.try_recv().ok();
        }
        if !batch.is_empty() {
            batches.fetch_add(1, Ordering::Relaxed);
        }
        if let Err(error) = store.append_audit(&batch) {
            tracing::warn!(%error, lost = batch.len(), "audit records could not be written");
        }
        batch.clear();
        for done in waiting.drain(..) {
            let _ = done.send(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::AuditQuery;
    use crate::audit::tests::record;

    fn query(limit: usize) -> AuditQuery {
        AuditQuery {
            limit,
            ..AuditQuery::default()
        }
    }

    #[tokio::test]
    async fn flush_commits_everything_recorded_before_it_in_order() {
        let store = Store::open_in_memory().unwrap();
        let writer = store.audit_writer();
        for i in 0..1000 {
            writer.record(record(1_000 + i, "ide", &format!("tool{i}")));
        }
        writer.flush().await;

        let read = store.audit(&query(5000)).unwrap();
        assert_eq!(read.len(), 1000);
        let expected: Vec<AuditRecord> = (0..1000)
            .rev()
            .map(|i| record(1_000 + i, "ide", &format!("tool{i}")))
            .collect();
        assert_eq!(read, expected);
    }

    #[tokio::test]
    async fn records_arriving_one_by_one_share_transactions() {
        let store = Store::open_in_memory().unwrap();
        let writer = store.audit_writer();
        // As calls under load arrive: one record at a time, a little apart.
        for i in 0..200 {
            writer.record(record(i, "ide", "t"));
            std::thread::sleep(Duration::from_micros(100));
        }
        writer.flush().await;
        assert_eq!(store.audit(&query(1000)).unwrap().len(), 200);
        let batches = writer.transactions();
        assert!(
            batches <= 60,
            "200 records took {batches} transactions; they should gather into few"
        );
    }

    #[tokio::test]
    async fn same_timestamp_records_keep_recording_order() {
        let store = Store::open_in_memory().unwrap();
        let writer = store.audit_writer();
        for i in 0..600 {
            writer.record(record(42, "ide", &format!("t{i}")));
        }
        writer.flush().await;
        let tools: Vec<String> = store
            .audit(&query(1000))
            .unwrap()
            .into_iter()
            .map(|r| r.tool)
            .collect();
        let expected: Vec<String> = (0..600).rev().map(|i| format!("t{i}")).collect();
        assert_eq!(tools, expected);
    }

    #[tokio::test]
    async fn flushed_records_survive_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("portico.db");
        {
            let store = Store::open(&path).unwrap();
            let writer = store.audit_writer();
            for i in 0..300 {
                writer.record(record(i, "agent:planner", "mcp_fs_read"));
            }
            writer.flush().await;
        }
        let store = Store::open(&path).unwrap();
        let read = store.audit(&query(1000)).unwrap();
        assert_eq!(read.len(), 300);
        assert_eq!(read[0], record(299, "agent:planner", "mcp_fs_read"));
        assert_eq!(read[299], record(0, "agent:planner", "mcp_fs_read"));
    }

    #[tokio::test]
    async fn clones_from_many_threads_all_arrive() {
        let store = Store::open_in_memory().unwrap();
        let writer = store.audit_writer();
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let writer = writer.clone();
                std::thread::spawn(move || {
                    for i in 0..250 {
                        writer.record(record(i, &format!("caller{t}"), "x"));
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        writer.flush().await;
        for t in 0..4 {
            let read = store
                .audit(&AuditQuery {
                    caller: Some(format!("caller{t}")),
                    tool: None,
                    limit: 1000,
                })
                .unwrap();
            assert_eq!(read.len(), 250, "caller{t}");
        }
    }

    #[test]
    fn dropping_the_last_writer_drains_then_stops_the_thread() {
        let store = Store::open_in_memory().unwrap();
        let writer = store.audit_writer();
        let clone = writer.clone();
        for i in 0..500 {
            clone.record(record(i, "ide", "t"));
        }
        drop(writer);
        drop(clone);
        // The thread holds a Store clone until it exits.
        let deadline = Instant::now() + Duration::from_secs(10);
        while Arc::strong_count(&store.inner) > 1 {
            assert!(Instant::now() < deadline, "audit thread did not stop");
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(store.audit(&query(1000)).unwrap().len(), 500);
    }

    #[tokio::test]
    async fn a_gone_writer_neither_panics_nor_hangs() {
        let (commands, queue) = mpsc::unbounded_channel();
        drop(queue);
        let writer = AuditWriter {
            commands,
            batches: Arc::default(),
        };
        writer.record(record(1, "ide", "t"));
        tokio::time::timeout(Duration::from_secs(5), writer.flush())
            .await
            .expect("flush on a gone writer returns at once");
    }
}
