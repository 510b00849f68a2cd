//! No `unsafe` outside the allow-list below, each entry with its reason. Scanned: every `.rs` file
//! under `crates/` and `fuzz/` (sources, tests, benches), as tokens, so `unsafe` in a comment or a
//! string does not count. Before adding an entry, look for a safe API in a crate the workspace
//! already uses (rustix has safe wrappers for most system calls; std for sockets and signals to a
//! `Child`).

use std::collections::BTreeMap;

use crate::source::{Token, files_under, read, tokens};

/// Files allowed `unsafe`: how many times, and why it cannot be a safe call.
const ALLOWED: &[(&str, usize, &str)] = &[
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

/// `unsafe` keywords per file: (path, lines).
fn uses_of_unsafe(files: &[(String, String)]) -> BTreeMap<String, Vec<usize>> {
    let mut uses: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (path, text) in files {
        for token in tokens(text) {
            if let Token::Ident { text, line } = token
                && text == "unsafe"
            {
                uses.entry(path.clone()).or_default().push(line);
            }
        }
    }
    uses
}

fn problems(uses: &BTreeMap<String, Vec<usize>>, allowed: &[(&str, usize, &str)]) -> Vec<String> {
    let mut problems = Vec::new();
    for (path, lines) in uses {
        let allowed_here = allowed
            .iter()
            .find(|(p, ..)| p == path)
            .map_or(0, |(_, n, _)| *n);
        if lines.len() > allowed_here {
            let at: Vec<String> = lines.iter().map(|l| format!("{path}:{l}")).collect();
            problems.push(format!(
                "`unsafe` at {} ({} use(s), {allowed_here} allowed): use a safe API instead \
                 (rustix, std), or, if there is none, add or raise this file's entry in \
                 crates/portico-tidy/src/unsafe_code.rs with the reason and a SAFETY comment",
                at.join(", "),
                lines.len()
            ));
        }
    }
    for (path, count, _) in allowed {
        let found = uses.get(*path).map_or(0, Vec::len);
        if found < *count {
            problems.push(format!(
                "{path} is allowed {count} `unsafe` but has {found}: lower its entry in \
                 crates/portico-tidy/src/unsafe_code.rs (or delete it at 0), so the list only shrinks"
            ));
        }
    }
    problems
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
    let problems = problems(&uses_of_unsafe(&files), ALLOWED);
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
    let uses = uses_of_unsafe(&files);
    assert_eq!(uses.len(), 1, "{uses:?}");
    let problems = problems(&uses, &[("crates/c/src/lib.rs", 1, "gone")]).join("\n");
    assert!(
        problems.contains("`unsafe` at crates/a/src/lib.rs:1"),
        "{problems}"
    );
    assert!(
        problems.contains("crates/c/src/lib.rs is allowed 1"),
        "{problems}"
    );
}
