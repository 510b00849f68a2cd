//! Tools that run inside Portico: the built-ins, and tools an embedding program registers at run time.
//!
//! A local tool is a typed Rust function: its input and output types give the tool's `inputSchema` and
//! `outputSchema` (JSON Schema via `schemars`), its arguments are parsed and checked against the input
//! type before it runs, and its output becomes `structuredContent` plus a text rendering. Registering or
//! removing a tool notifies connected clients with list_changed.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, RwLock};

use portico_core::relay::BoxFuture;
use portico_core::{CallError, JsonObject, ToolResult};
use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio::sync::watch;

use crate::context::ToolContext;
use crate::source::{ToolEntry, ToolSource, Trust};

/// What a host tool's handler returns when it fails: shown to the model as an error result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolFailure(pub String);

impl<E: std::fmt::Display> From<E> for ToolFailure {
    fn from(error: E) -> Self {
        ToolFailure(error.to_string())
    }
}

type Handler = Arc<dyn Fn(JsonObject, ToolContext) -> BoxFuture<'static, ToolResult> + Send + Sync>;

/// One registered tool: its definition, how far its output can be trusted, and its handler.
#[derive(Clone)]
pub struct LocalTool {
    /// Shared: every listing hands it out (an agent's run lists its tools), and cloning the JSON each
    /// time was a measurable share of an A2A request.
    definition: Arc<JsonObject>,
    handler: Handler,
    trust: Trust,
    sensitive: bool,
}

impl LocalTool {
    /// A tool from an async function of typed input to typed output.
    ///
    /// ```
    /// use portico_pipeline::LocalTool;
    /// #[derive(serde::Deserialize, schemars::JsonSchema)]
    /// struct Add { a: i64, b: i64 }
    /// #[derive(serde::Serialize, schemars::JsonSchema)]
    /// struct Sum { sum: i64 }
    /// let tool = LocalTool::typed("add", "Adds two integers", |input: Add| async move {
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
        Self::typed_with_context(name, description, move |input: In, _context| handler(input))
    }

    /// Like [`LocalTool::typed`], for tools that need to know who calls them (memory scoped per agent,
    /// agents calling agents).
    pub fn typed_with_context<In, Out, Fut, E>(
        name: impl Into<String>,
        description: impl Into<String>,
        handler: impl Fn(In, ToolContext) -> Fut + Send + Sync + 'static,
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
        LocalTool {
            definition: Arc::new(definition.as_object().cloned().unwrap_or_default()),
            trust: Trust::Trusted,
            sensitive: false,
            handler: Arc::new(move |arguments: JsonObject, context: ToolContext| {
                let parsed = serde_json::from_value::<In>(Value::Object(arguments));
                let handler = handler.clone();
                let tool_name = tool_name.clone();
                Box::pin(async move {
                    let input = match parsed {
                        Ok(input) => input,
                        Err(e) => {
                            return ToolResult::error(format!(
                                "invalid arguments for `{tool_name}`: {e}"
                            ));
                        }
                    };
                    match handler(input, context).await {
                        Ok(output) => structured_result(&output),
                        Err(failure) => ToolResult::error(failure.into().0),
                    }
                }) as BoxFuture<'static, ToolResult>
            }),
        }
    }

    /// A tool from a definition written by hand and a handler returning a whole result.
    pub fn raw(
        definition: JsonObject,
        handler: impl Fn(JsonObject, ToolContext) -> BoxFuture<'static, ToolResult>
        + Send
        + Sync
        + 'static,
    ) -> Self {
        LocalTool {
            definition: Arc::new(definition),
            handler: Arc::new(handler),
            trust: Trust::Trusted,
            sensitive: false,
        }
    }

    /// Marks the tool's output as untrusted (it carries content from outside: a web page, a remote
    /// agent), which taints the agent turn that reads it.
    pub fn untrusted_output(mut self) -> Self {
        self.trust = Trust::Untrusted;
        self
    }

    /// Marks the tool as sensitive: it acts on the world (writes files, runs commands), so the taint
    /// rule guards it.
    pub fn sensitive(mut self) -> Self {
        self.sensitive = true;
        self
    }

    pub fn trust(&self) -> Trust {
        self.trust
    }

    pub fn is_sensitive(&self) -> bool {
        self.sensitive
    }

    /// Adds fields to the definition (`title`, `annotations`, `icons`, `_meta`).
    pub fn with(mut self, field: &str, value: Value) -> Self {
        if field != "name" {
            Arc::make_mut(&mut self.definition).insert(field.to_string(), value);
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

    pub(crate) fn shared_definition(&self) -> Arc<JsonObject> {
        self.definition.clone()
    }

    pub fn call(
        &self,
        arguments: JsonObject,
        context: ToolContext,
    ) -> BoxFuture<'static, ToolResult> {
        (self.handler)(arguments, context)
    }
}

/// The JSON Schema (draft 2020-12) of `T` in standard keywords only, as every schema Portico serves
/// must be: schemars marks integers with formats JSON Schema does not define (`uint64`, `int32`,
/// `double`, ...), which strict validators (Ajv, so MCP Inspector and the SDKs) warn about or refuse.
/// Those formats become the bounds they mean (`minimum`/`maximum`, never widening one schemars or
/// an attribute set) and are dropped.
pub fn standard_schema_for<T: JsonSchema + ?Sized>() -> Value {
    let generator = schemars::generate::SchemaSettings::draft2020_12()
        .with_transform(schemars::transform::RecursiveTransform(standard_keywords))
        .into_generator();
    serde_json::to_value(generator.into_root_schema_for::<T>()).unwrap_or_else(|_| json!({}))
}

/// The formats JSON Schema 2020-12 defines; any other is dropped.
const STANDARD_FORMATS: &[&str] = &[
    "date-time",
    "date",
    "time",
    "duration",
    "email",
    "idn-email",
    "hostname",
    "idn-hostname",
    "ipv4",
    "ipv6",
    "uri",
    "uri-reference",
    "iri",
    "iri-reference",
    "uuid",
    "uri-template",
    "json-pointer",
    "relative-json-pointer",
    "regex",
];

fn standard_keywords(schema: &mut schemars::Schema) {
    let Some(object) = schema.as_object_mut() else {
        return;
    };
    let Some(format) = object
        .get("format")
        .and_then(Value::as_str)
        .map(str::to_owned)
    else {
        return;
    };
    if STANDARD_FORMATS.contains(&format.as_str()) {
        return;
    }
    let (minimum, maximum): (Option<Value>, Option<Value>) = match format.as_str() {
        "uint8" => (Some(0.into()), Some(u8::MAX.into())),
        "uint16" => (Some(0.into()), Some(u16::MAX.into())),
        "uint32" => (Some(0.into()), Some(u32::MAX.into())),
        "uint64" | "uint128" | "uint" => (Some(0.into()), None),
        "int8" => (Some(i8::MIN.into()), Some(i8::MAX.into())),
        "int16" => (Some(i16::MIN.into()), Some(i16::MAX.into())),
        "int32" => (Some(i32::MIN.into()), Some(i32::MAX.into())),
        _ => (None, None),
    };
    object.remove("format");
    if let Some(minimum) = minimum {
        object.entry("minimum").or_insert(minimum);
    }
    if let Some(maximum) = maximum {
        object.entry("maximum").or_insert(maximum);
    }
}

/// MCP requires object schemas for tools; a non-object type is wrapped so the schema is still valid.
fn object_schema<T: JsonSchema>() -> Value {
    let schema = standard_schema_for::<T>();
    if schema.get("type") == Some(&json!("object")) {
        schema
    } else {
        json!({"type": "object", "properties": {"value": schema}, "required": ["value"]})
    }
}

fn structured_result<T: Serialize>(output: &T) -> ToolResult {
    let value = serde_json::to_value(output).unwrap_or(Value::Null);
    let structured = if value.is_object() {
        value
    } else {
        json!({"value": value})
    };
    let text = serde_json::to_string(&structured).unwrap_or_default();
    ToolResult {
        structured_content: Some(structured),
        ..ToolResult::text(text)
    }
}

/// The registry, shared by every session of a server and by the pipeline.
#[derive(Clone)]
pub struct LocalTools {
    tools: Arc<RwLock<BTreeMap<String, LocalTool>>>,
    changes: watch::Sender<u64>,
}

impl Default for LocalTools {
    fn default() -> Self {
        LocalTools {
            tools: Arc::default(),
            changes: watch::channel(0).0,
        }
    }
}

impl LocalTools {
    /// Registers (or replaces) a tool; connected clients are told the list changed.
    pub fn register(&self, tool: LocalTool) {
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

    pub fn get(&self, name: &str) -> Option<LocalTool> {
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
            .map(|t| (*t.definition).clone())
            .collect()
    }

    pub fn all(&self) -> Vec<LocalTool> {
        self.tools
            .read()
            .expect("host tools lock")
            .values()
            .cloned()
            .collect()
    }

    pub fn changes(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// Bumped on every registration or removal.
    pub fn generation(&self) -> u64 {
        *self.changes.borrow()
    }
}

impl LocalTool {
    fn entry(&self, generation: u64) -> ToolEntry {
        ToolEntry {
            name: self.name().to_string(),
            definition: self.shared_definition(),
            trust: self.trust(),
            sensitive: self.is_sensitive(),
            timeout: None,
            generation,
        }
    }
}

impl ToolSource for LocalTools {
    fn kind(&self) -> &'static str {
        "local"
    }

    fn entries(&self) -> Vec<ToolEntry> {
        let generation = self.generation();
        self.all().iter().map(|t| t.entry(generation)).collect()
    }

    fn find(&self, name: &str) -> Option<ToolEntry> {
        self.get(name).map(|t| t.entry(self.generation()))
    }

    fn call<'a>(
        &'a self,
        entry: &'a ToolEntry,
        arguments: JsonObject,
        context: &'a ToolContext,
    ) -> BoxFuture<'a, Result<ToolResult, CallError>> {
        Box::pin(async move {
            let tool = self
                .get(&entry.name)
                .ok_or_else(|| CallError::NotFound(format!("tool `{}` was removed", entry.name)))?;
            Ok(tool.call(arguments, context.clone()).await)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn served_schemas_bound_integers_with_standard_keywords_not_formats() {
        #[derive(schemars::JsonSchema)]
        #[allow(dead_code)]
        struct Numbers {
            /// Any count.
            count: u64,
            /// A port.
            port: u16,
            /// At least one.
            #[schemars(range(min = 1))]
            limit: u32,
            /// Signed.
            offset: i32,
            /// A ratio.
            ratio: f64,
        }
        let schema = standard_schema_for::<Numbers>();
        let properties = &schema["properties"];
        assert_eq!(
            properties["count"],
            json!({"type": "integer", "minimum": 0, "description": "Any count."})
        );
        assert_eq!(properties["port"]["minimum"], 0);
        assert_eq!(properties["port"]["maximum"], 65535);
        assert_eq!(properties["limit"]["minimum"], 1);
        assert_eq!(properties["limit"]["maximum"], u32::MAX);
        assert_eq!(properties["offset"]["minimum"], i32::MIN);
        assert!(!schema.to_string().contains("\"format\""), "{schema}");
    }

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
        let tool = LocalTool::typed("add", "Adds", |input: Add| async move {
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
            .call(
                json!({"a": 2, "b": 3}).as_object().cloned().unwrap(),
                ToolContext::client("test"),
            )
            .await;
        assert_eq!(ok.structured_content, Some(json!({"sum": 5})));
        assert_eq!(ok.content[0]["text"], "{\"sum\":5}");
        let bad = tool
            .call(
                json!({"a": "x"}).as_object().cloned().unwrap(),
                ToolContext::client("test"),
            )
            .await;
        assert_eq!(bad.is_error, Some(true));
        assert!(
            bad.content[0]["text"]
                .as_str()
                .unwrap()
                .starts_with("invalid arguments for `add`")
        );
        let failed = tool
            .call(
                json!({"a": -1, "b": 0}).as_object().cloned().unwrap(),
                ToolContext::client("test"),
            )
            .await;
        assert_eq!(
            failed.content[0]["text"],
            "negative numbers are not supported"
        );

        let registry = LocalTools::default();
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
