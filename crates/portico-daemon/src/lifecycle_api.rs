//! The routes `portico stop` and `portico logs` use: `POST /api/shutdown` stops the daemon as a
//! first SIGTERM does (calls in progress finish, then the servers are stopped and `daemon.json`
//! removed), answering 202 with the daemon's pid at once; only an unscoped client may ask (the
//! door's token holder, or anyone on loopback when the door has no token), as for the server
//! actions.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Extension, Json, Router};
use portico_pipeline::Principal;
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio_util::sync::CancellationToken;

/// The route that stops the daemon.
pub(crate) const SHUTDOWN: &str = "/api/shutdown";

/// `POST /api/shutdown`'s answer: the daemon stops after answering.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stopping {
    /// The daemon's process, which exits once its calls and servers are done.
    pub pid: u32,
}

#[derive(Clone)]
struct LifecycleState {
    /// Cancelled to start the daemon's graceful shutdown.
    stop: CancellationToken,
}

/// The routes; `stop` is what `serve` waits on besides its signals.
pub(crate) fn routes(stop: CancellationToken) -> Router {
    Router::new()
        .route(SHUTDOWN, post(shutdown))
        .with_state(LifecycleState { stop })
}

async fn shutdown(
    State(state): State<LifecycleState>,
    client: Option<Extension<Principal>>,
) -> Response {
    let principal = match client {
        Some(Extension(principal)) => principal,
        None => Principal::client(crate::ui_login::DASHBOARD_CLIENT),
    };
    if principal.client_scope().is_some() {
        return (
            StatusCode::FORBIDDEN,
            Json(json!({"error": format!(
                "`{}` has a `tools` scope, and scoped clients cannot stop the daemon; use [server] token or an unscoped [[server.clients]] token",
                principal.label()
            )})),
        )
            .into_response();
    }
    tracing::info!(by = principal.label(), "stop requested through the API");
    state.stop.cancel();
    (
        StatusCode::ACCEPTED,
        Json(Stopping {
            pid: std::process::id(),
        }),
    )
        .into_response()
}
