//! JSON with comments and trailing commas, as VS Code writes `settings.json` and `mcp.json` (and as
//! people hand-edit Cursor's and Claude Desktop's files): reduced to strict JSON for `serde_json`.

/// Removes `//` and `/* */` comments and commas before a closing `}` or `]`, outside strings.
/// Everything else is kept byte for byte, so `serde_json`'s line and column still point into the
/// original text (a comment becomes spaces; its newlines stay).
pub fn to_strict_json(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    // Index into `out` of a comma that may turn out to be trailing.
    let mut pending_comma: Option<usize> = None;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        match b {
            b'"' => {
                pending_comma = None;
                let start = i;
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
                let end = (i + 1).min(bytes.len());
                out.extend_from_slice(&bytes[start..end]);
                i = end;
                continue;
            }
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    out.push(b' ');
                    i += 1;
                }
                continue;
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') => {
                let close = text[i + 2..]
                    .find("*/")
                    .map_or(bytes.len(), |at| i + 2 + at + 2);
                for &c in &bytes[i..close] {
                    out.push(if c == b'\n' { b'\n' } else { b' ' });
                }
                i = close;
                continue;
            }
            b',' => pending_comma = Some(out.len()),
            b'}' | b']' => {
                if let Some(at) = pending_comma.take() {
                    out[at] = b' ';
                }
            }
            b' ' | b'\t' | b'\r' | b'\n' => {}
            _ => pending_comma = None,
        }
        out.push(b);
        i += 1;
    }
    // Only ASCII bytes were replaced, by ASCII, and strings were copied whole.
    String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> serde_json::Value {
        serde_json::from_str(&to_strict_json(text)).unwrap()
    }

    #[test]
    fn comments_and_trailing_commas_go_strings_stay() {
        let text = r#"{
  // a line comment, with "quotes"
  "a": "x // not a comment, /* nor this */", /* block
  comment */ "b": [1, 2,],
  "c": {"d": "\"escaped\" //",},
}"#;
        assert_eq!(
            parse(text),
            serde_json::json!({"a": "x // not a comment, /* nor this */", "b": [1, 2], "c": {"d": "\"escaped\" //"}})
        );
    }

    #[test]
    fn positions_survive() {
        let text = "{\n  // note\n  \"a\": nope\n}";
        let err = serde_json::from_str::<serde_json::Value>(&to_strict_json(text)).unwrap_err();
        let plain = serde_json::from_str::<serde_json::Value>("{\n         \n  \"a\": nope\n}")
            .unwrap_err();
        assert_eq!((err.line(), err.column()), (plain.line(), plain.column()));
        assert_eq!(err.line(), 3);
    }

    #[test]
    fn every_cut_of_a_tricky_text_is_handled_without_panicking() {
        let text = "{\"a\\\"é\": [1, /* ü */ 2,], // ß\n \"b\": \"x\\\\\",}";
        assert_eq!(parse(text), serde_json::json!({"a\"é": [1, 2], "b": "x\\"}));
        for end in (0..=text.len()).filter(|&i| text.is_char_boundary(i)) {
            let strict = to_strict_json(&text[..end]);
            assert_eq!(strict.len(), end);
        }
    }

    #[test]
    fn a_comma_between_values_is_kept() {
        assert_eq!(parse("[1, /* c */ 2]"), serde_json::json!([1, 2]));
        assert_eq!(
            parse("{\"a\": \"é,\" , \"b\": 1}"),
            serde_json::json!({"a": "é,", "b": 1})
        );
    }
}
