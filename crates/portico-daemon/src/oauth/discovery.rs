//! Finding the issuer's JWKS: its RFC 8414 metadata (the path-insertion rule for issuers with a
//! path), then OpenID Connect's, as the MCP authorization spec orders them. A document is used only
//! when its `issuer` is the configured issuer, character for character (RFC 8414 §3.3).

use portico_net::SafeClient;

use super::fetch::{FetchError, json_object};

/// Largest metadata document read.
pub(crate) const MAX_METADATA_BYTES: usize = 64 * 1024;

/// The metadata URLs to try for `issuer`, in order. With a path (`https://idp.example/tenant`):
/// OAuth with the path inserted, OpenID with it inserted, OpenID appended. Without one: OAuth's,
/// then OpenID's, at the root. A trailing slash on the path is not part of the inserted path.
pub(crate) fn metadata_urls(issuer: &str) -> Vec<String> {
    let Ok(url) = url::Url::parse(issuer) else {
        return Vec::new();
    };
    let origin = url.origin().ascii_serialization();
    let path = url.path().trim_end_matches('/');
    if path.is_empty() {
        return vec![
            format!("{origin}/.well-known/oauth-authorization-server"),
            format!("{origin}/.well-known/openid-configuration"),
        ];
    }
    vec![
        format!("{origin}/.well-known/oauth-authorization-server{path}"),
        format!("{origin}/.well-known/openid-configuration{path}"),
        format!("{origin}{path}/.well-known/openid-configuration"),
    ]
}

/// Why no JWKS URL was found.
#[derive(Debug, thiserror::Error)]
pub(crate) enum DiscoveryError {
    #[error(
        "{url} names the issuer `{found}`, not the configured `{expected}`: set [server.oauth] issuer to exactly what the authorization server's metadata says, or this is not its metadata"
    )]
    IssuerMismatch {
        url: String,
        found: String,
        expected: String,
    },
    #[error("{url} has no usable `jwks_uri`: {problem}")]
    NoJwksUri { url: String, problem: String },
    #[error(
        "no authorization server metadata for `{issuer}` ({tried}); set [server.oauth] jwks_uri to skip discovery"
    )]
    NotFound { issuer: String, tried: String },
}

/// The JWKS URL the issuer's metadata gives.
pub(crate) async fn jwks_uri(client: &SafeClient, issuer: &str) -> Result<String, DiscoveryError> {
    let mut tried = Vec::new();
    for url in metadata_urls(issuer) {
        let document = match json_object(client, &url, MAX_METADATA_BYTES).await {
            Ok(document) => document,
            Err(error) => {
                let said = match &error {
                    FetchError::Status { status, .. } => format!("{url}: HTTP {status}"),
                    other => other.to_string(),
                };
                tried.push(said);
                continue;
            }
        };
        let found = document.get("issuer").and_then(|v| v.as_str());
        if found != Some(issuer) {
            return Err(DiscoveryError::IssuerMismatch {
                url,
                found: found.unwrap_or("(none)").to_string(),
                expected: issuer.to_string(),
            });
        }
        let Some(jwks_uri) = document.get("jwks_uri").and_then(|v| v.as_str()) else {
            return Err(DiscoveryError::NoJwksUri {
                url,
                problem: "the document has none".into(),
            });
        };
        if let Some(problem) = portico_config::oauth_fetch_url_problem(jwks_uri) {
            return Err(DiscoveryError::NoJwksUri { url, problem });
        }
        return Ok(jwks_uri.to_string());
    }
    Err(DiscoveryError::NotFound {
        issuer: issuer.to_string(),
        tried: tried.join("; "),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issuers_with_a_path_insert_it_after_the_well_known_prefix() {
        assert_eq!(
            metadata_urls("https://idp.example"),
            [
                "https://idp.example/.well-known/oauth-authorization-server",
                "https://idp.example/.well-known/openid-configuration",
            ]
        );
        assert_eq!(
            metadata_urls("https://idp.example/"),
            metadata_urls("https://idp.example")
        );
        assert_eq!(
            metadata_urls("https://idp.example:8443/tenant/one/"),
            [
                "https://idp.example:8443/.well-known/oauth-authorization-server/tenant/one",
                "https://idp.example:8443/.well-known/openid-configuration/tenant/one",
                "https://idp.example:8443/tenant/one/.well-known/openid-configuration",
            ]
        );
        assert!(metadata_urls("not a url").is_empty());
    }
}
