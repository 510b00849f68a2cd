//! The routes `portico stop` and `portico logs` use, for unscoped clients only (the door's token
//! holder, or anyone on loopback when the door has no token), as the server actions are: a
//! server's stderr can say more than its tools do.
//!
//! `POST /api/shutdown` stops the daemon as a first SIGTERM does (calls in progress finish, then
//! the servers are stopped and `daemon.json` removed), answering 202 with the daemon's pid at once.
//!
//! `GET /api/mcp/servers/{name}/logs` answers what the server's stdio child wrote to stderr, kept
//! by the hub across the server's restarts (bounded in lines and bytes; dropped with the server):
//! [`ServerLogs`], the last `lines=N` when given. With `follow=1` it is a stream of server-sent
//! events instead: `line` ([`LogRecord`]) for each kept line and then each new one, `missed`
//! (`{"lines": N}`) when the stream fell behind a chatty server and lines were skipped, and
//! `removed` (`{}`) when the server left the config, which ends it; every stream ends on
//! shutdown, and they are bounded as `/api/events` streams are (counted apart from those).

use std::convert::Infallible;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use futures::StreamExt;
use portico_engine::{Engine, LogLine, ServerLog};
use portico_pipeline::Principal;
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::sync::broadcast::{self, error::RecvError};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::events_api::{StreamCounts, StreamPermit};
use crate::security::ClientIdentity;

/// The route that stops the daemon.
pub(crate) const SHUTDOWN: &str = "/api/shutdown";

/// `POST /api/shutdown`'s answer: the daemon stops after answering.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stopping {
    /// The daemon's process, which exits once its calls and servers are done.
    pub pid: u32,
}

/// One stderr line as `/api/mcp/servers/{name}/logs` answers it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogRecord {
    /// When the daemon read it, RFC 3339 (UTC).
    pub at: String,
    pub text: String,
}

/// `GET /api/mcp/servers/{name}/logs`: the kept lines, oldest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerLogs {
    pub server: String,
    pub lines: Vec<LogRecord>,
}

/// The events of a followed log.
pub const LOG_LINE_EVENT: &str = "line";
pub const LOG_MISSED_EVENT: &str = "missed";
pub const LOG_REMOVED_EVENT: &str = "removed";

#[derive(Clone)]
struct LifecycleState {
    engine: Engine,
    /// Cancelled to start the daemon's graceful shutdown.
    stop: Option<CancellationToken>,
    /// Cancelled when the daemon shuts down: followed logs end.
    streams: CancellationToken,
    /// Open followed logs, bounded as `/api/events` streams are.
    counts: StreamCounts,
}

/// The routes; `stop` is what `serve` waits on besides its signals (without it, as for a router
/// no daemon serves, there is no `/api/shutdown`), `streams` is cancelled on shutdown.
pub(crate) fn routes(
    engine: &Engine,
    stop: Option<CancellationToken>,
    streams: CancellationToken,
) -> Router {
    let mut router = Router::new().route("/api/mcp/servers/{name}/logs", get(logs));
    if stop.is_some() {
        router = router.route(SHUTDOWN, post(shutdown));
    }
    router.with_state(LifecycleState {
        engine: engine.clone(),
        stop,
        streams,
        counts: StreamCounts::default(),
    })
}

/// The caller, or why a client with a `tools` scope is refused (403).
fn unscoped(client: Option<Extension<Principal>>, what: &str) -> Result<Principal, String> {
    let principal = match client {
        Some(Extension(principal)) => principal,
        None => Principal::client(crate::ui_login::DASHBOARD_CLIENT),
    };
    if principal.client_scope().is_some() {
        return Err(format!(
            "`{}` has a `tools` scope, and scoped clients cannot {what}; use [server] token or an unscoped [[server.clients]] token",
            principal.label()
        ));
    }
    Ok(principal)
}

fn error(status: StatusCode, message: String) -> Response {
    (status, Json(json!({"error": message}))).into_response()
}

async fn shutdown(
    State(state): State<LifecycleState>,
    client: Option<Extension<Principal>>,
) -> Response {
    let principal = match unscoped(client, "stop the daemon") {
        Ok(principal) => principal,
        Err(refused) => return error(StatusCode::FORBIDDEN, refused),
    };
    tracing::info!(by = principal.label(), "stop requested through the API");
    if let Some(stop) = &state.stop {
        stop.cancel();
    }
    (
        StatusCode::ACCEPTED,
        Json(Stopping {
            pid: std::process::id(),
        }),
    )
        .into_response()
}

#[derive(Deserialize)]
struct LogsQuery {
    /// `1` (or `true`): stream the lines as they come.
    #[serde(default)]
    follow: Option<String>,
    /// Only the last this many kept lines.
    #[serde(default)]
    lines: Option<usize>,
}

async fn logs(
    State(state): State<LifecycleState>,
    Path(name): Path<String>,
    Query(query): Query<LogsQuery>,
    identity: Option<Extension<ClientIdentity>>,
    client: Option<Extension<Principal>>,
) -> Response {
    if let Err(refused) = unscoped(client, "read servers' logs") {
        return error(StatusCode::FORBIDDEN, refused);
    }
    let upstreams = state.engine.upstreams();
    let Some(log) = upstreams.server_log(&name) else {
        let names = upstreams.server_names();
        return error(
            StatusCode::NOT_FOUND,
            format!(
                "no server `{name}` in the config the daemon runs; it has: {}",
                if names.is_empty() {
                    "none".to_string()
                } else {
                    names.join(", ")
                }
            ),
        );
    };
    let follow = matches!(query.follow.as_deref(), Some("1" | "true"));
    // Subscribed before the kept lines are read: a line written in between is in one or both,
    // never in neither (`Follower` skips what the kept lines already had).
    let receiver = follow.then(|| log.follow());
    let kept = last(log.lines(), query.lines);
    let Some(receiver) = receiver else {
        return Json(ServerLogs {
            server: name,
            lines: kept.iter().map(record).collect(),
        })
        .into_response();
    };
    let client_key = identity.map_or_else(|| "anonymous".to_string(), |Extension(id)| id.0);
    let permit = match state.counts.reserve(&client_key) {
        Ok(permit) => permit,
        Err(message) => return error(StatusCode::TOO_MANY_REQUESTS, message),
    };
    let follower = Follower {
        name,
        engine: state.engine.clone(),
        changes: upstreams.changes(),
        receiver,
        after: kept.last().cloned(),
        _log: log,
        _permit: permit,
        ended: false,
    };
    let kept = futures::stream::iter(
        kept.into_iter()
            .map(|line| Ok::<_, Infallible>(line_event(&line))),
    );
    let following = futures::stream::unfold(follower, |mut follower| async move {
        let event = follower.next().await?;
        Some((Ok::<_, Infallible>(event), follower))
    });
    let stream = kept
        .chain(following)
        .take_until(state.streams.cancelled_owned());
    Sse::new(stream)
        .keep_alive(KeepAlive::new().interval(std::time::Duration::from_secs(15)))
        .into_response()
}

/// The last `n` of `lines` (all of them without `n`).
fn last(mut lines: Vec<LogLine>, n: Option<usize>) -> Vec<LogLine> {
    if let Some(n) = n
        && lines.len() > n
    {
        lines.drain(..lines.len() - n);
    }
    lines
}

fn record(line: &LogLine) -> LogRecord {
    LogRecord {
        at: portico_core::time::rfc3339(line.at_ms),
        text: line.text.clone(),
    }
}

fn line_event(line: &LogLine) -> Event {
    Event::default()
        .event(LOG_LINE_EVENT)
        .data(serde_json::to_string(&record(line)).unwrap_or_default())
}

/// A followed log: new lines, until the server leaves the config.
struct Follower {
    name: String,
    engine: Engine,
    changes: watch::Receiver<u64>,
    receiver: broadcast::Receiver<LogLine>,
    /// The last kept line sent: new lines up to it were sent already.
    after: Option<LogLine>,
    /// The log followed (its sender lives as long as the stream).
    _log: ServerLog,
    _permit: StreamPermit,
    ended: bool,
}

/// What woke a follower.
enum Woke {
    Line(Result<LogLine, RecvError>),
    Changed,
}

impl Follower {
    async fn next(&mut self) -> Option<Event> {
        if self.ended {
            return None;
        }
        loop {
            let woke = tokio::select! {
                line = self.receiver.recv() => Woke::Line(line),
                changed = self.changes.changed() => match changed {
                    Ok(()) => Woke::Changed,
                    Err(_) => Woke::Line(Err(RecvError::Closed)),
                },
            };
            match woke {
                Woke::Line(Ok(line)) => {
                    if self.already_sent(&line) {
                        continue;
                    }
                    return Some(line_event(&line));
                }
                Woke::Line(Err(RecvError::Lagged(missed))) => {
                    return Some(
                        Event::default()
                            .event(LOG_MISSED_EVENT)
                            .data(json!({"lines": missed}).to_string()),
                    );
                }
                Woke::Line(Err(RecvError::Closed)) => return None,
                Woke::Changed => {
                    let gone = !self
                        .engine
                        .upstreams()
                        .server_names()
                        .iter()
                        .any(|n| n == &self.name);
                    if gone {
                        self.ended = true;
                        return Some(Event::default().event(LOG_REMOVED_EVENT).data("{}"));
                    }
                }
            }
        }
    }

    /// Whether `line` came before the last kept line sent (or is it), so was sent with them.
    fn already_sent(&mut self, line: &LogLine) -> bool {
        let Some(after) = &self.after else {
            return false;
        };
        if line.at_ms < after.at_ms {
            return true;
        }
        let same = line == after;
        if same || line.at_ms > after.at_ms {
            self.after = None;
        }
        same
    }
}
