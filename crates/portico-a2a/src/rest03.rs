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
//! Bodies are the 0.3 proto's proto-JSON, typed in `portico_a2a_client::protocol::v03_rest` (which
//! reads both SDKs' namings and converts to and from the internal 1.0 form); this module only routes.
//! Errors are `{"code", "message", "type", "data"}`: the A2A JSON-RPC code (what the JS SDK maps)
//! and the SDK error class name (what the Python SDK maps).

use std::collections::HashMap;

use axum::Json;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};

use crate::error::A2aError;
use portico_a2a_client::protocol::{v1, v03_rest};

use crate::ops;
use crate::push::StoredPushConfig;
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
            let request = send_request(&body)?;
            let answer = ops::send_message(&state, &who, &agent, request, Version::V03).await?;
            Ok(Json(to_json(&v03_rest::SendMessageResponse::from(answer))).into_response())
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
            let request = send_request(&body)?;
            let (task, receiver) =
                ops::send_streaming_message(&state, &who, &agent, request, Version::V03).await?;
            Ok(events(task, receiver))
        }
        .await,
    )
}

async fn subscribe(state: &A2aState, owner: &str, id: &str) -> Result<Response, A2aError> {
    let (task, receiver) = ops::subscribe_to_task(state, owner, id, "GET it instead").await?;
    Ok(events(task, receiver))
}

/// A task's events as an SSE stream of 0.3 `StreamResponse`s.
fn events(task: v1::Task, receiver: crate::tasks::Subscription) -> Response {
    server::sse(server::event_stream(task, receiver, |event| {
        to_json(&v03_rest::StreamResponse::from(event))
    }))
}

/// A send's body (either SDK's naming) as the internal send.
fn send_request(body: &Bytes) -> Result<v1::SendMessageRequest, A2aError> {
    let request: v03_rest::SendMessageRequest = server::typed_value(server::rest_body(body)?)?;
    Ok(request.into())
}

fn task_answer(task: v1::Task) -> Response {
    Json(to_json(&v03_rest::Task::from(task))).into_response()
}

fn push_config_answer(stored: StoredPushConfig) -> Response {
    Json(to_json(&v03_rest::TaskPushNotificationConfig::from(
        stored.config,
    )))
    .into_response()
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
            Ok(task_answer(task))
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
            Ok(task_answer(task))
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
            let config: v03_rest::CreatePushConfigBody =
                server::typed_value(server::rest_body(&body)?)?;
            let stored =
                ops::create_push_config(&state, &owner, &task, config.into(), Version::V03).await?;
            Ok(push_config_answer(stored))
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
            let configs = ops::list_push_configs(&state, &owner, &task)
                .await?
                .into_iter()
                .map(|stored| stored.config.into())
                .collect();
            let answer = v03_rest::ListTaskPushNotificationConfigResponse {
                configs,
                next_page_token: String::new(),
            };
            Ok(Json(to_json(&answer)).into_response())
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
            Ok(push_config_answer(config))
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

#[cfg(test)]
mod tests {
    use super::*;

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
