//! A small authorization server for the door's tests, in process: RFC 8414 metadata and a JWKS it
//! can rotate, each fetch counted, on 127.0.0.1; ES256 keys generated here sign its tokens.

#![allow(dead_code)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair};
use jsonwebtoken::jwk::Jwk;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};

/// One ES256 signing key and its key id.
pub struct TestKey {
    pub kid: String,
    encoding: EncodingKey,
}

impl TestKey {
    pub fn new(kid: &str) -> TestKey {
        let pkcs8 =
            EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &SystemRandom::new())
                .unwrap();
        TestKey {
            kid: kid.into(),
            encoding: EncodingKey::from_ec_der(pkcs8.as_ref()),
        }
    }

    /// The public half, as a JWKS entry.
    pub fn jwk(&self) -> Value {
        let mut jwk = Jwk::from_encoding_key(&self.encoding, Algorithm::ES256).unwrap();
        jwk.common.key_id = Some(self.kid.clone());
        serde_json::to_value(jwk).unwrap()
    }

    pub fn sign(&self, claims: &Value) -> String {
        let mut header = Header::new(Algorithm::ES256);
        header.kid = Some(self.kid.clone());
        jsonwebtoken::encode(&header, claims, &self.encoding).unwrap()
    }
}

/// The issuer: `/.well-known/oauth-authorization-server` and `/jwks` on 127.0.0.1, stopped on drop.
pub struct Issuer {
    pub url: String,
    jwks: Arc<Mutex<Value>>,
    metadata_fetches: Arc<AtomicUsize>,
    jwks_fetches: Arc<AtomicUsize>,
    stop: tokio_util::sync::CancellationToken,
}

impl Issuer {
    pub async fn start(keys: &[&TestKey]) -> Issuer {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let jwks = Arc::new(Mutex::new(Self::set(keys)));
        let metadata_fetches = Arc::new(AtomicUsize::new(0));
        let jwks_fetches = Arc::new(AtomicUsize::new(0));
        let metadata = json!({
            "issuer": url,
            "jwks_uri": format!("{url}/jwks"),
            "authorization_endpoint": format!("{url}/authorize"),
            "token_endpoint": format!("{url}/token"),
            "response_types_supported": ["code"],
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

    fn set(keys: &[&TestKey]) -> Value {
        json!({"keys": keys.iter().map(|k| k.jwk()).collect::<Vec<_>>()})
    }

    /// Replaces the published keys (a rotation).
    pub fn publish(&self, keys: &[&TestKey]) {
        *self.jwks.lock().unwrap() = Self::set(keys);
    }

    /// (metadata fetches, JWKS fetches) so far.
    pub fn fetches(&self) -> (usize, usize) {
        (
            self.metadata_fetches.load(Ordering::SeqCst),
            self.jwks_fetches.load(Ordering::SeqCst),
        )
    }

    /// Good claims for `audience`: `alice`, ten minutes to live, `scope`.
    pub fn claims(&self, audience: &str, scope: &str) -> Value {
        let now = jsonwebtoken::get_current_timestamp();
        json!({
            "iss": self.url,
            "aud": audience,
            "sub": "alice",
            "exp": now + 600,
            "iat": now,
            "scope": scope,
        })
    }
}

impl Drop for Issuer {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}
