//! No `unsafe` outside the allow-list below, each entry with its reason. Scanned: every `.rs` file
//! under `crates/` and `fuzz/` (sources, tests, benches), as tokens, so `unsafe` in a comment or a
//! string does not count. Before adding an entry, look for a safe API in a crate the workspace
//! already uses (rustix has safe wrappers for most system calls; std for sockets and signals to a
//! `Child`).

use crate::allow_list::{Allowed, problems, uses_of};
use crate::source::{files_under, read};

/// Files allowed `unsafe`: how many times, and why it cannot be a safe call.
const ALLOWED: &[Allowed] = &[
    (
        "crates/portico-builtins/src/shell.rs",
        1,
        "a test sets an environment variable (`std::env::set_var`, unsafe since edition 2024) so there \
         is a secret to leak, and checks `shell_exec`'s cleared environment does not pass it on",
    ),
    (
        "crates/portico/src/allocator.rs",
        1,
        "mimalloc's `mi_collect`, which the mimalloc crate does not wrap: an idle worker gives its \
         free pages back, or memory of closed sessions stays resident",
    ),
];

/// What the tidy check finds wrong with `files`' uses of `unsafe`.
fn unsafe_problems(files: &[(String, String)], allowed: &[Allowed]) -> Vec<String> {
    problems(
        &uses_of(files, "unsafe"),
        allowed,
        "unsafe",
        "use a safe API instead (rustix, std), with a SAFETY comment where none exists",
        "crates/portico-tidy/src/unsafe_code.rs",
    )
}

#[test]
fn no_unsafe_outside_the_allow_list() {
    let files: Vec<(String, String)> = files_under("crates", ".rs")
        .into_iter()
        .chain(files_under("fuzz", ".rs"))
        .map(|path| {
            let text = read(&path);
            (path, text)
        })
        .collect();
    let problems = unsafe_problems(&files, ALLOWED);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn new_and_vanished_uses_are_both_named() {
    let files = [
        (
            "crates/a/src/lib.rs",
            "fn f() { unsafe { g() } } // unsafe in a comment",
        ),
        (
            "crates/b/src/lib.rs",
            "const S: &str = \"unsafe\"; #![forbid(unsafe_code)]",
        ),
    ]
    .map(|(p, t)| (p.to_string(), t.to_string()));
    let uses = uses_of(&files, "unsafe");
    assert_eq!(uses.len(), 1, "{uses:?}");
    let problems = unsafe_problems(&files, &[("crates/c/src/lib.rs", 1, "gone")]).join("\n");
    assert!(
        problems.contains("`unsafe` at crates/a/src/lib.rs:1"),
        "{problems}"
    );
    assert!(
        problems.contains("crates/c/src/lib.rs is allowed 1"),
        "{problems}"
    );
}
