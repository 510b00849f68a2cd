//! Server-initiated SSE disconnection for the suite's `server-sse-polling` scenario (SEP-1699).
//!
//! The scenario calls `test_reconnection` over a raw POST and expects the server to end that POST's
//! SSE stream before the result (after a priming event with an `id` and a `retry` field), then to
//! deliver the result on a `GET` that carries `Last-Event-ID`. rmcp 3.11 can do both halves —
//! [`LocalSessionHandle::close_sse_stream`] ends a request's stream while keeping its event cache, and a
//! `GET` with `Last-Event-ID` resumes it — but a tool handler cannot reach them: it knows neither the
//! session's handle nor rmcp's per-POST stream number (the `http_request_id` that event ids such as
//! `1/0` end with).
//!
//! [`StreamControl`] closes that gap. It is the [`SessionManager`] the HTTP service runs on: it
//! delegates everything to rmcp's [`LocalSessionManager`], except that it opens the request stream of a
//! `test_reconnection` call itself (with the same public calls `LocalSessionManager::create_stream`
//! makes) to learn its stream number, and it watches `resume` to tell the waiting tool that the client
//! is back. Everything else — sessions, priming events, caching, replay — is rmcp's own code.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::Stream;
use rmcp::model::{ClientJsonRpcMessage, ClientRequest, RequestId, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_server::SessionManager;
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionHandle, LocalSessionManager, LocalSessionManagerError,
};
use rmcp::transport::streamable_http_server::session::{
    EventStore, RestoreOutcome, ServerSseMessage, SessionId,
};
use tokio::sync::Notify;

use crate::catalog::RECONNECTION_TOOL;

/// How long `test_reconnection` waits for the client to come back before answering anyway. The suite
/// reconnects at once; an SDK client waits the `retry` interval first. An answer sent while no stream
/// is attached is lost, so this only bounds how long a client that never reconnects holds the tool.
const RESUME_WAIT: Duration = Duration::from_secs(10);

/// rmcp's number for one POST's SSE stream within a session (`LocalSessionWorker`'s `HttpRequestId`).
type StreamNumber = u64;

/// What `test_reconnection` managed to do; logged at debug level to explain a failing scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The stream was closed and the client resumed it, so the answer goes out on the new stream.
    Resumed,
    /// The stream was closed but the client did not resume within `RESUME_WAIT` (10 s).
    NotResumed,
    /// Nothing to close: stdio, a request outside a session, or a stream rmcp no longer knows.
    NotApplicable,
}

/// A [`SessionManager`] that is rmcp's [`LocalSessionManager`] plus the bookkeeping `test_reconnection`
/// needs. See the module docs.
pub struct StreamControl {
    inner: LocalSessionManager,
    /// Stream numbers of `test_reconnection` calls whose handler has not picked them up yet.
    calls: Mutex<HashMap<(SessionId, RequestId), StreamNumber>>,
    /// Closed streams whose tool is waiting for the client to resume them.
    waiting: Mutex<HashMap<(SessionId, StreamNumber), Arc<Notify>>>,
}

impl StreamControl {
    /// `retry` is the SSE `retry:` hint in priming events: how long a client waits before
    /// reconnecting to a stream the server ended.
    pub fn new(retry: Duration) -> Self {
        let mut inner = LocalSessionManager::default();
        inner.session_config.sse_retry = Some(retry);
        Self {
            inner,
            calls: Mutex::default(),
            waiting: Mutex::default(),
        }
    }

    fn retry(&self) -> Option<Duration> {
        self.inner.session_config.sse_retry
    }

    async fn handle(&self, id: &SessionId) -> Option<LocalSessionHandle> {
        self.inner.sessions.read().await.get(id).cloned()
    }

    /// Ends the SSE stream carrying request `request` of `session` (after one more priming event, so
    /// the client's `Last-Event-ID` points at this stream) and waits until the client resumes it.
    pub async fn close_and_await_resume(&self, session: &str, request: &RequestId) -> Outcome {
        let session: SessionId = session.into();
        let Some(stream) = lock(&self.calls).remove(&(session.clone(), request.clone())) else {
            return Outcome::NotApplicable;
        };
        let Some(handle) = self.handle(&session).await else {
            return Outcome::NotApplicable;
        };
        // Registered before closing, so a client that resumes at once cannot be missed.
        let resumed = Arc::new(Notify::new());
        let key = (session, stream);
        lock(&self.waiting).insert(key.clone(), Arc::clone(&resumed));
        let outcome = match handle.close_sse_stream(stream, self.retry()).await {
            Ok(()) => match tokio::time::timeout(RESUME_WAIT, resumed.notified()).await {
                Ok(()) => Outcome::Resumed,
                Err(_) => Outcome::NotResumed,
            },
            Err(error) => {
                tracing::warn!(%error, "test_reconnection could not close its SSE stream");
                Outcome::NotApplicable
            }
        };
        lock(&self.waiting).remove(&key);
        outcome
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // The maps stay consistent across a panic elsewhere (single inserts/removes), so poison is moot.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The JSON-RPC id of `message` if it is `tools/call` for `test_reconnection`.
fn reconnection_call(message: &ClientJsonRpcMessage) -> Option<&RequestId> {
    let ClientJsonRpcMessage::Request(request) = message else {
        return None;
    };
    match &request.request {
        ClientRequest::CallToolRequest(call) if call.params.name == RECONNECTION_TOOL => {
            Some(&request.id)
        }
        _ => None,
    }
}

/// The stream number in a session event id: rmcp writes `<index>/<stream>` for request streams and a
/// bare `<index>` for the standalone GET stream.
fn stream_of_event_id(event_id: &str) -> Option<StreamNumber> {
    event_id.split_once('/')?.1.parse().ok()
}

impl SessionManager for StreamControl {
    type Error = LocalSessionManagerError;
    type Transport = <LocalSessionManager as SessionManager>::Transport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        self.inner.create_session().await
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        self.inner.initialize_session(id, message).await
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        self.inner.has_session(id).await
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        lock(&self.calls).retain(|(session, _), _| session != id);
        self.inner.close_session(id).await
    }

    /// `LocalSessionManager::create_stream`, spelled out so the stream number is visible.
    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let handle = self
            .handle(id)
            .await
            .ok_or_else(|| LocalSessionManagerError::SessionNotFound(id.clone()))?;
        let mut receiver = handle.establish_request_wise_channel().await?;
        let stream = receiver.http_request_id;
        // Recorded before the message reaches the handler, which looks it up.
        let tracked = match (stream, reconnection_call(&message)) {
            (Some(stream), Some(request)) => {
                let key = (id.clone(), request.clone());
                lock(&self.calls).insert(key.clone(), stream);
                Some(key)
            }
            _ => None,
        };
        if let Err(error) = handle.push_message(message, stream).await {
            // No handler will ever pick the entry up.
            if let Some(key) = tracked {
                lock(&self.calls).remove(&key);
            }
            return Err(error.into());
        }
        Ok(futures::stream::poll_fn(move |cx| {
            receiver.inner.poll_recv(cx)
        }))
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        self.inner.accept_message(id, message).await
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.inner.create_standalone_stream(id).await
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let stream_number = stream_of_event_id(&last_event_id);
        // Once this returns, rmcp has attached the new stream, so the tool's answer will reach it.
        let stream = self.inner.resume(id, last_event_id).await?;
        if let Some(number) = stream_number
            && let Some(resumed) = lock(&self.waiting).get(&(id.clone(), number))
        {
            resumed.notify_one();
        }
        Ok(stream)
    }

    async fn restore_session(
        &self,
        id: SessionId,
    ) -> Result<RestoreOutcome<Self::Transport>, Self::Error> {
        self.inner.restore_session(id).await
    }

    fn event_store(&self) -> Option<Arc<dyn EventStore>> {
        self.inner.event_store()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_ids_name_their_stream() {
        assert_eq!(stream_of_event_id("1/0"), Some(0));
        assert_eq!(stream_of_event_id("12/7"), Some(7));
        assert_eq!(stream_of_event_id("3"), None);
        assert_eq!(stream_of_event_id("x/y"), None);
    }

    #[test]
    fn only_reconnection_calls_are_tracked() {
        let call = |name: &str| -> ClientJsonRpcMessage {
            serde_json::from_value(serde_json::json!({
                "jsonrpc": "2.0", "id": 7, "method": "tools/call",
                "params": {"name": name, "arguments": {}}
            }))
            .unwrap()
        };
        assert_eq!(
            reconnection_call(&call(RECONNECTION_TOOL)),
            Some(&RequestId::Number(7))
        );
        assert_eq!(reconnection_call(&call("test_simple_text")), None);
    }
}
