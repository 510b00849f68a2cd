//! An approval across replicas: a call held on replica A, approved through replica B, then retried
//! at once through A, B and the balancer by the official Python SDK: the grant runs it exactly
//! once. Runs are counted by the shared audit log's `ok` records of the gated tool.

use serde_json::{Value, json};

use crate::client::sdk_report_async;
use crate::cluster::*;

const REASON: &str = "an owner approves what clients remember";

const POLICY: &str = r#"
[policy]
approval_ttl_secs = 600

[[policies]]
tools = ["memory_store"]
action = "approve"
reason = "an owner approves what clients remember"
"#;

/// One `tools/call` through the SDK's Streamable HTTP client (its own session): the result.
async fn sdk_call(base: &str, arguments: Value) -> Value {
    let url = format!("{base}/mcp");
    let mut report = sdk_report_async(move |command| {
        command
            .args(["--era", "legacy", "--http", &url])
            .args(["--header", &format!("Authorization: Bearer {TOKEN}")])
            .args(["--call", "memory_store", "--args"])
            .arg(arguments.to_string());
    })
    .await;
    report["calls"][0]["result"].take()
}

/// The held call's approval id, after checking it is the approval envelope.
fn held_id(result: &Value) -> String {
    let error = &result["structuredContent"]["error"];
    assert_eq!(error["code"], "approval_required", "{result}");
    assert_eq!(error["reason"], REASON, "{result}");
    assert_eq!(result["isError"], true, "{result}");
    error["approvalRequestId"].as_str().unwrap().to_string()
}

/// How many times `memory_store` really ran, as `base` reads the shared audit log.
async fn runs(base: &str) -> usize {
    outcomes(base).await.iter().filter(|o| *o == "ok").count()
}

async fn outcomes(base: &str) -> Vec<String> {
    let (status, body) = api(base, "GET", "/api/audit?tool=memory_store&limit=1000", None).await;
    assert_eq!(status, 200, "{body}");
    body["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["outcome"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_held_on_one_replica_and_approved_on_the_other_runs_once() {
    let Some(cluster) = tokio::task::block_in_place(|| Replicas::start(2, POLICY)) else {
        return;
    };
    let (a, b, lb) = (
        cluster.a().base.clone(),
        cluster.b().base.clone(),
        cluster.lb.base.clone(),
    );
    let args = json!({"key": "k", "value": "v1"});

    // Held through A; B sees the request pending.
    let id = held_id(&sdk_call(&a, args.clone()).await);
    let (status, view) = api(&b, "GET", &format!("/api/approvals/{id}"), None).await;
    assert_eq!(status, 200, "{view}");
    assert_eq!(
        (&view["status"], &view["tool"], &view["arguments"]),
        (&json!("pending"), &json!("memory_store"), &args),
        "{view}"
    );

    // Approved through B; A sees it approved.
    let (status, approved) = api(&b, "POST", &format!("/api/approvals/{id}/approve"), None).await;
    assert_eq!(status, 200, "{approved}");
    assert_eq!(approved["status"], "approved", "{approved}");
    let (_, seen) = api(&a, "GET", &format!("/api/approvals/{id}"), None).await;
    assert_eq!(seen["status"], "approved", "{seen}");
    assert_eq!(runs(&a).await, 0);

    // Six retries at once: two through each replica, two through the balancer.
    let calls: Vec<_> = [&a, &a, &b, &b, &lb, &lb]
        .into_iter()
        .map(|base| {
            let (base, args) = (base.clone(), args.clone());
            tokio::spawn(async move { sdk_call(&base, args).await })
        })
        .collect();
    let mut results = Vec::new();
    for call in calls {
        results.push(call.await.unwrap());
    }
    let ran: Vec<&Value> = results.iter().filter(|r| r["isError"] == false).collect();
    assert_eq!(ran.len(), 1, "exactly one retry runs: {results:#?}");
    let held: Vec<String> = results
        .iter()
        .filter(|r| r["isError"] != false)
        .map(held_id)
        .collect();
    assert_eq!(held.len(), 5, "{results:#?}");
    assert!(
        held.iter().all(|h| *h != id),
        "the used grant is not offered again: {held:?}"
    );

    // Once, as both replicas read the shared audit log; the grant is consumed.
    for base in [&a, &b] {
        assert_eq!(runs(base).await, 1, "{:?}", outcomes(base).await);
        let (_, view) = api(base, "GET", &format!("/api/approvals/{id}"), None).await;
        assert_eq!(view["status"], "consumed", "{view}");
    }
    let all = outcomes(&b).await;
    let count = |outcome: &str| all.iter().filter(|o| *o == outcome).count();
    assert_eq!(count("approval_granted"), 1, "{all:?}");
    assert_eq!(count("approval_consumed"), 1, "{all:?}");
}
