//! `[registry]`: the registry's URL, checked as `portico search` will use it. Unknown keys:
//! `unknown_keys`, from the model.

use toml::Spanned;
use toml::de::DeValue;

use super::{Checker, Entry};

impl Checker<'_> {
    pub(super) fn registry_section(&mut self, value: &Spanned<DeValue<'_>>) {
        let Some(table) = self.expect_table(value, "[registry]") else {
            return;
        };
        for entry in table.iter() {
            let (key, value): Entry = entry;
            match key.get_ref().as_ref() {
                "url" => {
                    if let Some(url) = self.expect_string(value, "[registry] url")
                        && let Some(problem) = registry_url_problem(url)
                    {
                        self.report(
                            value.span(),
                            format!("[registry] url `{url}` {problem}"),
                            Some("the registry's base URL, e.g. \"https://registry.modelcontextprotocol.io\" (the default); its API is under /v0.1/".into()),
                        );
                    }
                }
                "allow_private_network" => {
                    self.expect_bool(value, "[registry] allow_private_network");
                }
                _ => {}
            }
        }
    }
}

/// What is wrong with a `[registry] url`, if anything: an http(s) URL with a host, and nothing a
/// base URL cannot have (a query, a fragment, credentials).
pub(crate) fn registry_url_problem(url: &str) -> Option<&'static str> {
    match url::Url::parse(url) {
        Ok(parsed) if !matches!(parsed.scheme(), "http" | "https") || !parsed.has_host() => {
            Some("is not an http(s) URL with a host")
        }
        Ok(parsed) if parsed.query().is_some() || parsed.fragment().is_some() => {
            Some("has a query or fragment; give the registry's base URL")
        }
        Ok(parsed) if !parsed.username().is_empty() || parsed.password().is_some() => {
            Some("holds a user name or password")
        }
        Ok(_) => None,
        Err(_) => Some("is not a URL"),
    }
}
