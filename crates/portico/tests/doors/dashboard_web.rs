//! The dashboard at `/`, toured in headless Chromium (Debian's, driven by playwright-core through
//! `tests/peers/js/dashboard_tour.mjs`) against the real daemon with a stdio upstream (the
//! `everything` server), built-in tools, a scripted agent, an approve policy and `[a2a]` on. Every
//! page is visited and saved as a full-page PNG in `target/dashboard-screenshots/` (or
//! `$PORTICO_DASHBOARD_SCREENSHOTS`), one directory per test; the page must load with no console
//! error and no failed request beyond what the test expects. Then the scripted actions: an approval
//! clicked through (the held call then finishes), a tool tried, a chat answer streamed in, and a
//! change made from outside showing up without a reload.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::approvals_web::{browser_script, chromium};
use crate::client::*;
use crate::support::*;

const TOKEN: &str = "dashboard-web-test-token";
const GATED: &str = "mcp_everything_echo";
const TRIED: &str = "mcp_everything_get_sum";
const PAGES: [&str; 6] = ["servers", "tools", "agents", "a2a", "approvals", "audit"];
/// The screenshots the tour takes after its actions.
const AFTER_ACTIONS: [&str; 5] = [
    "servers-dark",
    "approvals-decided",
    "tools-try",
    "agents-chat",
    "approvals-live",
];

fn config(token: Option<&str>) -> String {
    let token = token.map_or(String::new(), |token| format!("token = {token:?}\n"));
    let everything = everything_js().display().to_string();
    let upstream = stdio_entry("everything", &node(), &[everything.as_str(), "stdio"], "");
    // A server whose secret nobody set: the servers page names it and the command that sets it.
    let vault = stdio_entry(
        "vault",
        &python3(),
        &[python_peer("env_dump.py").to_str().unwrap()],
        "env = [\"VAULT_KEY=${DASHBOARD_TOUR_UNSET_SECRET}\"]",
    );
    format!(
        r#"
[server]
listen = "127.0.0.1:0"
{token}
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
description = "A scripted helper for the dashboard tour"
tools = ["{GATED}"]
[agents.model]
provider = "scripted"
rules = [
  {{ when = {{ text = "^echo " }}, steps = [
      {{ call_tool = {{ name = "{GATED}", arguments = {{ message = "{{{{message}}}}" }} }} }},
      {{ reply = "helper heard: {{{{last_tool_result}}}}" }} ] }},
  {{ when = {{}}, steps = [ {{ reply = "Hello from the scripted helper, you said: {{{{message}}}}" }} ] }},
]

# No key in the environment: listed as needing a model, offered as no tool.
[[agents]]
name = "idle"
tools = []
[agents.model]
provider = "openai"
api_key_env = "DASHBOARD_TOUR_UNSET_MODEL_KEY"

{upstream}{vault}"#
    )
}

fn client() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().build().unwrap()
}

/// A JSON request to the daemon's API (with the token when given): (status, body).
async fn call(
    base: &str,
    token: Option<&str>,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let mut request = client().request(method.parse().unwrap(), format!("{base}{path}"));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

/// Sends `message` to the helper agent (not streamed); the task ends when the agent answers.
fn message_in_background(
    base: &str,
    token: Option<&'static str>,
    message: &str,
) -> tokio::task::JoinHandle<(u16, Value)> {
    let base = base.to_string();
    let body = json!({"message": message});
    tokio::spawn(async move {
        call(
            &base,
            token,
            "POST",
            "/api/agents/helper/message",
            Some(body),
        )
        .await
    })
}

/// The pending approval requests, waited for until there are `count` (the held call is made by
/// another task; its request appears when the pipeline holds it).
async fn pending(base: &str, token: Option<&str>, count: usize) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (status, listed) = call(base, token, "GET", "/api/approvals", None).await;
        assert_eq!(status, 200, "{listed:#}");
        let approvals = listed["approvals"].as_array().cloned().unwrap_or_default();
        if approvals.len() >= count {
            assert_eq!(approvals.len(), count, "{listed:#}");
            return approvals;
        }
        assert!(
            Instant::now() < deadline,
            "{count} approval request(s) never appeared (test guard): {listed:#}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Where this test's screenshots go: `$PORTICO_DASHBOARD_SCREENSHOTS/NAME`, else
/// `target/dashboard-screenshots/NAME` in the workspace; emptied first.
fn screenshot_dir(name: &str) -> PathBuf {
    let root = std::env::var_os("PORTICO_DASHBOARD_SCREENSHOTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("target/dashboard-screenshots"));
    let dir = root.join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A run of `dashboard_tour.mjs`: its `live-ready` line is handed to `on_live_ready` (which makes
/// the change the page must show), then its report is returned.
fn tour(chromium: &Path, args: &[&str], on_live_ready: impl FnOnce()) -> Value {
    let mut on_live_ready = Some(on_live_ready);
    browser_script(chromium, "dashboard_tour.mjs", args, |event| {
        assert_eq!(
            event, "live-ready",
            "dashboard_tour.mjs sent an unknown event"
        );
        (on_live_ready.take().expect("one live-ready line"))();
    })
}

/// Every page was visited and saved as a PNG of some substance.
fn assert_screenshots(report: &Value, dir: &Path, extra: &[&str]) {
    for name in PAGES.iter().chain(extra) {
        let page = &report["pages"][name];
        assert_eq!(page["loaded"], true, "{name}: {report:#}");
        let path = dir.join(format!("{name}.png"));
        let bytes =
            std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}: {report:#}", path.display()));
        assert!(
            bytes.starts_with(b"\x89PNG\r\n\x1a\n"),
            "{}",
            path.display()
        );
        assert!(
            bytes.len() > 8 * 1024,
            "{} is only {} bytes",
            path.display(),
            bytes.len()
        );
        eprintln!("screenshot: {}", path.display());
    }
}

fn page_text<'a>(report: &'a Value, page: &str) -> &'a str {
    report["pages"][page]["text"].as_str().unwrap_or_default()
}

/// What every tour must show, whatever the daemon's routes: the pages' contents, the approval
/// clicked through, the chat answer streamed in and loaded back.
async fn assert_common(report: &Value, base: &str, token: Option<&str>, approved: &str) {
    assert_eq!(report["ok"], true, "{report:#}");
    assert_eq!(report["status"], 200, "{report:#}");
    assert_eq!(report["blocked"], json!([]), "{report:#}");

    let servers = page_text(report, "servers");
    assert!(
        servers.contains("everything") && servers.contains("ready"),
        "{servers}"
    );
    assert!(
        servers.contains("needs_secret")
            && servers.contains("portico secret set DASHBOARD_TOUR_UNSET_SECRET"),
        "{servers}"
    );
    let tools = page_text(report, "tools");
    for tool in [GATED, TRIED, "portico_agent_helper"] {
        assert!(tools.contains(tool), "{tool}: {tools}");
    }
    assert!(tools.contains("needs approval"), "the policy mark: {tools}");
    assert!(!tools.contains("portico_agent_idle"), "{tools}");
    let agents = page_text(report, "agents");
    assert!(agents.contains("helper"), "{agents}");
    assert!(
        agents.contains("idle") && agents.contains("needs a model"),
        "{agents}"
    );
    let audit = page_text(report, "audit");
    assert!(audit.contains("portico_agent_helper"), "{audit}");
    // "Verify the chain" walks the whole log (`/api/audit/verify`) and says it is whole.
    let verified = report["auditVerify"].as_str().unwrap_or_default();
    assert!(
        verified.starts_with("ok: ") && verified.contains(" record(s) chained (ids 1 to "),
        "{verified}"
    );

    // The approval: the held call's request, with its exact arguments, approved by a click.
    let approve = &report["approve"];
    assert_eq!(approve["id"], approved, "{report:#}");
    assert_eq!(approve["gone"], true, "{report:#}");
    assert_eq!(
        approve["arguments"], "{\n  \"message\": \"echo from the tour\"\n}",
        "{report:#}"
    );
    let decided = approve["decisions"].as_array().unwrap();
    // Approved, and (once the held call ran) consumed.
    assert!(
        decided
            .iter()
            .any(|d| d["id"] == approved && (d["state"] == "approved" || d["state"] == "consumed")),
        "{report:#}"
    );
    let (status, view) = call(
        base,
        token,
        "GET",
        &format!("/api/approvals/{approved}"),
        None,
    )
    .await;
    assert_eq!(status, 200, "{view:#}");
    assert!(
        ["approved", "consumed"].contains(&view["status"].as_str().unwrap()),
        "{view:#}"
    );
    assert_eq!(view["decidedVia"], "web", "{view:#}");

    // The chat: the answer was built from its text events as they arrived, then is the reply; loaded back from the
    // conversation list it is there again.
    let chat = &report["chat"];
    let expected = "Hello from the scripted helper, you said: hello dashboard";
    assert_eq!(chat["state"], "done", "{report:#}");
    assert_eq!(chat["text"], expected, "{report:#}");
    assert_eq!(chat["user"], json!(["hello dashboard"]), "{report:#}");
    let partials: Vec<&str> = chat["partials"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap())
        .collect();
    // One `text` event per word (the scripted model's pieces), each appended as it came.
    assert_eq!(
        chat["chunks"].as_u64().unwrap() as usize,
        expected.split_inclusive(' ').count(),
        "{report:#}"
    );
    assert!(
        partials.iter().all(|p| expected.starts_with(p)),
        "{partials:?}"
    );
    assert_eq!(partials.last(), Some(&expected), "{partials:?}");
    assert!(chat["conversations"].as_u64().unwrap() >= 1, "{report:#}");
    assert_eq!(
        chat["reloaded"],
        json!(["hello dashboard", expected]),
        "{report:#}"
    );

    // The schema one property a line, and an input per property.
    let schema = report["tryIt"]["schema"].as_str().unwrap();
    assert!(
        schema.contains("a: number required — First number"),
        "{schema}"
    );
    assert!(
        schema.contains("b: number required — Second number"),
        "{schema}"
    );
    assert_eq!(
        report["tryIt"]["args"],
        json!([["a", "input", "number"], ["b", "input", "number"]])
    );
    // Typed into the inputs, the arguments as JSON follow (numbers as numbers).
    assert_eq!(report["tryIt"]["json"], "{\n  \"a\": 2,\n  \"b\": 3\n}");

    // The live change (a second held call from outside) reached the badge without a reload.
    let live = &report["live"];
    assert_eq!(live["changed"], true, "{report:#}");
    assert_eq!(live["reloaded"], false, "{report:#}");
    assert_eq!(live["after"], "1", "{report:#}");
}

/// The page on an open loopback door (no token, so no login): every page loads without a failed
/// request or console error, a tool is tried as `client:api`, and the stream is live.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_works_on_an_open_door_without_a_login() {
    let Some(chromium) = chromium() else {
        return;
    };
    let home = Home::new(&config(None));
    let mut daemon = Daemon::start(&home);
    daemon.wait_for_line("portico: ready");
    let base = daemon.base.clone();
    // Something in the audit log before the tour.
    let (status, first) = call(
        &base,
        None,
        "POST",
        "/api/agents/helper/message",
        Some(json!({"message": "before the tour"})),
    )
    .await;
    assert_eq!(status, 200, "{first:#}");
    // A call held by the policy, waiting for an answer while the browser looks.
    let held = message_in_background(&base, None, "echo from the tour");
    let approvals = pending(&base, None, 1).await;
    let approved = approvals[0]["id"].as_str().unwrap().to_string();

    let dir = screenshot_dir("open-door");
    let dir_arg = dir.display().to_string();
    let url = format!("{base}/");
    let second = std::sync::Arc::new(std::sync::Mutex::new(None));
    let report = {
        let base = base.clone();
        let second = second.clone();
        let runtime = tokio::runtime::Handle::current();
        tokio::task::spawn_blocking(move || {
            tour(
                &chromium,
                &[
                    "--url",
                    &url,
                    "--screenshots",
                    &dir_arg,
                    "--approve",
                    GATED,
                    "--try",
                    TRIED,
                    "--try-args",
                    r#"{"a": 2, "b": 3}"#,
                    "--chat",
                    "helper",
                    "--message",
                    "hello dashboard",
                    "--live",
                    "approvals",
                    "--live-selector",
                    "[data-testid=\"approvals-badge\"]",
                    "--live-text",
                    "1",
                ],
                || {
                    let _guard = runtime.enter();
                    *second.lock().unwrap() =
                        Some(message_in_background(&base, None, "echo while watched"));
                },
            )
        })
        .await
        .unwrap()
    };
    eprintln!("dashboard tour: {report}");
    assert_common(&report, &base, None, &approved).await;
    assert_screenshots(&report, &dir, &AFTER_ACTIONS);

    // The held call finished once approved, with the tool's result.
    let (status, reply) = tokio::time::timeout(Duration::from_secs(60), held)
        .await
        .expect("the approval did not wake the held call")
        .unwrap();
    assert_eq!(status, 200, "{reply:#}");
    assert_eq!(
        reply["reply"], "helper heard: Echo: echo from the tour",
        "{reply:#}"
    );

    // No login on an open door; no cookie; no failed request and no console error.
    assert_eq!(report["login"], Value::Null, "{report:#}");
    assert_eq!(report["cookies"], json!([]), "{report:#}");
    assert_eq!(report["failedRequests"], json!([]), "{report:#}");
    assert_eq!(report["consoleErrors"], json!([]), "{report:#}");
    // Tried as `client:api`, the door's caller without tokens.
    assert_eq!(report["tryIt"]["outcome"], "ok", "{report:#}");
    assert_eq!(
        report["tryIt"]["text"], "The sum of 2 and 3 is 5.",
        "{report:#}"
    );
    // The event stream is open, so the badge changed by an event.
    assert_eq!(report["liveState"], "open", "{report:#}");

    // The second held call: denied here, so its agent run ends.
    let second = second
        .lock()
        .unwrap()
        .take()
        .expect("the live change was made");
    let approvals = pending(&base, None, 1).await;
    let id = approvals[0]["id"].as_str().unwrap();
    let (status, _) = call(
        &base,
        None,
        "POST",
        &format!("/api/approvals/{id}/deny"),
        Some(json!({"via": "api"})),
    )
    .await;
    assert_eq!(status, 200);
    let (status, _) = tokio::time::timeout(Duration::from_secs(60), second)
        .await
        .expect("the denial did not end the held call")
        .unwrap();
    assert!(status == 200 || status == 502, "{status}");
    assert!(daemon.stop().success());
}

/// The whole contract: a token door, logged in through the form (a wrong token first), the session
/// in an HttpOnly SameSite=Strict cookie, a tool tried for its result, and the live event stream
/// open, carrying the change made from outside. Needs the dashboard's backend routes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_tour_with_a_login_try_it_and_live_events() {
    let Some(chromium) = chromium() else {
        return;
    };
    let home = Home::new(&config(Some(TOKEN)));
    let mut daemon = Daemon::start(&home);
    daemon.wait_for_line("portico: ready");
    let base = daemon.base.clone();
    let (status, first) = call(
        &base,
        Some(TOKEN),
        "POST",
        "/api/agents/helper/message",
        Some(json!({"message": "before the tour"})),
    )
    .await;
    assert_eq!(status, 200, "{first:#}");
    // An A2A task for the A2A page: a message to the helper over the A2A door, answered at once.
    let sent = client()
        .post(format!("{base}/a2a/helper"))
        .bearer_auth(TOKEN)
        .header("A2A-Version", "1.0")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {
            "messageId": "m-dashboard-tour", "role": "ROLE_USER", "parts": [{"text": "hello over a2a"}]
        }}}))
        .send()
        .await
        .unwrap();
    let sent: Value = sent.json().await.unwrap();
    let task = &sent["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{sent:#}");
    let task_id = task["id"].as_str().unwrap().to_string();
    let held = message_in_background(&base, Some(TOKEN), "echo from the tour");
    let approvals = pending(&base, Some(TOKEN), 1).await;
    let approved = approvals[0]["id"].as_str().unwrap().to_string();

    let dir = screenshot_dir("token-door");
    let dir_arg = dir.display().to_string();
    let url = format!("{base}/");
    let second = std::sync::Arc::new(std::sync::Mutex::new(None));
    let report = {
        let base = base.clone();
        let second = second.clone();
        let runtime = tokio::runtime::Handle::current();
        tokio::task::spawn_blocking(move || {
            tour(
                &chromium,
                &[
                    "--url",
                    &url,
                    "--screenshots",
                    &dir_arg,
                    "--wrong-token",
                    "not-the-token",
                    "--token",
                    TOKEN,
                    "--approve",
                    GATED,
                    "--try",
                    TRIED,
                    "--try-args",
                    r#"{"a": 2, "b": 3}"#,
                    "--chat",
                    "helper",
                    "--message",
                    "hello dashboard",
                    "--task",
                    &task_id,
                    "--live",
                    "approvals",
                    "--live-selector",
                    "[data-testid=\"approvals-badge\"]",
                    "--live-text",
                    "1",
                ],
                || {
                    let _guard = runtime.enter();
                    *second.lock().unwrap() = Some(message_in_background(
                        &base,
                        Some(TOKEN),
                        "echo while watched",
                    ));
                },
            )
        })
        .await
        .unwrap()
    };
    eprintln!("dashboard tour: {report}");
    assert_common(&report, &base, Some(TOKEN), &approved).await;
    assert_screenshots(&report, &dir, &AFTER_ACTIONS);
    assert_screenshots(&report, &dir, &["login", "a2a-task"]);
    // The A2A task, opened: its state and its history, the question and the agent's answer.
    assert_eq!(report["task"]["state"], "completed", "{report:#}");
    assert_eq!(
        report["task"]["history"],
        json!([
            "hello over a2a",
            "Hello from the scripted helper, you said: hello over a2a"
        ]),
        "{report:#}"
    );
    let (status, reply) = tokio::time::timeout(Duration::from_secs(60), held)
        .await
        .expect("the approval did not wake the held call")
        .unwrap();
    assert_eq!(status, 200, "{reply:#}");
    assert_eq!(
        reply["reply"], "helper heard: Echo: echo from the tour",
        "{reply:#}"
    );

    // The login: the form, a refusal shown for the wrong token, then the session as a cookie the
    // page cannot read.
    let login = &report["login"];
    assert_eq!(login["formShown"], true, "{report:#}");
    assert!(
        !login["wrongError"].as_str().unwrap_or_default().is_empty(),
        "{report:#}"
    );
    assert_eq!(login["loggedIn"], true, "{report:#}");
    assert!(
        login["whoami"].as_str().unwrap().contains("client:default"),
        "{report:#}"
    );
    assert_eq!(login["logoutShown"], true, "{report:#}");
    assert_eq!(
        report["cookies"],
        json!([{"name": "portico_ui", "httpOnly": true, "sameSite": "Strict", "path": "/"}]),
        "{report:#}"
    );
    // The only failures: the session asked for before the login, and the wrong token.
    let failed: Vec<(String, String, u64)> = report["failedRequests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["method"].as_str().unwrap().to_string(),
                f["url"].as_str().unwrap().to_string(),
                f["status"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        failed,
        [
            ("GET".to_string(), "/ui/session".to_string(), 401),
            ("POST".to_string(), "/ui/login".to_string(), 401),
        ],
        "{report:#}"
    );
    // Their two console lines (whether the first comes before or after the form shows is the
    // browser's timing), and nothing else.
    let unauthorized =
        "Failed to load resource: the server responded with a status of 401 (Unauthorized)";
    let texts: Vec<&str> = report["consoleErrors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["text"].as_str().unwrap())
        .collect();
    assert_eq!(texts, [unauthorized, unauthorized], "{report:#}");
    for page in PAGES {
        assert_eq!(
            report["pages"][page]["consoleErrors"],
            json!([]),
            "{page}: {report:#}"
        );
    }
    // The tool tried: its result text.
    assert_eq!(report["tryIt"]["outcome"], "ok", "{report:#}");
    assert_eq!(
        report["tryIt"]["text"], "The sum of 2 and 3 is 5.",
        "{report:#}"
    );
    // The live change came over the event stream.
    assert_eq!(report["liveState"], "open", "{report:#}");
    assert_eq!(report["live"]["state"], "open", "{report:#}");
    let second = second
        .lock()
        .unwrap()
        .take()
        .expect("the live change was made");
    let approvals = pending(&base, Some(TOKEN), 1).await;
    let id = approvals[0]["id"].as_str().unwrap();
    let (status, _) = call(
        &base,
        Some(TOKEN),
        "POST",
        &format!("/api/approvals/{id}/deny"),
        Some(json!({"via": "api"})),
    )
    .await;
    assert_eq!(status, 200);
    let _ = tokio::time::timeout(Duration::from_secs(60), second)
        .await
        .expect("the denial did not end the held call");
    assert!(daemon.stop().success());
}
