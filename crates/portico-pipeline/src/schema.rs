//! Argument and result validation against a tool's JSON Schemas.
//!
//! Schemas come from upstream servers Portico does not control, so compilation never fetches anything:
//! the `jsonschema` crate is built without its HTTP and file resolvers, and a schema whose `$ref` points
//! outside itself fails to compile (the call is then refused with that reason, rather than run
//! unchecked). Both draft-07 and 2020-12 are detected from `$schema`; without one, 2020-12 applies, as
//! MCP 2025-11-25 specifies.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use jsonschema::Validator;
use serde_json::Value;

/// At most this many problems are reported for one value; the first few are what a model needs.
const MAX_REPORTED: usize = 5;

/// Compiled validators, keyed by tool and source generation, so the hot path neither recompiles nor
/// hashes schemas.
#[derive(Default)]
pub struct SchemaCache {
    compiled: Mutex<HashMap<SchemaKey, (u64, Compiled)>>,
}

/// A tool's name and which of its schemas.
type SchemaKey = (String, &'static str);
type Compiled = Result<Arc<Validator>, String>;

impl SchemaCache {
    /// Checks `value` against `schema`; `Err` lists what is wrong, with JSON pointers.
    pub fn check(
        &self,
        tool: &str,
        which: &'static str,
        generation: u64,
        schema: &Value,
        value: &Value,
    ) -> Result<(), String> {
        let compiled = self.compiled(tool, which, generation, schema);
        let validator = compiled.map_err(|e| format!("its {which} cannot be used: {e}"))?;
        let problems: Vec<String> = validator
            .iter_errors(value)
            .take(MAX_REPORTED)
            .map(|error| {
                let at = error.instance_path().to_string();
                // `additionalProperties: false` is reported as "False schema does not allow 1",
                // at the object rather than the field: name the fields, and the ones it takes.
                if at.is_empty()
                    && matches!(
                        error.kind(),
                        jsonschema::error::ValidationErrorKind::FalseSchema
                    )
                    && let Some(unexpected) = unexpected_fields(schema, value)
                {
                    unexpected
                } else if at.is_empty() {
                    error.to_string()
                } else {
                    format!("{at}: {error}")
                }
            })
            .collect();
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems.join("; "))
        }
    }

    fn compiled(
        &self,
        tool: &str,
        which: &'static str,
        generation: u64,
        schema: &Value,
    ) -> Compiled {
        let key = (tool.to_string(), which);
        if let Some((cached_generation, compiled)) =
            self.compiled.lock().expect("schema cache lock").get(&key)
            && *cached_generation == generation
        {
            return compiled.clone();
        }
        let compiled = compile(schema);
        self.compiled
            .lock()
            .expect("schema cache lock")
            .insert(key, (generation, compiled.clone()));
        compiled
    }
}

fn compile(schema: &Value) -> Compiled {
    let mut options = jsonschema::options();
    if schema.get("$schema").is_none() {
        options = options.with_draft(jsonschema::Draft::Draft202012);
    }
    options
        .build(schema)
        .map(Arc::new)
        .map_err(|e| e.to_string())
}

/// The top-level fields of `value` that `schema` (with `additionalProperties: false`) does not
/// list, said with the ones it does.
fn unexpected_fields(schema: &Value, value: &Value) -> Option<String> {
    if schema.get("additionalProperties") != Some(&Value::Bool(false)) {
        return None;
    }
    let known: Vec<&String> = schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|p| p.keys().collect())
        .unwrap_or_default();
    let extra: Vec<String> = value
        .as_object()?
        .keys()
        .filter(|k| !known.contains(k))
        .map(|k| format!("`{k}`"))
        .collect();
    if extra.is_empty() {
        return None;
    }
    let takes = match known.is_empty() {
        true => "no arguments".to_string(),
        false => known
            .iter()
            .map(|k| format!("`{k}`"))
            .collect::<Vec<_>>()
            .join(", "),
    };
    Some(format!(
        "unexpected field{} {}; the tool takes {takes}",
        if extra.len() == 1 { "" } else { "s" },
        extra.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reports_problems_with_pointers() {
        let cache = SchemaCache::default();
        let schema =
            json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]});
        assert!(
            cache
                .check("t", "inputSchema", 0, &schema, &json!({"n": 1}))
                .is_ok()
        );
        let error = cache
            .check("t", "inputSchema", 0, &schema, &json!({"n": "x"}))
            .unwrap_err();
        assert!(error.starts_with("/n: "), "{error}");
        let missing = cache
            .check("t", "inputSchema", 0, &schema, &json!({}))
            .unwrap_err();
        assert!(
            missing.contains("\"n\" is a required property"),
            "{missing}"
        );
    }

    #[test]
    fn an_unexpected_field_is_named_with_the_ones_the_tool_takes() {
        let cache = SchemaCache::default();
        let none = json!({"type": "object", "additionalProperties": false});
        let error = cache
            .check("t", "inputSchema", 0, &none, &json!({"x": 1}))
            .unwrap_err();
        assert_eq!(error, "unexpected field `x`; the tool takes no arguments");
        let some = json!({"type": "object", "properties": {"a": {"type": "string"}, "b": {}}, "additionalProperties": false});
        let error = cache
            .check(
                "t",
                "inputSchema",
                0,
                &some,
                &json!({"a": "v", "x": 1, "y": 2}),
            )
            .unwrap_err();
        assert_eq!(error, "unexpected fields `x`, `y`; the tool takes `a`, `b`");
    }

    #[test]
    fn draft_07_and_2020_12_both_apply() {
        let cache = SchemaCache::default();
        // draft-07 tuple form: `items` as an array.
        let draft7 = json!({"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
            "properties": {"pair": {"type": "array", "items": [{"type": "string"}, {"type": "integer"}]}}});
        assert!(
            cache
                .check("a", "inputSchema", 0, &draft7, &json!({"pair": ["x", 1]}))
                .is_ok()
        );
        assert!(
            cache
                .check("a", "inputSchema", 0, &draft7, &json!({"pair": [1, "x"]}))
                .is_err()
        );
        // 2020-12 tuple form: `prefixItems`.
        let draft2020 = json!({"type": "object",
            "properties": {"pair": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}]}}});
        assert!(
            cache
                .check(
                    "b",
                    "inputSchema",
                    0,
                    &draft2020,
                    &json!({"pair": ["x", 1]})
                )
                .is_ok()
        );
        assert!(
            cache
                .check(
                    "b",
                    "inputSchema",
                    0,
                    &draft2020,
                    &json!({"pair": [1, "x"]})
                )
                .is_err()
        );
    }

    #[test]
    fn remote_refs_are_not_fetched() {
        let cache = SchemaCache::default();
        let schema = json!({"type": "object", "properties": {"x": {"$ref": "http://127.0.0.1:9/evil.json"}}});
        let error = cache
            .check("r", "inputSchema", 0, &schema, &json!({"x": 1}))
            .unwrap_err();
        assert!(
            error.starts_with("its inputSchema cannot be used"),
            "{error}"
        );
    }

    #[test]
    fn a_new_generation_recompiles() {
        let cache = SchemaCache::default();
        let strict = json!({"type": "object", "additionalProperties": false});
        let loose = json!({"type": "object"});
        assert!(
            cache
                .check("t", "inputSchema", 1, &strict, &json!({"a": 1}))
                .is_err()
        );
        assert!(
            cache
                .check("t", "inputSchema", 1, &loose, &json!({"a": 1}))
                .is_err(),
            "same generation: cached"
        );
        assert!(
            cache
                .check("t", "inputSchema", 2, &loose, &json!({"a": 1}))
                .is_ok()
        );
    }
}
