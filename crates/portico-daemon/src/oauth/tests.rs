//! The validator against a real issuer: a local axum server with RFC 8414 metadata and a JWKS it can
//! rotate, counting every fetch; tokens signed here with keys generated here.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair};
use jsonwebtoken::jwk::Jwk;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};

use super::*;

const AUDIENCE: &str = "https://portico.example/mcp";

/// One ES256 signing key with its key id.
struct TestKey {
    kid: String,
    encoding: EncodingKey,
}

impl TestKey {
    fn new(kid: &str) -> TestKey {
        let pkcs8 =
            EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &SystemRandom::new())
                .unwrap();
        TestKey {
            kid: kid.into(),
            encoding: EncodingKey::from_ec_der(pkcs8.as_ref()),
        }
    }

    fn jwk(&self) -> Value {
        let mut jwk = Jwk::from_encoding_key(&self.encoding, Algorithm::ES256).unwrap();
        jwk.common.key_id = Some(self.kid.clone());
        serde_json::to_value(jwk).unwrap()
    }

    fn sign(&self, claims: &Value) -> String {
        let mut header = Header::new(Algorithm::ES256);
        header.kid = Some(self.kid.clone());
        jsonwebtoken::encode(&header, claims, &self.encoding).unwrap()
    }
}

/// A local issuer: `/.well-known/oauth-authorization-server` and `/jwks`, each fetch counted.
struct Issuer {
    url: String,
    jwks: Arc<Mutex<Value>>,
    metadata_fetches: Arc<AtomicUsize>,
    jwks_fetches: Arc<AtomicUsize>,
    stop: tokio_util::sync::CancellationToken,
}

impl Issuer {
    async fn start(keys: &[&TestKey]) -> Issuer {
        Self::start_with_metadata_issuer(keys, None).await
    }

    /// `claimed`: the `issuer` its metadata says, when not its own URL.
    async fn start_with_metadata_issuer(keys: &[&TestKey], claimed: Option<&str>) -> Issuer {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let jwks = Arc::new(Mutex::new(
            json!({"keys": keys.iter().map(|k| k.jwk()).collect::<Vec<_>>()}),
        ));
        let metadata_fetches = Arc::new(AtomicUsize::new(0));
        let jwks_fetches = Arc::new(AtomicUsize::new(0));
        let metadata = json!({
            "issuer": claimed.unwrap_or(&url),
            "jwks_uri": format!("{url}/jwks"),
            "authorization_endpoint": format!("{url}/authorize"),
            "token_endpoint": format!("{url}/token"),
        });
        let router = axum::Router::new()
            .route(
                "/.well-known/oauth-authorization-server",
                axum::routing::get({
                    let fetches = metadata_fetches.clone();
                    move || async move {
                        fetches.fetch_add(1, Ordering::SeqCst);
                        axum::Json(metadata)
                    }
                }),
            )
            .route(
                "/jwks",
                axum::routing::get({
                    let fetches = jwks_fetches.clone();
                    let jwks = jwks.clone();
                    move || async move {
                        fetches.fetch_add(1, Ordering::SeqCst);
                        let body = jwks.lock().unwrap().clone();
                        axum::Json(body)
                    }
                }),
            );
        let stop = tokio_util::sync::CancellationToken::new();
        let stopped = stop.clone();
        tokio::spawn(async move {
            axum::serve(listener, router)
                .with_graceful_shutdown(stopped.cancelled_owned())
                .await
                .unwrap();
        });
        Issuer {
            url,
            jwks,
            metadata_fetches,
            jwks_fetches,
            stop,
        }
    }

    fn publish(&self, keys: &[&TestKey]) {
        *self.jwks.lock().unwrap() =
            json!({"keys": keys.iter().map(|k| k.jwk()).collect::<Vec<_>>()});
    }

    /// Replaces the JWKS document with any JSON.
    fn publish_raw(&self, document: Value) {
        *self.jwks.lock().unwrap() = document;
    }

    fn fetches(&self) -> (usize, usize) {
        (
            self.metadata_fetches.load(Ordering::SeqCst),
            self.jwks_fetches.load(Ordering::SeqCst),
        )
    }

    fn config(&self) -> ServerOAuthConfig {
        Self::config_for(&self.url)
    }

    fn config_for(url: &str) -> ServerOAuthConfig {
        ServerOAuthConfig {
            issuer: url.to_string(),
            audience: AUDIENCE.into(),
            scopes: [
                ("mcp:time".to_string(), vec!["time_*".to_string()]),
                ("mcp:files".to_string(), vec!["file_read".to_string()]),
            ]
            .into_iter()
            .collect(),
            principal_claim: "sub".into(),
            algorithms: portico_config::SERVER_OAUTH_ALGORITHMS
                .iter()
                .map(|a| a.to_string())
                .collect(),
            leeway_secs: 60,
            jwks_uri: None,
            allow_private_network: true,
            jwks_max_age_secs: 600,
            jwks_min_refetch_secs: 30,
        }
    }

    /// The door's resource, refetching its keys at most every `min_refetch`.
    fn resource(&self, min_refetch: Duration) -> OAuthResource {
        OAuthResource::resolve(
            &self.config(),
            Freshness {
                max_age: Duration::from_secs(600),
                min_refetch,
            },
        )
        .unwrap()
    }

    fn claims(&self) -> Value {
        let now = jsonwebtoken::get_current_timestamp();
        json!({
            "iss": self.url,
            "aud": AUDIENCE,
            "sub": "alice",
            "exp": now + 600,
            "iat": now,
            "scope": "openid mcp:time",
        })
    }

    /// Claims with `changes` applied (a `null` removes the claim).
    fn claims_with(&self, changes: Value) -> Value {
        let mut claims = self.claims();
        for (key, value) in changes.as_object().unwrap() {
            if value.is_null() {
                claims.as_object_mut().unwrap().remove(key);
            } else {
                claims[key] = value.clone();
            }
        }
        claims
    }
}

impl Drop for Issuer {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

fn refused(description: &'static str) -> Result<(), Refusal> {
    Err(Refusal::InvalidToken(description))
}

async fn outcome(resource: &OAuthResource, token: &str) -> Result<(), Refusal> {
    resource.verify(token).await.map(|_| ())
}

#[tokio::test]
async fn a_good_token_is_its_subject_within_its_scopes_tools() {
    let key = TestKey::new("k1");
    let issuer = Issuer::start(&[&key]).await;
    let resource = issuer.resource(Duration::from_secs(30));
    let client = resource.verify(&key.sign(&issuer.claims())).await.unwrap();
    assert_eq!(client.principal, "alice");
    assert_eq!(client.scope.patterns(), ["time_*"]);
    let principal = portico_pipeline::Principal::scoped_client(
        client.principal.clone(),
        Some(client.scope.clone()),
    );
    assert_eq!(principal.label(), "client:alice");
    assert!(principal.may_use("time_now"));
    assert!(!principal.may_use("file_read"));
    // Both scopes: the union of their globs; `scp` as an array counts too; `aud` may be an array.
    let both = issuer.claims_with(json!({"scope": null, "scp": ["mcp:files", "mcp:time"],
        "aud": ["https://other.example", AUDIENCE]}));
    let client = resource.verify(&key.sign(&both)).await.unwrap();
    assert_eq!(client.scope.patterns(), ["file_read", "time_*"]);
    // One discovery and one key fetch served all of it.
    assert_eq!(issuer.fetches(), (1, 1));
}

#[tokio::test]
async fn every_bad_token_class_is_refused_with_its_reason() {
    let key = TestKey::new("k1");
    let impostor = TestKey::new("k1");
    let issuer = Issuer::start(&[&key]).await;
    let resource = issuer.resource(Duration::from_secs(30));
    let now = jsonwebtoken::get_current_timestamp();
    let cases: Vec<(&str, String, Result<(), Refusal>)> = vec![
        (
            "bad signature",
            impostor.sign(&issuer.claims()),
            refused("the signature does not verify"),
        ),
        (
            "tampered payload",
            {
                let token = key.sign(&issuer.claims());
                let other = key.sign(&issuer.claims_with(json!({"sub": "mallory"})));
                let parts: Vec<&str> = token.split('.').collect();
                let other: Vec<&str> = other.split('.').collect();
                format!("{}.{}.{}", parts[0], other[1], parts[2])
            },
            refused("the signature does not verify"),
        ),
        (
            "wrong audience",
            key.sign(&issuer.claims_with(json!({"aud": "https://other.example/mcp"}))),
            refused("the token is for another audience"),
        ),
        (
            "no audience",
            key.sign(&issuer.claims_with(json!({"aud": null}))),
            refused("the token has no aud claim"),
        ),
        (
            "expired",
            key.sign(&issuer.claims_with(json!({"exp": now - 3600}))),
            refused("the token has expired"),
        ),
        (
            "no exp",
            key.sign(&issuer.claims_with(json!({"exp": null}))),
            refused("the token has no exp claim"),
        ),
        (
            "nbf in the future",
            key.sign(&issuer.claims_with(json!({"nbf": now + 3600}))),
            refused("the token is not valid yet (nbf)"),
        ),
        (
            "wrong issuer",
            key.sign(&issuer.claims_with(json!({"iss": "https://evil.example"}))),
            refused("the token is from another issuer"),
        ),
        (
            "no subject",
            key.sign(&issuer.claims_with(json!({"sub": null}))),
            refused("the token's principal claim is missing or not a usable name"),
        ),
        (
            "alg none",
            {
                let token = key.sign(&issuer.claims());
                let payload = token.split('.').nth(1).unwrap();
                // {"alg":"none"}
                format!("eyJhbGciOiJub25lIn0.{payload}.")
            },
            refused("the token is not a signed JWT with an algorithm Portico accepts"),
        ),
        (
            "HS256 with the key id of the issuer's public key",
            {
                let mut header = Header::new(Algorithm::HS256);
                header.kid = Some("k1".into());
                jsonwebtoken::encode(
                    &header,
                    &issuer.claims(),
                    &EncodingKey::from_secret(key.jwk()["x"].as_str().unwrap().as_bytes()),
                )
                .unwrap()
            },
            refused("the token's algorithm is not accepted"),
        ),
        (
            "not a JWT",
            "opaque-token-value".into(),
            refused("the token is not a signed JWT"),
        ),
        (
            "no configured scope",
            key.sign(&issuer.claims_with(json!({"scope": "openid profile"}))),
            Err(Refusal::InsufficientScope),
        ),
    ];
    for (what, token, expected) in cases {
        assert_eq!(outcome(&resource, &token).await, expected, "{what}");
    }
    // Within the leeway, a just-expired token and one just before its nbf still pass.
    let skewed = issuer.claims_with(json!({"exp": now - 30, "nbf": now + 30}));
    assert_eq!(outcome(&resource, &key.sign(&skewed)).await, Ok(()));
    // None of the refusals fetched anything again: the one key fetch is still the only one.
    assert_eq!(issuer.fetches(), (1, 1));
}

#[tokio::test]
async fn an_unknown_key_id_refetches_once_and_then_not_within_the_interval() {
    let old = TestKey::new("old");
    let new = TestKey::new("new");
    let issuer = Issuer::start(&[&old]).await;
    let interval = Duration::from_millis(400);
    let resource = issuer.resource(interval);
    assert_eq!(
        outcome(&resource, &old.sign(&issuer.claims())).await,
        Ok(())
    );
    assert_eq!(issuer.fetches(), (1, 1));
    // The issuer rotates; once the interval since the first fetch has passed, a token with the
    // new key id makes exactly one fetch, which finds it.
    issuer.publish(&[&old, &new]);
    tokio::time::sleep(interval + Duration::from_millis(50)).await;
    assert_eq!(
        outcome(&resource, &new.sign(&issuer.claims())).await,
        Ok(())
    );
    assert_eq!(issuer.fetches(), (1, 2), "discovery is kept; one key fetch");
    // An unknown key id again, within the interval: refused without asking the issuer.
    let stranger = TestKey::new("stranger");
    issuer.publish(&[&old, &new, &stranger]);
    assert_eq!(
        outcome(&resource, &stranger.sign(&issuer.claims())).await,
        refused("the token's signing key is not one of the issuer's")
    );
    assert_eq!(issuer.fetches(), (1, 2));
    // Many made-up key ids at once, after the interval: one fetch among all of them.
    tokio::time::sleep(interval + Duration::from_millis(50)).await;
    let tokens: Vec<String> = (0..20)
        .map(|i| TestKey::new(&format!("made-up-{i}")).sign(&issuer.claims()))
        .collect();
    let outcomes = futures::future::join_all(tokens.iter().map(|t| outcome(&resource, t))).await;
    assert!(
        outcomes
            .iter()
            .all(|o| *o == refused("the token's signing key is not one of the issuer's")),
        "{outcomes:?}"
    );
    assert_eq!(issuer.fetches(), (1, 3));
    // That fetch found `stranger`, now published: its token passes without another.
    assert_eq!(
        outcome(&resource, &stranger.sign(&issuer.claims())).await,
        Ok(())
    );
    assert_eq!(issuer.fetches(), (1, 3));
}

#[tokio::test]
async fn an_issuer_whose_metadata_names_another_issuer_is_not_trusted() {
    let key = TestKey::new("k1");
    let issuer = Issuer::start_with_metadata_issuer(&[&key], Some("https://idp.example")).await;
    let resource = issuer.resource(Duration::from_secs(30));
    let token = key.sign(&issuer.claims());
    assert_eq!(
        outcome(&resource, &token).await,
        Err(Refusal::KeysUnavailable)
    );
    // No JWKS was fetched, and within the interval nothing is asked again.
    assert_eq!(issuer.fetches(), (1, 0));
    assert_eq!(
        outcome(&resource, &token).await,
        Err(Refusal::KeysUnavailable)
    );
    assert_eq!(issuer.fetches(), (1, 0));
}

#[tokio::test]
async fn loopback_issuers_need_allow_private_network() {
    let key = TestKey::new("k1");
    let issuer = Issuer::start(&[&key]).await;
    let mut config = issuer.config();
    config.allow_private_network = false;
    let resource = OAuthResource::from_config(&config).unwrap();
    assert_eq!(
        outcome(&resource, &key.sign(&issuer.claims())).await,
        Err(Refusal::KeysUnavailable)
    );
    assert_eq!(
        issuer.fetches(),
        (0, 0),
        "the SSRF check refused before connecting"
    );
}

#[tokio::test]
async fn a_configured_jwks_uri_skips_discovery() {
    let key = TestKey::new("k1");
    let issuer = Issuer::start(&[&key]).await;
    let mut config = issuer.config();
    config.jwks_uri = Some(format!("{}/jwks", issuer.url));
    let resource = OAuthResource::from_config(&config).unwrap();
    assert_eq!(
        outcome(&resource, &key.sign(&issuer.claims())).await,
        Ok(())
    );
    assert_eq!(issuer.fetches(), (0, 1));
}

#[test]
fn metadata_and_challenges_name_the_audiences_metadata_url_and_the_scopes() {
    let config = ServerOAuthConfig {
        issuer: "https://idp.example".into(),
        audience: AUDIENCE.into(),
        scopes: [
            ("mcp:tools".to_string(), vec!["*".to_string()]),
            ("mcp:github".to_string(), vec!["mcp_github_*".to_string()]),
        ]
        .into_iter()
        .collect(),
        principal_claim: "sub".into(),
        algorithms: vec!["RS256".into()],
        leeway_secs: 60,
        jwks_uri: None,
        allow_private_network: false,
        jwks_max_age_secs: 600,
        jwks_min_refetch_secs: 30,
    };
    let resource = OAuthResource::from_config(&config).unwrap();
    assert_eq!(
        resource.metadata,
        r#"{"resource":"https://portico.example/mcp","authorization_servers":["https://idp.example"],"scopes_supported":["mcp:github","mcp:tools"],"bearer_methods_supported":["header"]}"#
    );
    assert_eq!(
        resource.metadata_url(),
        "https://portico.example/.well-known/oauth-protected-resource/mcp"
    );
    assert_eq!(
        resource.challenge(None),
        r#"Bearer resource_metadata="https://portico.example/.well-known/oauth-protected-resource/mcp", scope="mcp:github mcp:tools""#
    );
    assert_eq!(
        resource.challenge(Some("the token has expired")),
        r#"Bearer resource_metadata="https://portico.example/.well-known/oauth-protected-resource/mcp", scope="mcp:github mcp:tools", error="invalid_token", error_description="the token has expired""#
    );
    assert_eq!(
        resource.scope_challenge(),
        r#"Bearer error="insufficient_scope", scope="mcp:github mcp:tools", resource_metadata="https://portico.example/.well-known/oauth-protected-resource/mcp", error_description="none of the token's scopes is one this door grants tools for""#
    );
    assert!(resource.is_metadata_path("/.well-known/oauth-protected-resource"));
    assert!(resource.is_metadata_path("/.well-known/oauth-protected-resource/mcp"));
    assert!(!resource.is_metadata_path("/.well-known/oauth-protected-resource/x"));
    // Where the metadata is for other audiences: the path inserted after the host, RFC 9728 §3.1.
    assert_eq!(
        metadata_location("https://p.example"),
        (
            "https://p.example/.well-known/oauth-protected-resource".to_string(),
            vec![
                "/.well-known/oauth-protected-resource".to_string(),
                "/.well-known/oauth-protected-resource/mcp".to_string()
            ]
        )
    );
    assert_eq!(
        metadata_location("https://p.example:8443/team/mcp/").0,
        "https://p.example:8443/.well-known/oauth-protected-resource/team/mcp"
    );
    assert_eq!(
        metadata_location("https://p.example:8443/team/mcp").1[2],
        "/.well-known/oauth-protected-resource/team/mcp"
    );
    // HS* and none are refused at start, whatever `config check` said.
    for bad in ["HS256", "none", "ES512"] {
        let mut config = config.clone();
        config.algorithms = vec![bad.into()];
        assert_eq!(
            OAuthResource::from_config(&config).unwrap_err().to_string(),
            format!("[server.oauth] algorithms: `{bad}` is not accepted")
        );
    }
}

#[tokio::test]
async fn a_jwks_document_over_its_bound_is_refused_and_the_old_keys_stay() {
    let key = TestKey::new("k1");
    let other = TestKey::new("k2");
    let issuer = Issuer::start(&[]).await;
    let interval = Duration::from_millis(300);
    let resource = issuer.resource(interval);
    // The first document is too long: no keys at all, so 503.
    issuer.publish_raw(json!({"keys": [key.jwk()], "padding": "x".repeat(jwks::MAX_JWKS_BYTES)}));
    assert_eq!(
        outcome(&resource, &key.sign(&issuer.claims())).await,
        Err(Refusal::KeysUnavailable)
    );
    assert_eq!(issuer.fetches(), (1, 1));
    tokio::time::sleep(interval + Duration::from_millis(50)).await;
    issuer.publish(&[&key]);
    assert_eq!(
        outcome(&resource, &key.sign(&issuer.claims())).await,
        Ok(())
    );
    // A later oversized document (with k2) fails its fetch; k1 still verifies.
    tokio::time::sleep(interval + Duration::from_millis(50)).await;
    issuer.publish_raw(
        json!({"keys": [key.jwk(), other.jwk()], "padding": "x".repeat(jwks::MAX_JWKS_BYTES)}),
    );
    assert_eq!(
        outcome(&resource, &other.sign(&issuer.claims())).await,
        refused("the token's signing key is not one of the issuer's")
    );
    assert_eq!(
        outcome(&resource, &key.sign(&issuer.claims())).await,
        Ok(())
    );
    assert_eq!(
        issuer.fetches(),
        (2, 3),
        "a failed fetch discovers again next time"
    );
}

#[test]
fn compiled_scope_combinations_are_kept_up_to_their_bound() {
    let mut config = Issuer::config_for("https://idp.example");
    config.scopes = (0..9)
        .map(|i| (format!("s{i}"), vec![format!("tool_{i}_*")]))
        .collect();
    let resource = OAuthResource::from_config(&config).unwrap();
    let names: Vec<String> = config.scopes.keys().cloned().collect();
    for mask in 1..=(MAX_GRANT_SETS + 40) {
        let granted: Vec<String> = names
            .iter()
            .enumerate()
            .filter(|(i, _)| mask & (1 << i) != 0)
            .map(|(_, n)| n.clone())
            .collect();
        let patterns = resource.grant(granted.clone()).unwrap();
        assert_eq!(patterns.patterns().len(), granted.len());
    }
    assert_eq!(resource.grants.lock().unwrap().len(), MAX_GRANT_SETS);
}
