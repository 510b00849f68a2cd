//! Writing TOML values by hand: an imported entry is appended to a config file as text, so the file's
//! own comments and layout are never rewritten.

/// A TOML basic string: quotes, backslashes and control characters escaped.
pub fn string(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 2);
    out.push('"');
    for c in value.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A key: bare when TOML allows it, else quoted.
pub fn key(name: &str) -> String {
    let bare = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if bare { name.to_string() } else { string(name) }
}

/// `["a", "b"]`.
pub fn string_array(items: &[String]) -> String {
    let items: Vec<String> = items.iter().map(|s| string(s)).collect();
    format!("[{}]", items.join(", "))
}

/// `{ A = "x", "b c" = "y" }`.
pub fn inline_table(entries: &[(String, String)]) -> String {
    let entries: Vec<String> = entries
        .iter()
        .map(|(k, v)| format!("{} = {}", key(k), string(v)))
        .collect();
    format!("{{ {} }}", entries.join(", "))
}

/// Text safe inside a `#` comment: one line, no control characters.
pub fn comment_text(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_and_keys_read_back_as_written() {
        let tricky = "a \"quoted\" \\path\\ with\nnewline\ttab \u{7} bell and é";
        let toml_text = format!(
            "x = {}\n[t]\n{} = 1\n{} = 2\ny = {}\nz = {}\n",
            string(tricky),
            key("X-Api-Key"),
            key("has space.dot"),
            string_array(&["1".into(), tricky.into()]),
            inline_table(&[("K".into(), tricky.into()), ("a b".into(), "v".into())]),
        );
        let value: toml::Table = toml::from_str(&toml_text).unwrap();
        assert_eq!(value["x"].as_str(), Some(tricky));
        assert_eq!(value["t"]["X-Api-Key"].as_integer(), Some(1));
        assert_eq!(value["t"]["has space.dot"].as_integer(), Some(2));
        assert_eq!(value["t"]["y"][1].as_str(), Some(tricky));
        assert_eq!(value["t"]["z"]["K"].as_str(), Some(tricky));
        assert_eq!(value["t"]["z"]["a b"].as_str(), Some("v"));
        assert_eq!(key("plain_key-1"), "plain_key-1");
        assert_eq!(comment_text("a\nb"), "a b");
    }
}
