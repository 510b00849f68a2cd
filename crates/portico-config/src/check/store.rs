//! `[store]`: the PostgreSQL URL, the pool size, the replica name and count, checked as the binary
//! will use them. Unknown keys: `unknown_keys`, from the model.

use toml::Spanned;
use toml::de::DeValue;

use super::{Checker, Entry};
use crate::model::{MAX_STORE_POOL_SIZE, replica_name_problem};

impl Checker<'_> {
    pub(super) fn store_section(&mut self, value: &Spanned<DeValue<'_>>) {
        let Some(table) = self.expect_table(value, "[store]") else {
            return;
        };
        for entry in table.iter() {
            let (key, value): Entry = entry;
            match key.get_ref().as_ref() {
                "url" => {
                    if let Some(url) = self.expect_string(value, "[store] url")
                        && let Some(problem) = store_url_problem(url)
                    {
                        self.report(
                            value.span(),
                            format!("[store] url {problem}"),
                            Some("postgres://USER:PASSWORD@HOST:PORT/DATABASE, with the password in the environment: postgres://portico:${PORTICO_DB_PASSWORD}@db:5432/portico".into()),
                        );
                    }
                }
                "pool_size" => self.integer_in(
                    value,
                    "[store] pool_size",
                    1..=MAX_STORE_POOL_SIZE as u64,
                    "connections each replica keeps; the default is 8",
                ),
                "replica" => {
                    if let Some(name) = self.expect_string(value, "[store] replica")
                        && !name.contains("${")
                        && let Some(problem) = replica_name_problem(name)
                    {
                        self.report(
                            value.span(),
                            format!("[store] replica `{name}` {problem}"),
                            Some("a short name such as \"gw-1\"; leave it out for the host name and process id".into()),
                        );
                    }
                }
                "replicas" => self.integer_in(
                    value,
                    "[store] replicas",
                    1..=1024,
                    "how many replicas share the rate limits; the default is 1",
                ),
                _ => {}
            }
        }
    }
}

/// What is wrong with a `[store] url`, if anything: it must be a postgres:// or postgresql:// URL.
/// The message never repeats the URL, which may hold a password. A value with `${VAR}` in it is
/// checked when it is expanded, at start.
pub(crate) fn store_url_problem(url: &str) -> Option<&'static str> {
    if url.contains("${") {
        return None;
    }
    let Some((scheme, rest)) = url.split_once("://") else {
        return Some("is not a URL (no scheme://)");
    };
    if !matches!(scheme, "postgres" | "postgresql") {
        return Some(
            "is not a postgres:// URL (only PostgreSQL can be shared; leave url out for the embedded SQLite store)",
        );
    }
    if rest.is_empty() {
        return Some("names no host");
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_urls_must_be_postgres_and_are_never_echoed() {
        assert_eq!(store_url_problem("postgres://u:p@db/portico"), None);
        assert_eq!(store_url_problem("postgresql://db/portico"), None);
        assert_eq!(store_url_problem("postgres://u:${PW}@db/portico"), None);
        assert!(store_url_problem("mysql://u:secret@db").is_some_and(|p| !p.contains("secret")));
        assert_eq!(
            store_url_problem("db:5432"),
            Some("is not a URL (no scheme://)")
        );
        assert_eq!(store_url_problem("postgres://"), Some("names no host"));
    }
}
