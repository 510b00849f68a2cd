//! W3C trace context over MCP: in a request's `_meta` (`traceparent`, `tracestate`: SEP-414), and,
//! for an HTTP upstream, also in the POST's headers.
//!
//! Why `_meta` first: the request leaves from rmcp's transport worker, a task of its own, where the
//! calling span is not the current one; the request itself is what crosses. So the call writes its
//! span's context into the request's `_meta` ([`inject`]), which every MCP server may read (stdio
//! ones included), and [`TracedHttp`], under rmcp's Streamable HTTP client, lifts it from there into
//! the `traceparent` and `tracestate` headers an HTTP server's tracing reads (the legacy HTTP+SSE
//! transport does the same for its POSTs).
//!
//! Everything goes through OpenTelemetry's global propagator: the binary sets the W3C one when
//! `[telemetry]` is on; until then it is a no-op, and nothing is written or read.

use std::collections::HashMap;
use std::sync::Arc;

use futures::stream::BoxStream;
use http::{HeaderName, HeaderValue};
use opentelemetry::propagation::{Extractor, Injector};
use opentelemetry::trace::TraceContextExt;
use portico_core::JsonObject;
use rmcp::model::{ClientJsonRpcMessage, GetMeta, JsonRpcMessage};
use rmcp::transport::streamable_http_client::{
    StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};
use sse_stream::{Error as SseError, Sse};
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// The `_meta` keys (and header names) of the W3C trace context.
const TRACE_KEYS: [&str; 2] = ["traceparent", "tracestate"];

/// Writes `span`'s trace context into a request's `_meta`.
pub fn inject(span: &tracing::Span, meta: &mut JsonObject) {
    let context = span.context();
    if !context.span().span_context().is_valid() {
        return;
    }
    opentelemetry::global::get_text_map_propagator(|propagator| {
        propagator.inject_context(&context, &mut MetaCarrier(meta));
    });
}

/// Makes the trace context a request's `_meta` carries (SEP-414) the parent of `span`, a door's
/// span, when it carries a valid one. `span` must not have been entered yet.
pub fn continue_from_meta(span: &tracing::Span, meta: &JsonObject) {
    let parent = opentelemetry::global::get_text_map_propagator(|propagator| {
        propagator.extract(&MetaReader(meta))
    });
    if parent.span().span_context().is_valid() {
        let _ = span.set_parent(parent);
    }
}

struct MetaCarrier<'a>(&'a mut JsonObject);

impl Injector for MetaCarrier<'_> {
    fn set(&mut self, key: &str, value: String) {
        if TRACE_KEYS.contains(&key) {
            self.0
                .insert(key.to_string(), serde_json::Value::String(value));
        }
    }
}

struct MetaReader<'a>(&'a JsonObject);

impl Extractor for MetaReader<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(serde_json::Value::as_str)
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(String::as_str).collect()
    }
}

/// The trace headers a message's `_meta` asks for: a request's `traceparent` and `tracestate`,
/// when they are valid header values. Nothing for anything else.
pub(crate) fn trace_headers(message: &ClientJsonRpcMessage) -> Vec<(HeaderName, HeaderValue)> {
    let JsonRpcMessage::Request(request) = message else {
        return Vec::new();
    };
    let meta = request.request.get_meta();
    TRACE_KEYS
        .into_iter()
        .filter_map(|key| {
            let value = meta.get(key)?.as_str()?;
            Some((
                HeaderName::from_static(key),
                HeaderValue::from_str(value).ok()?,
            ))
        })
        .collect()
}

/// rmcp's Streamable HTTP client `C`, sending each request's trace context as headers too.
#[derive(Clone)]
pub struct TracedHttp<C> {
    inner: C,
}

impl<C> TracedHttp<C> {
    pub fn new(inner: C) -> Self {
        TracedHttp { inner }
    }
}

type HttpError<E> = StreamableHttpError<E>;

fn with_trace(
    message: &ClientJsonRpcMessage,
    mut headers: HashMap<HeaderName, HeaderValue>,
) -> HashMap<HeaderName, HeaderValue> {
    headers.extend(trace_headers(message));
    headers
}

impl<C: StreamableHttpClient + Sync> StreamableHttpClient for TracedHttp<C> {
    type Error = C::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, HttpError<C::Error>> {
        let headers = with_trace(&message, custom_headers);
        self.inner
            .post_message(uri, message, session_id, auth_header, headers)
            .await
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<StreamableHttpPostResponse, HttpError<C::Error>> {
        let headers = with_trace(&message, custom_headers);
        self.inner
            .post_message_with_max_sse_event_size(
                uri,
                message,
                session_id,
                auth_header,
                headers,
                max_sse_event_size,
            )
            .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, HttpError<C::Error>> {
        let headers = with_trace(&message, custom_headers);
        self.inner
            .post_message_with_response_limits(
                uri,
                message,
                session_id,
                auth_header,
                headers,
                limits,
            )
            .await
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), HttpError<C::Error>> {
        self.inner
            .delete_session(uri, session_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, HttpError<C::Error>> {
        self.inner
            .get_stream(uri, session_id, last_event_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, HttpError<C::Error>> {
        self.inner
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::{CallToolRequest, CallToolRequestParams, ClientRequest, RequestId};

    #[test]
    fn a_requests_trace_context_in_meta_becomes_its_headers() {
        let mut request =
            ClientRequest::CallToolRequest(CallToolRequest::new(CallToolRequestParams::new("t")));
        let parent = "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01";
        request.get_meta_mut().set_traceparent(parent);
        request.get_meta_mut().set_tracestate("vendor=x");
        let message = ClientJsonRpcMessage::request(request, RequestId::Number(1));
        let headers = with_trace(&message, HashMap::new());
        assert_eq!(headers.len(), 2);
        assert_eq!(headers[&HeaderName::from_static("traceparent")], parent);
        assert_eq!(headers[&HeaderName::from_static("tracestate")], "vendor=x");

        // No trace context, or one that is not a header value: no headers.
        let plain =
            ClientRequest::CallToolRequest(CallToolRequest::new(CallToolRequestParams::new("t")));
        let message = ClientJsonRpcMessage::request(plain, RequestId::Number(2));
        assert!(with_trace(&message, HashMap::new()).is_empty());
        let mut broken =
            ClientRequest::CallToolRequest(CallToolRequest::new(CallToolRequestParams::new("t")));
        broken.get_meta_mut().set_traceparent("line\nbreak");
        let message = ClientJsonRpcMessage::request(broken, RequestId::Number(3));
        assert!(with_trace(&message, HashMap::new()).is_empty());
    }
}
