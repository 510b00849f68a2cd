//! The HTTP door under attack and load: what `[expose]` hides stays hidden, sessions and connections
//! are bounded, rate limits cannot be dodged, and shutdown does not wait for streams.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use serde_json::{Value, json};

use crate::client::*;

pub(crate) fn http() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().build().unwrap()
}

/// The JSON-RPC messages in an MCP answer, whether it came as one JSON body or as an SSE stream.
fn messages(body: &str) -> Vec<Value> {
    if let Ok(value) = serde_json::from_str::<Value>(body) {
        return vec![value];
    }
    body.lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .filter_map(|data| serde_json::from_str(data.trim()).ok())
        .collect()
}

/// One MCP session over Streamable HTTP (protocol 2025-06-18, the session era).
pub(crate) struct HttpSession {
    pub(crate) base: String,
    pub(crate) id: String,
    headers: Vec<(String, String)>,
    next_id: u64,
}

async fn post(base: &str, body: &Value, headers: &[(String, String)]) -> reqwest::Response {
    let mut request = http()
        .post(format!("{base}/mcp"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .json(body);
    for (k, v) in headers {
        request = request.header(k, v);
    }
    request.send().await.unwrap()
}

fn initialize_body() -> Value {
    json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bounds", "version": "1"}}})
}

impl HttpSession {
    /// `initialize` and `notifications/initialized`; the raw answer when the door refuses it.
    pub(crate) async fn open(
        base: &str,
        headers: &[(&str, &str)],
    ) -> Result<HttpSession, reqwest::Response> {
        let headers: Vec<(String, String)> = headers
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let response = post(base, &initialize_body(), &headers).await;
        if response.status() != 200 {
            return Err(response);
        }
        let id = response.headers()["mcp-session-id"]
            .to_str()
            .unwrap()
            .to_string();
        let answer = messages(&response.text().await.unwrap());
        assert_eq!(answer[0]["result"]["serverInfo"]["name"], "portico");
        let mut session = HttpSession {
            base: base.to_string(),
            id,
            headers,
            next_id: 1,
        };
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let response = post(base, &initialized, &session.session_headers()).await;
        assert_eq!(response.status(), 202);
        session.next_id = 1;
        Ok(session)
    }

    pub(crate) fn session_headers(&self) -> Vec<(String, String)> {
        let mut headers = self.headers.clone();
        headers.push(("mcp-session-id".into(), self.id.clone()));
        headers.push(("mcp-protocol-version".into(), "2025-06-18".into()));
        headers
    }

    pub(crate) async fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let response = post(&self.base, &body, &self.session_headers()).await;
        assert_eq!(response.status(), 200, "{method}");
        let text = response.text().await.unwrap();
        messages(&text)
            .into_iter()
            .find(|m| m["id"] == json!(id))
            .unwrap_or_else(|| panic!("no answer to {method} in {text}"))
    }

    pub(crate) async fn delete(self) -> u16 {
        let mut request = http().delete(format!("{}/mcp", self.base));
        for (k, v) in self.session_headers() {
            request = request.header(k, v);
        }
        request.send().await.unwrap().status().as_u16()
    }
}

/// What `[expose]` hides, asserted over one door's answers: empty lists, refused calls.
fn assert_hidden(
    tools: &Value,
    call: &Value,
    resources: &Value,
    read: &Value,
    prompts: &Value,
    get: &Value,
) {
    assert_eq!(tools["result"]["tools"], json!([]), "{tools}");
    assert_eq!(resources["result"]["resources"], json!([]), "{resources}");
    assert_eq!(prompts["result"]["prompts"], json!([]), "{prompts}");
    for (refused, key) in [(call, "tools"), (read, "resources"), (get, "prompts")] {
        assert_eq!(refused["error"]["code"], -32601, "{refused}");
        let message = refused["error"]["message"].as_str().unwrap();
        assert!(
            message.contains(&format!("[expose] {key} = false")),
            "{message}"
        );
    }
}

const HIDE_ALL: &str = "[expose]\ntools = false\nresources = false\nprompts = false";

#[test]
fn expose_false_is_enforced_on_the_stdio_door() {
    let home = Home::new(&config_with(
        HIDE_ALL,
        &["--tools", "t1", "--prompts", "1", "--resources", "1"],
    ));
    let mut session = StdioSession::start(&home, &["--standalone"]);
    let init = session.initialize("2025-06-18");
    assert!(init["result"]["capabilities"].get("tools").is_none());
    let (tools, _) = session.request(1, "tools/list", json!({}));
    let (call, _) = session.request(
        2,
        "tools/call",
        json!({"name": "mcp_cat_t1", "arguments": {}}),
    );
    let (resources, _) = session.request(3, "resources/list", json!({}));
    let (read, _) = session.request(
        4,
        "resources/read",
        json!({"uri": "portico://cat/mem://r/0"}),
    );
    let (prompts, _) = session.request(5, "prompts/list", json!({}));
    let (get, _) = session.request(6, "prompts/get", json!({"name": "mcp_cat_prompt_0"}));
    assert_hidden(&tools, &call, &resources, &read, &prompts, &get);
    // A built-in is no exception.
    let (builtin, _) = session.request(
        7,
        "tools/call",
        json!({"name": "system_time", "arguments": {}}),
    );
    assert_eq!(builtin["error"]["code"], -32601, "{builtin}");
    assert!(session.finish().success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expose_false_is_enforced_on_the_http_door() {
    let home = Home::new(&config_with(
        &format!("[server]\nlisten = \"127.0.0.1:0\"\n{HIDE_ALL}"),
        &["--tools", "t1", "--prompts", "1", "--resources", "1"],
    ));
    let mut daemon = Daemon::start(&home);
    daemon.wait_for_line("portico: ready");
    let mut session = HttpSession::open(&daemon.base, &[]).await.unwrap();
    let tools = session.request("tools/list", json!({})).await;
    let call = session
        .request("tools/call", json!({"name": "mcp_cat_t1", "arguments": {}}))
        .await;
    let resources = session.request("resources/list", json!({})).await;
    let read = session
        .request("resources/read", json!({"uri": "portico://cat/mem://r/0"}))
        .await;
    let prompts = session.request("prompts/list", json!({})).await;
    let get = session
        .request("prompts/get", json!({"name": "mcp_cat_prompt_0"}))
        .await;
    assert_hidden(&tools, &call, &resources, &read, &prompts, &get);
    assert_eq!(session.delete().await, 204);
    assert!(daemon.stop().success());
}

pub(crate) async fn session_stats(base: &str) -> Value {
    http()
        .get(format!("{base}/api/mcp/sessions"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// Polls the door's session gauges until `done` holds (test guard: 30 s).
pub(crate) async fn wait_for_stats(base: &str, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let stats = session_stats(base).await;
        if done(&stats) {
            return stats;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "never {what} (test guard): {stats}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closed_sessions_leave_no_relay_tasks_behind() {
    let home = Home::new(&config_with(
        "[server]\nlisten = \"127.0.0.1:0\"\nrate_limit = { enabled = false }",
        &["--tools", "t1"],
    ));
    let mut daemon = Daemon::start(&home);
    daemon.wait_for_line("portico: ready");
    let base = daemon.base.clone();
    for wave in 0..3 {
        let mut sessions = Vec::new();
        for _ in 0..40 {
            sessions.push(HttpSession::open(&base, &[]).await.unwrap());
        }
        let stats = wait_for_stats(&base, "relaying for 40 sessions", |s| {
            s["relay_tasks"] == 40
        })
        .await;
        assert_eq!(stats["open"], 40, "wave {wave}: {stats}");
        for session in sessions {
            assert_eq!(session.delete().await, 204);
        }
        // No catalog change comes to make a relay task notice its session is gone: the session's
        // end itself must stop it.
        let stats =
            wait_for_stats(&base, "back to no relay tasks", |s| s["relay_tasks"] == 0).await;
        assert_eq!(stats["open"], 0, "wave {wave}: {stats}");
    }
    assert!(daemon.stop().success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_are_capped_per_client_and_in_total() {
    // Every loopback client is one identity, so the per-client cap is reached first here.
    let home = Home::new(&config_with(
        "[server]\nlisten = \"127.0.0.1:0\"\nmax_sessions = 10\nmax_sessions_per_client = 2",
        &["--tools", "t1"],
    ));
    let mut daemon = Daemon::start(&home);
    daemon.wait_for_line("portico: ready");
    let base = daemon.base.clone();
    let first = HttpSession::open(&base, &[]).await.unwrap();
    let mut second = HttpSession::open(&base, &[]).await.unwrap();
    let refused = HttpSession::open(&base, &[]).await.err().unwrap();
    assert_session_refused(refused, 429, "[server] max_sessions_per_client").await;
    // Open sessions keep working, and requests that make no session are not refused.
    let pong = second.request("ping", json!({})).await;
    assert_eq!(pong["result"], json!({}));
    let stats = session_stats(&base).await;
    assert_eq!(stats["open"], 2, "{stats}");
    // A deleted session gives its place back.
    assert_eq!(first.delete().await, 204);
    let third = HttpSession::open(&base, &[]).await.unwrap();
    assert_eq!(third.delete().await, 204);
    assert_eq!(second.delete().await, 204);
    assert!(daemon.stop().success());

    let home = Home::new(&config_with(
        "[server]\nlisten = \"127.0.0.1:0\"\nmax_sessions = 2",
        &["--tools", "t1"],
    ));
    let mut daemon = Daemon::start(&home);
    daemon.wait_for_line("portico: ready");
    let base = daemon.base.clone();
    let _kept = [
        HttpSession::open(&base, &[]).await.unwrap(),
        HttpSession::open(&base, &[]).await.unwrap(),
    ];
    let refused = HttpSession::open(&base, &[]).await.err().unwrap();
    assert_session_refused(refused, 503, "2 MCP sessions are open").await;
    assert!(daemon.stop().success());
}

/// An `initialize` refused at a session cap: the status, a retry hint, and an error naming the bound.
async fn assert_session_refused(refused: reqwest::Response, status: u16, names: &str) {
    assert_eq!(refused.status(), status);
    assert_eq!(refused.headers()["retry-after"], "30");
    let body: Value = refused.json().await.unwrap();
    assert!(body["error"].as_str().unwrap().contains(names), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_sessions_expire_and_give_their_place_back() {
    let home = Home::new(&config_with(
        "[server]\nlisten = \"127.0.0.1:0\"\nmax_sessions = 1\nsession_idle_secs = 1",
        &["--tools", "t1"],
    ));
    let mut daemon = Daemon::start(&home);
    daemon.wait_for_line("portico: ready");
    let base = daemon.base.clone();
    let idle = HttpSession::open(&base, &[]).await.unwrap();
    wait_for_stats(&base, "expired the idle session", |s| {
        s["open"] == 0 && s["relay_tasks"] == 0
    })
    .await;
    // The expired session is gone (404 tells its client to start a new one), and its place is free.
    let body = json!({"jsonrpc": "2.0", "id": 9, "method": "ping"});
    let gone = post(&base, &body, &idle.session_headers()).await;
    assert_eq!(gone.status(), 404);
    let fresh = HttpSession::open(&base, &[]).await.unwrap();
    assert_eq!(fresh.delete().await, 204);
    assert!(daemon.stop().success());
}

/// A `subscriptions/listen` stream (which `portico mcp` keeps open while attached) is no call in
/// progress: shutdown ends it at once instead of waiting out its grace period for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_does_not_wait_for_a_listen_stream() {
    let home = Home::new(&config_with(
        "[server]\nlisten = \"127.0.0.1:0\"",
        &["--tools", "t1"],
    ));
    let mut daemon = Daemon::start(&home);
    daemon.wait_for_line("portico: ready");
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "subscriptions/listen", "params": {
        "notifications": {"toolsListChanged": true},
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                  "io.modelcontextprotocol/clientCapabilities": {}}}});
    let headers = [
        ("mcp-protocol-version".to_string(), "2026-07-28".to_string()),
        ("mcp-method".to_string(), "subscriptions/listen".to_string()),
    ];
    let stream = post(&daemon.base, &body, &headers).await;
    assert_eq!(stream.status(), 200);
    assert_eq!(stream.headers()["content-type"], "text/event-stream");
    assert!(daemon.stop().success());
    // The stream was ended by shutdown, not left to the grace period.
    let _ = stream.text().await;
    let log: Vec<String> = daemon.log.iter().collect();
    assert!(
        !log.iter().any(|line| line.contains("still running")),
        "{log:#?}"
    );
}

fn address(base: &str) -> String {
    base.trim_start_matches("http://").to_string()
}

/// A connection with a read guard, so a test that waits for the door to act cannot hang.
fn connect(base: &str) -> TcpStream {
    let stream = TcpStream::connect(address(base)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    stream
}

/// One raw HTTP/1.1 request on a new connection; the status and the whole answer.
fn raw_request(base: &str, head: &str) -> (u16, String) {
    let mut stream = connect(base);
    stream.write_all(head.as_bytes()).unwrap();
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).unwrap();
    let answer = String::from_utf8_lossy(&answer).to_string();
    let status = answer
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status line in {answer:?}"));
    (status, answer)
}

fn get(base: &str, path: &str) -> (u16, String) {
    raw_request(
        base,
        &format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"),
    )
}

#[test]
fn hostile_host_values_are_refused_by_the_door() {
    let home = Home::new(&config_with(
        "[server]\nlisten = \"127.0.0.1:0\"",
        &["--tools", "t1"],
    ));
    let daemon = Daemon::start(&home);
    for host in [
        "[::1]evil.example",
        "[::1]evil.example:80",
        "[::1]:1evil.example",
        "localhost:evil.example",
        "127.0.0.1.evil.example",
    ] {
        let (status, answer) = raw_request(
            &daemon.base,
            &format!("GET /api/health HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"),
        );
        assert_eq!(status, 403, "{host}: {answer}");
        assert!(answer.contains("is not allowed"), "{answer}");
    }
    assert_eq!(get(&daemon.base, "/api/health").0, 200);
}

/// Half-sent request heads hold no connection for long, and while they hold every place the health
/// check is still answered and other requests get a clear 503 instead of hanging.
#[test]
fn half_sent_heads_cannot_lock_the_door() {
    let home = Home::new(&config_with(
        "[server]\nlisten = \"127.0.0.1:0\"\nmax_connections = 4",
        &["--tools", "t1"],
    ));
    let daemon = Daemon::start(&home);
    let base = daemon.base.clone();
    // The kernel hands connections over in the order they were made, so these take the 4 places.
    // Half of them send nothing at all.
    let mut stalled: Vec<TcpStream> = (0..4)
        .map(|i| {
            let mut stream = connect(&base);
            if i % 2 == 0 {
                stream
                    .write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: appli")
                    .unwrap();
            }
            stream
        })
        .collect();
    let (status, answer) = get(&base, "/api/health");
    assert_eq!(status, 200, "{answer}");
    let (status, answer) = get(&base, "/api/mcp/servers");
    assert_eq!(status, 503, "{answer}");
    assert!(
        answer.to_ascii_lowercase().contains("retry-after: 1"),
        "{answer}"
    );
    assert!(answer.contains("[server] max_connections"), "{answer}");
    // Each stalled head is dropped by the door (EOF, no answer) once its deadline passes.
    for stream in &mut stalled {
        let mut rest = Vec::new();
        match stream.read_to_end(&mut rest) {
            Ok(_) => assert!(
                rest.is_empty() || rest.starts_with(b"HTTP/1.1 408"),
                "{rest:?}"
            ),
            Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::ConnectionReset, "{e}"),
        }
    }
    // Their places are free again.
    let (status, answer) = get(&base, "/api/mcp/servers");
    assert_eq!(status, 200, "{answer}");
}

/// Sends `body` to `path` with a declared length, or chunked (no length: the door learns the size only
/// by reading), and returns the status and body of the answer.
async fn post_body(base: &str, path: &str, body: Vec<u8>, chunked: bool) -> (u16, String) {
    let request = http()
        .post(format!("{base}{path}"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream");
    let request = if chunked {
        let chunks: Vec<Result<Vec<u8>, std::io::Error>> =
            body.chunks(1024).map(|c| Ok(c.to_vec())).collect();
        request.body(reqwest::Body::wrap_stream(futures::stream::iter(chunks)))
    } else {
        request.body(body)
    };
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.text().await.unwrap_or_default())
}

/// Every door that takes a body (MCP, legacy SSE messages, A2A JSON-RPC and REST, the API) refuses one
/// over `[server] max_message_bytes` with 413 naming the setting, whether its length was declared
/// (refused before reading) or not (refused once the bound is read); under the bound it is served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_door_refuses_bodies_over_max_message_bytes() {
    let home = Home::new(&config_with(
        "[server]\nlisten = \"127.0.0.1:0\"\nmax_message_bytes = 4096",
        &["--tools", "t1"],
    ));
    let mut daemon = Daemon::start(&home);
    daemon.wait_for_line("portico: ready");
    let base = daemon.base.clone();
    // A JSON-RPC request padded past the bound, so it is well-formed but too large.
    let padded = |size: usize| {
        let pad = "x".repeat(size);
        serde_json::to_vec(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"pad": pad}}),
        )
        .unwrap()
    };
    let doors = [
        "/mcp",
        "/message?sessionId=none",
        "/a2a/none",
        "/a2a/none/message:send",
        "/api/agents/none/message",
    ];
    for path in doors {
        for chunked in [false, true] {
            let (status, body) = post_body(&base, path, padded(8 * 1024), chunked).await;
            assert_eq!(status, 413, "{path} (chunked: {chunked}): {body}");
            assert!(
                body.contains("larger than 4096 bytes ([server] max_message_bytes)"),
                "{path} (chunked: {chunked}): {body}"
            );
        }
    }
    // Under the bound the door serves it (a ping on /mcp needs no session in this era's answer).
    let (status, body) = post_body(&base, "/mcp", padded(1024), false).await;
    assert_ne!(status, 413, "{body}");
    assert!(daemon.stop().success());
}

/// A request from 127.0.0.2 (Linux routes all of 127/8 to the loopback), on its own connection: how
/// long its answer took, and the answer.
async fn from_another_address(base: &str, head: &str) -> (Duration, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let started = std::time::Instant::now();
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.2:0".parse().unwrap()).unwrap();
    let mut stream = socket
        .connect(address(base).parse().unwrap())
        .await
        .unwrap();
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    // A guard only: the door answers in well under a second, or (on a shut door) after its 10 s
    // head deadline has freed places.
    tokio::time::timeout(Duration::from_secs(15), stream.read_to_end(&mut answer))
        .await
        .expect("an answer within 15s (test guard)")
        .unwrap();
    (
        started.elapsed(),
        String::from_utf8_lossy(&answer).to_string(),
    )
}

/// A thousand half-sent request heads from one address leave the door open to every other: the
/// health check and a token holder from another address are answered within a second. The first
/// address may hold only its bound; the rest of its connections are closed at once, said in one WARN.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_half_sent_heads_from_one_address_do_not_shut_the_door() {
    const TOKEN: &str = "door-token-for-the-slowloris-test";
    let home = Home::new(&config_with(
        &format!("[server]\nlisten = \"127.0.0.1:0\"\nmax_connections = 64\ntoken = \"{TOKEN}\""),
        &["--tools", "t1"],
    ));
    let mut daemon = tokio::task::block_in_place(|| {
        let mut daemon = Daemon::start(&home);
        daemon.wait_for_line("portico: ready");
        daemon
    });
    let base = daemon.base.clone();
    let mut stalled = Vec::with_capacity(1000);
    for _ in 0..1000 {
        let mut stream = tokio::net::TcpStream::connect(address(&base))
            .await
            .unwrap();
        // The door may have closed it already: a write into a closed connection is no error here.
        let _ = tokio::io::AsyncWriteExt::write_all(
            &mut stream,
            b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: appli",
        )
        .await;
        stalled.push(stream);
    }

    let (took, answer) = from_another_address(
        &base,
        "GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(
        took < Duration::from_secs(1),
        "the health check took {took:?}"
    );
    let (took, answer) = from_another_address(
        &base,
        &format!(
            "GET /api/mcp/servers HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\nConnection: close\r\n\r\n"
        ),
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains("\"cat\""), "{answer}");
    assert!(
        took < Duration::from_secs(1),
        "the token holder took {took:?}"
    );
    drop(stalled);

    let warned =
        tokio::task::block_in_place(|| daemon.wait_for_line_containing("max_connections_per_peer"));
    assert!(
        warned.contains("127.0.0.1 holds 16 connections, the most one address may ([server] max_connections_per_peer): its new connections are closed at once"),
        "{warned}"
    );
    let status = tokio::task::block_in_place(|| daemon.stop());
    assert!(status.success());
    let warnings = daemon
        .log
        .try_iter()
        .filter(|line| line.contains("max_connections_per_peer"))
        .count();
    assert!(warnings <= 1, "{warnings} more warnings");
}

/// Half-sent heads past the cap hold no place kept for the health check: they wait with a short
/// deadline (2 s, not 10 s) in places of their own, and the health check that follows them is
/// answered once those are shed.
#[test]
fn half_sent_heads_past_the_cap_are_shed_fast_and_take_no_health_place() {
    let home = Home::new(&config_with(
        "[server]\nlisten = \"127.0.0.1:0\"\nmax_connections = 4\nmax_connections_per_peer = 100",
        &["--tools", "t1"],
    ));
    let daemon = Daemon::start(&home);
    let base = daemon.base.clone();
    // 4 take the full places, 8 the places for reading a head past the cap (and, before, all 8
    // places kept for the health check).
    let stalled: Vec<TcpStream> = (0..12)
        .map(|_| {
            let mut stream = connect(&base);
            stream
                .write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: appli")
                .unwrap();
            stream
        })
        .collect();
    let asked = std::time::Instant::now();
    let (status, answer) = get(&base, "/api/health");
    let took = asked.elapsed();
    assert_eq!(status, 200, "{answer}");
    assert!(
        took < Duration::from_secs(4),
        "the health check took {took:?}"
    );
    drop(stalled);
}
