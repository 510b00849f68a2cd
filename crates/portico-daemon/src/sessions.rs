//! MCP sessions on `/mcp`, bounded: at most `max_sessions` at once and `max_sessions_per_client` per
//! client identity, each closed after `session_idle_secs` without a message.
//!
//! rmcp's [`LocalSessionManager`] keeps the sessions and expires idle ones; [`Sessions`] wraps it to
//! count them. The count is taken before a session exists: [`admit`] sees an `initialize` (the only
//! request that creates a session), reserves a place for its client or refuses it with 503 or 429 and
//! `Retry-After`, and hands the reservation to [`SessionManager::create_session`] through a task-local,
//! since rmcp creates the session inside the same request's future without telling the manager whose
//! request it is. A session's place is given back when rmcp closes it, for whatever reason.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures::Stream;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_server::SessionManager;
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError, SessionConfig,
};
use rmcp::transport::streamable_http_server::session::{ServerSseMessage, SessionId};
use serde_json::json;

use crate::security::ClientIdentity;

/// What a client at a bound is told to wait before trying again: places free up as other sessions
/// are deleted or idle out, which nothing can predict more precisely.
const RETRY_AFTER_SECS: u64 = 30;

/// The bounds, from `[server]`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SessionLimits {
    pub(crate) max_sessions: usize,
    pub(crate) max_per_client: usize,
    pub(crate) idle: Duration,
    /// `initialize` bodies larger than this are refused before they are parsed.
    pub(crate) max_body: usize,
}

impl SessionLimits {
    pub(crate) fn from_config(section: &portico_config::ServerSection) -> Self {
        SessionLimits {
            max_sessions: section.max_sessions.max(1),
            max_per_client: section.max_sessions_per_client.max(1),
            idle: Duration::from_secs(section.session_idle_secs.max(1)),
            max_body: section.max_message_bytes,
        }
    }
}

/// rmcp's in-memory sessions, counted per client.
pub(crate) struct Sessions {
    inner: LocalSessionManager,
    limits: SessionLimits,
    counts: Arc<Mutex<Counts>>,
    /// `gw-a.` when this process is replica `gw-a` of a shared store: every session id it hands out
    /// starts with it, so a load balancer can send a session's requests to the replica that holds it
    /// (docs/replicas.md), and a request for another replica's session is answered 404 here, which
    /// makes the client start a new session, instead of reaching a session it does not own.
    replica_prefix: Option<String>,
}

/// Places taken: reserved by an `initialize` in progress or held by an open session.
#[derive(Default)]
struct Counts {
    total: usize,
    per_client: HashMap<String, usize>,
    owners: HashMap<SessionId, String>,
}

impl Counts {
    fn release(&mut self, identity: &str) {
        self.total = self.total.saturating_sub(1);
        if let Some(count) = self.per_client.get_mut(identity) {
            *count -= 1;
            if *count == 0 {
                self.per_client.remove(identity);
            }
        }
    }
}

/// Why a new session was refused.
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum Refusal {
    #[error(
        "{0} MCP sessions are open, the most this Portico keeps ([server] max_sessions); delete sessions you no longer use (DELETE /mcp) or retry after idle ones expire"
    )]
    Full(usize),
    #[error(
        "this client has {0} MCP sessions open, the most one client may keep ([server] max_sessions_per_client); delete sessions you no longer use (DELETE /mcp) or retry after idle ones expire"
    )]
    ClientFull(usize),
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        let status = match self {
            Refusal::Full(_) => StatusCode::SERVICE_UNAVAILABLE,
            Refusal::ClientFull(_) => StatusCode::TOO_MANY_REQUESTS,
        };
        tracing::warn!(%status, "{self}");
        let mut response = (status, axum::Json(json!({"error": self.to_string()}))).into_response();
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECS));
        response
    }
}

/// What the session manager can fail with.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SessionsError {
    #[error(transparent)]
    Local(#[from] LocalSessionManagerError),
    #[error(transparent)]
    Refused(#[from] Refusal),
}

/// A place reserved for one client's new session; given back when dropped unless a session took it.
pub(crate) struct Reservation {
    counts: Arc<Mutex<Counts>>,
    identity: Option<String>,
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if let Some(identity) = self.identity.take() {
            lock(&self.counts).release(&identity);
        }
    }
}

fn lock(counts: &Mutex<Counts>) -> std::sync::MutexGuard<'_, Counts> {
    counts.lock().expect("session counts lock")
}

tokio::task_local! {
    /// The reservation of the `initialize` request this task is serving.
    static RESERVED: RefCell<Option<Reservation>>;
}

impl Sessions {
    /// Sessions within `limits`; `replica` names this process when it shares its store with others
    /// (see `replica_prefix`).
    pub(crate) fn new(limits: SessionLimits, replica: Option<&str>) -> Arc<Self> {
        let mut config = SessionConfig::default();
        config.keep_alive = Some(limits.idle);
        let mut inner = LocalSessionManager::default();
        inner.session_config = config;
        Arc::new(Sessions {
            inner,
            limits,
            counts: Arc::default(),
            replica_prefix: replica.map(|name| format!("{name}.")),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Counts> {
        lock(&self.counts)
    }

    /// Open sessions (reservations still waiting for theirs not included).
    pub(crate) fn open(&self) -> usize {
        self.lock().owners.len()
    }

    pub(crate) fn limits(&self) -> SessionLimits {
        self.limits
    }

    /// Takes a place for `identity`'s new session, or says which bound it is at.
    pub(crate) fn reserve(&self, identity: &str) -> Result<Reservation, Refusal> {
        let mut counts = self.lock();
        if counts.total >= self.limits.max_sessions {
            return Err(Refusal::Full(counts.total));
        }
        let mine = counts.per_client.get(identity).copied().unwrap_or(0);
        if mine >= self.limits.max_per_client {
            return Err(Refusal::ClientFull(mine));
        }
        counts.total += 1;
        *counts.per_client.entry(identity.to_string()).or_default() += 1;
        Ok(Reservation {
            counts: self.counts.clone(),
            identity: Some(identity.to_string()),
        })
    }

    /// Gives the new session the place its request reserved.
    fn bind(&self, id: &SessionId, mut reservation: Reservation) {
        if let Some(identity) = reservation.identity.take() {
            self.lock().owners.insert(id.clone(), identity);
        }
    }

    /// Whether a request from `identity` may use session `id`: only its creator may, so one client
    /// cannot ride another's session (and its relayed requests, its subscriptions) with a stolen or
    /// guessed id. An unknown id is rmcp's to answer (404).
    fn may_use(&self, id: &str, identity: &str) -> bool {
        let counts = self.lock();
        match counts.owners.get(id) {
            Some(owner) => owner == identity,
            None => true,
        }
    }

    /// Gives a closed session's place back; closing twice gives it back once.
    fn forget(&self, id: &SessionId) {
        let mut counts = self.lock();
        if let Some(identity) = counts.owners.remove(id) {
            counts.release(&identity);
        }
    }
}

impl SessionManager for Sessions {
    type Error = SessionsError;
    type Transport = <LocalSessionManager as SessionManager>::Transport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        // Without [`admit`] in front (it always is, but rmcp cannot know) the place is taken here,
        // and a refusal becomes rmcp's 500: still bounded.
        let reservation = match RESERVED.try_with(|r| r.borrow_mut().take()).ok().flatten() {
            Some(reservation) => reservation,
            None => self.reserve("unadmitted")?,
        };
        let (id, transport) = self.inner.create_session().await?;
        self.bind(&id, reservation);
        Ok((id, transport))
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        Ok(self.inner.initialize_session(id, message).await?)
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        Ok(self.inner.has_session(id).await?)
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        let closed = self.inner.close_session(id).await;
        self.forget(id);
        Ok(closed?)
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(self.inner.create_stream(id, message).await?)
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        Ok(self.inner.accept_message(id, message).await?)
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(self.inner.create_standalone_stream(id).await?)
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(self.inner.resume(id, last_event_id).await?)
    }
}

/// Whether a JSON-RPC body is a request that makes a session (MCP's `initialize`, as the MCP door
/// says).
fn is_initialize(body: &[u8]) -> bool {
    #[derive(serde::Deserialize)]
    struct Probe<'a> {
        #[serde(borrow)]
        method: Option<std::borrow::Cow<'a, str>>,
    }
    serde_json::from_slice::<Probe>(body).is_ok_and(|p| {
        p.method
            .is_some_and(|m| portico_mcp_server::requests::starts_session(&m))
    })
}

/// In front of `/mcp`: an `initialize` gets a place for its session or the refusal that says why not;
/// on a replica, session ids carry the replica's name outside and not inside (see `replica_prefix`).
pub(crate) async fn admit(
    State(sessions): State<Arc<Sessions>>,
    mut request: Request,
    next: Next,
) -> Response {
    let Some(prefix) = sessions.replica_prefix.clone() else {
        return admit_here(sessions, request, next).await;
    };
    if let Some(id) = request.headers().get(SESSION_HEADER) {
        let local = id
            .to_str()
            .ok()
            .and_then(|id| id.strip_prefix(&prefix))
            .and_then(|local| HeaderValue::from_str(local).ok());
        match local {
            Some(local) => {
                request.headers_mut().insert(SESSION_HEADER, local);
            }
            None => return not_this_replicas_session(&prefix),
        }
    }
    let mut response = admit_here(sessions, request, next).await;
    if let Some(issued) = response.headers().get(SESSION_HEADER)
        && let Ok(outside) =
            HeaderValue::from_str(&format!("{prefix}{}", issued.to_str().unwrap_or_default()))
    {
        response.headers_mut().insert(SESSION_HEADER, outside);
    }
    response
}

const SESSION_HEADER: &str = "mcp-session-id";

/// The answer to a request for a session this replica does not hold: 404, which the MCP spec tells
/// a client to meet with a new `initialize`, and a JSON-RPC error saying so.
fn not_this_replicas_session(prefix: &str) -> Response {
    let replica = prefix.trim_end_matches('.');
    (
        StatusCode::NOT_FOUND,
        axum::Json(json!({
            "jsonrpc": "2.0",
            "id": null,
            "error": {
                "code": -32001,
                "message": format!("Session not found on replica {replica} of this gateway (it was started on another replica, or that replica restarted); send initialize without Mcp-Session-Id to start a new session"),
            },
        })),
    )
        .into_response()
}

async fn admit_here(sessions: Arc<Sessions>, request: Request, next: Next) -> Response {
    if let Some(id) = request.headers().get(SESSION_HEADER) {
        let identity = match request.extensions().get::<ClientIdentity>() {
            Some(ClientIdentity(identity)) => identity.as_str(),
            None => "anonymous",
        };
        if !sessions.may_use(id.to_str().unwrap_or_default(), identity) {
            tracing::warn!("a request on another client's MCP session was refused");
            return (
                StatusCode::FORBIDDEN,
                axum::Json(json!({"error": "this MCP session belongs to another client; send initialize without Mcp-Session-Id to start a session of your own"})),
            )
                .into_response();
        }
        return next.run(request).await;
    }
    if request.method() != Method::POST {
        return next.run(request).await;
    }
    let max_body = sessions.limits.max_body;
    let (parts, body) = request.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, max_body).await else {
        return (
            StatusCode::PAYLOAD_TOO_LARGE,
            axum::Json(json!({"error": format!("the request body is larger than {max_body} bytes, or was cut off")})),
        )
            .into_response();
    };
    let initialize = is_initialize(&bytes);
    let request = Request::from_parts(parts, Body::from(bytes));
    if !initialize {
        return next.run(request).await;
    }
    let identity = match request.extensions().get::<ClientIdentity>() {
        Some(ClientIdentity(identity)) => identity.clone(),
        None => "anonymous".into(),
    };
    match sessions.reserve(&identity) {
        Ok(reservation) => {
            RESERVED
                .scope(RefCell::new(Some(reservation)), next.run(request))
                .await
        }
        Err(refusal) => refusal.into_response(),
    }
}

/// `GET /api/mcp/sessions`: how many sessions are open against their bounds, and how many
/// per-session relay tasks run (one per initialized session; more means a session's task outlived it).
pub(crate) fn routes(
    sessions: Arc<Sessions>,
    server: portico_mcp_server::PorticoServer,
) -> axum::Router {
    let stats = move || {
        let limits = sessions.limits();
        axum::Json(json!({
            "open": sessions.open(),
            "max_sessions": limits.max_sessions,
            "max_sessions_per_client": limits.max_per_client,
            "idle_secs": limits.idle.as_secs(),
            "relay_tasks": server.live_relays(),
        }))
    };
    axum::Router::new().route(
        "/api/mcp/sessions",
        axum::routing::get(move || std::future::ready(stats())),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(max_sessions: usize, max_per_client: usize) -> SessionLimits {
        SessionLimits {
            max_sessions,
            max_per_client,
            idle: Duration::from_secs(60),
            max_body: 1024,
        }
    }

    #[test]
    fn places_are_counted_per_client_and_given_back() {
        let sessions = Sessions::new(limits(3, 2), None);
        let a1 = sessions.reserve("a").unwrap();
        let a2 = sessions.reserve("a").unwrap();
        assert!(matches!(sessions.reserve("a"), Err(Refusal::ClientFull(2))));
        let b1 = sessions.reserve("b").unwrap();
        assert!(matches!(sessions.reserve("c"), Err(Refusal::Full(3))));
        // An `initialize` that made no session gives its place back.
        drop(a2);
        let id: SessionId = "s1".into();
        sessions.bind(&id, a1);
        assert_eq!(sessions.open(), 1);
        let c1 = sessions.reserve("c").unwrap();
        assert!(matches!(sessions.reserve("a"), Err(Refusal::Full(3))));
        sessions.forget(&id);
        sessions.forget(&id);
        assert_eq!(sessions.open(), 0);
        drop((b1, c1));
        assert_eq!(sessions.lock().total, 0);
        assert!(sessions.lock().per_client.is_empty());
    }

    /// Replica `gw-a`'s door over a stand-in for rmcp that issues session `local-1` and echoes the
    /// session id it was handed.
    fn replica_door() -> axum::Router {
        let sessions = Sessions::new(limits(8, 8), Some("gw-a"));
        axum::Router::new()
            .route(
                "/mcp",
                axum::routing::post(|headers: axum::http::HeaderMap| async move {
                    let seen = headers
                        .get(SESSION_HEADER)
                        .map(|v| v.to_str().unwrap().to_string())
                        .unwrap_or_default();
                    ([(SESSION_HEADER, "local-1")], seen)
                }),
            )
            .layer(axum::middleware::from_fn_with_state(sessions, admit))
    }

    async fn post(
        router: &axum::Router,
        session: Option<&str>,
    ) -> (StatusCode, Option<String>, String) {
        use tower::ServiceExt;
        let mut request = Request::post("/mcp").header("content-type", "application/json");
        if let Some(id) = session {
            request = request.header(SESSION_HEADER, id);
        }
        let response = router
            .clone()
            .oneshot(
                request
                    .body(Body::from(crate::test_messages::request(
                        1,
                        crate::test_messages::LIST_TOOLS,
                        None,
                    )))
                    .unwrap(),
            )
            .await
            .unwrap();
        let status = response.status();
        let issued = response
            .headers()
            .get(SESSION_HEADER)
            .map(|v| v.to_str().unwrap().to_string());
        let body = axum::body::to_bytes(response.into_body(), 1 << 16)
            .await
            .unwrap();
        (status, issued, String::from_utf8(body.to_vec()).unwrap())
    }

    #[tokio::test]
    async fn a_replica_answers_another_replicas_session_404_and_prefixes_its_own() {
        let door = replica_door();
        // Its own session: the prefix is taken off on the way in and put on on the way out.
        let (status, issued, seen) = post(&door, Some("gw-a.local-1")).await;
        assert_eq!(
            (status, issued.as_deref(), seen.as_str()),
            (StatusCode::OK, Some("gw-a.local-1"), "local-1")
        );
        // A new session (no id yet) is issued with the prefix.
        let (_, issued, seen) = post(&door, None).await;
        assert_eq!(
            (issued.as_deref(), seen.as_str()),
            (Some("gw-a.local-1"), "")
        );
        // Another replica's session, or an id of no replica: 404 with a JSON-RPC error, never served.
        for foreign in ["gw-b.local-1", "local-1", "gw-a-local-1", "gw-aa.local-1"] {
            let (status, issued, body) = post(&door, Some(foreign)).await;
            assert_eq!(status, StatusCode::NOT_FOUND, "{foreign}");
            assert_eq!(issued, None, "{foreign}");
            let body: serde_json::Value = serde_json::from_str(&body).unwrap();
            assert_eq!(body["error"]["code"], -32001, "{foreign}");
            assert!(
                body["error"]["message"]
                    .as_str()
                    .unwrap()
                    .contains("send initialize"),
                "{body}"
            );
        }
    }

    #[test]
    fn only_initialize_makes_a_session() {
        use crate::test_messages::{INITIALIZE, LIST_TOOLS, request};
        assert!(is_initialize(request(1, INITIALIZE, Some("{}")).as_bytes()));
        assert!(is_initialize(
            br#"{"jsonrpc":"2.0","id":1,"method":"initiali\u007ae"}"#
        ));
        assert!(!is_initialize(request(1, LIST_TOOLS, None).as_bytes()));
        assert!(!is_initialize(b"not json"));
    }
}
