//! Counting calls in progress, so that shutdown can let them finish.
//!
//! A `POST /mcp` answers over a response body that stays open until the final JSON-RPC response has
//! been written, so a call counts as in progress until its body is finished or dropped. Streams that
//! only wait for events are not calls and are not counted: `GET` streams, and the POSTs that open one
//! (`subscriptions/listen`, which `portico mcp` keeps open for as long as it is attached, and A2A
//! task subscriptions). Counting those would make every shutdown wait out its whole grace period;
//! shutdown ends them instead.
//!
//! Once a stop has begun a new call (`tools/call`, an A2A send) is refused with 503 and
//! `Retry-After`: it could not finish within the grace, and taking it would only hold the stop.
//! Everything else (listing tools, the health check) is still answered while the calls in progress
//! finish, so that a client's follow-up to its answer does not fail.

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock};
use std::task::{Context, Poll};

use aho_corasick::AhoCorasick;
use axum::body::{Body, Bytes, HttpBody};
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http_body::{Frame, SizeHint};
use tokio::sync::Notify;

#[derive(Clone)]
pub(crate) struct InFlight(Arc<Counter>, usize);

#[derive(Default)]
pub(crate) struct Counter {
    count: AtomicUsize,
    idle: Notify,
    /// Set once a stop has begun: new calls are refused.
    stopping: AtomicBool,
}

struct Guard(Arc<Counter>);

impl Drop for Guard {
    fn drop(&mut self) {
        if self.0.count.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.idle.notify_waiters();
        }
    }
}

/// A call in progress whose answer goes out elsewhere than its request's response (a legacy SSE
/// call's, on its session's stream): counted until dropped.
pub(crate) struct Held {
    _guard: Guard,
}

/// Whether a JSON-RPC method opens a stream of events, as the door that understands it says.
pub(crate) fn method_opens_stream(method: &str) -> bool {
    portico_mcp_server::requests::opens_stream(method)
        || portico_a2a::pricing::STREAM_METHODS.contains(&method)
}

/// Whether a POST only opens an event stream: by its path (A2A 0.3's `tasks/{id}:subscribe`) or by
/// its JSON-RPC method. Parsed only when the bytes could name such a method.
fn opens_stream(path: &str, body: &[u8]) -> bool {
    let path = path.trim_end_matches('/').to_ascii_lowercase();
    if path.ends_with(":subscribe") || path.ends_with("%3asubscribe") {
        return true;
    }
    // Built once: one pass over the body for every method name (and `\u`, which could spell one).
    static MARKERS: LazyLock<AhoCorasick> = LazyLock::new(|| {
        let methods = portico_mcp_server::requests::STREAM_METHODS
            .iter()
            .chain(portico_a2a::pricing::STREAM_METHODS)
            .copied();
        AhoCorasick::new(methods.chain(["\\u"])).expect("the stream methods are valid literals")
    });
    if !MARKERS.is_match(body) {
        return false;
    }
    #[derive(serde::Deserialize)]
    struct Probe<'a> {
        #[serde(borrow)]
        method: Option<std::borrow::Cow<'a, str>>,
    }
    serde_json::from_slice::<Probe>(body)
        .is_ok_and(|p| p.method.is_some_and(|m| method_opens_stream(&m)))
}

impl InFlight {
    /// `max_body`: bodies are read to tell calls from streams; larger ones are refused (as the
    /// routes would refuse them).
    pub(crate) fn new(max_body: usize) -> Self {
        InFlight(Arc::default(), max_body)
    }

    /// Counted requests in progress now.
    pub(crate) fn count(&self) -> usize {
        self.0.count.load(Ordering::SeqCst)
    }

    /// From now on new calls are refused (see the module's doc).
    pub(crate) fn begin_stop(&self) {
        self.0.stopping.store(true, Ordering::SeqCst);
    }

    /// Counts a call until the returned value is dropped.
    pub(crate) fn hold(&self) -> Held {
        self.0.count.fetch_add(1, Ordering::SeqCst);
        Held {
            _guard: Guard(self.0.clone()),
        }
    }

    /// Waits until no counted request is in progress.
    pub(crate) async fn idle(&self) {
        loop {
            let notified = self.0.idle.notified();
            if self.0.count.load(Ordering::SeqCst) == 0 {
                return;
            }
            notified.await;
        }
    }
}

pub(crate) async fn count_calls(
    State(in_flight): State<InFlight>,
    request: Request,
    next: Next,
) -> Response {
    // The request that stops the daemon is no call to wait for: it would be waiting for itself.
    if request.method() != Method::POST || request.uri().path() == crate::lifecycle_api::SHUTDOWN {
        return next.run(request).await;
    }
    let max_body = in_flight.1;
    let (parts, body) = request.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, max_body).await else {
        // Over the bound (`body_limit` cuts every body there), or cut off by the client.
        return crate::body_limit::too_large(max_body);
    };
    if in_flight.0.stopping.load(Ordering::SeqCst) && starts_call(parts.uri.path(), &bytes) {
        return shutting_down();
    }
    let stream = opens_stream(parts.uri.path(), &bytes);
    let request = Request::from_parts(parts, Body::from(bytes));
    if stream {
        return next.run(request).await;
    }
    in_flight.0.count.fetch_add(1, Ordering::SeqCst);
    let guard = Guard(in_flight.0.clone());
    let response = next.run(request).await;
    let (parts, body) = response.into_parts();
    // The guard lives as long as the body: until the answer is fully sent or the client left.
    Response::from_parts(
        parts,
        Body::new(CountedBody {
            inner: body,
            _guard: guard,
        }),
    )
}

/// Whether a POST starts a call: an MCP `tools/call` (on `/mcp` or a legacy `/message`), or an A2A
/// send, by its path or by its JSON-RPC method (in a batch, any member's).
fn starts_call(path: &str, body: &[u8]) -> bool {
    if portico_a2a::pricing::path_runs_agent(path) {
        return true;
    }
    static MARKERS: LazyLock<AhoCorasick> = LazyLock::new(|| {
        let methods = portico_mcp_server::requests::CALL_METHODS
            .iter()
            .chain(portico_a2a::pricing::AGENT_METHODS)
            .copied();
        AhoCorasick::new(methods.chain(["\\u"])).expect("the call methods are valid literals")
    });
    if !MARKERS.is_match(body) {
        return false;
    }
    let is_call = |message: &serde_json::Value| {
        message["method"]
            .as_str()
            .is_some_and(portico_mcp_server::requests::runs_tool)
            || portico_a2a::pricing::message_runs_agent(message)
    };
    match serde_json::from_slice::<serde_json::Value>(body) {
        Ok(serde_json::Value::Array(batch)) => batch.iter().any(is_call),
        Ok(message) => is_call(&message),
        Err(_) => false,
    }
}

/// The answer to a call that comes once a stop has begun.
fn shutting_down() -> Response {
    let mut response = (
        StatusCode::SERVICE_UNAVAILABLE,
        axum::Json(serde_json::json!({
            "error": "Portico is shutting down and takes no new calls; retry once it is back"
        })),
    )
        .into_response();
    let headers = response.headers_mut();
    headers.insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
    headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}

/// A response body that holds its request's place in the count. It forwards the body's end and size
/// as well as its frames (a stream adapter would not): a JSON answer keeps its `Content-Length` and
/// goes out in one write, instead of as chunks plus a separate terminating chunk.
struct CountedBody {
    inner: Body,
    _guard: Guard,
}

impl HttpBody for CountedBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.get_mut().inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_are_told_from_calls() {
        use crate::test_messages::{LISTEN, call_tool, request};
        let listen = request(1, LISTEN, Some("{}"));
        assert!(opens_stream("/mcp", listen.as_bytes()));
        assert!(opens_stream(
            "/a2a/x",
            br#"{"jsonrpc":"2.0","id":1,"method":"SubscribeToTask"}"#
        ));
        let escaped = request(1, &LISTEN.replace('/', r"\u002f"), None);
        assert!(opens_stream("/mcp", escaped.as_bytes()));
        assert!(opens_stream("/a2a/x/v1/tasks/t1:subscribe", b""));
        assert!(!opens_stream("/mcp", call_tool(LISTEN).as_bytes()));
        assert!(!opens_stream("/mcp", b"not json"));
    }

    #[test]
    fn calls_are_told_from_other_requests() {
        use crate::test_messages::{CALL_TOOL, LIST_TOOLS, LISTEN, PING, call_tool, request};
        assert!(starts_call("/mcp", call_tool("t").as_bytes()));
        let escaped = call_tool("t").replace('/', r"\u002f");
        assert!(starts_call("/mcp", escaped.as_bytes()));
        let batch = format!("[{},{}]", request(1, PING, None), call_tool("t"));
        assert!(starts_call("/message", batch.as_bytes()));
        assert!(starts_call("/a2a/x/message:send", b"{}"));
        assert!(starts_call(
            "/a2a/x",
            br#"{"jsonrpc":"2.0","id":1,"method":"SendMessage"}"#
        ));
        assert!(!starts_call(
            "/mcp",
            request(1, LIST_TOOLS, None).as_bytes()
        ));
        assert!(!starts_call("/mcp", CALL_TOOL.as_bytes()), "not JSON");
        assert!(!starts_call(
            "/mcp",
            request(1, LISTEN, Some("{}")).as_bytes()
        ));
    }

    #[tokio::test]
    async fn a_counted_body_keeps_its_length_and_holds_the_count_until_dropped() {
        let in_flight = InFlight::new(1024);
        in_flight.0.count.fetch_add(1, Ordering::SeqCst);
        let body = CountedBody {
            inner: Body::from("{\"jsonrpc\":\"2.0\"}"),
            _guard: Guard(in_flight.0.clone()),
        };
        assert_eq!(body.size_hint().exact(), Some(17));
        assert!(!body.is_end_stream());
        assert_eq!(in_flight.0.count.load(Ordering::SeqCst), 1);
        let bytes = axum::body::to_bytes(Body::new(body), 1024).await.unwrap();
        assert_eq!(&bytes[..], b"{\"jsonrpc\":\"2.0\"}");
        assert_eq!(in_flight.0.count.load(Ordering::SeqCst), 0);
        tokio::time::timeout(std::time::Duration::from_secs(5), in_flight.idle())
            .await
            .expect("idle once the body is gone");
    }
}
