//! The issuer's signing keys: fetched when first needed, kept for `jwks_max_age_secs`, fetched again
//! when a token names a key the cache does not have, but never twice within
//! `jwks_min_refetch_secs`, so tokens with made-up key ids cannot make Portico hammer the issuer.
//! One fetch runs at a time (its own task, shared by every request that waits for it); a request
//! whose key is cached never waits for one. Keys past [`MAX_KEYS`] in a document are ignored.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::FutureExt;
use futures::future::{BoxFuture, Shared};
use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, KeyOperations, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey};
use portico_net::SafeClient;
use serde_json::Value;

use super::discovery;
use super::fetch::json_object;

/// Most keys kept from one JWKS document.
pub(crate) const MAX_KEYS: usize = 64;
/// Largest JWKS document read.
pub(crate) const MAX_JWKS_BYTES: usize = 256 * 1024;
/// A whole fetch (discovery included) ends by this, whatever the issuer does.
const FETCH_DEADLINE: Duration = Duration::from_secs(15);

/// Where the keys come from: a configured URL, or the issuer's metadata.
#[derive(Debug, Clone)]
pub(crate) enum KeySource {
    Jwks(String),
    Discover { issuer: String },
}

/// The timing rules of the cache.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Freshness {
    /// Keys older than this are fetched again (in the background while they serve).
    pub max_age: Duration,
    /// The least time between two fetches.
    pub min_refetch: Duration,
}

/// What a key is, as far as which algorithms it may verify goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum KeyType {
    Rsa,
    P256,
    P384,
    Ed25519,
}

impl KeyType {
    fn fits(self, algorithm: Algorithm) -> bool {
        use Algorithm::*;
        match self {
            KeyType::Rsa => matches!(algorithm, RS256 | RS384 | RS512 | PS256 | PS384 | PS512),
            KeyType::P256 => algorithm == ES256,
            KeyType::P384 => algorithm == ES384,
            KeyType::Ed25519 => algorithm == EdDSA,
        }
    }
}

/// One public key of the issuer.
pub(crate) struct Key {
    pub(crate) decoding: DecodingKey,
    kind: KeyType,
    /// The key's own `alg`, when it names one: then only that algorithm.
    algorithm: Option<Algorithm>,
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Key")
            .field("kind", &self.kind)
            .field("algorithm", &self.algorithm)
            .finish_non_exhaustive()
    }
}

impl Key {
    fn fits(&self, algorithm: Algorithm) -> bool {
        self.kind.fits(algorithm) && self.algorithm.is_none_or(|own| own == algorithm)
    }

    /// A signing key from one JWKS entry, or why it is not used. Symmetric (`oct`) keys never are.
    fn from_jwk(jwk: &Jwk) -> Result<Key, &'static str> {
        if matches!(
            &jwk.common.public_key_use,
            Some(use_) if *use_ != PublicKeyUse::Signature
        ) {
            return Err("not a signing key (`use`)");
        }
        if let Some(operations) = &jwk.common.key_operations
            && !operations.contains(&KeyOperations::Verify)
        {
            return Err("not a verifying key (`key_ops`)");
        }
        let kind = match &jwk.algorithm {
            AlgorithmParameters::RSA(_) => KeyType::Rsa,
            AlgorithmParameters::EllipticCurve(ec) => match ec.curve {
                EllipticCurve::P256 => KeyType::P256,
                EllipticCurve::P384 => KeyType::P384,
                _ => return Err("an elliptic curve Portico does not verify"),
            },
            AlgorithmParameters::OctetKeyPair(okp) if okp.curve == EllipticCurve::Ed25519 => {
                KeyType::Ed25519
            }
            AlgorithmParameters::OctetKey(_) => return Err("a symmetric key"),
            _ => return Err("a key type Portico does not verify"),
        };
        let algorithm = match jwk.common.key_algorithm {
            None => None,
            Some(named) => match named.to_string().parse::<Algorithm>() {
                Ok(algorithm) if kind.fits(algorithm) => Some(algorithm),
                _ => return Err("its `alg` does not fit its key type"),
            },
        };
        let decoding = DecodingKey::from_jwk(jwk).map_err(|_| "its parameters do not decode")?;
        Ok(Key {
            decoding,
            kind,
            algorithm,
        })
    }
}

/// The keys of one JWKS document.
#[derive(Debug, Default)]
pub(crate) struct KeySet {
    by_kid: HashMap<String, Arc<Key>>,
    /// Keys without a `kid`: only for tokens without one.
    without_kid: Vec<Arc<Key>>,
}

impl KeySet {
    /// The usable keys of a JWKS document (`{"keys": [...]}`); entries that are not, or are past
    /// [`MAX_KEYS`], are left out (and said in the log).
    pub(crate) fn from_document(document: &serde_json::Map<String, Value>) -> KeySet {
        let mut set = KeySet::default();
        let Some(entries) = document.get("keys").and_then(Value::as_array) else {
            tracing::warn!("[server.oauth]: the issuer's JWKS has no `keys` array");
            return set;
        };
        for (index, entry) in entries.iter().enumerate() {
            if set.len() == MAX_KEYS {
                tracing::warn!(
                    "[server.oauth]: the issuer's JWKS has {} entries; only the first usable {MAX_KEYS} are kept",
                    entries.len()
                );
                break;
            }
            let key = serde_json::from_value::<Jwk>(entry.clone())
                .map_err(|_| "not a JWK")
                .and_then(|jwk| Key::from_jwk(&jwk).map(|key| (jwk.common.key_id, key)));
            match key {
                Ok((Some(kid), key)) => match set.by_kid.entry(kid) {
                    std::collections::hash_map::Entry::Occupied(taken) => tracing::warn!(
                        "[server.oauth]: the issuer's JWKS has key id `{}` twice; the first is used",
                        taken.key()
                    ),
                    std::collections::hash_map::Entry::Vacant(place) => {
                        place.insert(Arc::new(key));
                    }
                },
                Ok((None, key)) => set.without_kid.push(Arc::new(key)),
                Err(why) => {
                    tracing::debug!("[server.oauth]: JWKS entry {index} is not used: {why}")
                }
            }
        }
        set
    }

    fn len(&self) -> usize {
        self.by_kid.len() + self.without_kid.len()
    }

    fn lookup(&self, kid: Option<&str>, algorithm: Algorithm) -> Lookup {
        match kid {
            Some(kid) => match self.by_kid.get(kid) {
                Some(key) if key.fits(algorithm) => Lookup::Found(key.clone()),
                Some(_) => Lookup::Unfit,
                None => Lookup::Missing,
            },
            None => {
                let mut fitting = self.without_kid.iter().chain(self.by_kid.values());
                match (
                    fitting.by_ref().find(|k| k.fits(algorithm)),
                    fitting.any(|k| k.fits(algorithm)),
                ) {
                    (Some(key), false) => Lookup::Found(key.clone()),
                    (Some(_), true) => Lookup::Ambiguous,
                    (None, _) => Lookup::Missing,
                }
            }
        }
    }
}

enum Lookup {
    Found(Arc<Key>),
    /// The named key cannot verify the token's algorithm.
    Unfit,
    /// No `kid`, and several keys could verify it.
    Ambiguous,
    Missing,
}

/// Why no key verifies a token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KeyRefusal {
    /// The token's `kid` is not among the issuer's keys (after the one fetch allowed).
    UnknownKey,
    /// The key it names does not fit its algorithm.
    Unfit,
    /// It names no key, and the issuer has several that could verify it.
    Ambiguous,
    /// No keys could be fetched at all yet.
    Unavailable,
}

#[derive(Default)]
struct State {
    keys: Arc<KeySet>,
    /// When keys were last fetched successfully.
    fetched: Option<Instant>,
    /// When the last fetch started, whatever came of it: the rate limit counts from here.
    attempted: Option<Instant>,
    /// The JWKS URL discovery found (kept until a fetch from it fails).
    discovered: Option<String>,
    in_flight: Option<Shared<BoxFuture<'static, ()>>>,
}

/// The issuer's keys, shared by every request of the door.
pub(crate) struct KeyCache {
    inner: Arc<Inner>,
}

struct Inner {
    source: KeySource,
    client: SafeClient,
    freshness: Freshness,
    state: Mutex<State>,
}

impl std::fmt::Debug for KeyCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyCache")
            .field("source", &self.inner.source)
            .field("freshness", &self.inner.freshness)
            .finish_non_exhaustive()
    }
}

impl KeyCache {
    pub(crate) fn new(source: KeySource, client: SafeClient, freshness: Freshness) -> Self {
        KeyCache {
            inner: Arc::new(Inner {
                source,
                client,
                freshness,
                state: Mutex::new(State::default()),
            }),
        }
    }

    /// The key that verifies a token with `kid` and `algorithm`. Fetches the keys when there are
    /// none yet, or when `kid` is not among them and the last fetch is older than `min_refetch`.
    pub(crate) async fn key_for(
        &self,
        kid: Option<&str>,
        algorithm: Algorithm,
    ) -> Result<Arc<Key>, KeyRefusal> {
        let (keys, fetched) = self.snapshot();
        if fetched.is_none() {
            // Nothing to verify with yet: wait for the first fetch (or the one under way).
            if let Some(fetch) = self.start_fetch() {
                fetch.await;
            }
        } else if fetched.is_some_and(|at| at.elapsed() >= self.inner.freshness.max_age) {
            // Old keys serve while new ones are fetched.
            drop(self.start_fetch());
        }
        let (keys, fetched) = if fetched.is_none() {
            self.snapshot()
        } else {
            (keys, fetched)
        };
        if fetched.is_none() {
            return Err(KeyRefusal::Unavailable);
        }
        match keys.lookup(kid, algorithm) {
            Lookup::Found(key) => return Ok(key),
            Lookup::Unfit => return Err(KeyRefusal::Unfit),
            Lookup::Ambiguous => return Err(KeyRefusal::Ambiguous),
            Lookup::Missing => {}
        }
        // A key the cache does not have: the issuer may have rotated. One fetch, if allowed now.
        let Some(fetch) = self.start_fetch() else {
            return Err(KeyRefusal::UnknownKey);
        };
        fetch.await;
        match self.snapshot().0.lookup(kid, algorithm) {
            Lookup::Found(key) => Ok(key),
            Lookup::Unfit => Err(KeyRefusal::Unfit),
            Lookup::Ambiguous => Err(KeyRefusal::Ambiguous),
            Lookup::Missing => Err(KeyRefusal::UnknownKey),
        }
    }

    pub(crate) fn min_refetch(&self) -> Duration {
        self.inner.freshness.min_refetch
    }

    fn snapshot(&self) -> (Arc<KeySet>, Option<Instant>) {
        let state = self.inner.state.lock().unwrap_or_else(|e| e.into_inner());
        (state.keys.clone(), state.fetched)
    }

    /// The fetch to wait for: the one under way, or a new one if the last started at least
    /// `min_refetch` ago; `None` when it is too soon for another.
    fn start_fetch(&self) -> Option<Shared<BoxFuture<'static, ()>>> {
        let mut state = self.inner.state.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(fetch) = &state.in_flight {
            return Some(fetch.clone());
        }
        if state
            .attempted
            .is_some_and(|at| at.elapsed() < self.inner.freshness.min_refetch)
        {
            return None;
        }
        state.attempted = Some(Instant::now());
        let inner = self.inner.clone();
        // A task of its own: it ends and records its keys even if every request waiting for it
        // is dropped.
        let task = tokio::spawn(async move {
            let outcome = tokio::time::timeout(FETCH_DEADLINE, inner.fetch()).await;
            let mut state = inner.state.lock().unwrap_or_else(|e| e.into_inner());
            state.in_flight = None;
            match outcome {
                Ok(Ok(keys)) => {
                    state.keys = Arc::new(keys);
                    state.fetched = Some(Instant::now());
                }
                Ok(Err(error)) => {
                    state.discovered = None;
                    tracing::warn!("[server.oauth]: cannot fetch the issuer's keys: {error}");
                }
                Err(_) => {
                    state.discovered = None;
                    tracing::warn!(
                        "[server.oauth]: fetching the issuer's keys took longer than {}s; gave up",
                        FETCH_DEADLINE.as_secs()
                    );
                }
            }
        });
        let fetch = async move {
            // A panic in the fetch is its task's; the waiters just find no new keys.
            let _ = task.await;
        }
        .boxed()
        .shared();
        state.in_flight = Some(fetch.clone());
        Some(fetch)
    }
}

/// Why a fetch of the keys failed.
#[derive(Debug, thiserror::Error)]
enum KeyFetchError {
    #[error(transparent)]
    Discovery(#[from] discovery::DiscoveryError),
    #[error("{0}")]
    Fetch(#[from] super::fetch::FetchError),
}

impl Inner {
    async fn fetch(&self) -> Result<KeySet, KeyFetchError> {
        let url = match &self.source {
            KeySource::Jwks(url) => url.clone(),
            KeySource::Discover { issuer } => {
                let known = self
                    .state
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .discovered
                    .clone();
                match known {
                    Some(url) => url,
                    None => {
                        let url = discovery::jwks_uri(&self.client, issuer).await?;
                        self.state
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .discovered = Some(url.clone());
                        url
                    }
                }
            }
        };
        let document = json_object(&self.client, &url, MAX_JWKS_BYTES).await?;
        let keys = KeySet::from_document(&document);
        tracing::info!(
            "[server.oauth]: fetched {} signing key(s) from {url}",
            keys.len()
        );
        Ok(keys)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rsa(kid: Option<&str>, extra: Value) -> Value {
        let mut jwk = json!({"kty": "RSA", "n": "sXchDaQebHnPiGvyDOAT4saGEUetSyo9MKLOoWFsueri23bOdgWp4Dy1WlUzewbgBHod5pcM9H95GQRV3JDXboIRROSBigeC5yjU1hGzHHyXss8UDprecbAYxknTcQkhslANGRUZmdTOQ5qTRsLAt6BTYuyvVRdhS8exSZEy_c4gs_7svlJJQ4H9_NxsiIoLwAEk7-Q3UXERGYw_75IDrGA84-lA_-Ct4eTlXHBIY2EaV7t7LjJaynVJCpkv4LKjTTAumiGUIuQhrNhZLuF_RJLqHpM2kgWFLU7-VTdL1VbC2tejvcI2BlMkEpk1BzBZI0KQB0GaDWFLN-aEAw3vRw", "e": "AQAB"});
        if let Some(kid) = kid {
            jwk["kid"] = json!(kid);
        }
        for (k, v) in extra.as_object().unwrap() {
            jwk[k] = v.clone();
        }
        jwk
    }

    fn set(keys: Vec<Value>) -> KeySet {
        KeySet::from_document(json!({"keys": keys}).as_object().unwrap())
    }

    fn found(set: &KeySet, kid: Option<&str>, algorithm: Algorithm) -> &'static str {
        match set.lookup(kid, algorithm) {
            Lookup::Found(_) => "found",
            Lookup::Unfit => "unfit",
            Lookup::Ambiguous => "ambiguous",
            Lookup::Missing => "missing",
        }
    }

    #[test]
    fn only_signing_keys_that_fit_their_algorithm_are_kept_and_used() {
        let keys = set(vec![
            rsa(Some("plain"), json!({})),
            rsa(Some("rs256-only"), json!({"alg": "RS256", "use": "sig"})),
            rsa(Some("encryption"), json!({"use": "enc"})),
            rsa(Some("wrapping"), json!({"key_ops": ["wrapKey"]})),
            rsa(Some("says-es256"), json!({"alg": "ES256"})),
            json!({"kty": "oct", "kid": "secret", "k": "c2VjcmV0"}),
            json!({"kty": "EC", "kid": "p521", "crv": "P-521", "x": "AA", "y": "AA"}),
            json!({"kty": "weird", "kid": "weird"}),
            json!("not an object"),
            rsa(Some("plain"), json!({"alg": "RS512"})),
        ]);
        assert_eq!(set_kids(&keys), ["plain", "rs256-only"]);
        assert_eq!(found(&keys, Some("plain"), Algorithm::PS256), "found");
        assert_eq!(found(&keys, Some("plain"), Algorithm::ES256), "unfit");
        assert_eq!(found(&keys, Some("rs256-only"), Algorithm::RS256), "found");
        assert_eq!(found(&keys, Some("rs256-only"), Algorithm::RS512), "unfit");
        // A symmetric key is never there to verify an HMAC token with.
        assert_eq!(found(&keys, Some("secret"), Algorithm::HS256), "missing");
        assert_eq!(
            found(&keys, Some("encryption"), Algorithm::RS256),
            "missing"
        );
        // Without a kid: only when exactly one key fits.
        assert_eq!(found(&keys, None, Algorithm::RS256), "ambiguous");
        assert_eq!(found(&keys, None, Algorithm::RS384), "found");
        assert_eq!(found(&keys, None, Algorithm::ES256), "missing");
        let lone = set(vec![rsa(None, json!({}))]);
        assert_eq!(found(&lone, None, Algorithm::RS256), "found");
        assert_eq!(found(&lone, Some("any"), Algorithm::RS256), "missing");
        assert_eq!(set(vec![]).len(), 0);
        assert_eq!(
            KeySet::from_document(json!({"keys": "no"}).as_object().unwrap()).len(),
            0
        );
    }

    #[test]
    fn a_document_gives_at_most_max_keys() {
        let keys = set((0..MAX_KEYS + 10)
            .map(|i| rsa(Some(&format!("k{i}")), json!({})))
            .collect());
        assert_eq!(keys.len(), MAX_KEYS);
        assert_eq!(found(&keys, Some("k63"), Algorithm::RS256), "found");
        assert_eq!(found(&keys, Some("k64"), Algorithm::RS256), "missing");
    }

    fn set_kids(keys: &KeySet) -> Vec<String> {
        let mut kids: Vec<String> = keys.by_kid.keys().cloned().collect();
        kids.sort();
        kids
    }
}
