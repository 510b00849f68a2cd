//! The shape two checks share (`unsafe_code`, `blocking_work`): an identifier allowed only in the
//! files an allow-list names, each with a count and a reason, and a list that only shrinks (an entry
//! above what its file uses is a problem too, so a removed use cannot leave room for a new one).

use std::collections::BTreeMap;

use crate::source::{Token, tokens};

/// One allowed file: its path, how many uses, and why.
pub type Allowed = (&'static str, usize, &'static str);

/// Where `ident` occurs as an identifier (not in a comment or a string), per file: (path, lines).
pub fn uses_of(files: &[(String, String)], ident: &str) -> BTreeMap<String, Vec<usize>> {
    let mut uses: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (path, text) in files {
        for token in tokens(text) {
            if let Token::Ident { text, line } = token
                && text == ident
            {
                uses.entry(path.clone()).or_default().push(line);
            }
        }
    }
    uses
}

/// What is wrong with `uses` against `allowed`: files over their count (with `instead`, what to do)
/// and entries above their file's uses. `list` is the file the allow-list is in.
pub fn problems(
    uses: &BTreeMap<String, Vec<usize>>,
    allowed: &[Allowed],
    ident: &str,
    instead: &str,
    list: &str,
) -> Vec<String> {
    let mut problems = Vec::new();
    for (path, lines) in uses {
        let allowed_here = allowed
            .iter()
            .find(|(p, ..)| p == path)
            .map_or(0, |(_, n, _)| *n);
        if lines.len() > allowed_here {
            let at: Vec<String> = lines.iter().map(|l| format!("{path}:{l}")).collect();
            problems.push(format!(
                "`{ident}` at {} ({} use(s), {allowed_here} allowed): {instead}; if there is no \
                 other way, add or raise this file's entry in {list} with the reason",
                at.join(", "),
                lines.len()
            ));
        }
    }
    for (path, count, _) in allowed {
        let found = uses.get(*path).map_or(0, Vec::len);
        if found < *count {
            problems.push(format!(
                "{path} is allowed {count} `{ident}` but has {found}: lower its entry in {list} (or \
                 delete it at 0), so the list only shrinks"
            ));
        }
    }
    problems
}
