//! `DELETE /mcp`, a client ending its session, answered 204 No Content. rmcp answers 202
//! Accepted, and the official Python SDK, which expects 200 or 204, warned on every disconnect
//! ("Session termination failed: 202"). The transport spec names no status; the session is
//! closed by the time rmcp answers, so there is nothing more to accept, and nothing to say.

use axum::body::Body;
use axum::extract::Request;
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::Response;

pub(crate) async fn no_content_for_delete(request: Request, next: Next) -> Response {
    let delete = request.method() == Method::DELETE;
    let response = next.run(request).await;
    if delete && response.status() == StatusCode::ACCEPTED {
        let (mut parts, _) = response.into_parts();
        parts.status = StatusCode::NO_CONTENT;
        parts.headers.remove(axum::http::header::CONTENT_TYPE);
        parts.headers.remove(axum::http::header::CONTENT_LENGTH);
        return Response::from_parts(parts, Body::empty());
    }
    response
}
