//! The upstream servers as doors see them: their catalog, status and change signals, and the MCP
//! requests that are not tool calls (resources, prompts, completion, log level). Tool calls are not
//! here: they go through [`crate::Engine::pipeline`], so no door can reach an upstream tool around
//! the pipeline's checks.

use std::sync::Arc;

use portico_core::{Catalog, CompletionRef, JsonObject, ServerStatus};
use portico_hub::{Hub, HubError};

/// Why a request through [`Upstreams`] got no answer, with the hub's message, which says what failed
/// and what to do. Doors tell the kinds apart to choose their protocol's error without knowing the
/// hub's own error type.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UpstreamsError {
    /// No prompt by that name in the catalog.
    #[error("{0}")]
    UnknownPrompt(String),
    /// No resource at that URI in the catalog.
    #[error("{0}")]
    UnknownResource(String),
    /// The upstream refused with a JSON-RPC error of its own, passed on with its code (and, from
    /// a passed-through upstream, its own message and `data`).
    #[error("{message}")]
    Remote {
        code: i32,
        message: String,
        data: Option<serde_json::Value>,
    },
    /// Anything else: the server is not ready, or the request timed out or failed on the way.
    #[error("{0}")]
    Failed(String),
}

impl From<HubError> for UpstreamsError {
    fn from(error: HubError) -> Self {
        let message = error.to_string();
        if let HubError::Answered(answered) = error {
            return UpstreamsError::Remote {
                code: answered.code,
                message: answered.message,
                data: answered.data,
            };
        }
        match (&error, error.jsonrpc_code()) {
            (HubError::UnknownPrompt { .. } | HubError::UnknownTool { .. }, _) => {
                UpstreamsError::UnknownPrompt(message)
            }
            (HubError::UnknownResource { .. }, _) => UpstreamsError::UnknownResource(message),
            (_, Some(code)) => UpstreamsError::Remote {
                code,
                message,
                data: None,
            },
            _ => UpstreamsError::Failed(message),
        }
    }
}
use tokio::sync::{broadcast, watch};

/// Why a server could not be restarted, disabled or enabled, with the hub's message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ServerActionError {
    /// No server by that name is configured.
    #[error("{0}")]
    UnknownServer(String),
    /// Not in the server's state: the config disables it, or it is disabled and asked to restart.
    #[error("{0}")]
    Conflict(String),
    /// Portico is shutting down.
    #[error("{0}")]
    Unavailable(String),
}

impl From<HubError> for ServerActionError {
    fn from(error: HubError) -> Self {
        let message = error.to_string();
        match error {
            HubError::UnknownServer { .. } => ServerActionError::UnknownServer(message),
            HubError::DisabledInConfig { .. } | HubError::Disabled { .. } => {
                ServerActionError::Conflict(message)
            }
            _ => ServerActionError::Unavailable(message),
        }
    }
}

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

    /// Drops the server's session and connects it again now (see [`Hub::restart_server`]).
    pub async fn restart(&self, server: &str) -> Result<(), ServerActionError> {
        Ok(self.hub.restart_server(server).await?)
    }

    /// Closes the server's session and keeps it closed, its tools out of the catalog, until
    /// [`Upstreams::enable`] (see [`Hub::disable_server`]). The config file is not changed.
    pub async fn disable(&self, server: &str) -> Result<(), ServerActionError> {
        Ok(self.hub.disable_server(server).await?)
    }

    /// Connects a server [`Upstreams::disable`] disabled.
    pub async fn enable(&self, server: &str) -> Result<(), ServerActionError> {
        Ok(self.hub.enable_server(server).await?)
    }

    /// What the server's stdio child wrote to stderr, kept across its restarts and bounded (see
    /// [`Hub::server_log`]); none for a server not in the config.
    pub fn server_log(&self, server: &str) -> Option<portico_hub::ServerLog> {
        self.hub.server_log(server)
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
    ) -> Result<JsonObject, UpstreamsError> {
        Ok(self.hub.complete(reference, request).await?)
    }

    /// Forwards `logging/setLevel` to every ready upstream that logs.
    pub async fn set_log_level(&self, level: &str) {
        self.hub.set_log_level(level).await;
    }

    /// Subscribes to a resource at its upstream; changes arrive on [`Upstreams::resource_updates`].
    pub async fn subscribe_resource(&self, uri: &str) -> Result<(), UpstreamsError> {
        Ok(self.hub.subscribe_resource(uri).await?)
    }

    /// Asks `server` about one of its tasks (see [`Hub::task_operation`]).
    pub async fn task_operation(
        &self,
        server: &str,
        operation: portico_core::TaskOperation,
    ) -> Result<JsonObject, UpstreamsError> {
        Ok(self.hub.task_operation(server, operation).await?)
    }

    pub async fn unsubscribe_resource(&self, uri: &str) -> Result<(), UpstreamsError> {
        Ok(self.hub.unsubscribe_resource(uri).await?)
    }

    /// Exposed URIs of subscribed resources as their upstreams report changes.
    pub fn resource_updates(&self) -> broadcast::Receiver<String> {
        self.hub.resource_updates()
    }

    /// List changes the passed-through server announced with its lists unchanged (see
    /// [`Hub::announced_changes`]).
    pub fn announced_changes(&self) -> broadcast::Receiver<portico_hub::ListKind> {
        self.hub.announced_changes()
    }

    pub async fn get_prompt(
        &self,
        name: &str,
        arguments: Option<JsonObject>,
        rest: JsonObject,
    ) -> Result<JsonObject, UpstreamsError> {
        Ok(self.hub.get_prompt(name, arguments, rest).await?)
    }

    pub async fn read_resource(&self, uri: &str) -> Result<JsonObject, UpstreamsError> {
        Ok(self.hub.read_resource(uri).await?)
    }
}

#[cfg(test)]
mod tests {
    use portico_core::ServerState;
    use portico_mcp::UpstreamError;

    use super::*;

    fn remote(code: Option<i32>) -> HubError {
        HubError::Upstream(UpstreamError::Remote {
            server: "s".into(),
            what: "getting a prompt".into(),
            code,
            message: "bad argument".into(),
            data: Some(Box::new(serde_json::json!({"uri": "x://y"}))),
        })
    }

    #[test]
    fn hub_errors_keep_their_kind_and_message() {
        let cases = [
            (
                HubError::UnknownPrompt { name: "p".into() },
                UpstreamsError::UnknownPrompt("no prompt named `p`".into()),
            ),
            (
                HubError::UnknownResource {
                    uri: "x://y".into(),
                },
                UpstreamsError::UnknownResource(
                    "no resource `x://y`: Portico resource URIs look like portico://SERVER/URI"
                        .into(),
                ),
            ),
            (
                remote(Some(-32602)),
                UpstreamsError::Remote {
                    code: -32602,
                    message: "server `s`: getting a prompt failed: bad argument".into(),
                    data: None,
                },
            ),
            (
                HubError::Answered(portico_core::ProtocolError {
                    code: -32602,
                    message: "Resource not found".into(),
                    data: Some(serde_json::json!({"uri": "x://y"})),
                }),
                UpstreamsError::Remote {
                    code: -32602,
                    message: "Resource not found".into(),
                    data: Some(serde_json::json!({"uri": "x://y"})),
                },
            ),
            (
                remote(None),
                UpstreamsError::Failed("server `s`: getting a prompt failed: bad argument".into()),
            ),
        ];
        for (hub, expected) in cases {
            let message = hub.to_string();
            let error = UpstreamsError::from(hub);
            assert_eq!(error, expected);
            assert_eq!(error.to_string(), message);
        }
        let unavailable = HubError::Unavailable {
            server: "s".into(),
            state: ServerState::Starting,
            last_error: None,
        };
        let message = unavailable.to_string();
        assert_eq!(
            UpstreamsError::from(unavailable),
            UpstreamsError::Failed(message)
        );
    }
}
