//! MCP through the balancer, with `@modelcontextprotocol/server-everything` (stdio, one child per
//! replica) as the upstream: 2026-07-28 (stateless) calls spread over both replicas; 2025-11-25
//! sessions stay on the replica named by their id's prefix; after `kill -9` of that replica, the old
//! session id gets 404 (from the other replica, nginx's backup), a new `initialize` works and calls
//! go on. The official Python SDK is the client where one fits (tests/peers/python).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::client::sdk_report_async;
use crate::cluster::*;
use crate::support::{everything_js, node, python_peer, stdio_entry, venv_python};

const ECHO: &str = "mcp_everything_echo";

fn upstream() -> String {
    let everything = everything_js().display().to_string();
    stdio_entry("everything", &node(), &[everything.as_str(), "stdio"], "")
}

/// The JSON-RPC messages of an MCP answer, one JSON body or an SSE stream.
fn messages(body: &str) -> Vec<Value> {
    if let Ok(value) = serde_json::from_str::<Value>(body) {
        return vec![value];
    }
    body.lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .filter_map(|data| serde_json::from_str(data.trim()).ok())
        .collect()
}

/// A 2025-11-25 session over Streamable HTTP, spoken by hand (with the token).
pub(crate) struct Session {
    base: String,
    id: String,
    next: u64,
}

async fn post(base: &str, body: &Value, session: Option<&str>) -> (u16, String) {
    let mut request = http()
        .post(format!("{base}/mcp"))
        .bearer_auth(TOKEN)
        .header("accept", "application/json, text/event-stream")
        .json(body);
    if let Some(session) = session {
        request = request
            .header("mcp-session-id", session)
            .header("mcp-protocol-version", "2025-11-25");
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let session_header = response
        .headers()
        .get("mcp-session-id")
        .map(|v| v.to_str().unwrap().to_string());
    let text = response.text().await.unwrap();
    match session_header {
        Some(id) if session.is_none() => (status, format!("{id}\n{text}")),
        _ => (status, text),
    }
}

impl Session {
    pub(crate) async fn open(base: &str) -> Session {
        let initialize = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "replicas", "version": "1"}}});
        let (status, text) = post(base, &initialize, None).await;
        assert_eq!(status, 200, "{text}");
        let (id, body) = text.split_once('\n').unwrap();
        let answer = messages(body);
        assert_eq!(
            answer[0]["result"]["protocolVersion"], "2025-11-25",
            "{body}"
        );
        let session = Session {
            base: base.to_string(),
            id: id.to_string(),
            next: 1,
        };
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let (status, text) = post(base, &initialized, Some(&session.id)).await;
        assert_eq!(status, 202, "{text}");
        session
    }

    /// The replica the id names (`gw-a.…`).
    fn replica(&self) -> &str {
        self.id.split_once('.').map(|(r, _)| r).unwrap_or("")
    }

    pub(crate) async fn request(&mut self, method: &str, params: Value) -> (u16, Value) {
        let id = self.next;
        self.next += 1;
        let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let (status, text) = post(&self.base, &body, Some(&self.id)).await;
        if status != 200 {
            return (
                status,
                serde_json::from_str(&text).unwrap_or(Value::String(text)),
            );
        }
        let answer = messages(&text)
            .into_iter()
            .find(|m| m["id"] == json!(id))
            .unwrap_or_else(|| panic!("no answer to {method} in {text}"));
        (status, answer)
    }

    /// `tools/call` of the echo tool: its text, after checking it ran.
    async fn echo(&mut self, message: &str) -> String {
        let (status, answer) = self
            .request(
                "tools/call",
                json!({"name": ECHO, "arguments": {"message": message}}),
            )
            .await;
        assert_eq!(status, 200, "{} on {}: {answer}", self.id, self.base);
        assert_ne!(answer["result"]["isError"], true, "{answer}");
        answer["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_else(|| panic!("{answer}"))
            .to_string()
    }
}

/// The Python SDK session that pauses (tests/peers/python/sdk_session_pause.py).
struct PausedSdk {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
}

impl PausedSdk {
    fn start(url: &str) -> PausedSdk {
        let mut child = Command::new(venv_python())
            .arg(python_peer("sdk_session_pause.py"))
            .args([url, ECHO, r#"{"message": "through the sdk"}"#])
            .args(["--header", &format!("Authorization: Bearer {TOKEN}")])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        PausedSdk {
            stdin: child.stdin.take(),
            child,
            lines,
        }
    }

    fn report(&mut self) -> Value {
        let line = self
            .lines
            .recv_timeout(Duration::from_secs(90))
            .expect("the SDK client reported nothing (test guard)");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"))
    }

    fn go_on(&mut self) {
        let mut stdin = self.stdin.take().unwrap();
        stdin.write_all(b"go\n").unwrap();
    }
}

impl Drop for PausedSdk {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn ok_text(outcome: &Value) -> &str {
    assert_ne!(outcome["result"]["isError"], true, "{outcome}");
    outcome["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("{outcome}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_through_the_balancer_stateless_calls_spread_and_sessions_survive_a_kill() {
    let Some(mut cluster) = tokio::task::block_in_place(|| Replicas::start(2, &upstream())) else {
        return;
    };
    let lb = cluster.lb.base.clone();
    let mcp_url = format!("{lb}/mcp");

    // (a) 2026-07-28 through the balancer, by the SDK: every call answered, spread over both.
    let before = cluster.lb.access_log().len();
    let url = mcp_url.clone();
    let report = sdk_report_async(move |command| {
        command
            .args(["--era", "modern", "--http", &url, "--timeout", "20"])
            .args(["--header", &format!("Authorization: Bearer {TOKEN}")]);
        for i in 0..6 {
            command
                .args(["--call", ECHO, "--args"])
                .arg(json!({"message": format!("m{i}")}).to_string());
        }
    })
    .await;
    assert_eq!(report["protocol_version"], "2026-07-28", "{report:#}");
    let texts: Vec<&str> = report["calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            assert_ne!(c["result"]["isError"], true, "{c}");
            c["result"]["content"][0]["text"].as_str().unwrap_or("")
        })
        .collect();
    assert_eq!(
        texts,
        (0..6).map(|i| format!("Echo: m{i}")).collect::<Vec<_>>(),
        "{report:#}"
    );
    let logged: Vec<Logged> = cluster.lb.access_log()[before..]
        .iter()
        .filter(|l| l.uri == "/mcp")
        .cloned()
        .collect();
    assert!(logged.len() >= 6, "{logged:#?}");
    let mut per_replica: BTreeMap<String, usize> = BTreeMap::new();
    for line in &logged {
        assert_eq!(
            (line.method.as_str(), line.status, line.upstreams.len()),
            ("POST", 200, 1),
            "{logged:#?}"
        );
        assert_eq!(line.mcp_session, "-", "stateless: {logged:#?}");
        *per_replica.entry(line.upstreams[0].clone()).or_default() += 1;
    }
    assert_eq!(per_replica.len(), 2, "{per_replica:?}");
    assert!(
        per_replica.values().all(|n| *n >= 3),
        "round robin spreads the requests: {per_replica:?}"
    );

    // (b) 2025-11-25 sessions through the balancer: one on each replica (initializes go round
    // robin), and the SDK's own session.
    let mut sessions: BTreeMap<String, Session> = BTreeMap::new();
    for _ in 0..6 {
        let session = Session::open(&lb).await;
        let replica = session.replica().to_string();
        assert!(
            ["gw-a", "gw-b"].contains(&replica.as_str()),
            "{}",
            session.id
        );
        sessions.entry(replica).or_insert(session);
        if sessions.len() == 2 {
            break;
        }
    }
    assert_eq!(sessions.len(), 2, "initializes reach both replicas");
    for session in sessions.values_mut() {
        let (status, listed) = session.request("tools/list", json!({})).await;
        assert_eq!(status, 200);
        let names: Vec<&str> = listed["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|t| t["name"].as_str())
            .collect();
        assert!(names.contains(&ECHO), "{names:?}");
        for i in 0..3 {
            assert_eq!(session.echo(&format!("s{i}")).await, format!("Echo: s{i}"));
        }
    }
    let mut sdk = tokio::task::block_in_place(|| PausedSdk::start(&mcp_url));
    let first = tokio::task::block_in_place(|| sdk.report());
    assert_eq!(first["protocol_version"], "2025-11-25", "{first:#}");
    assert_eq!(ok_text(&first["call"]), "Echo: through the sdk");
    let sdk_session = first["session"].as_str().unwrap().to_string();
    let (doomed, survivor) = match sdk_session.split_once('.') {
        Some(("gw-a", _)) => ("gw-a", "gw-b"),
        Some(("gw-b", _)) => ("gw-b", "gw-a"),
        _ => panic!("the SDK's session id names no replica: {sdk_session}"),
    };
    // nginx sent every request of each session to the replica its id names.
    let log = cluster.lb.access_log();
    let mut session_requests = 0;
    for line in log.iter().filter(|l| l.mcp_session != "-") {
        let named = line.mcp_session.split_once('.').unwrap().0;
        assert_eq!(line.upstreams, [named], "{line:?}");
        session_requests += 1;
    }
    assert!(session_requests >= 12, "{log:#?}");

    // (c) kill -9 of the replica holding the SDK's session (and one of ours).
    tokio::task::block_in_place(|| cluster.kill9(doomed));
    let mut lost = sessions.remove(doomed).unwrap();
    let mut kept = sessions.remove(survivor).unwrap();
    let before = cluster.lb.access_log().len();
    let (status, answer) = lost
        .request(
            "tools/call",
            json!({"name": ECHO, "arguments": {"message": "x"}}),
        )
        .await;
    assert_eq!(status, 404, "{answer}");
    assert_eq!(answer["error"]["code"], -32001, "{answer}");
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with(&format!("Session not found on replica {survivor} ")),
        "{answer}"
    );
    let logged = cluster.lb.access_log()[before..].to_vec();
    assert_eq!(
        logged.last().unwrap().upstreams.last().map(String::as_str),
        Some(survivor),
        "the backup answered: {logged:#?}"
    );
    // The other replica's session goes on; a new session through the balancer works.
    assert_eq!(kept.echo("still here").await, "Echo: still here");
    let mut fresh = Session::open(&lb).await;
    assert_eq!(fresh.replica(), survivor, "{}", fresh.id);
    for i in 0..3 {
        assert_eq!(
            fresh.echo(&format!("again {i}")).await,
            format!("Echo: again {i}")
        );
    }

    // The SDK: its next calls on the same Client get the 404's JSON-RPC error; it does not
    // re-initialize by itself (every later request still carries the old id). A new Client does.
    sdk.go_on();
    let second = tokio::task::block_in_place(|| sdk.report());
    for outcome in second["same_client"].as_array().unwrap() {
        assert_eq!(outcome["error"]["code"], -32001, "{second:#}");
        assert!(
            outcome["error"]["message"]
                .as_str()
                .unwrap_or_default()
                .starts_with(&format!("Session not found on replica {survivor} ")),
            "{second:#}"
        );
    }
    let exchanges = second["exchanges"].as_array().unwrap();
    let new_session = second["new_client"]["session"].as_str().unwrap_or_default();
    let first_client: Vec<&Value> = exchanges
        .iter()
        .take_while(|e| e[3].as_str() != Some(new_session))
        .collect();
    let initializes = first_client
        .iter()
        .filter(|e| e[0] == "POST" && e[1].is_null())
        .count();
    assert_eq!(initializes, 1, "one initialize only: {exchanges:#?}");
    assert!(
        first_client
            .iter()
            .filter(|e| !e[1].is_null())
            .all(|e| e[1] == sdk_session.as_str()),
        "{exchanges:#?}"
    );
    assert!(
        new_session.starts_with(&format!("{survivor}.")),
        "{second:#}"
    );
    assert_eq!(
        ok_text(&second["new_client"]["call"]),
        "Echo: through the sdk"
    );
}

/// An open legacy `GET /sse` stream, read event by event (the minimum of the door tests' reader).
struct SseStream {
    response: reqwest::Response,
    buffer: String,
}

impl SseStream {
    async fn open(base: &str) -> SseStream {
        let response = http()
            .get(format!("{base}/sse"))
            .bearer_auth(TOKEN)
            .header("accept", "text/event-stream")
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        SseStream {
            response,
            buffer: String::new(),
        }
    }

    /// The next event as (name, data), skipping keep-alive comments.
    async fn next_event(&mut self) -> (String, String) {
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
                if !data.is_empty() {
                    return (name, data.join("\n"));
                }
                continue;
            }
            let chunk = tokio::time::timeout(Duration::from_secs(30), self.response.chunk())
                .await
                .expect("no SSE event within 30 s (test guard)")
                .unwrap()
                .expect("the stream ended");
            self.buffer
                .push_str(&String::from_utf8_lossy(&chunk).replace("\r\n", "\n"));
        }
    }

    /// POSTs `message` to the stream's endpoint through `base`; for a request, its answer from the
    /// stream.
    async fn send(&mut self, base: &str, endpoint: &str, message: Value) -> Option<Value> {
        let response = http()
            .post(format!("{base}{endpoint}"))
            .bearer_auth(TOKEN)
            .json(&message)
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        assert_eq!(status, 202, "{}", response.text().await.unwrap());
        let id = message.get("id")?.clone();
        loop {
            let (name, data) = self.next_event().await;
            assert_eq!(name, "message", "{data}");
            let answer: Value = serde_json::from_str(&data).unwrap();
            if answer["id"] == id && answer.get("method").is_none() {
                return Some(answer);
            }
        }
    }
}

/// The legacy HTTP+SSE door through the balancer: `GET /sse` goes round robin, and each stream's
/// `POST /message?sessionId=gw-x.…` goes to the replica holding it (nginx's `$arg_sessionId` map).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legacy_sse_through_the_balancer_posts_reach_the_replica_holding_the_stream() {
    let Some(cluster) = tokio::task::block_in_place(|| Replicas::start(2, &upstream())) else {
        return;
    };
    let lb = cluster.lb.base.clone();
    let mut replicas_seen = Vec::new();
    for i in 0..2 {
        let mut stream = SseStream::open(&lb).await;
        let (name, endpoint) = stream.next_event().await;
        assert_eq!(name, "endpoint", "{endpoint}");
        let session = endpoint
            .strip_prefix("/message?sessionId=")
            .unwrap_or_else(|| panic!("{endpoint}"))
            .to_string();
        let replica = session.split_once('.').map(|(r, _)| r.to_string());
        replicas_seen.push(replica.clone().unwrap_or_default());
        let init = stream
            .send(
                &lb,
                &endpoint,
                json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                    "protocolVersion": "2024-11-05", "capabilities": {},
                    "clientInfo": {"name": "replicas", "version": "1"}}}),
            )
            .await
            .unwrap();
        assert_eq!(init["result"]["serverInfo"]["name"], "portico", "{init}");
        stream
            .send(
                &lb,
                &endpoint,
                json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            )
            .await;
        let called = stream
            .send(
                &lb,
                &endpoint,
                json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                       "params": {"name": ECHO, "arguments": {"message": format!("sse {i}")}}}),
            )
            .await
            .unwrap();
        assert_eq!(
            called["result"]["content"][0]["text"],
            format!("Echo: sse {i}"),
            "{called}"
        );
        // Every POST of this session went to the replica its id names.
        let posts: Vec<Logged> = cluster
            .lb
            .access_log()
            .into_iter()
            .filter(|l| l.uri == "/message")
            .collect();
        let named = replica.unwrap_or_default();
        let ours: Vec<&Logged> = posts.iter().rev().take(3).collect();
        assert!(
            ours.iter()
                .all(|l| l.status == 202 && l.upstreams == [named.clone()]),
            "{named}: {posts:#?}"
        );
    }
    replicas_seen.sort();
    assert_eq!(replicas_seen, ["gw-a", "gw-b"]);
}
