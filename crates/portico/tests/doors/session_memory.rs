//! What MCP sessions on `/mcp` leave behind once they are closed: their places, their tasks, and the
//! daemon's resident memory.

use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::json;

use crate::bounds::{HttpSession, wait_for_stats};
use crate::client::*;

/// Sessions opened at once: enough that what they held (~95 KiB each in a debug build) dwarfs the
/// noise, few enough for a 2-core machine in well under a minute. `scripts/session-memory` runs the
/// same with 1,000 and a release build.
const SESSIONS: usize = 500;

/// How far above its starting figure the daemon's RSS may stay once the sessions are closed. Before
/// idle workers handed their free pages back, 500 sessions left 44–46 MiB of them resident for good.
const BOUND_KIB: u64 = 16 * 1024;

/// The resident set of process `pid`, from `/proc/PID/status`.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .unwrap_or_else(|| panic!("no VmRSS in {status}"));
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// One session's life as an IDE lives it: handshake, the tool list, a call, DELETE.
async fn open_and_use(base: &str) -> HttpSession {
    let mut session = HttpSession::open(base, &[]).await.unwrap();
    let tools = session.request("tools/list", json!({})).await;
    let names: Vec<&str> = tools["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(names.contains(&"mcp_cat_t1"), "{names:?}");
    let call = session
        .request("tools/call", json!({"name": "mcp_cat_t1", "arguments": {}}))
        .await;
    assert_eq!(call["result"]["content"][0]["text"], "t1 called", "{call}");
    session
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_held_by_closed_sessions_is_given_back() {
    let home = Home::new(&config_with(
        "[server]\nlisten = \"127.0.0.1:0\"\nrate_limit = { enabled = false }\nmax_sessions_per_client = 1024",
        &["--tools", "t1"],
    ));
    let mut daemon = Daemon::start(&home);
    daemon.wait_for_line("portico: ready");
    let base = daemon.base.clone();
    let pid = daemon.child.id();
    // Warm: the upstream has been called once, so the start figure is a daemon in use, not a fresh one.
    assert_eq!(open_and_use(&base).await.delete().await, 204);
    wait_for_stats(&base, "closed the first session", |s| s["open"] == 0).await;
    let start = rss_kib(pid);

    let sessions: Vec<HttpSession> = futures::stream::iter(0..SESSIONS)
        .map(|_| open_and_use(&base))
        .buffer_unordered(16)
        .collect()
        .await;
    let stats = wait_for_stats(&base, "counted every session", |s| s["open"] == SESSIONS).await;
    assert_eq!(stats["relay_tasks"], SESSIONS, "{stats}");
    let open = rss_kib(pid);
    // What they cost, for the record (`--nocapture`): the figure docs/daemon.md quotes.
    eprintln!(
        "RSS: {start} KiB at start, {open} KiB with {SESSIONS} sessions open ({} KiB each)",
        open.saturating_sub(start) / SESSIONS as u64
    );
    assert!(
        open > start + BOUND_KIB,
        "the sessions should cost more than the bound, or this test shows nothing: {start} -> {open} KiB"
    );

    let statuses: Vec<u16> = futures::stream::iter(sessions)
        .map(HttpSession::delete)
        .buffer_unordered(16)
        .collect()
        .await;
    assert!(statuses.iter().all(|s| *s == 204), "{statuses:?}");
    let stats = wait_for_stats(&base, "closed every session", |s| {
        s["open"] == 0 && s["relay_tasks"] == 0
    })
    .await;
    assert_eq!(stats["open"], 0, "{stats}");

    // Memory comes back without another request to prompt it (test guard: 30 s).
    let closed = Instant::now();
    let mut rss = rss_kib(pid);
    while rss > start + BOUND_KIB {
        assert!(
            closed.elapsed() < Duration::from_secs(30),
            "RSS stayed at {rss} KiB after {SESSIONS} sessions closed, {} KiB over the {start} KiB at start (bound {BOUND_KIB})",
            rss - start
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
        rss = rss_kib(pid);
    }
    eprintln!(
        "RSS: {rss} KiB {} ms after the sessions closed",
        closed.elapsed().as_millis()
    );
    assert!(daemon.stop().success());
}
