//! Shutdown: idle sessions and open streams hold nothing; a call in flight gets the grace, said in
//! the log; a second signal stops at once. And the door's answers to a client going away.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::client::{Daemon, Home, StdioSession, config_with};
use crate::http::{Session, http};
use crate::support::*;

/// The issue's bound for a shutdown with nothing in flight.
const QUICK: Duration = Duration::from_secs(2);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_sessions_and_open_streams_do_not_delay_shutdown() {
    let home = Home::new(&config_with(
        "[server]\nlisten = \"127.0.0.1:0\"",
        &["--tools", "t1"],
    ));
    let mut daemon = Daemon::start(&home);
    daemon.wait_for_line("portico: ready");
    // An IDE as it sits between calls: a session with its GET stream open, and a legacy SSE client.
    let session = Session::open(&daemon.base).await;
    assert!(
        session
            .tool_names(1)
            .await
            .contains(&"mcp_cat_t1".to_string())
    );
    let _stream = session.listen().await;
    let legacy = http()
        .get(format!("{}/sse", daemon.base))
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    assert_eq!(legacy.status(), 200);

    let asked = Instant::now();
    signal(daemon.child.id(), Signal::INT);
    let status = daemon.child.wait().unwrap();
    let took = asked.elapsed();
    assert!(status.success(), "{status}");
    assert!(took < QUICK, "shutdown took {took:?}");
    assert!(!home.info_file().exists());
    drop(legacy);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_signal_stops_at_once_and_still_stops_the_children() {
    let marked = Marked::new();
    let script = marked.script("catalog_server.py");
    let home = Home::new(&format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n{}",
        stdio_entry(
            "cat",
            &python3(),
            &[script.to_str().unwrap(), "--sleep-tool"],
            ""
        )
    ));
    let mut daemon = Daemon::start(&home);
    daemon.wait_for_line("portico: ready");
    assert_eq!(marked.processes().len(), 1);
    let session = Session::open(&daemon.base).await;
    let call = tokio::spawn(async move {
        session
            .post(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "mcp_cat_sleep", "arguments": {"seconds": 60}}}))
            .await
            .text()
            .await
    });
    daemon.wait_for_line_containing("sleep started");
    signal(daemon.child.id(), Signal::INT);
    let waiting = daemon.wait_for_line_containing("waiting for");
    assert!(
        waiting.ends_with(
            "shutting down: waiting for 1 call(s) in progress (at most 30s; a second Ctrl-C stops now)"
        ),
        "{waiting}"
    );
    assert!(daemon.child.try_wait().unwrap().is_none());
    let asked = Instant::now();
    signal(daemon.child.id(), Signal::INT);
    let status = daemon.child.wait().unwrap();
    let took = asked.elapsed();
    assert_eq!(status.code(), Some(130));
    assert!(took < QUICK, "a second signal took {took:?}");
    daemon.wait_for_line("portico: second stop signal; stopping now");
    assert!(!home.info_file().exists());
    // Killed, and reaped by init once the daemon is gone: nothing left but, for a moment, a zombie.
    let alive: Vec<_> = marked
        .processes()
        .into_iter()
        .filter(|(_, state, _)| *state != 'Z')
        .collect();
    assert!(alive.is_empty(), "{alive:?}");
    let _ = call.await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_ends_a_session_with_204_and_a_client_going_away_is_no_error() {
    let home = Home::new(&config_with(
        "[server]\nlisten = \"127.0.0.1:0\"",
        &["--tools", "t1"],
    ));
    let mut daemon = Daemon::start(&home);
    daemon.wait_for_line("portico: ready");
    let session = Session::open(&daemon.base).await;
    assert!(
        session
            .tool_names(1)
            .await
            .contains(&"mcp_cat_t1".to_string())
    );
    assert_eq!(session.delete().await, 204);
    // The session is gone: a request on it is refused.
    let after = session
        .post(json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}))
        .await;
    assert_eq!(after.status(), 404);

    // The official SDK's client in a handshake era: lists, calls, disconnects with its DELETE, as
    // an IDE does; it warned "Session termination failed: 202" on every disconnect.
    let url = format!("{}/mcp", daemon.base);
    let output = tokio::task::spawn_blocking(move || {
        std::process::Command::new(venv_python())
            .arg(python_peer("sdk_client.py"))
            .args([
                "--era",
                "legacy",
                "--http",
                &url,
                "--list",
                "--call",
                "mcp_cat_t1",
            ])
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    let report: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(
        report["calls"][0]["result"]["content"][0]["text"], "t1 called",
        "{report}"
    );
    assert!(
        stderr.starts_with("sdk_client: connected: protocol 2025-11-25"),
        "{stderr}"
    );
    assert!(!stderr.contains("Session termination failed"), "{stderr}");
    // An IDE through `portico mcp`, which keeps a `subscriptions/listen` stream open to the
    // daemon, detaching: rmcp's answer to that stream has nowhere to go.
    let mut ide = StdioSession::start_with_env(&home, &[], &[("PORTICO_LOG", "info")]);
    ide.wait_for_stderr("proxying to the running daemon");
    ide.initialize("2025-06-18");
    assert_eq!(ide.upstream_tool_names(1), ["mcp_cat_t1"]);
    assert!(ide.finish().success());
    assert_eq!(daemon.stop().code(), Some(0));
    let mut log = Vec::new();
    while let Ok(line) = daemon.log.recv_timeout(Duration::from_secs(10)) {
        log.push(line);
    }
    let errors: Vec<&String> = log.iter().filter(|l| l.contains(" ERROR ")).collect();
    assert!(errors.is_empty(), "{errors:#?}");
}

/// A 2024-11-05 era session: its `GET /sse` stream (open, its `endpoint` event read) and the
/// `POST /message` address that event names.
struct LegacySession {
    stream: reqwest::Response,
    buffer: String,
    post_to: String,
}

impl LegacySession {
    async fn open(base: &str) -> LegacySession {
        let stream = http()
            .get(format!("{base}/sse"))
            .header("accept", "text/event-stream")
            .send()
            .await
            .unwrap();
        assert_eq!(stream.status(), 200);
        let mut session = LegacySession {
            stream,
            buffer: String::new(),
            post_to: String::new(),
        };
        let endpoint = session.next_data().await.expect("an endpoint event");
        session.post_to = format!("{base}{endpoint}");
        session
            .post(json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2024-11-05", "capabilities": {}, "clientInfo": {"name": "live", "version": "1"}}}))
            .await;
        let answer = session.answer_to(0).await;
        assert_eq!(
            answer["result"]["protocolVersion"], "2024-11-05",
            "{answer}"
        );
        session
            .post(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        session
    }

    async fn post(&self, message: serde_json::Value) {
        let response = http()
            .post(&self.post_to)
            .json(&message)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 202);
    }

    /// The next event's data; `None` when the stream ends (or breaks).
    async fn next_data(&mut self) -> Option<String> {
        loop {
            let normalized = self.buffer.replace("\r\n", "\n");
            if let Some(end) = normalized.find("\n\n") {
                let block = normalized[..end].to_string();
                self.buffer = normalized[end + 2..].to_string();
                let data: Vec<&str> = block
                    .lines()
                    .filter_map(|line| line.strip_prefix("data:"))
                    .map(str::trim_start)
                    .collect();
                if !data.is_empty() {
                    return Some(data.join("\n"));
                }
                continue;
            }
            let chunk = tokio::time::timeout(Duration::from_secs(60), self.stream.chunk())
                .await
                .expect("no SSE event within 60s (test guard)")
                .ok()??;
            self.buffer.push_str(&String::from_utf8_lossy(&chunk));
        }
    }

    /// The message answering `id`; panics if the stream ends first.
    async fn answer_to(&mut self, id: u64) -> serde_json::Value {
        loop {
            let data = self
                .next_data()
                .await
                .unwrap_or_else(|| panic!("the SSE stream ended before the answer to {id}"));
            let Ok(message) = serde_json::from_str::<serde_json::Value>(&data) else {
                continue;
            };
            if message["id"] == json!(id) {
                return message;
            }
        }
    }
}

fn sleep_call(id: u64, server: &str, seconds: f64) -> serde_json::Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": format!("mcp_{server}_sleep"), "arguments": {"seconds": seconds}}})
}

/// A stop signal while calls are in flight: each is answered in full, whatever its era (a session's
/// POST answered as an SSE stream, a 2024-11-05 call answered on its `GET /sse` stream), before its
/// connection closes, and the official Python SDK's call returns its result (it lists the tools
/// after a call, on a new connection: that failed with httpx's `ConnectError`); a call that comes on
/// a new connection meanwhile gets a clear 503; then the daemon exits 0, well within its grace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_answers_every_call_in_flight_before_closing_its_connection() {
    let sleeper = |name| {
        stdio_entry(
            name,
            &python3(),
            &[
                python_peer("catalog_server.py").to_str().unwrap(),
                "--sleep-tool",
            ],
            "",
        )
    };
    let home = Home::new(&format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n{}{}{}",
        sleeper("cat"),
        sleeper("dog"),
        sleeper("owl")
    ));
    let mut daemon = Daemon::start(&home);
    daemon.wait_for_line("portico: ready");
    let base = daemon.base.clone();
    let session = Session::open(&base).await;
    let mut legacy = LegacySession::open(&base).await;

    // The SDK's client as a script uses it: a call, no listing first.
    let url = format!("{base}/mcp");
    let sdk = tokio::task::spawn_blocking(move || {
        std::process::Command::new(venv_python())
            .arg(python_peer("sdk_client.py"))
            .args(["--era", "legacy", "--http", &url])
            .args(["--call", "mcp_owl_sleep", "--args", r#"{"seconds": 3}"#])
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap()
    });
    // Python takes its time to start: its call is made first.
    let mut started = vec![daemon.wait_for_line_containing("sleep started")];
    // A session's call: answered as an SSE stream.
    let streamed = {
        let request = http()
            .post(format!("{base}/mcp"))
            .header("mcp-session-id", &session.id)
            .header("mcp-protocol-version", "2025-06-18")
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .json(&sleep_call(7, "cat", 2.0));
        tokio::spawn(async move {
            let response = request.send().await.map_err(|e| format!("{e:?}"))?;
            let status = response.status();
            assert_eq!(response.headers()["content-type"], "text/event-stream");
            let body = response.text().await.map_err(|e| format!("{e:?}"))?;
            Ok::<_, String>((status, body))
        })
    };
    legacy.post(sleep_call(8, "dog", 2.0)).await;
    for _ in 0..2 {
        started.push(daemon.wait_for_line_containing("sleep started"));
    }
    let asked = Instant::now();
    signal(daemon.child.id(), Signal::INT);
    let waiting = daemon.wait_for_line_containing("waiting for");
    assert!(
        waiting.contains("waiting for 3 call(s)"),
        "{waiting}\n{started:#?}"
    );

    // A call on a new connection after the stop began: refused plainly, not reset.
    let late = http()
        .post(format!("{base}/mcp"))
        .header("mcp-session-id", &session.id)
        .header("mcp-protocol-version", "2025-06-18")
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .json(&sleep_call(9, "cat", 0.1))
        .send()
        .await
        .expect("an answer, not a reset");
    assert_eq!(late.status(), 503);
    assert_eq!(late.headers()["retry-after"], "5");
    let late = late.text().await.unwrap();
    assert!(late.contains("shutting down"), "{late}");

    let (status, body) = streamed.await.unwrap().expect("the streamed call's answer");
    assert_eq!(status, 200, "{body}");
    let answer = crate::http::messages(&body)
        .into_iter()
        .find(|m| m["id"] == 7)
        .unwrap_or_else(|| panic!("no answer to the call in {body:?}"));
    assert_eq!(answer["result"]["content"][0]["text"], "slept", "{answer}");
    let answer = legacy.answer_to(8).await;
    assert_eq!(answer["result"]["content"][0]["text"], "slept", "{answer}");
    let output = sdk.await.unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let report: serde_json::Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|_| panic!("no report from the SDK client: {stdout}\n{stderr}"));
    assert_eq!(
        report["calls"][0]["result"]["content"][0]["text"], "slept",
        "{report}\n{stderr}"
    );

    let status = daemon.child.wait().unwrap();
    let took = asked.elapsed();
    assert!(status.success(), "{status}");
    assert!(
        took < Duration::from_secs(3) + QUICK,
        "shutdown took {took:?}"
    );
    assert!(!home.info_file().exists());
}
