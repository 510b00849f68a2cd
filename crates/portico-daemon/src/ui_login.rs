//! The dashboard's login: `POST /ui/login` (`{"token": "..."}`) checks the token as the door checks
//! a bearer token and answers with the `portico_ui` session cookie and, in its body, the session's
//! page key (`{"pageKey"}`, sent back as `X-Portico-Page-Key`); `POST /ui/logout` forgets the
//! session; `GET /ui/session` says who the page is (`{"principal", "auth": "cookie"|"bearer"|"open"}`).
//! The sessions and the rules for where a cookie counts are `security::ui_session`'s.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use portico_pipeline::Principal;
use serde::Deserialize;
use serde_json::json;

use crate::security::{Arrival, AuthMethod, DoorPolicy, login_session, ui_session};

/// Longer than any token Portico takes (a JWT is at most 16 KiB): refused before it is checked.
const MAX_TOKEN_BYTES: usize = 16 * 1024;

/// Who the dashboard acts as on a door without tokens: the API's caller (`client:api`, a reserved
/// client name), so `[[policies]] callers` written for the API hold for the dashboard too.
pub(crate) const DASHBOARD_CLIENT: &str = "api";

pub(crate) fn routes(policy: Arc<DoorPolicy>) -> Router {
    Router::new()
        .route("/ui/login", post(login))
        .route("/ui/logout", post(logout))
        .route("/ui/session", get(session))
        .with_state(policy)
}

fn api_error(status: StatusCode, message: impl Into<String>) -> Response {
    let mut response = (status, Json(json!({"error": message.into()}))).into_response();
    response.headers_mut().insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static("no-store"),
    );
    response
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LoginBody {
    token: String,
}

/// Whether the browser's page is https (behind a balancer): the cookie is `Secure` then.
fn secure(arrival: Option<&Extension<Arrival>>) -> bool {
    arrival.is_some_and(|Extension(arrival)| arrival.https)
}

async fn login(
    State(policy): State<Arc<DoorPolicy>>,
    arrival: Option<Extension<Arrival>>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    // Only JSON: an HTML form on another page cannot send it.
    let json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(';')
                .next()
                .is_some_and(|t| t.trim().eq_ignore_ascii_case("application/json"))
        });
    if !json {
        return api_error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "the login body must be JSON, sent with `Content-Type: application/json`",
        );
    }
    // Parsed by hand: the JSON extractor's rejections quote the body, which holds the token.
    let body: LoginBody = match serde_json::from_slice(&body) {
        Ok(body) => body,
        Err(_) => {
            return api_error(
                StatusCode::BAD_REQUEST,
                "the login body must be a JSON object {\"token\": \"...\"}",
            );
        }
    };
    if body.token.len() > MAX_TOKEN_BYTES {
        return api_error(
            StatusCode::UNAUTHORIZED,
            format!("the token was refused (it is longer than {MAX_TOKEN_BYTES} bytes)"),
        );
    }
    match login_session(&policy, &body.token).await {
        Ok((created, life)) => {
            // A new login replaces the browser's session rather than piling up beside it.
            for old in ui_session::cookie_values(&headers) {
                policy.ui_sessions().forget(old);
            }
            tracing::info!("dashboard login");
            // The page key goes in the body only: the page keeps it where other ports cannot
            // read it, and a cookie without it counts for nothing.
            (
                StatusCode::OK,
                [
                    (
                        header::SET_COOKIE,
                        ui_session::set_cookie(&created.id, life, secure(arrival.as_ref())),
                    ),
                    (
                        header::CACHE_CONTROL,
                        header::HeaderValue::from_static("no-store"),
                    ),
                ],
                Json(json!({"pageKey": created.page_key})),
            )
                .into_response()
        }
        Err((status, message)) => {
            tracing::warn!(%status, "dashboard login refused: {message}");
            api_error(status, message)
        }
    }
}

async fn logout(
    State(policy): State<Arc<DoorPolicy>>,
    arrival: Option<Extension<Arrival>>,
    headers: HeaderMap,
) -> Response {
    for id in ui_session::cookie_values(&headers) {
        policy.ui_sessions().forget(id);
    }
    (
        StatusCode::NO_CONTENT,
        [(
            header::SET_COOKIE,
            ui_session::clear_cookie(secure(arrival.as_ref())),
        )],
    )
        .into_response()
}

async fn session(
    method: Option<Extension<AuthMethod>>,
    principal: Option<Extension<Principal>>,
) -> Response {
    let method = method.map_or(AuthMethod::Open, |Extension(method)| method);
    let principal = match principal {
        Some(Extension(principal)) => principal.label(),
        None => Principal::client(DASHBOARD_CLIENT).label(),
    };
    let mut response =
        Json(json!({"principal": principal, "auth": method.as_str()})).into_response();
    response.headers_mut().insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static("no-store"),
    );
    response
}
