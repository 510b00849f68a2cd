//! `[mcp_servers.oauth]`: what a server's OAuth client settings must be, each with its position.

use toml::Spanned;
use toml::de::DeValue;

use super::{Checker, Entry};

impl Checker<'_> {
    /// `transport_kind`: the server's transport `type`, when it has a readable one.
    pub(super) fn upstream_oauth(
        &mut self,
        value: &Spanned<DeValue<'_>>,
        transport_kind: Option<&str>,
    ) {
        let Some(table) = self.expect_table(value, "mcp_servers.oauth") else {
            return;
        };
        if transport_kind == Some("stdio") {
            self.report(
                value.span(),
                "[mcp_servers.oauth] is for servers reached over HTTP; this one is a stdio server",
                Some("remove the table, or give the server an http or sse transport".into()),
            );
        }
        let mut client_id = false;
        let mut secret_span = None;
        for entry in table.iter() {
            let (key, value): Entry = entry;
            match key.get_ref().as_ref() {
                "client_id" => {
                    if let Some(id) = self.expect_string(value, "oauth.client_id") {
                        client_id = true;
                        if id.trim().is_empty() {
                            self.report(
                                value.span(),
                                "oauth.client_id is empty",
                                Some("give the client id your authorization server registered, or remove the key to register dynamically".into()),
                            );
                        }
                    }
                }
                "client_secret_env" => {
                    if let Some(name) = self.expect_string(value, "oauth.client_secret_env") {
                        secret_span = Some(value.span());
                        if !super::is_env_name(name) {
                            self.report(
                                value.span(),
                                format!("`{name}` is not a valid environment variable name"),
                                Some("name the variable holding the secret (letters, digits and _), not the secret itself".into()),
                            );
                        }
                    }
                }
                "scopes" => {
                    for (scope, span) in self.expect_string_array(value, "oauth.scopes") {
                        if scope.is_empty() || scope.chars().any(|c| c.is_whitespace() || c == '"' || c == '\\') {
                            self.report(
                                span,
                                format!("`{scope}` is not an OAuth scope (RFC 6749: no spaces, quotes or backslashes)"),
                                Some("give one scope per list item, e.g. scopes = [\"read\", \"write\"]".into()),
                            );
                        }
                    }
                }
                "client_metadata_url" => {
                    if let Some(url) = self.expect_string(value, "oauth.client_metadata_url") {
                        let usable = url::Url::parse(url)
                            .is_ok_and(|u| u.scheme() == "https" && u.path() != "/" && !u.path().is_empty());
                        if !usable {
                            self.report(
                                value.span(),
                                format!("oauth.client_metadata_url `{url}` is not an https URL with a path"),
                                Some("a Client ID Metadata Document is served over https at a path, e.g. https://example.com/portico-client.json".into()),
                            );
                        }
                    }
                }
                "redirect_port" => self.integer_in(
                    value,
                    "oauth.redirect_port",
                    1..=65535,
                    "the loopback port the authorization server redirects to; leave it out for any free port",
                ),
                "client_name" => {
                    self.expect_string(value, "oauth.client_name");
                }
                "open_browser" => self.expect_bool(value, "oauth.open_browser"),
                // Unknown keys: `unknown_keys`, from the model.
                _ => {}
            }
        }
        if let Some(span) = secret_span
            && !client_id
        {
            self.report(
                span,
                "oauth.client_secret_env is set without oauth.client_id",
                Some("a secret belongs to a pre-registered client: add its client_id".into()),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    fn rendered(text: &str) -> Vec<String> {
        crate::check(text).iter().map(ToString::to_string).collect()
    }

    #[test]
    fn each_bad_oauth_setting_is_named_with_its_position() {
        let problems = rendered(
            r#"[[mcp_servers]]
name = "linear"
[mcp_servers.transport]
type = "http"
url = "https://mcp.example/mcp"
[mcp_servers.oauth]
client_secret_env = "LINEAR_SECRET"
scopes = ["a b"]
client_metadata_url = "http://example.com/"
open_browser = true
redirect_port = 70000

[[mcp_servers]]
name = "local"
[mcp_servers.transport]
type = "stdio"
command = "ls"
[mcp_servers.oauth]
scopes = ["a"]
"#,
        );
        assert_eq!(
            problems,
            [
                "7:21: oauth.client_secret_env is set without oauth.client_id (hint: a secret belongs to a pre-registered client: add its client_id)",
                "8:11: `a b` is not an OAuth scope (RFC 6749: no spaces, quotes or backslashes) (hint: give one scope per list item, e.g. scopes = [\"read\", \"write\"])",
                "9:23: oauth.client_metadata_url `http://example.com/` is not an https URL with a path (hint: a Client ID Metadata Document is served over https at a path, e.g. https://example.com/portico-client.json)",
                "11:17: oauth.redirect_port must be a whole number from 1 to 65535, found 70000 (hint: the loopback port the authorization server redirects to; leave it out for any free port)",
                "18:1: [mcp_servers.oauth] is for servers reached over HTTP; this one is a stdio server (hint: remove the table, or give the server an http or sse transport)",
            ]
        );
    }

    #[test]
    fn a_complete_oauth_table_passes() {
        let problems = rendered(
            r#"[[mcp_servers]]
name = "linear"
[mcp_servers.transport]
type = "http"
url = "https://mcp.example/mcp"
[mcp_servers.oauth]
client_id = "portico"
client_secret_env = "LINEAR_SECRET"
scopes = ["read", "write"]
client_metadata_url = "https://example.com/portico.json"
redirect_port = 33418
client_name = "Portico at Acme"
open_browser = false
"#,
        );
        assert!(problems.is_empty(), "{problems:?}");
    }
}
