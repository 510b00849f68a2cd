//! The A2A routes: cards, JSON-RPC (1.0 and 0.3 method names), HTTP+JSON (1.0 paths; the 0.3 paths
//! under `/v1` are in `rest03`), and the legacy `tasks/send` of the early draft.
//!
//! Version negotiation follows the spec: the `A2A-Version` header names the version (`1.0`, `0.3`); no
//! header means 0.3. Leniency where it costs nothing: a 1.0 method name without the header is served
//! as 1.0, since no 0.3 client sends one.

use std::collections::HashMap;
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
use portico_a2a_client::protocol::{v1, v03};
use portico_engine::Engine;
use portico_pipeline::Principal;
use portico_store::TaskLimits;
use serde_json::{Value, json};
use tokio::sync::broadcast;

use crate::card;
use crate::error::A2aError;
use crate::tasks::{Subscription, Tasks, to_json};
use crate::wire::Version;
use crate::{jsonrpc, ops};

/// The client webhooks are POSTed with. Without one (it cannot be built), push notifications are
/// not offered.
fn push_client(allow_private: bool) -> Option<portico_net::SafeClient> {
    portico_net::SafeClient::builder()
        .policy(crate::push::webhook_policy(allow_private))
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
    /// The card form a card request without a version gets (`[a2a] unversioned_card`).
    pub unversioned_card: portico_config::CardVersion,
}

#[derive(Clone)]
pub(crate) struct A2aState {
    engine: Engine,
    pub(crate) tasks: Tasks,
    options: Arc<A2aOptions>,
    card_dates: Arc<card::CardDates>,
}

/// Marks failed the tasks a previous process left running (their agent runs died with it). Call it
/// before serving, so no task of this process is mistaken for one of those. On a shared store it
/// goes on doing so, every heartbeat, for the tasks of replicas whose lease runs out.
pub async fn recover_interrupted(engine: &Engine) {
    let tasks = Tasks::new(
        engine.clone(),
        TaskLimits {
            max_tasks: usize::MAX,
        },
        None,
    );
    match tasks.recover(true).await {
        Ok(0) => {}
        Ok(n) => {
            tracing::warn!("{n} A2A task(s) were running when Portico last stopped; marked failed")
        }
        Err(error) => tracing::warn!("could not check for interrupted A2A tasks: {error}"),
    }
    if engine.replica().serving() {
        // Another replica can die at any time: its running tasks are failed once its lease runs out.
        let stopping = engine.replica().stopping();
        tokio::spawn(async move {
            let mut every = tokio::time::interval(portico_store::REPLICA_HEARTBEAT);
            every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            every.tick().await;
            loop {
                tokio::select! {
                    () = stopping.cancelled() => return,
                    _ = every.tick() => {}
                }
                match tasks.recover(false).await {
                    Ok(0) => {}
                    Ok(n) => tracing::warn!(
                        "{n} A2A task(s) of a replica whose lease ran out (it stopped or lost the store) were marked failed"
                    ),
                    Err(error) => {
                        tracing::warn!("could not check for A2A tasks of stopped replicas: {error}")
                    }
                }
            }
        });
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
    tasks.follow_other_replicas();
    let lp = options.listen_path.trim_end_matches('/').to_string();
    let state = A2aState {
        engine,
        tasks: tasks.clone(),
        options: Arc::new(A2aOptions {
            listen_path: lp.clone(),
            ..options
        }),
        card_dates: Arc::default(),
    };
    let router = Router::new()
        .route("/.well-known/agent-card.json", get(primary_card))
        .route("/.well-known/agent.json", get(legacy_card))
        .route(&format!("{lp}/tasks/send"), post(legacy_send))
        // The card's URL, and the same with a trailing slash (what clients that join paths to a
        // base URL send).
        .route(&format!("{lp}/{{agent}}"), post(jsonrpc::handle))
        .route(&format!("{lp}/{{agent}}/"), post(jsonrpc::handle))
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
        .merge(crate::rest03::routes(&lp));
    // Every answer under the A2A paths is JSON, the unknown paths and the wrong methods too. The
    // router's fallback is the daemon's (no other door sets one): paths outside A2A's keep their
    // plain 404.
    let router = router
        .fallback(no_such_route)
        .method_not_allowed_fallback(wrong_method)
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

/// Why there is no agent to serve: agents are published once they have a model.
const NO_AGENT_PUBLISHED: &str = "no agent is published here: none is configured, or none has a model yet (`portico agents` says what to set)";

impl A2aState {
    pub(crate) fn agent_name(&self, requested: &str) -> Result<String, A2aError> {
        self.engine
            .agents()
            .published(requested)
            .map(|a| a.config.name.clone())
            .ok_or_else(|| A2aError::MethodNotFound(format!("no agent `{requested}` here")))
    }

    fn primary(&self) -> Option<String> {
        match &self.options.primary_agent {
            Some(name) => Some(name.clone()),
            None => self.engine.agents().first_published(),
        }
    }

    /// The card in `version`'s form.
    async fn card(&self, agent: &str, version: Version) -> Option<card::Card> {
        let agent = self.engine.agents().published(agent)?.clone();
        let principal = Principal::agent(agent.config.name.clone(), agent.patterns.clone());
        let tools = self.engine.pipeline().list(&principal).await;
        let url = card::agent_url(
            &self.options.public_url,
            &self.options.listen_path,
            &agent.config.name,
        );
        Some(card::card(&agent, &tools, &url, version))
    }
}

/// Serves a card with an ETag; a matching If-None-Match gets 304.
async fn serve_card(
    state: &A2aState,
    caller: &Caller,
    agent: Option<String>,
    version: Version,
    headers: &HeaderMap,
) -> Response {
    // An agent outside the client's scope is not there for it, card included.
    let agent = agent.filter(|name| {
        state
            .engine
            .agents()
            .published(name)
            .is_some_and(|a| caller.principal.may_use(&a.tool_name))
    });
    let Some(agent) = agent else {
        return (
            StatusCode::NOT_FOUND,
            axum::Json(json!({"error": NO_AGENT_PUBLISHED})),
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
    let last_modified = state.card_dates.last_modified(&tag);
    let text = |name| {
        headers
            .get(name)
            .and_then(|v: &HeaderValue| v.to_str().ok())
    };
    let matches = card::not_modified(
        text(header::IF_NONE_MATCH),
        text(header::IF_MODIFIED_SINCE),
        &tag,
        last_modified,
    );
    let mut response = if matches {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        ([(header::CONTENT_TYPE, "application/json")], body).into_response()
    };
    if let Ok(value) = HeaderValue::from_str(&tag) {
        response.headers_mut().insert(header::ETAG, value);
    }
    response.headers_mut().insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static(card::CACHE_CONTROL),
    );
    if let Ok(value) = HeaderValue::from_str(&httpdate::fmt_http_date(last_modified)) {
        response.headers_mut().insert(header::LAST_MODIFIED, value);
    }
    response
}

/// Which card form to serve (see [`card::form_for`]).
fn card_version(state: &A2aState, headers: &HeaderMap, query: &CardQuery) -> Version {
    card::form_for(
        requested_version(headers).ok().flatten(),
        query.version.as_deref(),
        match state.options.unversioned_card {
            portico_config::CardVersion::V1 => Version::V1,
            portico_config::CardVersion::V03 => Version::V03,
        },
    )
}

#[derive(serde::Deserialize, Default)]
struct CardQuery {
    #[serde(alias = "A2A-Version")]
    version: Option<String>,
}

async fn primary_card(
    State(state): State<A2aState>,
    Query(query): Query<CardQuery>,
    caller: Caller,
    headers: HeaderMap,
) -> Response {
    let version = card_version(&state, &headers, &query);
    serve_card(&state, &caller, state.primary(), version, &headers).await
}

async fn legacy_card(
    State(state): State<A2aState>,
    caller: Caller,
    headers: HeaderMap,
) -> Response {
    serve_card(&state, &caller, state.primary(), Version::V03, &headers).await
}

async fn agent_card(
    State(state): State<A2aState>,
    Path(agent): Path<String>,
    Query(query): Query<CardQuery>,
    caller: Caller,
    headers: HeaderMap,
) -> Response {
    let version = card_version(&state, &headers, &query);
    let name = state.agent_name(&agent).ok();
    serve_card(&state, &caller, name, version, &headers).await
}

// ---------------------------------------------------------------------------------------------------
// What the bindings share: reading a body into a protocol type, and event streams.

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

/// A request body (or params) read as `T`, or the invalid-params error naming the field that is
/// wrong. An empty body is an empty object.
pub(crate) fn typed_body<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, A2aError> {
    if body.is_empty() {
        return typed_value(json!({}));
    }
    let value: Value = serde_json::from_slice(body).map_err(|e| A2aError::Parse(e.to_string()))?;
    typed_value(value)
}

/// [`typed_body`] of a value already parsed.
pub(crate) fn typed_value<T: serde::de::DeserializeOwned>(value: Value) -> Result<T, A2aError> {
    if !value.is_object() {
        return Err(A2aError::InvalidParams(format!(
            "the request must be a JSON object, not {}",
            json_kind(&value)
        )));
    }
    let shown = value.clone();
    serde_path_to_error::deserialize(value).map_err(|e| invalid_params(e, &shown, ""))
}

/// The invalid-params error of a request that did not read as its type: the field (its path
/// below `prefix`), what it must be and what it is.
pub(crate) fn invalid_params(
    error: serde_path_to_error::Error<serde_json::Error>,
    request: &Value,
    prefix: &str,
) -> A2aError {
    use serde_path_to_error::Segment;
    let mut at = Some(request);
    for segment in error.path().iter() {
        at = match segment {
            Segment::Map { key } => at.and_then(|v| v.get(key)),
            Segment::Seq { index } => at.and_then(|v| v.get(index)),
            Segment::Enum { .. } | Segment::Unknown => at,
        };
    }
    let path = error.path().to_string();
    let field = path.strip_prefix(prefix).unwrap_or(&path).to_string();
    let why = error.into_inner().to_string();
    // serde says "invalid type: string \"hi\", expected struct Message at line 1 column 2".
    let why = why.split(" at line ").next().unwrap_or(&why).to_string();
    if field.is_empty() || field == "." {
        return A2aError::InvalidParams(why);
    }
    let expected = why.split_once("expected ").map_or("", |(_, e)| e);
    let shape = if expected.starts_with("struct") || expected.contains("map") {
        "an object"
    } else if expected.contains("sequence") {
        "an array"
    } else if expected.starts_with('u') || expected.starts_with('i') {
        "an integer"
    } else {
        expected
    };
    let wrong_shape = why.starts_with("invalid type") || why.starts_with("invalid length");
    match at {
        Some(value) if wrong_shape && json_kind(value) != shape => A2aError::InvalidParams(
            format!("`{field}` must be {shape}, not {}", json_kind(value)),
        ),
        _ => A2aError::InvalidParams(format!("`{field}`: {why}")),
    }
}

/// A stream of events, starting with the task itself and ending after the task finishes or stops
/// for input. It owns the subscription: when the client goes away and the response is dropped, the
/// subscription goes with it. `render` writes each event in its binding's form and envelope.
pub(crate) fn event_stream(
    first: v1::Task,
    subscription: Subscription,
    render: impl Fn(v1::StreamResponse) -> Value + Send + 'static,
) -> impl Stream<Item = Result<Event, Infallible>> + Send {
    let finished = first.status.state.is_terminal();
    let stream = EventStream {
        first: Some(v1::StreamResponse::Task(first)),
        subscription: (!finished).then_some(subscription),
        render,
    };
    futures::stream::unfold(stream, |mut stream| async move {
        let event = stream.next().await?;
        Some((Ok(Event::default().data(event.to_string())), stream))
    })
}

/// An event in `version`'s form (1.0, or the 0.3 JSON-RPC form).
pub(crate) fn event_in(event: v1::StreamResponse, version: Version) -> Value {
    match version {
        Version::V1 => to_json(&event),
        Version::V03 => to_json(&v03::StreamEvent::from(event)),
    }
}

struct EventStream<R> {
    first: Option<v1::StreamResponse>,
    /// `None` once the task's last event is out.
    subscription: Option<Subscription>,
    render: R,
}

impl<R: Fn(v1::StreamResponse) -> Value> EventStream<R> {
    fn convert(&self, event: v1::StreamResponse) -> Value {
        (self.render)(event)
    }

    async fn next(&mut self) -> Option<Value> {
        if let Some(first) = self.first.take() {
            return Some(self.convert(first));
        }
        loop {
            match self.subscription.as_mut()?.recv().await {
                Ok(event) => {
                    if matches!(&event, v1::StreamResponse::StatusUpdate(update) if update.status.state.is_settled())
                    {
                        self.subscription = None;
                    }
                    return Some(self.convert(event));
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
// HTTP+JSON (1.0).

pub(crate) fn rest_error(error: &A2aError) -> Response {
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

/// A task in `version`'s form.
pub(crate) fn task_in(task: v1::Task, version: Version) -> Value {
    match version {
        Version::V1 => to_json(&task),
        Version::V03 => to_json(&v03::Task::from(task)),
    }
}

/// A query string's values as JSON, so that a request type reads them: `true`/`false` as booleans,
/// the rest as strings (the request types read integers written as text); an empty value is no value.
fn query_object(query: HashMap<String, String>) -> Value {
    Value::Object(
        query
            .into_iter()
            .filter(|(_, v)| !v.is_empty())
            .map(|(k, v)| {
                let value = match v.as_str() {
                    "true" => Value::Bool(true),
                    "false" => Value::Bool(false),
                    _ => Value::String(v),
                };
                (k, value)
            })
            .collect(),
    )
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
            let request: v1::SendMessageRequest = typed_body(&body)?;
            let answer = ops::send_message(&state, &caller, &agent, request, Version::V1).await?;
            Ok(axum::Json(match version {
                Version::V1 => to_json(&answer),
                Version::V03 => to_json(&v03::StreamEvent::from(answer)),
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
            let request: v1::SendMessageRequest = typed_body(&body)?;
            let (task, events) =
                ops::send_streaming_message(&state, &caller, &agent, request, Version::V1).await?;
            Ok(sse(event_stream(task, events, move |e| {
                event_in(e, version)
            })))
        }
        .await,
    )
}

async fn rest_list(
    State(state): State<A2aState>,
    Path(agent): Path<String>,
    Query(query): Query<HashMap<String, String>>,
    caller: Caller,
) -> Response {
    rest(
        async {
            state.agent_name(&agent)?;
            let request: v1::ListTasksRequest = typed_value(query_object(query))?;
            let page = ops::list_tasks(&state, &caller.owner, &request).await?;
            Ok(axum::Json(to_json(&page)))
        }
        .await,
    )
}

/// `GET /tasks/{id}` and `GET /tasks/{id}:subscribe`.
async fn rest_task(
    State(state): State<A2aState>,
    Path((agent, task)): Path<(String, String)>,
    Query(query): Query<HashMap<String, String>>,
    caller: Caller,
    headers: HeaderMap,
) -> Response {
    rest(
        async {
            state.agent_name(&agent)?;
            let version = rest_version(&headers)?;
            let owner = caller.owner.clone();
            if let Some(id) = task.strip_suffix(":subscribe") {
                let (task, events) =
                    ops::subscribe_to_task(&state, &owner, id, "GET it instead").await?;
                return Ok(sse(event_stream(task, events, move |e| {
                    event_in(e, version)
                })));
            }
            let mut request = query_object(query);
            if let Some(map) = request.as_object_mut() {
                map.insert("id".into(), Value::String(task));
            }
            let request: v1::GetTaskRequest = typed_value(request)?;
            let task = ops::get_task(&state, &owner, &request).await?;
            Ok(axum::Json(task_in(task, version)).into_response())
        }
        .await,
    )
}

/// `POST /tasks/{id}:cancel` (and `:subscribe`, which some clients POST).
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
            if let Some(id) = task.strip_suffix(":subscribe") {
                let (task, events) =
                    ops::subscribe_to_task(&state, &caller.owner, id, "GET it instead").await?;
                return Ok(sse(event_stream(task, events, move |e| {
                    event_in(e, version)
                })));
            }
            let Some(id) = task.strip_suffix(":cancel") else {
                return Err(A2aError::MethodNotFound(format!("POST /tasks/{task}")));
            };
            let task = ops::cancel_task(&state, &caller.owner, id).await?;
            Ok(axum::Json(task_in(task, version)).into_response())
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
                    let config: v1::TaskPushNotificationConfig = typed_body(&body)?;
                    ops::create_push_config(&state, &owner, &task_id, config, version)
                        .await?
                        .view(version)
                }
                ("GET", None) => {
                    let configs: Vec<Value> = ops::list_push_configs(&state, &owner, &task_id)
                        .await?
                        .iter()
                        .map(|c| c.view(version))
                        .collect();
                    json!({"configs": configs, "nextPageToken": ""})
                }
                ("GET", Some(id)) => ops::get_push_config(&state, &owner, &task_id, Some(&id))
                    .await?
                    .view(version),
                ("DELETE", Some(id)) => {
                    ops::delete_push_config(&state, &owner, &task_id, &id).await?;
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
    rest_error(&ops::get_extended_agent_card())
}

/// What any other request under the A2A paths gets: a JSON error, never an empty body.
async fn no_such_route(
    State(state): State<A2aState>,
    method: axum::http::Method,
    uri: axum::http::Uri,
) -> Response {
    let lp = state.options.listen_path.as_str();
    let under_a2a = uri
        .path()
        .strip_prefix(lp)
        .is_some_and(|rest| !lp.is_empty() && (rest.is_empty() || rest.starts_with('/')));
    if !under_a2a && !uri.path().starts_with("/.well-known/agent") {
        return StatusCode::NOT_FOUND.into_response();
    }
    rest_error(&A2aError::MethodNotFound(format!(
        "{method} {}: no A2A operation here; the agent card lists the endpoints",
        uri.path()
    )))
}

/// A known A2A path asked with a method it does not take: a JSON 405.
async fn wrong_method(method: axum::http::Method, uri: axum::http::Uri) -> Response {
    let error = A2aError::MethodNotFound(format!(
        "{method} {}: this A2A path does not take {method}",
        uri.path()
    ));
    let mut body = error.to_rest();
    if let Some(error) = body.get_mut("error").and_then(Value::as_object_mut) {
        error.insert("code".into(), json!(405));
    }
    (StatusCode::METHOD_NOT_ALLOWED, axum::Json(body)).into_response()
}

// ---------------------------------------------------------------------------------------------------
// The early draft: `POST {listen_path}/tasks/send` to the primary agent.

/// The draft's request: a JSON-RPC envelope (`method: "tasks/send"`) or its bare params.
#[derive(serde::Deserialize)]
struct DraftSend {
    /// The task id the draft's client picked; only a string one names the message.
    #[serde(default)]
    id: Option<Value>,
    #[serde(default, rename = "sessionId")]
    session_id: Option<String>,
    message: v03::IncomingMessage,
}

/// The draft's answer: `sessionId`, and parts typed with `type` as well as `kind`.
#[derive(serde::Serialize)]
struct DraftTask {
    id: String,
    #[serde(rename = "sessionId")]
    session_id: String,
    status: DraftStatus,
    artifacts: Vec<DraftArtifact>,
}

#[derive(serde::Serialize)]
struct DraftStatus {
    #[serde(serialize_with = "v03_state_name")]
    state: portico_a2a_client::protocol::TaskState,
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<DraftMessage>,
    #[serde(skip_serializing_if = "Option::is_none")]
    timestamp: Option<String>,
}

fn v03_state_name<S: serde::Serializer>(
    state: &portico_a2a_client::protocol::TaskState,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(state.v03_name())
}

#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct DraftMessage {
    kind: &'static str,
    message_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    context_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    task_id: Option<String>,
    role: v03::Role,
    parts: Vec<DraftPart>,
    #[serde(skip_serializing_if = "Option::is_none")]
    metadata: Option<v1::Struct>,
}

#[derive(serde::Serialize)]
struct DraftArtifact {
    name: Option<String>,
    parts: Vec<DraftPart>,
}

/// A 0.3 part with the draft's tag, `type`, beside its `kind`.
#[derive(serde::Serialize)]
struct DraftPart {
    #[serde(rename = "type")]
    tag: &'static str,
    #[serde(flatten)]
    part: v03::Part,
}

fn draft_parts(parts: Vec<v03::Part>) -> Vec<DraftPart> {
    parts
        .into_iter()
        .map(|part| DraftPart {
            tag: match part {
                v03::Part::Text { .. } => "text",
                v03::Part::File { .. } => "file",
                v03::Part::Data { .. } => "data",
            },
            part,
        })
        .collect()
}

impl From<v03::Task> for DraftTask {
    fn from(task: v03::Task) -> DraftTask {
        DraftTask {
            id: task.id,
            session_id: task.context_id,
            status: DraftStatus {
                state: task.status.state,
                message: task.status.message.map(|m| DraftMessage {
                    kind: "message",
                    message_id: m.message_id,
                    context_id: m.context_id,
                    task_id: m.task_id,
                    role: m.role,
                    parts: draft_parts(m.parts),
                    metadata: m.metadata,
                }),
                timestamp: task.status.timestamp,
            },
            artifacts: task
                .artifacts
                .into_iter()
                .map(|a| DraftArtifact {
                    name: a.name,
                    parts: draft_parts(a.parts),
                })
                .collect(),
        }
    }
}

/// Accepts the draft's JSON-RPC envelope or its bare params, runs the message to completion, and
/// answers in the draft's shape.
async fn legacy_send(State(state): State<A2aState>, caller: Caller, body: Bytes) -> Response {
    let request = match rest_body(&body) {
        Ok(request) => request,
        Err(error) => return rest_error(&error),
    };
    let envelope = request.get("jsonrpc").is_some();
    let id = request.get("id").cloned().unwrap_or(Value::Null);
    let params = if envelope {
        request.get("params").cloned().unwrap_or_else(|| json!({}))
    } else {
        request
    };
    let result = async {
        let agent = state
            .primary()
            .ok_or_else(|| A2aError::Unsupported(NO_AGENT_PUBLISHED.into()))?;
        let draft: DraftSend = typed_value(params).map_err(|error| match error {
            A2aError::InvalidParams(why) => A2aError::InvalidParams(format!(
                "{why}; a message is an object like {{\"role\": \"user\", \"parts\": [{{\"type\": \"text\", \"text\": \"…\"}}]}}"
            )),
            other => other,
        })?;
        let mut message = v1::Message::from(draft.message);
        if message.message_id.is_empty() {
            message.message_id = draft
                .id
                .as_ref()
                .and_then(Value::as_str)
                .unwrap_or("legacy")
                .to_string();
        }
        if let Some(session) = draft.session_id {
            message.context_id = Some(session);
        }
        let request = v1::SendMessageRequest {
            message,
            ..v1::SendMessageRequest::default()
        };
        // The early draft has no message answers: a message is given as a finished task's.
        let task = match ops::send_message(&state, &caller, &agent, request, Version::V03).await? {
            v1::SendMessageResponse::Task(task) => task,
            v1::SendMessageResponse::Message(message) => v1::Task {
                id: message.message_id.clone(),
                context_id: message.context_id.clone().unwrap_or_default(),
                status: v1::TaskStatus {
                    state: portico_a2a_client::protocol::TaskState::Completed,
                    message: Some(message),
                    timestamp: None,
                },
                ..v1::Task::default()
            },
        };
        Ok::<_, A2aError>(DraftTask::from(v03::Task::from(task)))
    }
    .await;
    match (result, envelope) {
        (Ok(task), true) => axum::Json(jsonrpc::rpc_result(&id, task)).into_response(),
        (Ok(task), false) => axum::Json(task).into_response(),
        (Err(error), true) => jsonrpc::rpc_error(&id, &error),
        (Err(error), false) => rest_error(&error),
    }
}

#[cfg(test)]
mod tests;
