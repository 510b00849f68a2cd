//! `${VAR}` expansion in header values and literal environment values.

/// A `${VAR}` reference that could not be expanded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExpandError {
    #[error(
        "environment variable `{0}` is referenced as ${{{0}}} but is not set; export it before starting Portico"
    )]
    Missing(String),
    #[error("unterminated `${{` in `{0}`; write `${{NAME}}`")]
    Unterminated(String),
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
