//! The legacy HTTP+SSE client transport against a real legacy server (axum on 127.0.0.1), driven by a
//! real rmcp client.
//!
//! The server implements the 2024-11-05 server side: `GET /sse` streams an `endpoint` event and then
//! every message; `POST /message?sessionId=` routes into that stream. Tools are named after the
//! behaviour they trigger (`echo`, `hang_up`, `big`, ...), and [`Knobs`] inject faults into the
//! stream itself. Timeouts in these tests are guards against hangs, never synchronisation.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use bytes::Bytes;
use portico_mcp::legacy_sse::{self, LegacySseConfig, LegacySseError, LegacySseTransport};
use rmcp::model::{CallToolRequestParams, ClientJsonRpcMessage, ProtocolVersion};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt};
use rmcp::transport::Transport;
use rmcp::{ServiceError, ServiceExt};
use serde_json::{Value, json};
use tokio::sync::{Semaphore, mpsc, oneshot, watch};
use tokio::task::JoinHandle;
use url::Url;

/// Upper bound on anything a test waits for; only reached if the code under test hangs.
const GUARD: Duration = Duration::from_secs(10);

async fn guard<F: Future>(what: &str, future: F) -> F::Output {
    tokio::time::timeout(GUARD, future)
        .await
        .unwrap_or_else(|_| panic!("{what} did not finish within {GUARD:?}"))
}

// ---------------------------------------------------------------------------------------------
// The legacy server
// ---------------------------------------------------------------------------------------------

/// Fault injection for the GET stream.
#[derive(Clone, Default)]
struct Knobs {
    /// Answer the GET with this status instead of a stream.
    sse_status: Option<StatusCode>,
    /// Content-Type of the GET response (default `text/event-stream`).
    content_type: Option<&'static str>,
    /// Data of the `endpoint` event; `{session}` and `{port}` (the server's own) are replaced
    /// (default `/message?sessionId={session}`).
    endpoint: Option<String>,
    /// Keep the stream open but never send `endpoint`.
    no_endpoint: bool,
    /// End the stream before sending `endpoint`.
    end_before_endpoint: bool,
    /// Byte-order mark, comments, unknown events and fields around every event, and events written
    /// in 7-byte pieces.
    noise: bool,
    /// Refuse GET and POST without exactly this `Authorization` header.
    require_auth: Option<&'static str>,
    /// Write a keepalive comment at this interval.
    keepalive: Option<Duration>,
}

/// One request as the server saw it.
#[derive(Clone, Debug)]
struct Seen {
    method: String,
    uri: String,
    authorization: Option<String>,
    accept: Option<String>,
    content_type: Option<String>,
    rpc_method: Option<String>,
}

struct Inner {
    knobs: Knobs,
    port: u16,
    sessions: Mutex<HashMap<String, mpsc::UnboundedSender<Bytes>>>,
    next_session: AtomicU64,
    seen: Mutex<Vec<Seen>>,
    /// `wait` blocks on this until `release` adds a permit.
    gate: Semaphore,
    /// How many `wait` calls are blocked on the gate.
    waiting: watch::Sender<usize>,
    /// How many SSE response bodies are alive (decremented when hyper drops one).
    live_streams: watch::Sender<usize>,
}

struct TestServer {
    addr: SocketAddr,
    inner: Arc<Inner>,
    shutdown: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

impl TestServer {
    async fn start(knobs: Knobs) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let inner = Arc::new(Inner {
            knobs,
            port: addr.port(),
            sessions: Mutex::default(),
            next_session: AtomicU64::new(1),
            seen: Mutex::default(),
            gate: Semaphore::new(0),
            waiting: watch::Sender::new(0),
            live_streams: watch::Sender::new(0),
        });
        let app = Router::new()
            .route("/sse", get(on_sse))
            .route("/message", post(on_message))
            .with_state(inner.clone());
        let (shutdown, stop) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    let _ = stop.await;
                })
                .await
                .unwrap();
        });
        Self {
            addr,
            inner,
            shutdown: Some(shutdown),
            task: Some(task),
        }
    }

    fn url(&self, path: &str) -> Url {
        Url::parse(&format!("http://{}{path}", self.addr)).unwrap()
    }

    fn seen(&self) -> Vec<Seen> {
        self.inner.seen.lock().unwrap().clone()
    }

    /// Ends every open SSE stream, as a server that hangs up.
    fn end_streams(&self) {
        self.inner.sessions.lock().unwrap().clear();
    }

    async fn stop(mut self) {
        self.end_streams();
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(task) = self.task.take() {
            guard("server shutdown", task).await.unwrap();
        }
    }
}

impl Drop for TestServer {
    /// Only reached without `stop()` when a test fails; don't leave the server running.
    fn drop(&mut self) {
        self.end_streams();
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// Counts a live SSE body; hyper drops the body when the client goes away.
struct LiveStream(Arc<Inner>);

impl LiveStream {
    fn new(inner: Arc<Inner>) -> Self {
        inner.live_streams.send_modify(|n| *n += 1);
        Self(inner)
    }
}

impl Drop for LiveStream {
    fn drop(&mut self) {
        self.0.live_streams.send_modify(|n| *n -= 1);
    }
}

fn header_str(headers: &HeaderMap, name: header::HeaderName) -> Option<String> {
    headers
        .get(name)
        .map(|v| v.to_str().unwrap_or("<binary>").to_owned())
}

fn record(inner: &Inner, method: &str, uri: String, headers: &HeaderMap, rpc: Option<&str>) {
    inner.seen.lock().unwrap().push(Seen {
        method: method.to_owned(),
        uri,
        authorization: header_str(headers, header::AUTHORIZATION),
        accept: header_str(headers, header::ACCEPT),
        content_type: header_str(headers, header::CONTENT_TYPE),
        rpc_method: rpc.map(str::to_owned),
    });
}

fn authorized(inner: &Inner, headers: &HeaderMap) -> bool {
    inner.knobs.require_auth.is_none_or(|expected| {
        headers
            .get(header::AUTHORIZATION)
            .is_some_and(|v| v.as_bytes() == expected.as_bytes())
    })
}

/// One SSE event: `event:` plus one `data:` line per line of `data`, and the blank line.
fn event(name: &str, data: &str, line_end: &str) -> String {
    let mut out = format!("event: {name}{line_end}");
    for line in data.split('\n') {
        out.push_str(&format!("data: {line}{line_end}"));
    }
    out.push_str(line_end);
    out
}

/// Writes an event into a session's stream, wrapped in noise when the knob says so.
fn write_event(knobs: &Knobs, tx: &mpsc::UnboundedSender<Bytes>, raw: String) {
    if !knobs.noise {
        let _ = tx.send(Bytes::from(raw));
        return;
    }
    let noisy = format!(
        ": keepalive\n\n\
         :\n\n\
         event: heartbeat\ndata: {{\"beat\":1}}\n\n\
         id: 7\nretry: 1000\nx-custom: ignored\n{raw}\
         : trailing comment\r\n\r\n"
    );
    for piece in noisy.as_bytes().chunks(7) {
        let _ = tx.send(Bytes::copy_from_slice(piece));
    }
}

async fn on_sse(State(inner): State<Arc<Inner>>, headers: HeaderMap) -> Response {
    record(&inner, "GET", "/sse".into(), &headers, None);
    let knobs = &inner.knobs;
    if let Some(status) = knobs.sse_status {
        return (status, "no event stream here").into_response();
    }
    if !authorized(&inner, &headers) {
        return (StatusCode::UNAUTHORIZED, "missing credentials").into_response();
    }

    let (tx, rx) = mpsc::unbounded_channel::<Bytes>();
    let session = format!("s{}", inner.next_session.fetch_add(1, Ordering::Relaxed));
    if knobs.noise {
        let _ = tx.send(Bytes::from_static(b"\xEF\xBB\xBF: hello\n\n"));
    }
    if !knobs.no_endpoint && !knobs.end_before_endpoint {
        let data = knobs
            .endpoint
            .as_deref()
            .unwrap_or("/message?sessionId={session}")
            .replace("{session}", &session)
            .replace("{port}", &inner.port.to_string());
        write_event(knobs, &tx, event("endpoint", &data, "\n"));
    }
    if knobs.end_before_endpoint {
        let _ = tx.send(Bytes::from_static(b": bye\n\n"));
        drop(tx);
    } else {
        inner.sessions.lock().unwrap().insert(session, tx);
    }

    let ticker = knobs.keepalive.map(tokio::time::interval);
    let live = LiveStream::new(inner.clone());
    let body = futures::stream::unfold(
        (rx, ticker, live),
        |(mut rx, mut ticker, live)| async move {
            let bytes = match ticker.as_mut() {
                Some(ticker) => tokio::select! {
                    bytes = rx.recv() => bytes?,
                    _ = ticker.tick() => Bytes::from_static(b": keepalive\n\n"),
                },
                None => rx.recv().await?,
            };
            Some((Ok::<_, Infallible>(bytes), (rx, ticker, live)))
        },
    );
    Response::builder()
        .header(
            header::CONTENT_TYPE,
            knobs.content_type.unwrap_or("text/event-stream"),
        )
        .header(header::CACHE_CONTROL, "no-cache")
        .body(Body::from_stream(body))
        .unwrap()
}

fn result(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

fn text_result(id: &Value, text: &str) -> Value {
    result(
        id,
        json!({"content": [{"type": "text", "text": text}], "isError": false}),
    )
}

fn error(id: &Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

fn echo_schema() -> Value {
    json!({
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"]
    })
}

fn accepted() -> Response {
    (StatusCode::ACCEPTED, "Accepted").into_response()
}

async fn on_message(
    State(inner): State<Arc<Inner>>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let Ok(message) = serde_json::from_slice::<Value>(&body) else {
        return (StatusCode::BAD_REQUEST, "not JSON").into_response();
    };
    let method = message.get("method").and_then(Value::as_str);
    let session = query.get("sessionId").cloned().unwrap_or_default();
    record(
        &inner,
        "POST",
        format!("/message?sessionId={session}"),
        &headers,
        method,
    );
    if !authorized(&inner, &headers) {
        return (StatusCode::UNAUTHORIZED, "missing credentials").into_response();
    }
    let Some(tx) = inner.sessions.lock().unwrap().get(&session).cloned() else {
        return (StatusCode::NOT_FOUND, "unknown session").into_response();
    };
    // Notifications and the client's responses need no answer.
    let (Some(id), Some(method)) = (message.get("id"), method) else {
        return accepted();
    };
    let knobs = &inner.knobs;
    let reply = match method {
        "initialize" => result(
            id,
            json!({
                "protocolVersion": "2024-11-05",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "legacy-test-server", "version": "0.0.1"}
            }),
        ),
        "ping" => result(id, json!({})),
        "tools/list" => result(
            id,
            json!({"tools": [{
                "name": "echo",
                "description": "Echoes its text",
                "inputSchema": echo_schema()
            }]}),
        ),
        "tools/call" => {
            let params = &message["params"];
            match params["name"].as_str().unwrap_or_default() {
                "echo" => text_result(id, params["arguments"]["text"].as_str().unwrap_or_default()),
                "wait" => {
                    inner.waiting.send_modify(|n| *n += 1);
                    inner.gate.acquire().await.unwrap().forget();
                    text_result(id, "waited")
                }
                "release" => {
                    inner.gate.add_permits(1);
                    text_result(id, "released")
                }
                "hang_up" => {
                    // Drop the stream without answering: the call is in flight when it ends.
                    inner.sessions.lock().unwrap().remove(&session);
                    return accepted();
                }
                "big" => {
                    // An over-limit answer first; it must be skipped, and the real one must arrive.
                    let padding = "x".repeat(64 * 1024);
                    let big = text_result(id, &format!("TOO BIG {padding}"));
                    write_event(knobs, &tx, event("message", &big.to_string(), "\n"));
                    text_result(id, "small")
                }
                "multiline" => {
                    let answer = text_result(id, "line one\nline two");
                    let pretty = serde_json::to_string_pretty(&answer).unwrap();
                    assert!(pretty.lines().count() > 5);
                    write_event(knobs, &tx, event("message", &pretty, "\r\n"));
                    return accepted();
                }
                "batch" => {
                    let batch = json!([
                        {"jsonrpc": "2.0", "method": "notifications/message",
                         "params": {"level": "info", "data": "batched"}},
                        text_result(id, "from a batch")
                    ]);
                    write_event(knobs, &tx, event("message", &batch.to_string(), "\n"));
                    return accepted();
                }
                "reject" => {
                    return (StatusCode::INTERNAL_SERVER_ERROR, "boom ".repeat(400))
                        .into_response();
                }
                _ => error(id, -32602, "unknown tool"),
            }
        }
        _ => error(id, -32601, "method not found"),
    };
    write_event(knobs, &tx, event("message", &reply.to_string(), "\n"));
    accepted()
}

// ---------------------------------------------------------------------------------------------
// Client helpers
// ---------------------------------------------------------------------------------------------

const TOKEN: &str = "Bearer s3cret";

fn http_client() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().build().unwrap()
}

fn config(server: &TestServer) -> LegacySseConfig {
    let mut config = LegacySseConfig::new(server.url("/sse"));
    config
        .headers
        .insert(header::AUTHORIZATION, TOKEN.parse().unwrap());
    config.connect_timeout = GUARD;
    config
}

async fn connect(config: LegacySseConfig) -> Result<LegacySseTransport, LegacySseError> {
    guard("connect", legacy_sse::connect(http_client(), config)).await
}

fn echo(text: &str) -> CallToolRequestParams {
    let mut arguments = serde_json::Map::new();
    arguments.insert("text".into(), json!(text));
    CallToolRequestParams::new("echo").with_arguments(arguments)
}

fn tool(name: &'static str) -> CallToolRequestParams {
    CallToolRequestParams::new(name)
}

/// The call result as JSON, for exact comparison with what the server sent.
fn as_json(result: &rmcp::model::CallToolResult) -> Value {
    serde_json::to_value(result).unwrap()
}

fn text_json(text: &str) -> Value {
    json!({"content": [{"type": "text", "text": text}], "isError": false})
}

/// The transport error inside an rmcp service error, if there is one.
fn legacy_error(error: &ServiceError) -> Option<&LegacySseError> {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(current) = source {
        if let Some(found) = current.downcast_ref::<LegacySseError>() {
            return Some(found);
        }
        source = current.source();
    }
    None
}

fn notification() -> ClientJsonRpcMessage {
    serde_json::from_value(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .unwrap()
}

// ---------------------------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn lists_and_calls_tools_over_a_legacy_server() {
    let server = TestServer::start(Knobs {
        require_auth: Some(TOKEN),
        ..Knobs::default()
    })
    .await;
    let transport = connect(config(&server)).await.unwrap();
    assert_eq!(
        transport.endpoint().as_str(),
        server.url("/message?sessionId=s1").as_str()
    );
    let client = guard("initialize", ().serve(transport)).await.unwrap();

    let info = client.peer_info().expect("server info after initialize");
    assert_eq!(info.protocol_version, ProtocolVersion::V_2024_11_05);

    let tools = guard("tools/list", client.list_all_tools()).await.unwrap();
    assert_eq!(tools.len(), 1);
    assert_eq!(tools[0].name, "echo");
    assert_eq!(tools[0].description.as_deref(), Some("Echoes its text"));
    assert_eq!(
        Value::Object((*tools[0].input_schema).clone()),
        echo_schema()
    );

    let text = "hello, legacy ✓ \"quoted\"\nsecond line";
    let result = guard("tools/call", client.call_tool(echo(text)))
        .await
        .unwrap();
    assert_eq!(as_json(&result), text_json(text));

    // 2024-11-05 allowed JSON-RPC batches on the stream.
    let result = guard("batch", client.call_tool(tool("batch")))
        .await
        .unwrap();
    assert_eq!(as_json(&result), text_json("from a batch"));

    guard("client cancel", client.cancel()).await.unwrap();

    let seen = server.seen();
    let get = &seen[0];
    assert_eq!((get.method.as_str(), get.uri.as_str()), ("GET", "/sse"));
    assert_eq!(get.accept.as_deref(), Some("text/event-stream"));
    let posts: Vec<_> = seen.iter().filter(|s| s.method == "POST").collect();
    let methods: Vec<_> = posts
        .iter()
        .map(|s| s.rpc_method.as_deref().unwrap_or("<response>"))
        .collect();
    assert_eq!(
        methods,
        [
            "initialize",
            "notifications/initialized",
            "tools/list",
            "tools/call",
            "tools/call"
        ]
    );
    for request in &seen {
        assert_eq!(request.authorization.as_deref(), Some(TOKEN), "{request:?}");
    }
    for post in posts {
        assert_eq!(post.uri, "/message?sessionId=s1");
        assert_eq!(post.content_type.as_deref(), Some("application/json"));
    }
    server.stop().await;
}

#[tokio::test]
async fn auto_lifecycle_falls_back_to_initialize() {
    // How Portico connects: `server/discover` first, which a legacy server answers with an error.
    let server = TestServer::start(Knobs::default()).await;
    let transport = connect(config(&server)).await.unwrap();
    let lifecycle = ClientLifecycleMode::Auto {
        preferred_versions: vec![ProtocolVersion::LATEST],
        legacy_version: Some(ProtocolVersion::LATEST_WITH_INITIALIZE),
    };
    let client = guard("handshake", ().serve_with_lifecycle(transport, lifecycle))
        .await
        .unwrap();
    assert_eq!(
        client.peer_info().unwrap().protocol_version,
        ProtocolVersion::V_2024_11_05
    );
    let result = guard("tools/call", client.call_tool(echo("auto")))
        .await
        .unwrap();
    assert_eq!(as_json(&result), text_json("auto"));
    let methods: Vec<_> = server
        .seen()
        .into_iter()
        .filter_map(|s| s.rpc_method)
        .collect();
    assert_eq!(&methods[..2], ["server/discover", "initialize"]);
    guard("client cancel", client.cancel()).await.unwrap();
    server.stop().await;
}

#[tokio::test]
async fn refuses_an_endpoint_on_another_origin() {
    let decoy = TestServer::start(Knobs::default()).await;
    for endpoint in [
        // Another port: a real server that would accept the POST.
        format!("http://127.0.0.1:{}/message", decoy.addr.port()),
        // Another scheme, same host and port.
        String::from("https://127.0.0.1:{port}/message?sessionId={session}"),
        // Another host name for the same address and port.
        String::from("http://localhost:{port}/message?sessionId={session}"),
        // Scheme-relative to another host.
        String::from("//example.com/message"),
    ] {
        let server = TestServer::start(Knobs {
            endpoint: Some(endpoint.clone()),
            ..Knobs::default()
        })
        .await;
        let err = connect(config(&server)).await.unwrap_err();
        let LegacySseError::CrossOriginEndpoint {
            url,
            endpoint: refused,
        } = &err
        else {
            panic!("{endpoint}: expected a cross-origin refusal, got {err}");
        };
        assert_eq!(url, &server.url("/sse"));
        assert_ne!(refused.origin(), url.origin());
        let message = err.to_string();
        assert!(message.contains("refusing endpoint"), "{message}");
        assert!(message.contains("same origin"), "{message}");
        // Nothing but the GET reached the server, and nothing at all reached the decoy.
        assert!(server.seen().iter().all(|s| s.method == "GET"));
        server.stop().await;
    }
    assert!(decoy.seen().is_empty(), "{:?}", decoy.seen());
    decoy.stop().await;
}

#[tokio::test]
async fn get_404_or_405_means_not_legacy_sse() {
    for status in [StatusCode::NOT_FOUND, StatusCode::METHOD_NOT_ALLOWED] {
        let server = TestServer::start(Knobs {
            sse_status: Some(status),
            ..Knobs::default()
        })
        .await;
        let err = connect(config(&server)).await.unwrap_err();
        assert!(
            matches!(&err, LegacySseError::Status { status: s, body, .. } if *s == status && body == "no event stream here"),
            "{err:?}"
        );
        assert!(err.is_not_legacy_sse());
        assert_eq!(err.status(), Some(status));
        let message = err.to_string();
        assert!(
            message.contains(&server.url("/sse").to_string()),
            "{message}"
        );
        assert!(message.contains(status.as_str()), "{message}");
        assert!(
            message.contains("does not speak the legacy HTTP+SSE transport"),
            "{message}"
        );
        server.stop().await;
    }

    let server = TestServer::start(Knobs {
        sse_status: Some(StatusCode::UNAUTHORIZED),
        ..Knobs::default()
    })
    .await;
    let err = connect(config(&server)).await.unwrap_err();
    assert!(!err.is_not_legacy_sse());
    assert!(err.to_string().contains("credentials"), "{err}");
    server.stop().await;
}

#[tokio::test]
async fn a_response_that_is_not_an_event_stream_is_refused() {
    let server = TestServer::start(Knobs {
        content_type: Some("application/json"),
        ..Knobs::default()
    })
    .await;
    let err = connect(config(&server)).await.unwrap_err();
    assert!(
        matches!(&err, LegacySseError::NotEventStream { content_type: Some(ct), .. } if ct == "application/json"),
        "{err:?}"
    );
    assert!(err.is_not_legacy_sse());
    server.stop().await;

    // Parameters and case do not matter.
    let server = TestServer::start(Knobs {
        content_type: Some("Text/Event-Stream; charset=utf-8"),
        ..Knobs::default()
    })
    .await;
    let transport = connect(config(&server)).await.unwrap();
    drop(transport);
    server.stop().await;
}

#[tokio::test]
async fn no_endpoint_event_times_out() {
    let server = TestServer::start(Knobs {
        no_endpoint: true,
        keepalive: Some(Duration::from_millis(20)),
        ..Knobs::default()
    })
    .await;
    let mut config = config(&server);
    config.connect_timeout = Duration::from_millis(300);
    let err = connect(config).await.unwrap_err();
    assert!(
        matches!(&err, LegacySseError::EndpointTimeout { timeout, .. } if *timeout == Duration::from_millis(300)),
        "{err:?}"
    );
    assert!(err.to_string().contains("no `endpoint` event"), "{err}");
    server.stop().await;
}

#[tokio::test]
async fn stream_ending_before_the_endpoint_is_reported() {
    let server = TestServer::start(Knobs {
        end_before_endpoint: true,
        ..Knobs::default()
    })
    .await;
    let err = connect(config(&server)).await.unwrap_err();
    assert!(
        matches!(err, LegacySseError::EndedBeforeEndpoint { .. }),
        "{err:?}"
    );
    server.stop().await;
}

#[tokio::test]
async fn stream_closed_mid_call_fails_the_call_promptly() {
    let server = TestServer::start(Knobs::default()).await;
    let transport = connect(config(&server)).await.unwrap();
    let client = guard("initialize", ().serve(transport)).await.unwrap();

    // The server drops the stream without answering; the call must fail, not wait for a timeout.
    let err = guard("in-flight call", client.call_tool(tool("hang_up")))
        .await
        .unwrap_err();
    assert!(
        matches!(err, ServiceError::TransportClosed)
            || matches!(legacy_error(&err), Some(LegacySseError::StreamEnded { .. })),
        "{err:?}"
    );

    // The service saw the transport close, and later calls fail at once.
    let err = guard("call after close", client.call_tool(echo("late")))
        .await
        .unwrap_err();
    assert!(matches!(err, ServiceError::TransportClosed), "{err:?}");
    let reason = guard("service end", client.waiting()).await.unwrap();
    assert!(
        matches!(reason, rmcp::service::QuitReason::Closed),
        "{reason:?}"
    );
    server.stop().await;
}

#[tokio::test]
async fn stream_end_makes_receive_return_none_and_sends_fail() {
    let server = TestServer::start(Knobs::default()).await;
    let mut transport = connect(config(&server)).await.unwrap();
    server.end_streams();
    assert!(guard("receive", transport.receive()).await.is_none());
    let err = guard("send", transport.send(notification()))
        .await
        .unwrap_err();
    assert!(matches!(err, LegacySseError::StreamEnded { .. }), "{err:?}");
    assert!(err.to_string().contains("has ended"), "{err}");
    server.stop().await;
}

#[tokio::test]
async fn an_oversized_event_is_skipped_and_the_next_message_arrives() {
    let server = TestServer::start(Knobs::default()).await;
    let mut config = config(&server);
    config.max_event_bytes = 4096;
    let transport = connect(config).await.unwrap();
    let client = guard("initialize", ().serve(transport)).await.unwrap();
    // The server first sends a 64 KiB answer with the same id, then the real one.
    let result = guard("tools/call", client.call_tool(tool("big")))
        .await
        .unwrap();
    assert_eq!(as_json(&result), text_json("small"));
    // The session is still usable.
    let result = guard("tools/call", client.call_tool(echo("after")))
        .await
        .unwrap();
    assert_eq!(as_json(&result), text_json("after"));
    guard("client cancel", client.cancel()).await.unwrap();
    server.stop().await;
}

#[tokio::test]
async fn multi_line_data_is_joined() {
    let server = TestServer::start(Knobs::default()).await;
    let transport = connect(config(&server)).await.unwrap();
    let client = guard("initialize", ().serve(transport)).await.unwrap();
    // The answer is pretty-printed JSON, one `data:` line per line, with CRLF line endings.
    let result = guard("tools/call", client.call_tool(tool("multiline")))
        .await
        .unwrap();
    assert_eq!(as_json(&result), text_json("line one\nline two"));
    guard("client cancel", client.cancel()).await.unwrap();
    server.stop().await;
}

#[tokio::test]
async fn keepalives_comments_and_unknown_events_are_ignored() {
    let server = TestServer::start(Knobs {
        noise: true,
        keepalive: Some(Duration::from_millis(5)),
        ..Knobs::default()
    })
    .await;
    let transport = connect(config(&server)).await.unwrap();
    let client = guard("initialize", ().serve(transport)).await.unwrap();
    assert_eq!(
        client.peer_info().unwrap().protocol_version,
        ProtocolVersion::V_2024_11_05
    );
    let tools = guard("tools/list", client.list_all_tools()).await.unwrap();
    assert_eq!(tools.len(), 1);
    for text in ["one", "two", "three"] {
        let result = guard("tools/call", client.call_tool(echo(text)))
            .await
            .unwrap();
        assert_eq!(as_json(&result), text_json(text));
    }
    let result = guard("multiline", client.call_tool(tool("multiline")))
        .await
        .unwrap();
    assert_eq!(as_json(&result), text_json("line one\nline two"));
    guard("client cancel", client.cancel()).await.unwrap();
    server.stop().await;
}

#[tokio::test]
async fn a_failed_post_fails_the_send() {
    let server = TestServer::start(Knobs::default()).await;
    let transport = connect(config(&server)).await.unwrap();
    let client = guard("initialize", ().serve(transport)).await.unwrap();
    let err = guard("tools/call", client.call_tool(tool("reject")))
        .await
        .unwrap_err();
    let Some(LegacySseError::PostStatus { url, status, body }) = legacy_error(&err) else {
        panic!("expected the POST status, got {err:?}");
    };
    assert_eq!(*status, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(url.as_str(), server.url("/message?sessionId=s1").as_str());
    assert_eq!(body.len(), 500);
    assert!(body.starts_with("boom boom"), "{body}");
    let message = legacy_error(&err).unwrap().to_string();
    assert!(message.contains("500"), "{message}");

    // Only that request failed; the session goes on.
    let result = guard("tools/call", client.call_tool(echo("still here")))
        .await
        .unwrap();
    assert_eq!(as_json(&result), text_json("still here"));
    guard("client cancel", client.cancel()).await.unwrap();
    server.stop().await;
}

#[tokio::test]
async fn sends_do_not_wait_for_each_other() {
    let server = TestServer::start(Knobs::default()).await;
    let transport = connect(config(&server)).await.unwrap();
    let client = guard("initialize", ().serve(transport)).await.unwrap();

    // `wait`'s POST does not complete until `release` has been received: with serialised sends this
    // deadlocks.
    let peer = client.peer().clone();
    let waiting = tokio::spawn(async move { peer.call_tool(tool("wait")).await });
    let mut blocked = server.inner.waiting.subscribe();
    guard("wait reaches the server", blocked.wait_for(|n| *n == 1))
        .await
        .unwrap();
    let released = guard("release", client.call_tool(tool("release")))
        .await
        .unwrap();
    assert_eq!(as_json(&released), text_json("released"));
    let waited = guard("wait", waiting).await.unwrap().unwrap();
    assert_eq!(as_json(&waited), text_json("waited"));
    guard("client cancel", client.cancel()).await.unwrap();
    server.stop().await;
}

#[tokio::test]
async fn close_stops_the_reader_and_drops_the_stream() {
    let server = TestServer::start(Knobs {
        keepalive: Some(Duration::from_millis(20)),
        ..Knobs::default()
    })
    .await;
    let mut transport = connect(config(&server)).await.unwrap();
    let mut live = server.inner.live_streams.subscribe();
    assert_eq!(*live.borrow(), 1);

    guard("close", transport.close()).await.unwrap();
    assert!(guard("receive", transport.receive()).await.is_none());
    let err = guard("send", transport.send(notification()))
        .await
        .unwrap_err();
    assert!(matches!(err, LegacySseError::Closed { .. }), "{err:?}");
    // The server notices the client went away (on its next keepalive write).
    guard("server sees the stream dropped", live.wait_for(|n| *n == 0))
        .await
        .unwrap();
    // Closing twice is harmless.
    guard("close again", transport.close()).await.unwrap();
    server.stop().await;
}

#[tokio::test]
async fn non_http_urls_are_refused() {
    let mut config = LegacySseConfig::new(Url::parse("ftp://127.0.0.1/sse").unwrap());
    config.connect_timeout = GUARD;
    let err = connect(config).await.unwrap_err();
    assert!(
        matches!(err, LegacySseError::UnsupportedScheme { .. }),
        "{err:?}"
    );
}
