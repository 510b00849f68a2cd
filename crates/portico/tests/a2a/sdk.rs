//! The official A2A SDKs' clients (Python `a2a-sdk` 1.3.0, JS `@a2a-js/sdk` 1.3.0) driving Portico's
//! A2A server: send, stream, get, list, cancel and multi-turn, over JSON-RPC and HTTP+JSON in 1.0 and
//! 0.3.

use std::process::{Command, Stdio};

use serde_json::Value;

use crate::helpers::*;
use crate::support::*;

enum Sdk {
    Python,
    Js,
}

fn run_client(sdk: &Sdk, base: &str, transport: &str, version: &str, actions: &[&str]) -> Value {
    let mut command = match sdk {
        Sdk::Python => {
            let mut c = Command::new(venv_python());
            c.arg(python_peer("a2a_client.py"));
            c
        }
        Sdk::Js => {
            let mut c = Command::new(node());
            c.arg(peers_dir().join("js/a2a_client.mjs"));
            c
        }
    };
    let output = command
        .args([
            "--card-url",
            base,
            "--transport",
            transport,
            "--version",
            version,
        ])
        .args(actions)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "client failed: {stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

fn action(report: &Value, index: usize) -> &Value {
    let action = &report["actions"][index];
    assert!(
        action["error"].is_null(),
        "action {index} failed: {report:#}"
    );
    action
}

fn drive(sdk: Sdk, transport: &str, version: &str) {
    let home = home("");
    let daemon = daemon(&home);
    let base = daemon.base.clone();
    let report = tokio::task::block_in_place(|| {
        run_client(
            &sdk,
            &base,
            transport,
            version,
            &[
                "--stream",
                "slow stream",
                "--send",
                "hello",
                "--get",
                "--send",
                "ask me",
                "--continue",
                "blue",
                "--return-immediately",
                "--send",
                "hang on",
                "--cancel",
                "--list",
            ],
        )
    });
    assert_eq!(report["card"]["name"], "echo", "{report:#}");
    let selected = &report["selected_interface"];
    assert_eq!(selected["url"], format!("{base}/a2a/echo"));
    assert_eq!(selected["protocol_version"], version);

    let streamed = action(&report, 0);
    assert_eq!(streamed["state"], "TASK_STATE_COMPLETED", "{report:#}");
    let kinds: Vec<&str> = streamed["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds.first(), Some(&"task"), "{kinds:?}");
    assert!(
        kinds.contains(&"status-update") && kinds.contains(&"artifact-update"),
        "{kinds:?}"
    );
    let states: Vec<&str> = streamed["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["state"].as_str())
        .collect();
    assert_eq!(states.last(), Some(&"TASK_STATE_COMPLETED"), "{states:?}");

    let sent = action(&report, 1);
    assert_eq!(sent["state"], "TASK_STATE_COMPLETED");
    assert_eq!(sent["artifacts"], serde_json::json!(["echo: hello"]));
    let got = action(&report, 2);
    assert_eq!(got["task_id"], sent["task_id"]);
    assert_eq!(got["state"], "TASK_STATE_COMPLETED");

    let asked = action(&report, 3);
    assert_eq!(asked["state"], "TASK_STATE_INPUT_REQUIRED");
    assert_eq!(asked["status_message"], "which colour?");
    let answered = action(&report, 4);
    assert_eq!(
        answered["task_id"], asked["task_id"],
        "multi-turn stays on the task"
    );
    assert_eq!(answered["context_id"], asked["context_id"]);
    assert_eq!(answered["state"], "TASK_STATE_COMPLETED");
    assert_eq!(answered["artifacts"], serde_json::json!(["you chose blue"]));

    let started = action(&report, 5);
    assert!(
        ["TASK_STATE_SUBMITTED", "TASK_STATE_WORKING"]
            .contains(&started["state"].as_str().unwrap()),
        "{report:#}"
    );
    let canceled = action(&report, 6);
    assert_eq!(canceled["state"], "TASK_STATE_CANCELED");

    let listed = &report["actions"][7];
    if version == "1.0" {
        assert!(listed["error"].is_null(), "{report:#}");
        assert_eq!(listed["total_size"], 4, "{report:#}");
        let ids: Vec<&str> = listed["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["id"].as_str().unwrap())
            .collect();
        assert!(ids.contains(&sent["task_id"].as_str().unwrap()));
    } else {
        // 0.3 has no ListTasks: the SDKs refuse it themselves.
        assert!(!listed["error"].is_null(), "{report:#}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_over_json_rpc_1_0() {
    drive(Sdk::Python, "jsonrpc", "1.0");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_over_http_json_1_0() {
    drive(Sdk::Python, "rest", "1.0");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_over_json_rpc_0_3() {
    drive(Sdk::Python, "jsonrpc", "0.3");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_over_http_json_0_3() {
    drive(Sdk::Python, "rest", "0.3");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn js_sdk_over_json_rpc_1_0() {
    drive(Sdk::Js, "jsonrpc", "1.0");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn js_sdk_over_http_json_1_0() {
    drive(Sdk::Js, "rest", "1.0");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn js_sdk_over_json_rpc_0_3() {
    drive(Sdk::Js, "jsonrpc", "0.3");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn js_sdk_over_http_json_0_3() {
    drive(Sdk::Js, "rest", "0.3");
}
