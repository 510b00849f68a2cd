//! Text that a client or an upstream controls (a server's stderr, its error messages, tool names),
//! made safe to write in one log line or on a terminal: nothing in it can end the line, forge
//! another, move the cursor or reorder what is shown.

use std::borrow::Cow;

use unicode_general_category::{GeneralCategory, get_general_category};

/// Whether `c` shows as nothing, or changes how its neighbours show: Unicode general categories Cc
/// (controls, the newline and escape included), Cf (format: bidi overrides and isolates,
/// zero-width spaces and joiners, the BOM, tag characters), and the line and paragraph separators.
pub fn is_invisible(c: char) -> bool {
    matches!(
        get_general_category(c),
        GeneralCategory::Format
            | GeneralCategory::Control
            | GeneralCategory::LineSeparator
            | GeneralCategory::ParagraphSeparator
    )
}

/// `text` with every [invisible](is_invisible) character written out: `\n`, `\r` and `\t` as
/// such, any other as `\u{202e}`. Borrowed when there is nothing to escape (the usual case).
pub fn log_safe(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_invisible) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if is_invisible(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_and_bidi_characters_are_written_out_and_the_rest_kept() {
        assert!(matches!(
            log_safe("plain café ✓ C:\\x"),
            Cow::Borrowed("plain café ✓ C:\\x")
        ));
        assert_eq!(
            log_safe(
                "a\nERROR forged\r\tb\u{1b}[31mc\u{202e}d\u{2066}e\u{200b}f\u{2028}g\u{e0041}"
            ),
            "a\\nERROR forged\\r\\tb\\u{1b}[31mc\\u{202e}d\\u{2066}e\\u{200b}f\\u{2028}g\\u{e0041}"
        );
        assert!(!log_safe("x\u{7f}\u{85}y").chars().any(is_invisible));
    }
}
