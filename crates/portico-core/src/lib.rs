//! Portico's domain core: the aggregated catalog, tool naming, the health model of upstream servers,
//! what a tool call answers (`ToolResult`, `CallError`), the contract of a tool source (`ToolSource`,
//! with who is calling in `ToolContext`), so that the hub, the agents and the pipeline meet here
//! without depending on each other; the relay contract ([`relay::Caller`]: how what an upstream sends
//! during a call reaches the client whose call it is, and the typed sampling request an agent asks
//! of its client), the one retry schedule, and timestamps.
//!
//! This crate is what every door and edge agrees on. It is deliberately free of sockets and processes,
//! and of wire formats: MCP, A2A and HTTP live in edge crates, which convert to and from these types
//! (the exception: what an upstream relays through Portico is the protocol's JSON, carried
//! opaquely). Upstream definitions (a
//! tool's schemas, annotations, icons, `_meta`) are carried as opaque JSON objects so that Portico
//! passes them on unchanged without having to understand every field a future spec adds.
//!
//! It is not a protocol implementation and not a supervisor: it names, indexes and routes, and describes
//! state; the hub crate drives connections.
//!
//! [`pointer`] is the one JSON pointer parser (policies' argument conditions, checked by `config check`
//! with the same code).
//!
//! [`retry::RetryPolicy`] is arithmetic only, which callers sleep on; [`time`] is the one place
//! timestamps (epoch milliseconds, RFC 3339) are formatted.
//!
//! [`TaskState`] is where an A2A task is, shared by the A2A edges and the task store so that the
//! store owns no A2A vocabulary; it knows its two spellings (1.0 and 0.3 names), nothing more of A2A.
//!
//! [`trace`] names the spans a call makes for OpenTelemetry (the crates that make them use only
//! `tracing`; exporting is the binary's).

pub mod call;
pub mod catalog;
pub mod completion;
pub mod context;
pub mod health;
pub mod naming;
pub mod pointer;
pub mod relay;
pub mod retry;
pub mod source;
pub mod task_state;
pub mod text;
pub mod time;
pub mod trace;

pub use call::{CallError, CreatedTask, ProtocolError, TaskOperation, ToolResult};
pub use catalog::{
    Catalog, CatalogPrompt, CatalogResource, CatalogResourceTemplate, CatalogTool, NameCollision,
    PromptDef, ResourceDef, ResourceTemplateDef, ServerCatalog, ToolDef,
};
pub use completion::CompletionRef;
pub use health::{ServerState, ServerStatus};
pub use task_state::TaskState;

/// A JSON object as received from an upstream, kept verbatim.
pub type JsonObject = serde_json::Map<String, serde_json::Value>;

/// A model setting such as a temperature as a JSON number. `f32 -> f64` widening turns 0.7 into
/// 0.699999988079071; going through the shortest decimal form sends what the user wrote.
pub fn json_f32(value: f32) -> serde_json::Value {
    value
        .to_string()
        .parse::<f64>()
        .ok()
        .and_then(serde_json::Number::from_f64)
        .map(serde_json::Value::Number)
        .unwrap_or(serde_json::Value::Null)
}

/// The length of `value` as JSON, counted without building the text (results and policy failures
/// can be megabytes; budgets are checked before anything is copied). `usize::MAX` when it cannot be
/// serialised, so a budget check refuses it.
pub fn json_size<T: serde::Serialize + ?Sized>(value: &T) -> usize {
    struct Counter(usize);
    impl std::io::Write for Counter {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len();
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut counter = Counter(0);
    match serde_json::to_writer(&mut counter, value) {
        Ok(()) => counter.0,
        Err(_) => usize::MAX,
    }
}

/// Serialises a protocol value into the JSON object the core carries. A value that is not an object
/// (which no MCP result is) is wrapped as `{"value": ...}` rather than lost.
pub fn to_object<T: serde::Serialize>(value: &T) -> JsonObject {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::Object(map)) => map,
        Ok(other) => JsonObject::from_iter([("value".to_string(), other)]),
        Err(e) => JsonObject::from_iter([(
            "error".to_string(),
            serde_json::Value::String(format!("unserialisable value: {e}")),
        )]),
    }
}
