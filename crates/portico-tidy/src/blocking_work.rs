//! Store work from async code goes through the store's facade (`Store::run`, and the wrappers over
//! it such as `Approvals::run`), which bounds how many blocking store jobs run and wait; a bare
//! `tokio::task::spawn_blocking` around store calls would escape that bound. So `spawn_blocking`
//! appears only where the allow-list below says, each file with how many uses and why (blocking
//! work that is not the store's). Scanned: every `.rs` file under `crates/*/src`, as tokens, so a
//! mention in a comment does not count.

use std::collections::BTreeMap;

use crate::source::{Token, files_under, read, tokens};

/// Files allowed `spawn_blocking`: how many uses, and what blocking work that is not the store's.
const ALLOWED: &[(&str, usize, &str)] = &[
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

/// `spawn_blocking` identifiers per file: (path, lines).
fn uses(files: &[(String, String)]) -> BTreeMap<String, Vec<usize>> {
    let mut uses: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (path, text) in files {
        for token in tokens(text) {
            if let Token::Ident { text, line } = token
                && text == "spawn_blocking"
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
                "`spawn_blocking` at {} ({} use(s), {allowed_here} allowed): run store work from \
                 async code with `Store::run` (or `Approvals::run`), which bounds it; for blocking \
                 work that is not the store's, add or raise this file's entry in \
                 crates/portico-tidy/src/blocking_work.rs with the reason",
                at.join(", "),
                lines.len()
            ));
        }
    }
    for (path, count, _) in allowed {
        let found = uses.get(*path).map_or(0, Vec::len);
        if found < *count {
            problems.push(format!(
                "{path} is allowed {count} `spawn_blocking` but has {found}: lower its entry in \
                 crates/portico-tidy/src/blocking_work.rs (or delete it at 0), so the list only shrinks"
            ));
        }
    }
    problems
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
    let problems = problems(&uses(&files), ALLOWED);
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
    let found = uses(&files);
    assert_eq!(found.len(), 1, "{found:?}");
    let problems = problems(&found, &[("crates/c/src/lib.rs", 1, "gone")]).join("\n");
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
