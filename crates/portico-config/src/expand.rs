//! `${VAR}` expansion in header values and literal environment values.

/// A `${VAR}` reference that could not be expanded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExpandError {
    #[error(
        "`${{{0}}}` is set neither in Portico's environment nor in its secret store; run `portico secret set {0}` (or export {0} before starting Portico)"
    )]
    Missing(String),
    #[error("unterminated `${{` in `{0}`; write `${{NAME}}`")]
    Unterminated(String),
}

/// Whether `name` can be an environment variable's name, as `${NAME}` and the secret store take
/// them: a letter or `_`, then letters, digits and `_`.
pub fn is_variable_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Replaces each `${NAME}` in `input` with `lookup(NAME)`. A `$` not followed by `{` is kept as is.
pub fn expand_vars(
    input: &str,
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<String, ExpandError> {
    let mut out = String::with_capacity(input.len());
    let mut rest = input;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            return Err(ExpandError::Unterminated(input.to_string()));
        };
        let name = &after[..end];
        let value = lookup(name).ok_or_else(|| ExpandError::Missing(name.to_string()))?;
        out.push_str(&value);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        (name == "TOKEN").then(|| "s3cret".to_string())
    }

    #[test]
    fn variable_names_are_those_a_shell_exports() {
        for good in ["A", "_", "GITHUB_TOKEN", "a1_b2"] {
            assert!(is_variable_name(good), "{good}");
        }
        for bad in ["", "1A", "A-B", "A B", "A=B", "É", "${A}"] {
            assert!(!is_variable_name(bad), "{bad}");
        }
    }

    #[test]
    fn expands_and_reports() {
        assert_eq!(
            expand_vars("Bearer ${TOKEN}", env).unwrap(),
            "Bearer s3cret"
        );
        assert_eq!(
            expand_vars("a$b ${TOKEN}${TOKEN}", env).unwrap(),
            "a$b s3crets3cret"
        );
        assert_eq!(
            expand_vars("${NOPE}", env),
            Err(ExpandError::Missing("NOPE".into()))
        );
        assert!(matches!(
            expand_vars("${TOKEN", env),
            Err(ExpandError::Unterminated(_))
        ));
    }
}
