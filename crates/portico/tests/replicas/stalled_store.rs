//! A stalled PostgreSQL store stalls only the calls that wait for it. Another connection holds
//! `LOCK TABLE approvals IN ACCESS EXCLUSIVE MODE`, so every call of a tool a policy holds for
//! approval waits in the database; with more such calls than the daemon's runtime has worker
//! threads (2, as on a 2-core machine), `/api/health`, `tools/list` and a call of another tool
//! (`memory_recall`, whose table is not locked) still answer within a second. Once the lock is
//! released the stalled calls finish: each is held for its approval.

use std::time::Duration;

use serde_json::{Value, json};

use crate::client::{Daemon, Home};
use crate::cluster::*;
use crate::mcp::Session;

/// More than the runtime's worker threads, fewer than the store's pool.
const STALLED_CALLS: usize = 4;

/// How long a call unrelated to the stalled table may take.
const PROMPT: Duration = Duration::from_secs(1);

fn config(url: &str) -> String {
    format!(
        r#"[server]
listen = "127.0.0.1:0"
token = "{TOKEN}"

[server.rate_limit]
per_second = 1000
burst = 2000

[store]
url = "{url}"
pool_size = 8

[policy]
approval_ttl_secs = 600

[[policies]]
tools = ["memory_store"]
action = "approve"
reason = "an owner approves what clients remember"
"#
    )
}

/// `work`, which must answer within [`PROMPT`] though the store is stalled.
async fn promptly<T>(what: &str, work: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(PROMPT, work)
        .await
        .unwrap_or_else(|_| {
            panic!("{what} did not answer within {PROMPT:?} while the approvals table was locked")
        })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_store_stalls_only_the_calls_that_wait_for_it() {
    let Some(url) = portico_store::testing::postgres_test_url() else {
        return;
    };
    let home = Home::new(&config(&url));
    let mut daemon = tokio::task::block_in_place(|| {
        let mut daemon = Daemon::start_with_env(&home, &[("TOKIO_WORKER_THREADS", "2")]);
        daemon.wait_for_line("portico: ready");
        daemon
    });
    let base = daemon.base.clone();
    let mut sessions = Vec::new();
    for _ in 0..=STALLED_CALLS {
        sessions.push(Session::open(&base).await);
    }
    let mut other = sessions.pop().unwrap();

    let lock =
        tokio::task::block_in_place(|| portico_store::testing::TableLock::hold(&url, "approvals"));
    let stalled: Vec<_> = sessions
        .into_iter()
        .enumerate()
        .map(|(i, mut session)| {
            tokio::spawn(async move {
                let arguments = json!({"key": format!("k{i}"), "value": "v"});
                session
                    .request(
                        "tools/call",
                        json!({"name": "memory_store", "arguments": arguments}),
                    )
                    .await
            })
        })
        .collect();
    // Stalled: at least as many statements wait on the lock as the daemon has worker threads.
    eventually(
        Duration::from_secs(20),
        "the held calls waiting on the lock",
        || {
            let waiting = tokio::task::block_in_place(|| lock.waiting());
            async move {
                if waiting >= 2 {
                    Ok(())
                } else {
                    Err(format!("{waiting} waiting"))
                }
            }
        },
    )
    .await;

    // Everything that does not wait for the approvals table answers.
    let (status, body) = promptly("/api/health", health(&base)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["store"]["backend"], "postgres", "{body}");
    let (status, listed) = promptly("tools/list", other.request("tools/list", json!({}))).await;
    assert_eq!(status, 200, "{listed}");
    let names: Vec<&str> = listed["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{listed}"))
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(
        names.contains(&"memory_store") && names.contains(&"memory_recall"),
        "{names:?}"
    );
    let (status, recalled) = promptly(
        "a memory_recall call",
        other.request(
            "tools/call",
            json!({"name": "memory_recall", "arguments": {}}),
        ),
    )
    .await;
    assert_eq!(status, 200, "{recalled}");
    assert_ne!(recalled["result"]["isError"], true, "{recalled}");
    assert_eq!(
        recalled["result"]["structuredContent"]["entries"],
        json!([]),
        "{recalled}"
    );
    // The held calls were still waiting all along.
    assert!(
        stalled.iter().all(|call| !call.is_finished()),
        "a held call finished while its table was locked"
    );

    // Released: every held call finishes, held for its approval as usual.
    tokio::task::block_in_place(|| lock.release());
    let mut ids = Vec::new();
    for call in stalled {
        let (status, answer) = tokio::time::timeout(Duration::from_secs(20), call)
            .await
            .expect("a held call did not finish once the lock was released (test guard)")
            .unwrap();
        assert_eq!(status, 200, "{answer}");
        let error: &Value = &answer["result"]["structuredContent"]["error"];
        assert_eq!(error["code"], "approval_required", "{answer}");
        ids.push(error["approvalRequestId"].as_str().unwrap().to_string());
    }
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), STALLED_CALLS, "one request per call: {ids:?}");
    let (status, pending) = api(&base, "GET", "/api/approvals", None).await;
    assert_eq!(status, 200, "{pending}");
    assert_eq!(
        pending["approvals"].as_array().map(Vec::len),
        Some(STALLED_CALLS),
        "{pending}"
    );
    tokio::task::block_in_place(|| daemon.stop());
}
