//! The process's allocator: mimalloc, made to give memory back to the system once it is free.
//!
//! mimalloc is fast for the many small, short-lived buffers of a call moving between threads (glibc
//! malloc spent ~20% of a call's CPU in its arenas and their locks), but it returns a thread's free
//! pages only when that same thread next allocates or collects, and purges (decommits) them only
//! after a delay, when some thread next looks. After a burst of MCP sessions closes, the runtime's
//! workers go idle with the sessions' pages still theirs: 1,000 sessions left ~84 MiB more resident
//! than before them (optimised build) with under 2 MiB of live heap, for good
//! (`scripts/session-memory`). So each worker collects its own free pages when it runs out of work
//! (tokio's park hook), and a heartbeat wakes a worker once a second so that a purge delay that has
//! run out is acted on. Purging at once instead (delay 0) cost ~12% of the throughput of a
//! kept-alive load: pages were decommitted and faulted back in between calls.

use std::cell::Cell;
use std::time::{Duration, Instant};

/// How often an idle runtime wakes a worker, so that free pages whose purge delay (1 s by default)
/// has run out are decommitted.
const HEARTBEAT: Duration = Duration::from_secs(1);

/// Least time between two collections on one worker. Under load a worker parks between requests;
/// a collection takes microseconds, so at most one per millisecond keeps it out of the way, while
/// what a burst frees is still collected when its worker next parks.
const MIN_INTERVAL: Duration = Duration::from_millis(1);

thread_local! {
    static LAST_COLLECTED: Cell<Option<Instant>> = const { Cell::new(None) };
}

/// For tokio's `on_thread_park`: the parking worker hands its free pages back. Not forced: a forced
/// collection also walks the thread's full pages and purges at once, work under load for nothing.
pub(crate) fn on_idle() {
    let now = Instant::now();
    let due = LAST_COLLECTED
        .get()
        .is_none_or(|last| now - last >= MIN_INTERVAL);
    if due {
        LAST_COLLECTED.set(Some(now));
        // SAFETY: collects the calling thread's own heap; callable from any thread at any time.
        unsafe { libmimalloc_sys::mi_collect(false) };
    }
}

/// Runs for the life of the runtime; the wake-up is the work (the worker's park hook collects).
pub(crate) async fn heartbeat() {
    let mut tick = tokio::time::interval(HEARTBEAT);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
    }
}
