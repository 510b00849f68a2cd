//! The legacy MCP "HTTP with SSE" server transport (protocol revision 2024-11-05): `GET /sse` and
//! `POST /message?sessionId=…`.
//!
//! Why it is hand-written: rmcp ships only the Streamable HTTP server, yet clients built for the
//! 2024-11-05 transport are still in use and can speak nothing else. This module is the thin part
//! rmcp lacks — a session map, a channel transport and the SSE framing — and each session is an
//! ordinary rmcp server session over [`PorticoServer::for_session`], so MCP itself (handshake, era
//! negotiation, every method) is exactly what `/mcp` serves.
//!
//! How a session runs:
//! 1. `GET /sse` creates a session with an unguessable id (128 random bits) and answers
//!    `text/event-stream`. The first event is `endpoint`, whose data is the relative URI to POST to
//!    (`/message?sessionId=<id>`); every server→client message follows as an `event: message`, and a
//!    comment is sent when the stream has been quiet for [`KEEP_ALIVE`] so proxies keep it open.
//! 2. `POST /message?sessionId=<id>` with a JSON-RPC message (or a batch) hands it to that session
//!    and answers `202 Accepted`; the answer to a request arrives on the SSE stream.
//! 3. The session lives exactly as long as its SSE response: when the client disconnects the body is
//!    dropped, which cancels the rmcp session and removes it from the map, so a later POST gets 404.
//!    Daemon shutdown ends every stream.
//!
//! Security: the routes sit inside the router behind the same door middleware (`security::check`)
//! as `/mcp`, so `Host`, `Origin` and the bearer token are checked on the GET and on every POST
//! alike. Knowing a session id is not enough to use the session without passing those checks.
//! Request bodies are capped by `[server] max_message_bytes` and concurrent sessions by
//! [`MAX_SESSIONS`], so neither can exhaust memory.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::extract::{OriginalUri, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Router};
use futures::StreamExt;
use portico_mcp_server::PorticoServer;
use portico_pipeline::Principal;
use rmcp::ServiceExt;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::service::{RoleServer, RxJsonRpcMessage, TxJsonRpcMessage};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::in_flight::{self, InFlight};
use crate::security::ClientIdentity;

/// Concurrent sessions allowed; each holds a task and two channels, so an unbounded number would let
/// a client that never closes its streams grow the daemon without limit.
pub(crate) const MAX_SESSIONS: usize = 1024;

/// Quiet time after which a comment is sent: proxies and load balancers commonly drop idle
/// connections after 30–60 s.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// Messages buffered per direction. When full, the sender waits: a slow SSE reader slows the session
/// down rather than growing a queue.
const CHANNEL_CAPACITY: usize = 64;

/// One open session, as the POST route needs it: where to deliver client messages.
struct Session {
    inbound: mpsc::Sender<ClientJsonRpcMessage>,
    /// Who opened it: only they may post to it.
    owner: ClientIdentity,
    /// Its requests not answered yet.
    unanswered: Unanswered,
}

/// A session's requests not answered yet, by id, each counted as a call in progress until its answer
/// is handed to the SSE stream: the POST that brought it was answered 202 at once, so shutdown would
/// otherwise not wait for it and end the stream before the answer.
type Unanswered = Arc<Mutex<HashMap<String, in_flight::Held>>>;

/// The key of a request id in [`Unanswered`].
fn id_key(id: &impl serde::Serialize) -> String {
    serde_json::to_string(id).unwrap_or_default()
}

type Sessions = Arc<Mutex<HashMap<String, Session>>>;

#[derive(Clone)]
struct LegacySse {
    sessions: Sessions,
    server: PorticoServer,
    shutdown: CancellationToken,
    max_body_bytes: usize,
    max_sessions: usize,
    in_flight: Option<InFlight>,
}

/// The open legacy sessions, counted for `/metrics`.
#[derive(Clone)]
pub(crate) struct OpenSessions(Sessions);

impl OpenSessions {
    pub(crate) fn count(&self) -> usize {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

/// The `/sse` and `/message` routes, and their open sessions. `shutdown` ends every open stream;
/// `max_body_bytes` caps a POST.
/// `replica` names this process when it shares its store with other replicas: its session ids then
/// start with `NAME.`, so that a load balancer can send a session's messages to the replica holding
/// its stream (docs/replicas.md); another replica answers them 404, as for any unknown session.
/// `in_flight`, when given, counts each request until its answer is on the stream.
pub(crate) fn routes(
    server: PorticoServer,
    shutdown: CancellationToken,
    max_body_bytes: usize,
    replica: Option<&str>,
    in_flight: Option<InFlight>,
) -> (Router, OpenSessions) {
    let sessions = Sessions::default();
    let mut router = routes_with(
        server,
        shutdown,
        max_body_bytes,
        MAX_SESSIONS,
        sessions.clone(),
        in_flight,
    );
    if let Some(name) = replica {
        router = router.layer(Extension(SessionIdPrefix(format!("{name}."))));
    }
    (router, OpenSessions(sessions))
}

#[cfg(test)]
fn routes_with_limit(
    server: PorticoServer,
    shutdown: CancellationToken,
    max_body_bytes: usize,
    max_sessions: usize,
) -> Router {
    routes_with(
        server,
        shutdown,
        max_body_bytes,
        max_sessions,
        Sessions::default(),
        None,
    )
}

fn routes_with(
    server: PorticoServer,
    shutdown: CancellationToken,
    max_body_bytes: usize,
    max_sessions: usize,
    sessions: Sessions,
    in_flight: Option<InFlight>,
) -> Router {
    let state = LegacySse {
        sessions,
        server,
        shutdown,
        max_body_bytes,
        max_sessions,
        in_flight,
    };
    Router::new()
        .route("/sse", get(open_session))
        .route("/message", post(post_message))
        .with_state(state)
}

/// What this replica's session ids start with (see [`routes`]).
#[derive(Clone)]
struct SessionIdPrefix(String);

/// `GET /sse`: registers a session, starts its rmcp server, and streams its messages.
async fn open_session(
    State(state): State<LegacySse>,
    OriginalUri(uri): OriginalUri,
    identity: Option<Extension<ClientIdentity>>,
    client: Option<Extension<Principal>>,
    prefix: Option<Extension<SessionIdPrefix>>,
) -> Response {
    let owner = match identity {
        Some(Extension(identity)) => identity,
        None => ClientIdentity("anonymous".into()),
    };
    let prefix = prefix.map(|Extension(SessionIdPrefix(prefix))| prefix);
    let id = format!(
        "{}{:032x}",
        prefix.as_deref().unwrap_or_default(),
        rand::random::<u128>()
    );
    let (inbound_tx, inbound_rx) = mpsc::channel(CHANNEL_CAPACITY);
    let (outbound_tx, outbound_rx) = mpsc::channel(CHANNEL_CAPACITY);
    // A child of the daemon's token: shutdown ends every session, a disconnect ends only its own.
    let session_ct = state.shutdown.child_token();
    let unanswered = Unanswered::default();
    {
        let mut sessions = state.sessions.lock().unwrap_or_else(|e| e.into_inner());
        if sessions.len() >= state.max_sessions {
            drop(sessions);
            return error(
                StatusCode::SERVICE_UNAVAILABLE,
                format!(
                    "too many legacy SSE sessions are open ({}); close one, or use Streamable HTTP at /mcp",
                    state.max_sessions
                ),
            );
        }
        sessions.insert(
            id.clone(),
            Session {
                inbound: inbound_tx,
                owner,
                unanswered: unanswered.clone(),
            },
        );
    }
    // From here on the guard owns the session's removal, whichever way the stream ends.
    let guard = SessionGuard {
        id: id.clone(),
        sessions: state.sessions.clone(),
        ct: session_ct.clone(),
    };
    // Info, like an access log: one line per connection, so an operator sees old clients come and go.
    tracing::info!(session = %id, "legacy SSE session opened");

    let transport = ChannelTransport {
        outbound: outbound_tx,
        inbound: inbound_rx,
        ct: session_ct.clone(),
    };
    // Messages arrive through a channel, not as HTTP requests the handler could read the client
    // from, so the session is given the client that opened it.
    let handler = match client {
        Some(Extension(principal)) => state.server.for_session().with_principal(principal),
        None => state.server.for_session(),
    };
    let ct = session_ct.clone();
    let log_id = id.clone();
    tokio::spawn(async move {
        // `serve_with_ct` waits for the client's `initialize`; cancellation (disconnect, shutdown)
        // ends it at any point, and its end drops the transport, which closes the SSE stream.
        match handler.serve_with_ct(transport, ct).await {
            Ok(running) => {
                let _ = running.waiting().await;
            }
            Err(e) => {
                tracing::debug!(session = %log_id, "legacy SSE session ended before it was initialized: {e}")
            }
        }
    });

    // Relative to where `/sse` was reached, so the endpoint stays right if the router is nested.
    let prefix = uri.path().strip_suffix("/sse").unwrap_or("");
    let endpoint = Event::default()
        .event("endpoint")
        .data(format!("{prefix}/message?sessionId={id}"));
    // The guard comes first in the state so that it drops (cancelling the session) before the
    // receiver does: a send that finds the receiver gone then always sees a cancelled session.
    let messages = futures::stream::unfold(
        (guard, outbound_rx, unanswered),
        |(guard, mut outbound, unanswered)| async move {
            let message = outbound.recv().await?;
            let answered = match &message {
                ServerJsonRpcMessage::Response(response) => Some(id_key(&response.id)),
                ServerJsonRpcMessage::Error(error) => error.id.as_ref().map(id_key),
                _ => None,
            };
            let event = match Event::default().event("message").json_data(&message) {
                Ok(event) => event,
                Err(e) => {
                    // Cannot happen for rmcp's own types; end the session rather than drop a
                    // message silently, which would leave the client waiting forever.
                    tracing::warn!(session = %guard.id, "cannot serialize a message for the SSE stream: {e}");
                    return None;
                }
            };
            // Handed to the response body now, and written before the body's end: no longer a call
            // for shutdown to wait for.
            if let Some(id) = answered {
                unanswered
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .remove(&id);
            }
            Some((Ok::<_, Infallible>(event), (guard, outbound, unanswered)))
        },
    );
    let stream = futures::stream::once(async { Ok(endpoint) })
        .chain(messages)
        .take_until(session_ct.cancelled_owned());
    let mut response = Sse::new(stream)
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE))
        .into_response();
    // nginx buffers responses unless told otherwise, which would hold events back.
    response
        .headers_mut()
        .insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}

/// `POST /message?sessionId=<id>`: delivers one message (or a batch) to the session.
async fn post_message(
    State(state): State<LegacySse>,
    identity: Option<Extension<ClientIdentity>>,
    request: Request,
) -> Response {
    let id = request.uri().query().and_then(|query| {
        url::form_urlencoded::parse(query.as_bytes())
            .find(|(key, _)| key == "sessionId")
            .map(|(_, value)| value.into_owned())
    });
    let Some(id) = id else {
        return error(
            StatusCode::NOT_FOUND,
            "no sessionId in the query; POST to the endpoint announced by GET /sse".into(),
        );
    };
    // Cloned out so that the lock is released before any await.
    let inbound = state
        .sessions
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(&id)
        .map(|session| {
            (
                session.inbound.clone(),
                session.owner.clone(),
                session.unanswered.clone(),
            )
        });
    let Some((inbound, owner, unanswered)) = inbound else {
        return session_not_found();
    };
    let poster = identity.map(|Extension(identity)| identity);
    if poster
        .as_ref()
        .unwrap_or(&ClientIdentity("anonymous".into()))
        != &owner
    {
        tracing::warn!("a POST to another client's legacy SSE session was refused");
        return error(
            StatusCode::FORBIDDEN,
            "this SSE session belongs to another client; open your own with GET /sse".into(),
        );
    }

    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|length| length > state.max_body_bytes) {
        return too_large(state.max_body_bytes);
    }
    let body = match read_capped(request.into_body(), state.max_body_bytes).await {
        Ok(body) => body,
        Err(BodyError::TooLarge) => return too_large(state.max_body_bytes),
        Err(BodyError::Read(e)) => {
            return error(
                StatusCode::BAD_REQUEST,
                format!("could not read the request body: {e}"),
            );
        }
    };

    let value: Value = match serde_json::from_slice(&body) {
        Ok(value) => value,
        Err(e) => {
            return rpc_error(
                StatusCode::BAD_REQUEST,
                Value::Null,
                -32700,
                format!("Parse error: {e}"),
            );
        }
    };
    // The 2024-11-05 revision lets clients send batches; their members are delivered one by one and
    // answered one by one on the stream.
    let values = match value {
        Value::Array(items) if items.is_empty() => {
            return rpc_error(
                StatusCode::BAD_REQUEST,
                Value::Null,
                -32600,
                "Invalid Request: empty batch".into(),
            );
        }
        Value::Array(items) => items,
        single => vec![single],
    };
    let mut messages = Vec::with_capacity(values.len());
    for value in values {
        let id = value.get("id").cloned().unwrap_or(Value::Null);
        // A request that only opens a stream of events is no call to wait for (see `in_flight`).
        let call = value
            .get("method")
            .and_then(Value::as_str)
            .is_some_and(|method| !in_flight::method_opens_stream(method));
        match serde_json::from_value::<ClientJsonRpcMessage>(value) {
            Ok(message) => messages.push((message, call)),
            Err(e) => {
                return rpc_error(
                    StatusCode::BAD_REQUEST,
                    id,
                    -32600,
                    format!("Invalid Request: {e}"),
                );
            }
        }
    }
    if let Some(in_flight) = &state.in_flight {
        let mut unanswered = unanswered.lock().unwrap_or_else(|e| e.into_inner());
        for (message, call) in &messages {
            match message {
                // Counted before it is delivered, so that its answer cannot come first.
                ClientJsonRpcMessage::Request(request) if *call => {
                    unanswered.insert(id_key(&request.id), in_flight.hold());
                }
                // A cancelled request gets no answer.
                ClientJsonRpcMessage::Notification(notification) => {
                    if let rmcp::model::ClientNotification::CancelledNotification(cancelled) =
                        &notification.notification
                    {
                        unanswered.remove(&id_key(&cancelled.params.request_id));
                    }
                }
                _ => {}
            }
        }
    }
    for (message, _) in messages {
        if inbound.send(message).await.is_err() {
            // The session ended between the lookup and the delivery.
            return session_not_found();
        }
    }
    (StatusCode::ACCEPTED, "Accepted").into_response()
}

enum BodyError {
    TooLarge,
    Read(axum::Error),
}

/// Reads the body, stopping as soon as it exceeds `max`: a missing or false `Content-Length` must not
/// let a client make the daemon buffer more than that.
async fn read_capped(body: Body, max: usize) -> Result<Vec<u8>, BodyError> {
    let mut stream = body.into_data_stream();
    let mut buffer = Vec::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(BodyError::Read)?;
        if buffer.len() + chunk.len() > max {
            return Err(BodyError::TooLarge);
        }
        buffer.extend_from_slice(&chunk);
    }
    Ok(buffer)
}

fn error(status: StatusCode, message: String) -> Response {
    (status, axum::Json(json!({"error": message}))).into_response()
}

fn session_not_found() -> Response {
    error(
        StatusCode::NOT_FOUND,
        "no such legacy SSE session (it ended when its GET /sse stream closed); open a new one with GET /sse".into(),
    )
}

fn too_large(max: usize) -> Response {
    error(
        StatusCode::PAYLOAD_TOO_LARGE,
        format!("the message is larger than {max} bytes ([server] max_message_bytes)"),
    )
}

fn rpc_error(status: StatusCode, id: Value, code: i64, message: String) -> Response {
    (
        status,
        axum::Json(
            json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}),
        ),
    )
        .into_response()
}

/// Owned by the SSE stream: when the response body is dropped (client gone, stream ended, shutdown),
/// the session is forgotten and its rmcp service cancelled.
struct SessionGuard {
    id: String,
    sessions: Sessions,
    ct: CancellationToken,
}

impl Drop for SessionGuard {
    fn drop(&mut self) {
        self.sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.id);
        self.ct.cancel();
        tracing::info!(session = %self.id, "legacy SSE session closed");
    }
}

/// The rmcp transport of one session: client messages come from the POST route, server messages go
/// to the SSE stream.
struct ChannelTransport {
    outbound: mpsc::Sender<ServerJsonRpcMessage>,
    inbound: mpsc::Receiver<ClientJsonRpcMessage>,
    /// The session's token, cancelled when the client disconnects.
    ct: CancellationToken,
}

#[derive(Debug, thiserror::Error)]
#[error("the legacy SSE client disconnected")]
struct Disconnected;

impl rmcp::transport::Transport<RoleServer> for ChannelTransport {
    type Error = Disconnected;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let outbound = self.outbound.clone();
        let ct = self.ct.clone();
        async move {
            match outbound.send(item).await {
                Ok(()) => Ok(()),
                // The client left and the session is being cancelled; rmcp still flushes answers to
                // requests in progress (a `subscriptions/listen`, say) and would log each failure as
                // an error. There is no one to tell, so the message is dropped quietly.
                Err(_) if ct.is_cancelled() => {
                    tracing::debug!("dropping a message for a disconnected legacy SSE client");
                    Ok(())
                }
                Err(_) => Err(Disconnected),
            }
        }
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleServer>>> + Send {
        self.inbound.recv()
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.inbound.close();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_messages::{PING, request};
    use axum::http::Request as HttpRequest;
    use portico_mcp_server::{Backend, ServerOptions};
    use tower::ServiceExt as _;

    fn server() -> PorticoServer {
        let config = portico_config::parse("test", "[builtins]\nenabled = false").unwrap();
        let dir = tempfile::tempdir().unwrap().keep();
        let engine =
            portico_engine::Engine::start(&config, portico_engine::EngineOptions::in_dir(&dir))
                .unwrap();
        PorticoServer::new(Backend::Local(engine), ServerOptions::default())
    }

    async fn get_sse(app: &Router) -> Response {
        app.clone()
            .oneshot(HttpRequest::get("/sse").body(Body::empty()).unwrap())
            .await
            .unwrap()
    }

    async fn post(app: &Router, uri: &str, body: impl Into<Body>) -> Response {
        app.clone()
            .oneshot(
                HttpRequest::post(uri)
                    .header("content-type", "application/json")
                    .body(body.into())
                    .unwrap(),
            )
            .await
            .unwrap()
    }

    /// The next SSE event's (name, data), skipping keep-alive comments.
    async fn next_event(
        body: &mut (impl futures::Stream<Item = Result<axum::body::Bytes, axum::Error>> + Unpin),
    ) -> Option<(String, String)> {
        let mut text = String::new();
        loop {
            if let Some(end) = text.find("\n\n") {
                let block: String = text.drain(..end + 2).collect();
                let mut name = String::from("message");
                let mut data = Vec::new();
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("event:") {
                        name = v.trim().to_string();
                    } else if let Some(v) = line.strip_prefix("data:") {
                        data.push(v.trim_start().to_string());
                    }
                }
                if !data.is_empty() {
                    return Some((name, data.join("\n")));
                }
                continue;
            }
            let chunk = tokio::time::timeout(Duration::from_secs(30), body.next())
                .await
                .expect("SSE event (test guard)")?
                .unwrap();
            text.push_str(std::str::from_utf8(&chunk).unwrap());
        }
    }

    #[tokio::test]
    async fn session_lifecycle_errors_and_limits() {
        let shutdown = CancellationToken::new();
        let app = routes_with_limit(server(), shutdown.clone(), 1024, 1);

        let response = get_sse(&app).await;
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(
            response.headers()[header::CONTENT_TYPE],
            "text/event-stream"
        );
        let mut body = response.into_body().into_data_stream();
        let (name, endpoint) = next_event(&mut body).await.unwrap();
        assert_eq!(name, "endpoint");
        let id = endpoint.strip_prefix("/message?sessionId=").unwrap();
        assert_eq!(id.len(), 32, "{id}");
        assert!(id.chars().all(|c| c.is_ascii_hexdigit()), "{id}");

        // One session is the limit here.
        assert_eq!(
            get_sse(&app).await.status(),
            StatusCode::SERVICE_UNAVAILABLE
        );

        assert_eq!(
            post(&app, "/message?sessionId=nope", "{}").await.status(),
            StatusCode::NOT_FOUND
        );
        assert_eq!(
            post(&app, "/message", "{}").await.status(),
            StatusCode::NOT_FOUND
        );
        let bad = post(&app, &endpoint, "{not json").await;
        assert_eq!(bad.status(), StatusCode::BAD_REQUEST);
        let bad: Value =
            serde_json::from_slice(&axum::body::to_bytes(bad.into_body(), 4096).await.unwrap())
                .unwrap();
        assert_eq!(bad["error"]["code"], -32700);
        let invalid = post(&app, &endpoint, r#"{"jsonrpc":"2.0","id":7,"nope":1}"#).await;
        assert_eq!(invalid.status(), StatusCode::BAD_REQUEST);
        assert_eq!(
            post(&app, &endpoint, vec![b' '; 2048]).await.status(),
            StatusCode::PAYLOAD_TOO_LARGE
        );

        let ping = post(&app, &endpoint, request(1, PING, None)).await;
        assert_eq!(ping.status(), StatusCode::ACCEPTED);
        let (name, data) = next_event(&mut body).await.unwrap();
        assert_eq!(name, "message");
        let data: Value = serde_json::from_str(&data).unwrap();
        assert_eq!(data["id"], 1);
        assert_eq!(data["result"], json!({}));

        // Dropping the stream ends the session and frees its slot.
        drop(body);
        assert_eq!(
            post(&app, &endpoint, request(2, PING, None)).await.status(),
            StatusCode::NOT_FOUND
        );
        let second = get_sse(&app).await;
        assert_eq!(second.status(), StatusCode::OK);

        // Shutdown ends open streams.
        let mut body = second.into_body().into_data_stream();
        assert_eq!(next_event(&mut body).await.unwrap().0, "endpoint");
        shutdown.cancel();
        assert_eq!(next_event(&mut body).await, None);
    }
}
