//! Replays every committed corpus file through its target, so the normal test suite runs the
//! fuzzers' findings as regression cases without a nightly toolchain.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use portico_fuzz_targets::TARGETS;

/// Panics anywhere, including in tasks the door spawns (which tokio would otherwise swallow).
static PANICS: AtomicUsize = AtomicUsize::new(0);

fn corpus_dir(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target)
}

fn replay(target: &str, run: fn(&[u8])) {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        PANICS.fetch_add(1, Ordering::SeqCst);
        previous(info);
    }));
    let dir = corpus_dir(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot read the corpus {}: {e}", dir.display()))
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.is_file())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "the corpus {} is empty", dir.display());
    let mut failed = Vec::new();
    for file in &files {
        let data = std::fs::read(file).unwrap();
        let before = PANICS.load(Ordering::SeqCst);
        let outcome = std::panic::catch_unwind(|| run(&data));
        if outcome.is_err() || PANICS.load(Ordering::SeqCst) != before {
            failed.push(file.display().to_string());
        }
    }
    assert!(
        failed.is_empty(),
        "{target}: {} of {} corpus files panicked (reproduce with `cargo +nightly fuzz run {target} <file>` in fuzz/): {failed:#?}",
        failed.len(),
        files.len()
    );
}

macro_rules! corpus_tests {
    ($($name:ident),* $(,)?) => {$(
        #[test]
        fn $name() {
            let (target, run) = TARGETS
                .iter()
                .find(|(name, _)| *name == stringify!($name))
                .expect("every target has a test");
            replay(target, *run);
        }
    )*};
}

// One test per target: they share one door per process and run in parallel harmlessly.
corpus_tests!(
    stdio_framing,
    mcp_stdio,
    mcp_http,
    legacy_message,
    a2a_jsonrpc,
    a2a_rest,
    a2a_parse,
    config,
    ssrf,
);

#[test]
fn every_target_has_a_replay_test() {
    assert_eq!(TARGETS.len(), 9, "add the new target to corpus_tests!");
}
