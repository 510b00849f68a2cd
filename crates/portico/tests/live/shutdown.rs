//! Shutdown: idle sessions and open streams hold nothing; a call in flight gets the grace, said in
//! the log; a second signal stops at once. And the door's answers to a client going away.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::client::{Daemon, Home, StdioSession, config_with};
use crate::http::{Session, http};
use crate::support::*;

/// The bound for a shutdown with nothing in flight.
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
