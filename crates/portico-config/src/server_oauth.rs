//! `[server.oauth]`: the HTTP door as an OAuth 2.1 protected resource. Clients bring JWT access
//! tokens an authorization server (the `issuer`) signed for this door (the `audience`); each token's
//! scopes map to the tool globs it may list and call.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::Deserialize;

/// The signature algorithms `algorithms` may name: asymmetric only. `none` and the HMAC family
/// (`HS256`…) are never accepted: a JWKS holds public keys, and an HMAC "verified" with a public key
/// is forged by anyone who can read it.
pub const SERVER_OAUTH_ALGORITHMS: [&str; 9] = [
    "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "EdDSA",
];

/// Most seconds of `leeway_secs`: clock skew, not a grace period.
pub const MAX_OAUTH_LEEWAY_SECS: u64 = 300;

/// `[server.oauth]`. With it, the door also takes JWT access tokens; `[server] token` and
/// `[[server.clients]]` keep working beside it.
#[derive(Debug, Clone, Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ServerOAuthConfig {
    /// The authorization server's issuer identifier, exactly as its metadata and its tokens' `iss`
    /// say it (a trailing slash counts). Its keys are found through its RFC 8414 metadata
    /// (`/.well-known/oauth-authorization-server`, then OpenID's `openid-configuration`).
    pub issuer: String,
    /// This door's resource identifier: tokens must name it in `aud`, and it is the `resource` of the
    /// protected resource metadata, whose URL is derived from it (RFC 9728). Write the URL clients
    /// reach `/mcp` by, e.g. "https://portico.example/mcp".
    pub audience: String,
    /// Scope → the tool globs a token with that scope may list and call; a token's tools are the union
    /// over its scopes. A token with none of these scopes is refused (403 `insufficient_scope`).
    pub scopes: BTreeMap<String, Vec<String>>,
    /// The claim naming the caller: a token is the principal `client:{value}`. Default `sub`.
    #[serde(default = "default_principal_claim")]
    pub principal_claim: String,
    /// The signature algorithms accepted (default: every asymmetric one Portico knows).
    #[serde(default = "default_algorithms")]
    pub algorithms: Vec<String>,
    /// Seconds of clock skew allowed on `exp` and `nbf` (default 60, at most 300).
    #[serde(default = "default_leeway_secs")]
    pub leeway_secs: u64,
    /// The issuer's JWKS URL, skipping metadata discovery.
    #[serde(default)]
    pub jwks_uri: Option<String>,
    /// Let the issuer's metadata and keys be fetched from loopback and private addresses (an
    /// in-house or test authorization server). Cloud metadata addresses stay refused.
    #[serde(default)]
    pub allow_private_network: bool,
    /// Keys older than this are fetched again before they are used (default 600).
    #[serde(default = "default_jwks_max_age_secs")]
    pub jwks_max_age_secs: u64,
    /// The least time between two fetches of the keys (default 30): a token naming a key not in the
    /// cache makes one fetch, and within this time after it every other unknown key is refused without
    /// asking the issuer again.
    #[serde(default = "default_jwks_min_refetch_secs")]
    pub jwks_min_refetch_secs: u64,
}

fn default_principal_claim() -> String {
    "sub".into()
}

fn default_algorithms() -> Vec<String> {
    SERVER_OAUTH_ALGORITHMS
        .iter()
        .map(|a| a.to_string())
        .collect()
}

fn default_leeway_secs() -> u64 {
    60
}

fn default_jwks_max_age_secs() -> u64 {
    600
}

fn default_jwks_min_refetch_secs() -> u64 {
    30
}

/// Whether `scope` can be a scope name: RFC 6749's scope-token characters (printable ASCII but
/// space, `"` and `\`), so it can be listed in a `WWW-Authenticate` header as it is.
pub fn is_scope_token(scope: &str) -> bool {
    !scope.is_empty()
        && scope.len() <= 128
        && scope
            .bytes()
            .all(|b| matches!(b, 0x21 | 0x23..=0x5b | 0x5d..=0x7e))
}

/// Why an issuer or JWKS URL is not one Portico fetches from, or `None`: an absolute `https` URL, or
/// `http` to a loopback host (a local test server), without query, fragment or credentials.
pub fn oauth_fetch_url_problem(url: &str) -> Option<String> {
    let Ok(parsed) = url::Url::parse(url) else {
        return Some(format!("`{url}` is not an absolute URL"));
    };
    let loopback = match parsed.host() {
        Some(url::Host::Domain(name)) => name.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => return Some(format!("`{url}` has no host")),
    };
    match parsed.scheme() {
        "https" => {}
        "http" if loopback => {}
        "http" => {
            return Some(format!(
                "`{url}` is plain http: tokens' keys must come over https (http only to a loopback address)"
            ));
        }
        other => return Some(format!("`{url}` has scheme `{other}`; use https")),
    }
    if parsed.query().is_some() || parsed.fragment().is_some() {
        return Some(format!("`{url}` has a query or fragment"));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Some(format!("`{url}` has credentials in it"));
    }
    None
}

/// Why `audience` cannot be this door's resource identifier, or `None`: an absolute `http(s)` URL
/// without fragment, query or credentials (RFC 8707; its protected resource metadata URL is derived
/// from it).
pub fn oauth_audience_problem(audience: &str) -> Option<String> {
    let Ok(parsed) = url::Url::parse(audience) else {
        return Some(format!("`{audience}` is not an absolute URL"));
    };
    if !matches!(parsed.scheme(), "http" | "https") || parsed.host().is_none() {
        return Some(format!("`{audience}` is not an http(s) URL with a host"));
    }
    if parsed.query().is_some() || parsed.fragment().is_some() {
        return Some(format!("`{audience}` has a query or fragment"));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Some(format!("`{audience}` has credentials in it"));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scope_tokens_and_urls() {
        for ok in ["mcp:tools", "read", "a/b.c-d_e~!#$%&'()*+,;<=>?@[]^`{|}"] {
            assert!(is_scope_token(ok), "{ok}");
        }
        for bad in ["", "a b", "a\"b", "a\\b", "é", &"a".repeat(129)] {
            assert!(!is_scope_token(bad), "{bad}");
        }
        assert_eq!(oauth_fetch_url_problem("https://idp.example/tenant"), None);
        assert_eq!(oauth_fetch_url_problem("http://127.0.0.1:9000"), None);
        assert_eq!(oauth_fetch_url_problem("http://localhost:9000/x"), None);
        assert_eq!(oauth_fetch_url_problem("http://[::1]:9000"), None);
        for bad in [
            "http://idp.example",
            "idp.example",
            "ftp://idp.example",
            "https://idp.example/?a=b",
            "https://idp.example/#x",
            "https://u:p@idp.example/",
        ] {
            assert!(oauth_fetch_url_problem(bad).is_some(), "{bad}");
        }
        assert_eq!(oauth_audience_problem("https://portico.example/mcp"), None);
        assert_eq!(oauth_audience_problem("http://10.0.0.5:4200/mcp"), None);
        for bad in ["api://portico", "portico", "https://p.example/mcp#x"] {
            assert!(oauth_audience_problem(bad).is_some(), "{bad}");
        }
    }
}
