//! The process's allocator: mimalloc, told to give memory back to the system once it is free.
//!
//! mimalloc is fast for the many small, short-lived buffers of a call moving between threads (glibc
//! malloc spent ~20% of a call's CPU in its arenas and their locks), but by default it returns a
//! thread's free pages only when that same thread next allocates or collects. After a burst of MCP
//! sessions closes, the runtime's workers go idle with the sessions' pages still theirs: 1,000
//! sessions left ~48 MiB more resident than before them with under 2 MiB of live heap, for good
//! (`scripts/session-memory`; now ~4 MiB).
//! So each worker collects its own free pages whenever it runs out of work (tokio's park hook), and
//! freed pages are given back to the system at once rather than after a delay no idle thread would
//! wait out.

/// mimalloc v3's `mi_option_purge_delay` (`mimalloc.h`'s `mi_option_e`; the Rust bindings name
/// only the options older versions had).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Before the first thread starts: free page runs are decommitted as soon as they are given back.
pub(crate) fn configure() {
    // SAFETY: sets a plain integer option; mimalloc reads options without other preconditions.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, 0) };
}

/// Least time between two collections on one worker. A collection takes a few microseconds
/// (3.6 µs in a debug build over a 20,000-block heap); under load a worker parks between requests,
/// so this keeps the cost under 0.4% of a busy thread while what a burst frees is still given back
/// within a millisecond of its worker next parking.
const MIN_INTERVAL: std::time::Duration = std::time::Duration::from_millis(1);

thread_local! {
    static LAST_COLLECTED: std::cell::Cell<Option<std::time::Instant>> =
        const { std::cell::Cell::new(None) };
}

/// For tokio's `on_thread_park`: the parking worker hands its free pages back. Not forced: a forced
/// collection also walks the thread's full pages, work with nothing to give back.
pub(crate) fn on_idle() {
    let now = std::time::Instant::now();
    let due = LAST_COLLECTED
        .get()
        .is_none_or(|last| now - last >= MIN_INTERVAL);
    if due {
        LAST_COLLECTED.set(Some(now));
        // SAFETY: collects the calling thread's own heap; callable from any thread at any time.
        unsafe { libmimalloc_sys::mi_collect(false) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The option set is the purge delay: mimalloc v3's default for it is 1000 ms, and its
    /// neighbours in the enum default to 1 and 0, so a renumbered enum shows here.
    #[test]
    fn the_option_set_is_the_purge_delay() {
        // SAFETY: reads a plain integer option.
        let before = unsafe { libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) };
        assert_eq!(before, 1000);
        configure();
        // SAFETY: as above.
        let after = unsafe { libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) };
        assert_eq!(after, 0);
        on_idle();
    }
}
