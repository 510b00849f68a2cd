//! The audit trail: one record per call that reached the pipeline.

use portico_store::{AuditRecord, AuditWriter};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// Where audit records go. The store's [`AuditWriter`] is the real one; tests collect records.
pub trait AuditSink: Send + Sync {
    fn record(&self, record: AuditRecord);
}

impl AuditSink for AuditWriter {
    fn record(&self, record: AuditRecord) {
        AuditWriter::record(self, record);
    }
}

/// A digest of a call's arguments: enough to match identical calls, without keeping what may be secret.
/// The arguments are serialised with sorted keys so the same object gives the same digest.
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
}
