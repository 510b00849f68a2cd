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
use rmcp::model::RequestId;
use rmcp::model::{
    ClientCapabilities, ClientConfig, CreateMessageRequestParams, CreateMessageResult,
    ElicitRequestParams, ElicitResult, ErrorCode, Implementation, ListRootsResult, LoggingLevel,
    LoggingMessageNotificationParam, ProgressNotificationParam, ProgressToken,
    ResourceUpdatedNotificationParam,
};
use rmcp::service::{InboundStreamOrigin, NotificationContext, RequestContext, RoleClient};
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
/// and request id the call was sent with, so what the upstream sends back finds the right client.
#[derive(Default)]
pub(crate) struct ActiveCalls {
    next: AtomicU64,
    calls: Mutex<Vec<InFlight>>,
}

struct InFlight {
    registration: u64,
    progress_token: ProgressToken,
    request_id: RequestId,
    caller: Arc<dyn Caller>,
}

/// Unregisters a call when dropped, whether it finished, failed or was cancelled.
pub(crate) struct ActiveCall {
    calls: Arc<ActiveCalls>,
    registration: u64,
}

impl Drop for ActiveCall {
    fn drop(&mut self) {
        if let Ok(mut calls) = self.calls.calls.lock() {
            calls.retain(|call| call.registration != self.registration);
        }
    }
}

impl ActiveCalls {
    pub(crate) fn register(
        self: &Arc<Self>,
        caller: Arc<dyn Caller>,
        progress_token: ProgressToken,
        request_id: RequestId,
    ) -> ActiveCall {
        let registration = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        self.calls
            .lock()
            .expect("active calls lock")
            .push(InFlight {
                registration,
                progress_token,
                request_id,
                caller,
            });
        ActiveCall {
            calls: self.clone(),
            registration,
        }
    }

    fn by_token(&self, token: &ProgressToken) -> Option<Arc<dyn Caller>> {
        let calls = self.calls.lock().ok()?;
        calls
            .iter()
            .find(|call| &call.progress_token == token)
            .map(|call| call.caller.clone())
    }

    /// The client to ask for `method`. Over Streamable HTTP the upstream's request arrives on the
    /// response stream of the call that caused it, and rmcp says which (`origin`): that call's client
    /// is asked. Otherwise (stdio, the standalone stream) nothing links the request to a call, and the
    /// newest call whose client accepts `method` is the likeliest cause.
    fn caller_for(&self, origin: Option<&RequestId>, method: &str) -> Option<Arc<dyn Caller>> {
        let calls = self.calls.lock().ok()?;
        if let Some(origin) = origin
            && let Some(call) = calls.iter().find(|call| &call.request_id == origin)
        {
            return call.caller.accepts(method).then(|| call.caller.clone());
        }
        calls
            .iter()
            .rev()
            .find(|call| call.caller.accepts(method))
            .map(|call| call.caller.clone())
    }

    fn all(&self) -> Vec<Arc<dyn Caller>> {
        self.calls
            .lock()
            .map(|calls| calls.iter().map(|call| call.caller.clone()).collect())
            .unwrap_or_default()
    }
}

/// The call an upstream's request belongs to, when the transport knows.
fn origin_of(context: &RequestContext<RoleClient>) -> Option<&RequestId> {
    match context.extensions.get::<InboundStreamOrigin>()? {
        InboundStreamOrigin::OutboundRequest(id) => Some(id),
        InboundStreamOrigin::Unassociated => None,
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
        context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, McpError> {
        let caller = self
            .active
            .caller_for(origin_of(&context), methods::SAMPLING)
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
        context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, McpError> {
        let caller = self
            .active
            .caller_for(origin_of(&context), methods::ELICITATION)
            .ok_or_else(|| self.no_caller("elicitation"))?;
        let answer = caller
            .request(methods::ELICITATION, to_object(&request))
            .await
            .map_err(relay_error)?;
        from_object("elicitation", answer)
    }

    async fn list_roots(
        &self,
        context: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, McpError> {
        match self.active.caller_for(origin_of(&context), methods::ROOTS) {
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

#[cfg(test)]
mod tests {
    use portico_core::relay::BoxFuture;
    use rmcp::model::NumberOrString;

    use super::*;

    struct Fake {
        name: &'static str,
        sampling: bool,
    }

    impl Caller for Fake {
        fn accepts(&self, method: &str) -> bool {
            method != methods::SAMPLING || self.sampling
        }

        fn request<'a>(
            &'a self,
            _method: &'a str,
            _params: JsonObject,
        ) -> BoxFuture<'a, Result<JsonObject, RelayError>> {
            Box::pin(async move {
                Ok(JsonObject::from_iter([(
                    "from".to_string(),
                    self.name.into(),
                )]))
            })
        }

        fn notify<'a>(&'a self, _method: &'a str, _params: JsonObject) -> BoxFuture<'a, ()> {
            Box::pin(async {})
        }
    }

    fn token(n: i64) -> ProgressToken {
        ProgressToken(NumberOrString::Number(n))
    }

    async fn name_of(caller: Option<Arc<dyn Caller>>) -> Option<String> {
        let answer = caller?
            .request(methods::SAMPLING, JsonObject::new())
            .await
            .ok()?;
        answer["from"].as_str().map(str::to_string)
    }

    #[tokio::test]
    async fn requests_go_to_the_call_they_came_with_else_the_newest_able_caller() {
        let calls = Arc::new(ActiveCalls::default());
        let first = calls.register(
            Arc::new(Fake {
                name: "first",
                sampling: true,
            }),
            token(1),
            RequestId::Number(10),
        );
        let second = calls.register(
            Arc::new(Fake {
                name: "second",
                sampling: true,
            }),
            token(2),
            RequestId::Number(11),
        );
        let third = calls.register(
            Arc::new(Fake {
                name: "third",
                sampling: false,
            }),
            token(3),
            RequestId::Number(12),
        );

        // Linked by the transport: exactly that call's client, even though newer calls exist.
        assert_eq!(
            name_of(calls.caller_for(Some(&RequestId::Number(10)), methods::SAMPLING))
                .await
                .as_deref(),
            Some("first")
        );
        // Linked to a call whose client cannot sample: refused, not handed to another client.
        assert!(
            calls
                .caller_for(Some(&RequestId::Number(12)), methods::SAMPLING)
                .is_none()
        );
        // Not linked: the newest caller that can.
        assert_eq!(
            name_of(calls.caller_for(None, methods::SAMPLING))
                .await
                .as_deref(),
            Some("second")
        );
        // Progress finds its call by token.
        assert!(calls.by_token(&token(2)).is_some());

        drop(second);
        assert_eq!(
            name_of(calls.caller_for(None, methods::SAMPLING))
                .await
                .as_deref(),
            Some("first")
        );
        assert!(calls.by_token(&token(2)).is_none());
        drop((first, third));
        assert!(calls.all().is_empty());
    }
}
