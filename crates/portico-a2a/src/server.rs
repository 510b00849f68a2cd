//! The A2A routes: cards, JSON-RPC (1.0 and 0.3 method names), HTTP+JSON (1.0 paths; the 0.3 paths
//! under `/v1` are in `rest03`), and the legacy `tasks/send` of the early draft.
//!
//! Version negotiation follows the spec: the `A2A-Version` header names the version (`1.0`, `0.3`); no
//! header means 0.3. Leniency where it costs nothing: a 1.0 method name without the header is served
//! as 1.0, since no 0.3 client sends one.

use std::convert::Infallible;
use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures::Stream;
use portico_engine::Engine;
use portico_pipeline::Principal;
use portico_store::{TaskLimits, TaskQuery};
use serde_json::{Value, json};
use tokio::sync::broadcast;

use crate::card;
use crate::error::A2aError;
use crate::tasks::{Answer, Sent, Subscription, Tasks, task_json};
use crate::wire::{self, Version, is_interrupted, is_terminal};

/// The client webhooks are POSTed with. Without one (it cannot be built), push notifications are
/// not offered.
fn push_client(allow_private: bool) -> Option<portico_net::SafeClient> {
    let policy = if allow_private {
        portico_net::NetPolicy::allow_private_network()
    } else {
        portico_net::NetPolicy::public_only()
    };
    portico_net::SafeClient::builder()
        .policy(policy)
        // Every webhook POST carries the client's token or credentials: none follows a redirect off
        // the webhook's origin.
        .credentials(portico_net::CredentialScope::Everywhere)
        .connect_timeout(std::time::Duration::from_secs(10))
        .user_agent(concat!("portico/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| tracing::warn!("push notifications are off: {e}"))
        .ok()
}

/// How the A2A door is set up.
#[derive(Debug, Clone)]
pub struct A2aOptions {
    pub listen_path: String,
    /// The base URL in cards (never a wildcard address).
    pub public_url: String,
    pub primary_agent: Option<String>,
    pub max_tasks: usize,
    /// Webhooks may be on loopback or private addresses.
    pub push_allow_private_network: bool,
    /// Open event streams (subscriptions, streamed sends): in all, and per caller identity.
    pub streams: crate::tasks::StreamLimits,
}

#[derive(Clone)]
pub(crate) struct A2aState {
    engine: Engine,
    pub(crate) tasks: Tasks,
    options: Arc<A2aOptions>,
}

/// Marks failed the tasks a previous process left running (their agent runs died with it). Call it
/// before serving, so no task of this process is mistaken for one of those.
pub async fn recover_interrupted(engine: &Engine) {
    let tasks = Tasks::new(
        engine.clone(),
        TaskLimits {
            max_tasks: usize::MAX,
        },
        None,
    );
    match tasks.recover().await {
        Ok(0) => {}
        Ok(n) => {
            tracing::warn!("{n} A2A task(s) were running when Portico last stopped; marked failed")
        }
        Err(error) => tracing::warn!("could not check for interrupted A2A tasks: {error}"),
    }
}

/// The A2A router.
pub fn routes(engine: Engine, options: A2aOptions) -> Router {
    routes_and_tasks(engine, options).0
}

/// The A2A router and the tasks behind it.
pub(crate) fn routes_and_tasks(engine: Engine, options: A2aOptions) -> (Router, Tasks) {
    let pusher = push_client(options.push_allow_private_network)
        .map(|client| crate::push::Pusher::new(client, engine.store().clone()));
    let tasks = Tasks::with_stream_limits(
        engine.clone(),
        TaskLimits {
            max_tasks: options.max_tasks,
        },
        pusher,
        options.streams,
    );
    let lp = options.listen_path.trim_end_matches('/').to_string();
    let state = A2aState {
        engine,
        tasks: tasks.clone(),
        options: Arc::new(A2aOptions {
            listen_path: lp.clone(),
            ..options
        }),
    };
    let router = Router::new()
        .route("/.well-known/agent-card.json", get(primary_card))
        .route("/.well-known/agent.json", get(legacy_card))
        .route(&format!("{lp}/tasks/send"), post(legacy_send))
        .route(&format!("{lp}/{{agent}}"), post(jsonrpc))
        .route(
            &format!("{lp}/{{agent}}/.well-known/agent-card.json"),
            get(agent_card),
        )
        .route(&format!("{lp}/{{agent}}/message:send"), post(rest_send))
        .route(&format!("{lp}/{{agent}}/message:stream"), post(rest_stream))
        .route(&format!("{lp}/{{agent}}/tasks"), get(rest_list))
        .route(
            &format!("{lp}/{{agent}}/tasks/{{task}}"),
            get(rest_task).post(rest_task_action),
        )
        .route(
            &format!("{lp}/{{agent}}/tasks/{{task}}/pushNotificationConfigs"),
            get(rest_push).post(rest_push),
        )
        .route(
            &format!("{lp}/{{agent}}/tasks/{{task}}/pushNotificationConfigs/{{id}}"),
            get(rest_push).delete(rest_push),
        )
        .route(
            &format!("{lp}/{{agent}}/extendedAgentCard"),
            get(rest_extended_card),
        )
        .merge(crate::rest03::routes(&lp))
        .with_state(state);
    (router, tasks)
}

/// Who is calling: tasks are visible only to the identity that created them. That is the client
/// the door's token check identified (`client:laptop`), whose principal (with its tool scope) the
/// agent's run is called as; on a door without tokens, the credential presented (hashed), or
/// `anonymous`, calling as `client:a2a`.
#[derive(Debug, Clone)]
pub(crate) struct Caller {
    pub(crate) owner: String,
    pub(crate) principal: Principal,
}

impl Caller {
    fn of(parts: &axum::http::request::Parts) -> Caller {
        match parts.extensions.get::<Principal>() {
            Some(principal) => Caller {
                owner: principal.label(),
                principal: principal.clone(),
            },
            None => Caller {
                owner: match parts.headers.get(header::AUTHORIZATION) {
                    Some(value) => portico_pipeline::credential_identity(value.as_bytes()),
                    None => "anonymous".into(),
                },
                principal: Principal::client("a2a"),
            },
        }
    }
}

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for Caller {
    type Rejection = Infallible;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        _state: &S,
    ) -> Result<Self, Self::Rejection> {
        Ok(Caller::of(parts))
    }
}

pub(crate) fn requested_version(headers: &HeaderMap) -> Result<Option<Version>, A2aError> {
    let Some(value) = headers.get("a2a-version") else {
        return Ok(None);
    };
    let value = value.to_str().unwrap_or_default().trim();
    match value {
        "1" | "1.0" | "1.0.0" => Ok(Some(Version::V1)),
        "0.3" | "0.3.0" => Ok(Some(Version::V03)),
        other => Err(A2aError::VersionNotSupported(other.to_string())),
    }
}

impl A2aState {
    pub(crate) fn agent_name(&self, requested: &str) -> Result<String, A2aError> {
        self.engine
            .agents()
            .agent(requested)
            .map(|a| a.config.name.clone())
            .ok_or_else(|| A2aError::MethodNotFound(format!("no agent `{requested}` here")))
    }

    fn primary(&self) -> Option<String> {
        match &self.options.primary_agent {
            Some(name) => Some(name.clone()),
            None => self.engine.agents().infos().first().map(|a| a.name.clone()),
        }
    }

    /// The card in one version's form, or (`None`) both forms merged.
    async fn card(&self, agent: &str, version: Option<Version>) -> Option<Value> {
        let agent = self.engine.agents().agent(agent)?.clone();
        let principal = Principal::agent(agent.config.name.clone(), agent.patterns.clone());
        let tools = self.engine.pipeline().list(&principal).await;
        let url = card::agent_url(
            &self.options.public_url,
            &self.options.listen_path,
            &agent.config.name,
        );
        Some(match version {
            Some(version) => card::card(&agent, &tools, &url, version),
            None => {
                let mut merged = card::card(&agent, &tools, &url, Version::V03);
                if let (Some(merged), Value::Object(v1)) = (
                    merged.as_object_mut(),
                    card::card(&agent, &tools, &url, Version::V1),
                ) {
                    for (key, value) in v1 {
                        // Both forms have `capabilities`: keep every flag of each.
                        match (merged.get_mut(&key), value) {
                            (Some(Value::Object(old)), Value::Object(new)) => old.extend(new),
                            (_, value) => {
                                merged.insert(key, value);
                            }
                        }
                    }
                }
                merged
            }
        })
    }
}

/// Serves a card with an ETag; a matching If-None-Match gets 304.
async fn serve_card(
    state: &A2aState,
    caller: &Caller,
    agent: Option<String>,
    version: Option<Version>,
    headers: &HeaderMap,
) -> Response {
    // An agent outside the client's scope is not there for it, card included.
    let agent = agent.filter(|name| {
        state
            .engine
            .agents()
            .agent(name)
            .is_some_and(|a| caller.principal.may_use(&a.tool_name))
    });
    let Some(agent) = agent else {
        return (
            StatusCode::NOT_FOUND,
            axum::Json(json!({"error": "no agents are configured"})),
        )
            .into_response();
    };
    let Some(card) = state.card(&agent, version).await else {
        return (
            StatusCode::NOT_FOUND,
            axum::Json(json!({"error": format!("no agent `{agent}`")})),
        )
            .into_response();
    };
    let body = serde_json::to_vec(&card).unwrap_or_default();
    let tag = card::etag(&body);
    let matches = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == tag || t.trim() == "*"));
    let mut response = if matches {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        ([(header::CONTENT_TYPE, "application/json")], body).into_response()
    };
    if let Ok(value) = HeaderValue::from_str(&tag) {
        response.headers_mut().insert(header::ETAG, value);
    }
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

/// Which card form to serve: the one the `A2A-Version` header (or `?version=`) asks for; without
/// either, both forms' fields in one document, since a missing header means 0.3 to the spec but 1.0
/// SDKs read the same path, and each ignores the other's fields.
fn card_version(headers: &HeaderMap, query: &CardQuery) -> Option<Version> {
    match (requested_version(headers), query.version.as_deref()) {
        (Ok(Some(version)), _) => Some(version),
        (_, Some("0.3" | "0.3.0")) => Some(Version::V03),
        (_, Some("1" | "1.0" | "1.0.0")) => Some(Version::V1),
        _ => None,
    }
}

#[derive(serde::Deserialize, Default)]
struct CardQuery {
    version: Option<String>,
}

async fn primary_card(
    State(state): State<A2aState>,
    Query(query): Query<CardQuery>,
    caller: Caller,
    headers: HeaderMap,
) -> Response {
    let version = card_version(&headers, &query);
    serve_card(&state, &caller, state.primary(), version, &headers).await
}

async fn legacy_card(
    State(state): State<A2aState>,
    caller: Caller,
    headers: HeaderMap,
) -> Response {
    serve_card(
        &state,
        &caller,
        state.primary(),
        Some(Version::V03),
        &headers,
    )
    .await
}

async fn agent_card(
    State(state): State<A2aState>,
    Path(agent): Path<String>,
    Query(query): Query<CardQuery>,
    caller: Caller,
    headers: HeaderMap,
) -> Response {
    let version = card_version(&headers, &query);
    let name = state.agent_name(&agent).ok();
    serve_card(&state, &caller, name, version, &headers).await
}

// ---------------------------------------------------------------------------------------------------
// Operations, independent of binding.

/// A send that answers with the task: at once, or (blocking, the default) once it is finished or
/// waiting for input.
pub(crate) async fn send(
    state: &A2aState,
    caller: &Caller,
    agent: &str,
    params: &Value,
) -> Result<Value, A2aError> {
    let owner = caller.owner.as_str();
    let configuration = params.get("configuration").cloned().unwrap_or_default();
    // `returnImmediately` (1.0) or `blocking: false` (0.3) answers at once.
    let immediately = configuration
        .get("returnImmediately")
        .and_then(Value::as_bool)
        == Some(true)
        || configuration.get("blocking").and_then(Value::as_bool) == Some(false);
    let answer = if immediately {
        Answer::AtOnce
    } else {
        Answer::WhenSettled
    };
    let (sent, history_length) = start(state, caller, agent, params, answer).await?;
    if answer == Answer::WhenSettled {
        sent.settled().await;
    }
    sent_task(state, owner, &sent, history_length).await
}

/// A send that answers with the task at once, then streams its events.
pub(crate) async fn send_streaming(
    state: &A2aState,
    caller: &Caller,
    agent: &str,
    params: &Value,
) -> Result<(Value, Subscription), A2aError> {
    let owner = caller.owner.as_str();
    let (mut sent, history_length) = start(state, caller, agent, params, Answer::Stream).await?;
    let events = sent
        .events
        .take()
        .ok_or_else(|| A2aError::Internal("a streamed task came without its events".into()))?;
    Ok((
        sent_task(state, owner, &sent, history_length).await?,
        events,
    ))
}

/// Starts the task a send's `params` describe; also returns the history length it asks for.
async fn start(
    state: &A2aState,
    caller: &Caller,
    agent: &str,
    params: &Value,
    answer: Answer,
) -> Result<(Sent, Option<usize>), A2aError> {
    let message = match params.get("message") {
        Some(message) if message.is_object() => wire::message_from_any(message),
        Some(other) => {
            return Err(A2aError::InvalidParams(format!(
                "`message` must be an object with `messageId`, `role` and `parts`, not {}",
                json_kind(other)
            )));
        }
        None => return Err(A2aError::InvalidParams("`message` is required".into())),
    };
    let configuration = params.get("configuration").cloned().unwrap_or_default();
    let history_length = configuration
        .get("historyLength")
        .and_then(Value::as_u64)
        .map(|n| n as usize);
    let push = configuration
        .get("taskPushNotificationConfig")
        .map(|c| (c.clone(), Version::V1))
        .or_else(|| {
            configuration
                .get("pushNotificationConfig")
                .map(|c| (c.clone(), Version::V03))
        })
        .filter(|(c, _)| c.is_object());
    let sent = state
        .tasks
        .send(
            &caller.owner,
            &caller.principal,
            agent,
            message,
            push,
            answer,
        )
        .await?;
    Ok((sent, history_length))
}

/// The task of a send as its caller should see it. What the run has stored is what the store holds;
/// it is read back only if this process did not write it.
async fn sent_task(
    state: &A2aState,
    owner: &str,
    sent: &Sent,
    history_length: Option<usize>,
) -> Result<Value, A2aError> {
    match sent.stored()? {
        Some(record) => Ok(task_json(&record, history_length)),
        None => task_value(state, owner, &sent.task_id, history_length).await,
    }
}

pub(crate) async fn task_value(
    state: &A2aState,
    owner: &str,
    id: &str,
    history_length: Option<usize>,
) -> Result<Value, A2aError> {
    Ok(task_json(
        &state.tasks.get(owner, id).await?,
        history_length,
    ))
}

fn list_query(owner: &str, params: &Value) -> Result<TaskQuery, A2aError> {
    let state = match params.get("status").and_then(Value::as_str) {
        None | Some("") | Some("TASK_STATE_UNSPECIFIED") => None,
        Some(s) => Some(
            portico_core::TaskState::from_any_name(s)
                .ok_or_else(|| A2aError::InvalidParams(format!("`{s}` is not a task state")))?,
        ),
    };
    let page_size = match params.get("pageSize") {
        None | Some(Value::Null) => 0,
        Some(v) => v
            .as_u64()
            .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
            .filter(|n| *n <= 100)
            .ok_or_else(|| {
                A2aError::InvalidParams("`pageSize` must be a number from 1 to 100".into())
            })? as usize,
    };
    Ok(TaskQuery {
        owner: owner.to_string(),
        context_id: params
            .get("contextId")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_string),
        state,
        updated_after_ms: None,
        page_size,
        page_token: params
            .get("pageToken")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_string),
    })
}

async fn list(state: &A2aState, owner: &str, params: &Value) -> Result<Value, A2aError> {
    let query = list_query(owner, params)?;
    let page_size = if query.page_size == 0 {
        50
    } else {
        query.page_size
    };
    let history_length = params
        .get("historyLength")
        .and_then(Value::as_u64)
        .map(|n| n as usize);
    let include_artifacts = params.get("includeArtifacts").and_then(Value::as_bool) == Some(true);
    let page = state.tasks.list(query).await.map_err(|e| match e {
        A2aError::Internal(m) if m.contains("page token") => A2aError::InvalidParams(m),
        other => other,
    })?;
    let tasks: Vec<Value> = page
        .tasks
        .iter()
        .map(|t| {
            let mut task = task_json(t, Some(history_length.unwrap_or(0)));
            if !include_artifacts && let Some(map) = task.as_object_mut() {
                map.remove("artifacts");
            }
            task
        })
        .collect();
    Ok(json!({
        "tasks": tasks,
        "nextPageToken": page.next_page_token.unwrap_or_default(),
        "pageSize": page_size,
        "totalSize": page.total_size,
    }))
}

/// What kind of JSON value `value` is, for an error message.
pub(crate) fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn string_param<'a>(params: &'a Value, names: &[&str]) -> Result<&'a str, A2aError> {
    names
        .iter()
        .find_map(|n| params.get(*n).and_then(Value::as_str))
        .ok_or_else(|| A2aError::InvalidParams(format!("`{}` is required", names[0])))
}

/// A stream of events in `version`'s form, starting with the task itself and ending after the task
/// finishes or stops for input. It owns the subscription: when the client goes away and the response
/// is dropped, the subscription goes with it.
pub(crate) fn event_stream(
    first: Value,
    subscription: Subscription,
    version: Version,
    wrap: impl Fn(Value) -> Value + Send + 'static,
) -> impl Stream<Item = Result<Event, Infallible>> + Send {
    let first_state = first["task"]["status"]["state"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let stream = EventStream {
        first: Some(first),
        subscription: (!is_terminal(&first_state)).then_some(subscription),
        version,
        wrap,
    };
    futures::stream::unfold(stream, |mut stream| async move {
        let event = stream.next().await?;
        Some((Ok(Event::default().data(event.to_string())), stream))
    })
}

struct EventStream<W> {
    first: Option<Value>,
    /// `None` once the task's last event is out.
    subscription: Option<Subscription>,
    version: Version,
    wrap: W,
}

impl<W: Fn(Value) -> Value> EventStream<W> {
    fn convert(&self, event: &Value) -> Value {
        (self.wrap)(match self.version {
            Version::V1 => event.clone(),
            Version::V03 => wire::stream_event_to_v03(event),
        })
    }

    async fn next(&mut self) -> Option<Value> {
        if let Some(first) = self.first.take() {
            return Some(self.convert(&first));
        }
        loop {
            match self.subscription.as_mut()?.recv().await {
                Ok(event) => {
                    let state = event["statusUpdate"]["status"]["state"]
                        .as_str()
                        .unwrap_or_default();
                    if is_terminal(state) || is_interrupted(state) {
                        self.subscription = None;
                    }
                    return Some(self.convert(&event));
                }
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    tracing::warn!("an A2A stream fell {n} events behind; they were skipped");
                }
                Err(broadcast::error::RecvError::Closed) => {
                    self.subscription = None;
                    return None;
                }
            }
        }
    }
}

pub(crate) fn sse(
    stream: impl Stream<Item = Result<Event, Infallible>> + Send + 'static,
) -> Response {
    Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response()
}

// ---------------------------------------------------------------------------------------------------
// JSON-RPC.

fn rpc_result(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

fn rpc_error(id: &Value, error: &A2aError) -> Response {
    axum::Json(json!({"jsonrpc": "2.0", "id": id, "error": error.to_jsonrpc()})).into_response()
}

const V1_METHODS: &[&str] = &[
    "SendMessage",
    "SendStreamingMessage",
    "GetTask",
    "ListTasks",
    "CancelTask",
    "SubscribeToTask",
    "CreateTaskPushNotificationConfig",
    "GetTaskPushNotificationConfig",
    "ListTaskPushNotificationConfigs",
    "DeleteTaskPushNotificationConfig",
    "GetExtendedAgentCard",
];

async fn jsonrpc(
    State(state): State<A2aState>,
    Path(agent): Path<String>,
    caller: Caller,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let request: Value = match serde_json::from_slice(&body) {
        Ok(request) => request,
        Err(e) => return rpc_error(&Value::Null, &A2aError::Parse(e.to_string())),
    };
    let id = request.get("id").cloned().unwrap_or(Value::Null);
    let Some(method) = request
        .get("method")
        .and_then(Value::as_str)
        .map(str::to_string)
    else {
        return rpc_error(
            &id,
            &A2aError::InvalidRequest(
                "a JSON-RPC 2.0 request object with `method` is expected".into(),
            ),
        );
    };
    if request.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return rpc_error(
            &id,
            &A2aError::InvalidRequest("`jsonrpc` must be \"2.0\"".into()),
        );
    }
    let version = match requested_version(&headers) {
        Ok(Some(version)) => version,
        Ok(None) if V1_METHODS.contains(&method.as_str()) => Version::V1,
        Ok(None) => Version::V03,
        Err(error) => return rpc_error(&id, &error),
    };
    let agent = match state.agent_name(&agent) {
        Ok(agent) => agent,
        Err(error) => return rpc_error(&id, &error),
    };
    let params = request.get("params").cloned().unwrap_or_else(|| json!({}));
    match dispatch(&state, &caller, &agent, &method, &params, version, &id).await {
        Ok(response) => response,
        Err(error) => rpc_error(&id, &error),
    }
}

async fn dispatch(
    state: &A2aState,
    caller: &Caller,
    agent: &str,
    method: &str,
    params: &Value,
    version: Version,
    id: &Value,
) -> Result<Response, A2aError> {
    let owner = caller.owner.as_str();
    let shape_task = |task: Value| match version {
        Version::V1 => task,
        Version::V03 => wire::task_to_v03(&task),
    };
    let ok = |result: Value| Ok(axum::Json(rpc_result(id, result)).into_response());
    match (version, method) {
        (Version::V1, "SendMessage") | (Version::V03, "message/send") => {
            let task = send(state, caller, agent, params).await?;
            match version {
                Version::V1 => ok(json!({"task": task})),
                Version::V03 => ok(wire::task_to_v03(&task)),
            }
        }
        (Version::V1, "SendStreamingMessage") | (Version::V03, "message/stream") => {
            let (task, receiver) = send_streaming(state, caller, agent, params).await?;
            let id = id.clone();
            Ok(sse(event_stream(
                json!({"task": task}),
                receiver,
                version,
                move |event| rpc_result(&id, event),
            )))
        }
        (Version::V1, "GetTask") | (Version::V03, "tasks/get") => {
            let task_id = string_param(params, &["id"])?;
            let history = params
                .get("historyLength")
                .and_then(Value::as_u64)
                .map(|n| n as usize);
            ok(shape_task(
                task_value(state, owner, task_id, history).await?,
            ))
        }
        (Version::V1, "ListTasks") | (Version::V03, "tasks/list") => {
            let mut page = list(state, owner, params).await?;
            if version == Version::V03
                && let Some(tasks) = page["tasks"].as_array_mut()
            {
                for task in tasks.iter_mut() {
                    *task = wire::task_to_v03(task);
                }
            }
            ok(page)
        }
        (Version::V1, "CancelTask") | (Version::V03, "tasks/cancel") => {
            let task_id = string_param(params, &["id"])?;
            let task = state.tasks.cancel(owner, task_id).await?;
            ok(shape_task(task_json(&task, None)))
        }
        (Version::V1, "SubscribeToTask") | (Version::V03, "tasks/resubscribe") => {
            let task_id = string_param(params, &["id"])?;
            let (task, receiver) = state
                .tasks
                .subscribe(owner, task_id, "get it with GetTask instead of subscribing")
                .await?;
            let id = id.clone();
            Ok(sse(event_stream(
                json!({"task": task_json(&task, None)}),
                receiver,
                version,
                move |event| rpc_result(&id, event),
            )))
        }
        (Version::V1, "CreateTaskPushNotificationConfig") => {
            let task_id = string_param(params, &["taskId"])?;
            let config = crate::push::normalise_config(task_id, params, version)?;
            let stored = state.tasks.put_push_config(owner, task_id, config).await?;
            ok(crate::push::config_view(&stored, version))
        }
        (Version::V03, "tasks/pushNotificationConfig/set") => {
            let task_id = string_param(params, &["taskId", "id"])?;
            let config = params
                .get("pushNotificationConfig")
                .cloned()
                .unwrap_or_default();
            let config = crate::push::normalise_config(task_id, &config, version)?;
            let stored = state.tasks.put_push_config(owner, task_id, config).await?;
            ok(crate::push::config_view(&stored, version))
        }
        (Version::V1, "GetTaskPushNotificationConfig")
        | (Version::V03, "tasks/pushNotificationConfig/get") => {
            let task_id = string_param(params, &["taskId", "id"])?;
            let wanted = match version {
                Version::V1 => params.get("id").and_then(Value::as_str),
                Version::V03 => params
                    .get("pushNotificationConfigId")
                    .and_then(Value::as_str),
            };
            let configs = state.tasks.push_configs(owner, task_id).await?;
            let found = match wanted {
                Some(id) => configs.into_iter().find(|c| c["id"] == json!(id)),
                None => configs.into_iter().next(),
            };
            match found {
                Some(config) => ok(crate::push::config_view(&config, version)),
                None => Err(A2aError::InvalidParams(format!(
                    "task `{task_id}` has no push notification config {}",
                    wanted.map(|id| format!("`{id}`")).unwrap_or_default()
                ))),
            }
        }
        (Version::V1, "ListTaskPushNotificationConfigs")
        | (Version::V03, "tasks/pushNotificationConfig/list") => {
            let task_id = string_param(params, &["taskId", "id"])?;
            let configs: Vec<Value> = state
                .tasks
                .push_configs(owner, task_id)
                .await?
                .iter()
                .map(|c| crate::push::config_view(c, version))
                .collect();
            match version {
                Version::V1 => ok(json!({"configs": configs, "nextPageToken": ""})),
                Version::V03 => ok(Value::Array(configs)),
            }
        }
        (Version::V1, "DeleteTaskPushNotificationConfig")
        | (Version::V03, "tasks/pushNotificationConfig/delete") => {
            let task_id = string_param(params, &["taskId", "id"])?;
            let config_id = match version {
                Version::V1 => string_param(params, &["id"])?,
                Version::V03 => string_param(params, &["pushNotificationConfigId"])?,
            };
            if !state
                .tasks
                .delete_push_config(owner, task_id, config_id)
                .await?
            {
                return Err(A2aError::InvalidParams(format!(
                    "task `{task_id}` has no push notification config `{config_id}`"
                )));
            }
            match version {
                Version::V1 => ok(json!({})),
                Version::V03 => ok(Value::Null),
            }
        }
        (Version::V1, "GetExtendedAgentCard")
        | (Version::V03, "agent/getAuthenticatedExtendedCard") => {
            Err(A2aError::ExtendedCardNotConfigured)
        }
        (_, other) => Err(A2aError::MethodNotFound(format!(
            "{other} (A2A {}; the A2A-Version header selects the version)",
            version.label()
        ))),
    }
}

// ---------------------------------------------------------------------------------------------------
// HTTP+JSON (1.0).

fn rest_error(error: &A2aError) -> Response {
    let status =
        StatusCode::from_u16(error.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (status, axum::Json(error.to_rest())).into_response()
}

fn rest<T: IntoResponse>(result: Result<T, A2aError>) -> Response {
    match result {
        Ok(response) => response.into_response(),
        Err(error) => rest_error(&error),
    }
}

pub(crate) fn rest_body(body: &Bytes) -> Result<Value, A2aError> {
    if body.is_empty() {
        return Ok(json!({}));
    }
    serde_json::from_slice(body).map_err(|e| A2aError::Parse(e.to_string()))
}

fn rest_version(headers: &HeaderMap) -> Result<Version, A2aError> {
    // HTTP+JSON is a 1.0 binding; a 0.3 client speaking it gets 0.3-shaped objects.
    Ok(requested_version(headers)?.unwrap_or(Version::V1))
}

async fn rest_send(
    State(state): State<A2aState>,
    Path(agent): Path<String>,
    caller: Caller,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    rest(
        async {
            let version = rest_version(&headers)?;
            let agent = state.agent_name(&agent)?;
            let params = rest_body(&body)?;
            let task = send(&state, &caller, &agent, &params).await?;
            Ok(axum::Json(match version {
                Version::V1 => json!({"task": task}),
                Version::V03 => wire::task_to_v03(&task),
            }))
        }
        .await,
    )
}

async fn rest_stream(
    State(state): State<A2aState>,
    Path(agent): Path<String>,
    caller: Caller,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    rest(
        async {
            let version = rest_version(&headers)?;
            let agent = state.agent_name(&agent)?;
            let params = rest_body(&body)?;
            let (task, receiver) = send_streaming(&state, &caller, &agent, &params).await?;
            Ok(sse(event_stream(
                json!({"task": task}),
                receiver,
                version,
                |event| event,
            )))
        }
        .await,
    )
}

async fn rest_list(
    State(state): State<A2aState>,
    Path(agent): Path<String>,
    Query(query): Query<std::collections::HashMap<String, String>>,
    caller: Caller,
) -> Response {
    rest(
        async {
            state.agent_name(&agent)?;
            let params: serde_json::Map<String, Value> = query
                .into_iter()
                .map(|(k, v)| {
                    let value = match v.as_str() {
                        "true" => Value::Bool(true),
                        "false" => Value::Bool(false),
                        _ => v
                            .parse::<u64>()
                            .map(Value::from)
                            .unwrap_or(Value::String(v)),
                    };
                    (k, value)
                })
                .collect();
            Ok(axum::Json(
                list(&state, &caller.owner, &Value::Object(params)).await?,
            ))
        }
        .await,
    )
}

/// `GET /tasks/{id}` and `GET /tasks/{id}:subscribe`.
async fn rest_task(
    State(state): State<A2aState>,
    Path((agent, task)): Path<(String, String)>,
    Query(query): Query<std::collections::HashMap<String, String>>,
    caller: Caller,
    headers: HeaderMap,
) -> Response {
    rest(
        async {
            state.agent_name(&agent)?;
            let version = rest_version(&headers)?;
            let owner = caller.owner.clone();
            if let Some(id) = task.strip_suffix(":subscribe") {
                let (record, receiver) =
                    state.tasks.subscribe(&owner, id, "GET it instead").await?;
                return Ok(sse(event_stream(
                    json!({"task": task_json(&record, None)}),
                    receiver,
                    version,
                    |e| e,
                )));
            }
            let history = query.get("historyLength").and_then(|v| v.parse().ok());
            let task = task_value(&state, &owner, &task, history).await?;
            Ok(axum::Json(match version {
                Version::V1 => task,
                Version::V03 => wire::task_to_v03(&task),
            })
            .into_response())
        }
        .await,
    )
}

/// `POST /tasks/{id}:cancel`.
async fn rest_task_action(
    State(state): State<A2aState>,
    Path((agent, task)): Path<(String, String)>,
    caller: Caller,
    headers: HeaderMap,
) -> Response {
    rest(
        async {
            state.agent_name(&agent)?;
            let version = rest_version(&headers)?;
            let Some(id) = task.strip_suffix(":cancel") else {
                return Err(A2aError::MethodNotFound(format!("POST /tasks/{task}")));
            };
            let record = state.tasks.cancel(&caller.owner, id).await?;
            let task = task_json(&record, None);
            Ok(axum::Json(match version {
                Version::V1 => task,
                Version::V03 => wire::task_to_v03(&task),
            }))
        }
        .await,
    )
}

/// `…/tasks/{task}/pushNotificationConfigs[/{id}]`: create (POST), list or get (GET), delete.
async fn rest_push(
    State(state): State<A2aState>,
    method: axum::http::Method,
    Path(path): Path<Vec<(String, String)>>,
    caller: Caller,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    rest(
        async {
            let param = |name: &str| path.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
            let agent = param("agent").unwrap_or_default();
            state.agent_name(&agent)?;
            let version = rest_version(&headers)?;
            let owner = caller.owner.clone();
            let task_id = param("task").unwrap_or_default();
            let config_id = param("id");
            let response = match (method.as_str(), config_id) {
                ("POST", None) => {
                    let body = rest_body(&body)?;
                    let config = crate::push::normalise_config(&task_id, &body, version)?;
                    let stored = state
                        .tasks
                        .put_push_config(&owner, &task_id, config)
                        .await?;
                    crate::push::config_view(&stored, version)
                }
                ("GET", None) => {
                    let configs: Vec<Value> = state
                        .tasks
                        .push_configs(&owner, &task_id)
                        .await?
                        .iter()
                        .map(|c| crate::push::config_view(c, version))
                        .collect();
                    json!({"configs": configs, "nextPageToken": ""})
                }
                ("GET", Some(id)) => state
                    .tasks
                    .push_configs(&owner, &task_id)
                    .await?
                    .into_iter()
                    .find(|c| c["id"] == json!(id))
                    .map(|c| crate::push::config_view(&c, version))
                    .ok_or_else(|| {
                        A2aError::InvalidParams(format!(
                            "task `{task_id}` has no push notification config `{id}`"
                        ))
                    })?,
                ("DELETE", Some(id)) => {
                    if !state
                        .tasks
                        .delete_push_config(&owner, &task_id, &id)
                        .await?
                    {
                        return Err(A2aError::InvalidParams(format!(
                            "task `{task_id}` has no push notification config `{id}`"
                        )));
                    }
                    json!({})
                }
                (other, _) => {
                    return Err(A2aError::MethodNotFound(format!(
                        "{other} on push notification configs"
                    )));
                }
            };
            Ok(axum::Json(response))
        }
        .await,
    )
}

async fn rest_extended_card() -> Response {
    rest_error(&A2aError::ExtendedCardNotConfigured)
}

// ---------------------------------------------------------------------------------------------------
// The early draft: `POST {listen_path}/tasks/send` to the primary agent.

/// Accepts the draft's JSON-RPC envelope (`method: "tasks/send"`) or its bare params, runs the message
/// to completion, and answers in the draft's shape (`sessionId`, parts typed with `type`).
async fn legacy_send(State(state): State<A2aState>, caller: Caller, body: Bytes) -> Response {
    let request = match rest_body(&body) {
        Ok(request) => request,
        Err(error) => return rest_error(&error),
    };
    let envelope = request.get("jsonrpc").is_some();
    let id = request.get("id").cloned().unwrap_or(Value::Null);
    let params = if envelope {
        request.get("params").cloned().unwrap_or_default()
    } else {
        request.clone()
    };
    let result = async {
        let agent = state.primary().ok_or_else(|| A2aError::Unsupported("no agents are configured".into()))?;
        let mut message = match params.get("message") {
            Some(Value::Object(message)) => message.clone(),
            Some(other) => return Err(A2aError::InvalidParams(format!(
                "`message` must be an object like {{\"role\": \"user\", \"parts\": [{{\"type\": \"text\", \"text\": \"…\"}}]}}, not {}",
                json_kind(other)
            ))),
            None => return Err(A2aError::InvalidParams("`message` is required".into())),
        };
        if !message.contains_key("messageId") {
            let id = params.get("id").and_then(Value::as_str).unwrap_or("legacy");
            message.insert("messageId".into(), json!(id));
        }
        if let Some(session) = params.get("sessionId").and_then(Value::as_str) {
            message.insert("contextId".into(), json!(session));
        }
        let send_params = json!({"message": message});
        let task = send(&state, &caller, &agent, &send_params).await?;
        let v03 = wire::task_to_v03(&task);
        let typed = |parts: &Value| -> Value {
            Value::Array(parts.as_array().into_iter().flatten().map(|p| {
                let mut p = p.clone();
                if let Some(part) = p.as_object_mut() && let Some(kind) = part.get("kind").cloned() {
                    part.insert("type".into(), kind);
                }
                p
            }).collect())
        };
        let mut status = v03["status"].clone();
        if let Some(parts) = status.pointer_mut("/message/parts") {
            *parts = typed(parts);
        }
        let artifacts: Vec<Value> = v03["artifacts"].as_array().into_iter().flatten().map(|a| {
            json!({"name": a["name"], "parts": typed(&a["parts"])})
        }).collect();
        Ok::<_, A2aError>(json!({
            "id": task["id"], "sessionId": task["contextId"], "status": status, "artifacts": artifacts,
        }))
    }.await;
    match (result, envelope) {
        (Ok(task), true) => axum::Json(rpc_result(&id, task)).into_response(),
        (Ok(task), false) => axum::Json(task).into_response(),
        (Err(error), true) => rpc_error(&id, &error),
        (Err(error), false) => rest_error(&error),
    }
}

#[cfg(test)]
mod tests;
