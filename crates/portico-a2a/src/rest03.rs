//! The A2A 0.3 HTTP+JSON binding: the 0.3 `a2a.v1` gRPC service transcoded to HTTP, under
//! `{listen_path}/{agent}/v1/…` (the SDKs append `/v1/…` to the card interface's URL themselves).
//!
//! | operation | route |
//! |---|---|
//! | SendMessage | `POST v1/message:send` → `{"task": Task}` |
//! | SendStreamingMessage | `POST v1/message:stream` → SSE of `StreamResponse` |
//! | GetTask | `GET v1/tasks/{id}?historyLength=N` → `Task` |
//! | CancelTask | `POST v1/tasks/{id}:cancel` → `Task` |
//! | TaskSubscription | `GET` (the spec) or `POST` (what the Python SDK tries first) `v1/tasks/{id}:subscribe` |
//! | push configs | `POST`/`GET v1/tasks/{id}/pushNotificationConfigs`, `GET`/`DELETE …/{configId}` |
//! | GetAgentCard (extended) | `GET v1/card` (not configured: an error, as on the other bindings) |
//!
//! Bodies are proto-JSON of the 0.3 proto, which differs from both the 0.3 JSON-RPC form and 1.0:
//! `Message.content` (not `parts`), `ROLE_USER`/`ROLE_AGENT`, `TaskStatus.update` (JSON name
//! `message`), `TASK_STATE_CANCELLED` (two Ls), parts `{text}` / `{file: {fileWithUri|fileWithBytes,
//! mimeType}}` / `{data: {data: {…}}}`. Requests are read in either JSON naming (the Python SDK sends
//! the proto field names, `{"request": {"message_id": …}}`; the JS SDK the JSON names,
//! `{"message": {"messageId": …}}`) and converted to the internal 1.0 form; answers use the JSON
//! names, which both SDKs parse. Errors are `{"code", "message", "type", "data"}`: the A2A JSON-RPC
//! code (what the JS SDK maps) and the SDK error class name (what the Python SDK maps).

use std::collections::HashMap;

use axum::Json;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Map, Value, json};

use crate::error::A2aError;
use portico_a2a_client::protocol::{TaskState, v1, v03};

use crate::ops;
use crate::server::{self, A2aState, Caller};
use crate::tasks::to_json;
use crate::wire::Version;

/// The 0.3 HTTP+JSON routes, merged into the A2A router.
pub(crate) fn routes(listen_path: &str) -> Router<A2aState> {
    let base = format!("{listen_path}/{{agent}}/v1");
    Router::new()
        .route(&format!("{base}/message:send"), post(send))
        .route(&format!("{base}/message:stream"), post(stream))
        .route(
            &format!("{base}/tasks/{{task}}"),
            get(task_get).post(task_post),
        )
        .route(
            &format!("{base}/tasks/{{task}}/pushNotificationConfigs"),
            get(push_list).post(push_create),
        )
        .route(
            &format!("{base}/tasks/{{task}}/pushNotificationConfigs/{{id}}"),
            get(push_get).delete(push_delete),
        )
        .route(&format!("{base}/card"), get(extended_card))
}

// ---------------------------------------------------------------------------------------------------
// Errors.

/// The SDK error class for an error: the Python SDK's 0.3 REST client raises the class its `type`
/// names (else, on 404, "method not found").
fn sdk_error_type(error: &A2aError) -> &'static str {
    match error {
        A2aError::Parse(_) => "JSONParseError",
        A2aError::InvalidRequest(_) => "InvalidRequestError",
        A2aError::MethodNotFound(_) => "MethodNotFoundError",
        A2aError::InvalidParams(_) => "InvalidParamsError",
        A2aError::Internal(_) | A2aError::Busy(_) | A2aError::TooManyStreams(_) => "InternalError",
        A2aError::TaskNotFound(_) => "TaskNotFoundError",
        A2aError::TaskNotCancelable { .. } => "TaskNotCancelableError",
        A2aError::PushNotSupported => "PushNotificationNotSupportedError",
        A2aError::Unsupported(_) => "UnsupportedOperationError",
        A2aError::ContentTypeNotSupported(_) => "ContentTypeNotSupportedError",
        A2aError::ExtendedCardNotConfigured => "ExtendedAgentCardNotConfiguredError",
        A2aError::VersionNotSupported(_) => "VersionNotSupportedError",
        // The SDKs have no class of their own for it.
        A2aError::PermissionDenied(_) => "InvalidRequestError",
    }
}

/// The error body: the JSON-RPC error object (`code`, `message`, `data` with the ErrorInfo) plus
/// `type`. The JS SDK maps `code`, the Python SDK `type`.
pub(crate) fn error_body(error: &A2aError) -> Value {
    let mut body = error.to_jsonrpc();
    body["type"] = json!(sdk_error_type(error));
    body
}

fn error_response(error: &A2aError) -> Response {
    let status =
        StatusCode::from_u16(error.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (status, Json(error_body(error))).into_response()
}

fn respond(result: Result<Response, A2aError>) -> Response {
    result.unwrap_or_else(|error| error_response(&error))
}

// ---------------------------------------------------------------------------------------------------
// Handlers.

/// The agent's name and the caller's identity. These paths are 0.3 whatever the `A2A-Version`
/// header says, but a version this server does not speak is still refused.
fn caller(
    state: &A2aState,
    agent: &str,
    headers: &HeaderMap,
    caller: Caller,
) -> Result<(String, Caller), A2aError> {
    server::requested_version(headers)?;
    Ok((state.agent_name(agent)?, caller))
}

async fn send(
    State(state): State<A2aState>,
    Path(agent): Path<String>,
    who: Caller,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    respond(
        async {
            let (agent, who) = caller(&state, &agent, &headers, who)?;
            let request = server::typed_value(send_params(&server::rest_body(&body)?))?;
            let answer =
                match ops::send_message(&state, &who, &agent, request, Version::V03).await? {
                    v1::SendMessageResponse::Task(task) => {
                        json!({"task": task_to_rest03(&to_json(&task))})
                    }
                    v1::SendMessageResponse::Message(message) => {
                        json!({"message": message_to_rest03(&to_json(&message))})
                    }
                };
            Ok(Json(answer).into_response())
        }
        .await,
    )
}

async fn stream(
    State(state): State<A2aState>,
    Path(agent): Path<String>,
    who: Caller,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    respond(
        async {
            let (agent, who) = caller(&state, &agent, &headers, who)?;
            let request = server::typed_value(send_params(&server::rest_body(&body)?))?;
            let (task, receiver) =
                ops::send_streaming_message(&state, &who, &agent, request, Version::V03).await?;
            Ok(server::sse(server::event_stream(
                task,
                receiver,
                Version::V1,
                |event| stream_event_to_rest03(&event),
            )))
        }
        .await,
    )
}

async fn subscribe(state: &A2aState, owner: &str, id: &str) -> Result<Response, A2aError> {
    let (task, receiver) = ops::subscribe_to_task(state, owner, id, "GET it instead").await?;
    Ok(server::sse(server::event_stream(
        task,
        receiver,
        Version::V1,
        |event| stream_event_to_rest03(&event),
    )))
}

/// `GET v1/tasks/{id}` and `GET v1/tasks/{id}:subscribe`.
async fn task_get(
    State(state): State<A2aState>,
    Path((agent, task)): Path<(String, String)>,
    Query(query): Query<HashMap<String, String>>,
    who: Caller,
    headers: HeaderMap,
) -> Response {
    respond(
        async {
            let (_, who) = caller(&state, &agent, &headers, who)?;
            let owner = who.owner;
            if let Some(id) = task.strip_suffix(":subscribe") {
                return subscribe(&state, &owner, id).await;
            }
            let history = ["historyLength", "history_length"]
                .iter()
                .find_map(|k| query.get(*k))
                .map(|v| {
                    v.parse::<usize>().map_err(|_| {
                        A2aError::InvalidParams(format!("`historyLength` `{v}` is not a number"))
                    })
                })
                .transpose()?;
            let request = v1::GetTaskRequest {
                tenant: None,
                id: task,
                history_length: history.map(|n| u32::try_from(n).unwrap_or(u32::MAX)),
            };
            let task = ops::get_task(&state, &owner, &request).await?;
            Ok(Json(task_to_rest03(&to_json(&task))).into_response())
        }
        .await,
    )
}

/// `POST v1/tasks/{id}:cancel` and `POST v1/tasks/{id}:subscribe`.
async fn task_post(
    State(state): State<A2aState>,
    Path((agent, task)): Path<(String, String)>,
    who: Caller,
    headers: HeaderMap,
) -> Response {
    respond(
        async {
            let (_, who) = caller(&state, &agent, &headers, who)?;
            let owner = who.owner;
            if let Some(id) = task.strip_suffix(":subscribe") {
                return subscribe(&state, &owner, id).await;
            }
            let Some(id) = task.strip_suffix(":cancel") else {
                return Err(A2aError::MethodNotFound(format!("POST v1/tasks/{task}")));
            };
            let task = ops::cancel_task(&state, &owner, id).await?;
            Ok(Json(task_to_rest03(&to_json(&task))).into_response())
        }
        .await,
    )
}

async fn push_create(
    State(state): State<A2aState>,
    Path((agent, task)): Path<(String, String)>,
    who: Caller,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    respond(
        async {
            let (_, who) = caller(&state, &agent, &headers, who)?;
            let owner = who.owner;
            let config: v03::PushNotificationConfig =
                server::typed_value(push_config_from_rest03(&server::rest_body(&body)?))?;
            let stored =
                ops::create_push_config(&state, &owner, &task, config.into(), Version::V03).await?;
            Ok(Json(push_config_to_rest03(&stored.view(Version::V1))).into_response())
        }
        .await,
    )
}

async fn push_list(
    State(state): State<A2aState>,
    Path((agent, task)): Path<(String, String)>,
    who: Caller,
    headers: HeaderMap,
) -> Response {
    respond(
        async {
            let (_, who) = caller(&state, &agent, &headers, who)?;
            let owner = who.owner;
            let configs: Vec<Value> = ops::list_push_configs(&state, &owner, &task)
                .await?
                .iter()
                .map(|c| push_config_to_rest03(&c.view(Version::V1)))
                .collect();
            Ok(Json(json!({"configs": configs, "nextPageToken": ""})).into_response())
        }
        .await,
    )
}

async fn push_get(
    State(state): State<A2aState>,
    Path((agent, task, id)): Path<(String, String, String)>,
    who: Caller,
    headers: HeaderMap,
) -> Response {
    respond(
        async {
            let (_, who) = caller(&state, &agent, &headers, who)?;
            let owner = who.owner;
            let config = ops::get_push_config(&state, &owner, &task, Some(&id)).await?;
            Ok(Json(push_config_to_rest03(&config.view(Version::V1))).into_response())
        }
        .await,
    )
}

async fn push_delete(
    State(state): State<A2aState>,
    Path((agent, task, id)): Path<(String, String, String)>,
    who: Caller,
    headers: HeaderMap,
) -> Response {
    respond(
        async {
            let (_, who) = caller(&state, &agent, &headers, who)?;
            let owner = who.owner;
            ops::delete_push_config(&state, &owner, &task, &id).await?;
            Ok(Json(json!({})).into_response())
        }
        .await,
    )
}

async fn extended_card(
    State(state): State<A2aState>,
    Path(agent): Path<String>,
    who: Caller,
    headers: HeaderMap,
) -> Response {
    respond(caller(&state, &agent, &headers, who).and(Err(ops::get_extended_agent_card())))
}

// ---------------------------------------------------------------------------------------------------
// Requests: 0.3 proto-JSON (either naming) → the internal 1.0 form.

/// The first of `names` that is present and not null.
fn field<'a>(value: &'a Value, names: &[&str]) -> Option<&'a Value> {
    names
        .iter()
        .find_map(|n| value.get(*n).filter(|v| !v.is_null()))
}

fn non_empty_str<'a>(value: &'a Value, names: &[&str]) -> Option<&'a str> {
    field(value, names)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

fn part_from_rest03(part: &Value) -> Value {
    let mut out = Map::new();
    if let Some(text) = field(part, &["text"]) {
        out.insert("text".into(), text.clone());
    } else if let Some(file) = field(part, &["file"]) {
        if let Some(uri) = field(file, &["fileWithUri", "file_with_uri"]) {
            out.insert("url".into(), uri.clone());
        }
        if let Some(bytes) = field(file, &["fileWithBytes", "file_with_bytes"]) {
            out.insert("raw".into(), bytes.clone());
        }
        if let Some(mime) = non_empty_str(file, &["mimeType", "mime_type"]) {
            out.insert("mediaType".into(), json!(mime));
        }
        if let Some(name) = non_empty_str(file, &["name"]) {
            out.insert("filename".into(), json!(name));
        }
    } else if let Some(data) = field(part, &["data"]) {
        // A `DataPart` is `{"data": Struct}`; a bare object is taken as the data itself.
        let inner = match data.as_object() {
            Some(map) if map.len() == 1 && map.contains_key("data") => data["data"].clone(),
            _ => data.clone(),
        };
        out.insert("data".into(), inner);
    } else {
        out.insert("text".into(), json!(""));
    }
    if let Some(metadata) = field(part, &["metadata"]) {
        out.insert("metadata".into(), metadata.clone());
    }
    Value::Object(out)
}

/// A 0.3 proto-JSON `Message` (`content`, either naming) as a 1.0 message.
pub(crate) fn message_from_rest03(message: &Value) -> Value {
    let mut out = Map::new();
    for (names, key) in [
        (&["messageId", "message_id"][..], "messageId"),
        (&["contextId", "context_id"][..], "contextId"),
        (&["taskId", "task_id"][..], "taskId"),
    ] {
        if let Some(value) = non_empty_str(message, names) {
            out.insert(key.into(), json!(value));
        }
    }
    let agent = match field(message, &["role"]) {
        Some(Value::String(role)) => role == "ROLE_AGENT" || role == "agent",
        Some(Value::Number(n)) => n.as_u64() == Some(2),
        _ => false,
    };
    out.insert(
        "role".into(),
        json!(if agent { "ROLE_AGENT" } else { "ROLE_USER" }),
    );
    let parts: Vec<Value> = match field(message, &["content"]).and_then(Value::as_array) {
        Some(content) => content.iter().map(part_from_rest03).collect(),
        // Not the proto form: let the lenient reader of the other forms have it.
        None => crate::wire::message_from_any(message)["parts"]
            .as_array()
            .cloned()
            .unwrap_or_default(),
    };
    out.insert("parts".into(), Value::Array(parts));
    for key in ["metadata", "extensions"] {
        if let Some(value) = field(message, &[key]) {
            out.insert(key.into(), value.clone());
        }
    }
    Value::Object(out)
}

/// A 0.3 `SendMessageRequest` body as the params of the internal send. The message is `message`
/// (JSON name; JS SDK) or `request` (field name; Python SDK). `blocking` is a plain proto3 bool: a
/// configuration without `blocking: true` asks for an immediate answer, no configuration at all
/// means blocking (as the SDK servers read it).
pub(crate) fn send_params(body: &Value) -> Value {
    let mut params = Map::new();
    if let Some(message) = field(body, &["message", "request"]) {
        params.insert("message".into(), message_from_rest03(message));
    }
    if let Some(config) = field(body, &["configuration"]) {
        let mut out = Map::new();
        if field(config, &["blocking"]).and_then(Value::as_bool) != Some(true) {
            out.insert("returnImmediately".into(), json!(true));
        }
        if let Some(n) = field(config, &["historyLength", "history_length"]).and_then(|v| {
            v.as_u64()
                .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
        }) {
            out.insert("historyLength".into(), json!(n));
        }
        if let Some(modes) = field(config, &["acceptedOutputModes", "accepted_output_modes"]) {
            out.insert("acceptedOutputModes".into(), modes.clone());
        }
        if let Some(push) = field(config, &["pushNotification", "push_notification"]) {
            out.insert("pushNotificationConfig".into(), push.clone());
        }
        params.insert("configuration".into(), Value::Object(out));
    }
    if let Some(metadata) = field(body, &["metadata"]) {
        params.insert("metadata".into(), metadata.clone());
    }
    Value::Object(params)
}

/// The `PushNotificationConfig` of a create request, with its id. The JS SDK sends the HTTP rule's
/// body, a `TaskPushNotificationConfig` (`{"name": "tasks/T/pushNotificationConfigs/C",
/// "pushNotificationConfig": {…}}`); the Python SDK the whole request (`{"parent": "tasks/T",
/// "config_id": "C", "config": {"name": …, "push_notification_config": {…}}}`). A bare
/// `PushNotificationConfig` is accepted too.
pub(crate) fn push_config_from_rest03(body: &Value) -> Value {
    let config = field(body, &["config"])
        .filter(|c| c.is_object())
        .unwrap_or(body);
    let inner = field(
        config,
        &["pushNotificationConfig", "push_notification_config"],
    )
    .unwrap_or(config);
    let mut out = inner.as_object().cloned().unwrap_or_default();
    if out
        .get("id")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        let from_name = [config, body].into_iter().find_map(|v| {
            non_empty_str(v, &["name"])
                .and_then(|n| n.rsplit_once("/pushNotificationConfigs/"))
                .map(|(_, id)| id)
                .filter(|id| !id.is_empty())
        });
        let id = non_empty_str(body, &["configId", "config_id"]).or(from_name);
        match id {
            Some(id) => {
                out.insert("id".into(), json!(id));
            }
            None => {
                out.remove("id");
            }
        }
    }
    Value::Object(out)
}

// ---------------------------------------------------------------------------------------------------
// Answers: the internal 1.0 form → 0.3 proto-JSON (JSON names).

fn state_to_rest03(state: &str) -> &str {
    match state {
        "TASK_STATE_CANCELED" => "TASK_STATE_CANCELLED",
        "" => "TASK_STATE_UNSPECIFIED",
        other => other,
    }
}

fn copy(from: &Value, to: &mut Map<String, Value>, keys: &[&str]) {
    for key in keys {
        if let Some(value) = field(from, &[key]) {
            to.insert((*key).into(), value.clone());
        }
    }
}

fn part_to_rest03(part: &Value) -> Value {
    let mut out = Map::new();
    if let Some(text) = field(part, &["text"]) {
        out.insert("text".into(), text.clone());
    } else if let Some(data) = field(part, &["data"]) {
        // A `Struct`: data that is not an object is wrapped.
        let data = if data.is_object() {
            data.clone()
        } else {
            json!({"value": data})
        };
        out.insert("data".into(), json!({"data": data}));
    } else {
        let mut file = Map::new();
        if let Some(url) = field(part, &["url"]) {
            file.insert("fileWithUri".into(), url.clone());
        } else if let Some(raw) = field(part, &["raw"]) {
            file.insert("fileWithBytes".into(), raw.clone());
        }
        if let Some(media_type) = field(part, &["mediaType"]) {
            file.insert("mimeType".into(), media_type.clone());
        }
        if let Some(name) = field(part, &["filename"]) {
            file.insert("name".into(), name.clone());
        }
        out.insert("file".into(), Value::Object(file));
    }
    copy(part, &mut out, &["metadata"]);
    Value::Object(out)
}

fn parts_to_rest03(value: &Value) -> Value {
    Value::Array(
        value
            .get("parts")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(part_to_rest03)
            .collect(),
    )
}

pub(crate) fn message_to_rest03(message: &Value) -> Value {
    let mut out = Map::new();
    copy(message, &mut out, &["messageId", "contextId", "taskId"]);
    let role = match message.get("role").and_then(Value::as_str) {
        Some("ROLE_AGENT" | "agent") => "ROLE_AGENT",
        _ => "ROLE_USER",
    };
    out.insert("role".into(), json!(role));
    out.insert("content".into(), parts_to_rest03(message));
    copy(message, &mut out, &["metadata", "extensions"]);
    Value::Object(out)
}

fn status_to_rest03(status: &Value) -> Value {
    let mut out = Map::new();
    let state = status
        .get("state")
        .and_then(Value::as_str)
        .unwrap_or_default();
    out.insert("state".into(), json!(state_to_rest03(state)));
    // The proto field is `update`; its JSON name is `message`.
    if let Some(message) = field(status, &["message"]) {
        out.insert("message".into(), message_to_rest03(message));
    }
    copy(status, &mut out, &["timestamp"]);
    Value::Object(out)
}

fn artifact_to_rest03(artifact: &Value) -> Value {
    let mut out = Map::new();
    copy(artifact, &mut out, &["artifactId", "name", "description"]);
    out.insert("parts".into(), parts_to_rest03(artifact));
    copy(artifact, &mut out, &["metadata", "extensions"]);
    Value::Object(out)
}

pub(crate) fn task_to_rest03(task: &Value) -> Value {
    let mut out = Map::new();
    copy(task, &mut out, &["id", "contextId"]);
    out.insert(
        "status".into(),
        status_to_rest03(task.get("status").unwrap_or(&Value::Null)),
    );
    for (key, convert) in [
        ("artifacts", artifact_to_rest03 as fn(&Value) -> Value),
        ("history", message_to_rest03),
    ] {
        if let Some(items) = task.get(key).and_then(Value::as_array) {
            out.insert(
                key.into(),
                Value::Array(items.iter().map(convert).collect()),
            );
        }
    }
    copy(task, &mut out, &["metadata"]);
    Value::Object(out)
}

/// One streamed event (1.0 `StreamResponse`) as a 0.3 `StreamResponse`: `task`, `message`,
/// `statusUpdate` (with `final`, true when the stream ends there) or `artifactUpdate`.
pub(crate) fn stream_event_to_rest03(event: &Value) -> Value {
    if let Some(task) = event.get("task") {
        return json!({"task": task_to_rest03(task)});
    }
    if let Some(message) = event.get("message") {
        return json!({"message": message_to_rest03(message)});
    }
    if let Some(update) = event.get("statusUpdate") {
        let mut out = Map::new();
        copy(update, &mut out, &["taskId", "contextId"]);
        let status = update.get("status").cloned().unwrap_or_default();
        let state = status
            .get("state")
            .and_then(Value::as_str)
            .unwrap_or_default();
        out.insert("status".into(), status_to_rest03(&status));
        out.insert(
            "final".into(),
            json!(TaskState::from_v1_name(state).is_some_and(TaskState::is_settled)),
        );
        copy(update, &mut out, &["metadata"]);
        return json!({"statusUpdate": out});
    }
    if let Some(update) = event.get("artifactUpdate") {
        let mut out = Map::new();
        copy(update, &mut out, &["taskId", "contextId"]);
        if let Some(artifact) = update.get("artifact") {
            out.insert("artifact".into(), artifact_to_rest03(artifact));
        }
        copy(update, &mut out, &["append", "lastChunk", "metadata"]);
        return json!({"artifactUpdate": out});
    }
    event.clone()
}

/// A stored push config as a 0.3 `TaskPushNotificationConfig`.
pub(crate) fn push_config_to_rest03(stored: &Value) -> Value {
    let task_id = stored["taskId"].as_str().unwrap_or_default();
    let id = stored["id"].as_str().unwrap_or_default();
    let mut config = Map::new();
    copy(stored, &mut config, &["id", "url", "token"]);
    let auth = &stored["authentication"];
    if auth.is_object() {
        config.insert(
            "authentication".into(),
            json!({"schemes": [auth["scheme"]], "credentials": auth["credentials"]}),
        );
    }
    json!({
        "name": format!("tasks/{task_id}/pushNotificationConfigs/{id}"),
        "pushNotificationConfig": config,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_sdk_send_bodies_become_the_same_internal_send() {
        // What the Python SDK sends (proto field names), and what the JS SDK sends (JSON names).
        let python = json!({"request": {"message_id": "m1", "context_id": "c1", "task_id": "t1",
            "role": "ROLE_USER", "content": [{"text": "hi"}]}, "configuration": {"blocking": true}});
        let js = json!({"message": {"messageId": "m1", "contextId": "c1", "taskId": "t1",
            "role": "ROLE_USER", "content": [{"text": "hi"}]}, "configuration": {"blocking": true}});
        let expected = json!({"message": {"messageId": "m1", "contextId": "c1", "taskId": "t1",
            "role": "ROLE_USER", "parts": [{"text": "hi"}]}, "configuration": {}});
        assert_eq!(send_params(&python), expected);
        assert_eq!(send_params(&js), expected);
        // `{}` is what both send for "return immediately"; no configuration means blocking.
        let immediate = send_params(&json!({"message": {"messageId": "m", "content": []},
            "configuration": {}}));
        assert_eq!(immediate["configuration"]["returnImmediately"], true);
        let bare = send_params(&json!({"message": {"messageId": "m", "content": []}}));
        assert!(bare.get("configuration").is_none());
        let configured = send_params(&json!({"request": {"message_id": "m", "content": []},
            "configuration": {"blocking": true, "history_length": 2,
                "push_notification": {"url": "https://hook", "token": "t"}}}));
        assert_eq!(
            configured["configuration"],
            json!({"historyLength": 2, "pushNotificationConfig": {"url": "https://hook", "token": "t"}})
        );
    }

    #[test]
    fn parts_cross_both_ways() {
        let message = message_from_rest03(&json!({"message_id": "m", "role": "ROLE_AGENT",
        "content": [
            {"text": "a", "metadata": {"k": 1}},
            {"file": {"file_with_uri": "https://x/y.pdf", "mime_type": "application/pdf", "name": "y.pdf"}},
            {"file": {"fileWithBytes": "aGk=", "mimeType": "text/plain"}},
            {"data": {"data": {"n": 1}}},
        ]}));
        assert_eq!(
            message,
            json!({"messageId": "m", "role": "ROLE_AGENT", "parts": [
                {"text": "a", "metadata": {"k": 1}},
                {"url": "https://x/y.pdf", "mediaType": "application/pdf", "filename": "y.pdf"},
                {"raw": "aGk=", "mediaType": "text/plain"},
                {"data": {"n": 1}},
            ]})
        );
        assert_eq!(
            message_to_rest03(&message),
            json!({"messageId": "m", "role": "ROLE_AGENT", "content": [
                {"text": "a", "metadata": {"k": 1}},
                {"file": {"fileWithUri": "https://x/y.pdf", "mimeType": "application/pdf", "name": "y.pdf"}},
                {"file": {"fileWithBytes": "aGk=", "mimeType": "text/plain"}},
                {"data": {"data": {"n": 1}}},
            ]})
        );
        // Data that is not an object still fits a `Struct`.
        assert_eq!(
            part_to_rest03(&json!({"data": [1, 2]})),
            json!({"data": {"data": {"value": [1, 2]}}})
        );
        // A message in the 0.3 JSON-RPC form is read too.
        let jsonrpc = message_from_rest03(&json!({"messageId": "m", "role": "user",
            "parts": [{"kind": "text", "text": "x"}]}));
        assert_eq!(jsonrpc["parts"], json!([{"text": "x"}]));
    }

    #[test]
    fn tasks_and_events_take_the_proto_shape() {
        let task = json!({"id": "t", "contextId": "c",
            "status": {"state": "TASK_STATE_CANCELED", "timestamp": "2026-01-01T00:00:00.000Z",
                "message": {"messageId": "m", "role": "ROLE_AGENT", "parts": [{"text": "stop"}]}},
            "artifacts": [{"artifactId": "a", "name": "response", "parts": [{"text": "x"}]}],
            "history": [{"messageId": "u", "role": "ROLE_USER", "parts": [{"text": "go"}]}]});
        assert_eq!(
            task_to_rest03(&task),
            json!({"id": "t", "contextId": "c",
                "status": {"state": "TASK_STATE_CANCELLED", "timestamp": "2026-01-01T00:00:00.000Z",
                    "message": {"messageId": "m", "role": "ROLE_AGENT", "content": [{"text": "stop"}]}},
                "artifacts": [{"artifactId": "a", "name": "response", "parts": [{"text": "x"}]}],
                "history": [{"messageId": "u", "role": "ROLE_USER", "content": [{"text": "go"}]}]})
        );
        let done =
            stream_event_to_rest03(&json!({"statusUpdate": {"taskId": "t", "contextId": "c",
            "status": {"state": "TASK_STATE_INPUT_REQUIRED"}}}));
        assert_eq!(
            done,
            json!({"statusUpdate": {"taskId": "t", "contextId": "c", "final": true,
                "status": {"state": "TASK_STATE_INPUT_REQUIRED"}}})
        );
        let working = stream_event_to_rest03(&json!({"statusUpdate": {"taskId": "t",
            "status": {"state": "TASK_STATE_WORKING"}}}));
        assert_eq!(working["statusUpdate"]["final"], false);
        let chunk = stream_event_to_rest03(
            &json!({"artifactUpdate": {"taskId": "t", "contextId": "c",
            "artifact": {"artifactId": "a", "parts": [{"text": "x"}]}, "append": true, "lastChunk": false}}),
        );
        assert_eq!(
            chunk,
            json!({"artifactUpdate": {"taskId": "t", "contextId": "c",
                "artifact": {"artifactId": "a", "parts": [{"text": "x"}]}, "append": true, "lastChunk": false}})
        );
        assert_eq!(
            stream_event_to_rest03(&json!({"task": task}))["task"]["status"]["state"],
            "TASK_STATE_CANCELLED"
        );
    }

    #[test]
    fn push_configs_from_both_sdks() {
        let js = json!({"name": "tasks/t/pushNotificationConfigs/c1",
            "pushNotificationConfig": {"url": "https://hook", "token": "tok",
                "authentication": {"schemes": ["Bearer"], "credentials": "s"}}});
        let python = json!({"parent": "tasks/t", "config_id": "c1", "config": {
            "name": "tasks/t/pushNotificationConfigs/c1",
            "push_notification_config": {"id": "c1", "url": "https://hook", "token": "tok",
                "authentication": {"schemes": ["Bearer"], "credentials": "s"}}}});
        let expected = json!({"id": "c1", "url": "https://hook", "token": "tok",
            "authentication": {"schemes": ["Bearer"], "credentials": "s"}});
        assert_eq!(push_config_from_rest03(&js), expected);
        assert_eq!(push_config_from_rest03(&python), expected);
        assert_eq!(
            push_config_from_rest03(&json!({"url": "https://hook"})),
            json!({"url": "https://hook"})
        );
        let config: v03::PushNotificationConfig = serde_json::from_value(expected).unwrap();
        let stored = crate::push::normalise_config("t", config.into(), Version::V03).unwrap();
        assert_eq!(
            push_config_to_rest03(&stored.view(Version::V1)),
            json!({"name": "tasks/t/pushNotificationConfigs/c1", "pushNotificationConfig": {
                "id": "c1", "url": "https://hook", "token": "tok",
                "authentication": {"schemes": ["Bearer"], "credentials": "s"}}})
        );
    }

    #[test]
    fn errors_name_the_code_and_the_sdk_class() {
        let body = error_body(&A2aError::TaskNotFound("t".into()));
        assert_eq!(body["code"], -32001);
        assert_eq!(body["type"], "TaskNotFoundError");
        assert_eq!(body["message"], "task `t` not found");
        assert_eq!(body["data"][0]["reason"], "TASK_NOT_FOUND");
        assert_eq!(
            error_body(&A2aError::ExtendedCardNotConfigured)["type"],
            "ExtendedAgentCardNotConfiguredError"
        );
    }
}
