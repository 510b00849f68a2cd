//! Comments say what the code does and why, in words a reader of this tree can check: never "issue
//! 14" or "seed 002", which point into a tracker or a document the reader may not have, and which
//! stop meaning anything once the work is done. Scanned: every `.rs` file under `crates/`, the text
//! after `//` on each line (line and doc comments, whole-line or trailing).

use crate::source::{files_under, read};

/// Where a comment cites an issue or a seed by number: `issue 14`, `Issue #7`, `seed 002`.
fn citations(text: &str) -> Vec<usize> {
    let mut lines = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let Some(at) = line.find("//") else {
            continue;
        };
        let comment = line[at..].to_ascii_lowercase();
        let cites = ["issue", "seed"].iter().any(|word| {
            comment.match_indices(word).any(|(start, _)| {
                let before = comment[..start].chars().next_back();
                let after = comment[start + word.len()..].trim_start_matches([' ', '#']);
                !before.is_some_and(|c| c.is_ascii_alphanumeric())
                    && comment[start + word.len()..].starts_with([' ', '#'])
                    && after.starts_with(|c: char| c.is_ascii_digit())
            })
        });
        if cites {
            lines.push(index + 1);
        }
    }
    lines
}

#[test]
fn comments_cite_no_issue_or_seed_numbers() {
    let mut problems = Vec::new();
    // This file's own examples are what the check looks for.
    let this_file = "crates/portico-tidy/src/comment_citations.rs";
    for path in files_under("crates", ".rs") {
        if path == this_file {
            continue;
        }
        for line in citations(&read(&path)) {
            problems.push(format!("{path}:{line}"));
        }
    }
    assert!(
        problems.is_empty(),
        "comments that cite an issue or a seed by number (say the behaviour instead; a reader \
         cannot open the tracker):\n{}",
        problems.join("\n")
    );
}

#[test]
fn citations_are_found_in_comments_only() {
    let text = "\
fn a() {} // fixed in issue 14
/// Seed 002's envelope.
//! see Issue #7
let s = \"issue 3\";
// reissue 4 times; the seeds 2 and the issues page
";
    assert_eq!(citations(text), [1, 2, 3]);
}
