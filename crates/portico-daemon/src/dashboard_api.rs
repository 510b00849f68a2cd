//! The API routes the dashboard adds to what the CLI reads: server actions
//! (`POST /api/servers/{name}/restart|disable|enable`, 202 `{"server"}`; run time only, the config
//! file is not rewritten), trying a tool (`POST /api/tools/{name}/call`, through `Pipeline::call` as
//! the request's principal, waiting while an approval is pending), recent approval decisions
//! (`GET /api/approvals/decisions`), and A2A tasks and remote agents (`GET /api/a2a/tasks`,
//! `/api/a2a/tasks/{id}`, `/api/a2a/agents`). Behind the door's checks like every `/api` route.
//!
//! A client with a `tools` scope may try only its tools (the pipeline refuses the others), sees only
//! its own tasks and decisions, and may not act on servers (403).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::Query;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use portico_core::CallError;
use portico_engine::{Engine, ServerActionError};
use portico_pipeline::{ApprovalStatus, CallOutcome, PipelineError, Principal, ToolContext};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::ui_login::DASHBOARD_CLIENT;

/// The longest a try-it call waits for its approval (less when the request expires sooner).
const APPROVAL_WAIT: Duration = Duration::from_secs(300);
/// Most try-it calls waiting for an approval at once, in all and per caller: each holds a
/// connection, and a retry of a held call reuses its pending request, so the approvals' own cap
/// does not bound them. A call past either answers at once that it needs an approval.
const MAX_WAITS: usize = 64;
const MAX_WAITS_PER_CALLER: usize = 8;

/// The try-it calls waiting for an approval now, by caller.
#[derive(Clone, Default)]
struct Waits(Arc<Mutex<HashMap<String, usize>>>);

/// One waiting call's place; given back when dropped.
struct WaitPlace {
    waits: Waits,
    caller: String,
}

impl Waits {
    fn enter(&self, caller: &str) -> Option<WaitPlace> {
        let mut waiting = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let total: usize = waiting.values().sum();
        let mine = waiting.get(caller).copied().unwrap_or(0);
        if total >= MAX_WAITS || mine >= MAX_WAITS_PER_CALLER {
            return None;
        }
        *waiting.entry(caller.to_string()).or_default() += 1;
        Some(WaitPlace {
            waits: self.clone(),
            caller: caller.to_string(),
        })
    }
}

impl Drop for WaitPlace {
    fn drop(&mut self) {
        let mut waiting = self.waits.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(count) = waiting.get_mut(&self.caller) {
            *count -= 1;
            if *count == 0 {
                waiting.remove(&self.caller);
            }
        }
    }
}

#[derive(Clone)]
struct DashboardState {
    engine: Engine,
    /// `[expose] tools`: with it off the doors serve no tools, and none can be tried.
    tools_exposed: bool,
    /// `[a2a] enabled`: with it off the A2A lists are empty.
    a2a_enabled: bool,
    waits: Waits,
    /// Ends the waits for approvals on shutdown.
    shutdown: CancellationToken,
}

pub(crate) fn routes(
    engine: &Engine,
    config: &portico_config::Config,
    shutdown: CancellationToken,
) -> Router {
    Router::new()
        .route("/api/servers/{name}/restart", post(restart))
        .route("/api/servers/{name}/disable", post(disable))
        .route("/api/servers/{name}/enable", post(enable))
        .route("/api/tools/{name}/call", post(call_tool))
        .route("/api/a2a/tasks", get(a2a_tasks))
        .route("/api/a2a/tasks/{id}", get(a2a_task))
        .route("/api/a2a/agents", get(a2a_agents))
        .with_state(DashboardState {
            engine: engine.clone(),
            tools_exposed: config.expose.tools,
            a2a_enabled: config.a2a.enabled,
            waits: Waits::default(),
            shutdown,
        })
}

fn api_error(status: StatusCode, message: impl Into<String>) -> Response {
    (status, Json(json!({"error": message.into()}))).into_response()
}

/// Who the dashboard acts as: the client the door identified, else (a door without tokens)
/// `client:api`.
fn principal(client: Option<Extension<Principal>>) -> Principal {
    match client {
        Some(Extension(principal)) => principal,
        None => Principal::client(DASHBOARD_CLIENT),
    }
}

#[derive(Debug, Clone, Copy)]
enum ServerAction {
    Restart,
    Disable,
    Enable,
}

async fn server_action(
    state: DashboardState,
    client: Option<Extension<Principal>>,
    name: String,
    action: ServerAction,
) -> Response {
    let principal = principal(client);
    if principal.client_scope().is_some() {
        return api_error(
            StatusCode::FORBIDDEN,
            format!(
                "`{}` has a `tools` scope, and scoped clients cannot restart, disable or enable servers; use [server] token or an unscoped [[server.clients]] token",
                principal.label()
            ),
        );
    }
    let upstreams = state.engine.upstreams();
    let done = match action {
        ServerAction::Restart => upstreams.restart(&name).await,
        ServerAction::Disable => upstreams.disable(&name).await,
        ServerAction::Enable => upstreams.enable(&name).await,
    };
    match done {
        Ok(()) => {
            tracing::info!(
                server = name,
                by = principal.label(),
                "{action:?} from the API"
            );
            (StatusCode::ACCEPTED, Json(json!({"server": name}))).into_response()
        }
        Err(error @ ServerActionError::UnknownServer(_)) => {
            api_error(StatusCode::NOT_FOUND, error.to_string())
        }
        Err(error @ ServerActionError::Conflict(_)) => {
            api_error(StatusCode::CONFLICT, error.to_string())
        }
        Err(error @ ServerActionError::Unavailable(_)) => {
            api_error(StatusCode::SERVICE_UNAVAILABLE, error.to_string())
        }
    }
}

async fn restart(
    State(state): State<DashboardState>,
    client: Option<Extension<Principal>>,
    Path(name): Path<String>,
) -> Response {
    server_action(state, client, name, ServerAction::Restart).await
}

async fn disable(
    State(state): State<DashboardState>,
    client: Option<Extension<Principal>>,
    Path(name): Path<String>,
) -> Response {
    server_action(state, client, name, ServerAction::Disable).await
}

async fn enable(
    State(state): State<DashboardState>,
    client: Option<Extension<Principal>>,
    Path(name): Path<String>,
) -> Response {
    server_action(state, client, name, ServerAction::Enable).await
}

/// A try-it call that got no answer of the tool's own: the status, `kind` and message, plus what
/// the kind adds (the approval request's id, a host policy's failure value).
fn refusal(error: &PipelineError) -> Response {
    let (status, kind) = match error {
        PipelineError::UnknownTool { .. } | PipelineError::Source(CallError::NotFound(_)) => {
            (StatusCode::NOT_FOUND, "not_found")
        }
        PipelineError::NotPermitted { .. }
        | PipelineError::OutsideClientScope { .. }
        | PipelineError::Refused { .. } => (StatusCode::FORBIDDEN, "denied"),
        PipelineError::InvalidArguments { .. } => (StatusCode::BAD_REQUEST, "invalid_arguments"),
        PipelineError::ApprovalRequired { .. } => (StatusCode::CONFLICT, "approval_required"),
        PipelineError::PolicyFailed { .. } => (StatusCode::UNPROCESSABLE_ENTITY, "policy_failed"),
        PipelineError::PolicyError { .. } => (StatusCode::INTERNAL_SERVER_ERROR, "policy_error"),
        PipelineError::Timeout { .. } | PipelineError::Source(CallError::Timeout(_)) => {
            (StatusCode::GATEWAY_TIMEOUT, "timeout")
        }
        PipelineError::InvalidOutput { .. } => (StatusCode::BAD_GATEWAY, "invalid_output"),
        PipelineError::Source(CallError::UpstreamGone(_)) => {
            (StatusCode::SERVICE_UNAVAILABLE, "unavailable")
        }
        PipelineError::Source(CallError::Budget(_)) => (StatusCode::TOO_MANY_REQUESTS, "budget"),
        PipelineError::Source(CallError::Cancelled(_)) => {
            (StatusCode::SERVICE_UNAVAILABLE, "cancelled")
        }
        PipelineError::Source(
            CallError::UpstreamFailed(_) | CallError::Failed(_) | CallError::Protocol(_),
        ) => (StatusCode::BAD_GATEWAY, "failed"),
    };
    let mut body = json!({"error": error.to_string(), "kind": kind});
    if let PipelineError::ApprovalRequired {
        request_id: Some(id),
        ..
    } = error
    {
        body["approval"] = Value::String(id.clone());
    }
    if let Some(failure) = error.policy_failure() {
        body["failure"] = failure.clone();
    }
    (status, Json(body)).into_response()
}

/// The pending approval request that holds a call, if that is why it did not run.
fn held_by(outcome: &CallOutcome) -> Option<&str> {
    match &outcome.error {
        Some(PipelineError::ApprovalRequired {
            request_id: Some(id),
            ..
        }) => Some(id),
        _ => None,
    }
}

/// Waits until approval request `id` is answered (or expires), at most `within` and until
/// `shutdown`: its status then, `None` if still pending.
async fn answered(
    engine: &Engine,
    id: &str,
    within: Duration,
    shutdown: &CancellationToken,
) -> Option<ApprovalStatus> {
    let approvals = engine.approvals().clone();
    // Subscribed before the first look, so an answer in between is not missed.
    let mut answers = approvals.answers();
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let id = id.to_string();
        let status = approvals
            .run("reading an approval request", move |a| a.get(&id))
            .await
            .ok()??
            .status;
        if status != ApprovalStatus::Pending {
            return Some(status);
        }
        tokio::select! {
            changed = answers.changed() => if changed.is_err() { return None },
            _ = tokio::time::sleep_until(deadline) => return None,
            _ = shutdown.cancelled() => return None,
        }
    }
}

async fn call_tool(
    State(state): State<DashboardState>,
    client: Option<Extension<Principal>>,
    Path(name): Path<String>,
    body: axum::body::Bytes,
) -> Response {
    let started = Instant::now();
    let arguments = match call_arguments(&body) {
        Ok(arguments) => arguments,
        Err(message) => {
            return (
                StatusCode::BAD_REQUEST,
                Json(json!({"error": message, "kind": "invalid_arguments"})),
            )
                .into_response();
        }
    };
    if !state.tools_exposed {
        return (
            StatusCode::NOT_FOUND,
            Json(json!({
                "error": "[expose] tools = false: the doors serve no tools, so none can be tried; set it to true to try tools here",
                "kind": "not_found",
            })),
        )
            .into_response();
    }
    let context = ToolContext::of(principal(client));
    let pipeline = state.engine.pipeline();
    let mut called = pipeline.call(&name, arguments.clone(), &context).await;
    // Held for an approval: the page shows the request (on /api/approvals and the event stream)
    // while this waits for its answer; approved, the same call runs once with the grant. Past the
    // bound on waiting calls, it answers at once that it needs an approval.
    let caller = context.principal.label();
    if let Some(id) = called.as_ref().ok().and_then(held_by).map(str::to_string)
        && let Some(_place) = state.waits.enter(&caller)
    {
        let within = APPROVAL_WAIT.min(state.engine.approvals().settings().ttl);
        let status = answered(&state.engine, &id, within, &state.shutdown).await;
        if status == Some(ApprovalStatus::Approved) {
            called = pipeline.call(&name, arguments, &context).await;
        }
    }
    let outcome = match called {
        Ok(outcome) => outcome,
        Err(error) => return refusal(&error),
    };
    if let Some(error) = &outcome.error {
        return refusal(error);
    }
    let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    Json(json!({
        "result": portico_mcp_server::call_result_json(outcome.result),
        "duration_ms": duration_ms,
    }))
    .into_response()
}

#[derive(serde::Deserialize)]
struct TaskParams {
    state: Option<String>,
    agent: Option<String>,
    limit: Option<usize>,
}

/// The tasks `principal` may see: a scoped client's own, anyone else's every task.
fn task_owner(principal: &Option<Principal>) -> Option<String> {
    principal
        .as_ref()
        .filter(|p| p.client_scope().is_some())
        .map(Principal::label)
}

/// `{"tasks": [{id, contextId, agent, state, createdAt, updatedAt}]}`, the most recently updated
/// first; `state` is the A2A 1.0 name (`TASK_STATE_WORKING`); the `state` filter takes it or the
/// lower-case word (`working`, `input-required`).
async fn a2a_tasks(
    State(state): State<DashboardState>,
    client: Option<Extension<Principal>>,
    Query(params): Query<TaskParams>,
) -> Response {
    let limit = params
        .limit
        .unwrap_or(portico_store::DEFAULT_TASK_PAGE_SIZE);
    if limit == 0 || limit > portico_store::MAX_TASK_PAGE_SIZE {
        return api_error(
            StatusCode::BAD_REQUEST,
            format!(
                "`limit` must be 1 to {}, got {limit}",
                portico_store::MAX_TASK_PAGE_SIZE
            ),
        );
    }
    let wanted = match params.state.as_deref() {
        None | Some("") => None,
        Some(name) => match portico_core::TaskState::from_any_name(name) {
            Some(task_state) => Some(task_state),
            None => {
                return api_error(
                    StatusCode::BAD_REQUEST,
                    format!(
                        "`state` `{name}` is not an A2A task state (TASK_STATE_WORKING or working, completed, failed, canceled, input-required, ...)"
                    ),
                );
            }
        },
    };
    if !state.a2a_enabled {
        return Json(json!({"tasks": []})).into_response();
    }
    let owner = task_owner(&client.map(|Extension(p)| p));
    let agent = params.agent.filter(|a| !a.is_empty());
    let found = state
        .engine
        .store()
        .run("listing recent A2A tasks", move |store| {
            store.recent_tasks(owner.as_deref(), agent.as_deref(), wanted, limit)
        })
        .await;
    match found {
        Ok(tasks) => {
            let time = portico_core::time::rfc3339;
            let listed: Vec<Value> = tasks
                .iter()
                .map(|task| {
                    json!({
                        "id": task.id,
                        "contextId": task.context_id,
                        "agent": task.agent,
                        "state": task.state.v1_name(),
                        "createdAt": time(task.created_at_ms),
                        "updatedAt": time(task.updated_at_ms),
                    })
                })
                .collect();
            Json(json!({"tasks": listed})).into_response()
        }
        Err(error) => api_error(StatusCode::INTERNAL_SERVER_ERROR, error.to_string()),
    }
}

/// `{"task": ...}`: the task in the A2A 1.0 JSON shape (`id`, `contextId`, `status`, `history`,
/// `artifacts`, `metadata`), plus Portico's `agent`, `createdAt` and `updatedAt`.
async fn a2a_task(
    State(state): State<DashboardState>,
    client: Option<Extension<Principal>>,
    Path(id): Path<String>,
) -> Response {
    let missing = || {
        api_error(
            StatusCode::NOT_FOUND,
            format!("no A2A task `{id}` here; GET /api/a2a/tasks lists them"),
        )
    };
    if !state.a2a_enabled || id.len() > 128 {
        return missing();
    }
    let owner = task_owner(&client.map(|Extension(p)| p));
    let lookup = id.clone();
    let found = state
        .engine
        .store()
        .run("reading an A2A task", move |store| store.task(&lookup))
        .await;
    match found {
        Ok(Some(task)) if owner.as_ref().is_none_or(|owner| *owner == task.owner) => {
            let mut shown = portico_a2a::task_json(&task, None);
            let time = portico_core::time::rfc3339;
            shown["agent"] = Value::String(task.agent.clone());
            shown["createdAt"] = Value::String(time(task.created_at_ms));
            shown["updatedAt"] = Value::String(time(task.updated_at_ms));
            Json(json!({"task": shown})).into_response()
        }
        Ok(_) => missing(),
        Err(error) => api_error(StatusCode::INTERNAL_SERVER_ERROR, error.to_string()),
    }
}

/// `{"agents": [{name, url, card, error}]}`: the `[[a2a.external_agents]]`, each with its card as
/// last read (as the agent served it) or null, and why the last read failed, or null.
async fn a2a_agents(State(state): State<DashboardState>) -> Response {
    if !state.a2a_enabled {
        return Json(json!({"agents": []})).into_response();
    }
    let agents: Vec<Value> = state
        .engine
        .remote_agents()
        .into_iter()
        .map(|agent| {
            json!({
                "name": agent.name,
                "url": agent.url,
                "card": agent.card.map(|card| card.raw.clone()),
                "error": agent.error,
            })
        })
        .collect();
    Json(json!({"agents": agents})).into_response()
}

/// The `arguments` of a try-it body (`{"arguments": {...}}`; an empty body or `null` is none), or
/// why the body is not one.
fn call_arguments(body: &[u8]) -> Result<Option<portico_core::JsonObject>, String> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct CallBody {
        #[serde(default)]
        arguments: Value,
    }
    let body: CallBody = serde_json::from_slice(body).map_err(|error| {
        format!("the body must be a JSON object like {{\"arguments\": {{...}}}}: {error}")
    })?;
    match body.arguments {
        Value::Null => Ok(None),
        Value::Object(arguments) => Ok(Some(arguments)),
        other => Err(format!(
            "`arguments` must be a JSON object of the tool's arguments, not {}",
            match other {
                Value::Array(_) => "an array",
                Value::String(_) => "a string",
                Value::Number(_) => "a number",
                _ => "a boolean",
            }
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_try_it_body_is_an_object_of_arguments_or_nothing() {
        assert_eq!(call_arguments(b""), Ok(None));
        assert_eq!(call_arguments(b"{}"), Ok(None));
        assert_eq!(call_arguments(br#"{"arguments": null}"#), Ok(None));
        assert_eq!(
            call_arguments(br#"{"arguments": {"a": 1}}"#),
            Ok(json!({"a": 1}).as_object().cloned())
        );
        assert!(
            call_arguments(br#"{"arguments": [1]}"#)
                .unwrap_err()
                .contains("not an array")
        );
        assert!(
            call_arguments(br#"{"args": {}}"#)
                .unwrap_err()
                .starts_with("the body must be a JSON object")
        );
    }

    #[test]
    fn refusals_have_their_kind_and_status() {
        let cases = [
            (
                PipelineError::UnknownTool {
                    name: "x".into(),
                    hint: String::new(),
                },
                404,
                "not_found",
            ),
            (
                PipelineError::Refused {
                    tool: "x".into(),
                    reason: "no".into(),
                },
                403,
                "denied",
            ),
            (
                PipelineError::InvalidArguments {
                    tool: "x".into(),
                    problems: "p".into(),
                },
                400,
                "invalid_arguments",
            ),
            (
                PipelineError::Timeout {
                    tool: "x".into(),
                    after: Duration::from_secs(1),
                },
                504,
                "timeout",
            ),
            (
                PipelineError::Source(CallError::Failed("f".into())),
                502,
                "failed",
            ),
        ];
        for (error, status, kind) in cases {
            let response = refusal(&error);
            assert_eq!(response.status().as_u16(), status, "{error}");
            let body =
                futures::executor::block_on(axum::body::to_bytes(response.into_body(), usize::MAX))
                    .unwrap();
            let body: Value = serde_json::from_slice(&body).unwrap();
            assert_eq!(body["kind"], kind);
            assert_eq!(body["error"], error.to_string());
        }
    }

    #[test]
    fn waiting_calls_are_bounded_per_caller_and_in_all_and_give_back_their_places() {
        let waits = Waits::default();
        let mine: Vec<WaitPlace> = (0..MAX_WAITS_PER_CALLER)
            .map(|_| waits.enter("client:a").unwrap())
            .collect();
        assert!(waits.enter("client:a").is_none(), "past the caller's bound");
        let others: Vec<WaitPlace> = (0..MAX_WAITS - MAX_WAITS_PER_CALLER)
            .map(|i| waits.enter(&format!("client:{}", i % 7 + 1000)).unwrap())
            .collect();
        assert!(waits.enter("client:b").is_none(), "past the bound in all");
        drop(mine);
        assert!(waits.enter("client:a").is_some(), "places given back");
        drop(others);
        assert!(waits.0.lock().unwrap().is_empty(), "no caller left behind");
    }
}
