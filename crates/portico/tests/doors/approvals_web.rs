//! Answering approvals from outside the call: the daemon's page clicked in headless Chromium (Debian's,
//! driven by playwright-core) for a call held over `/mcp`, and `portico approvals` (the CLI binary)
//! for a call held through `portico mcp` proxying to the daemon; both driven by the Python `mcp` SDK.
//! The gated tool is `shell_exec` appending a line to a file, so every run is counted.

use std::path::Path;
use std::process::{Output, Stdio};

use serde_json::{Value, json};

pub(crate) use crate::browser::{browser_script, chromium};
use crate::client::*;

const TOKEN: &str = "approvals-web-test-token";

const CONFIG: &str = r#"
[server]
listen = "127.0.0.1:0"
token = "approvals-web-test-token"

[builtins]
shell_exec = true

[[policies]]
tools = ["shell_exec"]
action = "approve"
reason = "an owner approves every shell command"
"#;

/// Attacker-influenced text in an argument: the page must show it as these characters.
const MARKUP: &str = "<script>document.title='pwned'</script><b>bold</b>";

/// An integer a browser's `JSON.parse` rounds (to 9007199254740992): the page must show it exactly.
const BEYOND_2_53: u64 = 9_007_199_254_740_993;

/// Runs `js/browser_click.mjs` against `url` and returns its report; the whole run is bounded.
pub(crate) fn browser(chromium: &Path, url: &str, extra: &[&str]) -> Value {
    let mut args = vec!["--url", url];
    args.extend_from_slice(extra);
    browser_script(chromium, "browser_click.mjs", &args, |event| {
        panic!("browser_click.mjs sent an event it has none of: {event}")
    })
}

/// One `sdk_client.py` run (a fresh SDK session) calling `shell_exec` with `command`; the call's
/// result as the SDK saw it.
fn sdk_call(home: &Home, door: &[&str], command: &str) -> Value {
    sdk_call_with(home, door, &json!({"command": command}))
}

/// As [`sdk_call`], with these arguments.
fn sdk_call_with(home: &Home, door: &[&str], arguments: &Value) -> Value {
    let arguments = arguments.to_string();
    let mut args = vec!["--call", "shell_exec", "--args", arguments.as_str()];
    args.extend_from_slice(door);
    let report = sdk_report(|command| {
        command.args(&args).env("PORTICO_HOME", home.dir.path());
    });
    report["calls"][0]["result"].clone()
}

/// The held call's envelope: its request id, after checking the rest of it.
fn held(result: &Value) -> String {
    assert_eq!(result["isError"], true, "{result:#}");
    let error = &result["structuredContent"]["error"];
    assert_eq!(result["structuredContent"]["ok"], false, "{result:#}");
    assert_eq!(error["code"], "approval_required", "{result:#}");
    assert_eq!(error["tool"], "shell_exec", "{result:#}");
    assert_eq!(
        error["reason"], "an owner approves every shell command",
        "{result:#}"
    );
    let id = error["approvalRequestId"].as_str().unwrap().to_string();
    assert!(id.starts_with("apr_"), "{id}");
    assert_eq!(error["approvalPath"], format!("/approvals/{id}"));
    id
}

fn runs(home: &Home) -> String {
    std::fs::read_to_string(home.dir.path().join("workspace/runs.txt")).unwrap_or_default()
}

async fn view(base: &str, id: &str) -> Value {
    let response = reqwest::Client::builder()
        .no_proxy()
        .build()
        .unwrap()
        .get(format!("{base}/api/approvals/{id}"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    response.json().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_held_over_http_is_approved_and_denied_by_clicking_the_page_in_chromium() {
    let Some(chromium) = chromium() else {
        return;
    };
    let home = Home::new(CONFIG);
    let mut daemon = Daemon::start(&home);
    daemon.wait_for_line("portico: ready");
    let url = format!("{}/mcp", daemon.base);
    let bearer = format!("Authorization: Bearer {TOKEN}");
    let http = ["--http", url.as_str(), "--header", bearer.as_str()];
    // A right-to-left override hides in the comment: the page must show it as an escape.
    let command = format!("echo ran >> runs.txt # {MARKUP} \u{202e}");
    let arguments = json!({"command": command, "timeout_secs": BEYOND_2_53});

    let id = held(&sdk_call_with(&home, &http, &arguments));
    assert_eq!(runs(&home), "");

    // Opened as the CLI prints it, with the token in the fragment; the page takes it out of the
    // URL, keeps it in the tab's sessionStorage (a reload still works) and sets no cookie; a second
    // tab of the same browser, without the fragment, has no token and asks for it.
    let page = format!("{}/approvals/{id}", daemon.base);
    let report = browser(
        &chromium,
        &format!("{page}#token={TOKEN}"),
        &[
            "--click",
            "Approve",
            "--expect-text",
            "Status: approved",
            "--reload",
            "Status: approved",
            "--new-tab",
            "This daemon needs its token to show approvals.",
        ],
    );
    assert_eq!(report["ok"], true, "{report:#}");
    assert_eq!(report["status"], 200, "{report:#}");
    assert_eq!(report["cookies"], json!([]), "{report:#}");
    assert_eq!(report["blocked"], json!([]), "{report:#}");
    // Only the second tab's tokenless read of the API, which is what makes it ask.
    assert_eq!(
        report["consoleErrors"],
        json!([
            "Failed to load resource: the server responded with a status of 401 (Unauthorized)"
        ]),
        "{report:#}"
    );
    let tabs = report["tabs"].as_array().unwrap();
    assert_eq!(tabs.len(), 2, "{report:#}");
    assert_eq!(tabs[0]["url"], page, "no fragment left: {report:#}");
    assert_eq!(tabs[0]["storage"], json!(["portico-approvals-token"]));
    assert_eq!(tabs[1]["url"], page, "{report:#}");
    assert_eq!(tabs[1]["storage"], json!([]), "{report:#}");
    let second = tabs[1]["text"].as_str().unwrap();
    assert!(second.contains("#token=<token>"), "{second}");
    assert!(!second.contains("Status:"), "{second}");
    // No request asked the daemon for the token in its URL.
    let requests = report["requests"].as_array().unwrap();
    assert!(
        requests
            .iter()
            .all(|url| !url.as_str().unwrap().contains(TOKEN)),
        "{report:#}"
    );
    // The arguments, exactly, as text: the markup in them did not run, the number is exact, the
    // override is shown as its escape (and is not in the page as itself).
    let text = tabs[0]["text"].as_str().unwrap();
    assert!(
        text.contains(&format!(
            "\"command\": \"echo ran >> runs.txt # {MARKUP} \\u202e\""
        )),
        "{text}"
    );
    assert!(
        text.contains("\"timeout_secs\": 9007199254740993"),
        "{text}"
    );
    assert!(!text.contains('\u{202e}'), "{text}");
    assert!(text.contains(MARKUP), "{text}");
    assert_eq!(report["title"], "Portico approvals", "{report:#}");
    assert!(
        text.contains("an owner approves every shell command"),
        "{text}"
    );
    assert!(
        !text.contains("Approve"),
        "the buttons are gone once answered: {text}"
    );
    let approved = view(&daemon.base, &id).await;
    assert_eq!(approved["status"], "approved", "{approved:#}");
    assert_eq!(approved["decidedVia"], "web", "{approved:#}");
    // The page's bearer token is the door's token.
    assert_eq!(approved["decidedBy"], "client:default", "{approved:#}");

    // The same call, retried, runs once; a second retry needs a new approval.
    let ran = sdk_call_with(&home, &http, &arguments);
    assert_eq!(
        ran.get("isError").cloned().unwrap_or(json!(false)),
        false,
        "{ran:#}"
    );
    assert_eq!(runs(&home), "ran\n");
    assert_eq!(view(&daemon.base, &id).await["status"], "consumed");
    let again = held(&sdk_call_with(&home, &http, &arguments));
    assert_ne!(again, id);
    assert_eq!(runs(&home), "ran\n");

    // Deny, with a reason typed into the page: the retry is refused and nothing runs.
    let denied_command = "echo denied >> runs.txt";
    let denied_id = held(&sdk_call(&home, &http, denied_command));
    let report = browser(
        &chromium,
        &format!("{}/approvals/{denied_id}#token={TOKEN}", daemon.base),
        &[
            "--fill",
            "Reason for denying (optional)=not on a Friday",
            "--click",
            "Deny",
            "--expect-text",
            "Status: denied",
        ],
    );
    assert_eq!(report["ok"], true, "{report:#}");
    assert!(
        report["text"].as_str().unwrap().contains("not on a Friday"),
        "{report:#}"
    );
    let denied = view(&daemon.base, &denied_id).await;
    assert_eq!(denied["status"], "denied", "{denied:#}");
    assert_eq!(denied["denyReason"], "not on a Friday", "{denied:#}");
    assert_eq!(denied["decidedVia"], "web", "{denied:#}");
    let refused = sdk_call(&home, &http, denied_command);
    assert_eq!(refused["isError"], true, "{refused:#}");
    assert_eq!(
        refused["structuredContent"]["error"]["code"], "policy_denied",
        "{refused:#}"
    );
    assert_eq!(runs(&home), "ran\n");

    // The list page, opened without a token, asks for it; typed into its form, the page shows
    // what is still pending (the second retry's request), with its buttons.
    let list = format!("{}/approvals", daemon.base);
    let report = browser(
        &chromium,
        &list,
        &[
            "--expect-text",
            "This daemon needs its token to show approvals.",
            "--fill",
            "Portico token=wrong-token",
            "--click",
            "Open",
            "--expect-text",
            "The daemon refused this token.",
            "--fill",
            &format!("Portico token={TOKEN}"),
            "--click",
            "Open",
            "--expect-text",
            "1 pending request",
        ],
    );
    assert_eq!(report["ok"], true, "{report:#}");
    assert_eq!(report["url"], list, "{report:#}");
    let text = report["text"].as_str().unwrap();
    assert!(text.contains(MARKUP), "{text}");
    assert_eq!(text.matches("Status: pending").count(), 1, "{text}");
    assert_eq!(
        report["tabs"][0]["storage"],
        json!(["portico-approvals-token"])
    );
    assert_eq!(report["cookies"], json!([]), "{report:#}");

    // The old link, with the token in the query, is refused and says where the token goes.
    let report = browser(&chromium, &format!("{page}?token={TOKEN}"), &[]);
    assert_eq!(report["status"], 400, "{report:#}");
    let text = report["text"].as_str().unwrap();
    assert!(text.contains("#token=<token>"), "{report:#}");
    assert!(!text.contains(TOKEN), "{report:#}");
    assert!(daemon.stop().success());
}

fn portico(home: &Home, args: &[&str]) -> Output {
    home.command(args).stdin(Stdio::null()).output().unwrap()
}

fn stdout_of(output: &Output) -> String {
    assert!(
        output.status.success(),
        "portico failed: {}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn failure_of(output: &Output) -> String {
    assert!(
        !output.status.success(),
        "expected a failure: {}",
        String::from_utf8_lossy(&output.stdout)
    );
    assert_eq!(output.stdout, b"", "errors go to stderr only");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    stderr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_held_through_portico_mcp_is_approved_with_the_cli_and_runs_once() {
    let home = Home::new(CONFIG);
    let config = home.config().display().to_string();
    let portico_bin = env!("CARGO_BIN_EXE_portico");
    // `portico mcp` (no --standalone) proxies to the daemon it finds in PORTICO_HOME.
    let stdio = [
        "--stdio",
        "--",
        portico_bin,
        "mcp",
        "--config",
        config.as_str(),
    ];

    let no_daemon = failure_of(&portico(&home, &["approvals", "list"]));
    assert!(no_daemon.contains("no daemon is running"), "{no_daemon}");
    assert!(no_daemon.contains("portico serve"), "{no_daemon}");

    let mut daemon = Daemon::start(&home);
    daemon.wait_for_line("portico: ready");
    let command = "echo ran >> runs.txt";
    let id = held(&sdk_call(&home, &stdio, command));
    assert_eq!(runs(&home), "");

    // The request is the daemon's: the CLI sees it there.
    let table = stdout_of(&portico(&home, &["approvals", "list"]));
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 2, "{table}");
    assert!(lines[0].starts_with("ID "), "{table}");
    let row: Vec<&str> = lines[1].split_whitespace().collect();
    assert_eq!(row[..3], [id.as_str(), "pending", "shell_exec"], "{table}");
    assert!(
        lines[1].ends_with("an owner approves every shell command"),
        "{table}"
    );
    let shown = stdout_of(&portico(&home, &["approvals", "show", &id]));
    assert!(shown.starts_with(&format!("{id}  pending\n")), "{shown}");
    assert!(
        shown.contains("      \"command\": \"echo ran >> runs.txt\"\n"),
        "{shown}"
    );

    let approved = stdout_of(&portico(&home, &["approvals", "approve", &id]));
    assert!(
        approved.starts_with(&format!("{id}  approved\n")),
        "{approved}"
    );
    let twice = failure_of(&portico(&home, &["approvals", "approve", &id]));
    assert!(twice.contains("is approved, not pending"), "{twice}");
    let unknown = failure_of(&portico(&home, &["approvals", "deny", "apr_nope"]));
    assert!(
        unknown.contains("no approval request `apr_nope`"),
        "{unknown}"
    );

    let ran = sdk_call(&home, &stdio, command);
    assert_eq!(
        ran.get("isError").cloned().unwrap_or(json!(false)),
        false,
        "{ran:#}"
    );
    assert_eq!(runs(&home), "ran\n");

    let listed: Value = serde_json::from_str(&stdout_of(&portico(
        &home,
        &["approvals", "list", "--status", "all", "--json"],
    )))
    .unwrap();
    let approvals = listed["approvals"].as_array().unwrap();
    assert_eq!(approvals.len(), 1, "{listed:#}");
    assert_eq!(approvals[0]["id"], id);
    assert_eq!(approvals[0]["status"], "consumed", "{listed:#}");
    assert_eq!(approvals[0]["decidedVia"], "cli", "{listed:#}");
    // Held by the daemon's HTTP door, which `portico mcp` proxied to with the daemon's token (served
    // in-process, the caller would have been `client:stdio`).
    assert_eq!(approvals[0]["principal"], "client:default", "{listed:#}");
    assert_eq!(approvals[0]["decidedBy"], "client:default", "{listed:#}");
    assert_eq!(approvals[0]["arguments"], json!({"command": command}));
    assert!(approvals[0]["consumedAt"].is_string(), "{listed:#}");
    let pending = stdout_of(&portico(&home, &["approvals", "list"]));
    assert_eq!(pending, "no pending approval requests\n");
    assert!(daemon.stop().success());
}
