//! The upstream servers as doors see them: their catalog, status and change signals, and the MCP
//! requests that are not tool calls (resources, prompts, completion, log level). Tool calls are not
//! here: they go through [`crate::Engine::pipeline`], so no door can reach an upstream tool around
//! the pipeline's checks.

use std::sync::Arc;

use portico_core::{Catalog, CompletionRef, JsonObject, ServerStatus};
use portico_hub::{Hub, HubError};
use tokio::sync::{broadcast, watch};

/// A view of the hub without its tool calls. Cheap to clone.
#[derive(Clone)]
pub struct Upstreams {
    hub: Hub,
}

impl Upstreams {
    /// The view of `hub`, for a program that runs a hub without an engine (the CLI's listings).
    pub fn new(hub: Hub) -> Self {
        Upstreams { hub }
    }

    /// The aggregated catalog as it is now: rebuilt whole and swapped, never changed in place.
    pub fn catalog(&self) -> Arc<Catalog> {
        self.hub.catalog()
    }

    /// A status snapshot of every configured server, in config order.
    pub fn servers(&self) -> Vec<ServerStatus> {
        self.hub.servers()
    }

    /// Every configured server's name, in config order.
    pub fn server_names(&self) -> Vec<String> {
        self.hub.server_names()
    }

    /// Starts the named servers that are not connected yet (see [`Hub::connect`]).
    pub fn connect(&self, servers: &[String]) {
        self.hub.connect(servers);
    }

    /// Notifies on every state or catalog change.
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.hub.subscribe()
    }

    /// True once every connected server has finished its first connection attempt.
    pub fn settled(&self) -> bool {
        self.hub.settled()
    }

    /// Waits until [`Upstreams::settled`].
    pub async fn wait_settled(&self) {
        self.hub.wait_settled().await;
    }

    /// Routes `completion/complete` by its reference (see [`Hub::complete`]).
    pub async fn complete(
        &self,
        reference: &CompletionRef,
        request: JsonObject,
    ) -> Result<JsonObject, HubError> {
        self.hub.complete(reference, request).await
    }

    /// Forwards `logging/setLevel` to every ready upstream that logs.
    pub async fn set_log_level(&self, level: &str) {
        self.hub.set_log_level(level).await;
    }

    /// Subscribes to a resource at its upstream; changes arrive on [`Upstreams::resource_updates`].
    pub async fn subscribe_resource(&self, uri: &str) -> Result<(), HubError> {
        self.hub.subscribe_resource(uri).await
    }

    pub async fn unsubscribe_resource(&self, uri: &str) -> Result<(), HubError> {
        self.hub.unsubscribe_resource(uri).await
    }

    /// Exposed URIs of subscribed resources as their upstreams report changes.
    pub fn resource_updates(&self) -> broadcast::Receiver<String> {
        self.hub.resource_updates()
    }

    pub async fn get_prompt(
        &self,
        name: &str,
        arguments: Option<JsonObject>,
    ) -> Result<JsonObject, HubError> {
        self.hub.get_prompt(name, arguments).await
    }

    pub async fn read_resource(&self, uri: &str) -> Result<JsonObject, HubError> {
        self.hub.read_resource(uri).await
    }
}
