//! Recording audit records off the hot path.
//!
//! Every tool call produces a record, and a call must never wait on SQLite (a checkpoint, another
//! process holding the lock). So recording only queues the insert on the store's writer thread (see
//! `batch`), where it shares a transaction with the other writes queued at the same time: a burst of
//! calls costs a few commits, not one each, and none of them waits.

use super::AuditRecord;
use crate::BatchWriter;

/// Records audit entries without blocking. Clones, and every writer of the same store, share the store's
/// writer thread.
///
/// A record that fails to insert (disk full, database damaged) is logged with `tracing` and dropped, so
/// later records are still written; the audit log is not a reason to fail tool calls.
#[derive(Debug, Clone)]
pub struct AuditWriter {
    writer: BatchWriter,
}

impl AuditWriter {
    pub(crate) fn new(writer: BatchWriter) -> AuditWriter {
        AuditWriter { writer }
    }

    /// Queues `record` for writing. Never blocks and never fails: if it cannot be written, it is logged
    /// as lost.
    pub fn record(&self, record: AuditRecord) {
        self.writer.record_audit(record);
    }

    /// Waits until the store's write queue is below its bound (4096 writes). A caller that records
    /// awaits this before going on, so a stalled writer holds callers back instead of records piling up.
    pub async fn room(&self) {
        self.writer.room().await;
    }

    /// Waits until every record queued before this call (by any writer of the store) has been committed,
    /// or has been given up on and logged.
    pub async fn flush(&self) {
        self.writer.flush().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::tests::record;
    use crate::both_backends;
    use crate::{AuditQuery, Store};

    fn query(limit: usize) -> AuditQuery {
        AuditQuery {
            limit,
            ..AuditQuery::default()
        }
    }

    both_backends! {
        async fn flush_commits_everything_recorded_before_it_in_order(store) {
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
    }

    both_backends! {
        async fn same_timestamp_records_keep_recording_order(store) {
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

    both_backends! {
        async fn clones_from_many_threads_all_arrive(store) {
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
                        limit: 1000,
                        ..AuditQuery::default()
                    })
                    .unwrap();
                assert_eq!(read.len(), 250, "caller{t}");
            }
        }
    }

    both_backends! {
        async fn records_of_a_dropped_writer_are_still_written(store) {
            let writer = store.audit_writer();
            let clone = writer.clone();
            for i in 0..500 {
                clone.record(record(i, "ide", "t"));
            }
            drop(writer);
            drop(clone);
            // The queue is the store's, not the writer's: a flush through another writer waits for them.
            store.audit_writer().flush().await;
            assert_eq!(store.audit(&query(1000)).unwrap().len(), 500);
        }
    }

    /// SQLite only: holding its one connection is what keeps the writer from committing.
    #[tokio::test]
    async fn audit_records_share_transactions_with_other_writes() {
        let store = Store::open_in_memory().unwrap();
        let writer = store.audit_writer();
        {
            // While the connection is held nothing commits, so everything queued meanwhile lands in
            // at most two transactions.
            let _held = store.conn();
            for i in 0..100 {
                writer.record(record(i, "ide", "t"));
            }
        }
        writer.flush().await;
        assert_eq!(store.audit(&query(1000)).unwrap().len(), 100);
        assert!(
            store.committed_batches() <= 3,
            "{}",
            store.committed_batches()
        );
    }

    both_backends! {
        async fn records_arriving_one_by_one_share_transactions(store) {
            let writer = store.audit_writer();
            // As calls under load finish: one record at a time, a little apart.
            for i in 0..200 {
                writer.record(record(i, "ide", "t"));
                std::thread::sleep(std::time::Duration::from_micros(100));
            }
            writer.flush().await;
            assert_eq!(store.audit(&query(1000)).unwrap().len(), 200);
            let batches = store.committed_batches();
            assert!(
                batches <= 60,
                "200 records took {batches} transactions; they should gather into few"
            );
        }
    }
}
