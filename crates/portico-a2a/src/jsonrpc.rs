//! The JSON-RPC binding: a request is read into [`A2aRequest`], one variant per method (the 1.0
//! names and the 0.3 ones), each with its typed params, and handed to its operation in `ops`.
//!
//! Reading is strict where it matters and says what is wrong: a method this server does not know
//! is `-32601`; params of the wrong shape are `-32602` naming the field (`params.message.parts`);
//! nothing on a client's JSON can panic.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use portico_a2a_client::protocol::{v1, v03};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::error::A2aError;
use crate::ops;
use crate::server::{
    self, A2aState, Caller, event_in, event_stream, requested_version, sse, task_in,
};
use crate::tasks::to_json;
use crate::wire::Version;

/// One JSON-RPC request of A2A, by method.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "method", content = "params")]
pub(crate) enum A2aRequest {
    SendMessage(v1::SendMessageRequest),
    SendStreamingMessage(v1::SendMessageRequest),
    GetTask(v1::GetTaskRequest),
    ListTasks(v1::ListTasksRequest),
    CancelTask(v1::TaskIdRequest),
    SubscribeToTask(v1::TaskIdRequest),
    CreateTaskPushNotificationConfig(v1::TaskPushNotificationConfig),
    GetTaskPushNotificationConfig(v1::PushConfigRequest),
    ListTaskPushNotificationConfigs(v1::ListTaskPushNotificationConfigsRequest),
    DeleteTaskPushNotificationConfig(v1::PushConfigRequest),
    GetExtendedAgentCard(v1::GetExtendedAgentCardRequest),
    #[serde(rename = "message/send")]
    MessageSend(v03::MessageSendParams),
    #[serde(rename = "message/stream")]
    MessageStream(v03::MessageSendParams),
    #[serde(rename = "tasks/get")]
    TasksGet(v03::TaskQueryParams),
    #[serde(rename = "tasks/list")]
    TasksList(v1::ListTasksRequest),
    #[serde(rename = "tasks/cancel")]
    TasksCancel(v03::TaskIdParams),
    #[serde(rename = "tasks/resubscribe")]
    TasksResubscribe(v03::TaskIdParams),
    #[serde(rename = "tasks/pushNotificationConfig/set")]
    PushConfigSet(v03::TaskPushNotificationConfig),
    #[serde(rename = "tasks/pushNotificationConfig/get")]
    PushConfigGet(v03::PushConfigParams),
    #[serde(rename = "tasks/pushNotificationConfig/list")]
    PushConfigList(v03::PushConfigParams),
    #[serde(rename = "tasks/pushNotificationConfig/delete")]
    PushConfigDelete(v03::PushConfigParams),
    #[serde(rename = "agent/getAuthenticatedExtendedCard")]
    GetAuthenticatedExtendedCard(Option<Value>),
}

/// Every method name [`A2aRequest`] reads, with the version it belongs to (a test keeps the two
/// in step).
pub(crate) const METHODS: &[(&str, Version)] = &[
    ("SendMessage", Version::V1),
    ("SendStreamingMessage", Version::V1),
    ("GetTask", Version::V1),
    ("ListTasks", Version::V1),
    ("CancelTask", Version::V1),
    ("SubscribeToTask", Version::V1),
    ("CreateTaskPushNotificationConfig", Version::V1),
    ("GetTaskPushNotificationConfig", Version::V1),
    ("ListTaskPushNotificationConfigs", Version::V1),
    ("DeleteTaskPushNotificationConfig", Version::V1),
    ("GetExtendedAgentCard", Version::V1),
    ("message/send", Version::V03),
    ("message/stream", Version::V03),
    ("tasks/get", Version::V03),
    ("tasks/list", Version::V03),
    ("tasks/cancel", Version::V03),
    ("tasks/resubscribe", Version::V03),
    ("tasks/pushNotificationConfig/set", Version::V03),
    ("tasks/pushNotificationConfig/get", Version::V03),
    ("tasks/pushNotificationConfig/list", Version::V03),
    ("tasks/pushNotificationConfig/delete", Version::V03),
    ("agent/getAuthenticatedExtendedCard", Version::V03),
];

/// The JSON-RPC envelope, before its method is known.
#[derive(Deserialize)]
struct Envelope {
    #[serde(default)]
    jsonrpc: Option<Value>,
    #[serde(default)]
    id: Value,
    #[serde(default)]
    method: Option<Value>,
    #[serde(default)]
    params: Option<Value>,
}

/// A request read from its body: its id (for the answer), the version it is served in, and the
/// request, or the error to answer with.
pub(crate) struct Read {
    pub id: Value,
    pub request: Result<(A2aRequest, Version), A2aError>,
}

/// Reads one JSON-RPC request. `header` is the `A2A-Version` the client sent: it selects the
/// version, and a method of the other version is not found. Without it a 1.0 method name is 1.0
/// (no 0.3 client sends one) and a 0.3 name is 0.3.
pub(crate) fn read(body: &[u8], header: Option<Version>) -> Read {
    let envelope: Envelope = match serde_json::from_slice(body) {
        Ok(envelope) => envelope,
        Err(e) => {
            let error = if e.is_data() {
                A2aError::InvalidRequest(format!("a JSON-RPC 2.0 request object is expected: {e}"))
            } else {
                A2aError::Parse(e.to_string())
            };
            return Read {
                id: Value::Null,
                request: Err(error),
            };
        }
    };
    let id = envelope.id.clone();
    Read {
        id,
        request: parse(envelope, header),
    }
}

fn parse(envelope: Envelope, header: Option<Version>) -> Result<(A2aRequest, Version), A2aError> {
    let Some(Value::String(method)) = envelope.method else {
        return Err(A2aError::InvalidRequest(
            "a JSON-RPC 2.0 request object with a string `method` is expected".into(),
        ));
    };
    if envelope.jsonrpc.as_ref().and_then(Value::as_str) != Some("2.0") {
        return Err(A2aError::InvalidRequest("`jsonrpc` must be \"2.0\"".into()));
    }
    let Some(&(_, of)) = METHODS.iter().find(|(name, _)| *name == method) else {
        return Err(A2aError::MethodNotFound(format!(
            "{method} (A2A {}; the A2A-Version header selects the version)",
            header.unwrap_or(Version::V03).label()
        )));
    };
    let version = header.unwrap_or(of);
    if version != of {
        return Err(A2aError::MethodNotFound(format!(
            "{method} is an A2A {} method, and this request is A2A {} (the A2A-Version header selects the version)",
            of.label(),
            version.label()
        )));
    }
    let params = match envelope.params {
        None | Some(Value::Null) => json!({}),
        Some(params @ Value::Object(_)) => params,
        Some(other) => {
            return Err(A2aError::InvalidParams(format!(
                "`params` must be an object, not {}",
                server::json_kind(&other)
            )));
        }
    };
    let tagged = json!({"method": method, "params": params});
    serde_path_to_error::deserialize(&tagged)
        .map(|request| (request, version))
        .map_err(|e| server::invalid_params(e, &tagged, "params."))
}

pub(crate) fn rpc_result(id: &Value, result: impl serde::Serialize) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

pub(crate) fn rpc_error(id: &Value, error: &A2aError) -> Response {
    axum::Json(json!({"jsonrpc": "2.0", "id": id, "error": error.to_jsonrpc()})).into_response()
}

/// `POST {listen_path}/{agent}` (and with a trailing slash).
pub(crate) async fn handle(
    State(state): State<A2aState>,
    Path(agent): Path<String>,
    caller: Caller,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Some(error) = unsupported_content_type(&headers) {
        return rpc_error(&Value::Null, &error);
    }
    let header = match requested_version(&headers) {
        Ok(header) => header,
        Err(error) => return rpc_error(&read(&body, None).id, &error),
    };
    let Read { id, request } = read(&body, header);
    let answer = async {
        let (request, version) = request?;
        let agent = state.agent_name(&agent)?;
        dispatch(&state, &caller, &agent, request, version, &id).await
    };
    match answer.await {
        Ok(response) => response,
        Err(error) => rpc_error(&id, &error),
    }
}

/// JSON-RPC bodies are JSON: a request that says it is something else is refused before it is read
/// (`-32005`). No `Content-Type` at all is taken as JSON, as before.
fn unsupported_content_type(headers: &HeaderMap) -> Option<A2aError> {
    let value = headers.get(axum::http::header::CONTENT_TYPE)?;
    let text = value.to_str().unwrap_or("(not text)");
    let media_type = text
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    let json = media_type == "application/json" || media_type.ends_with("+json");
    (!json).then(|| A2aError::ContentTypeNotSupported(text.to_string()))
}

/// A task in `version`'s form.
async fn dispatch(
    state: &A2aState,
    caller: &Caller,
    agent: &str,
    request: A2aRequest,
    version: Version,
    id: &Value,
) -> Result<Response, A2aError> {
    use A2aRequest as R;
    let owner = caller.owner.as_str();
    let ok = |result: Value| Ok(axum::Json(rpc_result(id, result)).into_response());
    let streamed = |task: v1::Task, events| {
        let id = id.clone();
        Ok(sse(event_stream(task, events, move |event| {
            rpc_result(&id, event_in(event, version))
        })))
    };
    match request {
        R::SendMessage(request) => {
            let answer = ops::send_message(state, caller, agent, request, version).await?;
            ok(to_json(&answer))
        }
        R::MessageSend(params) => {
            let answer = ops::send_message(state, caller, agent, params.into(), version).await?;
            ok(to_json(&v03::StreamEvent::from(answer)))
        }
        R::SendStreamingMessage(request) => {
            let (task, events) =
                ops::send_streaming_message(state, caller, agent, request, version).await?;
            streamed(task, events)
        }
        R::MessageStream(params) => {
            let (task, events) =
                ops::send_streaming_message(state, caller, agent, params.into(), version).await?;
            streamed(task, events)
        }
        R::GetTask(request) => ok(task_in(
            ops::get_task(state, owner, &request).await?,
            version,
        )),
        R::TasksGet(params) => {
            let request = v1::GetTaskRequest {
                tenant: None,
                id: params.id,
                history_length: params.history_length,
            };
            ok(task_in(
                ops::get_task(state, owner, &request).await?,
                version,
            ))
        }
        R::ListTasks(request) | R::TasksList(request) => {
            let page = ops::list_tasks(state, owner, &request).await?;
            match version {
                Version::V1 => ok(to_json(&page)),
                Version::V03 => ok(to_json(&v03::ListTasksResponse::from(page))),
            }
        }
        R::CancelTask(v1::TaskIdRequest { id: task_id, .. })
        | R::TasksCancel(v03::TaskIdParams { id: task_id, .. }) => ok(task_in(
            ops::cancel_task(state, owner, &task_id).await?,
            version,
        )),
        R::SubscribeToTask(v1::TaskIdRequest { id: task_id, .. })
        | R::TasksResubscribe(v03::TaskIdParams { id: task_id, .. }) => {
            let (task, events) = ops::subscribe_to_task(
                state,
                owner,
                &task_id,
                "get it with GetTask instead of subscribing",
            )
            .await?;
            streamed(task, events)
        }
        R::CreateTaskPushNotificationConfig(config) => {
            let task_id = config.task_id.clone().unwrap_or_default();
            let stored = ops::create_push_config(state, owner, &task_id, config, version).await?;
            ok(stored.view(version))
        }
        R::PushConfigSet(config) => {
            let task_id = config.task_id.clone();
            let stored =
                ops::create_push_config(state, owner, &task_id, config.into(), version).await?;
            ok(stored.view(version))
        }
        R::GetTaskPushNotificationConfig(request) => {
            let stored =
                ops::get_push_config(state, owner, &request.task_id, Some(&request.id)).await?;
            ok(stored.view(version))
        }
        R::PushConfigGet(params) => {
            let wanted = params.push_notification_config_id.as_deref();
            let stored = ops::get_push_config(state, owner, &params.id, wanted).await?;
            ok(stored.view(version))
        }
        R::ListTaskPushNotificationConfigs(v1::ListTaskPushNotificationConfigsRequest {
            task_id,
            ..
        })
        | R::PushConfigList(v03::PushConfigParams { id: task_id, .. }) => {
            let stored = ops::list_push_configs(state, owner, &task_id).await?;
            let configs = stored.into_iter().map(|c| c.config);
            match version {
                Version::V1 => ok(to_json(&v1::ListTaskPushNotificationConfigsResponse {
                    configs: configs.collect(),
                    next_page_token: String::new(),
                })),
                Version::V03 => ok(to_json(
                    &configs
                        .map(v03::TaskPushNotificationConfig::from)
                        .collect::<Vec<_>>(),
                )),
            }
        }
        R::DeleteTaskPushNotificationConfig(request) => {
            ops::delete_push_config(state, owner, &request.task_id, &request.id).await?;
            ok(json!({}))
        }
        R::PushConfigDelete(params) => {
            let config_id = params.push_notification_config_id.ok_or_else(|| {
                A2aError::InvalidParams("`pushNotificationConfigId` is required".into())
            })?;
            ops::delete_push_config(state, owner, &params.id, &config_id).await?;
            ok(Value::Null)
        }
        R::GetExtendedAgentCard(_) | R::GetAuthenticatedExtendedCard(_) => {
            Err(ops::get_extended_agent_card())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(method: &str, params: Value) -> Result<(A2aRequest, Version), A2aError> {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        read(body.to_string().as_bytes(), None).request
    }

    fn params_for(method: &str) -> Value {
        let message = json!({"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}]});
        let message03 = json!({"kind": "message", "messageId": "m", "role": "user", "parts": [{"kind": "text", "text": "hi"}]});
        match method {
            "SendMessage" | "SendStreamingMessage" => json!({"message": message}),
            "message/send" | "message/stream" => json!({"message": message03}),
            "CreateTaskPushNotificationConfig" => json!({"taskId": "t", "url": "https://hook"}),
            "GetTaskPushNotificationConfig" | "DeleteTaskPushNotificationConfig" => {
                json!({"taskId": "t", "id": "c"})
            }
            "ListTaskPushNotificationConfigs" => json!({"taskId": "t"}),
            "tasks/pushNotificationConfig/set" => {
                json!({"taskId": "t", "pushNotificationConfig": {"url": "https://hook"}})
            }
            "ListTasks"
            | "tasks/list"
            | "GetExtendedAgentCard"
            | "agent/getAuthenticatedExtendedCard" => json!({}),
            _ => json!({"id": "t"}),
        }
    }

    #[test]
    fn every_method_parses_into_its_own_variant_and_version() {
        let mut variants = std::collections::HashSet::new();
        for (method, version) in METHODS {
            let (parsed, served) =
                request(method, params_for(method)).unwrap_or_else(|e| panic!("{method}: {e}"));
            assert_eq!(served, *version, "{method}");
            variants.insert(std::mem::discriminant(&parsed));
        }
        assert_eq!(variants.len(), METHODS.len(), "one variant per method");
    }

    #[test]
    fn the_rate_limiters_method_lists_are_the_sends_and_subscriptions_here() {
        let sends: Vec<&str> = METHODS
            .iter()
            .map(|(name, _)| *name)
            .filter(|name| {
                matches!(
                    request(name, params_for(name)),
                    Ok((
                        A2aRequest::SendMessage(_)
                            | A2aRequest::SendStreamingMessage(_)
                            | A2aRequest::MessageSend(_)
                            | A2aRequest::MessageStream(_),
                        _
                    ))
                )
            })
            .collect();
        let priced: Vec<&str> = crate::pricing::AGENT_METHODS
            .iter()
            .copied()
            .filter(|m| *m != "tasks/send")
            .collect();
        assert_eq!(sends, priced);
        let subscriptions: Vec<&str> = METHODS
            .iter()
            .map(|(name, _)| *name)
            .filter(|name| {
                matches!(
                    request(name, params_for(name)),
                    Ok((
                        A2aRequest::SubscribeToTask(_) | A2aRequest::TasksResubscribe(_),
                        _
                    ))
                )
            })
            .collect();
        assert_eq!(subscriptions, crate::pricing::STREAM_METHODS);
    }

    #[test]
    fn an_unknown_method_is_not_found() {
        let error = request("tasks/frobnicate", json!({})).unwrap_err();
        assert_eq!(error.code(), -32601, "{error}");
        // A method of the other version than the header asks for is not found either.
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": params_for("message/send")});
        let error = read(body.to_string().as_bytes(), Some(Version::V1))
            .request
            .unwrap_err();
        assert_eq!(error.code(), -32601, "{error}");
    }

    #[test]
    fn params_of_the_wrong_shape_are_invalid_naming_the_field() {
        let cases = [
            ("GetTask", json!({"id": 7}), "`id`"),
            (
                "GetTask",
                json!({"id": "t", "historyLength": "many"}),
                "`historyLength`",
            ),
            ("SendMessage", json!({"message": "hi"}), "`message`"),
            (
                "SendMessage",
                json!({"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"bogus": 1}]}}),
                "`message.parts[0]`",
            ),
            (
                "CreateTaskPushNotificationConfig",
                json!({"taskId": "t"}),
                "url",
            ),
            (
                "DeleteTaskPushNotificationConfig",
                json!({"taskId": "t"}),
                "id",
            ),
            ("ListTasks", json!({"pageSize": true}), "`pageSize`"),
            ("tasks/get", json!({}), "id"),
        ];
        for (method, params, field) in cases {
            let error = request(method, params.clone()).unwrap_err();
            assert_eq!(error.code(), -32602, "{method} {params}: {error}");
            assert!(
                error.to_string().contains(field),
                "{method} {params}: {error}"
            );
        }
        let error = request("GetTask", json!(["t"])).unwrap_err();
        assert_eq!(
            error.to_string(),
            "invalid parameters: `params` must be an object, not an array"
        );
    }

    #[test]
    fn the_tck_shapes_of_push_config_requests_parse() {
        // Proto field names, as the TCK sends them.
        let (parsed, _) = request(
            "CreateTaskPushNotificationConfig",
            json!({"task_id": "t", "url": "https://hook", "token": "tok"}),
        )
        .unwrap();
        let A2aRequest::CreateTaskPushNotificationConfig(config) = parsed else {
            panic!("{parsed:?}");
        };
        assert_eq!(
            (config.task_id.as_deref(), config.url.as_str()),
            (Some("t"), "https://hook")
        );
        let (parsed, _) = request(
            "DeleteTaskPushNotificationConfig",
            json!({"task_id": "t", "id": "c"}),
        )
        .unwrap();
        assert_eq!(
            parsed,
            A2aRequest::DeleteTaskPushNotificationConfig(v1::PushConfigRequest {
                tenant: None,
                task_id: "t".into(),
                id: "c".into()
            })
        );
    }

    #[test]
    fn envelopes_that_are_not_requests_are_refused() {
        assert_eq!(read(b"{", None).request.unwrap_err().code(), -32700);
        assert_eq!(read(b"[1]", None).request.unwrap_err().code(), -32600);
        let no_version = json!({"id": 1, "method": "GetTask", "params": {"id": "t"}});
        let error = read(no_version.to_string().as_bytes(), None)
            .request
            .unwrap_err();
        assert_eq!(error.code(), -32600);
        let read = read(br#"{"jsonrpc": "2.0", "id": "x", "method": 5}"#, None);
        assert_eq!(
            (read.id, read.request.unwrap_err().code()),
            (json!("x"), -32600)
        );
    }
}
