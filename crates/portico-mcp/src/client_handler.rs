//! What Portico does with requests and notifications an upstream sends it: list changes go to the hub;
//! sampling, elicitation and roots go back to the client whose call is in flight, and so do progress and
//! logging, in the order the upstream sent them (the transport queues those per call, see
//! [`crate::ordering`], and each call relays its own queue while it waits for its answer).

// Sampling, roots and logging are deprecated from protocol 2026-07-28 on (SEP-2577), but servers of every
// earlier era use them, and relaying them is the point of this module.
#![allow(deprecated)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use portico_core::relay::{Caller, RelayError, RelayNotification, RelayRequest};
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
    /// Known once the request goes to the transport; a request the upstream sends before then (it can
    /// be that quick) still finds the call as the newest one.
    sent: Option<(ProgressToken, RequestId)>,
    caller: Arc<dyn Caller>,
    /// Progress and log notifications for this call, in the order the upstream sent them. The
    /// transport fills it (see [`crate::ordering`]); the call itself relays them while it waits.
    relay: mpsc::UnboundedSender<Relayed>,
}

/// A notification to pass on to a call's client.
#[derive(Debug, PartialEq)]
pub(crate) struct Relayed {
    pub(crate) notification: RelayNotification,
    pub(crate) params: JsonObject,
}

/// Marks an outgoing request with the call it belongs to, so the transport can record the progress
/// token and id rmcp gave it before it reaches the upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CallRegistration(u64);

/// A notification that the calling client did not take within this time is dropped, and so are the
/// rest of that call's: a client that stopped reading cannot hold its call up for longer than this.
const RELAY_TIMEOUT: Duration = Duration::from_secs(2);

/// Unregisters a call when dropped, whether it finished, failed or was cancelled.
pub(crate) struct ActiveCall {
    calls: Arc<ActiveCalls>,
    registration: u64,
    caller: Arc<dyn Caller>,
    relay: mpsc::UnboundedReceiver<Relayed>,
    /// Set when the client failed to take a notification in time; nothing more is relayed to it.
    stalled: bool,
}

impl Drop for ActiveCall {
    fn drop(&mut self) {
        if let Ok(mut calls) = self.calls.calls.lock() {
            calls.retain(|call| call.registration != self.registration);
        }
    }
}

impl ActiveCall {
    /// The mark to put on the call's request (see [`CallRegistration`]).
    pub(crate) fn marker(&self) -> CallRegistration {
        CallRegistration(self.registration)
    }

    /// Awaits `response` while relaying the call's progress and logs to its client in the order they
    /// arrived; those that arrived before the answer are relayed before this returns.
    pub(crate) async fn relay_until<T>(&mut self, response: impl Future<Output = T>) -> T {
        let mut response = std::pin::pin!(response);
        let output = loop {
            tokio::select! {
                biased;
                Some(next) = self.relay.recv() => self.relay_one(next).await,
                output = &mut response => break output,
            }
        };
        // The transport queued everything that came before the answer by the time the answer
        // arrived.
        while let Ok(next) = self.relay.try_recv() {
            self.relay_one(next).await;
        }
        output
    }

    async fn relay_one(&mut self, relayed: Relayed) {
        if self.stalled {
            return;
        }
        let notify = self.caller.notify(relayed.notification, relayed.params);
        if tokio::time::timeout(RELAY_TIMEOUT, notify).await.is_err() {
            tracing::debug!(
                "the client took no {} within {RELAY_TIMEOUT:?}; relaying no more of this call's notifications",
                crate::methods::notification_method(relayed.notification)
            );
            self.stalled = true;
        }
    }
}

impl ActiveCalls {
    /// Registers a call before its request is sent; mark the request with [`ActiveCall::marker`].
    pub(crate) fn register(self: &Arc<Self>, caller: Arc<dyn Caller>) -> ActiveCall {
        let registration = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        let (relay, queue) = mpsc::unbounded_channel();
        self.calls
            .lock()
            .expect("active calls lock")
            .push(InFlight {
                registration,
                sent: None,
                caller: caller.clone(),
                relay,
            });
        ActiveCall {
            calls: self.clone(),
            registration,
            caller,
            relay: queue,
            stalled: false,
        }
    }

    /// Records the progress token and id rmcp gave a marked request, as it goes to the transport.
    pub(crate) fn sent(
        &self,
        call: CallRegistration,
        progress_token: ProgressToken,
        request_id: RequestId,
    ) {
        if let Ok(mut calls) = self.calls.lock()
            && let Some(found) = calls.iter_mut().find(|c| c.registration == call.0)
        {
            found.sent = Some((progress_token, request_id));
        }
    }

    /// Queues a progress notification for the call it belongs to (without its token: the client's
    /// own goes in instead). Progress for no call of ours is dropped.
    pub(crate) fn progress(&self, params: &ProgressNotificationParam) {
        let Ok(calls) = self.calls.lock() else { return };
        let Some(call) = calls.iter().find(|call| {
            call.sent
                .as_ref()
                .is_some_and(|(t, _)| t == &params.progress_token)
        }) else {
            return;
        };
        let mut relayed = to_object(params);
        relayed.remove("progressToken");
        let _ = call.relay.send(Relayed {
            notification: RelayNotification::Progress,
            params: relayed,
        });
    }

    /// Queues a log message for every call in flight: their clients see the upstream's log, as they
    /// would talking to it directly.
    pub(crate) fn log(&self, params: &LoggingMessageNotificationParam) {
        let Ok(calls) = self.calls.lock() else { return };
        for call in calls.iter() {
            let _ = call.relay.send(Relayed {
                notification: RelayNotification::Log,
                params: to_object(params),
            });
        }
    }

    /// The client to ask for `method`. Over Streamable HTTP the upstream's request arrives on the
    /// response stream of the call that caused it, and rmcp says which (`origin`): that call's client
    /// is asked. Otherwise (stdio, the standalone stream) nothing links the request to a call, and the
    /// newest call whose client accepts `method` is the likeliest cause.
    fn caller_for(
        &self,
        origin: Option<&RequestId>,
        request: RelayRequest,
    ) -> Option<Arc<dyn Caller>> {
        let calls = self.calls.lock().ok()?;
        if let Some(origin) = origin
            && let Some(call) = calls
                .iter()
                .find(|call| call.sent.as_ref().is_some_and(|(_, id)| id == origin))
        {
            return call.caller.accepts(request).then(|| call.caller.clone());
        }
        calls
            .iter()
            .rev()
            .find(|call| call.caller.accepts(request))
            .map(|call| call.caller.clone())
    }
}

/// Writes an upstream's log message to Portico's own log, under the server's name.
pub(crate) fn log_upstream_message(server: &str, params: &LoggingMessageNotificationParam) {
    let logger = params.logger.as_deref().unwrap_or("");
    let data = &params.data;
    match params.level {
        LoggingLevel::Debug => tracing::debug!(server, logger, "{data}"),
        LoggingLevel::Info | LoggingLevel::Notice => tracing::info!(server, logger, "{data}"),
        LoggingLevel::Warning => tracing::warn!(server, logger, "{data}"),
        _ => tracing::error!(server, logger, "{data}"),
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
            .caller_for(origin_of(&context), RelayRequest::Sampling)
            .ok_or_else(|| self.no_caller("sampling"))?;
        let answer = caller
            .request(RelayRequest::Sampling, to_object(&params))
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
            .caller_for(origin_of(&context), RelayRequest::Elicitation)
            .ok_or_else(|| self.no_caller("elicitation"))?;
        let params = to_object(&request);
        let mut answer = caller
            .request(RelayRequest::Elicitation, params.clone())
            .await
            .map_err(relay_error)?;
        crate::elicitation::apply_defaults(&params, &mut answer);
        from_object("elicitation", answer)
    }

    async fn list_roots(
        &self,
        context: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, McpError> {
        match self
            .active
            .caller_for(origin_of(&context), RelayRequest::Roots)
        {
            Some(caller) => {
                let answer = caller
                    .request(RelayRequest::Roots, JsonObject::new())
                    .await
                    .map_err(relay_error)?;
                from_object("roots", answer)
            }
            // No client to ask: Portico itself exposes no roots.
            None => Ok(ListRootsResult::default()),
        }
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
}

#[cfg(test)]
mod tests {
    use portico_core::relay::{BoxFuture, SamplingAnswer, SamplingError, SamplingRequest};
    use rmcp::model::NumberOrString;

    use super::*;

    struct Fake {
        name: &'static str,
        sampling: bool,
        /// Notifications this client received, in order.
        heard: Mutex<Vec<(RelayNotification, JsonObject)>>,
        /// A client that never takes a notification.
        stuck: bool,
    }

    fn fake(name: &'static str, sampling: bool) -> Arc<Fake> {
        Arc::new(Fake {
            name,
            sampling,
            heard: Mutex::default(),
            stuck: false,
        })
    }

    impl Caller for Fake {
        fn accepts(&self, request: RelayRequest) -> bool {
            request != RelayRequest::Sampling || self.sampling
        }

        fn request<'a>(
            &'a self,
            _request: RelayRequest,
            _params: JsonObject,
        ) -> BoxFuture<'a, Result<JsonObject, RelayError>> {
            Box::pin(async move {
                Ok(JsonObject::from_iter([(
                    "from".to_string(),
                    self.name.into(),
                )]))
            })
        }

        fn sample<'a>(
            &'a self,
            request: SamplingRequest,
        ) -> BoxFuture<'a, Result<SamplingAnswer, SamplingError>> {
            crate::sample_through(self, request)
        }

        fn notify<'a>(
            &'a self,
            notification: RelayNotification,
            params: JsonObject,
        ) -> BoxFuture<'a, ()> {
            Box::pin(async move {
                if self.stuck {
                    std::future::pending::<()>().await;
                }
                // A yield between notifications, as a real client's write has.
                tokio::task::yield_now().await;
                self.heard.lock().unwrap().push((notification, params));
            })
        }
    }

    fn token(n: i64) -> ProgressToken {
        ProgressToken(NumberOrString::Number(n))
    }

    fn progress(n: i64, value: f64) -> ProgressNotificationParam {
        serde_json::from_value(serde_json::json!({"progressToken": n, "progress": value})).unwrap()
    }

    fn log(text: &str) -> LoggingMessageNotificationParam {
        serde_json::from_value(serde_json::json!({"level": "info", "data": text})).unwrap()
    }

    async fn name_of(caller: Option<Arc<dyn Caller>>) -> Option<String> {
        let answer = caller?
            .request(RelayRequest::Sampling, JsonObject::new())
            .await
            .ok()?;
        answer["from"].as_str().map(str::to_string)
    }

    #[tokio::test]
    async fn requests_go_to_the_call_they_came_with_else_the_newest_able_caller() {
        let calls = Arc::new(ActiveCalls::default());
        let register = |name, sampling, n: i64| {
            let call = calls.register(fake(name, sampling));
            calls.sent(call.marker(), token(n), RequestId::Number(n + 9));
            call
        };
        let first = register("first", true, 1);
        let second = register("second", true, 2);
        let third = register("third", false, 3);

        // Linked by the transport: exactly that call's client, even though newer calls exist.
        assert_eq!(
            name_of(calls.caller_for(Some(&RequestId::Number(10)), RelayRequest::Sampling))
                .await
                .as_deref(),
            Some("first")
        );
        // Linked to a call whose client cannot sample: refused, not handed to another client.
        assert!(
            calls
                .caller_for(Some(&RequestId::Number(12)), RelayRequest::Sampling)
                .is_none()
        );
        // Not linked: the newest caller that can.
        assert_eq!(
            name_of(calls.caller_for(None, RelayRequest::Sampling))
                .await
                .as_deref(),
            Some("second")
        );

        drop(second);
        assert_eq!(
            name_of(calls.caller_for(None, RelayRequest::Sampling))
                .await
                .as_deref(),
            Some("first")
        );
        drop((first, third));
        assert!(calls.calls.lock().unwrap().is_empty());
    }

    #[tokio::test]
    async fn progress_finds_its_call_by_token_and_logs_go_to_every_call() {
        let calls = Arc::new(ActiveCalls::default());
        let mut mine = calls.register(fake("mine", false));
        calls.sent(mine.marker(), token(1), RequestId::Number(1));
        let mut other = calls.register(fake("other", false));
        calls.sent(other.marker(), token(2), RequestId::Number(2));
        calls.progress(&progress(1, 1.0));
        calls.progress(&progress(2, 7.0));
        calls.progress(&progress(3, 9.0));
        calls.log(&log("both"));
        let relayed = |call: &mut ActiveCall| {
            std::iter::from_fn(|| call.relay.try_recv().ok()).collect::<Vec<_>>()
        };
        let without_token = |value: f64| Relayed {
            notification: RelayNotification::Progress,
            params: to_object(&serde_json::json!({"progress": value})),
        };
        let logged = Relayed {
            notification: RelayNotification::Log,
            params: to_object(&log("both")),
        };
        assert_eq!(relayed(&mut mine), [without_token(1.0), logged]);
        let logged = Relayed {
            notification: RelayNotification::Log,
            params: to_object(&log("both")),
        };
        assert_eq!(relayed(&mut other), [without_token(7.0), logged]);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_call_relays_its_notifications_in_arrival_order_all_before_its_answer() {
        let calls = Arc::new(ActiveCalls::default());
        let client = fake("client", false);
        let mut call = calls.register(client.clone());
        calls.sent(call.marker(), token(5), RequestId::Number(5));
        let (answer, answered) = tokio::sync::oneshot::channel();
        // The transport's side: notifications as they arrive, then the answer.
        let transport = {
            let calls = calls.clone();
            tokio::spawn(async move {
                for n in 1..=200 {
                    calls.progress(&progress(5, f64::from(n)));
                    if n % 50 == 0 {
                        calls.log(&log(&format!("after {n}")));
                        tokio::task::yield_now().await;
                    }
                }
                answer.send("the answer").unwrap();
            })
        };
        let result = call.relay_until(answered).await.unwrap();
        assert_eq!(result, "the answer");
        transport.await.unwrap();
        let heard = client.heard.lock().unwrap();
        let mut expected = Vec::new();
        for n in 1..=200 {
            expected.push((
                RelayNotification::Progress,
                to_object(&serde_json::json!({"progress": f64::from(n)})),
            ));
            if n % 50 == 0 {
                expected.push((
                    RelayNotification::Log,
                    to_object(&log(&format!("after {n}"))),
                ));
            }
        }
        assert_eq!(*heard, expected);
    }

    #[tokio::test(start_paused = true)]
    async fn a_client_that_stops_reading_holds_its_call_up_only_once() {
        let calls = Arc::new(ActiveCalls::default());
        let client = Arc::new(Fake {
            name: "stuck",
            sampling: false,
            heard: Mutex::default(),
            stuck: true,
        });
        let mut call = calls.register(client.clone());
        calls.sent(call.marker(), token(1), RequestId::Number(1));
        for n in 1..=10 {
            calls.progress(&progress(1, f64::from(n)));
        }
        let started = tokio::time::Instant::now();
        let result = call.relay_until(async { 42 }).await;
        assert_eq!(result, 42);
        assert_eq!(started.elapsed(), RELAY_TIMEOUT);
        assert!(client.heard.lock().unwrap().is_empty());
    }
}
