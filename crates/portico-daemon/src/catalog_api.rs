//! The API routes the CLI reads a running daemon through, so `portico tools|servers|conversations`
//! show what the daemon's IDEs see: `GET /api/tools` (the catalog the doors serve, each tool with
//! its source), `GET /api/servers` (each upstream's status, as `portico servers --json` prints it)
//! and `GET /api/conversations` (the stored conversations, a bounded page at a time). Behind the
//! same door checks and token as every other `/api` route; a client limited to a scope sees only
//! its tools and its own conversations.

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Extension, Json, Router};
use portico_engine::Engine;
use portico_mcp_server::Backend;
use portico_pipeline::Principal;
use portico_store::{ConversationCursor, ConversationSummary, MAX_CONVERSATION_PAGE};
use serde::Deserialize;
use serde_json::{Value, json};

/// A page of `GET /api/conversations` unless `limit` says otherwise.
const DEFAULT_CONVERSATION_PAGE: usize = 50;
/// How much of a first message a listing shows as its title.
const TITLE_CHARS: usize = 80;

#[derive(Clone)]
struct CatalogState {
    engine: Engine,
    /// `[expose] tools`: with it off the doors serve no tools, and `/api/tools` says so.
    tools_exposed: bool,
}

pub(crate) fn routes(engine: &Engine, tools_exposed: bool) -> Router {
    Router::new()
        .route("/api/tools", get(tools))
        .route("/api/servers", get(servers))
        .route("/api/conversations", get(conversations))
        .with_state(CatalogState {
            engine: engine.clone(),
            tools_exposed,
        })
}

fn caller(client: Option<Extension<Principal>>) -> Principal {
    match client {
        Some(Extension(principal)) => principal,
        None => Principal::client("api"),
    }
}

fn api_error(status: StatusCode, message: impl Into<String>) -> Response {
    (status, Json(json!({"error": message.into()}))).into_response()
}

/// The tools `principal` is served by the doors, each definition as `tools/list` has it plus where
/// it comes from: `source` (`built-in`, `agent`, `remote agent` or `server`) and, for an upstream's
/// tool, `server` (its configured name): `{"tools": [...]}`. The standalone `portico tools` prints
/// the same from its own engine. With `[expose] tools = false` (`exposed` false) the doors serve
/// none: `{"tools": [], "exposed": false}`.
pub async fn tool_catalog(engine: &Engine, principal: &Principal, exposed: bool) -> Value {
    if !exposed {
        return json!({"tools": [], "exposed": false});
    }
    // The in-process door's own listing, so the names, schemas and policy marks are the served ones.
    let listing = Backend::Local(engine.clone())
        .listing(principal)
        .await
        .map(|listing| listing.tools)
        .unwrap_or_default();
    let tools: Vec<Value> = listing
        .into_iter()
        .map(|mut tool| {
            let name = tool
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            let origin = engine.tool_origin(&name);
            tool.insert(
                "source".into(),
                json!(origin.as_ref().map_or("built-in", |o| o.label())),
            );
            match origin.as_ref().and_then(|o| o.server()) {
                Some(server) => tool.insert("server".into(), json!(server)),
                None => tool.remove("server"),
            };
            Value::Object(tool)
        })
        .collect();
    json!({"tools": tools, "exposed": true})
}

async fn tools(
    State(state): State<CatalogState>,
    client: Option<Extension<Principal>>,
) -> Json<Value> {
    Json(tool_catalog(&state.engine, &caller(client), state.tools_exposed).await)
}

async fn servers(State(state): State<CatalogState>) -> Json<Value> {
    Json(json!({"servers": state.engine.upstreams().servers()}))
}

#[derive(Deserialize)]
struct ConversationParams {
    agent: Option<String>,
    limit: Option<usize>,
    /// A previous page's `next_cursor`.
    cursor: Option<String>,
}

/// `{"conversations": [{id, agent, title, created_at, updated_at, message_count}], "next_cursor"}`,
/// most recently active first; `next_cursor` is null on the last page. A page may hold fewer than
/// `limit` when some of the store's are another client's.
async fn conversations(
    State(CatalogState { engine, .. }): State<CatalogState>,
    client: Option<Extension<Principal>>,
    Query(params): Query<ConversationParams>,
) -> Response {
    let limit = params.limit.unwrap_or(DEFAULT_CONVERSATION_PAGE);
    if limit == 0 || limit > MAX_CONVERSATION_PAGE {
        return api_error(
            StatusCode::BAD_REQUEST,
            format!("`limit` must be 1 to {MAX_CONVERSATION_PAGE}, got {limit}"),
        );
    }
    let after = match params.cursor.as_deref().map(ConversationCursor::decode) {
        None => None,
        Some(Some(cursor)) => Some(cursor),
        Some(None) => {
            return api_error(
                StatusCode::BAD_REQUEST,
                "`cursor` is not one this API gave out; pass a page's `next_cursor` as it is",
            );
        }
    };
    let caller = caller(client);
    let agent = params.agent;
    let page = engine
        .store()
        .run("listing conversations", move |store| {
            store.conversation_page(agent.as_deref(), after.as_ref(), limit)
        })
        .await;
    let page = match page {
        Ok(page) => page,
        Err(error) => return api_error(StatusCode::INTERNAL_SERVER_ERROR, error.to_string()),
    };
    Json(conversation_list(page, limit, &caller)).into_response()
}

/// A page of the store's conversations as `GET /api/conversations` answers it, with those
/// `caller` may not read left out; `limit` is what was asked, so a full page gets a `next_cursor`.
/// The standalone `portico conversations` prints the same.
pub fn conversation_list(
    page: Vec<ConversationSummary>,
    limit: usize,
    caller: &Principal,
) -> Value {
    let next_cursor = if page.len() == limit {
        page.last().map(|last| {
            ConversationCursor {
                updated_at_ms: last.conversation.updated_at_ms,
                id: last.conversation.id.clone(),
            }
            .encode()
        })
    } else {
        None
    };
    let label = caller.label();
    let listed: Vec<Value> = page
        .into_iter()
        // As `GET /api/conversations/{id}` answers: another client's, or one with an agent outside
        // the caller's scope, is not there for it.
        .filter(|s| {
            s.conversation.is_for(&label)
                && caller.may_use(&portico_config::agent_tool_name(&s.conversation.agent))
        })
        .map(|s| {
            let c = s.conversation;
            json!({
                "id": c.id,
                "agent": c.agent,
                "title": s.first_message.as_ref().map(title),
                "created_at": portico_core::time::rfc3339(c.created_at_ms),
                "updated_at": portico_core::time::rfc3339(c.updated_at_ms),
                "message_count": c.message_count,
            })
        })
        .collect();
    json!({"conversations": listed, "next_cursor": next_cursor})
}

/// A conversation's title: its first message's text on one line, cut to [`TITLE_CHARS`].
fn title(content: &Value) -> String {
    let text = match content {
        Value::String(text) => text.as_str(),
        other => other.get("text").and_then(Value::as_str).unwrap_or(""),
    };
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match line.char_indices().nth(TITLE_CHARS) {
        Some((cut, _)) => format!("{}…", &line[..cut]),
        None => line,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_title_is_the_first_message_on_one_line_cut_short() {
        assert_eq!(
            title(&json!({"role": "user", "text": "hello\n  there"})),
            "hello there"
        );
        assert_eq!(title(&json!("plain")), "plain");
        assert_eq!(title(&json!({"other": 1})), "");
        let long = "é".repeat(100);
        assert_eq!(
            title(&json!({"text": long})),
            format!("{}…", "é".repeat(80))
        );
    }
}
