//! Every crate root opens with its `//!` doc: the first non-empty line of each `src/lib.rs` and
//! `src/main.rs` (and `src/bin/*.rs`) under `crates/` is a `//!` line. Whether the doc is still true
//! is for review; that it exists is checked here.

use crate::source::{files_under, read};

/// Whether `path` is a crate root: `crates/<crate>/src/{lib,main}.rs` or `crates/<crate>/src/bin/*.rs`.
fn is_crate_root(path: &str) -> bool {
    let parts: Vec<&str> = path.split('/').collect();
    matches!(
        parts.as_slice(),
        ["crates", _, "src", "lib.rs" | "main.rs"] | ["crates", _, "src", "bin", _]
    )
}

/// The crate roots whose first non-empty line is not a `//!` doc line, with that line.
fn undocumented(roots: &[(String, String)]) -> Vec<String> {
    roots
        .iter()
        .filter_map(|(path, text)| {
            let first = text.lines().map(str::trim).find(|l| !l.is_empty());
            match first {
                Some(line) if line.starts_with("//!") => None,
                other => Some(format!(
                    "{path} opens with {:?}, not a `//!` crate doc: start it with a few `//!` lines \
                     saying what the crate is, and what it is not",
                    other.unwrap_or("nothing")
                )),
            }
        })
        .collect()
}

#[test]
fn every_crate_root_opens_with_its_doc() {
    let roots: Vec<(String, String)> = files_under("crates", ".rs")
        .into_iter()
        .filter(|path| is_crate_root(path))
        .map(|path| {
            let text = read(&path);
            (path, text)
        })
        .collect();
    assert!(
        roots.len() >= 20,
        "found only {} crate roots under crates/: has the layout changed? update `is_crate_root`",
        roots.len()
    );
    let problems = undocumented(&roots);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn a_root_that_opens_with_code_or_a_plain_comment_is_named() {
    let roots = [
        ("crates/a/src/lib.rs", "\n//! A.\nmod x;"),
        ("crates/b/src/lib.rs", "// B.\nmod x;"),
        ("crates/c/src/main.rs", "use std::io;\n//! C."),
        ("crates/d/src/lib.rs", ""),
    ]
    .map(|(p, t)| (p.to_string(), t.to_string()));
    let problems = undocumented(&roots).join("\n");
    assert!(!problems.contains("crates/a/"), "{problems}");
    for path in ["crates/b/", "crates/c/", "crates/d/"] {
        assert!(problems.contains(path), "{path} not named in:\n{problems}");
    }
    assert!(is_crate_root("crates/x/src/bin/tool.rs"));
    assert!(!is_crate_root("crates/x/src/lib/inner.rs"));
    assert!(!is_crate_root("crates/x/tests/lib.rs"));
}
