//! Store work from async code goes through the store's facade (`Store::run`, and the wrappers over
//! it such as `Approvals::run`), which bounds how many blocking store jobs run and wait; a bare
//! `tokio::task::spawn_blocking` around store calls would escape that bound. So `spawn_blocking`
//! appears only where the allow-list below says, each file with how many uses and why (blocking
//! work that is not the store's). Scanned: every `.rs` file under `crates/*/src`, as tokens, so a
//! mention in a comment does not count.

use crate::allow_list::{Allowed, problems, uses_of};
use crate::source::{files_under, read};

/// Files allowed `spawn_blocking`: how many uses, and what blocking work that is not the store's.
const ALLOWED: &[Allowed] = &[
    (
        "crates/portico-store/src/offload.rs",
        1,
        "the facade itself (`Store::run`)",
    ),
    (
        "crates/portico-builtins/src/files.rs",
        3,
        "the file tools' std filesystem I/O",
    ),
    (
        "crates/portico-daemon/src/reload.rs",
        1,
        "hashing the config files to see whether they changed",
    ),
    (
        "crates/portico-mcp/src/oauth/store.rs",
        1,
        "an advisory file lock on the OAuth token file, across processes",
    ),
];

/// What the tidy check finds wrong with `files`' uses of `spawn_blocking`.
fn blocking_problems(files: &[(String, String)], allowed: &[Allowed]) -> Vec<String> {
    problems(
        &uses_of(files, "spawn_blocking"),
        allowed,
        "spawn_blocking",
        "run store work from async code with `Store::run` (or `Approvals::run`), which bounds it",
        "crates/portico-tidy/src/blocking_work.rs",
    )
}

#[test]
fn spawn_blocking_only_in_the_allow_list() {
    let files: Vec<(String, String)> = files_under("crates", ".rs")
        .into_iter()
        .filter(|path| path.split('/').nth(2) == Some("src"))
        .map(|path| {
            let text = read(&path);
            (path, text)
        })
        .collect();
    let problems = blocking_problems(&files, ALLOWED);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn new_and_vanished_uses_are_both_named() {
    let files = [
        (
            "crates/a/src/api.rs",
            "async fn f(s: Store) { tokio::task::spawn_blocking(move || s.task(\"t\")).await; } // spawn_blocking",
        ),
        ("crates/b/src/lib.rs", "const S: &str = \"spawn_blocking\";"),
    ]
    .map(|(p, t)| (p.to_string(), t.to_string()));
    let found = uses_of(&files, "spawn_blocking");
    assert_eq!(found.len(), 1, "{found:?}");
    let problems = blocking_problems(&files, &[("crates/c/src/lib.rs", 1, "gone")]).join("\n");
    assert!(
        problems.contains("`spawn_blocking` at crates/a/src/api.rs:1")
            && problems.contains("Store::run"),
        "{problems}"
    );
    assert!(
        problems.contains("crates/c/src/lib.rs is allowed 1"),
        "{problems}"
    );
}
