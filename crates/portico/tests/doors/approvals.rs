//! Approvals at the daemon's `/mcp`, driven by the official Python `mcp` SDK's client, answered
//! through `/api/approvals`: the held call's envelope, a grant that runs one retry, replays and
//! changed arguments refused, concurrent retries of one grant running once, denial, expiry, and a
//! grant surviving a restart. Runs are counted by the audit log's `ok` records of the gated tool
//! (every run records one) and checked against what the tool stored.

use std::time::Duration;

use serde_json::{Value, json};

use crate::client::*;

const REASON: &str = "an owner approves what clients remember";

fn config(ttl_secs: u64) -> String {
    format!(
        r#"
[server]
listen = "127.0.0.1:0"

[policy]
approval_ttl_secs = {ttl_secs}

[[policies]]
tools = ["memory_store"]
action = "approve"
reason = "{REASON}"
"#
    )
}

fn http() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().build().unwrap()
}

/// One `tools/call` through the SDK's Streamable HTTP client (its own session): the result as the
/// SDK parsed it.
async fn sdk_call(base: &str, name: &str, arguments: Value) -> Value {
    let url = format!("{base}/mcp");
    let name = name.to_string();
    let mut report = sdk_report_async(move |command| {
        command
            .args(["--era", "legacy", "--http", &url, "--call", &name, "--args"])
            .arg(arguments.to_string());
    })
    .await;
    report["calls"][0]["result"].take()
}

/// The held call's request id, after checking the envelope and text byte for byte.
fn held_id(result: &Value) -> String {
    let id = result["structuredContent"]["error"]["approvalRequestId"]
        .as_str()
        .unwrap_or_else(|| panic!("not held: {result}"))
        .to_string();
    assert!(id.starts_with("apr_") && id.len() == 36, "{id}");
    assert_eq!(
        result["structuredContent"],
        json!({"ok": false, "error": {
            "code": "approval_required", "approvalRequestId": id,
            "approvalPath": format!("/approvals/{id}"),
            "tool": "memory_store", "reason": REASON}}),
    );
    assert_eq!(result["isError"], true);
    // The page's full URL on the daemon, which a person can open from wherever this is shown.
    let text = result["content"][0]["text"].as_str().unwrap_or_default();
    let base = text
        .split_once(" or open ")
        .and_then(|(_, rest)| rest.split_once("/approvals/"))
        .map_or("", |(base, _)| base);
    assert!(base.starts_with("http://127.0.0.1:"), "{text}");
    assert_eq!(
        result["content"],
        json!([{"type": "text", "text": format!(
            "call to `memory_store` requires approval and was not run: {REASON}; approve it with \
             `portico approvals approve {id}` or open {base}/approvals/{id}, then retry the same \
             call")}])
    );
    id
}

fn ran(result: &Value) {
    assert_eq!(result.get("isError"), Some(&json!(false)), "{result}");
}

async fn api(base: &str, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    let url = format!("{base}{path}");
    let request = match method {
        "GET" => http().get(url),
        _ => http().post(url),
    };
    let request = match body {
        Some(body) => request.json(&body),
        None => request,
    };
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap())
}

/// How many times `memory_store` really ran: its audit records with outcome `ok`.
async fn runs(base: &str) -> usize {
    let (status, body) = api(base, "GET", "/api/audit?tool=memory_store&limit=1000", None).await;
    assert_eq!(status, 200);
    body["records"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["outcome"] == "ok")
        .count()
}

async fn audit_outcomes(base: &str) -> Vec<(String, String, String)> {
    let (_, body) = api(base, "GET", "/api/audit?tool=memory_store&limit=1000", None).await;
    body["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["caller"].as_str().unwrap().to_string(),
                r["outcome"].as_str().unwrap().to_string(),
                r["detail"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_approval_round_trips_over_mcp_with_the_api() {
    let home = Home::new(&config(600));
    let mut daemon = Daemon::start(&home);
    daemon.wait_for_line("portico: ready");
    let base = daemon.base.clone();
    let args = json!({"key": "k", "value": "v1"});

    // Held: the exact envelope, and the request as the API shows it.
    let id = held_id(&sdk_call(&base, "memory_store", args.clone()).await);
    let (status, listed) = api(&base, "GET", "/api/approvals", None).await;
    assert_eq!(status, 200);
    let view = &listed["approvals"][0];
    assert_eq!(listed["approvals"].as_array().unwrap().len(), 1, "{listed}");
    for (key, expected) in [
        ("id", json!(id)),
        ("kind", json!("call")),
        ("status", json!("pending")),
        ("tool", json!("memory_store")),
        ("principal", json!("client:http")),
        ("arguments", args.clone()),
        ("reason", json!(REASON)),
        ("policy", json!("policies[0]")),
        ("path", json!(format!("/approvals/{id}"))),
    ] {
        assert_eq!(view[key], expected, "{key}: {view}");
    }
    assert!(view["createdAt"].as_str().unwrap().ends_with('Z'), "{view}");
    assert_eq!(view.get("decidedAt"), None);
    let (status, shown) = api(&base, "GET", &format!("/api/approvals/{id}"), None).await;
    assert_eq!((status, &shown), (200, view));
    for (path, code) in [
        ("/api/approvals?status=maybe", 400),
        ("/api/approvals?limit=0", 400),
        ("/api/approvals?limit=1001", 400),
        ("/api/approvals/apr_unknown", 404),
    ] {
        let (status, body) = api(&base, "GET", path, None).await;
        assert_eq!(status, code, "{path}: {body}");
        assert!(body["error"].is_string(), "{body}");
    }

    // Bodies that are not an answer are refused before anything changes.
    for (action, body, said) in [
        (
            "approve",
            json!({"via": "phone"}),
            "via `phone` is not one of api, cli, web",
        ),
        (
            "approve",
            json!({"reason": "x"}),
            "an approval takes no reason; only a denial does",
        ),
    ] {
        let (status, refused) = api(
            &base,
            "POST",
            &format!("/api/approvals/{id}/{action}"),
            Some(body),
        )
        .await;
        assert_eq!((status, &refused["error"]), (400, &json!(said)));
    }
    let (status, refused) = api(
        &base,
        "POST",
        &format!("/api/approvals/{id}/deny"),
        Some(json!({"because": "x"})),
    )
    .await;
    assert_eq!(status, 400, "{refused}");
    let (status, missing) = api(&base, "POST", "/api/approvals/apr_unknown/approve", None).await;
    assert_eq!(status, 404, "{missing}");
    let (_, still) = api(&base, "GET", &format!("/api/approvals/{id}"), None).await;
    assert_eq!(still["status"], "pending");

    // Approved through the API.
    let (status, approved) =
        api(&base, "POST", &format!("/api/approvals/{id}/approve"), None).await;
    assert_eq!(status, 200, "{approved}");
    assert_eq!(
        (
            &approved["status"],
            &approved["decidedBy"],
            &approved["decidedVia"]
        ),
        (&json!("approved"), &json!("client:http"), &json!("api"))
    );
    let (status, again) = api(
        &base,
        "POST",
        &format!("/api/approvals/{id}/approve"),
        Some(json!({"via": "cli"})),
    )
    .await;
    assert_eq!(status, 409);
    assert_eq!(
        again["error"],
        format!(
            "approval {id} is approved, not pending: it was already approved; retry the call to use it"
        )
    );

    // Changed arguments do not use the grant.
    let changed =
        held_id(&sdk_call(&base, "memory_store", json!({"key": "k", "value": "v2"})).await);
    assert_ne!(changed, id);
    assert_eq!(runs(&base).await, 0);

    // The retry runs once; a replay of it needs a new approval.
    ran(&sdk_call(&base, "memory_store", args.clone()).await);
    assert_eq!(runs(&base).await, 1);
    let (_, consumed) = api(&base, "GET", &format!("/api/approvals/{id}"), None).await;
    assert_eq!(consumed["status"], "consumed");
    assert!(consumed["consumedAt"].is_string(), "{consumed}");
    let replay = held_id(&sdk_call(&base, "memory_store", args.clone()).await);
    assert!(replay != id && replay != changed);
    assert_eq!(runs(&base).await, 1);

    // Two concurrent retries of one grant: exactly one runs.
    let (status, _) = api(
        &base,
        "POST",
        &format!("/api/approvals/{replay}/approve"),
        None,
    )
    .await;
    assert_eq!(status, 200);
    let (first, second) = tokio::join!(
        sdk_call(&base, "memory_store", args.clone()),
        sdk_call(&base, "memory_store", args.clone())
    );
    let held: Vec<&Value> = [&first, &second]
        .into_iter()
        .filter(|r| r["isError"] == true)
        .collect();
    assert_eq!(held.len(), 1, "{first}\n{second}");
    assert_ne!(held_id(held[0]), replay);
    assert_eq!(runs(&base).await, 2);

    // Denied: a later approve is a conflict, the retry is refused naming the denial.
    let denied_args = json!({"key": "d", "value": "never"});
    let denied = held_id(&sdk_call(&base, "memory_store", denied_args.clone()).await);
    let (status, view) = api(
        &base,
        "POST",
        &format!("/api/approvals/{denied}/deny"),
        Some(json!({"reason": "not this one"})),
    )
    .await;
    assert_eq!(status, 200, "{view}");
    assert_eq!(
        (&view["status"], &view["denyReason"]),
        (&json!("denied"), &json!("not this one"))
    );
    let (status, conflict) = api(
        &base,
        "POST",
        &format!("/api/approvals/{denied}/approve"),
        None,
    )
    .await;
    assert_eq!(status, 409);
    assert!(
        conflict["error"]
            .as_str()
            .unwrap()
            .starts_with(&format!("approval {denied} is denied, not pending")),
        "{conflict}"
    );
    let refused = sdk_call(&base, "memory_store", denied_args).await;
    assert_eq!(
        refused["structuredContent"]["error"]["code"], "policy_denied",
        "{refused}"
    );
    assert!(
        refused["structuredContent"]["error"]["reason"]
            .as_str()
            .unwrap()
            .starts_with(&format!(
                "approval {denied} of this exact call was denied by client:http via api (not this one); the same call is refused until "
            )),
        "{refused}"
    );
    assert_eq!(runs(&base).await, 2);

    // Approved, then the daemon restarts: the grant survives and runs the retry once.
    let restart_args = json!({"key": "r", "value": "after restart"});
    let before = held_id(&sdk_call(&base, "memory_store", restart_args.clone()).await);
    let (status, _) = api(
        &base,
        "POST",
        &format!("/api/approvals/{before}/approve"),
        None,
    )
    .await;
    assert_eq!(status, 200);
    assert!(daemon.stop().success());
    let mut daemon = Daemon::start(&home);
    daemon.wait_for_line("portico: ready");
    let base = daemon.base.clone();
    ran(&sdk_call(&base, "memory_store", restart_args.clone()).await);
    assert_eq!(runs(&base).await, 3);
    held_id(&sdk_call(&base, "memory_store", restart_args).await);

    // Every decision is in the audit log, with who and through what, and no argument value.
    let outcomes = audit_outcomes(&base).await;
    let count = |outcome: &str| outcomes.iter().filter(|(_, o, _)| o == outcome).count();
    assert_eq!(count("approval_granted"), 3, "{outcomes:#?}");
    assert_eq!(count("approval_denied"), 1, "{outcomes:#?}");
    assert_eq!(count("approval_consumed"), 3, "{outcomes:#?}");
    assert_eq!(count("approval_requested"), 7, "{outcomes:#?}");
    assert!(outcomes.contains(&(
        "client:http".into(),
        "approval_granted".into(),
        format!("{id} approved by client:http via api")
    )));
    assert!(
        outcomes
            .iter()
            .all(|(_, _, detail)| !detail.contains("v1") && !detail.contains("after restart")),
        "{outcomes:#?}"
    );
    assert!(daemon.stop().success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unanswered_request_expires_and_its_call_needs_a_new_one() {
    let home = Home::new(&config(1));
    let mut daemon = Daemon::start(&home);
    daemon.wait_for_line("portico: ready");
    let base = daemon.base.clone();
    let args = json!({"key": "k", "value": "late"});
    let id = held_id(&sdk_call(&base, "memory_store", args.clone()).await);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let (status, view) = api(&base, "GET", &format!("/api/approvals/{id}"), None).await;
        assert_eq!(status, 200);
        if view["status"] == "expired" {
            break;
        }
        assert_eq!(view["status"], "pending");
        assert!(
            tokio::time::Instant::now() < deadline,
            "never expired: {view}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (status, conflict) =
        api(&base, "POST", &format!("/api/approvals/{id}/approve"), None).await;
    assert_eq!(status, 409);
    assert_eq!(
        conflict["error"],
        format!(
            "approval {id} is expired, not pending: its time ran out; retry the call to request a new approval"
        )
    );
    let retry = held_id(&sdk_call(&base, "memory_store", args).await);
    assert_ne!(retry, id);
    assert_eq!(runs(&base).await, 0);
    let outcomes = audit_outcomes(&base).await;
    assert!(
        outcomes.contains(&(
            "client:http".into(),
            "approval_expired".into(),
            format!("{id} expired: nobody answered in time")
        )),
        "{outcomes:#?}"
    );
    assert!(daemon.stop().success());
}

/// An agent's gated call with `approval_wait_secs`: the call waits while the agent's run goes on
/// holding it, an approval through the API wakes it, the tool runs once and the agent's answer
/// carries the tool's result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agents_held_call_waits_for_an_approval_and_then_runs_once() {
    let home = Home::new(
        r#"
[server]
listen = "127.0.0.1:0"

[policy]
approval_wait_secs = 60

[[policies]]
tools = ["memory_store"]
callers = ["agent:*"]
action = "approve"
reason = "agents ask before they remember"

[[agents]]
name = "keeper"
tools = ["memory_*"]
[agents.model]
provider = "scripted"
rules = [
  { when = {}, steps = [
      { call_tool = { name = "memory_store", arguments = { key = "colour", value = "teal" } } },
      { reply = "keeper: {{last_tool_result}}" } ] },
]
"#,
    );
    let mut daemon = Daemon::start(&home);
    daemon.wait_for_line("portico: ready");
    let base = daemon.base.clone();
    let message = tokio::spawn({
        let base = base.clone();
        async move {
            let response = http()
                .post(format!("{base}/api/agents/keeper/message"))
                .json(&json!({"message": "remember teal"}))
                .send()
                .await
                .unwrap();
            (
                response.status().as_u16(),
                response.json::<Value>().await.unwrap(),
            )
        }
    });
    // The held call's request appears while the agent's call waits.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let id = loop {
        let (_, listed) = api(&base, "GET", "/api/approvals", None).await;
        if let Some(view) = listed["approvals"].as_array().unwrap().first() {
            assert_eq!(
                (&view["principal"], &view["arguments"]),
                (
                    &json!("agent:keeper"),
                    &json!({"key": "colour", "value": "teal"})
                )
            );
            break view["id"].as_str().unwrap().to_string();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no request appeared"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(!message.is_finished(), "the agent did not wait");
    assert_eq!(runs(&base).await, 0);
    let (status, _) = api(&base, "POST", &format!("/api/approvals/{id}/approve"), None).await;
    assert_eq!(status, 200);
    let (status, reply) = tokio::time::timeout(Duration::from_secs(30), message)
        .await
        .expect("the approval did not wake the waiting call")
        .unwrap();
    assert_eq!(status, 200, "{reply}");
    assert_eq!(
        reply["reply"], r#"keeper: {"key":"colour","stored":true}"#,
        "{reply}"
    );
    assert_eq!(runs(&base).await, 1);
    let (_, view) = api(&base, "GET", &format!("/api/approvals/{id}"), None).await;
    assert_eq!(view["status"], "consumed");
    assert!(daemon.stop().success());
}

/// One `tools/call` by an SDK client that declares elicitation and gives `answer` to every
/// question: the result, and the questions it was asked.
async fn eliciting_call(
    base: &str,
    era: &str,
    answer: &str,
    name: &str,
    arguments: Value,
) -> (Value, Value) {
    let url = format!("{base}/mcp");
    let (era, answer, name) = (era.to_string(), answer.to_string(), name.to_string());
    let mut report = sdk_report_async(move |command| {
        command
            .args(["--era", &era, "--elicit", &answer, "--http", &url])
            .args(["--call", &name, "--args"])
            .arg(arguments.to_string());
    })
    .await;
    (
        report["calls"][0]["result"].take(),
        report["elicitations"].take(),
    )
}

/// `[policy] approval_via = "both"` (the default): a client that declared elicitation is asked,
/// in both eras, with the tool and its exact arguments; accept runs the call once, decline and
/// cancel refuse it with `policy_denied`; the request records who answered and how.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_calling_client_approves_through_elicitation_in_both_eras() {
    let home = Home::new(&config(600));
    let mut daemon = Daemon::start(&home);
    daemon.wait_for_line("portico: ready");
    let base = daemon.base.clone();
    let mut expected_runs = 0;
    for era in ["legacy", "modern"] {
        for answer in ["accept", "decline", "cancel"] {
            let args = json!({"key": format!("{era}-{answer}"), "value": "v"});
            let (result, asked) =
                eliciting_call(&base, era, answer, "memory_store", args.clone()).await;
            let asked = asked.as_array().unwrap();
            assert_eq!(asked.len(), 1, "{era} {answer}: {asked:?}");
            let message = asked[0]["message"].as_str().unwrap();
            let (_, listed) = api(&base, "GET", "/api/approvals?status=all&limit=1", None).await;
            let view = &listed["approvals"][0];
            let id = view["id"].as_str().unwrap();
            assert_eq!(view["arguments"], args, "{view}");
            assert_eq!(
                message,
                format!(
                    "Approve this call of `memory_store` by client:http?\nArguments: {}\nWhy it \
                     needs approval: {REASON}\n(approval request {id}, also at \
                     {base}/approvals/{id})",
                    args
                ),
                "{era} {answer}"
            );
            assert_eq!(
                asked[0]["requestedSchema"]["properties"]["approve"]["type"],
                "boolean"
            );
            assert_eq!(
                (&view["decidedBy"], &view["decidedVia"]),
                (&json!("client:http"), &json!("elicitation")),
                "{view}"
            );
            if answer == "accept" {
                expected_runs += 1;
                ran(&result);
                assert_eq!(view["status"], "consumed", "{view}");
            } else {
                assert_eq!(view["status"], "denied", "{view}");
                let error = &result["structuredContent"]["error"];
                assert_eq!(error["code"], "policy_denied", "{result}");
                let said = if answer == "decline" {
                    "declined"
                } else {
                    "cancelled"
                };
                assert!(
                    error["reason"].as_str().unwrap().starts_with(&format!(
                        "approval {id} of this exact call was denied by client:http via \
                         elicitation ({said} at the calling client)"
                    )),
                    "{result}"
                );
            }
            assert_eq!(runs(&base).await, expected_runs, "{era} {answer}");
        }
    }
    // A client without elicitation is not asked: it gets the envelope.
    held_id(&sdk_call(&base, "memory_store", json!({"key": "plain", "value": "v"})).await);
    assert!(daemon.stop().success());
}

/// Through `portico mcp` proxying to the daemon the client is not asked, with or without
/// elicitation: the proxy declares every capability for upstreams' sake and cannot say what the
/// person behind it can answer. Both get the envelope and approve out of band.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_portico_mcp_the_client_is_not_asked_and_approves_out_of_band() {
    let home = Home::new(&config(600));
    let mut daemon = Daemon::start(&home);
    daemon.wait_for_line("portico: ready");
    let base = daemon.base.clone();
    let call = |elicit: Option<&'static str>, key: &'static str| {
        let home_dir = home.dir.path().to_path_buf();
        let config = home.config();
        sdk_report_async(move |command| {
            command.args(["--era", "legacy"]);
            if let Some(answer) = elicit {
                command.args(["--elicit", answer]);
            }
            command
                .args(["--call", "memory_store", "--args"])
                .arg(json!({"key": key, "value": "v"}).to_string())
                .args([
                    "--stdio",
                    "--",
                    env!("CARGO_BIN_EXE_portico"),
                    "mcp",
                    "--config",
                ])
                .arg(config)
                .env("PORTICO_HOME", home_dir);
        })
    };
    let plain = call(None, "plain").await;
    held_id(&plain["calls"][0]["result"]);
    assert_eq!(plain["elicitations"], json!([]));
    assert_eq!(runs(&base).await, 0);

    let eliciting = call(Some("accept"), "eliciting").await;
    let id = held_id(&eliciting["calls"][0]["result"]);
    assert_eq!(eliciting["elicitations"], json!([]));
    let (status, _) = api(&base, "POST", &format!("/api/approvals/{id}/approve"), None).await;
    assert_eq!(status, 200);
    let retried = call(Some("accept"), "eliciting").await;
    ran(&retried["calls"][0]["result"]);
    assert_eq!(retried["elicitations"], json!([]));
    assert_eq!(runs(&base).await, 1);
    assert!(daemon.stop().success());
}

/// `[policy] approval_wait_secs` over the wire: the SDK's call waits, asking for progress; its
/// progress callback hears `waiting for approval at http://ADDR/approvals/<id>`; an approval through the API
/// lets the same call run once and answer, without a retry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_call_reports_progress_and_runs_once_when_approved_over_mcp() {
    let home = Home::new(&config(600).replace(
        "approval_ttl_secs = 600",
        "approval_ttl_secs = 600\napproval_wait_secs = 120",
    ));
    let mut daemon = Daemon::start(&home);
    daemon.wait_for_line("portico: ready");
    let base = daemon.base.clone();

    let url = format!("{base}/mcp");
    // Spawned: the call waits in the daemon while this test answers it.
    let waiting = tokio::spawn(sdk_report_async(move |command| {
        command
            .args(["--era", "legacy", "--timeout", "150", "--progress"])
            .args(["--http", &url, "--call", "memory_store", "--args"])
            .arg(json!({"key": "colour", "value": "teal"}).to_string());
    }));

    // The held call's request appears while the call waits (polled, with a deadline).
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let id = loop {
        let (status, body) = api(&base, "GET", "/api/approvals", None).await;
        assert_eq!(status, 200);
        if let Some(first) = body["approvals"].as_array().and_then(|a| a.first()) {
            break first["id"].as_str().unwrap().to_string();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no pending request appeared"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(runs(&base).await, 0, "nothing runs before the approval");
    let (status, view) = api(
        &base,
        "POST",
        &format!("/api/approvals/{id}/approve"),
        Some(json!({})),
    )
    .await;
    assert_eq!(status, 200, "{view}");

    let report = waiting.await.unwrap();
    let call = &report["calls"][0];
    ran(&call["result"]);
    let messages: Vec<&str> = call["progress"]
        .as_array()
        .unwrap_or_else(|| panic!("no progress: {call}"))
        .iter()
        .filter_map(|p| p["message"].as_str())
        .collect();
    assert_eq!(
        messages.first().copied(),
        Some(format!("waiting for approval at {base}/approvals/{id}").as_str()),
        "{call}"
    );
    assert_eq!(runs(&base).await, 1);
    let (_, consumed) = api(&base, "GET", &format!("/api/approvals/{id}"), None).await;
    assert_eq!(consumed["status"], "consumed");
    assert!(daemon.stop().success());
}
