//! The one way async code uses the store: [`Store::run`] runs a piece of synchronous store work on
//! tokio's blocking pool, so that a store that stalls (a PostgreSQL pool whose connections all wait
//! on a lock, a checkout that waits up to 30 s for a connection, a SQLite file another process
//! holds) stalls only the callers that wait for it, never a runtime worker and every task on it.
//!
//! The number of store jobs running at once is bounded (by the pool size on PostgreSQL, where more
//! would only wait for a connection in a thread of their own), and so is the number waiting for a
//! turn and how long each waits: a stalled database cannot make the process spawn blocking threads
//! without end, and a caller past either bound gets [`StoreError::Busy`] saying so.
//!
//! The replica heartbeat has a lane of its own ([`Store::run_heartbeat`]), as it has its own
//! connection: calls queued behind a stalled pool must not delay it past its lease.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::Semaphore;

use crate::{Store, StoreError};

/// Store jobs allowed to run at once on SQLite. There is one connection, so more would only queue
/// on its mutex; a few let one job's Rust work overlap another's statement.
pub(crate) const SQLITE_RUNNING: usize = 4;

/// Jobs that may wait for a turn before more are refused at once: far more than a busy gateway
/// has in flight, far fewer than the blocking threads tokio would start for them.
pub(crate) const MAX_WAITING: usize = 1024;

/// How long a job waits for a turn before it fails: as long as a PostgreSQL operation waits for a
/// pooled connection, so that a caller is told no later than the store itself would tell it.
pub(crate) const MAX_WAIT: Duration = Duration::from_secs(30);

/// One bounded lane of store jobs.
pub(crate) struct Lane {
    running: Arc<Semaphore>,
    waiting: AtomicUsize,
    max_waiting: usize,
    max_wait: Duration,
}

impl Lane {
    pub(crate) fn new(running: usize) -> Lane {
        Lane {
            running: Arc::new(Semaphore::new(running.max(1))),
            waiting: AtomicUsize::new(0),
            max_waiting: MAX_WAITING,
            max_wait: MAX_WAIT,
        }
    }

    #[cfg(test)]
    fn with_bounds(running: usize, max_waiting: usize, max_wait: Duration) -> Lane {
        Lane {
            max_waiting,
            max_wait,
            ..Lane::new(running)
        }
    }
}

/// Counts a job among the waiting for as long as it is alive (a caller that gives up, dropping the
/// future, stops counting too).
struct Waiting<'a>(&'a AtomicUsize);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Store {
    /// Runs `work` (synchronous store calls, on the store it is given) off the async runtime, on
    /// tokio's blocking pool, and waits for its result: the way to use the store from async code.
    /// `operation` names the work in the error a caller gets when the store is too busy to take it
    /// ([`StoreError::Busy`]).
    ///
    /// A panic in `work` is resumed in the caller, as if `work` had run inline.
    pub async fn run<T, E>(
        &self,
        operation: &'static str,
        work: impl FnOnce(&Store) -> Result<T, E> + Send + 'static,
    ) -> Result<T, E>
    where
        T: Send + 'static,
        E: From<StoreError> + Send + 'static,
    {
        self.run_on(&self.inner.jobs, operation, work).await
    }

    /// [`Store::run`] for the replica heartbeat's work (its own connection on PostgreSQL), on a
    /// lane of its own so that jobs queued behind a stalled pool never delay it.
    pub async fn run_heartbeat<T, E>(
        &self,
        operation: &'static str,
        work: impl FnOnce(&Store) -> Result<T, E> + Send + 'static,
    ) -> Result<T, E>
    where
        T: Send + 'static,
        E: From<StoreError> + Send + 'static,
    {
        self.run_on(&self.inner.heartbeat_jobs, operation, work)
            .await
    }

    async fn run_on<T, E>(
        &self,
        lane: &Lane,
        operation: &'static str,
        work: impl FnOnce(&Store) -> Result<T, E> + Send + 'static,
    ) -> Result<T, E>
    where
        T: Send + 'static,
        E: From<StoreError> + Send + 'static,
    {
        let busy = |reason: String| StoreError::Busy {
            path: self.inner.label.clone(),
            operation,
            reason,
        };
        let permit = match lane.running.clone().try_acquire_owned() {
            Ok(permit) => permit,
            Err(_) => {
                let before = lane.waiting.fetch_add(1, Ordering::AcqRel);
                let _waiting = Waiting(&lane.waiting);
                if before >= lane.max_waiting {
                    return Err(
                        busy(format!("{before} operations are already waiting for it")).into(),
                    );
                }
                match tokio::time::timeout(lane.max_wait, lane.running.clone().acquire_owned())
                    .await
                {
                    Ok(Ok(permit)) => permit,
                    // The semaphore is never closed; were it, no job could run either.
                    Ok(Err(_)) => return Err(busy("it is shutting down".into()).into()),
                    Err(_) => {
                        return Err(busy(format!(
                            "no earlier operation finished within {}",
                            seconds_or_ms(lane.max_wait)
                        ))
                        .into());
                    }
                }
            }
        };
        let store = self.clone();
        let joined = tokio::task::spawn_blocking(move || {
            let _permit = permit;
            work(&store)
        })
        .await;
        match joined {
            Ok(result) => result,
            Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
            Err(_) => Err(busy("the process is shutting down".into()).into()),
        }
    }
}

/// `30 s`, or `300 ms` for a wait under a second (the tests').
fn seconds_or_ms(wait: Duration) -> String {
    if wait.as_millis().is_multiple_of(1000) {
        format!("{} s", wait.as_secs())
    } else {
        format!("{} ms", wait.as_millis())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;

    use super::*;

    fn store_with(lane: Lane) -> Store {
        let mut store = Store::open_in_memory().unwrap();
        Arc::get_mut(&mut store.inner).unwrap().jobs = lane;
        store
    }

    /// A job that holds its turn until `release` is sent, and says when it started.
    async fn held(
        store: &Store,
    ) -> (
        mpsc::Sender<()>,
        tokio::task::JoinHandle<Result<(), StoreError>>,
    ) {
        let (release, released) = mpsc::channel::<()>();
        let (started_tx, started) = tokio::sync::oneshot::channel::<()>();
        let job = {
            let store = store.clone();
            tokio::spawn(async move {
                store
                    .run("holding", move |_| {
                        started_tx.send(()).unwrap();
                        released.recv().unwrap();
                        Ok::<_, StoreError>(())
                    })
                    .await
            })
        };
        started.await.unwrap();
        (release, job)
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_stalled_job_leaves_the_runtime_free() {
        let store = Store::open_in_memory().unwrap();
        let (release, job) = held(&store).await;
        // The only runtime thread still runs other tasks while the job blocks.
        let other = tokio::spawn(async { 42 });
        assert_eq!(
            tokio::time::timeout(Duration::from_secs(1), other)
                .await
                .unwrap()
                .unwrap(),
            42
        );
        release.send(()).unwrap();
        job.await.unwrap().unwrap();
        let value = store
            .run("reading the schema version", Store::schema_version)
            .await
            .unwrap();
        assert_eq!(value, crate::migrations::MIGRATIONS.len() as u32);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn jobs_past_the_bounds_fail_saying_why() {
        let store = store_with(Lane::with_bounds(1, 1, Duration::from_millis(300)));
        let (release, job) = held(&store).await;

        // One waits for a turn; the next is refused at once, as the queue is full.
        let waiting = {
            let store = store.clone();
            tokio::spawn(async move { store.run("waiting", |_| Ok::<_, StoreError>(())).await })
        };
        while store.inner.jobs.waiting.load(Ordering::Acquire) == 0 {
            tokio::task::yield_now().await;
        }
        let refused = store
            .run("refused", |_| Ok::<_, StoreError>(()))
            .await
            .unwrap_err();
        let message = refused.to_string();
        assert!(matches!(refused, StoreError::Busy { .. }), "{message}");
        assert!(
            message.contains("refused") && message.contains("1 operations are already waiting"),
            "{message}"
        );

        // The waiting one gives up when its wait runs out.
        let timed_out = waiting.await.unwrap().unwrap_err().to_string();
        assert!(
            timed_out.contains("waiting") && timed_out.contains("within 300 ms"),
            "{timed_out}"
        );
        assert_eq!(store.inner.jobs.waiting.load(Ordering::Acquire), 0);

        // Released, the lane takes jobs again.
        release.send(()).unwrap();
        job.await.unwrap().unwrap();
        store
            .run("after", |_| Ok::<_, StoreError>(()))
            .await
            .unwrap();
    }

    #[tokio::test]
    #[should_panic(expected = "a job's own panic")]
    async fn a_panic_in_a_job_reaches_its_caller() {
        let store = Store::open_in_memory().unwrap();
        let _ = store
            .run("panicking", |_| -> Result<(), StoreError> {
                panic!("a job's own panic")
            })
            .await;
    }
}
