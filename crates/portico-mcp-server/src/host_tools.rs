//! Tools the embedding program registers at run time, served beside the upstreams' catalog.
//!
//! A host tool is a typed Rust function: its input and output types give the tool's `inputSchema` and
//! `outputSchema` (JSON Schema via `schemars`), its arguments are parsed and checked against the input
//! type before it runs, and its output becomes `structuredContent` plus a text rendering. Registering or
//! removing a tool notifies connected clients with list_changed.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, RwLock};

use portico_core::JsonObject;
use portico_core::relay::BoxFuture;
use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio::sync::watch;

/// What a host tool's handler returns when it fails: shown to the model as an `isError` result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolFailure(pub String);

impl<E: std::fmt::Display> From<E> for ToolFailure {
    fn from(error: E) -> Self {
        ToolFailure(error.to_string())
    }
}

type Handler = Arc<dyn Fn(JsonObject) -> BoxFuture<'static, JsonObject> + Send + Sync>;

/// One registered tool: its definition and its handler.
#[derive(Clone)]
pub struct HostTool {
    definition: JsonObject,
    handler: Handler,
}

impl HostTool {
    /// A tool from an async function of typed input to typed output.
    ///
    /// ```
    /// use portico_mcp_server::HostTool;
    /// #[derive(serde::Deserialize, schemars::JsonSchema)]
    /// struct Add { a: i64, b: i64 }
    /// #[derive(serde::Serialize, schemars::JsonSchema)]
    /// struct Sum { sum: i64 }
    /// let tool = HostTool::typed("add", "Adds two integers", |input: Add| async move {
    ///     Ok::<_, std::convert::Infallible>(Sum { sum: input.a + input.b })
    /// });
    /// assert_eq!(tool.name(), "add");
    /// ```
    pub fn typed<In, Out, Fut, E>(
        name: impl Into<String>,
        description: impl Into<String>,
        handler: impl Fn(In) -> Fut + Send + Sync + 'static,
    ) -> Self
    where
        In: DeserializeOwned + JsonSchema + Send + 'static,
        Out: Serialize + JsonSchema + 'static,
        Fut: Future<Output = Result<Out, E>> + Send + 'static,
        E: Into<ToolFailure>,
    {
        let name = name.into();
        let definition = json!({
            "name": name,
            "description": description.into(),
            "inputSchema": object_schema::<In>(),
            "outputSchema": object_schema::<Out>(),
        });
        let handler = Arc::new(handler);
        let tool_name = name.clone();
        HostTool {
            definition: definition.as_object().cloned().unwrap_or_default(),
            handler: Arc::new(move |arguments: JsonObject| {
                let parsed = serde_json::from_value::<In>(Value::Object(arguments));
                let handler = handler.clone();
                let tool_name = tool_name.clone();
                Box::pin(async move {
                    let input = match parsed {
                        Ok(input) => input,
                        Err(e) => {
                            return error_result(format!(
                                "invalid arguments for `{tool_name}`: {e}"
                            ));
                        }
                    };
                    match handler(input).await {
                        Ok(output) => structured_result(&output),
                        Err(failure) => error_result(failure.into().0),
                    }
                }) as BoxFuture<'static, JsonObject>
            }),
        }
    }

    /// Adds fields to the definition (`title`, `annotations`, `icons`, `_meta`).
    pub fn with(mut self, field: &str, value: Value) -> Self {
        if field != "name" {
            self.definition.insert(field.to_string(), value);
        }
        self
    }

    pub fn name(&self) -> &str {
        self.definition
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("")
    }

    pub fn definition(&self) -> &JsonObject {
        &self.definition
    }

    pub(crate) fn call(&self, arguments: JsonObject) -> BoxFuture<'static, JsonObject> {
        (self.handler)(arguments)
    }
}

/// MCP requires object schemas for tools; a non-object type is wrapped so the schema is still valid.
fn object_schema<T: JsonSchema>() -> Value {
    let schema = serde_json::to_value(schemars::schema_for!(T)).unwrap_or_else(|_| json!({}));
    if schema.get("type") == Some(&json!("object")) {
        schema
    } else {
        json!({"type": "object", "properties": {"value": schema}, "required": ["value"]})
    }
}

fn structured_result<T: Serialize>(output: &T) -> JsonObject {
    let value = serde_json::to_value(output).unwrap_or(Value::Null);
    let structured = if value.is_object() {
        value
    } else {
        json!({"value": value})
    };
    let text = serde_json::to_string(&structured).unwrap_or_default();
    json!({"content": [{"type": "text", "text": text}], "structuredContent": structured})
        .as_object()
        .cloned()
        .unwrap_or_default()
}

fn error_result(message: String) -> JsonObject {
    json!({"content": [{"type": "text", "text": message}], "isError": true})
        .as_object()
        .cloned()
        .unwrap_or_default()
}

/// The registry, shared by every session of a server.
#[derive(Clone)]
pub struct HostTools {
    tools: Arc<RwLock<BTreeMap<String, HostTool>>>,
    changes: watch::Sender<u64>,
}

impl Default for HostTools {
    fn default() -> Self {
        HostTools {
            tools: Arc::default(),
            changes: watch::channel(0).0,
        }
    }
}

impl HostTools {
    /// Registers (or replaces) a tool; connected clients are told the list changed.
    pub fn register(&self, tool: HostTool) {
        self.tools
            .write()
            .expect("host tools lock")
            .insert(tool.name().to_string(), tool);
        self.changes.send_modify(|n| *n += 1);
    }

    pub fn remove(&self, name: &str) -> bool {
        let removed = self
            .tools
            .write()
            .expect("host tools lock")
            .remove(name)
            .is_some();
        if removed {
            self.changes.send_modify(|n| *n += 1);
        }
        removed
    }

    pub fn get(&self, name: &str) -> Option<HostTool> {
        self.tools
            .read()
            .expect("host tools lock")
            .get(name)
            .cloned()
    }

    pub fn definitions(&self) -> Vec<JsonObject> {
        self.tools
            .read()
            .expect("host tools lock")
            .values()
            .map(|t| t.definition.clone())
            .collect()
    }

    pub fn changes(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize, JsonSchema)]
    struct Add {
        a: i64,
        b: i64,
    }

    #[derive(Serialize, JsonSchema)]
    struct Sum {
        sum: i64,
    }

    #[tokio::test]
    async fn typed_tools_have_schemas_validate_input_and_return_structured_output() {
        let tool = HostTool::typed("add", "Adds", |input: Add| async move {
            if input.a < 0 {
                return Err("negative numbers are not supported");
            }
            Ok(Sum {
                sum: input.a + input.b,
            })
        });
        let definition = tool.definition();
        assert_eq!(
            definition["inputSchema"]["properties"]["a"]["type"],
            "integer"
        );
        assert_eq!(
            definition["outputSchema"]["properties"]["sum"]["type"],
            "integer"
        );
        let ok = tool
            .call(json!({"a": 2, "b": 3}).as_object().cloned().unwrap())
            .await;
        assert_eq!(ok["structuredContent"], json!({"sum": 5}));
        assert_eq!(ok["content"][0]["text"], "{\"sum\":5}");
        let bad = tool
            .call(json!({"a": "x"}).as_object().cloned().unwrap())
            .await;
        assert_eq!(bad["isError"], true);
        assert!(
            bad["content"][0]["text"]
                .as_str()
                .unwrap()
                .starts_with("invalid arguments for `add`")
        );
        let failed = tool
            .call(json!({"a": -1, "b": 0}).as_object().cloned().unwrap())
            .await;
        assert_eq!(
            failed["content"][0]["text"],
            "negative numbers are not supported"
        );

        let registry = HostTools::default();
        let mut changes = registry.changes();
        registry.register(tool.with("title", json!("Add")));
        assert!(changes.has_changed().unwrap());
        changes.mark_unchanged();
        assert_eq!(registry.definitions()[0]["title"], "Add");
        assert!(registry.remove("add"));
        assert!(changes.has_changed().unwrap());
        assert!(!registry.remove("add"));
    }
}
