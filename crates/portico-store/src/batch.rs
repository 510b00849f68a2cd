//! Group commit: writes made from async code share transactions.
//!
//! An A2A task must be stored before it is acknowledged, and a conversation's messages before the agent
//! moves on, so these writes are awaited. Committing each on its own makes the commit the cost: SQLite
//! takes its file locks, writes every page the transaction touched to the WAL and updates the WAL index,
//! once per write, and concurrent callers queue behind one another on the connection. Instead one thread
//! per store takes every write queued since its last commit, runs them one after the other inside one
//! `IMMEDIATE` transaction, commits once, and only then answers the callers. So:
//!
//! - a write is never answered before the transaction holding it has committed (in WAL mode a committed
//!   transaction is in the WAL file, and survives the process being killed);
//! - a write that fails leaves nothing behind and the others in its batch commit: most failures happen
//!   before anything is written (a full task store, an unknown task); one that failed after changing
//!   rows makes the thread roll the transaction back and run the batch again without it. (Savepoints
//!   around every write would do the same, but make SQLite copy every page a write touches into a
//!   sub-journal first, which cost more than the commit saved.)
//! - if the commit itself fails, every write in the batch is answered with that error;
//! - writes queued from one task run in the order they were queued: [`BatchWriter`] methods queue their
//!   write when called, before the returned future is first polled.
//!
//! The queue is bounded ([`MAX_QUEUED`] writes, from queueing until answered), and nothing in it is
//! ever dropped. A write somebody awaits is queued when called if there is room; at the bound its future
//! waits for room first (in turn with the others waiting), so a stalled writer makes callers wait
//! instead of memory grow. An audit record is queued at once even past the bound, since the call that
//! makes it may not wait (a cancelled call records from `Drop`); the pipeline then waits for
//! [`BatchWriter::room`] before the call returns, so the queue holds at most [`MAX_QUEUED`] plus one
//! record per call in flight.
//!
//! A write somebody awaits never waits to fill a batch: it is committed at once, with whatever queued
//! behind it. Only a batch of nothing but audit records (which nobody awaits) waits a few milliseconds
//! for more, so that calls finishing one at a time do not cost a commit each.

use std::collections::VecDeque;
use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::Instant;

use rusqlite::TransactionBehavior;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, oneshot};

use crate::audit::AppendLock;
use crate::db::pg::PgConn;
use crate::db::{Db, DbError, Dialect};

use crate::conversations::Conversation;
use crate::error::hint_for;
use crate::tasks::{EarlierStatus, TaskLimits, TaskRecord, TaskUpdate};
use crate::{Backend, Inner, Store, StoreError};

/// Most writes per transaction: enough to absorb any burst one process makes, few enough that one
/// transaction holds the connection for at most a few milliseconds.
const MAX_BATCH: usize = 256;

/// Most writes queued or in the batch being committed before writers wait for room.
pub(crate) const MAX_QUEUED: usize = 4096;

/// The writer thread's queue: the jobs, in order, and the room left in it. Held by the store alone, so
/// dropping the store closes the queue.
pub(crate) struct Queue {
    jobs: Arc<JobQueue>,
    room: Arc<Semaphore>,
}

impl Drop for Queue {
    fn drop(&mut self) {
        self.jobs.close();
    }
}

/// The jobs between the async writers and the writer thread. Not a channel: a channel wakes its
/// receiver on every send, and while the writer gathers audit records (see [`JobQueue::next_batch`])
/// that was a thread wake-up, two context switches, per MCP call. A sender wakes the writer only when
/// it is idle, or when what it sends ends the gathering: a write somebody awaits, or a full batch.
pub(crate) struct JobQueue {
    state: Mutex<QueueState>,
    wake: Condvar,
}

struct QueueState {
    jobs: VecDeque<Queued>,
    writer: WriterState,
    closed: bool,
    /// [`AUDIT_GATHERING`], but for tests that need a batch to stay open.
    gathering: std::time::Duration,
    /// Times a sender woke the writer.
    wakes: u64,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum WriterState {
    /// Waiting for any job: the next one wakes it.
    Idle,
    /// Holding a batch of audit records open until [`AUDIT_GATHERING`] passes.
    Gathering,
    /// Committing, or already woken: it looks at the queue before it waits again.
    Busy,
}

impl JobQueue {
    fn new() -> Self {
        JobQueue {
            state: Mutex::new(QueueState {
                jobs: VecDeque::new(),
                writer: WriterState::Busy,
                closed: false,
                gathering: AUDIT_GATHERING,
                wakes: 0,
            }),
            wake: Condvar::new(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, QueueState> {
        // Nothing panics while holding it; and a queue of plain data stays consistent if it did.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Queues `queued` behind every job queued before it; gives it back if the queue is closed.
    fn push(&self, queued: Queued) -> Result<(), Queued> {
        let mut state = self.lock();
        if state.closed {
            return Err(queued);
        }
        let wake = match state.writer {
            WriterState::Idle => true,
            WriterState::Gathering => queued.job.awaited() || state.jobs.len() + 1 >= MAX_BATCH,
            WriterState::Busy => false,
        };
        state.jobs.push_back(queued);
        if wake {
            state.writer = WriterState::Busy;
            state.wakes += 1;
            drop(state);
            self.wake.notify_one();
        }
        Ok(())
    }

    /// Refuses new jobs; the writer still takes those queued, then ends.
    fn close(&self) {
        self.lock().closed = true;
        self.wake.notify_one();
    }

    /// Waits for a job and returns it with every job queued behind it, up to [`MAX_BATCH`]; `None`
    /// once the queue is closed and empty. While what is queued is only audit records, it waits up to
    /// [`AUDIT_GATHERING`] for more: under MCP load calls finish one at a time, so without this nearly
    /// every record was its own commit (15% of the CPU at 10,000 calls/s). A write somebody awaits
    /// ends the gathering the moment it is queued.
    fn next_batch(&self) -> Option<Vec<Queued>> {
        let mut state = self.lock();
        while state.jobs.is_empty() {
            if state.closed {
                return None;
            }
            state.writer = WriterState::Idle;
            state = self
                .wake
                .wait(state)
                .unwrap_or_else(|poisoned| poisoned.into_inner());
        }
        let until = Instant::now() + state.gathering;
        while !state.closed
            && state.jobs.len() < MAX_BATCH
            && !state.jobs.iter().any(|queued| queued.job.awaited())
        {
            let Some(left) = until.checked_duration_since(Instant::now()) else {
                break;
            };
            state.writer = WriterState::Gathering;
            state = self
                .wake
                .wait_timeout(state, left)
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .0;
        }
        state.writer = WriterState::Busy;
        let taken = state.jobs.len().min(MAX_BATCH);
        Some(state.jobs.drain(..taken).collect())
    }
}

/// A job with its place in the queue (none for an audit record queued past the bound), given back
/// as the job is answered.
struct Queued {
    job: Box<dyn Job>,
    _place: Option<OwnedSemaphorePermit>,
}

/// How long a batch of nothing but audit records waits for more before committing.
const AUDIT_GATHERING: std::time::Duration = std::time::Duration::from_millis(5);

/// One queued write: run inside the batch's transaction, then answered once the batch has committed.
pub(crate) trait Job: Send {
    /// Somebody waits for this write's answer (so its batch must not wait to fill).
    fn awaited(&self) -> bool;
    /// It appends audit records, so its batch must take the audit append lock on PostgreSQL
    /// (`audit::AppendLock`).
    fn appends_audit(&self) -> bool;
    /// Runs the write (again, if an earlier attempt at the batch was rolled back); `false` if it
    /// failed, which is final: a failed write is not run again.
    fn run(&mut self, store: &Store, db: &Db<'_>) -> bool;
    fn failed(&self) -> bool;
    /// It failed only because its transaction lost a race with another replica's (PostgreSQL), so
    /// it is to be run again with the batch rather than answered with that failure.
    fn conflicted(&self) -> bool;
    /// Forgets the outcome of a run that is to be run again.
    fn forget(&mut self);
    /// Answers the caller: with the write's own result if `committed` is `Ok`, else with the commit's
    /// failure (a write that failed on its own keeps its own error).
    fn answer(self: Box<Self>, committed: &Result<(), BatchFailure>);
}

/// Why a batch did not commit, copied into the error of every write in it.
#[derive(Debug, Clone)]
pub(crate) struct BatchFailure {
    message: String,
    hint: &'static str,
}

impl BatchFailure {
    fn from_db(error: &DbError) -> Self {
        BatchFailure {
            message: error.to_string(),
            hint: hint_for(error),
        }
    }

    fn gone() -> Self {
        BatchFailure {
            message: "the store was closed before the write ran".into(),
            hint: "this is likely a bug in Portico; please report it with this message",
        }
    }
}

struct Pending<T, W> {
    work: W,
    appends_audit: bool,
    result: Option<Result<T, StoreError>>,
    reply: oneshot::Sender<Result<T, StoreError>>,
    label: std::path::PathBuf,
}

impl<T, W> Job for Pending<T, W>
where
    T: Send,
    W: FnMut(&Store, &Db<'_>) -> Result<T, StoreError> + Send,
{
    fn awaited(&self) -> bool {
        true
    }

    fn appends_audit(&self) -> bool {
        self.appends_audit
    }

    fn run(&mut self, store: &Store, db: &Db<'_>) -> bool {
        let result = (self.work)(store, db);
        let ok = result.is_ok();
        self.result = Some(result);
        ok
    }

    fn failed(&self) -> bool {
        matches!(self.result, Some(Err(_)))
    }

    fn conflicted(&self) -> bool {
        matches!(&self.result, Some(Err(error)) if error.is_retryable_conflict())
    }

    fn forget(&mut self) {
        self.result = None;
    }

    fn answer(self: Box<Self>, committed: &Result<(), BatchFailure>) {
        let result = match (self.result, committed) {
            (Some(Err(own)), _) => Err(own),
            (Some(Ok(value)), Ok(())) => Ok(value),
            // Committed without having run is impossible (every write runs before the commit).
            (_, committed) => {
                let failure = committed.clone().err().unwrap_or_else(BatchFailure::gone);
                Err(StoreError::BatchCommit {
                    path: self.label,
                    message: failure.message,
                    hint: failure.hint,
                })
            }
        };
        // The caller may have stopped waiting (its request was dropped); the write stands.
        let _ = self.reply.send(result);
    }
}

/// A write nobody waits for (an audit record): its failure is logged, since nobody could be told.
struct Unanswered<W> {
    work: W,
    failure: Option<StoreError>,
    what: &'static str,
}

impl<W> Job for Unanswered<W>
where
    W: FnMut(&Store, &Db<'_>) -> Result<(), StoreError> + Send,
{
    fn awaited(&self) -> bool {
        false
    }

    fn appends_audit(&self) -> bool {
        // The only writes nobody waits for are audit records.
        true
    }

    fn run(&mut self, store: &Store, db: &Db<'_>) -> bool {
        self.failure = (self.work)(store, db).err();
        self.failure.is_none()
    }

    fn failed(&self) -> bool {
        self.failure.is_some()
    }

    fn conflicted(&self) -> bool {
        self.failure
            .as_ref()
            .is_some_and(StoreError::is_retryable_conflict)
    }

    fn forget(&mut self) {
        self.failure = None;
    }

    fn answer(self: Box<Self>, committed: &Result<(), BatchFailure>) {
        match (&self.failure, committed) {
            (Some(error), _) => tracing::warn!(%error, "{} lost", self.what),
            (None, Err(failure)) => {
                tracing::warn!(error = %failure.message, "{} lost", self.what);
            }
            (None, Ok(())) => {}
        }
    }
}

/// Writes from async code, group-committed (see the module docs). Cheap to clone; every clone, and every
/// [`Store::batch_writer`] of the same store, shares one writer thread.
#[derive(Debug, Clone)]
pub struct BatchWriter {
    store: Store,
}

impl Store {
    /// A handle for group-committed writes from async code. The store's writer thread starts on first use
    /// and stops once the last clone of the store is dropped.
    pub fn batch_writer(&self) -> BatchWriter {
        BatchWriter {
            store: self.clone(),
        }
    }

    /// How many transactions the writer thread has committed.
    #[cfg(test)]
    pub(crate) fn committed_batches(&self) -> u64 {
        self.inner.committed_batches.load(Ordering::Relaxed)
    }

    /// Writes queued or being committed, by their places taken (audit records past the bound not
    /// counted).
    #[cfg(test)]
    pub(crate) fn queued_writes(&self) -> usize {
        let queue = self.queue();
        self.inner.queue_bound.load(Ordering::Relaxed) - queue.room.available_permits()
    }

    #[cfg(test)]
    pub(crate) fn set_queue_bound(&self, bound: usize) {
        assert!(self.inner.writes.get().is_none(), "set before first use");
        self.inner.queue_bound.store(bound, Ordering::Relaxed);
    }

    fn queue(&self) -> &Queue {
        self.inner.writes.get_or_init(|| {
            let jobs = Arc::new(JobQueue::new());
            let room = Arc::new(Semaphore::new(
                self.inner.queue_bound.load(Ordering::Relaxed),
            ));
            let store = std::sync::Arc::downgrade(&self.inner);
            let queue = jobs.clone();
            let spawned = std::thread::Builder::new()
                .name("portico-store-writer".into())
                .spawn(move || drain(store, &queue));
            if let Err(error) = spawned {
                // Nobody will take from the queue: every write fails, saying so.
                tracing::error!(%error, "cannot start the store's writer thread; writes will fail");
                jobs.close();
            }
            Queue { jobs, room }
        })
    }

    /// Runs one batch: every job in its own savepoint, then one commit.
    fn commit_batch(&self, jobs: &mut [Queued]) -> Result<(), BatchFailure> {
        let started = Instant::now();
        let committed = self
            .run_batch(jobs)
            .map_err(|error| BatchFailure::from_db(&error));
        match &committed {
            Ok(()) => {
                if let Some(metrics) = self.inner.metrics.get() {
                    metrics.time_store_commit(jobs.len(), started.elapsed());
                }
                self.inner.committed_batches.fetch_add(1, Ordering::Relaxed);
                self.committed();
            }
            Err(failure) => tracing::warn!(
                path = %self.label().display(),
                writes = jobs.len(),
                error = %failure.message,
                "a batch of writes could not be committed"
            ),
        }
        committed
    }

    fn run_batch(&self, jobs: &mut [Queued]) -> Result<(), DbError> {
        match &self.inner.backend {
            Backend::Sqlite(conn) => {
                let mut conn = crate::lock_sqlite(conn);
                // Each attempt that is rolled back has one more failed write, so this ends.
                loop {
                    // IMMEDIATE: the write lock up front, so another process cannot interleave (task
                    // creation counts and evicts before it inserts).
                    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
                    // The audit chain's head is read again inside each attempt, under its write lock.
                    self.forget_audit_head();
                    match self.run_jobs(jobs, || Db::sqlite(&tx), false) {
                        Attempt::Commit => return Ok(tx.commit()?),
                        Attempt::RunAgain | Attempt::Conflict => tx.rollback()?,
                    }
                }
            }
            Backend::Postgres { pool, .. } => {
                let conn = pool.get()?;
                // Held from before the first attempt's BEGIN until after the last one ended, for the
                // reasons given at `AppendLock`.
                let audit_lock = if jobs.iter().any(|queued| queued.job.appends_audit()) {
                    Some(AppendLock::acquire(&conn)?)
                } else {
                    None
                };
                let ended = self.run_postgres_batch(&conn, jobs);
                if let Some(lock) = audit_lock {
                    lock.release(self, ended.is_ok());
                }
                ended
            }
        }
    }

    fn run_postgres_batch(&self, conn: &PgConn, jobs: &mut [Queued]) -> Result<(), DbError> {
        let mut conflicts = 0;
        loop {
            conn.begin()?;
            self.forget_audit_head();
            let retry_conflicts = conflicts < crate::CONFLICT_RETRIES;
            match self.run_jobs(jobs, || Db::postgres(conn), retry_conflicts) {
                Attempt::Commit => match conn.commit() {
                    Ok(()) => return Ok(()),
                    Err(error) if retry_conflicts && error.is_retryable_conflict() => {
                        // The failed commit ended the transaction; this only resets the
                        // connection's note of it.
                        conn.rollback()?;
                    }
                    Err(error) => return Err(error),
                },
                Attempt::RunAgain => {
                    conn.rollback()?;
                    continue;
                }
                Attempt::Conflict => conn.rollback()?,
            }
            // The batch lost a race with another replica's transaction: all of it again.
            conflicts += 1;
            crate::conflict_pause(conflicts);
        }
    }

    /// Runs every job not yet failed, each through its own [`Db`] handle on the batch's transaction.
    /// A job that failed after changing rows (or, on PostgreSQL, failed at all, since a failed
    /// statement aborts the transaction there) has the batch rolled back and run again without it; a
    /// job that lost a race with another transaction has the whole batch run again, itself included.
    /// Past its retries (`retry_conflicts` false) a job that lost a race fails with that error.
    fn run_jobs<'c>(
        &self,
        jobs: &mut [Queued],
        db: impl Fn() -> Db<'c>,
        retry_conflicts: bool,
    ) -> Attempt {
        for job in jobs
            .iter_mut()
            .map(|queued| &mut queued.job)
            .filter(|job| !job.failed())
        {
            let db = db();
            if job.run(self, &db) {
                continue;
            }
            if retry_conflicts && job.conflicted() {
                job.forget();
                return Attempt::Conflict;
            }
            if db.changed() || db.dialect() == Dialect::Postgres {
                return Attempt::RunAgain;
            }
        }
        Attempt::Commit
    }
}

/// What one run of a batch's jobs calls for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Attempt {
    Commit,
    /// A job failed after changing rows: roll back, run again without it.
    RunAgain,
    /// A job lost a race with another transaction: roll back, run everything again.
    Conflict,
}

/// The writer thread: waits for a write, takes every write queued behind it, commits them together.
/// It keeps only a weak handle on the store between batches, so dropping the last clone of the store
/// closes the queue and ends the thread.
fn drain(store: Weak<Inner>, queue: &JobQueue) {
    while let Some(mut jobs) = queue.next_batch() {
        // The strong handle is dropped before anyone is answered, so a caller that got its answer
        // and drops the last clone of the store really closes it.
        let committed = match store.upgrade() {
            Some(inner) => Store { inner }.commit_batch(&mut jobs),
            None => Err(BatchFailure::gone()),
        };
        // Each job's place is given back before its answer, so a caller that got its answer sees
        // its place already free (the queue's count never lags behind what was answered).
        for Queued { job, _place } in jobs {
            drop(_place);
            job.answer(&committed);
        }
    }
}

impl BatchWriter {
    /// Queues `work` now; the future resolves once the batch it ran in has committed. `work` may run more
    /// than once (after a rollback), each time in a fresh transaction.
    pub(crate) fn submit<T, W>(
        &self,
        work: W,
    ) -> impl Future<Output = Result<T, StoreError>> + use<T, W>
    where
        T: Send + 'static,
        W: FnMut(&Store, &Db<'_>) -> Result<T, StoreError> + Send + 'static,
    {
        self.submit_job(work, false)
    }

    /// [`BatchWriter::submit`] for `work` that appends audit records ([`Store::insert_audit`]).
    pub(crate) fn submit_appending_audit<T, W>(
        &self,
        work: W,
    ) -> impl Future<Output = Result<T, StoreError>> + use<T, W>
    where
        T: Send + 'static,
        W: FnMut(&Store, &Db<'_>) -> Result<T, StoreError> + Send + 'static,
    {
        self.submit_job(work, true)
    }

    fn submit_job<T, W>(
        &self,
        work: W,
        appends_audit: bool,
    ) -> impl Future<Output = Result<T, StoreError>> + use<T, W>
    where
        T: Send + 'static,
        W: FnMut(&Store, &Db<'_>) -> Result<T, StoreError> + Send + 'static,
    {
        let (reply, answer) = oneshot::channel();
        let label = self.store.label().to_path_buf();
        let job = Pending {
            work,
            appends_audit,
            result: None,
            reply,
            label: label.clone(),
        };
        let queue = self.store.queue();
        let jobs = queue.jobs.clone();
        let room = queue.room.clone();
        // Queued now if there is room, keeping the caller's order; else once room is made.
        let mut waiting = match room.clone().try_acquire_owned() {
            Ok(place) => {
                let queued = Queued {
                    job: Box::new(job),
                    _place: Some(place),
                };
                let sent = jobs.push(queued).is_ok();
                Err(sent)
            }
            Err(_) => Ok(job),
        };
        async move {
            let gone = || StoreError::BatchCommit {
                path: label,
                message: "the store's writer thread is not running".into(),
                hint: "this is likely a bug in Portico (or the process is out of threads); restart Portico",
            };
            if let Ok(job) = waiting {
                let sent = match room.acquire_owned().await {
                    Ok(place) => jobs
                        .push(Queued {
                            job: Box::new(job),
                            _place: Some(place),
                        })
                        .is_ok(),
                    Err(_) => false,
                };
                waiting = Err(sent);
            }
            if let Err(false) = waiting {
                return Err(gone());
            }
            answer.await.unwrap_or_else(|_| Err(gone()))
        }
    }

    /// Queues an audit record; nothing waits for it (see [`crate::AuditWriter`]).
    pub(crate) fn record_audit(&self, record: crate::AuditRecord) {
        let job = Unanswered {
            work: move |store: &Store, db: &Db<'_>| store.insert_audit(db, &record),
            failure: None,
            what: "an audit record",
        };
        let queue = self.store.queue();
        // Past the bound it is queued all the same: the caller waits for `room` instead.
        let queued = Queued {
            job: Box::new(job),
            _place: queue.room.clone().try_acquire_owned().ok(),
        };
        if queue.jobs.push(queued).is_err() {
            tracing::warn!("the store's writer thread is not running; an audit record was lost");
        }
    }

    /// Waits until the queue is below its bound ([`MAX_QUEUED`]), so that a caller that queued an
    /// audit record waits, rather than memory grows, while the writer is stalled.
    pub(crate) async fn room(&self) {
        let room = self.store.queue().room.clone();
        let _ = room.acquire_owned().await;
    }

    /// Waits until every write queued before this call has been committed or given up on.
    pub async fn flush(&self) {
        // Writes run and commit in queue order, so when this one is answered so are all before it.
        let _ = self.submit(|_, _| Ok(())).await;
    }

    /// [`Store::create_task`], group-committed.
    pub fn create_task(
        &self,
        task: TaskRecord,
        limits: TaskLimits,
    ) -> impl Future<Output = Result<(), StoreError>> + use<> {
        self.create_task_with_history(task, Vec::new(), limits)
    }

    /// [`Store::create_task_with_history`], group-committed.
    pub fn create_task_with_history(
        &self,
        task: TaskRecord,
        earlier: Vec<EarlierStatus>,
        limits: TaskLimits,
    ) -> impl Future<Output = Result<(), StoreError>> + use<> {
        self.submit(move |store, conn| store.insert_task(conn, &task, &earlier, &limits))
    }

    /// [`Store::check_room_for_task`], in queue order with the writes (so it sees every creation
    /// queued before it).
    pub fn check_room_for_task(
        &self,
        limits: TaskLimits,
    ) -> impl Future<Output = Result<(), StoreError>> + use<> {
        self.submit(move |store, conn| store.room_for_task(conn, &limits).map(|_| ()))
    }

    /// [`Store::update_task`], group-committed.
    pub fn update_task(
        &self,
        id: String,
        update: TaskUpdate,
    ) -> impl Future<Output = Result<Option<i64>, StoreError>> + use<> {
        self.submit(move |store, conn| store.apply_task_update(conn, &id, &update))
    }

    /// [`Store::create_conversation`] (owned by `owner`, the client that started it) and
    /// [`Store::append_message`] of its first message, in one write; answers the conversation as it
    /// is after the message.
    pub fn start_conversation(
        &self,
        agent: String,
        owner: Option<String>,
        first: crate::NewMessage,
    ) -> impl Future<Output = Result<Conversation, StoreError>> + use<> {
        self.submit(move |store, conn| {
            let conversation = store.insert_conversation(conn, &agent, owner.as_deref())?;
            store
                .insert_message(conn, &conversation.id, &first)
                .map(|(_, conversation)| conversation)
        })
    }

    /// [`Store::append_message`], group-committed; answers the conversation as it is after the message
    /// (its token totals include it).
    pub fn append_message(
        &self,
        conversation_id: String,
        message: crate::NewMessage,
    ) -> impl Future<Output = Result<Conversation, StoreError>> + use<> {
        self.submit(move |store, conn| {
            store
                .insert_message(conn, &conversation_id, &message)
                .map(|(_, conversation)| conversation)
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::TaskStatusUpdate;
    use crate::both_backends;

    /// Keeps the writer thread from starting a transaction while held: on SQLite it holds the one
    /// connection, on PostgreSQL every connection of the pool. Writes queued meanwhile wait behind
    /// at most the one batch the thread already took.
    #[allow(dead_code)] // Held for its drop only.
    enum Stall<'s> {
        Sqlite(std::sync::MutexGuard<'s, rusqlite::Connection>),
        Postgres(Vec<crate::db::pg::Pooled<'s>>),
    }

    fn stall_writer(store: &Store) -> Stall<'_> {
        match &store.inner.backend {
            Backend::Sqlite(conn) => Stall::Sqlite(crate::lock_sqlite(conn)),
            // As many as `testing::postgres_store` lets its pool open.
            Backend::Postgres { pool, .. } => Stall::Postgres(
                (0..crate::testing::POSTGRES_TEST_POOL_SIZE)
                    .map(|_| pool.get().unwrap())
                    .collect(),
            ),
        }
    }

    fn task(id: &str) -> TaskRecord {
        TaskRecord {
            id: id.to_string(),
            context_id: "ctx".to_string(),
            owner: "alice".to_string(),
            agent: "echo".to_string(),
            state: portico_core::TaskState::Submitted,
            status: json!({"state": "TASK_STATE_SUBMITTED"}),
            history: vec![
                json!({"messageId": format!("{id}-m1"), "role": "ROLE_USER", "parts": [{"text": "hi"}]}),
            ],
            artifacts: Vec::new(),
            metadata: json!({}),
            created_at_ms: 1,
            updated_at_ms: 1,
        }
    }

    fn completed() -> TaskUpdate {
        TaskUpdate {
            message: Some(
                json!({"messageId": "reply", "role": "ROLE_AGENT", "parts": [{"text": "done"}]}),
            ),
            artifacts: Some(vec![
                json!({"artifactId": "response", "parts": [{"text": "done"}]}),
            ]),
            metadata: Some(json!({"portico": {"conversation_id": "c_1"}})),
            status: Some(TaskStatusUpdate {
                state: portico_core::TaskState::Completed,
                status: json!({"state": "TASK_STATE_COMPLETED"}),
            }),
        }
    }

    /// Creates 64 tasks at once through `store`, then checks through `reopen` (another process, or
    /// this one after a kill -9) that every acknowledged task is there.
    async fn concurrent_creations_case(store: Store, reopen: impl FnOnce(Store) -> Store) {
        let writer = store.batch_writer();
        let ids: Vec<String> = (0..64).map(|i| format!("t{i:02}")).collect();
        let writes = {
            let _stalled = stall_writer(&store);
            ids.iter()
                .map(|id| writer.create_task(task(id), TaskLimits::default()))
                .collect::<Vec<_>>()
        };
        for result in futures_join(writes).await {
            result.unwrap();
        }
        let batches = store.committed_batches();
        assert!(
            (1..=2).contains(&batches),
            "64 creations took {batches} transactions"
        );
        drop(writer);
        let reopened = reopen(store);
        for id in &ids {
            let stored = reopened
                .task(id)
                .unwrap()
                .unwrap_or_else(|| panic!("{id} lost"));
            assert_eq!(stored.state, portico_core::TaskState::Submitted);
            assert_eq!(reopened.task_status_history(id).unwrap().len(), 1);
        }
        assert_eq!(reopened.task_count().unwrap(), (64, 64));
    }

    mod concurrent_creations_are_all_durable_and_share_transactions {
        use super::*;

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn sqlite() {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("portico.db");
            let store = Store::open(&path).unwrap();
            concurrent_creations_case(store, |store| {
                // Not closed at all, as after kill -9.
                std::mem::forget(store);
                Store::open(&path).unwrap()
            })
            .await;
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn postgres() {
            let Some(url) = crate::testing::postgres_test_url() else {
                return;
            };
            let store =
                Store::open_postgres(&url, crate::testing::POSTGRES_TEST_POOL_SIZE).unwrap();
            concurrent_creations_case(store, |store| {
                drop(store);
                Store::open_postgres(&url, 1).unwrap()
            })
            .await;
        }
    }

    both_backends! {
    async fn writes_queued_together_run_in_order(store) {
        let writer = store.batch_writer();
        // Queued without awaiting: the update runs after the creation it depends on.
        let created = writer.create_task(task("t1"), TaskLimits::default());
        let updated = writer.update_task("t1".to_string(), completed());
        created.await.unwrap();
        assert_eq!(updated.await.unwrap(), Some(2));
        let stored = store.task("t1").unwrap().unwrap();
        assert_eq!(stored.state, portico_core::TaskState::Completed);
        assert_eq!(stored.history.len(), 2);
        assert_eq!(stored.artifacts.len(), 1);
        assert_eq!(stored.metadata["portico"]["conversation_id"], "c_1");
    }
    }

    both_backends! {
    async fn a_failing_write_rolls_back_alone(store) {
        let writer = store.batch_writer();
        let (first, failing, last) = {
            let _stalled = stall_writer(&store);
            let first = writer.create_task(task("t1"), TaskLimits::default());
            // Writes part of its work, then fails: none of it may stay.
            let failing = writer.submit(|store, conn| -> Result<(), StoreError> {
                store.insert_task(conn, &task("t2"), &[], &TaskLimits::default())?;
                store.apply_task_update(conn, "missing", &completed())?;
                Ok(())
            });
            let last = writer.update_task("t1".to_string(), completed());
            (first, failing, last)
        };
        first.await.unwrap();
        let error = failing.await.unwrap_err();
        assert!(
            matches!(&error, StoreError::TaskNotFound { id, .. } if id == "missing"),
            "{error}"
        );
        assert_eq!(last.await.unwrap(), Some(2));
        assert_eq!(store.task("t2").unwrap(), None);
        assert_eq!(store.task_status_history("t2").unwrap(), vec![]);
        assert_eq!(
            store.task("t1").unwrap().unwrap().state,
            portico_core::TaskState::Completed
        );
        assert_eq!(store.task_count().unwrap(), (1, 0));
    }
    }

    #[tokio::test]
    async fn a_new_conversation_starts_with_its_first_message() {
        let store = Store::open_in_memory().unwrap();
        let writer = store.batch_writer();
        let first = crate::NewMessage {
            role: "user".to_string(),
            content: json!("hello"),
            input_tokens: 3,
            output_tokens: 0,
        };
        let conversation = writer
            .start_conversation("echo".to_string(), Some("client:a".into()), first)
            .await
            .unwrap();
        assert_eq!(
            (
                conversation.agent.as_str(),
                conversation.message_count,
                conversation.input_tokens
            ),
            ("echo", 1, 3)
        );
        let reply = crate::NewMessage {
            role: "assistant".to_string(),
            content: json!("hi"),
            input_tokens: 0,
            output_tokens: 5,
        };
        let after = writer
            .append_message(conversation.id.clone(), reply)
            .await
            .unwrap();
        assert_eq!(
            (after.message_count, after.input_tokens, after.output_tokens),
            (2, 3, 5)
        );
        assert_eq!(store.conversation(&conversation.id).unwrap(), Some(after));
        let messages = store.messages(&conversation.id).unwrap();
        let summary: Vec<(i64, &str)> = messages.iter().map(|m| (m.seq, m.role.as_str())).collect();
        assert_eq!(summary, [(1, "user"), (2, "assistant")]);
    }

    both_backends! {
    async fn the_writer_thread_stops_with_the_store(store) {
        let writer = store.batch_writer();
        writer
            .create_task(task("t1"), TaskLimits::default())
            .await
            .unwrap();
        let weak = std::sync::Arc::downgrade(&store.inner);
        drop(writer);
        drop(store);
        // Between batches the thread holds only a weak handle, so nothing keeps the store alive.
        assert!(weak.upgrade().is_none());
    }
    }

    #[tokio::test]
    async fn gathered_audit_records_do_not_wake_the_writer_and_an_awaited_write_ends_the_gathering()
    {
        let store = Store::open_in_memory().unwrap();
        let jobs = store.queue().jobs.clone();
        // Long enough that only an awaited write can end this batch within the test's timeout.
        jobs.lock().gathering = std::time::Duration::from_secs(120);
        let audit = store.audit_writer();
        audit.record(crate::audit::tests::record(0, "ide", "t"));
        // The writer takes the first record (woken, if it was idle yet) and holds the batch open.
        while jobs.lock().writer != WriterState::Gathering {
            std::thread::yield_now();
        }
        let wakes = jobs.lock().wakes;
        assert!(wakes <= 1);
        for at in 1..100 {
            audit.record(crate::audit::tests::record(at, "ide", "t"));
        }
        assert_eq!(
            jobs.lock().wakes,
            wakes,
            "records while gathering wake nobody"
        );
        let created = tokio::time::timeout(
            std::time::Duration::from_secs(30),
            store
                .batch_writer()
                .create_task(task("t1"), TaskLimits::default()),
        )
        .await
        .expect("an awaited write is committed without waiting for the gathering to end");
        created.unwrap();
        assert_eq!(jobs.lock().wakes, wakes + 1);
        assert_eq!(
            store.committed_batches(),
            1,
            "the records and the task in one batch"
        );
        let written = store.audit(&crate::AuditQuery::default()).unwrap();
        assert_eq!(written.len(), 100);
    }

    both_backends! {
    async fn without_its_writer_thread_writes_fail_saying_so(store) {
        let jobs = Arc::new(JobQueue::new());
        jobs.close();
        let queue = Queue {
            jobs,
            room: Arc::new(Semaphore::new(MAX_QUEUED)),
        };
        assert!(store.inner.writes.set(queue).is_ok());
        let error = store
            .batch_writer()
            .create_task(task("t1"), TaskLimits::default())
            .await
            .unwrap_err();
        assert!(
            error.to_string().contains("writer thread is not running"),
            "{error}"
        );
        // Audit records are given up on (and logged), never waited for.
        let audit = store.audit_writer();
        audit.record(crate::audit::tests::record(1, "ide", "t"));
        tokio::time::timeout(std::time::Duration::from_secs(5), audit.flush())
            .await
            .expect("a flush without a writer thread returns at once");
        assert_eq!(store.task("t1").unwrap(), None);
    }
    }

    async fn futures_join<F: Future>(futures: Vec<F>) -> Vec<F::Output> {
        let mut outputs = Vec::with_capacity(futures.len());
        for future in futures {
            outputs.push(future.await);
        }
        outputs
    }

    /// Polls once; `true` if the future is still waiting.
    fn still_waiting<F: Future>(future: std::pin::Pin<&mut F>) -> bool {
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        future.poll(&mut cx).is_pending()
    }

    both_backends! {
    async fn a_stalled_writer_makes_awaited_writes_wait_instead_of_queueing(store) {
        store.set_queue_bound(4);
        let writer = store.batch_writer();
        let held = stall_writer(&store);
        // The writer thread cannot commit while the connection is held: it is stalled.
        let mut writes: Vec<_> = (0..10)
            .map(|i| Box::pin(writer.create_task(task(&format!("t{i}")), TaskLimits::default())))
            .collect();
        assert_eq!(store.queued_writes(), 4, "only the bound's worth is queued");
        for write in &mut writes[4..] {
            assert!(
                still_waiting(write.as_mut()),
                "past the bound a write waits"
            );
        }
        assert_eq!(store.queued_writes(), 4);
        drop(held);
        for write in writes {
            write.await.unwrap();
        }
        assert_eq!(store.queued_writes(), 0, "every place is given back");
        for i in 0..10 {
            assert!(store.task(&format!("t{i}")).unwrap().is_some(), "t{i}");
        }
    }
    }

    #[tokio::test]
    async fn past_the_bound_audit_records_are_kept_and_their_callers_wait_for_room() {
        let store = Store::open_in_memory().unwrap();
        store.set_queue_bound(4);
        let writer = store.audit_writer();
        let held = store.conn();
        for i in 0..10 {
            writer.record(crate::audit::tests::record(i, "ide", &format!("t{i}")));
        }
        assert_eq!(store.queued_writes(), 4);
        let mut room = Box::pin(writer.room());
        assert!(still_waiting(room.as_mut()), "a full queue has no room");
        drop(held);
        room.await;
        writer.flush().await;
        let kept = store
            .audit(&crate::AuditQuery {
                limit: 100,
                ..crate::AuditQuery::default()
            })
            .unwrap();
        assert_eq!(kept.len(), 10, "nothing queued is dropped");
    }
}
