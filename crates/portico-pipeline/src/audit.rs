//! The audit trail: one record per call that reached the pipeline.

use hmac::{Hmac, Mac};
use portico_store::{AuditRecord, AuditWriter};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// Where audit records go. The store's [`AuditWriter`] is the real one; tests collect records.
pub trait AuditSink: Send + Sync {
    fn record(&self, record: AuditRecord);

    /// Resolves once the sink can take more records; a call awaits it after recording, so a stalled
    /// sink holds calls back rather than queueing records without bound.
    fn room(&self) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + '_>> {
        Box::pin(std::future::ready(()))
    }
}

impl AuditSink for AuditWriter {
    fn record(&self, record: AuditRecord) {
        AuditWriter::record(self, record);
    }

    fn room(&self) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + '_>> {
        Box::pin(AuditWriter::room(self))
    }
}

/// The key of the audit log's argument digests. An unkeyed hash of a small secret (a PIN, a short
/// password) is reversed by hashing every guess, and `/api/audit` shows the digests; keyed with a
/// per-install secret, equal arguments still match each other but no guess can be checked without it.
#[derive(Clone)]
pub struct AuditKey([u8; 32]);

impl AuditKey {
    /// The install's key, as kept in its data dir (`portico_store::load_or_create_secret`).
    pub fn new(secret: [u8; 32]) -> Self {
        AuditKey(secret)
    }

    /// A key for this process only: for a pipeline without a data dir, whose digests need not match
    /// across runs.
    pub fn ephemeral() -> Self {
        AuditKey(rand::random())
    }

    /// HMAC-SHA256 of the canonical arguments, cut to 16 bytes (32 hex digits).
    pub fn digest(&self, arguments: &Value) -> String {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.0).expect("HMAC takes keys of any size");
        mac.update(canonical(arguments).as_bytes());
        let tag = mac.finalize().into_bytes();
        tag.iter().take(16).map(|b| format!("{b:02x}")).collect()
    }
}

impl std::fmt::Debug for AuditKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AuditKey(..)")
    }
}

/// An unkeyed digest of a call's arguments, for matching calls inside one process (the loop guard);
/// never stored or shown (the audit log uses [`AuditKey::digest`]). The arguments are serialised with
/// sorted keys so the same object gives the same digest.
pub fn arguments_digest(arguments: &Value) -> String {
    let canonical = canonical(arguments);
    let hash = Sha256::digest(canonical.as_bytes());
    hash.iter().take(16).map(|b| format!("{b:02x}")).collect()
}

fn canonical(value: &Value) -> String {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let fields: Vec<String> = keys
                .into_iter()
                .map(|k| format!("{}:{}", Value::String(k.clone()), canonical(&map[k])))
                .collect();
            format!("{{{}}}", fields.join(","))
        }
        Value::Array(items) => format!(
            "[{}]",
            items.iter().map(canonical).collect::<Vec<_>>().join(",")
        ),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn digest_ignores_key_order_and_distinguishes_values() {
        let a = arguments_digest(&json!({"x": 1, "y": [1, {"b": 2, "a": 1}]}));
        let b = arguments_digest(&json!({"y": [1, {"a": 1, "b": 2}], "x": 1}));
        let c = arguments_digest(&json!({"x": 2, "y": [1, {"a": 1, "b": 2}]}));
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_eq!(a.len(), 32);
    }

    #[test]
    fn keyed_digests_match_equal_arguments_only_under_one_key() {
        let key = AuditKey::new([7; 32]);
        let pin = json!({"pin": "4821"});
        let digest = key.digest(&pin);
        assert_eq!(digest, key.digest(&json!({"pin": "4821"})));
        assert_eq!(digest.len(), 32);
        assert_ne!(digest, key.digest(&json!({"pin": "4822"})));
        // Guessing with the plain hash, or with another install's key, finds nothing.
        assert_ne!(digest, arguments_digest(&pin));
        assert_ne!(digest, AuditKey::new([8; 32]).digest(&pin));
    }
}
