//! The dashboard's Resources and Prompts pages and its shared live stream, against the real daemon
//! with a real upstream (`@modelcontextprotocol/server-everything` over stdio) on a token door:
//! the API routes the pages read (`/api/resources`, `/api/resource-templates`,
//! `/api/resources/read`, `/api/prompts`, `/api/prompts/{name}/get`), then headless Chromium
//! (Debian's, driven by playwright-core through `tests/peers/js/dashboard_pages.mjs`, locked to the
//! daemon's origin) reading a resource, filling a template, getting a prompt and opening the raw
//! JSON views (with `PORTICO_DASHBOARD_DOCS=1`, saving `docs/dashboard/resources.png` and `prompts.png`), and ten tabs of one
//! browser that all load and stay live on one event stream.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::approvals_web::{browser_script, chromium};
use crate::client::*;
use crate::support::*;

const TOKEN: &str = "dashboard-pages-test-token";
const FEATURES: &str = "portico://everything/demo://resource/static/document/features.md";
const TEXT_TEMPLATE: &str = "portico://everything/demo://resource/dynamic/text/{resourceId}";
const ARGS_PROMPT: &str = "mcp_everything_args_prompt";

/// Two copies of the everything server: `everything`, whose resources and prompts are read, and
/// `spare`, which a test disables to make a change the pages must show.
fn config() -> String {
    let everything = everything_js().display().to_string();
    let first = stdio_entry("everything", &node(), &[everything.as_str(), "stdio"], "");
    let spare = stdio_entry("spare", &node(), &[everything.as_str(), "stdio"], "");
    format!("[server]\nlisten = \"127.0.0.1:0\"\ntoken = {TOKEN:?}\n\n{first}{spare}")
}

/// What the everything server's `docs/features.md` (served as `FEATURES`) says.
fn features_text() -> String {
    let path = everything_js().parent().unwrap().join("docs/features.md");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
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

/// `GET path` until `ready(body)`, at most 30 s.
async fn until(base: &str, path: &str, ready: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (status, body) = call(base, Some(TOKEN), "GET", path, None).await;
        assert_eq!(status, 200, "{path}: {body:#}");
        if ready(&body) {
            return body;
        }
        assert!(
            Instant::now() < deadline,
            "{path} never got there (test guard): {body:#}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn server_state(servers: &Value, name: &str) -> String {
    servers["servers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == name)
        .map(|s| s["state"].as_str().unwrap_or_default().to_string())
        .unwrap_or_default()
}

/// A run of `dashboard_pages.mjs`: each event line it prints goes to `on_event` (which makes the
/// change every tab must show), then its report is returned.
fn drive(chromium: &Path, args: &[&str], on_event: impl FnMut(&str)) -> Value {
    browser_script(chromium, "dashboard_pages.mjs", args, on_event)
}

/// The only failed request and console error: the session asked for before the login (in the
/// first tab, in `phase`).
fn assert_only_the_login_refused(report: &Value, phase: &str) {
    assert_eq!(
        report["failedRequests"],
        json!([{"page": 1, "phase": phase, "method": "GET", "url": "/ui/session", "status": 401}]),
        "{report:#}"
    );
    assert_eq!(
        report["consoleErrors"],
        json!([{"page": 1, "phase": phase, "text": "Failed to load resource: the server responded with a status of 401 (Unauthorized)"}]),
        "{report:#}"
    );
}

/// The routes the Resources and Prompts pages read: the upstream's resources, templates and
/// prompts under Portico's names, each with its server; a read and a get answered with the
/// upstream's own content; and refusals in words (unknown URI or prompt, a missing argument, a
/// server that is down, no token).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_resource_and_prompt_routes_answer_from_a_real_upstream() {
    let home = Home::new(&config());
    let mut daemon = Daemon::start(&home);
    daemon.wait_for_line("portico: ready");
    let base = daemon.base.clone();
    let token = Some(TOKEN);

    let (status, listed) = call(&base, token, "GET", "/api/resources", None).await;
    assert_eq!(status, 200, "{listed:#}");
    assert_eq!(listed["exposed"], true);
    let features = listed["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["uri"] == FEATURES)
        .unwrap_or_else(|| panic!("{FEATURES} is not listed: {listed:#}"));
    assert_eq!(features["name"], "features.md");
    assert_eq!(features["mimeType"], "text/markdown");
    assert_eq!(features["server"], "everything");

    let (status, templates) = call(&base, token, "GET", "/api/resource-templates", None).await;
    assert_eq!(status, 200, "{templates:#}");
    let template = templates["resourceTemplates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["uriTemplate"] == TEXT_TEMPLATE)
        .unwrap_or_else(|| panic!("{TEXT_TEMPLATE} is not listed: {templates:#}"));
    assert_eq!(template["name"], "Dynamic Text Resource");
    assert_eq!(template["server"], "everything");

    // A read: the upstream's contents under the URI asked for, its text the file's.
    let (status, read) = call(
        &base,
        token,
        "POST",
        "/api/resources/read",
        Some(json!({"uri": FEATURES})),
    )
    .await;
    assert_eq!(status, 200, "{read:#}");
    assert_eq!(
        read["result"]["contents"],
        json!([{"uri": FEATURES, "mimeType": "text/markdown", "text": features_text()}])
    );
    assert!(read["duration_ms"].is_u64(), "{read:#}");
    // A template filled in: text, and a blob.
    let filled = TEXT_TEMPLATE.replace("{resourceId}", "42");
    let (status, read) = call(
        &base,
        token,
        "POST",
        "/api/resources/read",
        Some(json!({"uri": filled})),
    )
    .await;
    assert_eq!(status, 200, "{read:#}");
    let text = read["result"]["contents"][0]["text"].as_str().unwrap();
    assert!(
        text.starts_with("Resource 42: This is a plaintext resource created at "),
        "{read:#}"
    );
    let (status, read) = call(
        &base,
        token,
        "POST",
        "/api/resources/read",
        Some(json!({"uri": "portico://everything/demo://resource/dynamic/blob/7"})),
    )
    .await;
    assert_eq!(status, 200, "{read:#}");
    assert!(
        read["result"]["contents"][0]["blob"].is_string(),
        "{read:#}"
    );

    // Unknown URIs, in Portico's namespace or the upstream's.
    let (status, refused) = call(
        &base,
        token,
        "POST",
        "/api/resources/read",
        Some(json!({"uri": "portico://nowhere/x"})),
    )
    .await;
    assert_eq!(status, 404, "{refused:#}");
    assert_eq!(
        refused,
        json!({"error": "no resource `portico://nowhere/x`: Portico resource URIs look like portico://SERVER/URI", "kind": "not_found"})
    );
    let (status, refused) = call(
        &base,
        token,
        "POST",
        "/api/resources/read",
        Some(json!({"uri": "portico://everything/demo://nothing/here"})),
    )
    .await;
    assert_eq!(status, 404, "{refused:#}");
    assert_eq!(refused["kind"], "not_found");
    assert!(
        refused["error"]
            .as_str()
            .unwrap()
            .contains("demo://nothing/here"),
        "{refused:#}"
    );
    let (status, refused) = call(
        &base,
        token,
        "POST",
        "/api/resources/read",
        Some(json!({"url": FEATURES})),
    )
    .await;
    assert_eq!(status, 400, "{refused:#}");
    assert!(
        refused["error"]
            .as_str()
            .unwrap()
            .starts_with("the body must be a JSON object like {\"uri\": \"portico://SERVER/URI\"}"),
        "{refused:#}"
    );

    // Prompts: listed with their arguments, got with them.
    let (status, prompts) = call(&base, token, "GET", "/api/prompts", None).await;
    assert_eq!(status, 200, "{prompts:#}");
    let prompt = prompts["prompts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == ARGS_PROMPT)
        .unwrap_or_else(|| panic!("{ARGS_PROMPT} is not listed: {prompts:#}"));
    assert_eq!(prompt["server"], "everything");
    assert_eq!(
        prompt["arguments"],
        json!([{"name": "city", "description": "Name of the city", "required": true}, {"name": "state", "required": false}])
    );
    let path = format!("/api/prompts/{ARGS_PROMPT}/get");
    let (status, got) = call(
        &base,
        token,
        "POST",
        &path,
        Some(json!({"arguments": {"city": "Lyon", "state": "Rhône"}})),
    )
    .await;
    assert_eq!(status, 200, "{got:#}");
    assert_eq!(
        got["result"]["messages"],
        json!([{"role": "user", "content": {"type": "text", "text": "What's weather in Lyon, Rhône?"}}])
    );
    let (status, refused) = call(&base, token, "POST", &path, Some(json!({}))).await;
    assert_eq!(status, 400, "{refused:#}");
    assert_eq!(
        refused,
        json!({"error": format!("prompt `{ARGS_PROMPT}` needs the argument `city`"), "kind": "invalid_arguments"})
    );
    let (status, refused) = call(
        &base,
        token,
        "POST",
        &path,
        Some(json!({"arguments": {"city": 7}})),
    )
    .await;
    assert_eq!(status, 400, "{refused:#}");
    assert_eq!(
        refused["error"],
        "prompt argument `city` must be a string (MCP prompt arguments are text)"
    );
    let (status, refused) = call(&base, token, "POST", "/api/prompts/nope/get", None).await;
    assert_eq!(status, 404, "{refused:#}");
    assert_eq!(
        refused,
        json!({"error": "no prompt named `nope`", "kind": "not_found"})
    );

    // No token, no answer.
    let (status, _) = call(&base, None, "GET", "/api/resources", None).await;
    assert_eq!(status, 401);
    let (status, _) = call(&base, None, "POST", &path, Some(json!({}))).await;
    assert_eq!(status, 401);

    // A server that is down: its items are not served, and the answer says why.
    let (status, _) = call(
        &base,
        token,
        "POST",
        "/api/servers/everything/disable",
        None,
    )
    .await;
    assert_eq!(status, 202);
    until(&base, "/api/servers", |s| {
        server_state(s, "everything") == "disabled"
    })
    .await;
    let (status, refused) = call(
        &base,
        token,
        "POST",
        "/api/resources/read",
        Some(json!({"uri": FEATURES})),
    )
    .await;
    assert_eq!(status, 503, "{refused:#}");
    assert_eq!(
        refused,
        json!({"error": "server `everything` is disabled, so its resources are not served now; try again once it is ready (see the Servers page or `portico servers`)", "kind": "unavailable"})
    );
    let (status, refused) = call(
        &base,
        token,
        "POST",
        &path,
        Some(json!({"arguments": {"city": "Lyon"}})),
    )
    .await;
    assert_eq!(status, 503, "{refused:#}");
    assert_eq!(
        refused["error"],
        "server `everything` is disabled, so its prompts are not served now; try again once it is ready (see the Servers page or `portico servers`)"
    );
    let listed = until(&base, "/api/resources", |l| {
        !l["resources"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["server"] == "everything")
    })
    .await;
    assert!(
        listed["resources"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["server"] == "spare"),
        "{listed:#}"
    );
    assert!(daemon.stop().success());
}

/// In Chromium: the Resources page reads a resource (its actual text) and a template filled in
/// from its form, the Prompts page gets a prompt with its arguments (the message says them), and
/// both raw JSON views show exactly what the API answered. Saves the pages' PNGs for the docs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_resources_and_prompts_pages_read_and_get_from_a_real_upstream() {
    let Some(chromium) = chromium() else {
        return;
    };
    let home = Home::new(&config());
    let mut daemon = Daemon::start(&home);
    daemon.wait_for_line("portico: ready");
    let base = daemon.base.clone();
    let shots = repo_root().join("target/dashboard-screenshots/pages");
    let _ = std::fs::remove_dir_all(&shots);
    let shots_arg = shots.display().to_string();
    let url = format!("{base}/");
    let report = tokio::task::spawn_blocking(move || {
        drive(
            &chromium,
            &[
                "--url",
                &url,
                "--token",
                TOKEN,
                "--pages",
                "--screenshots",
                &shots_arg,
                "--resource",
                FEATURES,
                "--template",
                TEXT_TEMPLATE,
                "--vars",
                r#"{"resourceId": "42"}"#,
                "--prompt",
                ARGS_PROMPT,
                "--args",
                r#"{"city": "Lyon", "state": "Rhône"}"#,
            ],
            |event| panic!("unexpected {event}"),
        )
    })
    .await
    .unwrap();
    eprintln!("dashboard pages: {report}");
    assert_eq!(report["ok"], true, "{report:#}");
    assert_eq!(report["blocked"], json!([]), "{report:#}");
    assert_only_the_login_refused(&report, "resources");

    let resources = &report["resources"];
    let listed: Vec<&str> = resources["listed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u.as_str().unwrap())
        .collect();
    assert!(listed.contains(&FEATURES), "{report:#}");
    assert!(
        listed
            .iter()
            .any(|u| u.starts_with("portico://spare/demo://resource/static/document/")),
        "{report:#}"
    );
    assert!(
        resources["templates"]
            .as_array()
            .unwrap()
            .contains(&json!(TEXT_TEMPLATE)),
        "{report:#}"
    );
    // The resource read by a click: its actual text, in view.
    assert_eq!(resources["outcome"], "ok", "{report:#}");
    assert_eq!(resources["text"], features_text(), "{report:#}");
    assert_eq!(resources["inViewport"], true, "{report:#}");
    // The template filled in from the form, read.
    let filled = TEXT_TEMPLATE.replace("{resourceId}", "42");
    assert_eq!(resources["filledUri"], filled, "{report:#}");
    assert_eq!(resources["templateOutcome"], "ok", "{report:#}");
    let text = resources["templateText"].as_str().unwrap();
    assert!(
        text.starts_with("Resource 42: This is a plaintext resource created at "),
        "{report:#}"
    );
    // The raw JSON view: the MCP result as the API answered it.
    assert_eq!(
        resources["raw"],
        json!({"contents": [{"uri": filled, "mimeType": "text/plain", "text": text}]}),
        "{report:#}"
    );

    let prompts = &report["prompts"];
    assert!(
        prompts["listed"]
            .as_array()
            .unwrap()
            .contains(&json!(ARGS_PROMPT)),
        "{report:#}"
    );
    assert_eq!(prompts["outcome"], "ok", "{report:#}");
    assert_eq!(
        prompts["messages"],
        json!([{"role": "user", "text": "What's weather in Lyon, Rhône?"}]),
        "{report:#}"
    );
    assert_eq!(
        prompts["raw"],
        json!({"messages": [{"role": "user", "content": {"type": "text", "text": "What's weather in Lyon, Rhône?"}}]}),
        "{report:#}"
    );

    // The pages' PNGs, checked, and with `PORTICO_DASHBOARD_DOCS=1` (scripts/test sets it) copied
    // to docs/dashboard/ for docs/dashboard.md, as dashboard_layout does with the other pages'.
    let docs = std::env::var("PORTICO_DASHBOARD_DOCS")
        .is_ok_and(|v| v == "1")
        .then(|| repo_root().join("docs/dashboard"));
    for name in ["resources", "prompts"] {
        let shot = shots.join(format!("{name}.png"));
        let bytes = std::fs::read(&shot).unwrap_or_else(|e| panic!("{}: {e}", shot.display()));
        assert!(
            bytes.starts_with(b"\x89PNG\r\n\x1a\n"),
            "{}",
            shot.display()
        );
        assert!(
            (16 * 1024..300 * 1024).contains(&bytes.len()),
            "{} is {} bytes",
            shot.display(),
            bytes.len()
        );
        if let Some(docs) = &docs {
            std::fs::create_dir_all(docs).unwrap();
            std::fs::write(docs.join(format!("{name}.png")), &bytes).unwrap();
        }
    }
    assert!(daemon.stop().success());
}

/// Ten tabs of one browser on a token door (logged in once, in the first): all load, although a
/// browser keeps at most 6 connections per host, because they share ONE event stream; each shows
/// a change made from outside (a server disabled) without a reload, and says it is live; then a
/// tool tried in the tenth completes. When the first tab (the stream's holder) closes, another
/// opens the stream and the nine left see the next change (the server enabled) too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_tabs_share_one_live_stream_and_all_stay_live() {
    let Some(chromium) = chromium() else {
        return;
    };
    let home = Home::new(&config());
    let mut daemon = Daemon::start(&home);
    daemon.wait_for_line("portico: ready");
    let base = daemon.base.clone();
    let url = format!("{base}/");
    let report = {
        let base = base.clone();
        let runtime = tokio::runtime::Handle::current();
        tokio::task::spawn_blocking(move || {
            drive(
                &chromium,
                &[
                    "--url",
                    &url,
                    "--token",
                    TOKEN,
                    "--tabs",
                    "10",
                    "--selector",
                    "tr[data-server=\"spare\"] [data-field=\"state\"]",
                    "--text",
                    "disabled",
                    "--then-text",
                    "ready",
                    "--try",
                    "mcp_everything_get_sum",
                    "--try-args",
                    r#"{"a": 2, "b": 3}"#,
                ],
                |event| {
                    let action = match event {
                        "tabs-ready" => "disable",
                        "leader-closed" => "enable",
                        other => panic!("unexpected {other}"),
                    };
                    let (status, body) = runtime.block_on(call(
                        &base,
                        Some(TOKEN),
                        "POST",
                        &format!("/api/servers/spare/{action}"),
                        None,
                    ));
                    assert_eq!(status, 202, "{body:#}");
                },
            )
        })
        .await
        .unwrap()
    };
    eprintln!("dashboard tabs: {report}");
    assert_eq!(report["ok"], true, "{report:#}");
    assert_eq!(report["loaded"], 10, "{report:#}");
    let tabs = report["tabs"].as_array().unwrap();
    assert_eq!(tabs.len(), 10, "{report:#}");
    for (i, tab) in tabs.iter().enumerate() {
        assert_eq!(
            tab,
            &json!({"loaded": true, "changed": true, "reloaded": false, "live": "open"}),
            "tab {}: {report:#}",
            i + 1
        );
    }
    // One stream for all ten tabs, and one more when its tab closed (a third only if one had to
    // reconnect).
    let streams = report["eventStreams"].as_u64().unwrap();
    assert!((2..=3).contains(&streams), "{streams} streams: {report:#}");
    let handover = &report["handover"];
    assert_eq!(handover["newStreams"], 1, "{report:#}");
    // The other nine took over: live again, and the next change (the server enabled) reached
    // each without a reload.
    assert_eq!(handover["live"], json!(vec!["open"; 9]), "{report:#}");
    assert_eq!(handover["changed"], 9, "{report:#}");
    // The POST from the tenth tab completed, with the tool's answer and its raw JSON.
    assert_eq!(report["tryIt"]["outcome"], "ok", "{report:#}");
    assert_eq!(
        report["tryIt"]["text"], "The sum of 2 and 3 is 5.",
        "{report:#}"
    );
    assert_eq!(
        report["tryIt"]["raw"]["content"],
        json!([{"type": "text", "text": "The sum of 2 and 3 is 5."}]),
        "{report:#}"
    );
    assert_only_the_login_refused(&report, "open");
    assert!(daemon.stop().success());
}

/// With `[expose] resources = false` and `prompts = false` the doors serve neither, and the
/// dashboard's routes say so: empty lists marked `exposed: false`, and a read or get refused with
/// the setting to change.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hidden_resources_and_prompts_are_neither_listed_nor_read() {
    let config = config().replace(
        "[server]\n",
        "[expose]\nresources = false\nprompts = false\n\n[server]\n",
    );
    let home = Home::new(&config);
    let mut daemon = Daemon::start(&home);
    daemon.wait_for_line("portico: ready");
    let base = daemon.base.clone();
    let token = Some(TOKEN);
    for (path, key) in [
        ("/api/resources", "resources"),
        ("/api/resource-templates", "resourceTemplates"),
        ("/api/prompts", "prompts"),
    ] {
        let (status, listed) = call(&base, token, "GET", path, None).await;
        assert_eq!(status, 200, "{listed:#}");
        assert_eq!(listed, json!({key: [], "exposed": false}), "{path}");
    }
    let (status, refused) = call(
        &base,
        token,
        "POST",
        "/api/resources/read",
        Some(json!({"uri": FEATURES})),
    )
    .await;
    assert_eq!(status, 404, "{refused:#}");
    assert_eq!(
        refused,
        json!({"error": "this Portico does not expose resources to MCP clients ([expose] resources = false in its config); set it to true to see them here", "kind": "not_found"})
    );
    let (status, refused) = call(
        &base,
        token,
        "POST",
        &format!("/api/prompts/{ARGS_PROMPT}/get"),
        Some(json!({"arguments": {"city": "Lyon"}})),
    )
    .await;
    assert_eq!(status, 404, "{refused:#}");
    assert_eq!(
        refused["error"],
        "this Portico does not expose prompts to MCP clients ([expose] prompts = false in its config); set it to true to see them here"
    );
    assert!(daemon.stop().success());
}

/// A resource larger than `[server] max_response_bytes` is refused as the MCP doors refuse it,
/// with the bound and the setting that raises it; a small one still reads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resource_past_the_response_bound_is_refused_in_words() {
    let config = config().replace("[server]\n", "[server]\nmax_response_bytes = 2000\n");
    let home = Home::new(&config);
    let mut daemon = Daemon::start(&home);
    daemon.wait_for_line("portico: ready");
    let base = daemon.base.clone();
    assert!(features_text().len() > 2000);
    let (status, refused) = call(
        &base,
        Some(TOKEN),
        "POST",
        "/api/resources/read",
        Some(json!({"uri": FEATURES})),
    )
    .await;
    assert_eq!(status, 502, "{refused:#}");
    assert_eq!(refused["kind"], "too_large", "{refused:#}");
    let message = refused["error"].as_str().unwrap();
    assert!(
        message.starts_with(&format!("resource `{FEATURES}` is "))
            && message.ends_with(
                " bytes, over Portico's response limit of 2000 bytes; raise [server] max_response_bytes to read it"
            ),
        "{message}"
    );
    let (status, read) = call(
        &base,
        Some(TOKEN),
        "POST",
        "/api/resources/read",
        Some(json!({"uri": TEXT_TEMPLATE.replace("{resourceId}", "1")})),
    )
    .await;
    assert_eq!(status, 200, "{read:#}");
    assert!(daemon.stop().success());
}
