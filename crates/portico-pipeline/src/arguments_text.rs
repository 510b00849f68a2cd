//! Arguments as people are shown them before they approve a call: the approval page, `portico
//! approvals show` and the elicitation question all show this text, so what a prompt-injected call
//! hides in its arguments is hidden from none of them.

use portico_core::text::is_invisible;
use serde_json::Value;

/// The exact arguments as pretty JSON (serde_json's numbers: `9007199254740993` stays itself, as a
/// browser's `JSON.parse` would not keep it), with every invisible character escaped (see
/// [`escape_invisible`]).
pub fn arguments_text(arguments: &Value) -> String {
    // Serialising a `Value` cannot fail: its keys are strings.
    let pretty = serde_json::to_string_pretty(arguments).unwrap_or_default();
    escape_invisible(&pretty)
}

/// `json` with every character that shows as nothing, or changes how its neighbours show, written
/// as a JSON `\uXXXX` escape (a surrogate pair beyond the BMP): Unicode general categories Cf
/// (format: bidi overrides and isolates, zero-width spaces and joiners, the BOM, tag characters)
/// and Cc (controls) except `\n`, and the line and paragraph separators. Outside its strings, JSON
/// text holds only spaces and newlines, so the result is JSON with the same meaning, and every
/// such character in it can be seen.
pub fn escape_invisible(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        if c != '\n' && is_invisible(c) {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn invisible_characters_are_escaped_and_the_rest_is_kept() {
        assert_eq!(
            escape_invisible("{\"p\":\"a\u{202e}b\u{200b}c\u{2066}d\u{feff}\"}"),
            r#"{"p":"a\u202eb\u200bc\u2066d\ufeff"}"#
        );
        // Beyond the BMP: a tag character, as JSON writes it (a surrogate pair).
        assert_eq!(escape_invisible("\u{e0041}"), r"\udb40\udc41");
        // Controls serde_json leaves as they are (DEL, C1), soft hyphen, line separators.
        assert_eq!(
            escape_invisible("\u{7f}\u{85}\u{ad}\u{2028}\u{2029}"),
            r"\u007f\u0085\u00ad\u2028\u2029"
        );
        // Newlines (pretty JSON's own), spaces, letters in any script and emoji stay.
        let visible = "{\n  \"k\": \"é ü 日本 שלום 😀 <b>\"\n}";
        assert_eq!(escape_invisible(visible), visible);
    }

    #[test]
    fn arguments_text_is_exact_pretty_json_that_still_parses_to_the_arguments() {
        let arguments: Value = serde_json::from_str(
            r#"{"n":9007199254740993,"big":1234567890123456789,"p":"a\u202eb\tc"}"#,
        )
        .unwrap();
        let text = arguments_text(&arguments);
        assert_eq!(
            text,
            "{\n  \"n\": 9007199254740993,\n  \"big\": 1234567890123456789,\n  \"p\": \"a\\u202eb\\tc\"\n}"
        );
        assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), arguments);
        assert_eq!(arguments_text(&json!(null)), "null");
    }
}
