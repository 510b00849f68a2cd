//! `[server] max_message_bytes` on every request body, whatever the route and method.
//!
//! A declared `Content-Length` over the bound is refused before a byte of the body is read; any other
//! body is wrapped so that whoever reads it (the call counter, the rate limiter, a route's extractor,
//! rmcp) stops at the bound. Routes' own extractors are given the same bound, so nothing is refused
//! below it either (axum's default is 2 MiB).

use axum::Router;
use axum::body::Body;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

/// The 413 every door answers for a body over the bound.
pub(crate) fn too_large(max: usize) -> Response {
    (
        StatusCode::PAYLOAD_TOO_LARGE,
        axum::Json(serde_json::json!({"error": format!(
            "the request body is larger than {max} bytes ([server] max_message_bytes); send a smaller message, or raise the setting"
        )})),
    )
        .into_response()
}

pub(crate) async fn cap(State(max): State<usize>, request: Request, next: Next) -> Response {
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse::<u64>().ok());
    if declared.is_some_and(|length| length > max as u64) {
        return too_large(max);
    }
    let (parts, body) = request.into_parts();
    let body = Body::new(http_body_util::Limited::new(body, max));
    next.run(Request::from_parts(parts, body)).await
}

/// `router` with every body capped at `max`: by [`cap`], and by the same bound for axum's extractors.
pub(crate) fn layer(router: Router, max: usize) -> Router {
    router
        .layer(DefaultBodyLimit::max(max))
        .layer(axum::middleware::from_fn_with_state(max, cap))
}
