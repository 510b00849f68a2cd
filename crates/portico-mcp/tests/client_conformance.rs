//! What the MCP conformance suite's client scenarios found in Portico's client edge, each against a
//! small Streamable HTTP server (axum on 127.0.0.1) that answers as the scenario's server did, with
//! a real `Upstream` connecting to it. `scripts/conformance-client` runs the suite itself.
//!
//! Timeouts here are guards against hangs, never synchronisation.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use portico_core::JsonObject;
use portico_core::relay::{
    BoxFuture, CallContext, Caller, RelayError, RelayNotification, RelayRequest, SamplingAnswer,
    SamplingError, SamplingRequest,
};
use portico_mcp::{StopGrace, Upstream};
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};

const GUARD: Duration = Duration::from_secs(10);

async fn guard<F: Future>(what: &str, future: F) -> F::Output {
    tokio::time::timeout(GUARD, future)
        .await
        .unwrap_or_else(|_| panic!("{what} did not finish within {GUARD:?}"))
}

/// How the server answers.
#[derive(Clone, Copy)]
enum Era {
    /// A handshake-era server that answers every method it does not know, `server/discover`
    /// included, with an empty result (the suite's `initialize` and `sse-retry` servers).
    HandshakeAnsweringEverything,
    /// The same, but refusing `initialize` too.
    AnsweringEverythingButInitialize,
    /// A 2026-07-28 server whose `ask` tool needs a form filled in first: its first answer is
    /// `input_required` with an elicitation whose fields declare defaults.
    Stateless,
}

struct Inner {
    era: Era,
    /// Every request's method, in arrival order.
    methods: Mutex<Vec<String>>,
    /// The `inputResponses` of each `tools/call` that carried them, and the handshake-era server's
    /// answers to its `elicitation/create`.
    input_responses: Mutex<Vec<Value>>,
    /// Where the client's answer to the handshake-era server's `elicitation/create` goes.
    elicitation_answer: Mutex<Option<oneshot::Sender<Value>>>,
}

struct TestServer {
    url: String,
    inner: Arc<Inner>,
    shutdown: Option<oneshot::Sender<()>>,
}

impl TestServer {
    async fn start(era: Era) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let inner = Arc::new(Inner {
            era,
            methods: Mutex::default(),
            input_responses: Mutex::default(),
            elicitation_answer: Mutex::default(),
        });
        let app = Router::new()
            .route(
                "/mcp",
                post(on_post).get(|| async { StatusCode::METHOD_NOT_ALLOWED }),
            )
            .with_state(inner.clone());
        let (shutdown, stop) = oneshot::channel::<()>();
        tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    let _ = stop.await;
                })
                .await
                .unwrap();
        });
        TestServer {
            url: format!("http://{addr}/mcp"),
            inner,
            shutdown: Some(shutdown),
        }
    }

    fn methods(&self) -> Vec<String> {
        self.inner.methods.lock().unwrap().clone()
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
    }
}

fn answer(id: &Value, result: Value) -> Response {
    axum::Json(json!({"jsonrpc": "2.0", "id": id, "result": result})).into_response()
}

/// The profile form both eras ask for: three fields with defaults and one without.
fn profile_form() -> Value {
    json!({
        "mode": "form",
        "message": "Your profile",
        "requestedSchema": {
            "type": "object",
            "properties": {
                "name": {"type": "string", "default": "John Doe"},
                "age": {"type": "integer", "default": 30},
                "verified": {"type": "boolean", "default": true},
                "note": {"type": "string"}
            }
        }
    })
}

/// A handshake-era `tools/call` of `form`: the answer is an event stream that first asks the client
/// `elicitation/create`, then, once the client has posted its answer, carries the call's result.
fn asking_stream(inner: Arc<Inner>, id: Value) -> Response {
    let (answered, answer) = oneshot::channel();
    *inner.elicitation_answer.lock().unwrap() = Some(answered);
    let ask = json!({"jsonrpc": "2.0", "id": "ask-1", "method": "elicitation/create", "params": profile_form()});
    let first = futures::stream::once(async move { format!("data: {ask}\n\n") });
    let then = futures::stream::once(async move {
        let content = answer.await.unwrap_or_default();
        inner.input_responses.lock().unwrap().push(content);
        let result = json!({"jsonrpc": "2.0", "id": id,
            "result": {"content": [{"type": "text", "text": "thanks"}]}});
        format!("data: {result}\n\n")
    });
    let events = futures::StreamExt::map(futures::StreamExt::chain(first, then), |event| {
        Ok::<_, std::convert::Infallible>(bytes::Bytes::from(event))
    });
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(axum::body::Body::from_stream(events))
        .unwrap()
}

async fn on_post(State(inner): State<Arc<Inner>>, axum::Json(body): axum::Json<Value>) -> Response {
    if body.get("method").is_none() {
        // The client's answer to what the server asked.
        if let Some(answered) = inner.elicitation_answer.lock().unwrap().take() {
            let _ = answered.send(body["result"].clone());
        }
        return StatusCode::ACCEPTED.into_response();
    }
    let method = body["method"].as_str().unwrap_or_default().to_string();
    inner.methods.lock().unwrap().push(method.clone());
    let Some(id) = body.get("id") else {
        return StatusCode::ACCEPTED.into_response();
    };
    let tools = json!({"tools": [{"name": "ask", "inputSchema": {"type": "object"}}]});
    match (inner.era, method.as_str()) {
        (Era::HandshakeAnsweringEverything, "initialize") => answer(
            id,
            json!({
                "protocolVersion": body["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "handshake-server", "version": "1.0.0"}
            }),
        ),
        (Era::HandshakeAnsweringEverything, "tools/list") => answer(id, tools),
        (Era::HandshakeAnsweringEverything, "tools/call") if body["params"]["name"] == "form" => {
            asking_stream(inner.clone(), id.clone())
        }
        (Era::HandshakeAnsweringEverything, "tools/call") => answer(
            id,
            json!({"content": [{"type": "text", "text": "answered"}]}),
        ),
        (Era::HandshakeAnsweringEverything, _) => answer(id, json!({})),
        (Era::AnsweringEverythingButInitialize, "initialize") => axum::Json(json!({
            "jsonrpc": "2.0", "id": id,
            "error": {"code": -32603, "message": "no initialize here"}
        }))
        .into_response(),
        (Era::AnsweringEverythingButInitialize, _) => answer(id, json!({})),
        (Era::Stateless, "server/discover") => answer(
            id,
            json!({
                "resultType": "complete",
                "ttlMs": 0,
                "cacheScope": "private",
                "supportedVersions": ["2026-07-28"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "stateless-server", "version": "1.0.0"}
            }),
        ),
        (Era::Stateless, "tools/list") => {
            let mut tools = tools;
            tools["resultType"] = json!("complete");
            tools["ttlMs"] = json!(0);
            tools["cacheScope"] = json!("private");
            answer(id, tools)
        }
        (Era::Stateless, "tools/call") => match body["params"].get("inputResponses") {
            None => answer(
                id,
                json!({
                    "resultType": "input_required",
                    "inputRequests": {"profile": {
                        "method": "elicitation/create",
                        "params": profile_form()
                    }}

                }),
            ),
            Some(responses) => {
                inner
                    .input_responses
                    .lock()
                    .unwrap()
                    .push(responses.clone());
                answer(
                    id,
                    json!({"resultType": "complete", "content": [{"type": "text", "text": "thanks"}]}),
                )
            }
        },
        (Era::Stateless, _) => axum::Json(json!({
            "jsonrpc": "2.0", "id": id,
            "error": {"code": -32601, "message": format!("no method {method}")}
        }))
        .into_response(),
    }
}

fn config(url: &str, kind: &str) -> portico_config::McpServerConfig {
    let toml = format!(
        "[[mcp_servers]]\nname = \"s\"\nallow_private_network = true\ntimeout_secs = 5\n\
         [mcp_servers.transport]\ntype = {kind:?}\nurl = {url:?}\n"
    );
    let mut config = portico_config::parse("test", &toml).unwrap();
    config.mcp_servers.remove(0)
}

/// Connects as a `type = "http"` entry, or as `kind` (`sse`, which tries Streamable HTTP first).
async fn connect(server: &TestServer) -> Upstream {
    connect_as(server, "http").await
}

async fn connect_as(server: &TestServer, kind: &str) -> Upstream {
    let (events, _) = mpsc::unbounded_channel();
    let (upstream, _exit) = guard(
        "connect",
        Upstream::connect(&config(&server.url, kind), events, StopGrace::BRIEF),
    )
    .await
    .unwrap_or_else(|e| panic!("connect: {e}"));
    upstream
}

/// A client that fills in a form with only the name, as a client of an era without defaults would.
struct NameOnly;

impl Caller for NameOnly {
    fn accepts(&self, request: RelayRequest) -> bool {
        request == RelayRequest::Elicitation
    }

    fn request<'a>(
        &'a self,
        _request: RelayRequest,
        _params: JsonObject,
    ) -> BoxFuture<'a, Result<JsonObject, RelayError>> {
        Box::pin(async {
            Ok(json!({"action": "accept", "content": {"name": "Ada"}})
                .as_object()
                .cloned()
                .unwrap())
        })
    }

    fn sample<'a>(
        &'a self,
        request: SamplingRequest,
    ) -> BoxFuture<'a, Result<SamplingAnswer, SamplingError>> {
        portico_mcp::sample_through(self, request)
    }

    fn notify<'a>(
        &'a self,
        _notification: RelayNotification,
        _params: JsonObject,
    ) -> BoxFuture<'a, ()> {
        Box::pin(async {})
    }
}

#[tokio::test]
async fn a_server_answering_discover_with_an_empty_result_is_connected_with_initialize() {
    let server = TestServer::start(Era::HandshakeAnsweringEverything).await;
    let upstream = connect(&server).await;
    assert_eq!(upstream.info().protocol_version, "2025-11-25");
    assert_eq!(upstream.info().transport, "streamable-http");
    let result = guard("call", upstream.call_tool("ask", None))
        .await
        .unwrap();
    assert_eq!(
        Value::Array(result.content),
        json!([{"type": "text", "text": "answered"}])
    );
    assert_eq!(
        server.methods(),
        [
            "server/discover",
            "initialize",
            "notifications/initialized",
            "tools/call"
        ]
    );
    upstream.shutdown();
}

#[tokio::test]
async fn when_initialize_fails_too_the_error_says_what_discover_was_answered_with() {
    let server = TestServer::start(Era::AnsweringEverythingButInitialize).await;
    let (events, _) = mpsc::unbounded_channel();
    let error = guard(
        "connect",
        Upstream::connect(&config(&server.url, "http"), events, StopGrace::BRIEF),
    )
    .await
    .err()
    .expect("the handshake must fail")
    .to_string();
    assert!(
        error.starts_with(
            "server `s`: handshake failed: `server/discover` was answered with a result that is \
             not a discover result, and `initialize` then failed: "
        ),
        "{error}"
    );
    assert!(
        error.contains("and `initialize` then failed: ") && error.contains("no initialize here"),
        "{error}"
    );
    assert_eq!(server.methods(), ["server/discover", "initialize"]);
}

#[tokio::test]
async fn an_sse_entry_at_such_a_server_is_connected_over_streamable_http_with_initialize() {
    let server = TestServer::start(Era::HandshakeAnsweringEverything).await;
    let upstream = connect_as(&server, "sse").await;
    assert_eq!(upstream.info().protocol_version, "2025-11-25");
    assert_eq!(upstream.info().transport, "streamable-http");
    // A call after the handshake, so the initialized notification has certainly been posted.
    guard("call", upstream.call_tool("ask", None))
        .await
        .unwrap();
    assert_eq!(
        server.methods(),
        [
            "server/discover",
            "initialize",
            "notifications/initialized",
            "tools/call"
        ]
    );
    upstream.shutdown();
}

#[tokio::test]
async fn an_input_rounds_elicitation_answer_reaches_the_server_with_the_forms_defaults() {
    let server = TestServer::start(Era::Stateless).await;
    let upstream = connect(&server).await;
    assert_eq!(upstream.info().protocol_version, "2026-07-28");
    let context = CallContext {
        caller: Some(Arc::new(NameOnly)),
        progress: false,
    };
    let result = guard("call", upstream.call_tool_with("ask", None, &context))
        .await
        .unwrap();
    assert_eq!(
        Value::Array(result.content),
        json!([{"type": "text", "text": "thanks"}])
    );
    assert_eq!(
        *server.inner.input_responses.lock().unwrap(),
        [json!({"profile": {
            "action": "accept",
            "content": {"name": "Ada", "age": 30, "verified": true}
        }})]
    );
    upstream.shutdown();
}

#[tokio::test]
async fn a_relayed_elicitation_answer_reaches_a_handshake_era_server_with_the_forms_defaults() {
    let server = TestServer::start(Era::HandshakeAnsweringEverything).await;
    let upstream = connect(&server).await;
    assert_eq!(upstream.info().protocol_version, "2025-11-25");
    let context = CallContext {
        caller: Some(Arc::new(NameOnly)),
        progress: false,
    };
    let result = guard("call", upstream.call_tool_with("form", None, &context))
        .await
        .unwrap();
    assert_eq!(
        Value::Array(result.content),
        json!([{"type": "text", "text": "thanks"}])
    );
    assert_eq!(
        *server.inner.input_responses.lock().unwrap(),
        [json!({"action": "accept", "content": {"name": "Ada", "age": 30, "verified": true}})]
    );
    upstream.shutdown();
}
