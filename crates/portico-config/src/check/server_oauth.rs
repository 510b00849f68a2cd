//! `[server.oauth]`: the issuer, the audience, the scope map and the token rules, checked as the
//! door will use them. Unknown keys: `unknown_keys`, from the model.

use std::ops::Range;

use toml::Spanned;
use toml::de::DeValue;

use super::{Checker, Entry};

impl Checker<'_> {
    /// Checks `[server.oauth]`; says whether it is there (a door with it takes tokens).
    pub(super) fn server_oauth(&mut self, value: &Spanned<DeValue<'_>>) -> bool {
        let Some(table) = self.expect_table(value, "[server.oauth]") else {
            return false;
        };
        let (mut issuer, mut audience, mut scopes) = (false, false, false);
        for entry in table.iter() {
            let (key, value): Entry = entry;
            match key.get_ref().as_ref() {
                "issuer" => {
                    issuer = true;
                    self.oauth_url(value, "[server.oauth] issuer");
                }
                "jwks_uri" => self.oauth_url(value, "[server.oauth] jwks_uri"),
                "audience" => {
                    audience = true;
                    if let Some(given) = self.expect_string(value, "[server.oauth] audience")
                        && let Some(problem) = crate::oauth_audience_problem(given)
                    {
                        self.report(
                            value.span(),
                            format!("[server.oauth] audience {problem}"),
                            Some("write the URL clients reach this door's /mcp by, e.g. \"https://portico.example/mcp\": tokens must name it in `aud`".into()),
                        );
                    }
                }
                "scopes" => {
                    scopes = true;
                    self.oauth_scopes(value);
                }
                "principal_claim" => {
                    if let Some(claim) = self.expect_string(value, "[server.oauth] principal_claim")
                        && claim.trim().is_empty()
                    {
                        self.report(
                            value.span(),
                            "[server.oauth] principal_claim is empty",
                            Some("leave it out for \"sub\", or name the claim that identifies the caller, e.g. \"client_id\"".into()),
                        );
                    }
                }
                "algorithms" => self.oauth_algorithms(value),
                "leeway_secs" => self.integer_in(
                    value,
                    "[server.oauth] leeway_secs",
                    0..=crate::MAX_OAUTH_LEEWAY_SECS,
                    "clock skew allowed on exp and nbf; the default is 60",
                ),
                "jwks_max_age_secs" => self.integer_in(
                    value,
                    "[server.oauth] jwks_max_age_secs",
                    1..=86_400,
                    "the default is 600 (10 minutes)",
                ),
                "jwks_min_refetch_secs" => self.integer_in(
                    value,
                    "[server.oauth] jwks_min_refetch_secs",
                    1..=86_400,
                    "the default is 30",
                ),
                "allow_private_network" => {
                    self.expect_bool(value, "[server.oauth] allow_private_network")
                }
                // Unknown keys: `unknown_keys`, from the model.
                _ => {}
            }
        }
        for (given, key, example) in [
            (issuer, "issuer", "issuer = \"https://idp.example\""),
            (
                audience,
                "audience",
                "audience = \"https://portico.example/mcp\"",
            ),
            (scopes, "scopes", "scopes = { \"mcp:tools\" = [\"*\"] }"),
        ] {
            if !given {
                self.report(
                    value.span(),
                    format!("[server.oauth] has no `{key}`"),
                    Some(format!("add {example}")),
                );
            }
        }
        true
    }

    fn oauth_url(&mut self, value: &Spanned<DeValue<'_>>, what: &str) {
        if let Some(given) = self.expect_string(value, what)
            && let Some(problem) = crate::oauth_fetch_url_problem(given)
        {
            self.report(
                value.span(),
                format!("{what} {problem}"),
                Some("write the authorization server's https URL exactly as its metadata names it, e.g. \"https://idp.example\"".into()),
            );
        }
    }

    fn oauth_scopes(&mut self, value: &Spanned<DeValue<'_>>) {
        let Some(table) = self.expect_table(value, "[server.oauth] scopes") else {
            return;
        };
        if table.is_empty() {
            self.report(
                value.span(),
                "[server.oauth] scopes is empty, so no token could use any tool",
                Some("map each scope to the tools it grants, e.g. scopes = { \"mcp:tools\" = [\"*\"] }".into()),
            );
        }
        for (scope, globs) in table.iter() {
            let name: &str = scope.get_ref();
            if !crate::is_scope_token(name) {
                self.report(
                    scope.span(),
                    format!("scope `{name}` is not a scope name"),
                    Some("1 to 128 printable ASCII characters without spaces, `\"` or `\\`, e.g. \"mcp:tools\"".into()),
                );
            }
            let what = format!("[server.oauth] scopes `{name}`");
            let patterns = self.expect_string_array(globs, &what);
            if patterns.is_empty() && matches!(globs.get_ref(), DeValue::Array(_)) {
                self.report(
                    globs.span(),
                    format!("{what} is empty, so the scope grants no tool"),
                    Some("list the tool globs it grants, e.g. [\"mcp_github_*\"], or leave the scope out".into()),
                );
            }
            for (pattern, span) in patterns {
                self.glob(
                    &pattern,
                    span,
                    "tool pattern",
                    "e.g. \"mcp_github_*\" or \"*\"",
                );
            }
        }
    }

    fn oauth_algorithms(&mut self, value: &Spanned<DeValue<'_>>) {
        let given = self.expect_string_array(value, "[server.oauth] algorithms");
        if given.is_empty() && matches!(value.get_ref(), DeValue::Array(_)) {
            self.report(
                value.span(),
                "[server.oauth] algorithms is empty, so no token could be verified",
                Some("leave it out for every asymmetric algorithm, or list some, e.g. [\"RS256\", \"ES256\"]".into()),
            );
        }
        for (algorithm, span) in given {
            self.oauth_algorithm(&algorithm, span);
        }
    }

    fn oauth_algorithm(&mut self, algorithm: &str, span: Range<usize>) {
        if crate::SERVER_OAUTH_ALGORITHMS.contains(&algorithm) {
            return;
        }
        let why = if algorithm.eq_ignore_ascii_case("none") {
            "an unsigned token proves nothing".to_string()
        } else if algorithm.to_ascii_uppercase().starts_with("HS") {
            "HMAC needs a shared secret, and the issuer's keys are public: anyone could sign with them"
                .to_string()
        } else {
            "it is not a signature algorithm Portico verifies".to_string()
        };
        self.report(
            span,
            format!("[server.oauth] algorithm `{algorithm}` is not accepted: {why}"),
            Some(format!(
                "use some of {}",
                crate::SERVER_OAUTH_ALGORITHMS.join(", ")
            )),
        );
    }
}

#[cfg(test)]
mod tests {
    use crate::check;

    fn rendered(text: &str) -> Vec<String> {
        check(text).iter().map(ToString::to_string).collect()
    }

    #[test]
    fn a_valid_section_loads_with_its_defaults() {
        let config = crate::parse(
            "<test>",
            r#"
[server]
listen = "0.0.0.0:4200"
[server.oauth]
issuer = "https://idp.example"
audience = "https://portico.example/mcp"
scopes = { "mcp:tools" = ["*"], "mcp:github" = ["mcp_github_*"] }
"#,
        )
        .unwrap();
        let oauth = config.server.oauth.unwrap();
        assert_eq!(oauth.issuer, "https://idp.example");
        assert_eq!(oauth.scopes["mcp:github"], ["mcp_github_*"]);
        assert_eq!(oauth.principal_claim, "sub");
        assert_eq!(oauth.algorithms, crate::SERVER_OAUTH_ALGORITHMS);
        assert_eq!(oauth.leeway_secs, 60);
        assert_eq!(oauth.jwks_uri, None);
        assert!(!oauth.allow_private_network);
        assert_eq!(oauth.jwks_max_age_secs, 600);
        assert_eq!(oauth.jwks_min_refetch_secs, 30);
    }

    #[test]
    fn every_problem_is_reported_with_its_position() {
        let problems = rendered(
            r#"[server]
listen = "0.0.0.0:4200"
[server.oauth]
issuer = "http://idp.example"
audience = "api://portico"
scopes = { "a b" = ["time_[now"], "ok" = [] }
algorithms = ["HS256", "none", "RS256", "XX1"]
leeway_secs = 301
jwks_uri = "https://idp.example/keys?x=1"
principal_claim = " "
audiences = "typo"
"#,
        );
        assert_eq!(
            problems,
            [
                "4:10: [server.oauth] issuer `http://idp.example` is plain http: tokens' keys must come over https (http only to a loopback address) (hint: write the authorization server's https URL exactly as its metadata names it, e.g. \"https://idp.example\")",
                "5:12: [server.oauth] audience `api://portico` is not an http(s) URL with a host (hint: write the URL clients reach this door's /mcp by, e.g. \"https://portico.example/mcp\": tokens must name it in `aud`)",
                "6:12: scope `a b` is not a scope name (hint: 1 to 128 printable ASCII characters without spaces, `\"` or `\\`, e.g. \"mcp:tools\")",
                "6:21: tool pattern `time_[now` is not a valid glob: unclosed character class; missing ']' (hint: use names with `*`, `?` and `[abc]`, e.g. \"mcp_github_*\" or \"*\")",
                "6:42: [server.oauth] scopes `ok` is empty, so the scope grants no tool (hint: list the tool globs it grants, e.g. [\"mcp_github_*\"], or leave the scope out)",
                "7:15: [server.oauth] algorithm `HS256` is not accepted: HMAC needs a shared secret, and the issuer's keys are public: anyone could sign with them (hint: use some of RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384, EdDSA)",
                "7:24: [server.oauth] algorithm `none` is not accepted: an unsigned token proves nothing (hint: use some of RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384, EdDSA)",
                "7:41: [server.oauth] algorithm `XX1` is not accepted: it is not a signature algorithm Portico verifies (hint: use some of RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384, EdDSA)",
                "8:15: [server.oauth] leeway_secs must be a whole number from 0 to 300, found 301 (hint: clock skew allowed on exp and nbf; the default is 60)",
                "9:12: [server.oauth] jwks_uri `https://idp.example/keys?x=1` has a query or fragment (hint: write the authorization server's https URL exactly as its metadata names it, e.g. \"https://idp.example\")",
                "10:19: [server.oauth] principal_claim is empty (hint: leave it out for \"sub\", or name the claim that identifies the caller, e.g. \"client_id\")",
                "11:1: unknown key `audiences` in [server.oauth] (hint: did you mean `audience`? known keys: issuer, audience, scopes, principal_claim, algorithms, leeway_secs, jwks_uri, allow_private_network, jwks_max_age_secs, jwks_min_refetch_secs)",
            ]
        );
    }

    #[test]
    fn missing_keys_are_named_and_oauth_lets_the_door_off_loopback() {
        let problems = rendered(
            r#"[server]
listen = "0.0.0.0:4200"
[server.oauth]
issuer = "https://idp.example"
"#,
        );
        assert_eq!(
            problems,
            [
                "3:1: [server.oauth] has no `audience` (hint: add audience = \"https://portico.example/mcp\")",
                "3:1: [server.oauth] has no `scopes` (hint: add scopes = { \"mcp:tools\" = [\"*\"] })",
            ]
        );
        // Without [server.oauth] (or a token) the same listen address is refused.
        let problems = rendered("[server]\nlisten = \"0.0.0.0:4200\"\n");
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].contains("no token is set"), "{problems:?}");
    }
}
