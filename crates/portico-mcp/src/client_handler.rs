//! What Portico does with requests and notifications an upstream sends it: list changes go to the hub;
//! progress, logging, sampling, elicitation and roots go back to the client whose call is in flight.

// Sampling, roots and logging are deprecated from protocol 2026-07-28 on (SEP-2577), but servers of every
// earlier era use them, and relaying them is the point of this module.
#![allow(deprecated)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use portico_core::relay::{Caller, RelayError, methods};
use portico_core::{JsonObject, to_object};
use rmcp::ClientHandler;
use rmcp::ErrorData as McpError;
use rmcp::model::{
    ClientCapabilities, ClientConfig, CreateMessageRequestParams, CreateMessageResult,
    ElicitRequestParams, ElicitResult, ErrorCode, Implementation, ListRootsResult, LoggingLevel,
    LoggingMessageNotificationParam, ProgressNotificationParam, ProgressToken,
    ResourceUpdatedNotificationParam,
};
use rmcp::service::{NotificationContext, RequestContext, RoleClient};
use serde::de::DeserializeOwned;
use tokio::sync::mpsc;

/// Something an upstream told us that the hub must act on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UpstreamEvent {
    ToolsChanged,
    PromptsChanged,
    ResourcesChanged,
    /// A subscribed resource changed; the upstream's own URI.
    ResourceUpdated(String),
}

/// Calls in flight on one upstream session that have a client to relay to, each with the progress token
/// the call was sent with, so progress finds its way back to the right client.
#[derive(Default)]
pub(crate) struct ActiveCalls {
    next: AtomicU64,
    calls: Mutex<Vec<InFlight>>,
}

/// `(registration id, progress token, caller)`.
type InFlight = (u64, ProgressToken, Arc<dyn Caller>);

/// Unregisters a call when dropped, whether it finished, failed or was cancelled.
pub(crate) struct ActiveCall {
    calls: Arc<ActiveCalls>,
    pub(crate) id: u64,
}

impl Drop for ActiveCall {
    fn drop(&mut self) {
        if let Ok(mut calls) = self.calls.calls.lock() {
            calls.retain(|(id, _, _)| *id != self.id);
        }
    }
}

impl ActiveCalls {
    pub(crate) fn register(
        self: &Arc<Self>,
        caller: Arc<dyn Caller>,
        token: ProgressToken,
    ) -> ActiveCall {
        let id = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        self.calls
            .lock()
            .expect("active calls lock")
            .push((id, token, caller));
        ActiveCall {
            calls: self.clone(),
            id,
        }
    }

    fn by_token(&self, token: &ProgressToken) -> Option<Arc<dyn Caller>> {
        let calls = self.calls.lock().ok()?;
        calls
            .iter()
            .find(|(_, t, _)| t == token)
            .map(|(_, _, c)| c.clone())
    }

    /// The most recent call whose client accepts `method`. A server-to-client request carries no link to
    /// the call that caused it, and the newest call is the likeliest cause.
    fn latest_accepting(&self, method: &str) -> Option<Arc<dyn Caller>> {
        let calls = self.calls.lock().ok()?;
        calls
            .iter()
            .rev()
            .find(|(_, _, c)| c.accepts(method))
            .map(|(_, _, c)| c.clone())
    }

    fn all(&self) -> Vec<Arc<dyn Caller>> {
        self.calls
            .lock()
            .map(|calls| calls.iter().map(|(_, _, c)| c.clone()).collect())
            .unwrap_or_default()
    }
}

/// The rmcp client handler for one upstream.
pub(crate) struct PorticoClient {
    pub(crate) server: String,
    pub(crate) events: mpsc::UnboundedSender<UpstreamEvent>,
    pub(crate) active: Arc<ActiveCalls>,
    /// The version to propose in `initialize` when the config pins one.
    pub(crate) protocol_version: Option<rmcp::model::ProtocolVersion>,
}

fn from_object<T: DeserializeOwned>(what: &str, object: JsonObject) -> Result<T, McpError> {
    serde_json::from_value(serde_json::Value::Object(object)).map_err(|e| {
        McpError::internal_error(
            format!("the client's {what} answer is not valid MCP: {e}"),
            None,
        )
    })
}

fn relay_error(error: RelayError) -> McpError {
    McpError::new(ErrorCode(error.code), error.message, None)
}

impl PorticoClient {
    fn notify(&self, event: UpstreamEvent) {
        // The hub may already be gone during shutdown; nothing to refresh then.
        let _ = self.events.send(event);
    }

    fn no_caller(&self, what: &str) -> McpError {
        McpError::new(
            ErrorCode::INVALID_REQUEST,
            format!(
                "Portico has no client that supports {what} waiting on a call to `{}`; the request is refused",
                self.server
            ),
            None,
        )
    }
}

impl ClientHandler for PorticoClient {
    fn get_info(&self) -> ClientConfig {
        // Declared so upstreams will ask; each request is relayed to the client whose call is in flight,
        // or refused cleanly when that client did not declare the capability.
        let capabilities: ClientCapabilities = serde_json::from_value(serde_json::json!({
            "sampling": {},
            "elicitation": {"form": {}, "url": {}},
            "roots": {"listChanged": false},
        }))
        .unwrap_or_default();
        let info = ClientConfig::new(
            capabilities,
            Implementation::new("portico", env!("CARGO_PKG_VERSION")),
        );
        match &self.protocol_version {
            Some(version) => info.with_protocol_version(version.clone()),
            None => info,
        }
    }

    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, McpError> {
        let caller = self
            .active
            .latest_accepting(methods::SAMPLING)
            .ok_or_else(|| self.no_caller("sampling"))?;
        let answer = caller
            .request(methods::SAMPLING, to_object(&params))
            .await
            .map_err(relay_error)?;
        from_object("sampling", answer)
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, McpError> {
        let caller = self
            .active
            .latest_accepting(methods::ELICITATION)
            .ok_or_else(|| self.no_caller("elicitation"))?;
        let answer = caller
            .request(methods::ELICITATION, to_object(&request))
            .await
            .map_err(relay_error)?;
        from_object("elicitation", answer)
    }

    async fn list_roots(
        &self,
        _context: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, McpError> {
        match self.active.latest_accepting(methods::ROOTS) {
            Some(caller) => {
                let answer = caller
                    .request(methods::ROOTS, JsonObject::new())
                    .await
                    .map_err(relay_error)?;
                from_object("roots", answer)
            }
            // No client to ask: Portico itself exposes no roots.
            None => Ok(ListRootsResult::default()),
        }
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let Some(caller) = self.active.by_token(&params.progress_token) else {
            return;
        };
        let mut relayed = to_object(&params);
        relayed.remove("progressToken");
        caller.notify(methods::PROGRESS, relayed).await;
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.notify(UpstreamEvent::ToolsChanged);
    }

    async fn on_prompt_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.notify(UpstreamEvent::PromptsChanged);
    }

    async fn on_resource_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.notify(UpstreamEvent::ResourcesChanged);
    }

    async fn on_resource_updated(
        &self,
        params: ResourceUpdatedNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.notify(UpstreamEvent::ResourceUpdated(params.uri.to_string()));
    }

    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let server = &self.server;
        let logger = params.logger.as_deref().unwrap_or("");
        let data = &params.data;
        match params.level {
            LoggingLevel::Debug => tracing::debug!(server, logger, "{data}"),
            LoggingLevel::Info | LoggingLevel::Notice => tracing::info!(server, logger, "{data}"),
            LoggingLevel::Warning => tracing::warn!(server, logger, "{data}"),
            _ => tracing::error!(server, logger, "{data}"),
        }
        // Clients with a call in flight see the upstream's log too, as they would talking to it directly.
        let relayed = to_object(&params);
        for caller in self.active.all() {
            caller.notify(methods::LOG, relayed.clone()).await;
        }
    }
}
