//! `/api/approvals`: listing, showing and answering the approval requests of calls a policy holds
//! (the contract the web page and `portico approvals` are built on). Behind the door's usual
//! checks; whoever answers is the principal the request authenticated as.
//!
//! A client with a `[[server.clients]]` `tools` scope sees only the requests of its own calls and
//! cannot answer any: approving is for the door's unscoped clients (`[server] token`, unscoped
//! `[[server.clients]]`, or everyone on a loopback door without tokens), so a narrowly trusted
//! client cannot approve what a policy holds, its own calls included. (Its person can still answer
//! its own call in the IDE when `approval_via` lets Portico ask the client.)

use axum::Extension;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use portico_engine::Engine;
use portico_pipeline::{
    ApprovalAnswer, ApprovalChannel, ApprovalError, ApprovalRecord, ApprovalStatus, Approvals,
    Principal, approval_path,
};
use serde::Deserialize;
use serde_json::{Value, json};

/// Requests a listing shows unless asked for fewer, and at most.
const DEFAULT_LIST_LIMIT: usize = 100;
/// Decisions `GET /api/approvals/decisions` shows unless asked otherwise.
const DEFAULT_DECISIONS_LIMIT: usize = 20;
const MAX_LIST_LIMIT: usize = 1000;

/// Longer than any id Portico makes (`apr_` and 32 hex digits): answered 404 without a lookup.
const MAX_ID_CHARS: usize = 64;

#[derive(Clone)]
struct ApprovalsState {
    approvals: Approvals,
}

/// Who is asking: the client the door's token check identified, else (a loopback door without
/// tokens, where every client is the same anonymous identity) `client:http`.
struct Asker(Option<Principal>);

impl Asker {
    fn of(client: Option<Extension<Principal>>) -> Self {
        Asker(client.map(|Extension(principal)| principal))
    }

    fn label(&self) -> String {
        match &self.0 {
            Some(principal) => principal.label(),
            None => "client:http".to_string(),
        }
    }

    /// Whether a `tools` scope limits it to its own requests, which it may see but not answer.
    fn scoped(&self) -> bool {
        self.0
            .as_ref()
            .is_some_and(|principal| principal.client_scope().is_some())
    }

    /// A scoped client sees its own calls' requests, and those of agents running for it.
    fn may_see(&self, record: &ApprovalRecord) -> bool {
        let label = self.label();
        !self.scoped()
            || record.binding.principal == label
            || record.binding.on_behalf_of.as_deref() == Some(label.as_str())
    }
}

pub(crate) fn routes(engine: &Engine) -> Router {
    let state = ApprovalsState {
        approvals: engine.approvals().clone(),
    };
    Router::new()
        .route("/api/approvals", get(list))
        .route("/api/approvals/decisions", get(decisions))
        .route("/api/approvals/{id}", get(show))
        .route("/api/approvals/{id}/approve", post(approve))
        .route("/api/approvals/{id}/deny", post(deny))
        .with_state(state)
}

fn api_error(status: StatusCode, message: impl Into<String>) -> Response {
    (status, Json(json!({"error": message.into()}))).into_response()
}

/// A request as the API shows it (camelCase, RFC 3339 times, the arguments as JSON).
pub(crate) fn view(record: &ApprovalRecord) -> Value {
    let time = portico_core::time::rfc3339;
    // The stored policy id carries a digest of the entry after `@`; people read which entry.
    let policy = record
        .binding
        .policy
        .split_once('@')
        .map_or(record.binding.policy.as_str(), |(label, _)| label);
    let arguments = serde_json::from_str::<Value>(&record.arguments).unwrap_or(Value::Null);
    let mut view = json!({
        "id": record.id,
        "kind": record.kind.as_str(),
        "status": record.status.as_str(),
        "tool": record.binding.tool,
        "principal": record.binding.principal,
        "arguments": arguments,
        // What people read: exact numbers and visible escapes, which `arguments` cannot promise once
        // a browser's JSON.parse has it.
        "argumentsText": portico_pipeline::arguments_text(&arguments),
        "reason": record.reason,
        "policy": policy,
        "path": approval_path(&record.id),
        "createdAt": time(record.created_at_ms),
        "expiresAt": time(record.expires_at_ms),
    });
    let fields = [
        ("onBehalfOf", record.binding.on_behalf_of.clone()),
        ("decidedAt", record.decided_at_ms.map(time)),
        ("decidedBy", record.decided_by.clone()),
        ("decidedVia", record.decided_via.clone()),
        ("denyReason", record.deny_reason.clone()),
        ("consumedAt", record.consumed_at_ms.map(time)),
    ];
    for (key, value) in fields {
        if let Some(value) = value {
            view[key] = Value::String(value);
        }
    }
    if record.kind == portico_pipeline::ApprovalKind::Definition {
        definition_view(record, &mut view);
    }
    view
}

/// What a `definition` request adds (`[policy] pin_tools`): the pinned definition (`previous`), the
/// one the upstream offers now (`definition`), and `diff`, each changed field with its value
/// `before` and `after` (a side absent where the field was).
fn definition_view(record: &ApprovalRecord, view: &mut Value) {
    let parse = |text: Option<&str>| {
        text.and_then(|text| serde_json::from_str::<Value>(text).ok())
            .and_then(|value| match value {
                Value::Object(object) => Some(object),
                _ => None,
            })
            .unwrap_or_default()
    };
    let previous = parse(record.previous_definition.as_deref());
    let definition = parse(record.new_definition.as_deref());
    let diff: Vec<Value> = portico_pipeline::definition_diff(&previous, &definition)
        .into_iter()
        .map(|change| {
            // Beside each value, the text approvers read: a description can hide instructions in
            // invisible characters (tag characters, zero-width, bidi), which the text escapes.
            let mut entry = json!({"field": change.field});
            if let Some(before) = change.before {
                entry["beforeText"] = Value::String(portico_pipeline::arguments_text(&before));
                entry["before"] = before;
            }
            if let Some(after) = change.after {
                entry["afterText"] = Value::String(portico_pipeline::arguments_text(&after));
                entry["after"] = after;
            }
            entry
        })
        .collect();
    view["diff"] = Value::Array(diff);
    view["previous"] = Value::Object(previous);
    let definition = Value::Object(definition);
    view["definitionText"] = Value::String(portico_pipeline::arguments_text(&definition));
    view["definition"] = definition;
}

#[derive(Deserialize)]
struct ListQuery {
    status: Option<String>,
    limit: Option<String>,
}

async fn list(
    State(state): State<ApprovalsState>,
    client: Option<Extension<Principal>>,
    Query(query): Query<ListQuery>,
) -> Response {
    let asker = Asker::of(client);
    let status = match query.status.as_deref() {
        None => Some(ApprovalStatus::Pending),
        Some("all") => None,
        Some(text) => match ApprovalStatus::parse(text) {
            Some(status) => Some(status),
            None => {
                return api_error(
                    StatusCode::BAD_REQUEST,
                    format!(
                        "status `{text}` is not one of pending, approved, denied, consumed, \
                         expired, all"
                    ),
                );
            }
        },
    };
    let limit = match list_limit(query.limit.as_deref(), DEFAULT_LIST_LIMIT) {
        Ok(limit) => limit,
        Err(message) => return api_error(StatusCode::BAD_REQUEST, message),
    };
    let listed = state
        .approvals
        .run("listing approval requests", move |a| a.list(status, limit))
        .await;
    match listed {
        Ok(records) => {
            let shown: Vec<Value> = records
                .iter()
                .filter(|record| asker.may_see(record))
                .map(view)
                .collect();
            Json(json!({"approvals": shown})).into_response()
        }
        Err(error) => api_error(StatusCode::INTERNAL_SERVER_ERROR, error.to_string()),
    }
}

/// A list's `limit` parameter: `default` without one, else a whole number from 1 to
/// [`MAX_LIST_LIMIT`], or the message of the 400 that says it is not.
fn list_limit(text: Option<&str>, default: usize) -> Result<usize, String> {
    match text {
        None => Ok(default),
        Some(text) => match text.parse::<usize>() {
            Ok(limit) if (1..=MAX_LIST_LIMIT).contains(&limit) => Ok(limit),
            _ => Err(format!(
                "limit `{text}` must be a whole number from 1 to {MAX_LIST_LIMIT}"
            )),
        },
    }
}

#[derive(Deserialize)]
struct DecisionsQuery {
    limit: Option<String>,
}

/// A decision as `GET /api/approvals/decisions` lists it: `state` is the request's status now
/// (`approved`, `denied`, `consumed`: approved and used, `expired`: unanswered, or approved and not
/// used, in time); `decided_at` is when it was answered, or when it expired unanswered; `via`
/// how it was answered (`web`, `api`, `cli`, `elicitation`; null when it expired unanswered).
pub(crate) fn decision_view(record: &ApprovalRecord) -> Value {
    json!({
        "id": record.id,
        "tool": record.binding.tool,
        "caller": record.binding.principal,
        "state": record.status.as_str(),
        "decided_at": portico_core::time::rfc3339(record.decided_at_ms.unwrap_or(record.expires_at_ms)),
        "decided_by": record.decided_by,
        "via": record.decided_via,
    })
}

/// `{"decisions": [...]}`, most recent first: what was answered or expired lately.
async fn decisions(
    State(state): State<ApprovalsState>,
    client: Option<Extension<Principal>>,
    Query(query): Query<DecisionsQuery>,
) -> Response {
    let asker = Asker::of(client);
    let limit = match list_limit(query.limit.as_deref(), DEFAULT_DECISIONS_LIMIT) {
        Ok(limit) => limit,
        Err(message) => return api_error(StatusCode::BAD_REQUEST, message),
    };
    let decisions = state
        .approvals
        .run("listing approval decisions", move |a| a.decisions(limit))
        .await;
    match decisions {
        Ok(records) => {
            let shown: Vec<Value> = records
                .iter()
                .filter(|record| asker.may_see(record))
                .map(decision_view)
                .collect();
            Json(json!({"decisions": shown})).into_response()
        }
        Err(error) => api_error(StatusCode::INTERNAL_SERVER_ERROR, error.to_string()),
    }
}

fn not_found(id: &str) -> Response {
    api_error(
        StatusCode::NOT_FOUND,
        ApprovalError::NotFound { id: id.to_string() }.to_string(),
    )
}

async fn show(
    State(state): State<ApprovalsState>,
    client: Option<Extension<Principal>>,
    Path(id): Path<String>,
) -> Response {
    let asker = Asker::of(client);
    if id.len() > MAX_ID_CHARS {
        return not_found(&id.chars().take(MAX_ID_CHARS).collect::<String>());
    }
    let lookup = id.clone();
    let found = state
        .approvals
        .run("reading an approval request", move |a| a.get(&lookup))
        .await;
    match found {
        Ok(Some(record)) if asker.may_see(&record) => Json(view(&record)).into_response(),
        Ok(_) => not_found(&id),
        Err(error) => api_error(StatusCode::INTERNAL_SERVER_ERROR, error.to_string()),
    }
}

/// The optional body of an answer.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct AnswerBody {
    via: Option<String>,
    reason: Option<String>,
}

/// Longest deny reason kept; longer ones are refused rather than cut, so nobody's words change.
const MAX_REASON_CHARS: usize = 1000;

/// The channel and reason of an answer's body, or why it is not one (a 400).
fn parse_answer(body: &Bytes, deny: bool) -> Result<(ApprovalChannel, Option<String>), String> {
    let body: AnswerBody = if body.iter().all(u8::is_ascii_whitespace) {
        AnswerBody::default()
    } else {
        serde_json::from_slice(body).map_err(|error| {
            format!(
                "the body must be empty or a JSON object like {{\"via\": \"api\"{}}}: {error}",
                if deny { ", \"reason\": \"...\"" } else { "" }
            )
        })?
    };
    let via = match body.via.as_deref() {
        None => ApprovalChannel::Api,
        Some(text @ ("api" | "cli" | "web")) => {
            ApprovalChannel::parse(text).unwrap_or(ApprovalChannel::Api)
        }
        Some(other) => {
            return Err(format!("via `{other}` is not one of api, cli, web"));
        }
    };
    if !deny && body.reason.is_some() {
        return Err("an approval takes no reason; only a denial does".into());
    }
    if body
        .reason
        .as_ref()
        .is_some_and(|r| r.chars().count() > MAX_REASON_CHARS)
    {
        return Err(format!(
            "reason is longer than {MAX_REASON_CHARS} characters"
        ));
    }
    Ok((via, body.reason))
}

async fn answer(
    state: ApprovalsState,
    asker: Asker,
    id: String,
    body: Bytes,
    deny: bool,
) -> Response {
    if asker.scoped() {
        return api_error(
            StatusCode::FORBIDDEN,
            format!(
                "`{}` has a `tools` scope, and scoped clients cannot answer approval requests; \
                 answer with [server] token or an unscoped [[server.clients]] token",
                asker.label()
            ),
        );
    }
    let (via, reason) = match parse_answer(&body, deny) {
        Ok(parsed) => parsed,
        Err(message) => return api_error(StatusCode::BAD_REQUEST, message),
    };
    if id.len() > MAX_ID_CHARS {
        return not_found(&id.chars().take(MAX_ID_CHARS).collect::<String>());
    }
    let answer = if deny {
        ApprovalAnswer::Deny { reason }
    } else {
        ApprovalAnswer::Approve
    };
    let by = asker.label();
    let lookup = id.clone();
    let decided = state
        .approvals
        .run("answering an approval request", move |a| {
            a.decide(&lookup, answer, &by, via)
        })
        .await;
    match decided {
        Ok(record) => Json(view(&record)).into_response(),
        Err(error @ ApprovalError::NotFound { .. }) => {
            api_error(StatusCode::NOT_FOUND, error.to_string())
        }
        Err(error @ ApprovalError::NotPending { .. }) => {
            api_error(StatusCode::CONFLICT, error.to_string())
        }
        Err(error) => api_error(StatusCode::INTERNAL_SERVER_ERROR, error.to_string()),
    }
}

async fn approve(
    State(state): State<ApprovalsState>,
    client: Option<Extension<Principal>>,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    answer(state, Asker::of(client), id, body, false).await
}

async fn deny(
    State(state): State<ApprovalsState>,
    client: Option<Extension<Principal>>,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    answer(state, Asker::of(client), id, body, true).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use portico_pipeline::{ApprovalKind, ApprovalStatus};
    use portico_store::ApprovalBinding;

    #[test]
    fn a_definition_request_shows_both_definitions_and_the_changed_fields() {
        let record = ApprovalRecord {
            id: "apr_1".into(),
            binding: ApprovalBinding {
                principal: "server:docs".into(),
                tool: "mcp_docs_search".into(),
                arguments_digest: String::new(),
                policy: "pin_tools".into(),
                definition_digest: "bb".into(),
                on_behalf_of: None,
            },
            arguments: "{}".into(),
            reason: "changed".into(),
            status: ApprovalStatus::Pending,
            created_at_ms: 0,
            expires_at_ms: 1_000,
            decided_at_ms: None,
            decided_by: None,
            decided_via: None,
            deny_reason: None,
            consumed_at_ms: None,
            kind: ApprovalKind::Definition,
            previous_definition: Some(r#"{"name":"search","description":"a","title":"S"}"#.into()),
            new_definition: Some(
                r#"{"name":"search","description":"b","annotations":{"readOnlyHint":false}}"#
                    .into(),
            ),
        };
        let view = view(&record);
        assert_eq!(
            (&view["kind"], &view["policy"], &view["arguments"]),
            (&json!("definition"), &json!("pin_tools"), &json!({}))
        );
        assert_eq!(
            view["diff"],
            json!([
                {"field": "title", "before": "S", "beforeText": "\"S\""},
                {"field": "description", "before": "a", "beforeText": "\"a\"",
                 "after": "b", "afterText": "\"b\""},
                {"field": "annotations", "after": {"readOnlyHint": false},
                 "afterText": "{\n  \"readOnlyHint\": false\n}"},
            ])
        );
        assert_eq!(view["previous"]["title"], "S");
        assert_eq!(view["definition"]["description"], "b");
        assert!(
            view["definitionText"]
                .as_str()
                .unwrap()
                .contains("\"description\": \"b\""),
            "{view}"
        );

        // A call request has none of these.
        let call = view_of_call(record);
        for key in ["diff", "previous", "definition"] {
            assert_eq!(call.get(key), None, "{key}");
        }
    }

    fn view_of_call(mut record: ApprovalRecord) -> Value {
        record.kind = ApprovalKind::Call;
        view(&record)
    }
}

#[cfg(test)]
mod arguments_text_tests {
    use super::*;
    use portico_pipeline::ApprovalKind;
    use portico_store::ApprovalBinding;

    #[test]
    fn the_view_carries_the_exact_arguments_as_visible_text() {
        let record = ApprovalRecord {
            id: "apr_abc".into(),
            binding: ApprovalBinding {
                principal: "client:default".into(),
                tool: "file_write".into(),
                arguments_digest: "d".into(),
                policy: "policies[0]@x".into(),
                definition_digest: "d".into(),
                on_behalf_of: None,
            },
            arguments: r#"{"n":9007199254740993,"p":"a\u202eb"}"#.into(),
            reason: "r".into(),
            status: ApprovalStatus::Pending,
            created_at_ms: 0,
            expires_at_ms: 0,
            decided_at_ms: None,
            decided_by: None,
            decided_via: None,
            deny_reason: None,
            consumed_at_ms: None,
            kind: ApprovalKind::Call,
            previous_definition: None,
            new_definition: None,
        };
        let view = view(&record);
        let text = view["argumentsText"].as_str().unwrap();
        assert_eq!(
            text,
            "{\n  \"n\": 9007199254740993,\n  \"p\": \"a\\u202eb\"\n}"
        );
        assert!(text.contains("9007199254740993"));
        assert!(text.contains(r"\u202e") && !text.contains('\u{202e}'));
        // `arguments` stays the JSON value itself, for programs.
        assert_eq!(view["arguments"]["p"], "a\u{202e}b");
        assert_eq!(view["arguments"]["n"].as_u64(), Some(9007199254740993));
    }
}
