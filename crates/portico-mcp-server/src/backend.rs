//! Where a served catalog comes from: the in-process engine, or a running daemon reached over MCP.

use std::sync::Arc;

use portico_core::relay::CallContext;
use portico_core::{
    CatalogPrompt, CatalogResource, CatalogResourceTemplate, CompletionRef, JsonObject, ToolResult,
};
use portico_engine::{Engine, Upstreams, UpstreamsError};
use portico_mcp::{Upstream, UpstreamError};
use portico_pipeline::{PipelineError, Principal, ToolContext};
use tokio::sync::{broadcast, watch};

/// How long a listing waits for servers still making their first connection attempt.
const SETTLE_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// The source of everything a door serves.
#[derive(Clone)]
pub enum Backend {
    /// The engine in this process: tools go through its call pipeline, prompts and resources to its
    /// hub.
    Local(Engine),
    /// A daemon's `/mcp`, for `portico mcp` when a daemon is running: its catalog is already aggregated
    /// and named, so it is served as is.
    Daemon(Arc<DaemonLink>),
}

/// A session with a running daemon, plus a change signal fed by its list-changed notifications.
pub struct DaemonLink {
    pub upstream: Upstream,
    pub changes: watch::Receiver<u64>,
    /// URIs of subscribed resources the daemon reports changed.
    pub resource_updates: broadcast::Sender<String>,
}

/// A lookup or call failure, from whichever backend.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    #[error(transparent)]
    Upstreams(#[from] UpstreamsError),
    #[error(transparent)]
    Daemon(#[from] UpstreamError),
    #[error(transparent)]
    Pipeline(#[from] PipelineError),
}

impl BackendError {
    /// A passed-through upstream's own protocol error, which the door answers with as it is.
    pub fn is_protocol_error(&self) -> bool {
        matches!(
            self,
            BackendError::Pipeline(PipelineError::Source(portico_core::CallError::Protocol(_)))
        )
    }

    pub fn is_unknown_tool(&self) -> bool {
        matches!(
            self,
            BackendError::Pipeline(PipelineError::UnknownTool { .. })
        ) || matches!(
            self,
            BackendError::Daemon(UpstreamError::Remote {
                code: Some(-32602),
                ..
            })
        )
    }
}

/// A prompt's definition under its exposed name. The catalog keeps the upstream's definition
/// verbatim; the MCP keys of what a client sees are written here, at the MCP edge.
fn exposed_prompt(prompt: &CatalogPrompt) -> JsonObject {
    let mut definition = prompt.definition.clone();
    definition.insert("name".into(), prompt.name.clone().into());
    definition
}

/// A resource's definition under its exposed URI.
fn exposed_resource(resource: &CatalogResource) -> JsonObject {
    let mut definition = resource.definition.clone();
    definition.insert("uri".into(), resource.uri.clone().into());
    definition
}

/// A resource template's definition under its exposed URI template (MCP's `uriTemplate`).
fn exposed_template(template: &CatalogResourceTemplate) -> JsonObject {
    let mut definition = template.definition.clone();
    definition.insert("uriTemplate".into(), template.uri_template.clone().into());
    definition
}

/// What a door lists: exposed definitions, ready to serve.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Listing {
    pub tools: Vec<JsonObject>,
    pub prompts: Vec<JsonObject>,
    pub resources: Vec<JsonObject>,
    pub resource_templates: Vec<JsonObject>,
}

impl Listing {
    /// The same listing with each resource, resource template and prompt marked with the
    /// configured server it comes from (`server`, beside the MCP keys), as the dashboard shows them.
    pub fn with_servers(mut self, catalog: &portico_core::Catalog) -> Listing {
        fn mark<'a>(
            items: &mut [JsonObject],
            key: &str,
            servers: impl Iterator<Item = (&'a str, &'a str)>,
        ) {
            let servers: std::collections::HashMap<&str, &str> = servers.collect();
            for item in items {
                let server = item
                    .get(key)
                    .and_then(|v| v.as_str())
                    .and_then(|exposed| servers.get(exposed))
                    .map(|server| server.to_string());
                if let Some(server) = server {
                    item.insert("server".into(), server.into());
                }
            }
        }
        mark(
            &mut self.resources,
            "uri",
            catalog
                .resources()
                .iter()
                .map(|r| (r.uri.as_str(), r.server.as_str())),
        );
        mark(
            &mut self.resource_templates,
            "uriTemplate",
            catalog
                .resource_templates()
                .iter()
                .map(|t| (t.uri_template.as_str(), t.server.as_str())),
        );
        mark(
            &mut self.prompts,
            "name",
            catalog
                .prompts()
                .iter()
                .map(|p| (p.name.as_str(), p.server.as_str())),
        );
        self
    }

    /// A fingerprint of each list, for telling later whether it changed.
    pub(crate) fn digest(&self) -> ListingDigest {
        ListingDigest {
            tools: digest_of(&[&self.tools]),
            prompts: digest_of(&[&self.prompts]),
            resources: digest_of(&[&self.resources, &self.resource_templates]),
        }
    }
}

/// What a session remembers of the listing it last announced, to send a list_changed only for a real
/// change. A fingerprint rather than a copy: every session keeps one for as long as it lives, and a
/// copy of the listing (tool schemas included) cost ~75 KB per idle session. Two different lists
/// collide with probability 2^-64; a key order change counts as a change (a harmless extra
/// list_changed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ListingDigest {
    pub(crate) tools: u64,
    pub(crate) prompts: u64,
    /// Resources and resource templates together: one notification covers both.
    pub(crate) resources: u64,
}

/// Hashes the lists' JSON as it is written, without building the text.
fn digest_of(lists: &[&[JsonObject]]) -> u64 {
    use std::hash::Hasher;
    struct HashWriter(std::hash::DefaultHasher);
    impl std::io::Write for HashWriter {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.write(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut writer = HashWriter(std::hash::DefaultHasher::new());
    for list in lists {
        // Writing JSON into a hasher cannot fail.
        let _ = serde_json::to_writer(&mut writer, list);
    }
    writer.0.finish()
}

impl Backend {
    /// What `principal` (a door's client: `client:stdio`, `client:laptop`) may list.
    pub async fn listing(&self, principal: &Principal) -> Result<Listing, BackendError> {
        // Boxed, so that the ~10 KB of state a listing needs while it runs is allocated only then:
        // every session has a task waiting to list again on the next change, and inline that state
        // would be kept by each of them for as long as they idle.
        Box::pin(self.listing_now(principal)).await
    }

    async fn listing_now(&self, principal: &Principal) -> Result<Listing, BackendError> {
        match self {
            Backend::Local(engine) => {
                settle(engine.upstreams()).await;
                let tools = engine
                    .pipeline()
                    .list_with_failures(principal)
                    .await
                    .into_iter()
                    .map(crate::host_policy::advertised)
                    .collect();
                let catalog = engine.catalog();
                Ok(Listing {
                    tools,
                    prompts: catalog.prompts().iter().map(exposed_prompt).collect(),
                    resources: catalog.resources().iter().map(exposed_resource).collect(),
                    resource_templates: catalog
                        .resource_templates()
                        .iter()
                        .map(exposed_template)
                        .collect(),
                })
            }
            Backend::Daemon(link) => {
                let catalog = link.upstream.list_catalog().await?;
                Ok(Listing {
                    tools: catalog.tools.into_iter().map(|t| t.definition).collect(),
                    prompts: catalog.prompts.into_iter().map(|p| p.definition).collect(),
                    resources: catalog
                        .resources
                        .into_iter()
                        .map(|r| r.definition)
                        .collect(),
                    resource_templates: catalog
                        .resource_templates
                        .into_iter()
                        .map(|t| t.definition)
                        .collect(),
                })
            }
        }
    }

    /// Calls a tool for `principal`: in process, through the call pipeline (a policy's refusal
    /// answered with its envelope); before a daemon, as the daemon answers (for the client its
    /// token makes this door).
    pub async fn call_tool(
        &self,
        principal: &Principal,
        name: &str,
        arguments: Option<JsonObject>,
        context: &CallContext,
    ) -> Result<ToolResult, BackendError> {
        Ok(match self {
            Backend::Local(engine) => {
                let context = ToolContext::of(principal.clone()).with_relay(context.clone());
                let outcome = engine.pipeline().call(name, arguments, &context).await?;
                // A passed-through upstream's protocol error is the door's answer, not a result.
                if let Some(error @ PipelineError::Source(portico_core::CallError::Protocol(_))) =
                    outcome.error
                {
                    return Err(error.into());
                }
                crate::host_policy::served(outcome)
            }
            // Boxed so the in-process arm's future (and the task rmcp spawns per request to hold it)
            // is not sized by the client side of a proxied call.
            Backend::Daemon(link) => {
                Box::pin(link.upstream.call_tool_with(name, arguments, context)).await?
            }
        })
    }

    pub async fn complete(
        &self,
        reference: &CompletionRef,
        request: JsonObject,
    ) -> Result<JsonObject, BackendError> {
        Ok(match self {
            Backend::Local(engine) => {
                let hub = engine.upstreams();
                settle(hub).await;
                hub.complete(reference, request).await?
            }
            // The daemon's names are the ones its clients use: passed on as they are.
            Backend::Daemon(link) => link.upstream.complete(reference, request).await?,
        })
    }

    pub async fn set_log_level(&self, level: &str) -> Result<(), BackendError> {
        match self {
            Backend::Local(engine) => {
                let hub = engine.upstreams();
                settle(hub).await;
                hub.set_log_level(level).await;
            }
            Backend::Daemon(link) => link.upstream.set_level(level).await?,
        }
        Ok(())
    }

    pub async fn subscribe(&self, uri: &str) -> Result<(), BackendError> {
        match self {
            Backend::Local(engine) => {
                let hub = engine.upstreams();
                settle(hub).await;
                hub.subscribe_resource(uri).await?
            }
            Backend::Daemon(link) => link.upstream.subscribe(uri).await?,
        }
        Ok(())
    }

    /// Asks the upstream `server` (a daemon: the daemon) about one of its tasks.
    pub async fn task_operation(
        &self,
        server: &str,
        operation: portico_core::TaskOperation,
    ) -> Result<JsonObject, BackendError> {
        Ok(match self {
            Backend::Local(engine) => engine.upstreams().task_operation(server, operation).await?,
            Backend::Daemon(link) => link.upstream.task_operation(operation).await?,
        })
    }

    pub async fn unsubscribe(&self, uri: &str) -> Result<(), BackendError> {
        match self {
            Backend::Local(engine) => engine.upstreams().unsubscribe_resource(uri).await?,
            Backend::Daemon(link) => link.upstream.unsubscribe(uri).await?,
        }
        Ok(())
    }

    /// Exposed URIs of subscribed resources that changed.
    /// List changes a passed-through upstream announced with its lists unchanged, which the door
    /// passes on; none before a daemon, whose door decides.
    pub fn announced_changes(&self) -> Option<broadcast::Receiver<portico_engine::ListKind>> {
        match self {
            Backend::Local(engine) => Some(engine.upstreams().announced_changes()),
            Backend::Daemon(_) => None,
        }
    }

    pub fn resource_updates(&self) -> broadcast::Receiver<String> {
        match self {
            Backend::Local(engine) => engine.upstreams().resource_updates(),
            Backend::Daemon(link) => link.resource_updates.subscribe(),
        }
    }

    pub async fn read_resource(&self, uri: &str) -> Result<JsonObject, BackendError> {
        Ok(match self {
            Backend::Local(engine) => {
                let hub = engine.upstreams();
                if hub.catalog().resolve_resource_uri(uri).is_none() {
                    settle(hub).await;
                }
                hub.read_resource(uri).await?
            }
            Backend::Daemon(link) => link.upstream.read_resource(uri).await?,
        })
    }

    pub async fn get_prompt(
        &self,
        name: &str,
        arguments: Option<JsonObject>,
        rest: JsonObject,
    ) -> Result<JsonObject, BackendError> {
        Ok(match self {
            Backend::Local(engine) => {
                let hub = engine.upstreams();
                if hub.catalog().prompt(name).is_none() {
                    settle(hub).await;
                }
                hub.get_prompt(name, arguments, rest).await?
            }
            Backend::Daemon(link) => link.upstream.get_prompt(name, arguments, rest).await?,
        })
    }

    /// Fires when what clients can list may have changed.
    pub fn changes(&self) -> watch::Receiver<u64> {
        match self {
            Backend::Local(engine) => engine.upstreams().changes(),
            Backend::Daemon(link) => link.changes.clone(),
        }
    }
}

/// Whether a `prompts/get` answer is a 2026-07-28 input round (the upstream asks its client
/// questions first) rather than the prompt's messages.
pub fn asks_for_input(result: &JsonObject) -> bool {
    result.get("resultType").and_then(|t| t.as_str()) == Some("input_required")
}

/// Right after start, servers are still connecting. An IDE lists tools once, at once (and not every
/// client re-lists on list_changed), or calls a tool it remembers: give the first connections a moment
/// before answering from an incomplete catalog.
async fn settle(hub: &Upstreams) {
    if !hub.settled() {
        let _ = tokio::time::timeout(SETTLE_WAIT, hub.wait_settled()).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(value: serde_json::Value) -> JsonObject {
        value.as_object().cloned().unwrap_or_default()
    }

    fn listing(tools: &[&str], resources: &[&str], templates: &[&str]) -> Listing {
        let named = |names: &[&str]| {
            names
                .iter()
                .map(|n| object(serde_json::json!({"name": n})))
                .collect()
        };
        Listing {
            tools: named(tools),
            prompts: Vec::new(),
            resources: named(resources),
            resource_templates: named(templates),
        }
    }

    #[test]
    fn exposed_definitions_are_the_upstreams_but_for_the_exposed_name_or_uri() {
        use portico_core::{Catalog, PromptDef, ResourceDef, ResourceTemplateDef, ServerCatalog};
        let meta = serde_json::json!({"vendor/x": 1});
        let server = ServerCatalog {
            server: "files".into(),
            prompts: vec![PromptDef {
                name: "summarise".into(),
                definition: object(
                    serde_json::json!({"name": "summarise", "description": "d", "_meta": meta}),
                ),
            }],
            resources: vec![ResourceDef {
                uri: "file:///a.txt".into(),
                definition: object(
                    serde_json::json!({"uri": "file:///a.txt", "name": "a", "_meta": meta}),
                ),
            }],
            resource_templates: vec![ResourceTemplateDef {
                uri_template: "file:///{path}".into(),
                definition: object(
                    serde_json::json!({"uriTemplate": "file:///{path}", "name": "any", "_meta": meta}),
                ),
            }],
            ..Default::default()
        };
        let catalog = Catalog::build(&[server]);
        assert_eq!(
            exposed_prompt(&catalog.prompts()[0]),
            object(
                serde_json::json!({"name": "mcp_files_summarise", "description": "d", "_meta": meta})
            )
        );
        assert_eq!(
            exposed_resource(&catalog.resources()[0]),
            object(
                serde_json::json!({"uri": "portico://files/file:///a.txt", "name": "a", "_meta": meta})
            )
        );
        assert_eq!(
            exposed_template(&catalog.resource_templates()[0]),
            object(serde_json::json!({
                "uriTemplate": "portico://files/file:///{path}", "name": "any", "_meta": meta
            }))
        );
    }

    #[test]
    fn a_digest_changes_with_its_own_list_only() {
        let base = listing(&["a", "b"], &["r"], &[]).digest();
        assert_eq!(listing(&["a", "b"], &["r"], &[]).digest(), base);

        let more_tools = listing(&["a", "b", "c"], &["r"], &[]).digest();
        assert_ne!(more_tools.tools, base.tools);
        assert_eq!(
            (more_tools.prompts, more_tools.resources),
            (base.prompts, base.resources)
        );

        let mut described = listing(&["a", "b"], &["r"], &[]);
        described.tools[1].insert("description".into(), "new".into());
        assert_ne!(described.digest().tools, base.tools);

        // A resource that became a template is a resource list change.
        let moved = listing(&["a", "b"], &[], &["r"]).digest();
        assert_ne!(moved.resources, base.resources);
        assert_eq!(moved.tools, base.tools);
    }
}
