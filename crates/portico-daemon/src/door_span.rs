//! The door's span for traces (`portico_core::trace::DOOR`): one per POST that passed the door's
//! checks (an MCP message, an A2A send, an API action; reads and event streams get none), child of
//! the caller's W3C `traceparent` when it sent one. It is kept in the request's extensions
//! ([`DoorSpan`]) as well as entered: rmcp runs an MCP request's handler on a task of its own,
//! which finds the span there. Fields: the method, the path (no query), the status, and the MCP
//! method the handler records; never a header or a body.

use axum::extract::Request;
use axum::http::{HeaderMap, Method};
use axum::middleware::Next;
use axum::response::Response;
use opentelemetry::propagation::Extractor;
use opentelemetry::trace::TraceContextExt;
use portico_core::trace::{DOOR, DoorSpan, SPAN_TARGET};
use tracing::Instrument;
use tracing_opentelemetry::OpenTelemetrySpanExt;

pub(crate) async fn door_span(mut request: Request, next: Next) -> Response {
    if request.method() != Method::POST {
        return next.run(request).await;
    }
    let span = tracing::trace_span!(
        target: SPAN_TARGET,
        DOOR,
        otel.kind = "server",
        door = "http",
        http.request.method = "POST",
        url.path = request.uri().path(),
        mcp.method = tracing::field::Empty,
        http.response.status_code = tracing::field::Empty,
        otel.status_code = tracing::field::Empty,
    );
    // Off (no `[telemetry]`): nothing to carry, nothing to read.
    if span.is_disabled() {
        return next.run(request).await;
    }
    let parent = opentelemetry::global::get_text_map_propagator(|propagator| {
        propagator.extract(&Headers(request.headers()))
    });
    if parent.span().span_context().is_valid() {
        let _ = span.set_parent(parent);
    }
    request.extensions_mut().insert(DoorSpan(span.clone()));
    let response = next.run(request).instrument(span.clone()).await;
    let status = response.status();
    span.record("http.response.status_code", status.as_u16());
    if status.is_server_error() {
        span.record("otel.status_code", "ERROR");
    }
    response
}

/// A request's headers as the propagator reads them.
struct Headers<'a>(&'a HeaderMap);

impl Extractor for Headers<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|value| value.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(|name| name.as_str()).collect()
    }
}
