//! The daemon's legacy HTTP+SSE door (`GET /sse`, `POST /message`) for 2024-11-05 clients: driven by a
//! hand-written client, by the stdlib smoke client, and by Portico's own legacy SSE client.

use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::client::*;
use crate::support::*;

fn http() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().build().unwrap()
}

/// An open `GET /sse` response, read event by event.
pub(crate) struct SseStream {
    response: reqwest::Response,
    buffer: String,
    /// Messages read while waiting for another one. Answers to concurrent requests (the members of a
    /// batch, say) may arrive in either order; dropping the one not asked for yet would leave its
    /// waiter hanging.
    unclaimed: Vec<Value>,
}

impl SseStream {
    pub(crate) async fn open(base: &str, headers: &[(&str, &str)]) -> reqwest::Response {
        let mut request = http()
            .get(format!("{base}/sse"))
            .header("accept", "text/event-stream");
        for (k, v) in headers {
            request = request.header(*k, *v);
        }
        request.send().await.unwrap()
    }

    pub(crate) fn new(response: reqwest::Response) -> SseStream {
        assert_eq!(response.status(), 200);
        let content_type = response.headers()["content-type"].to_str().unwrap();
        assert!(
            content_type.starts_with("text/event-stream"),
            "{content_type}"
        );
        SseStream {
            response,
            buffer: String::new(),
            unclaimed: Vec::new(),
        }
    }

    /// The next event as (name, data), skipping keep-alive comments; `None` when the stream ends.
    async fn next_event(&mut self) -> Option<(String, String)> {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let mut name = "message".to_string();
                let mut data = Vec::new();
                for line in block.lines() {
                    if let Some(value) = line.strip_prefix("event:") {
                        name = value.trim_start().to_string();
                    } else if let Some(value) = line.strip_prefix("data:") {
                        data.push(value.strip_prefix(' ').unwrap_or(value).to_string());
                    }
                }
                if data.is_empty() {
                    continue;
                }
                return Some((name, data.join("\n")));
            }
            let chunk = tokio::time::timeout(Duration::from_secs(60), self.response.chunk())
                .await
                .expect("no SSE event within 60s (test guard)")
                .unwrap()?;
            self.buffer
                .push_str(&String::from_utf8_lossy(&chunk).replace("\r\n", "\n"));
        }
    }

    /// Reads `message` events until the response to `id`, returning it.
    pub(crate) async fn response_to(&mut self, id: u64) -> Value {
        let is_answer = |message: &Value| {
            message.get("id") == Some(&json!(id)) && message.get("method").is_none()
        };
        if let Some(i) = self.unclaimed.iter().position(is_answer) {
            return self.unclaimed.remove(i);
        }
        // One deadline for the whole wait: keep-alive comments arrive every 15 s, so a per-chunk
        // timeout alone would never fire if the answer were lost.
        let wait = async {
            loop {
                let (name, data) = self.next_event().await.expect("stream ended");
                assert_eq!(name, "message", "{data}");
                let message: Value = serde_json::from_str(&data).unwrap();
                if is_answer(&message) {
                    return message;
                }
                self.unclaimed.push(message);
            }
        };
        tokio::time::timeout(Duration::from_secs(60), wait)
            .await
            .unwrap_or_else(|_| panic!("no answer to request {id} within 60s (test guard)"))
    }

    /// The first event must be `endpoint`; returns its URI.
    pub(crate) async fn endpoint(&mut self) -> String {
        let (name, data) = self.next_event().await.expect("stream ended");
        assert_eq!(name, "endpoint", "{data}");
        data
    }
}

/// The session id in an endpoint URI, checked to be unguessable (128 bits of hex).
fn session_id(endpoint: &str) -> &str {
    let id = endpoint
        .strip_prefix("/message?sessionId=")
        .unwrap_or_else(|| panic!("endpoint is not relative /message: {endpoint}"));
    assert_eq!(id.len(), 32, "{id}");
    assert!(id.chars().all(|c| c.is_ascii_hexdigit()), "{id}");
    id
}

async fn post(
    url: &str,
    body: impl Into<reqwest::Body>,
    headers: &[(&str, &str)],
) -> reqwest::Response {
    let mut request = http()
        .post(url)
        .header("content-type", "application/json")
        .body(body);
    for (k, v) in headers {
        request = request.header(*k, *v);
    }
    request.send().await.unwrap()
}

/// POSTs one message and checks the exact `202 Accepted` answer.
pub(crate) async fn send(base: &str, endpoint: &str, message: Value) {
    let response = post(
        &format!("{base}{endpoint}"),
        serde_json::to_vec(&message).unwrap(),
        &[],
    )
    .await;
    assert_eq!(response.status(), 202);
    assert_eq!(response.text().await.unwrap(), "Accepted");
}

/// Waits for a daemon log line containing every one of `parts` (tracing lines start with a timestamp).
fn wait_for_log(daemon: &mut Daemon, parts: &[&str]) -> String {
    tokio::task::block_in_place(|| {
        loop {
            let line = daemon
                .log
                .recv_timeout(Duration::from_secs(60))
                .unwrap_or_else(|_| panic!("daemon never logged {parts:?} (test guard)"));
            if parts.iter().all(|p| line.contains(p)) {
                return line;
            }
        }
    })
}

fn catalog_daemon(extra: &str) -> (Home, Daemon) {
    let home = Home::new(&config_with(
        &format!("[server]\nlisten = \"127.0.0.1:0\"\n{extra}"),
        &["--tools", "t1"],
    ));
    let mut daemon = Daemon::start(&home);
    daemon.wait_for_line("portico: ready");
    (home, daemon)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legacy_sse_hand_written_client_initializes_lists_and_calls() {
    let (_home, mut daemon) = catalog_daemon("");
    let base = daemon.base.clone();
    let mut stream = SseStream::new(SseStream::open(&base, &[]).await);
    let endpoint = stream.endpoint().await;
    session_id(&endpoint);

    send(
        &base,
        &endpoint,
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2024-11-05", "capabilities": {}, "clientInfo": {"name": "legacy-test", "version": "1"}}}),
    )
    .await;
    let initialized = stream.response_to(1).await;
    assert_eq!(
        initialized["result"]["protocolVersion"], "2024-11-05",
        "{initialized}"
    );
    assert_eq!(initialized["result"]["serverInfo"]["name"], "portico");
    send(
        &base,
        &endpoint,
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    .await;

    send(
        &base,
        &endpoint,
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}),
    )
    .await;
    let listed = stream.response_to(2).await;
    let names: Vec<&str> = listed["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{listed}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"mcp_cat_t1"), "{names:?}");

    send(
        &base,
        &endpoint,
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "mcp_cat_t1", "arguments": {}}}),
    )
    .await;
    let called = stream.response_to(3).await;
    assert_eq!(
        called["result"]["content"][0]["text"], "t1 called",
        "{called}"
    );

    // The 2024-11-05 revision allows batches: each member is answered on the stream.
    send(
        &base,
        &endpoint,
        json!([{"jsonrpc": "2.0", "id": 4, "method": "ping"}, {"jsonrpc": "2.0", "id": 5, "method": "ping"}]),
    )
    .await;
    assert_eq!(stream.response_to(4).await["result"], json!({}));
    assert_eq!(stream.response_to(5).await["result"], json!({}));

    // Shutdown ends the open stream (otherwise the daemon could not exit gracefully).
    assert!(daemon.stop().success());
    assert_eq!(stream.next_event().await, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legacy_sse_serves_the_smoke_client_and_portico_itself() {
    let (_home, daemon) = catalog_daemon("");
    let sse_url = format!("{}/sse", daemon.base);

    // (a) The stdlib smoke client, an independent implementation of the old transport.
    let output = Command::new(python3())
        .arg(python_peer("smoke_client.py"))
        .args([
            "--protocol",
            "2024-11-05",
            "--call",
            "mcp_cat_t1",
            "--timeout",
            "30",
            "--sse",
        ])
        .arg(&sse_url)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let steps: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let step = |name: &str| {
        steps
            .iter()
            .find(|s| s["step"] == name)
            .unwrap_or_else(|| panic!("no {name} step: {stdout}"))
            .clone()
    };
    assert!(
        step("sse-endpoint")["path"]
            .as_str()
            .unwrap()
            .starts_with("/message?sessionId=")
    );
    assert_eq!(
        step("initialize")["response"]["result"]["protocolVersion"],
        "2024-11-05"
    );
    assert_eq!(
        step("tools/call")["response"]["result"]["content"][0]["text"],
        "t1 called",
        "{stdout}"
    );

    // (b) Portico as the client: an upstream of type `sse` at this daemon's /sse. It tries Streamable
    // HTTP first (POST /sse is refused), then falls back to its hand-written legacy SSE client.
    let client = Home::new(&url_entry(
        "old",
        "sse",
        &sse_url,
        "allow_private_network = true",
    ));
    let output = client
        .command(&["servers", "--json"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let servers: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(servers[0]["state"], "ready", "{servers:#}");
    assert_eq!(
        servers[0]["transport_detail"], "legacy-sse",
        "must have fallen back to legacy HTTP+SSE: {servers:#}"
    );
    assert_eq!(servers[0]["server_name"], "portico", "{servers:#}");
    let output = client
        .command(&["call", "mcp_old_mcp_cat_t1"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(
        (
            output.status.code(),
            String::from_utf8_lossy(&output.stdout).as_ref()
        ),
        (Some(0), "t1 called\n"),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legacy_sse_refuses_unknown_sessions_bad_bodies_and_foreign_callers() {
    let (_home, daemon) = catalog_daemon("token = \"legacy-secret\"\nmax_message_bytes = 4096");
    let base = daemon.base.clone();
    let auth = ("authorization", "Bearer legacy-secret");

    // The door checks apply to both routes, before any session exists.
    let foreign = SseStream::open(&base, &[auth, ("origin", "https://evil.example")]).await;
    assert_eq!(foreign.status(), 403);
    let rebinding = SseStream::open(&base, &[auth, ("host", "attacker.example")]).await;
    assert_eq!(rebinding.status(), 403);
    assert_eq!(SseStream::open(&base, &[]).await.status(), 401);
    let own_origin = base.clone();
    let mut stream =
        SseStream::new(SseStream::open(&base, &[auth, ("origin", own_origin.as_str())]).await);
    let endpoint = stream.endpoint().await;
    let url = format!("{base}{endpoint}");
    let ping = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
    assert_eq!(post(&url, ping, &[]).await.status(), 401);
    assert_eq!(
        post(&url, ping, &[auth, ("origin", "https://evil.example")])
            .await
            .status(),
        403
    );

    let unknown = post(
        &format!("{base}/message?sessionId={}", "0".repeat(32)),
        ping,
        &[auth],
    )
    .await;
    assert_eq!(unknown.status(), 404);
    let body: Value = unknown.json().await.unwrap();
    assert!(
        body["error"].as_str().unwrap().contains("session"),
        "{body}"
    );
    assert_eq!(
        post(&format!("{base}/message"), ping, &[auth])
            .await
            .status(),
        404
    );

    let invalid = post(&url, "{not json", &[auth]).await;
    assert_eq!(invalid.status(), 400);
    let body: Value = invalid.json().await.unwrap();
    assert_eq!(body["jsonrpc"], "2.0");
    assert_eq!(body["id"], Value::Null);
    assert_eq!(body["error"]["code"], -32700, "{body}");

    let large = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"ping","params":{{"pad":"{}"}}}}"#,
        "x".repeat(5000)
    );
    assert_eq!(post(&url, large, &[auth]).await.status(), 413);

    // None of that disturbed the session.
    let accepted = post(&url, ping, &[auth]).await;
    assert_eq!(accepted.status(), 202);
    assert_eq!(stream.response_to(1).await["result"], json!({}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legacy_sse_closing_the_stream_ends_the_session() {
    let (_home, mut daemon) = catalog_daemon("");
    let base = daemon.base.clone();
    let mut stream = SseStream::new(SseStream::open(&base, &[]).await);
    let endpoint = stream.endpoint().await;
    let id = session_id(&endpoint).to_string();
    send(
        &base,
        &endpoint,
        json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}),
    )
    .await;
    assert_eq!(stream.response_to(1).await["result"], json!({}));

    drop(stream);
    // The daemon notices the disconnect and logs it; from then on the id is unknown.
    wait_for_log(&mut daemon, &["legacy SSE session closed", &id]);
    let after = post(
        &format!("{base}{endpoint}"),
        r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#,
        &[],
    )
    .await;
    assert_eq!(after.status(), 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legacy_sse_serves_agents_within_their_patterns() {
    let agent = r#"
[[agents]]
name = "snoop"
tools = ["mcp_cat_*"]
[agents.model]
provider = "scripted"
rules = [ { when = {}, steps = [
    { call_tool = { name = "file_list", arguments = {} } },
    { reply = "offered {{tools}}; file_list said: {{last_tool_result}}" } ] } ]
"#;
    let (_home, mut daemon) = catalog_daemon(agent);
    let base = daemon.base.clone();
    let mut stream = SseStream::new(SseStream::open(&base, &[]).await);
    let endpoint = stream.endpoint().await;
    send(
        &base,
        &endpoint,
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2024-11-05", "capabilities": {}, "clientInfo": {"name": "legacy-test", "version": "1"}}}),
    )
    .await;
    stream.response_to(1).await;
    send(
        &base,
        &endpoint,
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    .await;
    send(
        &base,
        &endpoint,
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "portico_agent_snoop", "arguments": {"message": "look around"}}}),
    )
    .await;
    let called = stream.response_to(2).await;
    let reply = called["result"]["structuredContent"]["reply"]
        .as_str()
        .unwrap_or_else(|| panic!("{called}"));
    assert!(reply.starts_with("offered mcp_cat_t1; "), "{reply}");
    assert!(
        reply.contains("tool `file_list` is not available to agent `snoop`"),
        "{reply}"
    );
    assert!(daemon.stop().success());
}
