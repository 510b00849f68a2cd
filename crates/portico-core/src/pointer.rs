//! JSON pointers (RFC 6901) into a call's arguments: `/branch`, `/options/force`, `/paths/0`.
//!
//! One parser, so that `config check` refuses exactly the pointers the pipeline could not follow.
//! A pointer here always names something inside the arguments object: the empty pointer (the whole
//! document) is refused, since the arguments are an object and never a value a policy compares.

use serde_json::Value;

use crate::JsonObject;

/// A parsed pointer: its tokens, unescaped (`~1` is `/`, `~0` is `~`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonPointer {
    text: String,
    tokens: Vec<String>,
}

/// Why a pointer cannot be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PointerError {
    #[error("JSON pointer is empty; it must name an argument, e.g. \"/branch\"")]
    Empty,
    #[error(
        "JSON pointer `{0}` does not start with `/`; write it like \"/branch\" or \"/options/force\""
    )]
    NoLeadingSlash(String),
    #[error(
        "JSON pointer `{0}` has a `~` not followed by 0 or 1; write `~0` for `~` and `~1` for `/`"
    )]
    BadEscape(String),
}

impl JsonPointer {
    pub fn parse(text: &str) -> Result<JsonPointer, PointerError> {
        if text.is_empty() {
            return Err(PointerError::Empty);
        }
        let Some(rest) = text.strip_prefix('/') else {
            return Err(PointerError::NoLeadingSlash(text.to_string()));
        };
        let tokens = rest
            .split('/')
            .map(|token| unescape(token).ok_or_else(|| PointerError::BadEscape(text.to_string())))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(JsonPointer {
            text: text.to_string(),
            tokens,
        })
    }

    /// The pointer as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The value the pointer names inside `object`, if there is one. An array is indexed by a
    /// decimal token without leading zeros; `-` (past the end) names nothing.
    pub fn get<'v>(&self, object: &'v JsonObject) -> Option<&'v Value> {
        let (first, rest) = self.tokens.split_first()?;
        let mut value = object.get(first)?;
        for token in rest {
            value = match value {
                Value::Object(map) => map.get(token)?,
                Value::Array(items) => items.get(array_index(token)?)?,
                _ => return None,
            };
        }
        Some(value)
    }
}

impl std::fmt::Display for JsonPointer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

fn unescape(token: &str) -> Option<String> {
    if !token.contains('~') {
        return Some(token.to_string());
    }
    let mut out = String::with_capacity(token.len());
    let mut chars = token.chars();
    while let Some(c) = chars.next() {
        if c != '~' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('0') => out.push('~'),
            Some('1') => out.push('/'),
            _ => return None,
        }
    }
    Some(out)
}

fn array_index(token: &str) -> Option<usize> {
    let digits = token.bytes().all(|b| b.is_ascii_digit());
    if token.is_empty() || !digits || (token.len() > 1 && token.starts_with('0')) {
        return None;
    }
    token.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(value: Value) -> JsonObject {
        value.as_object().cloned().unwrap()
    }

    #[test]
    fn pointers_name_values_inside_the_arguments() {
        let arguments = object(json!({
            "branch": "main",
            "options": {"force": true, "a/b": 1, "m~n": 2},
            "paths": ["x", "y"],
            "": "empty key",
        }));
        let get = |text: &str| JsonPointer::parse(text).unwrap().get(&arguments).cloned();
        assert_eq!(get("/branch"), Some(json!("main")));
        assert_eq!(get("/options/force"), Some(json!(true)));
        assert_eq!(get("/options/a~1b"), Some(json!(1)));
        assert_eq!(get("/options/m~0n"), Some(json!(2)));
        assert_eq!(get("/paths/1"), Some(json!("y")));
        assert_eq!(get("/"), Some(json!("empty key")));
        // Missing keys, indexes out of range or badly written, and paths through scalars name nothing.
        assert_eq!(get("/missing"), None);
        assert_eq!(get("/paths/2"), None);
        assert_eq!(get("/paths/01"), None);
        assert_eq!(get("/paths/-"), None);
        assert_eq!(get("/paths/+1"), None);
        assert_eq!(get("/branch/x"), None);
        assert_eq!(JsonPointer::parse("/a~1b").unwrap().as_str(), "/a~1b");
    }

    #[test]
    fn malformed_pointers_are_refused_saying_why() {
        assert_eq!(JsonPointer::parse(""), Err(PointerError::Empty));
        assert_eq!(
            JsonPointer::parse("branch"),
            Err(PointerError::NoLeadingSlash("branch".into()))
        );
        for bad in ["/a~", "/a~2", "/x/~b"] {
            assert_eq!(
                JsonPointer::parse(bad),
                Err(PointerError::BadEscape(bad.into())),
                "{bad}"
            );
        }
    }
}
