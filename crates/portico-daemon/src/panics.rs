//! The last line of defence: a handler that panics answers 500 with a JSON error, and the panic is
//! logged, instead of the connection dying with an empty reply. Client input must never get here
//! (it gets a clear 4xx where it is read); this catches what that missed.

use std::any::Any;

use axum::http::{HeaderValue, Response, StatusCode, header};
use tower_http::catch_panic::CatchPanicLayer;

/// Turns a caught panic into the response the client gets.
type PanicHandler = fn(Box<dyn Any + Send>) -> Response<String>;

/// The layer, put outermost on the door's router.
pub(crate) fn layer() -> CatchPanicLayer<PanicHandler> {
    CatchPanicLayer::custom(panic_response as PanicHandler)
}

fn panic_response(panic: Box<dyn Any + Send>) -> Response<String> {
    let detail = panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "no message".to_string());
    tracing::error!("a request handler panicked: {detail}; the request got a 500");
    let body = serde_json::json!({
        "error": "Portico failed while handling this request (a bug: its log has the details); the request was not completed, and retrying it may fail the same way",
    });
    let mut response = Response::new(body.to_string());
    *response.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

#[cfg(test)]
mod tests {
    use axum::Router;
    use axum::body::{Body, to_bytes};
    use axum::http::Request;
    use axum::routing::get;
    use tower::ServiceExt;

    async fn boom() -> &'static str {
        panic!("an index out of bounds")
    }

    #[tokio::test]
    async fn a_panicking_handler_answers_500_with_a_json_error() {
        let router = Router::new()
            .route("/boom", get(boom))
            .route("/fine", get(|| async { "fine" }))
            .layer(super::layer());
        let response = router
            .clone()
            .oneshot(Request::get("/boom").body(Body::empty()).unwrap())
            .await
            .unwrap();
        assert_eq!(response.status(), 500);
        assert_eq!(response.headers()["content-type"], "application/json");
        let body = to_bytes(response.into_body(), 4096).await.unwrap();
        let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert!(
            body["error"]
                .as_str()
                .is_some_and(|e| e.contains("Portico failed while handling this request")),
            "{body}"
        );
        // The router goes on serving.
        let response = router
            .oneshot(Request::get("/fine").body(Body::empty()).unwrap())
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
    }
}
