//! The dashboard's routes to the upstream resources and prompts the doors serve to MCP clients:
//! `GET /api/resources`, `GET /api/resource-templates`, `POST /api/resources/read` (`{"uri"}`),
//! `GET /api/prompts` and `POST /api/prompts/{name}/get` (`{"arguments": {NAME: "text"}}`). They
//! list and call through the in-process door's backend, as `resources/list`, `resources/read`,
//! `prompts/list` and `prompts/get` on `/mcp` do (the same names, the same `portico://` URIs, the
//! same `[expose] resources|prompts` switches), behind the door's checks like every `/api` route.
//! A read or get answers `{"result": <the MCP result as the upstream sent it>, "duration_ms"}`, or an
//! error in words with a `kind` (`not_found`, `invalid_arguments`, `unavailable`, `failed`,
//! `too_large` past `[server] max_response_bytes`).

use std::time::Instant;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use portico_core::{JsonObject, ServerState};
use portico_engine::{Engine, UpstreamsError};
use portico_mcp_server::{Backend, BackendError, asks_for_input};
use portico_pipeline::Principal;
use serde_json::{Value, json};

use crate::ui_login::DASHBOARD_CLIENT;

/// JSON-RPC's "invalid params": an upstream's answer to a missing or wrong argument.
const INVALID_PARAMS: i32 = -32602;
/// MCP's "resource not found".
const RESOURCE_NOT_FOUND: i32 = -32002;

#[derive(Clone)]
struct ContentState {
    engine: Engine,
    /// `[expose] resources`: with it off the doors serve no resources.
    resources: bool,
    /// `[expose] prompts`: with it off the doors serve no prompts.
    prompts: bool,
    /// `[server] max_response_bytes`: the MCP doors' bound on one answer, kept here too.
    max_response_bytes: usize,
}

pub(crate) fn routes(engine: &Engine, config: &portico_config::Config) -> Router {
    Router::new()
        .route("/api/resources", get(resources))
        .route("/api/resource-templates", get(resource_templates))
        .route("/api/resources/read", post(read_resource))
        .route("/api/prompts", get(prompts))
        .route("/api/prompts/{name}/get", post(get_prompt))
        .with_state(ContentState {
            engine: engine.clone(),
            resources: config.expose.resources,
            prompts: config.expose.prompts,
            max_response_bytes: config.server.max_response_bytes,
        })
}

fn principal(client: Option<Extension<Principal>>) -> Principal {
    match client {
        Some(Extension(principal)) => principal,
        None => Principal::client(DASHBOARD_CLIENT),
    }
}

fn refused(status: StatusCode, kind: &str, message: impl Into<String>) -> Response {
    (status, Json(json!({"error": message.into(), "kind": kind}))).into_response()
}

fn hidden(what: &str) -> Response {
    refused(
        StatusCode::NOT_FOUND,
        "not_found",
        format!(
            "this Portico does not expose {what} to MCP clients ([expose] {what} = false in its config); set it to true to see them here"
        ),
    )
}

/// Which of the listings a route wants.
#[derive(Clone, Copy)]
enum Listed {
    Resources,
    Templates,
    Prompts,
}

/// A listing as the doors serve it, each item with the configured `server` it comes from:
/// `{KEY: [...], "exposed": bool}`.
async fn listed(state: &ContentState, principal: &Principal, which: Listed) -> Response {
    let (key, exposed) = match which {
        Listed::Resources => ("resources", state.resources),
        Listed::Templates => ("resourceTemplates", state.resources),
        Listed::Prompts => ("prompts", state.prompts),
    };
    if !exposed {
        return Json(json!({key: [], "exposed": false})).into_response();
    }
    let listing = match Backend::Local(state.engine.clone())
        .listing(principal)
        .await
    {
        Ok(listing) => listing,
        Err(error) => return refused(StatusCode::BAD_GATEWAY, "failed", error.to_string()),
    };
    let listing = listing.with_servers(&state.engine.catalog());
    let items = match which {
        Listed::Resources => listing.resources,
        Listed::Templates => listing.resource_templates,
        Listed::Prompts => listing.prompts,
    };
    Json(json!({key: items, "exposed": true})).into_response()
}

async fn resources(
    State(state): State<ContentState>,
    client: Option<Extension<Principal>>,
) -> Response {
    listed(&state, &principal(client), Listed::Resources).await
}

async fn resource_templates(
    State(state): State<ContentState>,
    client: Option<Extension<Principal>>,
) -> Response {
    listed(&state, &principal(client), Listed::Templates).await
}

async fn prompts(
    State(state): State<ContentState>,
    client: Option<Extension<Principal>>,
) -> Response {
    listed(&state, &principal(client), Listed::Prompts).await
}

/// What a read or get asked for, for its failure.
#[derive(Clone, Copy, PartialEq)]
enum Asked {
    Resource,
    Prompt,
}

/// A read or get that got no result: the status, `kind` and the backend's words.
fn failure(error: BackendError, asked: Asked) -> Response {
    let message = error.to_string();
    let (status, kind) = match &error {
        BackendError::Upstreams(
            UpstreamsError::UnknownResource(_) | UpstreamsError::UnknownPrompt(_),
        ) => (StatusCode::NOT_FOUND, "not_found"),
        BackendError::Upstreams(UpstreamsError::Remote { code, .. }) => match *code {
            // Servers of the 2025 protocols answer an unknown URI as invalid params.
            INVALID_PARAMS if asked == Asked::Resource => (StatusCode::NOT_FOUND, "not_found"),
            INVALID_PARAMS => (StatusCode::BAD_REQUEST, "invalid_arguments"),
            RESOURCE_NOT_FOUND => (StatusCode::NOT_FOUND, "not_found"),
            _ => (StatusCode::BAD_GATEWAY, "failed"),
        },
        // The server is down, disabled, restarting, or the request timed out on the way.
        BackendError::Upstreams(UpstreamsError::Failed(_)) => {
            (StatusCode::SERVICE_UNAVAILABLE, "unavailable")
        }
        _ => (StatusCode::BAD_GATEWAY, "failed"),
    };
    refused(status, kind, message)
}

/// The failure of a read or get of `asked`; when the catalog lacks it because the server it comes
/// from is down (a server's items leave the catalog while it is not ready), that is said instead.
fn gone_or(engine: &Engine, error: BackendError, asked: Asked, wanted: &str) -> Response {
    let unknown = matches!(
        error,
        BackendError::Upstreams(
            UpstreamsError::UnknownResource(_) | UpstreamsError::UnknownPrompt(_)
        )
    );
    if unknown
        && let Some(server) =
            engine.upstreams().servers().into_iter().find(|server| {
                server.state != ServerState::Ready && owns(&server.name, asked, wanted)
            })
    {
        let what = match asked {
            Asked::Resource => "resources",
            Asked::Prompt => "prompts",
        };
        let cause = server
            .last_error
            .as_deref()
            .map(|e| format!(" (last error: {e})"))
            .unwrap_or_default();
        return refused(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            format!(
                "server `{}` is {}{cause}, so its {what} are not served now; try again once it is ready (see the Servers page or `portico servers`)",
                server.name, server.state
            ),
        );
    }
    failure(error, asked)
}

/// Whether `wanted` would be `server`'s: a resource under `portico://SERVER/`, a prompt named
/// `mcp_SERVER_...` (the server's name as exposed names spell it).
fn owns(server: &str, asked: Asked, wanted: &str) -> bool {
    match asked {
        Asked::Resource => wanted
            .strip_prefix("portico://")
            .and_then(|rest| rest.split_once('/'))
            .is_some_and(|(name, _)| name == server),
        Asked::Prompt => {
            let spelled: String = server
                .chars()
                .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
                .collect();
            [server, spelled.as_str()]
                .iter()
                .any(|name| wanted.starts_with(&format!("mcp_{name}_")))
        }
    }
}

/// The MCP result of `what`, and how long it took; refused past the MCP doors' response bound.
fn answered(state: &ContentState, what: &str, result: JsonObject, started: Instant) -> Response {
    let size = portico_core::json_size(&result);
    if size > state.max_response_bytes {
        return refused(
            StatusCode::BAD_GATEWAY,
            "too_large",
            format!(
                "{what} is {size} bytes, over Portico's response limit of {} bytes; raise [server] max_response_bytes to read it",
                state.max_response_bytes
            ),
        );
    }
    let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    Json(json!({"result": result, "duration_ms": duration_ms})).into_response()
}

async fn read_resource(State(state): State<ContentState>, body: axum::body::Bytes) -> Response {
    let started = Instant::now();
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct ReadBody {
        uri: String,
    }
    let uri = match serde_json::from_slice::<ReadBody>(&body) {
        Ok(ReadBody { uri }) if !uri.trim().is_empty() => uri,
        Ok(_) => {
            return refused(
                StatusCode::BAD_REQUEST,
                "invalid_arguments",
                "`uri` is empty; give a resource's URI as GET /api/resources lists it (portico://SERVER/URI)",
            );
        }
        Err(error) => {
            return refused(
                StatusCode::BAD_REQUEST,
                "invalid_arguments",
                format!(
                    "the body must be a JSON object like {{\"uri\": \"portico://SERVER/URI\"}}: {error}"
                ),
            );
        }
    };
    if !state.resources {
        return hidden("resources");
    }
    match Backend::Local(state.engine.clone())
        .read_resource(&uri)
        .await
    {
        Ok(result) => answered(&state, &format!("resource `{uri}`"), result, started),
        Err(error) => gone_or(&state.engine, error, Asked::Resource, &uri),
    }
}

async fn get_prompt(
    State(state): State<ContentState>,
    Path(name): Path<String>,
    body: axum::body::Bytes,
) -> Response {
    let started = Instant::now();
    let arguments = match prompt_arguments(&body) {
        Ok(arguments) => arguments,
        Err(message) => return refused(StatusCode::BAD_REQUEST, "invalid_arguments", message),
    };
    if !state.prompts {
        return hidden("prompts");
    }
    // A required argument left out is said here, in the prompt's own words, rather than as
    // whatever validation error the upstream words it as.
    if let Some(prompt) = state.engine.catalog().prompt(&name) {
        let missing = missing_arguments(&prompt.definition, arguments.as_ref());
        if !missing.is_empty() {
            return refused(
                StatusCode::BAD_REQUEST,
                "invalid_arguments",
                format!(
                    "prompt `{name}` needs the argument{} {}",
                    if missing.len() == 1 { "" } else { "s" },
                    missing
                        .iter()
                        .map(|m| format!("`{m}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            );
        }
    }
    let result = match Backend::Local(state.engine.clone())
        .get_prompt(&name, arguments, JsonObject::new())
        .await
    {
        Ok(result) => result,
        Err(error) => return gone_or(&state.engine, error, Asked::Prompt, &name),
    };
    if asks_for_input(&result) {
        return refused(
            StatusCode::BAD_GATEWAY,
            "failed",
            format!(
                "prompt `{name}` asks its client questions before it answers, which the dashboard cannot answer; get it from an MCP client"
            ),
        );
    }
    answered(&state, &format!("prompt `{name}`"), result, started)
}

/// The names of the required arguments of a prompt `definition` that `given` lacks or leaves empty.
fn missing_arguments(definition: &JsonObject, given: Option<&JsonObject>) -> Vec<String> {
    let declared = definition
        .get("arguments")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    declared
        .iter()
        .filter(|arg| arg.get("required").and_then(Value::as_bool) == Some(true))
        .filter_map(|arg| arg.get("name").and_then(Value::as_str))
        .filter(|name| {
            given
                .and_then(|g| g.get(*name))
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
        })
        .map(str::to_string)
        .collect()
}

/// The `arguments` of a prompt body (`{"arguments": {NAME: "text"}}`; an empty body or `null` is
/// none), or why the body is not one: MCP prompt arguments are strings.
fn prompt_arguments(body: &[u8]) -> Result<Option<JsonObject>, String> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct GetBody {
        #[serde(default)]
        arguments: Value,
    }
    let body: GetBody = serde_json::from_slice(body).map_err(|error| {
        format!(
            "the body must be a JSON object like {{\"arguments\": {{\"NAME\": \"text\"}}}}: {error}"
        )
    })?;
    match body.arguments {
        Value::Null => Ok(None),
        Value::Object(arguments) => {
            if let Some((name, _)) = arguments.iter().find(|(_, value)| !value.is_string()) {
                return Err(format!(
                    "prompt argument `{name}` must be a string (MCP prompt arguments are text)"
                ));
            }
            Ok(Some(arguments))
        }
        _ => {
            Err("`arguments` must be a JSON object of the prompt's arguments, each a string".into())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(value: Value) -> JsonObject {
        value.as_object().cloned().unwrap()
    }

    #[test]
    fn prompt_arguments_are_an_object_of_strings_or_nothing() {
        assert_eq!(prompt_arguments(b" "), Ok(None));
        assert_eq!(prompt_arguments(br#"{"arguments": null}"#), Ok(None));
        assert_eq!(
            prompt_arguments(br#"{"arguments": {"city": "Lyon"}}"#),
            Ok(Some(object(json!({"city": "Lyon"}))))
        );
        assert_eq!(
            prompt_arguments(br#"{"arguments": {"n": 3}}"#).unwrap_err(),
            "prompt argument `n` must be a string (MCP prompt arguments are text)"
        );
        assert!(
            prompt_arguments(br#"{"arguments": ["x"]}"#)
                .unwrap_err()
                .starts_with("`arguments` must be a JSON object")
        );
        assert!(
            prompt_arguments(br#"{"args": {}}"#)
                .unwrap_err()
                .starts_with("the body must be a JSON object")
        );
    }

    #[test]
    fn an_item_belongs_to_the_server_its_exposed_name_says() {
        let uri = "portico://files/file:///a.txt";
        assert!(owns("files", Asked::Resource, uri));
        assert!(!owns("file", Asked::Resource, uri));
        assert!(!owns("files", Asked::Resource, "file:///a.txt"));
        assert!(owns("my-docs", Asked::Prompt, "mcp_my_docs_summarize"));
        assert!(owns("docs", Asked::Prompt, "mcp_docs_summarize"));
        assert!(!owns("doc", Asked::Prompt, "mcp_docs_summarize"));
    }

    #[test]
    fn missing_required_arguments_are_named() {
        let definition = object(json!({"name": "p", "arguments": [
            {"name": "city", "required": true},
            {"name": "state", "required": false},
            {"name": "zip"},
        ]}));
        assert_eq!(missing_arguments(&definition, None), ["city"]);
        assert_eq!(
            missing_arguments(&definition, Some(&object(json!({"city": ""})))),
            ["city"]
        );
        assert!(missing_arguments(&definition, Some(&object(json!({"city": "Lyon"})))).is_empty());
        assert!(missing_arguments(&object(json!({"name": "q"})), None).is_empty());
    }

    #[test]
    fn failures_have_their_kind_and_status() {
        let cases = [
            (
                UpstreamsError::UnknownResource("no resource `x`".into()),
                404,
                "not_found",
            ),
            (
                UpstreamsError::UnknownPrompt("no prompt named `p`".into()),
                404,
                "not_found",
            ),
            (
                UpstreamsError::Remote {
                    code: INVALID_PARAMS,
                    message: "bad".into(),
                    data: None,
                },
                400,
                "invalid_arguments",
            ),
            (
                UpstreamsError::Failed("server `s` is disabled".into()),
                503,
                "unavailable",
            ),
        ];
        for (error, status, kind) in cases {
            let message = error.to_string();
            let response = failure(BackendError::Upstreams(error), Asked::Prompt);
            assert_eq!(response.status().as_u16(), status, "{message}");
            let body =
                futures::executor::block_on(axum::body::to_bytes(response.into_body(), usize::MAX))
                    .unwrap();
            let body: Value = serde_json::from_slice(&body).unwrap();
            assert_eq!(body["kind"], kind);
            assert_eq!(body["error"], message);
        }
        // An upstream of the 2025 protocols says "invalid params" for a URI it does not have.
        let unknown_uri = UpstreamsError::Remote {
            code: INVALID_PARAMS,
            message: "Resource demo://x not found".into(),
            data: None,
        };
        let response = failure(BackendError::Upstreams(unknown_uri), Asked::Resource);
        assert_eq!(response.status().as_u16(), 404);
    }
}
