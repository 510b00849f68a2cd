//! A2A across replicas: a task sent through replica A (which runs it) is read, listed, streamed and
//! canceled through replica B, each spoken to on its own port so the placement is the test's.

use std::time::Duration;

use serde_json::{Value, json};

use crate::cluster::*;

/// `[a2a]` on and a scripted agent: `steps…` reports two working steps a second apart and answers;
/// `hang…` waits (10 minutes, so until canceled or failed); anything else is echoed at once.
pub const AGENT: &str = r#"
[a2a]
enabled = true

[[agents]]
name = "echo"
description = "A scripted agent for the replica tests"
tools = ["system_time"]
[agents.model]
provider = "scripted"
rules = [
  { when = { text = "^steps" }, steps = [
      { status = { state = "working", message = "step 1" } },
      { wait_ms = 1000 },
      { status = { state = "working", message = "step 2" } },
      { wait_ms = 1000 },
      { reply = "steps done: {{message}}" } ] },
  { when = { text = "^hang" }, steps = [ { wait_ms = 600000 }, { reply = "never" } ] },
  { when = {}, steps = [ { reply = "echo: {{message}}" } ] },
]
"#;

/// `SendMessage` with `returnImmediately`: the acknowledged task's id.
pub async fn send_now(base: &str, text: &str) -> String {
    let sent = rpc(
        base,
        "echo",
        "SendMessage",
        json!({"message": user_message(text), "configuration": {"returnImmediately": true}}),
    )
    .await;
    let task = &sent["result"]["task"];
    let state = task["status"]["state"].as_str().unwrap_or_default();
    assert!(
        [
            "TASK_STATE_SUBMITTED",
            "TASK_STATE_WORKING",
            "TASK_STATE_COMPLETED"
        ]
        .contains(&state),
        "{sent:#}"
    );
    task["id"]
        .as_str()
        .unwrap_or_else(|| panic!("no task id: {sent:#}"))
        .to_string()
}

/// `GetTask`'s task (or the error answer, to show).
pub async fn get_task(base: &str, id: &str) -> Result<Value, String> {
    let got = rpc(base, "echo", "GetTask", json!({"id": id})).await;
    if got["result"]["id"] == id {
        Ok(got["result"].clone())
    } else {
        Err(got.to_string())
    }
}

pub fn state(task: &Value) -> &str {
    task["status"]["state"].as_str().unwrap_or_default()
}

fn sse_events(body: &str) -> Vec<Value> {
    body.lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .map(|data| serde_json::from_str(data.trim()).unwrap())
        .collect()
}

/// The `portico_agent_echo` audit records' outcomes, as `base` reads the shared audit log.
async fn agent_outcomes(base: &str) -> Vec<String> {
    let (status, body) = api(
        base,
        "GET",
        "/api/audit?tool=portico_agent_echo&limit=100",
        None,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    body["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["outcome"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// The events of `SubscribeToTask` through `base` until the stream ends, or, when it has not
/// within `limit`, `Err` with what came.
async fn subscribe(base: &str, id: &str, limit: Duration) -> Result<Vec<Value>, String> {
    use futures::StreamExt;
    let response = http()
        .post(format!("{base}/a2a/echo"))
        .bearer_auth(TOKEN)
        .header("A2A-Version", "1.0")
        .json(
            &json!({"jsonrpc": "2.0", "id": 8, "method": "SubscribeToTask", "params": {"id": id}}),
        )
        .send()
        .await
        .unwrap();
    let status = response.status();
    let content_type = response
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    let mut body = Vec::new();
    let mut stream = response.bytes_stream();
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        match tokio::time::timeout_at(deadline, stream.next()).await {
            Ok(Some(chunk)) => body.extend_from_slice(&chunk.unwrap()),
            Ok(None) => break,
            Err(_) => {
                return Err(format!(
                    "{status} {content_type}, still open after {limit:?}; so far: {}",
                    String::from_utf8_lossy(&body)
                ));
            }
        }
    }
    let body = String::from_utf8_lossy(&body).to_string();
    assert_eq!(status, 200, "{body}");
    assert!(
        content_type.starts_with("text/event-stream"),
        "{content_type}: {body}"
    );
    Ok(sse_events(&body))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_running_on_one_replica_is_read_and_listed_through_the_other() {
    let Some(cluster) = tokio::task::block_in_place(|| Replicas::start(2, AGENT)) else {
        return;
    };
    let (a, b) = (cluster.a().base.clone(), cluster.b().base.clone());

    // Sent through A, which runs it.
    let id = send_now(&a, "steps to follow").await;

    // Read through B while it runs on A.
    let got = get_task(&b, &id).await.unwrap_or_else(|e| panic!("B: {e}"));
    assert!(
        ["TASK_STATE_SUBMITTED", "TASK_STATE_WORKING"].contains(&state(&got)),
        "{got:#}"
    );
    // Listed through B.
    let listed = rpc(&b, "echo", "ListTasks", json!({})).await;
    let ids: Vec<&str> = listed["result"]["tasks"]
        .as_array()
        .unwrap_or_else(|| panic!("{listed:#}"))
        .iter()
        .filter_map(|t| t["id"].as_str())
        .collect();
    assert_eq!(ids, [id.as_str()], "{listed:#}");
    assert_eq!(listed["result"]["totalSize"], 1, "{listed:#}");

    // Finished on A: the same on both, with its answer.
    let (b_ref, id_ref) = (&b, &id);
    eventually(
        Duration::from_secs(15),
        "B reads it completed",
        move || async move {
            let task = get_task(b_ref, id_ref).await?;
            (state(&task) == "TASK_STATE_COMPLETED")
                .then_some(())
                .ok_or(task.to_string())
        },
    )
    .await;
    for base in [&a, &b] {
        let task = get_task(base, &id).await.unwrap();
        assert_eq!(state(&task), "TASK_STATE_COMPLETED", "{task:#}");
        assert_eq!(
            text_of_parts(&task["artifacts"][0]["parts"]),
            "steps done: steps to follow",
            "{task:#}"
        );
        let working: Vec<String> = task["history"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|m| text_of_parts(&m["parts"]))
            .collect();
        assert!(working.contains(&"steps to follow".to_string()), "{task:#}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_running_on_one_replica_is_streamed_through_the_other() {
    let Some(cluster) = tokio::task::block_in_place(|| Replicas::start(2, AGENT)) else {
        return;
    };
    let (a, b) = (cluster.a().base.clone(), cluster.b().base.clone());
    let id = send_now(&a, "steps to follow").await;

    // Through B while it runs on A: its later status updates and its final state. (The task
    // takes 2 s; 15 s is a guard.)
    let events = match subscribe(&b, &id, Duration::from_secs(15)).await {
        Ok(events) => events,
        Err(error) => panic!(
            "B's stream of A's task: {error}\nthe task through B now: {}",
            get_task(&b, &id).await.unwrap_or_else(Value::String)
        ),
    };
    assert_eq!(
        events[0]["result"]["task"]["id"],
        id.as_str(),
        "{events:#?}"
    );
    let updates: Vec<(String, String)> = events
        .iter()
        .filter_map(|e| {
            let status = &e["result"]["statusUpdate"]["status"];
            Some((
                status["state"].as_str()?.to_string(),
                text_of_parts(&status["message"]["parts"]),
            ))
        })
        .collect();
    assert!(
        updates.contains(&("TASK_STATE_WORKING".into(), "step 2".into())),
        "B relays A's status updates: {events:#?}"
    );
    assert_eq!(
        updates.last().map(|(s, _)| s.as_str()),
        Some("TASK_STATE_COMPLETED"),
        "{events:#?}"
    );
    let answer: String = events
        .iter()
        .filter_map(|e| e["result"]["artifactUpdate"]["artifact"]["parts"].as_array())
        .map(|parts| text_of_parts(&Value::Array(parts.clone())))
        .collect::<Vec<_>>()
        .join("|");
    assert!(
        answer.ends_with("steps done: steps to follow"),
        "{events:#?}"
    );
    let task = get_task(&a, &id).await.unwrap();
    assert_eq!(state(&task), "TASK_STATE_COMPLETED", "{task:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_running_on_one_replica_is_canceled_through_the_other_and_its_run_stops() {
    let Some(cluster) = tokio::task::block_in_place(|| Replicas::start(2, AGENT)) else {
        return;
    };
    let (a, b) = (cluster.a().base.clone(), cluster.b().base.clone());

    // A two-second run, canceled at its first step: had it not stopped, it would finish (and be
    // audited `ok`) well within the wait below.
    let hanging = send_now(&a, "steps to cancel").await;
    let (a_ref, hanging_ref) = (&a, &hanging);
    eventually(
        Duration::from_secs(10),
        "A works on the task",
        move || async move {
            let task = get_task(a_ref, hanging_ref).await?;
            (state(&task) == "TASK_STATE_WORKING")
                .then_some(())
                .ok_or(task.to_string())
        },
    )
    .await;
    let canceled = rpc(&b, "echo", "CancelTask", json!({"id": hanging})).await;
    assert_eq!(
        canceled["result"]["status"]["state"], "TASK_STATE_CANCELED",
        "{canceled:#}"
    );
    // A's run ends (it is audited when it does, in the shared audit log)…
    let b_ref = &b;
    let outcomes = eventually(
        Duration::from_secs(10),
        "A's run ends",
        move || async move {
            let outcomes = agent_outcomes(b_ref).await;
            if !outcomes.is_empty() {
                return Ok(outcomes);
            }
            let on_a = get_task(a_ref, hanging_ref).await?;
            Err(format!(
                "no portico_agent_echo audit record yet; the task through A: {}",
                on_a["status"]
            ))
        },
    )
    .await;
    let mut states = Vec::new();
    for base in [&a, &b] {
        states.push(state(&get_task(base, &hanging).await.unwrap()).to_string());
    }
    // …because it was stopped, not because it finished; and the task stays canceled on both.
    assert_eq!(
        outcomes,
        ["cancelled"],
        "A's run was not stopped; the task's state through A and B now: {states:?}"
    );
    assert_eq!(states, ["TASK_STATE_CANCELED", "TASK_STATE_CANCELED"]);
    let again = rpc(&a, "echo", "CancelTask", json!({"id": hanging})).await;
    assert_eq!(again["error"]["code"], -32002, "{again:#}");
}
