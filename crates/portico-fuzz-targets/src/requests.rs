//! Inputs as HTTP requests to the door's router.
//!
//! One input is up to [`MAX_REQUESTS`] requests separated by a line `~~~`. Each request is
//!
//! ```text
//! [METHOD /path]          optional request line; else the target's default
//! [Name: value]...        optional headers, up to an empty line
//! body
//! ```
//!
//! or just a body (anything whose first line is neither). `Host`, `Content-Type` and `Accept` get
//! the values a real client sends unless the input gives its own; `Content-Length` is always the
//! body's real length, since on the wire hyper makes it so. `$TASK` and `$SESSION` in the path, the
//! headers and the body become the newest task id and session id answered so far, so an input can
//! create a task and then act on it.

use std::net::SocketAddr;
use std::time::Duration;

use axum::body::Body;
use axum::extract::ConnectInfo;
use futures::FutureExt;
use http::{HeaderName, HeaderValue, Method, Request, Uri, header};
use http_body_util::BodyExt;
use serde_json::Value;
use tower::ServiceExt;

use crate::door::{LISTEN, door};

/// Requests per input: enough for a handshake, a call and a follow-up.
pub(crate) const MAX_REQUESTS: usize = 8;

const SEPARATOR: &[u8] = b"\n~~~\n";

/// How long to wait for the next piece of a response that is still streaming. Answers are ready in
/// microseconds to milliseconds (an SQLite commit on a RAM disk); a stream still silent after this is
/// a live one (a subscription, a standalone SSE stream) and is dropped, as a client would.
const FRAME_WAIT: Duration = Duration::from_millis(250);

/// Enough of a response to check; the rest is dropped.
const MAX_RESPONSE_BYTES: usize = 1 << 20;

pub(crate) struct Req {
    pub method: Method,
    pub path: String,
    pub headers: Vec<(String, Vec<u8>)>,
    pub body: Vec<u8>,
}

pub(crate) struct Resp {
    pub status: u16,
    pub headers: http::HeaderMap,
    pub body: Vec<u8>,
}

/// What follow-up requests may refer to.
#[derive(Default)]
pub(crate) struct Memo {
    pub task: Option<String>,
    pub session: Option<String>,
}

pub(crate) fn split(data: &[u8]) -> Vec<&[u8]> {
    let mut parts = Vec::new();
    let mut rest = data;
    while parts.len() + 1 < MAX_REQUESTS {
        match rest.windows(SEPARATOR.len()).position(|w| w == SEPARATOR) {
            Some(at) => {
                parts.push(&rest[..at]);
                rest = &rest[at + SEPARATOR.len()..];
            }
            None => break,
        }
    }
    parts.push(rest);
    parts
}

fn first_line(bytes: &[u8]) -> (&[u8], &[u8]) {
    match bytes.iter().position(|&b| b == b'\n') {
        Some(at) => (&bytes[..at], &bytes[at + 1..]),
        None => (bytes, &[]),
    }
}

fn request_line(line: &[u8]) -> Option<(Method, String)> {
    let line = std::str::from_utf8(line).ok()?.trim_end_matches('\r');
    let (method, path) = line.split_once(' ')?;
    if method.is_empty()
        || !method.bytes().all(|b| b.is_ascii_uppercase())
        || !path.starts_with('/')
    {
        return None;
    }
    Some((
        Method::from_bytes(method.as_bytes()).ok()?,
        path.trim().to_string(),
    ))
}

fn header_line(line: &[u8]) -> Option<(String, Vec<u8>)> {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let colon = line.iter().position(|&b| b == b':')?;
    let name = std::str::from_utf8(&line[..colon]).ok()?;
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
        return None;
    }
    let value = line[colon + 1..]
        .strip_prefix(b" ")
        .unwrap_or(&line[colon + 1..]);
    Some((name.to_ascii_lowercase(), value.to_vec()))
}

pub(crate) fn parse(part: &[u8], method: Method, path: &str) -> Req {
    let mut req = Req {
        method,
        path: path.to_string(),
        headers: Vec::new(),
        body: Vec::new(),
    };
    let mut rest = part;
    let (line, after) = first_line(rest);
    if let Some((method, path)) = request_line(line) {
        req.method = method;
        req.path = path;
        rest = after;
    }
    while !rest.is_empty() {
        let (line, after) = first_line(rest);
        if line.is_empty() || line == b"\r" {
            rest = after;
            break;
        }
        match header_line(line) {
            Some(header) => {
                req.headers.push(header);
                rest = after;
            }
            None => break,
        }
    }
    req.body = rest.to_vec();
    req
}

fn substitute(bytes: &[u8], memo: &Memo) -> Vec<u8> {
    let mut out = bytes.to_vec();
    for (key, value) in [("$TASK", &memo.task), ("$SESSION", &memo.session)] {
        let value = value.as_deref().unwrap_or("none");
        out = replace(&out, key.as_bytes(), value.as_bytes());
    }
    out
}

fn replace(haystack: &[u8], needle: &[u8], with: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(haystack.len());
    let mut i = 0;
    while i < haystack.len() {
        if haystack[i..].starts_with(needle) {
            out.extend_from_slice(with);
            i += needle.len();
        } else {
            out.push(haystack[i]);
            i += 1;
        }
    }
    out
}

/// Builds the request; `None` when the input's path or a header cannot be put on the wire at all
/// (hyper would have refused the request line before Portico saw it).
pub(crate) fn build(req: &Req, memo: &Memo, accept: &str) -> Option<Request<Body>> {
    let path = String::from_utf8(substitute(req.path.as_bytes(), memo)).ok()?;
    let uri: Uri = path.parse().ok()?;
    if uri.scheme().is_some() || uri.authority().is_some() {
        return None;
    }
    let body = substitute(&req.body, memo);
    let mut builder = Request::builder().method(req.method.clone()).uri(uri);
    let given = |name: &str| req.headers.iter().any(|(n, _)| n == name);
    for (name, value) in &req.headers {
        if name == "content-length" || name == "transfer-encoding" {
            continue;
        }
        let name = HeaderName::from_bytes(name.as_bytes()).ok()?;
        let value = HeaderValue::from_bytes(&substitute(value, memo)).ok()?;
        builder = builder.header(name, value);
    }
    if !given("host") {
        builder = builder.header(header::HOST, LISTEN);
    }
    if !given("content-type") && !body.is_empty() {
        builder = builder.header(header::CONTENT_TYPE, "application/json");
    }
    if !given("accept") {
        builder = builder.header(header::ACCEPT, accept);
    }
    builder = builder.header(header::CONTENT_LENGTH, body.len());
    let mut request = builder.body(Body::from(body)).ok()?;
    let peer: SocketAddr = "127.0.0.1:50000".parse().ok()?;
    request.extensions_mut().insert(ConnectInfo(peer));
    Some(request)
}

/// Sends one request through the router and reads its answer as a client would: whole, unless it is
/// a stream that stays open.
pub(crate) async fn send(request: Request<Body>) -> Resp {
    let shown = trace().then(|| format!("{} {}", request.method(), request.uri()));
    let response = door()
        .router
        .clone()
        .oneshot(request)
        .await
        .unwrap_or_else(|never| match never {});
    let (parts, mut body) = response.into_parts();
    let mut bytes = Vec::new();
    while bytes.len() < MAX_RESPONSE_BYTES {
        match tokio::time::timeout(FRAME_WAIT, body.frame()).await {
            Ok(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    bytes.extend_from_slice(data);
                }
            }
            Ok(Some(Err(_))) | Ok(None) | Err(_) => break,
        }
    }
    if let Some(shown) = shown {
        eprintln!(
            "{shown} -> {} {}",
            parts.status,
            String::from_utf8_lossy(&bytes[..bytes.len().min(600)])
        );
    }
    Resp {
        status: parts.status.as_u16(),
        headers: parts.headers,
        body: bytes,
    }
}

/// `PORTICO_FUZZ_TRACE=1` prints every request and the start of its answer (to see what an input
/// reaches when replaying it).
pub(crate) fn trace() -> bool {
    static TRACE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *TRACE.get_or_init(|| std::env::var_os("PORTICO_FUZZ_TRACE").is_some())
}

/// Reads whatever a live stream has ready now, without waiting for more.
pub(crate) async fn drain_ready(body: &mut Body, into: &mut Vec<u8>) {
    for _ in 0..64 {
        tokio::task::yield_now().await;
    }
    while into.len() < MAX_RESPONSE_BYTES {
        match body.frame().now_or_never() {
            Some(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    into.extend_from_slice(data);
                }
            }
            _ => break,
        }
    }
}

/// What every answer of every door promises: a body labelled JSON is JSON, and a server error is
/// never an empty reply.
pub(crate) fn check(resp: &Resp, what: &str) {
    let json = resp
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if json
        && !resp.body.is_empty()
        && resp.body.len() < MAX_RESPONSE_BYTES
        && let Err(e) = serde_json::from_slice::<Value>(&resp.body)
    {
        panic!(
            "{what}: a {} answer labelled application/json is not JSON ({e}): {}",
            resp.status,
            String::from_utf8_lossy(&resp.body)
        );
    }
}

/// Remembers the newest task id (A2A answers: `result.id` of a task, `taskId`, `id`) and MCP
/// session id in an answer.
pub(crate) fn remember(resp: &Resp, memo: &mut Memo) {
    if let Some(session) = resp
        .headers
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
    {
        memo.session = Some(session.to_string());
    }
    let text = String::from_utf8_lossy(&resp.body);
    // JSON bodies, and the `data:` lines of SSE ones.
    let values = std::iter::once(text.as_ref())
        .chain(text.lines().filter_map(|l| l.strip_prefix("data:")))
        .filter_map(|t| serde_json::from_str::<Value>(t.trim()).ok());
    for value in values {
        let task = value
            .pointer("/result/task/id")
            .or_else(|| value.pointer("/task/id"))
            .or_else(|| value.pointer("/result/id"))
            .or_else(|| value.pointer("/result/taskId"))
            .or_else(|| value.pointer("/taskId"))
            .or_else(|| value.get("id").filter(|_| value.get("status").is_some()));
        if let Some(Value::String(id)) = task {
            memo.task = Some(id.clone());
        }
    }
}
