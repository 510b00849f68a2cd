//! The REST API.

use std::convert::Infallible;

use axum::Extension;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use portico_config::{Config, EnvEntry, Transport};
use portico_core::ServerState;
use portico_engine::{Engine, Upstreams};
use portico_pipeline::{ArtifactPart, Principal, ProgressEvent, ToolContext, model_text};
use serde::Deserialize;

use crate::info::{IdentityKey, MAX_CHALLENGE_CHARS};
use crate::reload::LiveConfig;
use serde_json::{Value, json};

#[derive(Clone)]
struct ApiState {
    hub: Upstreams,
    engine: Engine,
    /// The config running now (`/api/mcp/servers` shows its servers, secrets left out) and whether
    /// the last reload was refused.
    live: LiveConfig,
    identity: IdentityKey,
}

pub(crate) fn routes(engine: Engine, live: LiveConfig, identity: IdentityKey) -> Router {
    let state = ApiState {
        hub: engine.upstreams().clone(),
        engine,
        live,
        identity,
    };
    Router::new()
        .route("/api/health", get(health))
        .route("/api/mcp/servers", get(servers))
        .route("/api/agents", get(agents))
        .route("/api/agents/{name}/message", post(agent_message))
        .route("/api/conversations/{id}", get(conversation))
        .route("/api/audit", get(audit))
        .route("/api/audit/verify", get(audit_verify))
        .with_state(state)
}

/// The client a request's token identified (with its scope), else the API as one client.
fn caller(client: Option<Extension<Principal>>) -> Principal {
    match client {
        Some(Extension(principal)) => principal,
        None => Principal::client("api"),
    }
}

async fn agents(
    State(state): State<ApiState>,
    client: Option<Extension<Principal>>,
) -> Json<Value> {
    let caller = caller(client);
    let mut agents = state.engine.agents().infos();
    agents.retain(|agent| caller.may_use(&agent.tool));
    Json(json!({"agents": agents}))
}

#[derive(Deserialize)]
struct MessageRequest {
    message: String,
    #[serde(default)]
    conversation_id: Option<String>,
    /// Answer as server-sent events: `text` fragments as the model writes, `tool` events as it calls
    /// tools, then one `reply` (or `error`).
    #[serde(default)]
    stream: bool,
}

/// An `artifact` event: the part's text, or what the file or data is (a file's content is not
/// streamed here: its size is).
fn artifact_event(name: &str, part: ArtifactPart, last_chunk: bool) -> Value {
    let mut event = json!({"name": name, "last_chunk": last_chunk});
    match part {
        ArtifactPart::Text(text) => event["text"] = json!(text),
        ArtifactPart::File {
            bytes,
            name,
            media_type,
        } => {
            event["file"] = json!({"name": name, "media_type": media_type, "size": bytes.len()});
        }
        ArtifactPart::FileUrl {
            url,
            name,
            media_type,
        } => event["file"] = json!({"url": url, "name": name, "media_type": media_type}),
        ArtifactPart::Data(data) => event["data"] = Value::Object(data),
    }
    event
}

/// An agent without a model, from a daemon: the daemon's environment is its own, read when it
/// started, so a variable set since in a user's shell does not reach it.
fn needs_a_model(fix: &str) -> String {
    format!(
        "{fix}. This daemon (pid {}) has its own environment, read when it started: set the \
         variable where `portico serve` runs, then restart the daemon (`portico stop`, then \
         `portico serve`)",
        std::process::id()
    )
}

fn api_error(status: StatusCode, message: impl Into<String>) -> Response {
    (status, Json(json!({"error": message.into()}))).into_response()
}

/// Runs a message through an agent: the call is the agent's `portico_agent_*` tool, through the same
/// pipeline (capabilities, audit) as every other call.
async fn agent_message(
    State(state): State<ApiState>,
    Path(name): Path<String>,
    client: Option<Extension<Principal>>,
    Json(request): Json<MessageRequest>,
) -> Response {
    let caller = caller(client);
    let Some(agent) = state.engine.agents().agent(&name) else {
        return api_error(
            StatusCode::NOT_FOUND,
            format!("no agent named `{name}`; GET /api/agents lists them"),
        );
    };
    if let Some(fix) = agent.driver.missing() {
        return api_error(StatusCode::CONFLICT, needs_a_model(fix));
    }
    let tool = agent.tool_name.clone();
    let mut arguments = json!({"message": request.message});
    if let Some(id) = &request.conversation_id {
        arguments["conversation_id"] = Value::String(id.clone());
    }
    let pipeline = state.engine.pipeline().clone();
    // Outside the client's scope: the pipeline refuses (and audits) it, answered as 403 before any
    // stream opens.
    if !caller.may_use(&tool) {
        let refused = pipeline
            .call(
                &tool,
                arguments.as_object().cloned(),
                &ToolContext::of(caller),
            )
            .await;
        return match refused {
            Ok(outcome) => api_error(StatusCode::FORBIDDEN, model_text(&outcome.result)),
            Err(error) => api_error(StatusCode::NOT_FOUND, error.to_string()),
        };
    }
    if let Some(id) = &request.conversation_id
        && let Some(refused) = conversation_refusal(&state, &name, id, &caller.label()).await
    {
        return refused;
    }
    if !request.stream {
        let context = ToolContext::of(caller);
        return match pipeline
            .call(&tool, arguments.as_object().cloned(), &context)
            .await
        {
            Ok(outcome) if !outcome.is_error() => {
                Json(outcome.result.structured_content.unwrap_or(Value::Null)).into_response()
            }
            Ok(outcome) => api_error(StatusCode::BAD_GATEWAY, model_text(&outcome.result)),
            Err(error) => api_error(StatusCode::NOT_FOUND, error.to_string()),
        };
    }
    let (sender, receiver) = tokio::sync::mpsc::unbounded_channel::<Event>();
    let progress_sender = sender.clone();
    let context = ToolContext::of(caller).with_progress(std::sync::Arc::new(move |event| {
        let event = match event {
            ProgressEvent::Text(text) => Event::default()
                .event("text")
                .json_data(json!({"text": text})),
            ProgressEvent::ToolStarted { name } => Event::default()
                .event("tool")
                .json_data(json!({"name": name, "state": "started"})),
            ProgressEvent::ToolFinished { name, is_error } => {
                Event::default().event("tool").json_data(
                    json!({"name": name, "state": if is_error { "failed" } else { "done" }}),
                )
            }
            ProgressEvent::Status { state, message } => Event::default()
                .event("status")
                .json_data(json!({"state": state, "message": message})),
            ProgressEvent::Artifact {
                name,
                part,
                last_chunk,
            } => Event::default()
                .event("artifact")
                .json_data(artifact_event(&name, part, last_chunk)),
            // The API answers with the agent's reply either way.
            ProgressEvent::AnswerAsMessage => return,
        };
        if let Ok(event) = event {
            let _ = progress_sender.send(event);
        }
    }));
    // The run continues if the client goes away: its messages are stored either way.
    tokio::spawn(async move {
        let event = match pipeline
            .call(&tool, arguments.as_object().cloned(), &context)
            .await
        {
            Ok(outcome) if !outcome.is_error() => Event::default()
                .event("reply")
                .json_data(outcome.result.structured_content.unwrap_or(Value::Null)),
            Ok(outcome) => Event::default()
                .event("error")
                .json_data(json!({"error": model_text(&outcome.result)})),
            Err(error) => Event::default()
                .event("error")
                .json_data(json!({"error": error.to_string()})),
        };
        if let Ok(event) = event {
            let _ = sender.send(event);
        }
    });
    let stream = futures::stream::unfold(receiver, |mut receiver| async move {
        receiver
            .recv()
            .await
            .map(|event| (Ok::<_, Infallible>(event), receiver))
    });
    Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response()
}

/// A conversation the caller may not continue with agent `name` (none by that id, another agent's
/// or another client's), refused as not found before the agent runs: the same answer for each, so
/// that nobody learns which ids exist. The agent's runtime checks the same again when it opens it.
async fn conversation_refusal(
    state: &ApiState,
    name: &str,
    id: &str,
    client: &str,
) -> Option<Response> {
    let lookup = id.to_string();
    let found = state
        .engine
        .store()
        .run("reading a conversation", move |store| {
            store.conversation(&lookup)
        })
        .await;
    match found {
        Ok(Some(conversation)) if conversation.agent == name && conversation.is_for(client) => None,
        Ok(_) => Some(api_error(
            StatusCode::NOT_FOUND,
            format!(
                "agent `{name}`: conversation `{id}` does not exist, belongs to another agent or was started by another client; omit conversation_id to start a new one"
            ),
        )),
        Err(error) => Some(api_error(
            StatusCode::INTERNAL_SERVER_ERROR,
            error.to_string(),
        )),
    }
}

async fn conversation(
    State(state): State<ApiState>,
    Path(id): Path<String>,
    client: Option<Extension<Principal>>,
) -> Response {
    let caller = caller(client);
    let found = state
        .engine
        .store()
        .run("reading a conversation", move |store| {
            let conversation = store.conversation(&id)?;
            let messages = match &conversation {
                Some(c) => store.messages(&c.id)?,
                None => Vec::new(),
            };
            Ok::<_, portico_store::StoreError>((conversation, messages))
        })
        .await;
    match found {
        // A conversation with an agent outside the client's scope, or another client's, is not
        // there for it.
        Ok((Some(conversation), messages))
            if caller.may_use(&portico_config::agent_tool_name(&conversation.agent))
                && conversation.is_for(&caller.label()) =>
        {
            Json(json!({"conversation": conversation, "messages": messages})).into_response()
        }
        Ok((Some(_), _)) => api_error(StatusCode::NOT_FOUND, "no such conversation"),
        Ok((None, _)) => api_error(StatusCode::NOT_FOUND, "no such conversation"),
        Err(error) => api_error(StatusCode::INTERNAL_SERVER_ERROR, error.to_string()),
    }
}

/// `/api/audit`'s query: the store's filters, with `since` and `until` as `portico audit --since`
/// takes them (a duration back from now, or an RFC 3339 time). `caller` and `principal` are one
/// filter. `format=jsonl` answers one record per line, as a file to save.
#[derive(Deserialize)]
struct AuditParams {
    #[serde(alias = "principal")]
    caller: Option<String>,
    tool: Option<String>,
    outcome: Option<String>,
    since: Option<String>,
    until: Option<String>,
    format: Option<String>,
    #[serde(default)]
    limit: usize,
}

/// A `since` or `until` parameter as an instant, or the message of the 400 naming it.
fn audit_instant(name: &str, value: Option<&str>) -> Result<Option<i64>, String> {
    value
        .map(|value| portico_core::time::parse_since(value, portico_core::time::now_ms()))
        .transpose()
        .map_err(|error| format!("`{name}`: {error}"))
}

/// The most audit records one `/api/audit` answer holds (each answer is built in memory; the
/// JSON-lines export too).
const MAX_AUDIT_PAGE: usize = 10_000;

async fn audit(
    State(state): State<ApiState>,
    client: Option<Extension<Principal>>,
    Query(params): Query<AuditParams>,
) -> Response {
    let jsonl = match params.format.as_deref() {
        None | Some("json") => false,
        Some("jsonl") => true,
        Some(other) => {
            return api_error(
                StatusCode::BAD_REQUEST,
                format!("`format` is json (the default) or jsonl, not `{other}`"),
            );
        }
    };
    if params.limit > MAX_AUDIT_PAGE {
        return api_error(
            StatusCode::BAD_REQUEST,
            format!(
                "`limit` {} is more than {MAX_AUDIT_PAGE} records a request; narrow the time with `since` and `until`",
                params.limit
            ),
        );
    }
    let window = audit_instant("since", params.since.as_deref())
        .and_then(|since| Ok((since, audit_instant("until", params.until.as_deref())?)));
    let (since_ms, until_ms) = match window {
        Ok(window) => window,
        Err(message) => return api_error(StatusCode::BAD_REQUEST, message),
    };
    let mut query = portico_store::AuditQuery {
        caller: params.caller,
        tool: params.tool,
        since_ms,
        until_ms,
        outcome: params.outcome,
        limit: params.limit,
    };
    // A client limited to a scope reads only its own records: others' show tools and calls
    // outside what it may see.
    let caller = caller(client);
    if caller.client_scope().is_some() {
        query.caller = Some(caller.label());
    }
    state.engine.flush_audit().await;
    let records = state
        .engine
        .store()
        .run("reading the audit log", move |store| {
            store.audit_entries(&query)
        })
        .await;
    let records = match records {
        Ok(records) => records,
        Err(error) => return api_error(StatusCode::INTERNAL_SERVER_ERROR, error.to_string()),
    };
    let records: Vec<Value> = records.iter().map(audit_entry_json).collect();
    if !jsonl {
        return Json(json!({"records": records})).into_response();
    }
    let mut lines = String::new();
    for record in &records {
        lines.push_str(&record.to_string());
        lines.push('\n');
    }
    (
        [
            (axum::http::header::CONTENT_TYPE, "application/x-ndjson"),
            (
                axum::http::header::CONTENT_DISPOSITION,
                "attachment; filename=\"portico-audit.jsonl\"",
            ),
        ],
        lines,
    )
        .into_response()
}

/// The audit chain walked from its first record to its head, as `portico audit verify --json`
/// prints it: `ok` with the count and range checked, or the first broken link.
async fn audit_verify(
    State(state): State<ApiState>,
    client: Option<Extension<Principal>>,
) -> Response {
    // The chain links every client's records: a client limited to a scope reads only its own.
    if caller(client).client_scope().is_some() {
        return api_error(
            StatusCode::FORBIDDEN,
            "verifying the audit chain reads every client's records; this token is limited to a scope, use one that is not",
        );
    }
    state.engine.flush_audit().await;
    let verified = state
        .engine
        .store()
        .run("verifying the audit chain", |store| store.verify_audit())
        .await;
    match verified {
        Ok(verification) => {
            let mut value = serde_json::to_value(&verification).unwrap_or_else(|_| json!({}));
            value["ok"] = Value::Bool(verification.is_ok());
            if let Some(broken) = &verification.broken {
                value["message"] = Value::String(broken.to_string());
            }
            Json(value).into_response()
        }
        Err(error) => api_error(StatusCode::INTERNAL_SERVER_ERROR, error.to_string()),
    }
}

/// An audit record as the API shows it: its fields, and `time`, its `at_ms` in RFC 3339 (UTC).
pub(crate) fn audit_record_json(record: &portico_store::AuditRecord) -> Value {
    let mut value = serde_json::to_value(record).unwrap_or_else(|_| json!({}));
    value["time"] = Value::String(portico_core::time::rfc3339(record.at_ms));
    value
}

/// A stored audit record as `/api/audit` lists it: with its `id`, chain links and `time`.
fn audit_entry_json(entry: &portico_store::AuditEntry) -> Value {
    let mut value = serde_json::to_value(entry).unwrap_or_else(|_| json!({}));
    value["time"] = Value::String(portico_core::time::rfc3339(entry.record.at_ms));
    value
}

#[derive(Deserialize)]
struct HealthQuery {
    /// A client's nonce; the answer then carries `proof`, the HMAC of it keyed by the daemon's
    /// per-start identity key, which only a reader of the owner-only `daemon.json` can check.
    challenge: Option<String>,
}

async fn health(
    State(state): State<ApiState>,
    Query(query): Query<HealthQuery>,
    anonymous: Option<axum::Extension<crate::security::Anonymous>>,
) -> Response {
    let servers = state.hub.servers();
    let ready = servers
        .iter()
        .filter(|s| s.state == ServerState::Ready)
        .count();
    let store = store_view(&state.engine);
    let reachable = store["reachable"] == Value::Bool(true);
    let mut body = json!({
        "status": if reachable { "ok" } else { "degraded" },
        "version": env!("CARGO_PKG_VERSION"),
        "pid": std::process::id(),
        "replica": state.engine.replica().name(),
        "servers": {"configured": servers.len(), "ready": ready},
        "config": state.live.status_json(),
        "store": store,
    });
    if anonymous.is_some() {
        // Without the door's token: whether the config loaded, not its path or a refusal's text
        // (which quotes config values: URLs, commands, names); the store's kind and whether it
        // answers, not where it is or what it said.
        body["config"] = json!({"status": body["config"]["status"].clone()});
        body["store"] = json!({
            "backend": body["store"]["backend"].clone(),
            "reachable": reachable,
        });
    }
    if let Some(challenge) = query.challenge {
        if challenge.is_empty() || challenge.len() > MAX_CHALLENGE_CHARS {
            return api_error(
                StatusCode::BAD_REQUEST,
                format!("challenge must be 1 to {MAX_CHALLENGE_CHARS} characters"),
            );
        }
        body["proof"] = Value::String(state.identity.prove(&challenge));
    }
    // A replica that cannot reach its store cannot serve: a load balancer's health check takes it
    // out of rotation.
    let status = if reachable {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, Json(body)).into_response()
}

/// The store as this replica sees it now: its kind and place (user, host and database, no
/// password), whether it answers, its schema version, and the replicas sharing it.
fn store_view(engine: &Engine) -> Value {
    let store = engine.store();
    let mut view = json!({
        "backend": store.backend_name(),
        "location": store.location().display().to_string(),
        "schemaVersion": store.schema_version_applied(),
    });
    // A replica of a shared store answers from its heartbeat's last look, without a query: a flood
    // of health checks must not load the database, and a replica whose own heartbeat stopped has
    // lost its lease (the others fail its tasks) and must leave the balancer's rotation.
    if let Some(seen) = engine.replica().view() {
        let holds_lease = seen.holds_lease();
        view["reachable"] = json!(holds_lease);
        view["replicas"] = json!(seen.replicas);
        if let Some(at) = seen.beat_at {
            view["heartbeatAgoMs"] =
                json!(u64::try_from(at.elapsed().as_millis()).unwrap_or(u64::MAX));
        }
        if let Some(error) = seen.error {
            view["error"] = json!(error);
        } else if !holds_lease {
            view["error"] = json!("this replica's heartbeat is older than its lease");
        }
        return view;
    }
    // The process's own store (the SQLite file, opened at start): nothing to ask of it, so a
    // health check does no work there either.
    view["reachable"] = json!(true);
    view
}

/// The reference shape: `configured` (what the config says) and `connected` (live sessions with their
/// tools), extended with state, protocol version and last error.
async fn servers(
    State(state): State<ApiState>,
    client: Option<Extension<Principal>>,
) -> Json<Value> {
    let caller = caller(client);
    let catalog = state.hub.catalog();
    let connected: Vec<Value> = state
        .hub
        .servers()
        .into_iter()
        .map(|s| {
            let tools: Vec<Value> = catalog
                .tools_of(&s.name)
                .filter(|t| caller.may_use(&t.name))
                .map(|t| {
                    let description = t.definition.get("description").and_then(Value::as_str).unwrap_or("");
                    // A restarting server's tools stay listed; calls to them fail until it is back.
                    json!({"name": t.name, "description": format!("[MCP:{}] {description}", s.name), "available": s.state == ServerState::Ready})
                })
                .collect();
            let mut server = json!({
                "name": s.name,
                "tools_count": tools.len(),
                "tools": tools,
                "connected": s.state == ServerState::Ready,
                "state": s.state,
                "transport": s.transport_detail.clone().unwrap_or_else(|| s.transport.clone()),
                "protocol_version": s.protocol_version,
                "resources_count": s.resources + s.resource_templates,
                "prompts_count": s.prompts,
                "last_error": s.last_error,
                // A stdio child's last stderr lines when it failed at start (empty otherwise).
                "stderr_tail": s.stderr_tail,
                // While a connection attempt runs: how long it has taken, and what the child is
                // saying (a package runner's download lines).
                "starting_secs": s.starting_secs,
                "last_stderr": s.last_stderr,
                // While restarting: failed attempts in a row, and when the next one is due
                // (Unix milliseconds).
                "failed_attempts": s.failed_attempts,
                "next_retry_at_ms": s.next_retry_at_ms,
            });
            // `needs_secret`: the names to set (`portico secret set NAME`), never a value.
            if !s.missing_secrets.is_empty() {
                server["missing_secrets"] = json!(s.missing_secrets);
            }
            server
        })
        .collect();
    Json(json!({
        "configured": configured_servers(&state.live.config()),
        "connected": connected,
        "config": state.live.status_json(),
    }))
}

fn configured_servers(config: &Config) -> Value {
    config
        .mcp_servers
        .iter()
        .map(|s| {
            // Header values and literal env values often hold credentials: show names only.
            let transport = match &s.transport {
                Transport::Stdio { command, args, cwd } => {
                    json!({"type": "stdio", "command": command, "args": args, "cwd": cwd})
                }
                Transport::Http { url, headers } | Transport::Sse { url, headers } => json!({
                    "type": s.transport.kind(),
                    "url": url,
                    "headers": headers.keys().collect::<Vec<_>>(),
                }),
            };
            let env: Vec<&str> = s.env.iter().map(EnvEntry::name).collect();
            json!({
                "name": s.name,
                "transport": transport,
                "timeout_secs": s.timeout_secs,
                "env": env,
                "enabled": s.enabled,
            })
        })
        .collect()
}
