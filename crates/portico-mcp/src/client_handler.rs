//! What Portico does with requests and notifications an upstream sends it: list changes go to the hub;
//! progress, logging, sampling, elicitation and roots go back to the client whose call is in flight.

// Sampling, roots and logging are deprecated from protocol 2026-07-28 on (SEP-2577), but servers of every
// earlier era use them, and relaying them is the point of this module.
#![allow(deprecated)]

use std::collections::HashMap;
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
use tokio::sync::{Notify, mpsc};

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
    /// Notifications received but not yet relayed: progress by token, log messages under `None`. rmcp
    /// handles notifications on tasks of their own, so a call's answer can overtake the progress and
    /// logs sent before it; the transport counts each as it arrives (see [`crate::ordering`]) and the
    /// call waits for its counts to drain.
    pending: Mutex<HashMap<Option<ProgressToken>, usize>>,
    relayed: Notify,
}

struct InFlight {
    registration: u64,
    /// Known once the request is sent; a request the upstream sends before then (it can be that quick)
    /// still finds the call as the newest one.
    sent: Option<(ProgressToken, RequestId)>,
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

impl ActiveCall {
    /// Records the token and id rmcp gave the request.
    pub(crate) fn sent(&self, progress_token: ProgressToken, request_id: RequestId) {
        if let Ok(mut calls) = self.calls.calls.lock()
            && let Some(call) = calls
                .iter_mut()
                .find(|c| c.registration == self.registration)
        {
            call.sent = Some((progress_token, request_id));
        }
    }
}

impl ActiveCalls {
    /// Registers a call before its request is sent.
    pub(crate) fn register(self: &Arc<Self>, caller: Arc<dyn Caller>) -> ActiveCall {
        let registration = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        self.calls
            .lock()
            .expect("active calls lock")
            .push(InFlight {
                registration,
                sent: None,
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
            .find(|call| call.sent.as_ref().is_some_and(|(t, _)| t == token))
            .map(|call| call.caller.clone())
    }

    /// A progress (`Some(token)`) or log (`None`) notification arrived on the transport, in order.
    pub(crate) fn arrived(&self, key: Option<&ProgressToken>) {
        if let Ok(mut pending) = self.pending.lock() {
            *pending.entry(key.cloned()).or_default() += 1;
        }
    }

    /// That notification has been relayed (or dropped).
    fn handled(&self, key: Option<&ProgressToken>) {
        if let Ok(mut pending) = self.pending.lock() {
            let key = key.cloned();
            if let Some(count) = pending.get_mut(&key) {
                *count -= 1;
                if *count == 0 {
                    pending.remove(&key);
                }
            }
        }
        self.relayed.notify_waiters();
    }

    /// Drops the counts `notifications_relayed` waited on in vain, so that a notification that never
    /// reached the handler (routed elsewhere by rmcp) cannot hold up later calls too.
    pub(crate) fn forget_pending(&self, token: &ProgressToken) {
        if let Ok(mut pending) = self.pending.lock() {
            pending.remove(&Some(token.clone()));
            pending.remove(&None);
        }
    }

    /// Waits until the progress for `token`, and every log message, that arrived so far is relayed.
    pub(crate) async fn notifications_relayed(&self, token: &ProgressToken) {
        let progress = Some(token.clone());
        loop {
            let relayed = self.relayed.notified();
            let waiting = self.pending.lock().is_ok_and(|pending| {
                pending.contains_key(&progress) || pending.contains_key(&None)
            });
            if !waiting {
                return;
            }
            relayed.await;
        }
    }

    /// The client to ask for `method`. Over Streamable HTTP the upstream's request arrives on the
    /// response stream of the call that caused it, and rmcp says which (`origin`): that call's client
    /// is asked. Otherwise (stdio, the standalone stream) nothing links the request to a call, and the
    /// newest call whose client accepts `method` is the likeliest cause.
    fn caller_for(&self, origin: Option<&RequestId>, method: &str) -> Option<Arc<dyn Caller>> {
        let calls = self.calls.lock().ok()?;
        if let Some(origin) = origin
            && let Some(call) = calls
                .iter()
                .find(|call| call.sent.as_ref().is_some_and(|(_, id)| id == origin))
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
        if let Some(caller) = self.active.by_token(&params.progress_token) {
            let mut relayed = to_object(&params);
            relayed.remove("progressToken");
            caller.notify(methods::PROGRESS, relayed).await;
        }
        self.active.handled(Some(&params.progress_token));
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
        self.active.handled(None);
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
        let register = |name, sampling, n: i64| {
            let call = calls.register(Arc::new(Fake { name, sampling }));
            call.sent(token(n), RequestId::Number(n + 9));
            call
        };
        let first = register("first", true, 1);
        let second = register("second", true, 2);
        let third = register("third", false, 3);

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

    #[tokio::test]
    async fn a_call_waits_for_progress_and_logs_that_arrived_before_its_answer() {
        let calls = Arc::new(ActiveCalls::default());
        calls.arrived(Some(&token(5)));
        calls.arrived(Some(&token(5)));
        calls.arrived(None);
        let waiting = tokio::spawn({
            let calls = calls.clone();
            async move { calls.notifications_relayed(&token(5)).await }
        });
        calls.handled(Some(&token(5)));
        calls.handled(Some(&token(5)));
        assert!(
            calls.pending.lock().unwrap().contains_key(&None),
            "the log is still pending"
        );
        calls.handled(None);
        waiting.await.unwrap();
        assert!(calls.pending.lock().unwrap().is_empty());
        // Nothing pending: no wait at all; another call's progress does not hold this one.
        calls.arrived(Some(&token(7)));
        calls.notifications_relayed(&token(6)).await;
    }
}
