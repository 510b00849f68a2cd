//! `GET /metrics`: the engine's counters and histograms, with the state of this moment (upstreams,
//! A2A tasks, pending approvals from the engine; open sessions per door from the door itself), in
//! Prometheus text format 0.0.4. Behind the door's checks like `/api`: a door with tokens wants one.

use std::sync::Arc;

use axum::Router;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use portico_engine::Engine;

use crate::legacy_sse::OpenSessions;
use crate::sessions::Sessions;

/// What a scrape reads besides the engine: the sessions each door holds.
#[derive(Clone)]
struct Doors {
    engine: Engine,
    mcp: Arc<Sessions>,
    legacy: OpenSessions,
}

pub(crate) fn routes(engine: Engine, mcp: Arc<Sessions>, legacy: OpenSessions) -> Router {
    let doors = Doors {
        engine,
        mcp,
        legacy,
    };
    Router::new().route(
        "/metrics",
        get(move || {
            let doors = doors.clone();
            async move { scrape(&doors).await }
        }),
    )
}

async fn scrape(doors: &Doors) -> Response {
    let mut state = doors.engine.metrics_state().await;
    state.sessions = vec![("mcp", doors.mcp.open()), ("sse", doors.legacy.count())];
    let text = doors.engine.metrics().encode(&state);
    (
        [(header::CONTENT_TYPE, portico_metrics::CONTENT_TYPE)],
        text,
    )
        .into_response()
}
