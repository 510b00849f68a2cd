//! Where a served catalog comes from: the in-process engine, or a running daemon reached over MCP.

use std::sync::Arc;

use portico_core::JsonObject;
use portico_core::relay::CallContext;
use portico_engine::Engine;
use portico_hub::{Hub, HubError};
use portico_mcp::{Upstream, UpstreamError};
use portico_pipeline::{PipelineError, ToolContext};
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
    Hub(#[from] HubError),
    #[error(transparent)]
    Daemon(#[from] UpstreamError),
    #[error(transparent)]
    Pipeline(#[from] PipelineError),
}

impl BackendError {
    pub fn is_unknown_tool(&self) -> bool {
        matches!(self, BackendError::Hub(HubError::UnknownTool { .. }))
            || matches!(
                self,
                BackendError::Pipeline(PipelineError::UnknownTool { .. })
            )
            || matches!(
                self,
                BackendError::Daemon(UpstreamError::Remote {
                    code: Some(-32602),
                    ..
                })
            )
    }
}

/// What a door lists: exposed definitions, ready to serve.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Listing {
    pub tools: Vec<JsonObject>,
    pub prompts: Vec<JsonObject>,
    pub resources: Vec<JsonObject>,
    pub resource_templates: Vec<JsonObject>,
}

impl Backend {
    /// What `door` (a label for audit records: "stdio", "http") may list.
    pub async fn listing(&self, door: &str) -> Result<Listing, BackendError> {
        match self {
            Backend::Local(engine) => {
                settle(&engine.hub).await;
                let tools = engine
                    .pipeline
                    .list(&portico_pipeline::Principal::client(door))
                    .await
                    .into_iter()
                    .map(|entry| (*entry.definition).clone())
                    .collect();
                let catalog = engine.hub.catalog();
                Ok(Listing {
                    tools,
                    prompts: catalog
                        .prompts()
                        .iter()
                        .map(|p| p.exposed_definition())
                        .collect(),
                    resources: catalog
                        .resources()
                        .iter()
                        .map(|r| r.exposed_definition())
                        .collect(),
                    resource_templates: catalog
                        .resource_templates()
                        .iter()
                        .map(|t| t.exposed_definition())
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

    /// Calls a tool for a client at `door`: in process, through the call pipeline.
    pub async fn call_tool(
        &self,
        door: &str,
        name: &str,
        arguments: Option<JsonObject>,
        context: &CallContext,
    ) -> Result<JsonObject, BackendError> {
        Ok(match self {
            Backend::Local(engine) => {
                let context = ToolContext::client(door).with_relay(context.clone());
                engine
                    .pipeline
                    .call(name, arguments, &context)
                    .await?
                    .result
            }
            Backend::Daemon(link) => {
                link.upstream
                    .call_tool_with(name, arguments, context)
                    .await?
            }
        })
    }

    pub async fn complete(&self, params: JsonObject) -> Result<JsonObject, BackendError> {
        Ok(match self {
            Backend::Local(engine) => {
                let hub = &engine.hub;
                settle(hub).await;
                hub.complete(params).await?
            }
            Backend::Daemon(link) => link.upstream.complete(params).await?,
        })
    }

    pub async fn set_log_level(&self, level: &str) -> Result<(), BackendError> {
        match self {
            Backend::Local(engine) => {
                let hub = &engine.hub;
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
                let hub = &engine.hub;
                settle(hub).await;
                hub.subscribe_resource(uri).await?
            }
            Backend::Daemon(link) => link.upstream.subscribe(uri).await?,
        }
        Ok(())
    }

    pub async fn unsubscribe(&self, uri: &str) -> Result<(), BackendError> {
        match self {
            Backend::Local(engine) => engine.hub.unsubscribe_resource(uri).await?,
            Backend::Daemon(link) => link.upstream.unsubscribe(uri).await?,
        }
        Ok(())
    }

    /// Exposed URIs of subscribed resources that changed.
    pub fn resource_updates(&self) -> broadcast::Receiver<String> {
        match self {
            Backend::Local(engine) => engine.hub.resource_updates(),
            Backend::Daemon(link) => link.resource_updates.subscribe(),
        }
    }

    pub async fn read_resource(&self, uri: &str) -> Result<JsonObject, BackendError> {
        Ok(match self {
            Backend::Local(engine) => {
                let hub = &engine.hub;
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
    ) -> Result<JsonObject, BackendError> {
        Ok(match self {
            Backend::Local(engine) => {
                let hub = &engine.hub;
                if hub.catalog().prompt(name).is_none() {
                    settle(hub).await;
                }
                hub.get_prompt(name, arguments).await?
            }
            Backend::Daemon(link) => link.upstream.get_prompt(name, arguments).await?,
        })
    }

    /// Fires when what clients can list may have changed.
    pub fn changes(&self) -> watch::Receiver<u64> {
        match self {
            Backend::Local(engine) => engine.hub.subscribe(),
            Backend::Daemon(link) => link.changes.clone(),
        }
    }
}

/// Right after start, servers are still connecting. An IDE lists tools once, at once (and not every
/// client re-lists on list_changed), or calls a tool it remembers: give the first connections a moment
/// before answering from an incomplete catalog.
async fn settle(hub: &Hub) {
    if !hub.settled() {
        let _ = tokio::time::timeout(SETTLE_WAIT, hub.wait_settled()).await;
    }
}
