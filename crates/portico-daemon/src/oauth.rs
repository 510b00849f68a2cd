//! `[server.oauth]`: the HTTP door as an OAuth 2.1 protected resource.
//!
//! - It publishes its protected resource metadata (RFC 9728) at `/.well-known/oauth-protected-resource`,
//!   at `/.well-known/oauth-protected-resource/mcp` and at the path derived from the audience: the
//!   audience as `resource`, the issuer as the one authorization server, the configured scopes.
//! - A request without a usable token is answered with a `Bearer` challenge (RFC 6750) whose
//!   `resource_metadata` is the absolute URL of that document, derived from the configured audience
//!   (the URL clients reach the door by, also behind a proxy), never from the request's `Host`.
//! - A JWT access token is verified with the issuer's keys ([`jwks`], found by [`discovery`] unless
//!   `jwks_uri` is set), under an asymmetric-only algorithm allow-list, then its `exp`/`nbf` (with
//!   leeway), `iss` and `aud` ([`token`]). Its principal is `client:{sub}` (or the configured claim),
//!   limited to the union of the tool globs its configured scopes grant.
//!
//! Everything the door fetches goes through `portico_net::SafeClient`, bounded in size and time.

mod discovery;
mod fetch;
mod jwks;
mod token;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use jsonwebtoken::Algorithm;
use portico_config::ServerOAuthConfig;
use portico_net::{NetPolicy, SafeClient};
use portico_pipeline::ToolPatterns;

pub(crate) use jwks::{Freshness, KeySource};

/// The well-known path of the protected resource metadata (RFC 9728 §3).
pub(crate) const METADATA_PATH: &str = "/.well-known/oauth-protected-resource";
/// How long one request to the issuer may take; a whole key fetch is bounded too.
const FETCH_TIMEOUT: Duration = Duration::from_secs(5);
/// Most distinct scope combinations whose compiled tool globs are kept.
const MAX_GRANT_SETS: usize = 256;

/// Why `[server.oauth]` cannot be used as written (`config check` catches these first).
#[derive(Debug, thiserror::Error)]
pub enum OAuthConfigError {
    #[error("[server.oauth] issuer {0}")]
    Issuer(String),
    #[error("[server.oauth] jwks_uri {0}")]
    JwksUri(String),
    #[error("[server.oauth] audience {0}")]
    Audience(String),
    #[error("[server.oauth] scopes: {0}")]
    Scopes(String),
    #[error("[server.oauth] algorithms: {0}")]
    Algorithms(String),
    #[error("[server.oauth] principal_claim is empty")]
    PrincipalClaim,
    #[error("[server.oauth]: {0}")]
    Client(String),
}

/// A caller a token proved: `client:{principal}` within `scope`.
#[derive(Debug, Clone)]
pub(crate) struct OAuthClient {
    pub principal: String,
    pub scope: Arc<ToolPatterns>,
    /// The token's `exp` (seconds since the epoch).
    pub expires_at_secs: Option<u64>,
}

/// Why a token does not let its request in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// 401 `invalid_token`, with this description.
    InvalidToken(&'static str),
    /// 403 `insufficient_scope`: valid, but none of its scopes is configured.
    InsufficientScope,
    /// 503: no keys could be fetched to verify it with.
    KeysUnavailable,
}

/// The door's `[server.oauth]`, resolved: the metadata it publishes, the rules tokens meet, the keys.
pub struct OAuthResource {
    issuer: String,
    audience: String,
    /// The absolute URL of the metadata document, for `WWW-Authenticate`.
    metadata_url: String,
    /// The paths the document is served at.
    metadata_paths: Vec<String>,
    /// The document, serialised once.
    metadata: String,
    /// The configured scopes, space-separated, for challenges.
    scope_list: String,
    scopes: BTreeMap<String, Vec<String>>,
    algorithms: Vec<Algorithm>,
    rules: token::Rules,
    keys: jwks::KeyCache,
    /// Compiled tool globs per combination of granted scopes (at most [`MAX_GRANT_SETS`]).
    grants: Mutex<HashMap<Vec<String>, Arc<ToolPatterns>>>,
}

impl std::fmt::Debug for OAuthResource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OAuthResource")
            .field("issuer", &self.issuer)
            .field("audience", &self.audience)
            .field("scopes", &self.scopes)
            .field("keys", &self.keys)
            .finish_non_exhaustive()
    }
}

impl OAuthResource {
    /// Resolves `[server.oauth]`: every URL, scope glob and algorithm is checked here, so a door that
    /// starts can verify tokens (its keys are fetched when the first token comes).
    pub fn from_config(config: &ServerOAuthConfig) -> Result<Self, OAuthConfigError> {
        let freshness = Freshness {
            max_age: Duration::from_secs(config.jwks_max_age_secs.max(1)),
            min_refetch: Duration::from_secs(config.jwks_min_refetch_secs.max(1)),
        };
        Self::resolve(config, freshness)
    }

    fn resolve(config: &ServerOAuthConfig, freshness: Freshness) -> Result<Self, OAuthConfigError> {
        if let Some(problem) = portico_config::oauth_fetch_url_problem(&config.issuer) {
            return Err(OAuthConfigError::Issuer(problem));
        }
        if let Some(problem) = portico_config::oauth_audience_problem(&config.audience) {
            return Err(OAuthConfigError::Audience(problem));
        }
        let source = match &config.jwks_uri {
            Some(url) => {
                if let Some(problem) = portico_config::oauth_fetch_url_problem(url) {
                    return Err(OAuthConfigError::JwksUri(problem));
                }
                KeySource::Jwks(url.clone())
            }
            None => KeySource::Discover {
                issuer: config.issuer.clone(),
            },
        };
        if config.scopes.is_empty() {
            return Err(OAuthConfigError::Scopes("no scope is configured".into()));
        }
        for (scope, globs) in &config.scopes {
            if !portico_config::is_scope_token(scope) {
                return Err(OAuthConfigError::Scopes(format!(
                    "`{scope}` is not a scope name"
                )));
            }
            ToolPatterns::new(globs)
                .map_err(|e| OAuthConfigError::Scopes(format!("`{scope}`: {e}")))?;
        }
        let algorithms = config
            .algorithms
            .iter()
            .map(|name| {
                portico_config::SERVER_OAUTH_ALGORITHMS
                    .contains(&name.as_str())
                    .then(|| name.parse::<Algorithm>().ok())
                    .flatten()
                    .ok_or_else(|| {
                        OAuthConfigError::Algorithms(format!("`{name}` is not accepted"))
                    })
            })
            .collect::<Result<Vec<_>, _>>()?;
        if algorithms.is_empty() {
            return Err(OAuthConfigError::Algorithms("none is listed".into()));
        }
        if config.principal_claim.trim().is_empty() {
            return Err(OAuthConfigError::PrincipalClaim);
        }
        let client = SafeClient::builder()
            .policy(if config.allow_private_network {
                NetPolicy::allow_private_network()
            } else {
                NetPolicy::public_only()
            })
            .timeout(FETCH_TIMEOUT)
            .connect_timeout(FETCH_TIMEOUT)
            .build()
            .map_err(|e| OAuthConfigError::Client(e.to_string()))?;
        let (metadata_url, metadata_paths) = metadata_location(&config.audience);
        let metadata = serde_json::json!({
            "resource": config.audience,
            "authorization_servers": [config.issuer],
            "scopes_supported": config.scopes.keys().collect::<Vec<_>>(),
            "bearer_methods_supported": ["header"],
        })
        .to_string();
        Ok(OAuthResource {
            issuer: config.issuer.clone(),
            audience: config.audience.clone(),
            metadata_url,
            metadata_paths,
            metadata,
            scope_list: config
                .scopes
                .keys()
                .map(String::as_str)
                .collect::<Vec<_>>()
                .join(" "),
            scopes: config.scopes.clone(),
            algorithms,
            rules: token::Rules {
                issuer: config.issuer.clone(),
                audience: config.audience.clone(),
                leeway_secs: config
                    .leeway_secs
                    .min(portico_config::MAX_OAUTH_LEEWAY_SECS),
                principal_claim: config.principal_claim.clone(),
            },
            keys: jwks::KeyCache::new(source, client, freshness),
            grants: Mutex::new(HashMap::new()),
        })
    }

    pub(crate) fn issuer(&self) -> &str {
        &self.issuer
    }

    /// The absolute URL of the protected resource metadata.
    pub(crate) fn metadata_url(&self) -> &str {
        &self.metadata_url
    }

    /// Whether `path` is one the metadata is served at (public, like the health check).
    pub(crate) fn is_metadata_path(&self, path: &str) -> bool {
        self.metadata_paths.iter().any(|p| p == path)
    }

    /// The routes serving the metadata document.
    pub(crate) fn routes(self: &Arc<Self>) -> Router {
        let mut router = Router::new();
        for path in &self.metadata_paths {
            let this = self.clone();
            router = router.route(
                path,
                axum::routing::get(move || async move {
                    (
                        [(header::CONTENT_TYPE, "application/json")],
                        this.metadata.clone(),
                    )
                }),
            );
        }
        router
    }

    /// Verifies a bearer token: its key, signature and claims, then what its scopes grant.
    pub(crate) async fn verify(&self, token: &str) -> Result<OAuthClient, Refusal> {
        let header = token::header(token).map_err(|e| Refusal::InvalidToken(e.0))?;
        if !self.algorithms.contains(&header.alg) {
            return Err(Refusal::InvalidToken(
                "the token's algorithm is not accepted",
            ));
        }
        let key = self
            .keys
            .key_for(header.kid.as_deref(), header.alg)
            .await
            .map_err(|refusal| match refusal {
                jwks::KeyRefusal::UnknownKey => {
                    Refusal::InvalidToken("the token's signing key is not one of the issuer's")
                }
                jwks::KeyRefusal::Unfit => {
                    Refusal::InvalidToken("the token's algorithm does not fit its key")
                }
                jwks::KeyRefusal::Ambiguous => {
                    Refusal::InvalidToken("the token names no key (kid) and the issuer has several")
                }
                jwks::KeyRefusal::Unavailable => Refusal::KeysUnavailable,
            })?;
        let claims = token::verify(token, &key.decoding, header.alg, &self.rules)
            .map_err(|e| Refusal::InvalidToken(e.0))?;
        let granted: Vec<String> = self
            .scopes
            .keys()
            .filter(|scope| claims.scopes.iter().any(|s| s == *scope))
            .cloned()
            .collect();
        if granted.is_empty() {
            return Err(Refusal::InsufficientScope);
        }
        Ok(OAuthClient {
            principal: claims.principal,
            scope: self.grant(granted)?,
            expires_at_secs: claims.expires_at_secs,
        })
    }

    /// The tool globs of `granted` (configured scopes, in config order), compiled once per set.
    fn grant(&self, granted: Vec<String>) -> Result<Arc<ToolPatterns>, Refusal> {
        let mut grants = self.grants.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(patterns) = grants.get(&granted) {
            return Ok(patterns.clone());
        }
        let mut globs: Vec<&str> = Vec::new();
        for scope in &granted {
            for glob in self.scopes.get(scope).into_iter().flatten() {
                if !globs.contains(&glob.as_str()) {
                    globs.push(glob);
                }
            }
        }
        // Every glob compiled at start, so their union does; if it did not, the token gets nothing.
        let patterns = Arc::new(ToolPatterns::new(&globs).map_err(|e| {
            tracing::warn!(
                "[server.oauth]: the tool globs of scopes {granted:?} do not compile together: {e}"
            );
            Refusal::InsufficientScope
        })?);
        if grants.len() < MAX_GRANT_SETS {
            grants.insert(granted, patterns.clone());
        }
        Ok(patterns)
    }

    /// The `WWW-Authenticate` value of a 401: where the metadata is and which scopes to ask for, and,
    /// when a token was refused, why.
    pub(crate) fn challenge(&self, refused: Option<&'static str>) -> HeaderValue {
        let mut value = format!(
            "Bearer resource_metadata=\"{}\", scope=\"{}\"",
            self.metadata_url, self.scope_list
        );
        if let Some(description) = refused {
            value.push_str(&format!(
                ", error=\"invalid_token\", error_description=\"{description}\""
            ));
        }
        header_value(value)
    }

    /// The `WWW-Authenticate` value of a 403 for a token none of whose scopes is configured.
    pub(crate) fn scope_challenge(&self) -> HeaderValue {
        header_value(format!(
            "Bearer error=\"insufficient_scope\", scope=\"{}\", resource_metadata=\"{}\", error_description=\"none of the token's scopes is one this door grants tools for\"",
            self.scope_list, self.metadata_url
        ))
    }

    /// The answer to a request whose token was refused.
    pub(crate) fn refusal(&self, refusal: Refusal, retry_after: Duration) -> Response {
        match refusal {
            Refusal::InvalidToken(description) => {
                let message = format!(
                    "bearer token refused: {description}; get an access token from {} for {} (see {}), or send a [server] token or [[server.clients]] token",
                    self.issuer, self.audience, self.metadata_url
                );
                tracing::info!(status = 401, "{message}");
                let mut response = (
                    StatusCode::UNAUTHORIZED,
                    axum::Json(serde_json::json!({"error": message})),
                )
                    .into_response();
                response
                    .headers_mut()
                    .insert(header::WWW_AUTHENTICATE, self.challenge(Some(description)));
                response
            }
            Refusal::InsufficientScope => {
                let message = format!(
                    "the token carries none of the scopes this door grants tools for ({}); ask {} for one of them",
                    self.scope_list, self.issuer
                );
                tracing::info!(status = 403, "{message}");
                let mut response = (
                    StatusCode::FORBIDDEN,
                    axum::Json(serde_json::json!({"error": message})),
                )
                    .into_response();
                response
                    .headers_mut()
                    .insert(header::WWW_AUTHENTICATE, self.scope_challenge());
                response
            }
            Refusal::KeysUnavailable => {
                let message = format!(
                    "cannot verify the token now: the signing keys of {} could not be fetched (the log says why); try again later",
                    self.issuer
                );
                tracing::warn!(status = 503, "{message}");
                let mut response = (
                    StatusCode::SERVICE_UNAVAILABLE,
                    axum::Json(serde_json::json!({"error": message})),
                )
                    .into_response();
                response.headers_mut().insert(
                    header::RETRY_AFTER,
                    HeaderValue::from(retry_after.as_secs().max(1)),
                );
                response
            }
        }
    }

    /// How long a client should wait before trying again when the keys could not be fetched.
    pub(crate) fn retry_after(&self) -> Duration {
        self.keys.min_refetch()
    }
}

/// A challenge as a header value; every part of it was checked to be header-safe (URLs parsed,
/// scope tokens, fixed descriptions), so this cannot fail in practice, and falls back to `Bearer`.
fn header_value(value: String) -> HeaderValue {
    HeaderValue::from_str(&value).unwrap_or_else(|_| HeaderValue::from_static("Bearer"))
}

/// The metadata URL for `audience` and the paths it is served at (RFC 9728 §3.1: the well-known
/// prefix inserted between the host and the audience's path; a root path adds nothing). Also served
/// at the plain prefix and at `…/mcp`, where clients that know only the origin or `/mcp` look.
fn metadata_location(audience: &str) -> (String, Vec<String>) {
    let (origin, path) = match url::Url::parse(audience) {
        Ok(url) => (
            url.origin().ascii_serialization(),
            url.path().trim_end_matches('/').to_string(),
        ),
        Err(_) => (audience.trim_end_matches('/').to_string(), String::new()),
    };
    let own = format!("{METADATA_PATH}{path}");
    let mut paths = vec![METADATA_PATH.to_string(), format!("{METADATA_PATH}/mcp")];
    if !paths.contains(&own) {
        paths.push(own.clone());
    }
    (format!("{origin}{own}"), paths)
}
