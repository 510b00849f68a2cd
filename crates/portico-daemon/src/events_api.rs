//! `GET /api/events`: the engine's live events ([`portico_engine::Events`]) as server-sent events,
//! for the dashboard. First `hello` (`{"time"}`), then `server` (a status as `/api/servers` has it),
//! `approval` (`{"id", "tool", "state"}`), `audit` (a record as `/api/audit` has it, before the store
//! gives it its `id`), `task` (`{"id", "agent", "state"}`, the state's A2A 1.0 name), and `resync`
//! (`{}`) when the stream fell more than [`portico_engine::EVENT_CAPACITY`] events behind and the
//! page should read everything again. A comment every 15 s keeps idle connections open.
//!
//! Bounded: [`MAX_STREAMS`] open streams in all and [`MAX_STREAMS_PER_CLIENT`] per client identity
//! (else 429), each place given back when its stream ends; every stream ends on shutdown. A client
//! with a `tools` scope gets only events about its own tools, calls, approvals and tasks.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Extension, Json, Router};
use futures::StreamExt;
use portico_engine::{Engine, EngineEvent};
use portico_pipeline::{ApprovalStatus, Principal};
use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;
use tokio_util::sync::CancellationToken;

use crate::security::ClientIdentity;

/// Open event streams in all.
pub(crate) const MAX_STREAMS: usize = 64;
/// Open event streams of one client identity.
pub(crate) const MAX_STREAMS_PER_CLIENT: usize = 8;
/// How often an idle stream gets a comment.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

#[derive(Clone)]
struct EventsState {
    engine: Engine,
    streams: StreamCounts,
    shutdown: CancellationToken,
}

pub(crate) fn routes(engine: &Engine, shutdown: CancellationToken) -> Router {
    Router::new()
        .route("/api/events", get(events))
        .with_state(EventsState {
            engine: engine.clone(),
            streams: StreamCounts::default(),
            shutdown,
        })
}

/// Open streams, in all and per client.
#[derive(Clone, Default)]
pub(crate) struct StreamCounts {
    inner: Arc<Mutex<Counts>>,
}

#[derive(Default)]
struct Counts {
    total: usize,
    per_client: HashMap<String, usize>,
}

/// One stream's place; given back when dropped (with its stream).
pub(crate) struct StreamPermit {
    counts: StreamCounts,
    client: String,
}

impl StreamCounts {
    fn lock(&self) -> std::sync::MutexGuard<'_, Counts> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A place for one more stream of `client`'s, or why there is none.
    pub(crate) fn reserve(&self, client: &str) -> Result<StreamPermit, String> {
        let mut counts = self.lock();
        if counts.total >= MAX_STREAMS {
            return Err(format!(
                "the daemon already serves {MAX_STREAMS} event streams (its limit); close one (a dashboard tab, a `portico logs -f`) and try again"
            ));
        }
        let mine = counts.per_client.get(client).copied().unwrap_or(0);
        if mine >= MAX_STREAMS_PER_CLIENT {
            return Err(format!(
                "`{client}` already has {MAX_STREAMS_PER_CLIENT} event streams open (the limit per client); close one (a dashboard tab, a `portico logs -f`) and try again"
            ));
        }
        counts.total += 1;
        *counts.per_client.entry(client.to_string()).or_default() += 1;
        Ok(StreamPermit {
            counts: self.clone(),
            client: client.to_string(),
        })
    }

    #[cfg(test)]
    fn open(&self) -> usize {
        self.lock().total
    }
}

impl Drop for StreamPermit {
    fn drop(&mut self) {
        let mut counts = self.counts.lock();
        counts.total = counts.total.saturating_sub(1);
        if let Some(count) = counts.per_client.get_mut(&self.client) {
            *count -= 1;
            if *count == 0 {
                counts.per_client.remove(&self.client);
            }
        }
    }
}

/// Who follows a stream, and so which events it gets.
struct Viewer {
    /// Set for a client with a `tools` scope: only its own events.
    scoped: Option<Principal>,
    engine: Engine,
}

impl Viewer {
    fn sees(&self, event: &EngineEvent) -> bool {
        let Some(principal) = &self.scoped else {
            return true;
        };
        let label = principal.label();
        match event {
            EngineEvent::Server(status) => self
                .engine
                .catalog()
                .tools_of(&status.name)
                .any(|tool| principal.may_use(&tool.name)),
            EngineEvent::Approval(change) => {
                change.principal == label || change.on_behalf_of.as_deref() == Some(label.as_str())
            }
            EngineEvent::Audit(record) => record.caller == label,
            EngineEvent::Task(change) => change.owner == label,
        }
    }
}

/// The SSE event of `event`: its name and JSON data. `None` for what the stream does not carry (a
/// grant's use).
pub(crate) fn rendered(event: &EngineEvent) -> Option<(&'static str, Value)> {
    Some(match event {
        EngineEvent::Server(status) => ("server", serde_json::to_value(status).ok()?),
        EngineEvent::Approval(change) => {
            let state = match change.status {
                ApprovalStatus::Consumed => return None,
                other => other.as_str(),
            };
            (
                "approval",
                json!({"id": change.id, "tool": change.tool, "state": state}),
            )
        }
        EngineEvent::Audit(record) => ("audit", crate::api::audit_record_json(record)),
        EngineEvent::Task(change) => (
            "task",
            json!({"id": change.id, "agent": change.agent, "state": change.state.v1_name()}),
        ),
    })
}

fn sse(name: &str, data: &Value) -> Event {
    Event::default().event(name).data(data.to_string())
}

async fn events(
    State(state): State<EventsState>,
    identity: Option<Extension<ClientIdentity>>,
    client: Option<Extension<Principal>>,
) -> Response {
    let client_key = identity.map_or_else(|| "anonymous".to_string(), |Extension(id)| id.0);
    let permit = match state.streams.reserve(&client_key) {
        Ok(permit) => permit,
        Err(message) => {
            tracing::warn!("{message}");
            return (
                StatusCode::TOO_MANY_REQUESTS,
                Json(json!({"error": message})),
            )
                .into_response();
        }
    };
    let viewer = Viewer {
        scoped: client
            .map(|Extension(principal)| principal)
            .filter(|principal| principal.client_scope().is_some()),
        engine: state.engine.clone(),
    };
    // Subscribed before `hello` is sent: whatever happens after the page sees it arrives.
    let receiver = state.engine.events().subscribe();
    let hello = sse("hello", &json!({"time": portico_core::time::now_rfc3339()}));
    let following = futures::stream::unfold(
        (receiver, viewer, permit),
        |(mut receiver, viewer, permit)| async move {
            let event = next_event(&mut receiver, &viewer).await?;
            Some((Ok::<_, Infallible>(event), (receiver, viewer, permit)))
        },
    );
    let stream = futures::stream::once(async move { Ok::<_, Infallible>(hello) })
        .chain(following)
        .take_until(state.shutdown.cancelled_owned());
    Sse::new(stream)
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE))
        .into_response()
}

/// The next event `viewer` gets; `None` when the engine is gone.
async fn next_event(
    receiver: &mut tokio::sync::broadcast::Receiver<EngineEvent>,
    viewer: &Viewer,
) -> Option<Event> {
    loop {
        match receiver.recv().await {
            Ok(event) if viewer.sees(&event) => {
                if let Some((name, data)) = rendered(&event) {
                    return Some(sse(name, &data));
                }
            }
            Ok(_) => {}
            Err(RecvError::Lagged(_)) => return Some(sse("resync", &json!({}))),
            Err(RecvError::Closed) => return None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_are_bounded_per_client_and_in_all_and_given_back() {
        let counts = StreamCounts::default();
        let mine: Vec<StreamPermit> = (0..MAX_STREAMS_PER_CLIENT)
            .map(|_| counts.reserve("client:a").unwrap())
            .collect();
        let refused = counts.reserve("client:a").err().unwrap();
        assert!(refused.contains("`client:a` already has 8"), "{refused}");
        drop(mine);
        assert_eq!(counts.open(), 0);
        let all: Vec<StreamPermit> = (0..MAX_STREAMS)
            .map(|i| {
                counts
                    .reserve(&format!("client:{}", i / MAX_STREAMS_PER_CLIENT))
                    .unwrap()
            })
            .collect();
        let refused = counts.reserve("client:new").err().unwrap();
        assert!(refused.contains("already serves 64"), "{refused}");
        drop(all);
        assert_eq!(counts.open(), 0);
        assert!(counts.lock().per_client.is_empty());
    }

    #[test]
    fn events_have_the_contracts_names_and_shapes() {
        let approval = EngineEvent::Approval(portico_engine::ApprovalChange {
            id: "apr_1".into(),
            tool: "file_write".into(),
            status: ApprovalStatus::Pending,
            principal: "client:x".into(),
            on_behalf_of: None,
        });
        assert_eq!(
            rendered(&approval),
            Some((
                "approval",
                json!({"id": "apr_1", "tool": "file_write", "state": "pending"})
            ))
        );
        let consumed = EngineEvent::Approval(portico_engine::ApprovalChange {
            id: "apr_1".into(),
            tool: "file_write".into(),
            status: ApprovalStatus::Consumed,
            principal: "client:x".into(),
            on_behalf_of: None,
        });
        assert_eq!(rendered(&consumed), None);
        let task = EngineEvent::Task(portico_engine::TaskChange {
            id: "t1".into(),
            agent: "helper".into(),
            state: portico_core::TaskState::Completed,
            owner: "client:x".into(),
        });
        assert_eq!(
            rendered(&task),
            Some((
                "task",
                json!({"id": "t1", "agent": "helper", "state": "TASK_STATE_COMPLETED"})
            ))
        );
        let audit = EngineEvent::Audit(portico_store::AuditRecord {
            at_ms: 1_709_210_096_789,
            caller: "client:x".into(),
            tool: "system_time".into(),
            arguments_digest: "d".into(),
            outcome: "ok".into(),
            detail: None,
            duration_ms: 3,
        });
        let (name, data) = rendered(&audit).unwrap();
        assert_eq!(name, "audit");
        assert_eq!(data["time"], "2024-02-29T12:34:56.789Z");
        assert_eq!(data["at_ms"], 1_709_210_096_789_i64);
        assert_eq!(data["caller"], "client:x");
        assert_eq!(data.get("id"), None);
    }
}
