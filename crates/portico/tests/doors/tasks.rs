//! The MCP tasks extension (SEP-2663) through Portico: the conformance fixture, Portico's one
//! unprefixed stdio upstream, creates a task for a 2026-07-28 client's call; that client polls it
//! with `tasks/get` to its result through Portico, and another client cannot see it.

use std::path::PathBuf;
use std::process::Command;

use serde_json::{Value, json};

use crate::client::*;

pub(crate) const OWNER: &str = "tasks-owner-token";
pub(crate) const OTHER: &str = "tasks-other-token";
const TASKS: &str = "io.modelcontextprotocol/tasks";

/// The conformance fixture's binary, beside Portico's in the same target directory; built here
/// when missing, as `cargo test -p portico` does not build another package's binaries.
pub(crate) fn fixture_bin() -> PathBuf {
    let portico = PathBuf::from(env!("CARGO_BIN_EXE_portico"));
    let fixture = portico.with_file_name("portico-conformance-fixture");
    if !fixture.exists() {
        let status = Command::new(env!("CARGO"))
            .args(["build", "-q", "-p", "portico-conformance-fixture"])
            .status()
            .expect("run cargo to build the conformance fixture");
        assert!(
            status.success(),
            "building portico-conformance-fixture failed"
        );
    }
    assert!(
        fixture.exists(),
        "no fixture binary at {}",
        fixture.display()
    );
    fixture
}

fn home(extra: &str) -> Home {
    let entry = crate::support::stdio_entry("fixture", &fixture_bin(), &["stdio"], "");
    Home::new(&format!(
        r#"[server]
listen = "127.0.0.1:0"

[[server.clients]]
name = "owner"
token = "{OWNER}"

[[server.clients]]
name = "other"
token = "{OTHER}"

[expose]
prefix = false
{extra}
{entry}"#
    ))
}

fn start(home: &Home) -> Daemon {
    tokio::task::block_in_place(|| {
        let mut daemon = Daemon::start(home);
        daemon.wait_for_line("portico: ready");
        daemon
    })
}

/// One stateless 2026-07-28 request to the daemon's `/mcp` as the client with `token`.
pub(crate) async fn request(
    base: &str,
    token: &str,
    method: &str,
    params: Value,
    tasks: bool,
) -> Value {
    let capabilities = if tasks {
        json!({"extensions": {TASKS: {}}})
    } else {
        json!({})
    };
    let mut params = params;
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": capabilities,
    });
    let mut builder = reqwest::Client::builder()
        .no_proxy()
        .build()
        .unwrap()
        .post(format!("{base}/mcp"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("authorization", format!("Bearer {token}"))
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", method);
    // SEP-2243 names the subject of a call or a task operation in a header too.
    if let Some(name) = params["name"].as_str().or(params["taskId"].as_str()) {
        builder = builder.header("mcp-name", name);
    }
    let response = builder
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}))
        .send()
        .await
        .unwrap();
    let status = response.status();
    let text = response.text().await.unwrap();
    assert_eq!(status, 200, "{method}: {text}");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{method}: {e}: {text}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_created_upstream_is_polled_to_its_result_by_its_client_only() {
    let home = home("");
    let mut daemon = start(&home);
    let base = daemon.base.clone();
    let call = json!({"name": "slow_compute", "arguments": {"seconds": 0.3, "label": "t13"}});

    // Without the extension the call is no task: the tool runs inline and answers.
    let plain = request(&base, OWNER, "tools/call", call.clone(), false).await;
    assert_eq!(
        plain["result"]["content"][0]["text"], "slow_compute t13 finished after 0.3 s",
        "{plain}"
    );
    assert!(plain["result"].get("taskId").is_none(), "{plain}");

    let created = request(&base, OWNER, "tools/call", call, true).await;
    let result = &created["result"];
    assert_eq!(result["resultType"], "task", "{created}");
    assert_eq!(result["status"], "working", "{created}");
    assert_eq!(result["ttlMs"], 300_000, "{created}");
    let task_id = result["taskId"].as_str().unwrap().to_string();
    assert!(task_id.starts_with("task-"), "{created}");

    // Another client is told there is no such task, for every operation.
    for method in ["tasks/get", "tasks/cancel"] {
        let refused = request(&base, OTHER, method, json!({"taskId": task_id}), true).await;
        assert_eq!(refused["error"]["code"], -32602, "{method}: {refused}");
        let message = refused["error"]["message"].as_str().unwrap();
        assert!(message.starts_with("task not found"), "{method}: {refused}");
    }

    // The owner polls to the end, at the interval the task suggests; the task stays with the
    // fixture, which the other client's cancel never reached.
    let mut polls = 0;
    let done = loop {
        let state = request(&base, OWNER, "tasks/get", json!({"taskId": task_id}), true).await;
        assert_eq!(state["result"]["taskId"], task_id.as_str(), "{state}");
        assert_eq!(state["result"]["resultType"], "complete", "{state}");
        match state["result"]["status"].as_str() {
            Some("working") => {}
            Some("completed") => break state,
            _ => panic!("unexpected task state: {state}"),
        }
        polls += 1;
        assert!(polls < 50, "the task did not complete: {state}");
        let interval = state["result"]["pollIntervalMs"].as_u64().unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(interval)).await;
    };
    assert_eq!(
        done["result"]["result"]["content"][0]["text"], "slow_compute t13 finished after 0.3 s",
        "{done}"
    );
    // A finished task stays readable for its owner (the fixture keeps it for its ttl).
    let again = request(&base, OWNER, "tasks/get", json!({"taskId": task_id}), true).await;
    assert_eq!(again["result"]["status"], "completed", "{again}");
    // An id Portico never relayed is not found either.
    let unknown = request(
        &base,
        OWNER,
        "tasks/get",
        json!({"taskId": "task-0-none"}),
        true,
    )
    .await;
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");

    assert!(tokio::task::block_in_place(|| daemon.stop()).success());
}

/// The task's creation is the call: a policy that denies the tool refuses a task-augmented call
/// as any other, with its envelope, and no task is made upstream or routed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_refuses_a_task_augmented_call_before_any_task_exists() {
    let home = home(
        r#"
[[policies]]
tools = ["slow_compute"]
callers = ["client:owner"]
action = "deny"
reason = "no slow work for owner"
"#,
    );
    let mut daemon = start(&home);
    let call = json!({"name": "slow_compute", "arguments": {"seconds": 0.1}});
    let refused = request(&daemon.base, OWNER, "tools/call", call.clone(), true).await;
    let result = &refused["result"];
    assert_eq!(result["isError"], true, "{refused}");
    assert!(result.get("taskId").is_none(), "{refused}");
    assert_eq!(result["structuredContent"]["ok"], false, "{refused}");
    assert_eq!(
        result["structuredContent"]["error"]["code"], "policy_denied",
        "{refused}"
    );
    // The other client is not denied: its call becomes a task.
    let created = request(&daemon.base, OTHER, "tools/call", call, true).await;
    assert_eq!(created["result"]["resultType"], "task", "{created}");
    assert!(tokio::task::block_in_place(|| daemon.stop()).success());
}
