//! `[[server.clients]]`: names, tokens and scopes, and the door's need for a token off loopback.

use std::collections::HashMap;
use std::ops::Range;

use toml::Spanned;
use toml::de::DeValue;

use super::{Checker, Entry, line_column};

/// What the door is reached by: used to refuse a door off loopback that no token guards.
pub(super) struct DoorTokens<'a> {
    /// `[server] listen`'s value and span, when it is an address.
    pub listen: Option<(std::net::SocketAddr, Range<usize>)>,
    /// `[server] token` as written, when set.
    pub server_token: Option<&'a str>,
    pub clients: Option<&'a Spanned<DeValue<'a>>>,
    /// `[server.oauth]`: a door with it takes (JWT) tokens too.
    pub oauth: Option<&'a Spanned<DeValue<'a>>>,
}

/// A token as the check can compare it: what is written (`${VAR}` unexpanded), and its digest.
struct SeenToken {
    client: String,
    span: Range<usize>,
}

impl Checker<'_> {
    pub(super) fn door_tokens(&mut self, door: DoorTokens<'_>) {
        let mut any_client = false;
        if let Some(clients) = door.clients {
            any_client = self.server_clients(clients, door.server_token);
        }
        let oauth = door.oauth.is_some_and(|oauth| self.server_oauth(oauth));
        if let Some((listen, span)) = door.listen
            && !listen.ip().is_loopback()
            && door.server_token.is_none()
            && !any_client
            && !oauth
        {
            self.report(
                span,
                format!("[server] listen is {listen}, which is not a loopback address, and no token is set: anyone who can reach it could use every tool"),
                Some("set [server] token = \"${PORTICO_TOKEN}\", add [[server.clients]] with tokens (`portico clients add NAME`) or [server.oauth], or listen on 127.0.0.1".into()),
            );
        }
    }

    /// Checks every entry; says whether any was given.
    fn server_clients(&mut self, value: &Spanned<DeValue<'_>>, server_token: Option<&str>) -> bool {
        let entries = self.array_of_tables(value, "server.clients");
        let mut names: HashMap<String, (String, Range<usize>)> = HashMap::new();
        // By digest: a literal token and a `token_sha256` of the same secret are one token.
        let mut tokens: HashMap<[u8; 32], SeenToken> = HashMap::new();
        // `${VAR}` references are compared as written: two clients naming one variable share it.
        let mut references: HashMap<String, SeenToken> = HashMap::new();
        if let Some(token) = server_token {
            let seen = SeenToken {
                client: "[server] token".into(),
                span: 0..0,
            };
            if token.contains("${") {
                references.insert(token.to_string(), seen);
            } else {
                tokens.insert(digest_of(token), seen);
            }
        }
        for (span, table) in &entries {
            let mut name = None;
            let (mut token, mut token_sha256) = (None, None);
            for entry in table.iter() {
                let (key, value): Entry = entry;
                match key.get_ref().as_ref() {
                    "name" => {
                        let Some(given) = self.expect_string(value, "server.clients.name") else {
                            continue;
                        };
                        if !crate::is_client_name(given) {
                            self.report(
                                value.span(),
                                format!("client name `{given}` must be 1 to 64 of `a-z`, `0-9`, `-` and `_`"),
                                Some("the client is the caller `client:{name}` in audit records and [[policies]] callers, e.g. name = \"laptop\"".into()),
                            );
                        } else if let Some(whose) = crate::reserved_client_name(given) {
                            self.report(
                                value.span(),
                                format!("client name `{given}` is taken: `client:{given}` is {whose}"),
                                Some("give this client another name, e.g. name = \"laptop\"; door names (default, stdio, cli, http, api, a2a, mcp) are reserved".into()),
                            );
                        } else {
                            let clash = format!("both would be the caller `client:{given}`");
                            self.distinct(
                                &mut names,
                                given.to_string(),
                                given,
                                value.span(),
                                "client name",
                                &clash,
                            );
                        }
                        name = Some(given.to_string());
                    }
                    "token" => {
                        if let Some(given) = self.expect_string(value, "server.clients.token") {
                            if given.trim().is_empty() {
                                self.report(
                                    value.span(),
                                    "server.clients.token is empty",
                                    Some("use a long random value: `portico clients add NAME` makes one".into()),
                                );
                            } else {
                                token = Some((given.to_string(), value.span()));
                            }
                        }
                    }
                    "token_sha256" => {
                        if let Some(given) =
                            self.expect_string(value, "server.clients.token_sha256")
                        {
                            match crate::parse_sha256_hex(given) {
                                Some(digest) => token_sha256 = Some((digest, value.span())),
                                None => self.report(
                                    value.span(),
                                    format!("server.clients.token_sha256 `{}` is not a SHA-256 digest", preview(given)),
                                    Some("write the 64 hex digits of the token's SHA-256 (`printf %s \"$TOKEN\" | sha256sum`), or let `portico clients add NAME` print it".into()),
                                ),
                            }
                        }
                    }
                    "tools" => {
                        let patterns = self.expect_string_array(value, "server.clients.tools");
                        if patterns.is_empty() && matches!(value.get_ref(), DeValue::Array(_)) {
                            self.report(
                                value.span(),
                                "server.clients.tools is empty, so the client may list and call no tool",
                                Some("leave `tools` out for every tool, or list globs such as \"mcp_github_*\"".into()),
                            );
                        }
                        for (pattern, span) in patterns {
                            self.glob(
                                &pattern,
                                span,
                                "tool pattern",
                                "e.g. \"mcp_github_*\" or \"portico_agent_*\"",
                            );
                        }
                    }
                    // Unknown keys: `unknown_keys`, from the model.
                    _ => {}
                }
            }
            let client = name.clone().unwrap_or_else(|| "(unnamed)".into());
            if name.is_none() {
                self.report(
                    span.clone(),
                    "[[server.clients]] entry has no `name`",
                    Some("add name = \"...\" ([a-z0-9_-])".into()),
                );
            }
            match (token, token_sha256) {
                (Some(_), Some((_, sha_span))) => self.report(
                    sha_span,
                    format!("client `{client}` has both `token` and `token_sha256`"),
                    Some("keep one: token_sha256 keeps the secret out of the file".into()),
                ),
                (None, None) => self.report(
                    span.clone(),
                    format!("client `{client}` has neither `token` nor `token_sha256`, so nothing can identify it"),
                    Some("`portico clients add NAME` prints a new token and its token_sha256".into()),
                ),
                (Some((token, span)), None) => {
                    let seen = SeenToken { client, span };
                    if token.contains("${") {
                        self.same_token(&mut references, token, seen);
                    } else {
                        self.same_token(&mut tokens, digest_of(&token), seen);
                    }
                }
                (None, Some((digest, span))) => {
                    self.same_token(&mut tokens, digest, SeenToken { client, span })
                }
            }
        }
        !entries.is_empty()
    }

    /// Records a client's token, or reports that an earlier client (or `[server] token`) has it.
    fn same_token<K: std::hash::Hash + Eq>(
        &mut self,
        seen: &mut HashMap<K, SeenToken>,
        key: K,
        this: SeenToken,
    ) {
        match seen.get(&key) {
            Some(first) => {
                let first_name = if first.span == (0..0) {
                    first.client.clone()
                } else {
                    let (line, _) = line_column(self.text, first.span.start);
                    format!("client `{}` (line {line})", first.client)
                };
                self.report(
                    this.span,
                    format!("client `{}` has the same token as {first_name}: a request with it could not say which client it is", this.client),
                    Some("give every client a token of its own (`portico clients add NAME`)".into()),
                );
            }
            None => {
                seen.insert(key, this);
            }
        }
    }
}

fn digest_of(token: &str) -> [u8; 32] {
    use sha2::{Digest, Sha256};
    Sha256::digest(token.as_bytes()).into()
}

/// Enough of a malformed digest to find it, not a whole secret someone pasted by mistake.
fn preview(text: &str) -> String {
    let shown: String = text.chars().take(8).collect();
    if shown.len() < text.len() {
        format!("{shown}…")
    } else {
        shown
    }
}

#[cfg(test)]
mod tests {
    use crate::check;

    fn rendered(text: &str) -> Vec<String> {
        check(text).iter().map(|p| p.to_string()).collect()
    }

    #[test]
    fn valid_clients_load_with_their_scopes() {
        let sha = crate::token_sha256_hex("ci-secret");
        let text = format!(
            r#"[server]
listen = "0.0.0.0:4200"

[[server.clients]]
name = "laptop"
token = "${{LAPTOP_TOKEN}}"
tools = ["mcp_github_*", "portico_agent_*"]

[[server.clients]]
name = "ci"
token_sha256 = "{sha}"
"#
        );
        assert_eq!(rendered(&text), Vec::<String>::new());
        let config = crate::parse("test", &text).unwrap();
        let clients = &config.server.clients;
        assert_eq!(clients.len(), 2);
        assert_eq!(clients[0].name, "laptop");
        assert_eq!(clients[0].token.as_deref(), Some("${LAPTOP_TOKEN}"));
        assert_eq!(
            clients[0].tools.as_deref(),
            Some(&["mcp_github_*".to_string(), "portico_agent_*".to_string()][..])
        );
        assert_eq!(clients[1].token_sha256.as_deref(), Some(sha.as_str()));
        assert_eq!(clients[1].tools, None);
    }

    #[test]
    fn clients_are_checked_with_positions() {
        let laptop_sha = crate::token_sha256_hex("laptop-secret");
        let text = format!(
            r#"[server]
token = "shared"

[[server.clients]]
name = "laptop"
token = "laptop-secret"
tools = ["time_[now"]

[[server.clients]]
name = "laptop"
token_sha256 = "{laptop_sha}"

[[server.clients]]
name = "Lap Top"
token = "x"
token_sha256 = "abc"

[[server.clients]]
name = "default"
tools = []

[[server.clients]]
token = "shared"
scope = ["x"]

[[server.clients]]
name = "a"
token = "${{SAME}}"

[[server.clients]]
name = "b"
token = "${{SAME}}"
"#
        );
        let expect = [
            "7:10: tool pattern `time_[now` is not a valid glob: unclosed character class; missing ']' (hint: use names with `*`, `?` and `[abc]`, e.g. \"mcp_github_*\"",
            "10:8: client name `laptop` clashes with `laptop` (line 5): both would be the caller `client:laptop` (hint: give each a distinct name)",
            "11:16: client `laptop` has the same token as client `laptop` (line 6): a request with it could not say which client it is (hint: give every client a token of its own",
            "14:8: client name `Lap Top` must be 1 to 64 of `a-z`, `0-9`, `-` and `_`",
            "16:16: server.clients.token_sha256 `abc` is not a SHA-256 digest (hint: write the 64 hex digits",
            "18:1: client `default` has neither `token` nor `token_sha256`, so nothing can identify it",
            "19:8: client name `default` is taken: `client:default` is the client of [server] token",
            "20:9: server.clients.tools is empty, so the client may list and call no tool",
            "22:1: [[server.clients]] entry has no `name`",
            "23:9: client `(unnamed)` has the same token as [server] token: a request with it could not say which client it is",
            "24:1: unknown key `scope` in [[server.clients]] (hint: known keys: name, token, token_sha256, tools)",
            "32:9: client `b` has the same token as client `a` (line 28)",
        ];
        let rendered = rendered(&text);
        for e in expect {
            assert!(
                rendered.iter().any(|r| r.starts_with(e)),
                "missing {e:?} in {rendered:#?}"
            );
        }
        assert_eq!(rendered.len(), expect.len(), "{rendered:#?}");
        // Both a token and its digest: the digest is named.
        let both = rendered
            .iter()
            .filter(|r| r.contains("has both `token` and `token_sha256`"))
            .count();
        assert_eq!(both, 0, "a malformed digest is reported instead");
        let rendered = self::rendered(&format!(
            "[[server.clients]]\nname = \"x\"\ntoken = \"t\"\ntoken_sha256 = \"{laptop_sha}\"\n"
        ));
        assert_eq!(
            rendered,
            [
                "4:16: client `x` has both `token` and `token_sha256` (hint: keep one: token_sha256 keeps the secret out of the file)"
            ]
        );
    }

    #[test]
    fn a_door_off_loopback_needs_a_token_or_clients() {
        assert_eq!(
            rendered("[server]\nlisten = \"0.0.0.0:4200\"\n"),
            [
                "2:10: [server] listen is 0.0.0.0:4200, which is not a loopback address, and no token is set: anyone who can reach it could use every tool (hint: set [server] token = \"${PORTICO_TOKEN}\", add [[server.clients]] with tokens (`portico clients add NAME`) or [server.oauth], or listen on 127.0.0.1)"
            ]
        );
        assert_eq!(
            rendered("[server]\nlisten = \"0.0.0.0:4200\"\ntoken = \"${T}\"\n"),
            Vec::<String>::new()
        );
        assert_eq!(
            rendered("[server]\nlisten = \"127.0.0.1:4200\"\n"),
            Vec::<String>::new()
        );
    }

    #[test]
    fn door_names_are_reserved_with_their_position() {
        let mut text = String::from("[server]\ntoken = \"shared\"\n");
        for (index, door) in ["stdio", "cli", "http", "api", "a2a", "mcp"]
            .iter()
            .enumerate()
        {
            text.push_str(&format!(
                "\n[[server.clients]]\nname = \"{door}\"\ntoken = \"secret-{index}\"\n"
            ));
        }
        let rendered = rendered(&text);
        assert_eq!(
            rendered[0],
            "5:8: client name `stdio` is taken: `client:stdio` is the caller of `portico mcp` and \
             other stdio doors (hint: give this client another name, e.g. name = \"laptop\"; door \
             names (default, stdio, cli, http, api, a2a, mcp) are reserved)"
        );
        let lines: Vec<&str> = rendered
            .iter()
            .map(|r| r.split(": ").next().unwrap_or(""))
            .collect();
        assert_eq!(lines, ["5:8", "9:8", "13:8", "17:8", "21:8", "25:8"]);
        for (report, door) in rendered
            .iter()
            .zip(["stdio", "cli", "http", "api", "a2a", "mcp"])
        {
            assert!(
                report.contains(&format!(
                    "client name `{door}` is taken: `client:{door}` is "
                )),
                "{report}"
            );
        }
    }
}
