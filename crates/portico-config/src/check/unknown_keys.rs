//! Unknown keys, found by walking the TOML tree beside the model's JSON schema (derived by
//! `schemars` from the same serde types that load the config), so a key added to the model is known
//! here at once and none is listed by hand.

use std::sync::LazyLock;

use serde_json::{Map, Value};
use toml::Spanned;
use toml::de::{DeTable, DeValue};

/// The schema of the whole config file.
pub(crate) static CONFIG: LazyLock<Value> =
    LazyLock::new(|| schemars::schema_for!(crate::Config).to_value());
/// The schema of one file of an agents directory: one `[[agents]]` entry at top level.
pub(crate) static AGENT_FILE: LazyLock<Value> =
    LazyLock::new(|| schemars::schema_for!(crate::AgentConfig).to_value());

/// One key the model does not accept: the key, where it is, the section it is in and the keys that
/// section does accept.
pub(crate) struct UnknownKey {
    pub key: String,
    pub span: std::ops::Range<usize>,
    pub section: String,
    pub known: Vec<String>,
}

/// Every key in `root` that `schema` does not accept, in file order.
pub(crate) fn unknown_keys(root: &DeTable<'_>, schema: &Value, section: &str) -> Vec<UnknownKey> {
    let mut walk = Walk {
        defs: schema.get("$defs").and_then(Value::as_object),
        found: Vec::new(),
    };
    walk.table(root, schema, None, "", section);
    walk.found
}

struct Walk<'s> {
    defs: Option<&'s Map<String, Value>>,
    found: Vec<UnknownKey>,
}

impl<'s> Walk<'s> {
    /// `schema` with a `$ref` followed.
    fn resolve(&self, schema: &'s Value) -> &'s Value {
        let target = schema
            .get("$ref")
            .and_then(Value::as_str)
            .and_then(|r| r.strip_prefix("#/$defs/"))
            .and_then(|name| self.defs?.get(name));
        match target {
            Some(target) => self.resolve(target),
            None => schema,
        }
    }

    /// The alternatives `schema` allows (an `Option`'s value, an enum's variants), each resolved;
    /// `schema` itself when it has none.
    fn alternatives(&self, schema: &'s Value) -> Vec<&'s Value> {
        let schema = self.resolve(schema);
        let branches = ["anyOf", "oneOf"]
            .iter()
            .filter_map(|k| schema.get(*k).and_then(Value::as_array))
            .flatten()
            .flat_map(|branch| self.alternatives(branch))
            .collect::<Vec<_>>();
        if branches.is_empty() {
            vec![schema]
        } else {
            branches
        }
    }

    fn value(
        &mut self,
        value: &Spanned<DeValue<'_>>,
        schema: &'s Value,
        key: &str,
        path: &str,
        in_array: bool,
    ) {
        match value.get_ref() {
            DeValue::Table(table) => {
                let section = if in_array {
                    format!("[[{path}]]")
                } else {
                    format!("[{path}]")
                };
                self.table(table, schema, Some(key), path, &section);
            }
            DeValue::Array(items) => {
                let Some(item_schema) = self
                    .alternatives(schema)
                    .into_iter()
                    .find_map(|s| s.get("items"))
                else {
                    return;
                };
                for item in items.iter() {
                    self.value(item, item_schema, key, path, true);
                }
            }
            _ => {}
        }
    }

    /// Checks the keys of `table` against the object `schema` describes. Of an enum tagged by a key
    /// (`type = "stdio"`), the variant the tag names is used; with no such variant, the tag's own
    /// check reports the table and its keys are not checked.
    fn table(
        &mut self,
        table: &DeTable<'_>,
        schema: &'s Value,
        key: Option<&str>,
        path: &str,
        section: &str,
    ) {
        let objects: Vec<&Value> = self
            .alternatives(schema)
            .into_iter()
            .filter(|s| s.get("properties").is_some() || s.get("additionalProperties").is_some())
            .collect();
        let (object, section) = match objects.as_slice() {
            [] => return,
            [one] => (*one, section.to_string()),
            several => {
                let Some((tag, variant)) = self.tagged_variant(table, several) else {
                    return;
                };
                (variant, format!("a {tag} {}", key.unwrap_or("table")))
            }
        };
        let properties = object.get("properties").and_then(Value::as_object);
        for (name, value) in table.iter() {
            let name_str: &str = name.get_ref();
            match properties.and_then(|p| p.get(name_str)) {
                Some(property) => {
                    let child = join(path, name_str);
                    self.value(value, property, name_str, &child, false);
                }
                None => match object.get("additionalProperties") {
                    Some(Value::Bool(false)) => self.found.push(UnknownKey {
                        key: name_str.to_string(),
                        span: name.span(),
                        section: section.clone(),
                        known: properties
                            .map(|p| p.keys().cloned().collect())
                            .unwrap_or_default(),
                    }),
                    Some(free_form @ Value::Object(_)) => {
                        let child = join(path, name_str);
                        self.value(value, free_form, name_str, &child, false);
                    }
                    _ => {}
                },
            }
        }
    }

    /// The variant of a tagged enum that `table` names: the variant one of whose properties is a
    /// constant the table's value for that key equals. Returns the tag value with it.
    fn tagged_variant<'t>(
        &self,
        table: &'t DeTable<'_>,
        variants: &[&'s Value],
    ) -> Option<(String, &'s Value)> {
        variants.iter().find_map(|variant| {
            let properties = variant.get("properties")?.as_object()?;
            properties.iter().find_map(|(tag_key, tag_schema)| {
                let expected = tag_schema.get("const")?.as_str()?;
                let (_, given) = table.iter().find(|(k, _)| k.get_ref() == tag_key)?;
                match given.get_ref() {
                    DeValue::String(given) if given == expected => {
                        Some((expected.to_string(), *variant))
                    }
                    _ => None,
                }
            })
        })
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}
