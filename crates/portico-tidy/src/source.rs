//! Reading the source tree: the workspace root, its Rust files, and a lexer just good enough to tell
//! string literals and identifiers from comments (no parser: the checks look at tokens only).

use std::path::{Path, PathBuf};

/// The workspace root (this crate lives in `crates/portico-tidy`).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("crates/portico-tidy has a grandparent")
        .to_path_buf()
}

/// Directories never scanned: build output, installed test peers' packages, git internals.
const SKIPPED_DIRS: [&str; 4] = ["target", "node_modules", ".git", ".venv"];

/// Every file under `dir` (relative to the workspace root) whose name ends with `suffix`, as paths
/// relative to the root with `/` separators, sorted.
pub fn files_under(dir: &str, suffix: &str) -> Vec<String> {
    let root = workspace_root();
    let mut found = Vec::new();
    let mut pending = vec![root.join(dir)];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries {
            let entry = entry.unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()));
            let path = entry.path();
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if path.is_dir() {
                if !SKIPPED_DIRS.contains(&name.as_ref()) {
                    pending.push(path);
                }
            } else if name.ends_with(suffix) {
                found.push(relative(&root, &path));
            }
        }
    }
    found.sort();
    found
}

fn relative(root: &Path, path: &Path) -> String {
    let relative = path.strip_prefix(root).unwrap_or(path);
    relative
        .components()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
}

/// A file's text, by its path relative to the workspace root.
pub fn read(path: &str) -> String {
    let full = workspace_root().join(path);
    std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("reading {}: {e}", full.display()))
}

/// The tokens the checks look at; everything else (punctuation, numbers, comments) is skipped.
#[derive(Debug, PartialEq, Eq)]
pub enum Token {
    /// A string literal of any kind (`"…"`, `r#"…"#`, `b"…"`, `c"…"`): its text with `\"` and `\\`
    /// unescaped, so JSON inside an ordinary string reads as it does inside a raw one.
    Str { text: String, line: usize },
    /// An identifier or keyword.
    Ident { text: String, line: usize },
}

/// Splits Rust source into string literals and identifiers, skipping comments (nested block comments
/// included), character literals and lifetimes.
pub fn tokens(source: &str) -> Vec<Token> {
    let chars: Vec<char> = source.chars().collect();
    let mut tokens = Vec::new();
    let mut line = 1;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '\n' {
            line += 1;
            i += 1;
        } else if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    if chars[i] == '\n' {
                        line += 1;
                    }
                    i += 1;
                }
            }
        } else if c == '"' {
            let start_line = line;
            let (text, end) = quoted(&chars, i + 1, &mut line);
            tokens.push(Token::Str {
                text,
                line: start_line,
            });
            i = end;
        } else if c == '\'' {
            i = skip_char_or_lifetime(&chars, i);
        } else if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            let after = chars.get(i).copied();
            if matches!(word.as_str(), "r" | "br" | "cr") && raw_string_starts(&chars, i) {
                let start_line = line;
                let (text, end) = raw(&chars, i, &mut line);
                tokens.push(Token::Str {
                    text,
                    line: start_line,
                });
                i = end;
            } else if matches!(word.as_str(), "b" | "c") && after == Some('"') {
                let start_line = line;
                let (text, end) = quoted(&chars, i + 1, &mut line);
                tokens.push(Token::Str {
                    text,
                    line: start_line,
                });
                i = end;
            } else if word == "b" && after == Some('\'') {
                i = skip_char_or_lifetime(&chars, i);
            } else if word == "r" && after == Some('#') {
                // A raw identifier (`r#type`): the `#` is skipped and the name read next.
                i += 1;
            } else {
                tokens.push(Token::Ident { text: word, line });
            }
        } else {
            i += 1;
        }
    }
    tokens
}

/// The body of an ordinary string starting at `start` (after its opening quote), and the index after
/// its closing quote.
fn quoted(chars: &[char], start: usize, line: &mut usize) -> (String, usize) {
    let mut text = String::new();
    let mut i = start;
    while i < chars.len() {
        match chars[i] {
            '"' => return (text, i + 1),
            '\\' => {
                match chars.get(i + 1) {
                    Some('"') => text.push('"'),
                    Some('\\') => text.push('\\'),
                    Some('\n') => *line += 1,
                    Some(other) => {
                        text.push('\\');
                        text.push(*other);
                    }
                    None => {}
                }
                i += 2;
            }
            c => {
                if c == '\n' {
                    *line += 1;
                }
                text.push(c);
                i += 1;
            }
        }
    }
    (text, i)
}

fn raw_string_starts(chars: &[char], mut i: usize) -> bool {
    while chars.get(i) == Some(&'#') {
        i += 1;
    }
    chars.get(i) == Some(&'"')
}

/// A raw string whose hashes start at `start`: its body and the index after it.
fn raw(chars: &[char], start: usize, line: &mut usize) -> (String, usize) {
    let mut i = start;
    let mut hashes = 0;
    while chars[i] == '#' {
        hashes += 1;
        i += 1;
    }
    i += 1; // the opening quote
    let mut text = String::new();
    while i < chars.len() {
        if chars[i] == '"' && (1..=hashes).all(|k| chars.get(i + k) == Some(&'#')) {
            return (text, i + 1 + hashes);
        }
        if chars[i] == '\n' {
            *line += 1;
        }
        text.push(chars[i]);
        i += 1;
    }
    (text, i)
}

/// Skips a character literal (`'x'`, `'\n'`, `'\u{1F600}'`, `b'"'`) or a lifetime or label (`'a`)
/// whose quote is at or after `start`; returns the index after it.
fn skip_char_or_lifetime(chars: &[char], start: usize) -> usize {
    let quote = if chars[start] == '\'' {
        start
    } else {
        start + 1
    };
    match chars.get(quote + 1) {
        Some('\\') => {
            // Past the backslash and the character it escapes (which may itself be a quote).
            let mut i = quote + 3;
            while i < chars.len() && chars[i] != '\'' {
                i += 1;
            }
            i + 1
        }
        Some(_) if chars.get(quote + 2) == Some(&'\'') => quote + 3,
        // A lifetime or label: its name is lexed as an identifier next, which no check looks for.
        _ => quote + 1,
    }
}

#[cfg(test)]
mod tests {
    use super::{Token, tokens};

    fn strings(source: &str) -> Vec<String> {
        tokens(source)
            .into_iter()
            .filter_map(|t| match t {
                Token::Str { text, .. } => Some(text),
                Token::Ident { .. } => None,
            })
            .collect()
    }

    #[test]
    fn literals_are_read_and_comments_skipped() {
        let source = r####"
            // "in a comment"
            /* "in /* a nested */ block" */
            let a = "plain \"quoted\" \\";
            let b = r#"raw "json""#;
            let c = br##"bytes "#"##;
            let d = '"';
            let e = b'"';
            let q = '\'';
            fn f<'a>(x: &'a str) -> &'a str { x }
            let g = r#type;
            let h = "after";
        "####;
        assert_eq!(
            strings(source),
            [
                r#"plain "quoted" \"#,
                r#"raw "json""#,
                r##"bytes "#"##,
                "after"
            ]
        );
        assert!(tokens(source).contains(&Token::Ident {
            text: "type".into(),
            line: 11
        }));
    }

    #[test]
    fn lines_are_counted_through_multi_line_literals_and_comments() {
        let source = "/*\n*/\nlet a = \"x\ny\";\nlet b = \"z\";";
        assert_eq!(
            tokens(source).last(),
            Some(&Token::Str {
                text: "z".into(),
                line: 5
            })
        );
    }
}
