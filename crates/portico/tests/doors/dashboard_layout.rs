//! The dashboard's layout, measured in headless Chromium (`tests/peers/js/dashboard_layout.mjs`)
//! against the real daemon with a realistic catalog: server-everything's long underscore names,
//! built-ins, an agent, an A2A task, a held approval, and an HTTP upstream on a closed port.
//!
//! - No header, and no name or text, breaks inside a word at 1280x800 and 1920x1080: the page's
//!   own line boxes (a Range per character), not a screenshot comparison.
//! - A tool's detail is in the viewport after a click on the list's first and last rows, after
//!   loading `#/tools/NAME` in a fresh page, and after reloading it.
//! - A server that cannot be reached says what is true, in the API, `portico servers` and the
//!   servers page: retrying, how many attempts failed, when it tries next, and why.
//!
//! The pages are saved as PNGs (1280x800) in `target/dashboard-screenshots/layout/`; with
//! `PORTICO_DASHBOARD_DOCS=1`, in `docs/dashboard/`, the pictures docs/dashboard.md shows.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::approvals_web::{browser_script, chromium};
use crate::client::*;
use crate::support::*;

const GATED: &str = "mcp_everything_echo";
const OPENED: &str = "mcp_everything_get_sum";
const VIEWPORTS: [&str; 2] = ["1280x800", "1920x1080"];
/// Pages whose tables must have rows to measure here (agents has no table).
const MEASURED: [&str; 8] = [
    "servers",
    "tools",
    "tools-open",
    "resources",
    "prompts",
    "a2a",
    "approvals",
    "audit",
];
const SCREENSHOTS: [&str; 6] = ["servers", "tools", "agents", "a2a", "approvals", "audit"];

fn config(closed_port: u16) -> String {
    let everything = everything_js().display().to_string();
    let upstream = stdio_entry("everything", &node(), &[everything.as_str(), "stdio"], "");
    let offline = url_entry(
        "offline",
        "http",
        &format!("http://127.0.0.1:{closed_port}/mcp"),
        "allow_private_network = true",
    );
    format!(
        r#"
[server]
listen = "127.0.0.1:0"

[policy]
approval_wait_secs = 120

[[policies]]
tools = ["{GATED}"]
action = "approve"
reason = "an owner approves every echo"

[a2a]
enabled = true

[[agents]]
name = "helper"
description = "A scripted helper that answers in one line"
tools = ["{GATED}"]
[agents.model]
provider = "scripted"
rules = [
  {{ when = {{ text = "^echo " }}, steps = [
      {{ call_tool = {{ name = "{GATED}", arguments = {{ message = "{{{{message}}}}" }} }} }},
      {{ reply = "helper heard: {{{{last_tool_result}}}}" }} ] }},
  {{ when = {{}}, steps = [ {{ reply = "Hello from the scripted helper, you said: {{{{message}}}}" }} ] }},
]

{upstream}{offline}"#
    )
}

async fn call(base: &str, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    let mut request = client.request(method.parse().unwrap(), format!("{base}{path}"));
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

/// The `offline` server's status once `/api/servers` says at least two attempts failed.
async fn after_two_failures(base: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (status, listed) = call(base, "GET", "/api/servers", None).await;
        assert_eq!(status, 200, "{listed:#}");
        let offline = listed["servers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == "offline")
            .cloned()
            .unwrap();
        if offline["failed_attempts"].as_u64().unwrap_or(0) >= 2
            && offline["next_retry_at_ms"].is_u64()
        {
            return offline;
        }
        assert!(
            Instant::now() < deadline,
            "two failed attempts never showed (test guard): {offline:#}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// A run of `dashboard_layout.mjs`, and its report.
fn measure(args: &[&str]) -> Value {
    let chromium = chromium().expect("checked by the caller");
    browser_script(&chromium, "dashboard_layout.mjs", args, |event| {
        panic!("dashboard_layout.mjs sent an event it has none of: {event}")
    })
}

/// The detail was open, in view (its box against the viewport's, in numbers), named by the address.
fn assert_in_view(seen: &Value, tool: &str, what: &str) {
    let top = seen["box"]["top"].as_i64().unwrap();
    let bottom = seen["box"]["bottom"].as_i64().unwrap();
    let left = seen["box"]["left"].as_i64().unwrap();
    let right = seen["box"]["right"].as_i64().unwrap();
    let height = seen["viewport"]["height"].as_i64().unwrap();
    let width = seen["viewport"]["width"].as_i64().unwrap();
    assert!(
        top < height && bottom > 0 && left < width && right > 0 && bottom > top,
        "{what}: the detail at {} is outside the {width}x{height} viewport",
        seen["box"]
    );
    assert_eq!(seen["intersects"], true, "{what}: {seen:#}");
    let encoded: String = tool
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.!~*'()".contains(c) {
                c.to_string()
            } else {
                format!("%{:02X}", c as u32)
            }
        })
        .collect();
    assert_eq!(
        seen["hash"],
        format!("#/tools/{encoded}"),
        "{what}: {seen:#}"
    );
    assert!(
        seen["heading"].as_str().unwrap_or_default().contains(tool),
        "{what}: {seen:#}"
    );
    assert_eq!(
        seen["focused"], true,
        "{what}: the heading has the focus: {seen:#}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_keeps_words_whole_shows_the_open_tool_and_says_what_a_retrying_server_does()
{
    let Some(_) = chromium() else {
        return;
    };
    // A port nobody listens on: taken from the OS, then let go.
    let closed_port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let home = Home::new(&config(closed_port));
    let mut daemon = Daemon::start(&home);
    daemon.wait_for_line("portico: ready");
    let base = daemon.base.clone();

    // Something on every page: a conversation and audit records, an A2A task, a held approval.
    let (status, first) = call(
        &base,
        "POST",
        "/api/agents/helper/message",
        Some(json!({"message": "what can you do?"})),
    )
    .await;
    assert_eq!(status, 200, "{first:#}");
    let (status, sent) = call(
        &base,
        "POST",
        "/a2a/helper",
        Some(json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {
            "messageId": "m-dashboard-layout", "role": "ROLE_USER", "parts": [{"text": "hello over a2a"}]
        }}})),
    )
    .await;
    assert_eq!(status, 200, "{sent:#}");
    assert_eq!(
        sent["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{sent:#}"
    );
    let held = {
        let base = base.clone();
        tokio::spawn(async move {
            call(
                &base,
                "POST",
                "/api/agents/helper/message",
                Some(json!({"message": "echo held for an owner"})),
            )
            .await
        })
    };

    // The held call's request, waiting on the approvals page.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (status, listed) = call(&base, "GET", "/api/approvals", None).await;
        assert_eq!(status, 200, "{listed:#}");
        if listed["approvals"].as_array().is_some_and(|a| a.len() == 1) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the held call never showed (test guard): {listed:#}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // The server on the closed port: two failed attempts, the next one scheduled, the cause.
    let offline = after_two_failures(&base).await;
    assert_eq!(offline["state"], "restarting", "{offline:#}");
    let next = offline["next_retry_at_ms"].as_u64().unwrap();
    // Within the backoff's reach (a minute at most), not some other clock.
    assert!(
        next + 5_000 > now_ms() && next < now_ms() + 61_000,
        "{offline:#}"
    );
    let error = offline["last_error"].as_str().unwrap();
    assert_eq!(
        error,
        format!(
            "server `offline`: cannot reach http://127.0.0.1:{closed_port}/mcp: connection refused"
        ),
        "{offline:#}"
    );
    let (status, reference) = call(&base, "GET", "/api/mcp/servers", None).await;
    assert_eq!(status, 200, "{reference:#}");
    let listed = reference["connected"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "offline")
        .unwrap();
    assert!(
        listed["failed_attempts"].as_u64().unwrap() >= 2 && listed["next_retry_at_ms"].is_u64(),
        "{listed:#}"
    );

    // `portico servers`, from the daemon: the same, in words.
    let (code, stdout, stderr) = home.run(&["servers"], &[]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    let line = stdout
        .lines()
        .find(|l| l.starts_with("offline "))
        .unwrap_or_else(|| panic!("{stdout}"));
    let words = line.split_whitespace().collect::<Vec<_>>().join(" ");
    let retrying = regex::Regex::new(
        r"^offline http retrying \((\d+) failed attempts, (next in \d+s|trying again now|trying again for \d+s)\) - 0 0 0 server `offline`: cannot reach http://127\.0\.0\.1:\d+/mcp: connection refused$",
    )
    .unwrap();
    let found = retrying
        .captures(&words)
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(found[1].parse::<u32>().unwrap() >= 2, "{stdout}");

    // The browser: every page at both sizes, the tool detail, the pictures.
    let docs = std::env::var("PORTICO_DASHBOARD_DOCS").is_ok_and(|v| v == "1");
    let dir = if docs {
        repo_root().join("docs/dashboard")
    } else {
        let dir = repo_root().join("target/dashboard-screenshots/layout");
        let _ = std::fs::remove_dir_all(&dir);
        dir
    };
    std::fs::create_dir_all(&dir).unwrap();
    let url = format!("{base}/");
    let dir_arg = dir.display().to_string();
    let report = tokio::task::spawn_blocking(move || {
        measure(&[
            "--url",
            &url,
            "--tool",
            OPENED,
            "--agent",
            "helper",
            "--screenshots",
            &dir_arg,
            "--viewports",
            &VIEWPORTS.join(","),
        ])
    })
    .await
    .unwrap();
    assert_eq!(report["ok"], true, "{report:#}");
    assert_eq!(report["blocked"], json!([]), "{report:#}");
    assert_eq!(report["consoleErrors"], json!([]), "{report:#}");

    // Words whole: no break inside a word in any cell, no header on two lines.
    let mut offending = Vec::new();
    for viewport in VIEWPORTS {
        for page in MEASURED {
            let measured = &report["viewports"][viewport][page];
            assert!(
                measured["cells"].as_u64().unwrap() > 0,
                "{viewport} {page}: nothing measured: {report:#}"
            );
            for cell in measured["breaks"].as_array().unwrap() {
                offending.push(format!("{viewport} {page}: {cell}"));
            }
            for input in measured["cutPlaceholders"].as_array().unwrap() {
                offending.push(format!("{viewport} {page}: placeholder cut off: {input}"));
            }
            for table in measured["overflowing"].as_array().unwrap() {
                offending.push(format!(
                    "{viewport} {page}: table wider than the page: {table}"
                ));
            }
        }
    }
    assert!(
        offending.is_empty(),
        "words broken inside, placeholders cut off, tables too wide:\n{}",
        offending.join("\n")
    );

    // The open tool where the click was, at every size; by its address, fresh and reloaded.
    for (viewport, clicks) in report["clicks"].as_object().unwrap() {
        for which in ["first", "last"] {
            let seen = &clicks[which];
            let tool = seen["tool"].as_str().unwrap();
            assert_in_view(seen, tool, &format!("{viewport}, {which} row"));
            assert_eq!(seen["reloaded"], false, "{viewport}: {seen:#}");
        }
    }
    assert_eq!(report["clicks"].as_object().unwrap().len(), 3, "{report:#}");
    assert_in_view(&report["direct"], OPENED, "loaded by its address");
    assert_in_view(&report["reloaded"], OPENED, "reloaded");

    // The servers page: the transport in words, the retries as they are.
    let servers = report["texts"]["servers"].as_str().unwrap();
    assert!(!servers.contains("stdio (stdio)"), "{servers}");
    assert!(servers.contains("streamable HTTP"), "{servers}");
    let retrying =
        regex::Regex::new(r"retrying\n+(\d+) failed attempts, (next try in \d+ s|trying now)")
            .unwrap();
    let found = retrying
        .captures(servers)
        .unwrap_or_else(|| panic!("{servers}"));
    assert!(found[1].parse::<u32>().unwrap() >= 2, "{servers}");
    assert!(
        servers.contains(&format!(
            "server `offline`: cannot reach http://127.0.0.1:{closed_port}/mcp: connection refused"
        )),
        "{servers}"
    );

    // The pictures, each of some substance and small enough to keep in the repository.
    for name in SCREENSHOTS {
        let path = dir.join(format!("{name}.png"));
        let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(
            bytes.starts_with(b"\x89PNG\r\n\x1a\n"),
            "{}",
            path.display()
        );
        assert!(
            (8 * 1024..300 * 1024).contains(&bytes.len()),
            "{} is {} bytes",
            path.display(),
            bytes.len()
        );
        eprintln!("screenshot: {}", path.display());
    }

    // The held call: denied, so its agent run ends.
    let (status, listed) = call(&base, "GET", "/api/approvals", None).await;
    assert_eq!(status, 200, "{listed:#}");
    let id = listed["approvals"][0]["id"].as_str().unwrap().to_string();
    let (status, _) = call(
        &base,
        "POST",
        &format!("/api/approvals/{id}/deny"),
        Some(json!({"via": "api"})),
    )
    .await;
    assert_eq!(status, 200);
    let _ = tokio::time::timeout(Duration::from_secs(60), held)
        .await
        .expect("the denial did not end the held call");
    assert!(daemon.stop().success());
}
