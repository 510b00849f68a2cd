//! `memory_store` and `memory_recall`: a key/value memory kept in the [`Store`], one per agent.
//!
//! The scope is the calling agent's name, taken from the call context rather than from the arguments,
//! so an agent can neither read nor overwrite another agent's memory. Clients (people and programs at
//! a door) share the scope [`CLIENT_SCOPE`].

use portico_pipeline::{LocalTool, ToolContext};
use portico_store::{Store, StoreError};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The memory scope of calls made by clients rather than agents.
pub const CLIENT_SCOPE: &str = "clients";

/// The most entries one recall returns.
const MAX_RECALL: usize = 100;

/// Input of `memory_store`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct MemoryStoreInput {
    /// The name to remember the value under; storing under an existing key replaces its value.
    key: String,
    /// The text to remember.
    value: String,
}

/// Output of `memory_store`.
#[derive(Debug, Serialize, JsonSchema)]
struct MemoryStoreOutput {
    /// The key the value was stored under.
    key: String,
    /// Always true: a failed store is reported as an error instead.
    stored: bool,
}

/// Input of `memory_recall`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct MemoryRecallInput {
    /// Only entries whose key or value contains this text (ASCII case ignored); all entries when
    /// absent or empty.
    #[serde(default)]
    query: Option<String>,
    /// The most entries to return, newest first (1 to 100).
    #[serde(default = "default_limit")]
    #[schemars(range(min = 1, max = 100))]
    limit: usize,
}

fn default_limit() -> usize {
    10
}

/// One remembered entry.
#[derive(Debug, Serialize, JsonSchema)]
struct RecalledEntry {
    /// The entry's key.
    key: String,
    /// The remembered text.
    value: String,
    /// When the entry was last stored, in milliseconds since the Unix epoch.
    updated_at_ms: i64,
}

/// Output of `memory_recall`.
#[derive(Debug, Serialize, JsonSchema)]
struct MemoryRecallOutput {
    /// The matching entries, most recently updated first.
    entries: Vec<RecalledEntry>,
}

/// Why a memory call failed.
#[derive(Debug, thiserror::Error)]
enum MemoryError {
    #[error("the memory key is empty; give a short name to store the value under")]
    EmptyKey,
    #[error("could not {action} memory for `{scope}`: {source}")]
    Store {
        action: &'static str,
        scope: String,
        #[source]
        source: StoreError,
    },
}

/// Whose memory a call reads and writes.
fn scope(context: &ToolContext) -> String {
    context
        .principal
        .agent_name()
        .unwrap_or(CLIENT_SCOPE)
        .to_string()
}

pub(crate) fn memory_store(store: Store) -> LocalTool {
    LocalTool::typed_with_context(
        "memory_store",
        "Remember a value under a key, replacing any earlier value for that key. Memory persists \
         across conversations and is private to the calling agent.",
        move |input: MemoryStoreInput, context: ToolContext| {
            let store = store.clone();
            async move {
                if input.key.trim().is_empty() {
                    return Err(MemoryError::EmptyKey);
                }
                let scope = scope(&context);
                let key = input.key;
                let stored = {
                    let (scope, key) = (scope.clone(), key.clone());
                    store
                        .run("storing a memory", move |store| {
                            store.memory_store(&scope, &key, &input.value)
                        })
                        .await
                };
                stored.map_err(|source| MemoryError::Store {
                    action: "store",
                    scope,
                    source,
                })?;
                Ok(MemoryStoreOutput { key, stored: true })
            }
        },
    )
}

pub(crate) fn memory_recall(store: Store) -> LocalTool {
    LocalTool::typed_with_context(
        "memory_recall",
        "Recall remembered values, newest first, optionally only those whose key or value contains \
         `query`. Only the calling agent's own memory is searched.",
        move |input: MemoryRecallInput, context: ToolContext| {
            let store = store.clone();
            async move {
                let scope = scope(&context);
                let limit = input.limit.clamp(1, MAX_RECALL);
                let recalled = {
                    let scope = scope.clone();
                    store
                        .run("recalling memories", move |store| {
                            store.memory_recall(&scope, input.query.as_deref(), limit)
                        })
                        .await
                };
                let entries = recalled.map_err(|source| MemoryError::Store {
                    action: "recall",
                    scope,
                    source,
                })?;
                Ok::<_, MemoryError>(MemoryRecallOutput {
                    entries: entries
                        .into_iter()
                        .map(|e| RecalledEntry {
                            key: e.key,
                            value: e.value,
                            updated_at_ms: e.updated_at_ms,
                        })
                        .collect(),
                })
            }
        },
    )
}

#[cfg(test)]
mod tests {
    use portico_pipeline::{Principal, ToolPatterns};
    use serde_json::json;

    use super::*;
    use crate::test_support::{call, call_as, err, ok};

    fn agent(name: &str) -> ToolContext {
        let mut context = ToolContext::client("test");
        context.principal = Principal::agent(name, ToolPatterns::new(&["*"]).unwrap());
        context
    }

    fn keys(result: &portico_core::ToolResult) -> Vec<String> {
        ok(result)["entries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["key"].as_str().unwrap().to_string())
            .collect()
    }

    #[tokio::test]
    async fn store_then_recall_with_a_query() {
        let store = Store::open_in_memory().unwrap();
        let remember = memory_store(store.clone());
        let recall = memory_recall(store.clone());
        let planner = agent("planner");

        let stored = call_as(
            &remember,
            json!({"key": "deploy-target", "value": "staging"}),
            planner.clone(),
        )
        .await;
        assert_eq!(
            ok(&stored),
            &json!({"key": "deploy-target", "stored": true})
        );
        call_as(
            &remember,
            json!({"key": "colour", "value": "blue"}),
            planner.clone(),
        )
        .await;

        let found = call_as(&recall, json!({"query": "STAGING"}), planner.clone()).await;
        let entries = ok(&found)["entries"].as_array().unwrap();
        assert_eq!(entries.len(), 1);
        assert_eq!(entries[0]["key"], "deploy-target");
        assert_eq!(entries[0]["value"], "staging");
        assert!(entries[0]["updated_at_ms"].as_i64().unwrap() > 0);

        let mut all = keys(&call_as(&recall, json!({}), planner.clone()).await);
        all.sort();
        assert_eq!(all, ["colour", "deploy-target"]);
        assert_eq!(
            keys(&call_as(&recall, json!({"limit": 1}), planner.clone()).await).len(),
            1
        );

        // The value landed in the store under the agent's scope.
        assert_eq!(
            store
                .memory_get("planner", "colour")
                .unwrap()
                .unwrap()
                .value,
            "blue"
        );
    }

    #[tokio::test]
    async fn each_agent_has_its_own_memory() {
        let store = Store::open_in_memory().unwrap();
        let remember = memory_store(store.clone());
        let recall = memory_recall(store.clone());
        call_as(
            &remember,
            json!({"key": "secret", "value": "a's"}),
            agent("a"),
        )
        .await;
        call_as(
            &remember,
            json!({"key": "secret", "value": "b's"}),
            agent("b"),
        )
        .await;
        call(&remember, json!({"key": "secret", "value": "client's"})).await;

        let a = call_as(&recall, json!({"query": "secret"}), agent("a")).await;
        assert_eq!(ok(&a)["entries"][0]["value"], "a's");
        assert_eq!(ok(&a)["entries"].as_array().unwrap().len(), 1);
        let b = call_as(&recall, json!({}), agent("b")).await;
        assert_eq!(ok(&b)["entries"][0]["value"], "b's");
        assert_eq!(ok(&b)["entries"].as_array().unwrap().len(), 1);
        let c = call_as(&recall, json!({}), agent("c")).await;
        assert_eq!(ok(&c)["entries"], json!([]));
        assert_eq!(
            store
                .memory_get(CLIENT_SCOPE, "secret")
                .unwrap()
                .unwrap()
                .value,
            "client's"
        );
    }

    #[tokio::test]
    async fn empty_keys_are_refused() {
        let tool = memory_store(Store::open_in_memory().unwrap());
        let message = err(&call(&tool, json!({"key": " ", "value": "x"})).await);
        assert!(message.contains("memory key is empty"), "{message}");
    }
}
