//! The audit trail: one record per call that reached the pipeline.

use hmac::{Hmac, KeyInit, Mac};
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
pub struct AuditKey {
    /// The MAC with the key already absorbed: cloning it per call saves hashing the padded key twice.
    keyed: Hmac<Sha256>,
}

impl AuditKey {
    /// The install's key, as kept in its data dir (`portico_store::load_or_create_secret`).
    pub fn new(secret: [u8; 32]) -> Self {
        AuditKey {
            keyed: Hmac::<Sha256>::new_from_slice(&secret).expect("HMAC takes keys of any size"),
        }
    }

    /// A key for this process only: for a pipeline without a data dir, whose digests need not match
    /// across runs.
    pub fn ephemeral() -> Self {
        AuditKey::new(rand::random())
    }

    /// HMAC-SHA256 of the canonical arguments, cut to 16 bytes (32 hex digits).
    pub fn digest(&self, arguments: &Value) -> String {
        let mut canonical_bytes = Vec::with_capacity(64);
        write_canonical(arguments, &mut canonical_bytes);
        self.digest_bytes(&canonical_bytes)
    }

    /// [`AuditKey::digest`] of an object, without building a `Value` of it.
    pub fn digest_object(&self, arguments: &serde_json::Map<String, Value>) -> String {
        let mut canonical_bytes = Vec::with_capacity(64);
        write_canonical_object(arguments, &mut canonical_bytes);
        self.digest_bytes(&canonical_bytes)
    }

    fn digest_bytes(&self, canonical_bytes: &[u8]) -> String {
        let mut mac = self.keyed.clone();
        mac.update(canonical_bytes);
        hex16(&mac.finalize().into_bytes())
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
    let mut canonical_bytes = Vec::with_capacity(64);
    write_canonical(arguments, &mut canonical_bytes);
    hex16(&Sha256::digest(&canonical_bytes))
}

/// The first 16 bytes as lowercase hex.
fn hex16(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut hex = String::with_capacity(32);
    for byte in bytes.iter().take(16) {
        hex.push(DIGITS[usize::from(byte >> 4)] as char);
        hex.push(DIGITS[usize::from(byte & 0xf)] as char);
    }
    hex
}

/// Compact JSON with every object's keys sorted, so equal values give equal bytes.
fn write_canonical(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Object(map) => write_canonical_object(map, out),
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_canonical(item, out);
            }
            out.push(b']');
        }
        // Writing a scalar into a Vec cannot fail.
        other => serde_json::to_writer(&mut *out, other).unwrap_or_default(),
    }
}

fn write_canonical_object(map: &serde_json::Map<String, Value>, out: &mut Vec<u8>) {
    let mut entries: Vec<(&String, &Value)> = map.iter().collect();
    entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
    out.push(b'{');
    for (i, (key, value)) in entries.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        serde_json::to_writer(&mut *out, key).unwrap_or_default();
        out.push(b':');
        write_canonical(value, out);
    }
    out.push(b'}');
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
    fn canonical_form_is_compact_json_with_sorted_keys() {
        let mut bytes = Vec::new();
        write_canonical(
            &json!({"y": [1, {"b": 2.5, "a": null}], "x": "é\"", "": true}),
            &mut bytes,
        );
        assert_eq!(
            String::from_utf8(bytes).unwrap(),
            r#"{"":true,"x":"é\"","y":[1,{"a":null,"b":2.5}]}"#
        );
    }

    #[test]
    fn an_object_digests_as_the_value_holding_it() {
        let key = AuditKey::new([7; 32]);
        let arguments = json!({"b": [1, 2], "a": {"z": 1, "y": 2}});
        let object = arguments.as_object().unwrap();
        assert_eq!(key.digest_object(object), key.digest(&arguments));
        assert_eq!(hex16(&[0xab; 20]), "ab".repeat(16));
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

    /// Digests are stored in the audit log and compared across restarts and upgrades, so their bytes
    /// are pinned: HMAC-SHA256 and SHA-256 of the canonical form, as any implementation computes
    /// them (these values are Python's `hmac`/`hashlib`).
    #[test]
    fn digest_bytes_are_pinned() {
        let pin = json!({"pin": "4821"});
        assert_eq!(
            AuditKey::new([7; 32]).digest(&pin),
            "e58a9ef96978acc00670194e5f62fc1c"
        );
        assert_eq!(arguments_digest(&pin), "edac0255889866a369d02fe542dba21c");
        assert_eq!(
            arguments_digest(&json!({"y": [1, {"b": 2, "a": 1}], "x": 1})),
            "b79189be3c2f72d6a7037545014d486e"
        );
    }
}
