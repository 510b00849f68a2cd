//! `[telemetry] otlp_endpoint`: a call through the HTTP door is one trace, continuing the caller's
//! `traceparent`: door → pipeline → its stages → upstream, whose context the upstream receives.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use rmcp::handler::server::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, InitializeResult, ListToolsResult,
    PaginatedRequestParams,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::client::*;

/// The caller's trace and span, as its `traceparent` names them.
const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN_ID: &str = "00f067aa0ba902b7";
/// An argument value no exported byte may contain.
const SECRET_ARGUMENT: &str = "argument-value-7f3c91-never-exported";

/// What a collector received: each export request's body, as sent.
#[derive(Clone, Default)]
struct Collector {
    bodies: Arc<Mutex<Vec<Bytes>>>,
}

impl Collector {
    /// Serves OTLP/HTTP `POST /v1/traces` on 127.0.0.1 until `stop`; its URL.
    async fn start(&self, stop: CancellationToken) -> String {
        let bodies = self.bodies.clone();
        let app = axum::Router::new().route(
            "/v1/traces",
            axum::routing::post(move |body: Bytes| {
                let bodies = bodies.clone();
                async move {
                    bodies.lock().unwrap().push(body);
                    // An empty ExportTraceServiceResponse: every span taken.
                    (
                        [("content-type", "application/x-protobuf")],
                        Vec::<u8>::new(),
                    )
                }
            }),
        );
        serve(app, stop, "/v1/traces").await
    }

    /// Every span received so far.
    fn spans(&self) -> Vec<Span> {
        self.bodies
            .lock()
            .unwrap()
            .iter()
            .flat_map(|body| {
                let request = ExportTraceServiceRequest::decode(body.as_ref())
                    .expect("the exporter sends OTLP protobuf");
                request
                    .resource_spans
                    .into_iter()
                    .flat_map(|resource| resource.scope_spans)
                    .flat_map(|scope| scope.spans)
            })
            .collect()
    }

    /// Every `service.name` the exports' resources carry.
    fn service_names(&self) -> Vec<String> {
        self.bodies
            .lock()
            .unwrap()
            .iter()
            .flat_map(|body| {
                ExportTraceServiceRequest::decode(body.as_ref())
                    .unwrap()
                    .resource_spans
            })
            .filter_map(|resource| resource.resource)
            .flat_map(|resource| resource.attributes)
            .filter(|attribute| attribute.key == "service.name")
            .filter_map(|attribute| string_value(attribute.value))
            .collect()
    }

    fn everything_received(&self) -> Vec<u8> {
        self.bodies.lock().unwrap().concat()
    }
}

fn string_value(value: Option<opentelemetry_proto::tonic::common::v1::AnyValue>) -> Option<String> {
    match value?.value? {
        AnyValue::StringValue(text) => Some(text),
        AnyValue::IntValue(number) => Some(number.to_string()),
        _ => None,
    }
}

fn attribute(span: &Span, key: &str) -> Option<String> {
    span.attributes
        .iter()
        .find(|attribute| attribute.key == key)
        .and_then(|attribute| string_value(attribute.value.clone()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

async fn serve(app: axum::Router, stop: CancellationToken, path: &str) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}{path}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(stop.cancelled_owned())
            .await
            .unwrap();
    });
    url
}

/// The trace context one call arrived with: its `traceparent` header, its `_meta.traceparent`.
type Arrived = (Option<String>, Option<String>);

/// An MCP server on Streamable HTTP (rmcp's) with one tool, `echo`, which records the trace
/// context each call arrived with.
#[derive(Clone, Default)]
struct TracedUpstream {
    seen: Arc<Mutex<Vec<Arrived>>>,
}

impl ServerHandler for TracedUpstream {
    fn get_info(&self) -> InitializeResult {
        serde_json::from_value(json!({
            "protocolVersion": "2025-06-18",
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "traced-upstream", "version": "1"}
        }))
        .unwrap()
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, rmcp::ErrorData> {
        Ok(serde_json::from_value(json!({"tools": [{
            "name": "echo",
            "description": "Answers `done`.",
            "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}
        }]}))
        .unwrap())
    }

    async fn call_tool(
        &self,
        _request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, rmcp::ErrorData> {
        let header = context
            .extensions
            .get::<http::request::Parts>()
            .and_then(|parts| parts.headers.get("traceparent"))
            .and_then(|value| value.to_str().ok())
            .map(str::to_string);
        let meta = context.meta.get_traceparent().map(str::to_string);
        self.seen.lock().unwrap().push((header, meta));
        let result: rmcp::model::CallToolResult =
            serde_json::from_value(json!({"content": [{"type": "text", "text": "done"}]})).unwrap();
        Ok(result.into())
    }
}

impl TracedUpstream {
    async fn start(&self, stop: CancellationToken) -> String {
        let handler = self.clone();
        let service = StreamableHttpService::new(
            move || Ok(handler.clone()),
            Arc::new(LocalSessionManager::default()),
            StreamableHttpServerConfig::default().with_cancellation_token(stop.child_token()),
        );
        serve(
            axum::Router::new().route_service("/mcp", service),
            stop,
            "/mcp",
        )
        .await
    }
}

/// Polls the collector until `done` holds of its spans (the export is batched), within a guard.
async fn spans_when(collector: &Collector, done: impl Fn(&[Span]) -> bool) -> Vec<Span> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let spans = collector.spans();
        if done(&spans) {
            return spans;
        }
        assert!(
            Instant::now() < deadline,
            "the collector never received the spans (test guard); got {:#?}",
            spans.iter().map(|s| &s.name).collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_is_one_trace_from_the_callers_traceparent_to_the_upstream() {
    let stop = CancellationToken::new();
    let collector = Collector::default();
    let collector_url = collector.start(stop.clone()).await;
    let upstream = TracedUpstream::default();
    let upstream_url = upstream.start(stop.clone()).await;
    let home = Home::new(&format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n[telemetry]\notlp_endpoint = {collector_url:?}\nservice_name = \"portico-under-test\"\n\n{}",
        crate::support::url_entry("up", "http", &upstream_url, "allow_private_network = true")
    ));
    // A short batch delay: the test waits for the export, it does not sleep for it.
    let mut daemon = Daemon::start_with_env(&home, &[("OTEL_BSP_SCHEDULE_DELAY", "50")]);
    daemon.wait_for_line("portico: ready");

    let traceparent = format!("00-{TRACE_ID}-{CALLER_SPAN_ID}-01");
    let answer: Value = reqwest::Client::builder()
        .no_proxy()
        .build()
        .unwrap()
        .post(format!("{}/mcp", daemon.base))
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", "mcp_up_echo")
        .header("traceparent", &traceparent)
        .json(
            &json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
                "name": "mcp_up_echo",
                "arguments": {"text": SECRET_ARGUMENT},
                "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                          "io.modelcontextprotocol/clientCapabilities": {}}
            }}),
        )
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(answer["result"]["content"][0]["text"], "done", "{answer}");

    let trace_id = (0..16)
        .map(|i| u8::from_str_radix(&TRACE_ID[2 * i..2 * i + 2], 16).unwrap())
        .collect::<Vec<u8>>();
    let spans = spans_when(&collector, |spans| {
        ["door", "pipeline", "upstream"].iter().all(|name| {
            spans
                .iter()
                .any(|s| s.name == *name && s.trace_id == trace_id)
        })
    })
    .await;
    let named = |name: &str| -> &Span {
        let found: Vec<&Span> = spans.iter().filter(|s| s.name == name).collect();
        assert_eq!(found.len(), 1, "one `{name}` span: {spans:#?}");
        found[0]
    };

    // Every span is Portico's own, of this one call, in the caller's trace.
    let mut names: Vec<&str> = spans.iter().map(|s| s.name.as_str()).collect();
    names.sort();
    assert_eq!(
        names,
        [
            "door", "execute", "pipeline", "policy", "resolve", "upstream"
        ]
    );
    assert!(spans.iter().all(|s| s.trace_id == trace_id), "{spans:#?}");

    // The parent chain: caller → door → pipeline → its stages; the upstream inside `execute`.
    let (door, pipeline, execute, upstream_span) = (
        named("door"),
        named("pipeline"),
        named("execute"),
        named("upstream"),
    );
    assert_eq!(hex(&door.parent_span_id), CALLER_SPAN_ID);
    assert_eq!(pipeline.parent_span_id, door.span_id);
    for stage in ["resolve", "policy", "execute"] {
        assert_eq!(named(stage).parent_span_id, pipeline.span_id, "{stage}");
    }
    assert_eq!(upstream_span.parent_span_id, execute.span_id);

    // What they say: names and kinds.
    assert_eq!(attribute(door, "url.path").as_deref(), Some("/mcp"));
    assert_eq!(attribute(door, "mcp.method").as_deref(), Some("tools/call"));
    assert_eq!(
        attribute(door, "http.response.status_code").as_deref(),
        Some("200")
    );
    assert_eq!(attribute(pipeline, "tool").as_deref(), Some("mcp_up_echo"));
    assert_eq!(attribute(pipeline, "principal").as_deref(), Some("client"));
    assert_eq!(attribute(pipeline, "outcome").as_deref(), Some("ok"));
    assert_eq!(attribute(upstream_span, "server").as_deref(), Some("up"));
    assert_eq!(attribute(upstream_span, "tool").as_deref(), Some("echo"));
    assert_eq!(
        attribute(upstream_span, "transport").as_deref(),
        Some("streamable-http")
    );
    assert!(
        collector
            .service_names()
            .iter()
            .all(|name| name == "portico-under-test")
    );

    // The upstream received the upstream span's context, as the header and in `_meta`.
    let expected = format!("00-{TRACE_ID}-{}-01", hex(&upstream_span.span_id));
    assert_eq!(
        upstream.seen.lock().unwrap().clone(),
        [(Some(expected.clone()), Some(expected))]
    );

    // No argument value left the process in a span.
    let received = collector.everything_received();
    assert!(
        !received
            .windows(SECRET_ARGUMENT.len())
            .any(|window| window == SECRET_ARGUMENT.as_bytes()),
        "an argument value was exported"
    );

    assert!(daemon.stop().success());
    stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_telemetry_nothing_is_propagated() {
    let stop = CancellationToken::new();
    let upstream = TracedUpstream::default();
    let upstream_url = upstream.start(stop.clone()).await;
    let home = Home::new(&format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n{}",
        crate::support::url_entry("up", "http", &upstream_url, "allow_private_network = true")
    ));
    let mut daemon = Daemon::start(&home);
    daemon.wait_for_line("portico: ready");
    let answer: Value = reqwest::Client::builder()
        .no_proxy()
        .build()
        .unwrap()
        .post(format!("{}/mcp", daemon.base))
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", "mcp_up_echo")
        .header("traceparent", format!("00-{TRACE_ID}-{CALLER_SPAN_ID}-01"))
        .json(
            &json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
                "name": "mcp_up_echo",
                "arguments": {"text": "x"},
                "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                          "io.modelcontextprotocol/clientCapabilities": {}}
            }}),
        )
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(answer["result"]["content"][0]["text"], "done", "{answer}");
    // Off by default: the caller's trace context is not passed on.
    assert_eq!(upstream.seen.lock().unwrap().clone(), [(None, None)]);
    assert!(daemon.stop().success());
    stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stdio_door_continues_the_trace_its_requests_meta_names() {
    let stop = CancellationToken::new();
    let collector = Collector::default();
    let collector_url = collector.start(stop.clone()).await;
    let upstream = TracedUpstream::default();
    let upstream_url = upstream.start(stop.clone()).await;
    let home = Home::new(&format!(
        "[telemetry]\notlp_endpoint = {collector_url:?}\n\n{}",
        crate::support::url_entry("up", "http", &upstream_url, "allow_private_network = true")
    ));
    let traceparent = format!("00-{TRACE_ID}-{CALLER_SPAN_ID}-01");
    let answer = tokio::task::spawn_blocking(move || {
        let mut session = StdioSession::start(&home, &["--standalone"]);
        session.initialize("2025-06-18");
        let (answer, _) = session.request(
            1,
            "tools/call",
            json!({"name": "mcp_up_echo", "arguments": {"text": SECRET_ARGUMENT},
                   "_meta": {"traceparent": traceparent}}),
        );
        // At exit the spans still queued are sent.
        assert!(session.finish().success());
        answer
    })
    .await
    .unwrap();
    assert_eq!(answer["result"]["content"][0]["text"], "done", "{answer}");

    let spans = spans_when(&collector, |spans| {
        ["door", "pipeline", "upstream"]
            .iter()
            .all(|name| spans.iter().any(|s| s.name == *name))
    })
    .await;
    let named = |name: &str| spans.iter().find(|s| s.name == name).unwrap();
    let (door, pipeline, execute, upstream_span) = (
        named("door"),
        named("pipeline"),
        named("execute"),
        named("upstream"),
    );
    assert_eq!(hex(&door.trace_id), TRACE_ID);
    assert_eq!(hex(&door.parent_span_id), CALLER_SPAN_ID);
    assert_eq!(attribute(door, "door").as_deref(), Some("stdio"));
    assert_eq!(pipeline.parent_span_id, door.span_id);
    assert_eq!(upstream_span.parent_span_id, execute.span_id);
    let expected = format!("00-{TRACE_ID}-{}-01", hex(&upstream_span.span_id));
    assert_eq!(
        upstream.seen.lock().unwrap().clone(),
        [(Some(expected.clone()), Some(expected))]
    );
    stop.cancel();
}
