//! Tasks survive SIGKILL; the store is bounded (finished tasks evicted oldest first, new tasks refused
//! when only active ones remain).

use serde_json::{Value, json};

use crate::helpers::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_tasks_survive_sigkill_with_their_history() {
    let home = home("");
    let mut first = daemon(&home);
    let base = first.base.clone();
    // A batch: some finished, some still running when the daemon dies.
    let mut acknowledged = Vec::new();
    for i in 0..3 {
        let done = rpc(
            &base,
            "SendMessage",
            json!({"message": user_message(&format!("done {i}"))}),
            Some("1.0"),
            None,
        )
        .await;
        acknowledged.push((
            done["result"]["task"]["id"].as_str().unwrap().to_string(),
            "TASK_STATE_COMPLETED",
        ));
        let running = rpc(
            &base,
            "SendMessage",
            json!({"message": user_message(&format!("hang {i}")), "configuration": {"returnImmediately": true}}),
            Some("1.0"),
            None,
        )
        .await;
        acknowledged.push((
            running["result"]["task"]["id"]
                .as_str()
                .unwrap()
                .to_string(),
            "TASK_STATE_FAILED",
        ));
    }
    let waiting = rpc(
        &base,
        "SendMessage",
        json!({"message": user_message("ask again")}),
        Some("1.0"),
        None,
    )
    .await;
    acknowledged.push((
        waiting["result"]["task"]["id"]
            .as_str()
            .unwrap()
            .to_string(),
        "TASK_STATE_INPUT_REQUIRED",
    ));

    crate::support::signal(first.child.id(), crate::support::Signal::KILL);
    first.child.wait().unwrap();

    let second = daemon(&home);
    let base = second.base.clone();
    for (id, expected) in &acknowledged {
        let got = rpc(&base, "GetTask", json!({"id": id}), Some("1.0"), None).await;
        let task = &got["result"];
        assert_eq!(task["status"]["state"], *expected, "{got:#}");
        let history = task["history"].as_array().unwrap();
        assert_eq!(
            history[0]["role"], "ROLE_USER",
            "the request is kept: {got:#}"
        );
        if *expected == "TASK_STATE_FAILED" {
            // Running when killed: failed on restart, saying why.
            assert!(
                text_of_parts(&task["status"]["message"]["parts"]).contains("restarted"),
                "{got:#}"
            );
        }
    }
    // The waiting task can still be continued after the restart.
    let (id, _) = acknowledged.last().unwrap();
    let mut answer = user_message("blue");
    answer["taskId"] = json!(id);
    let continued = rpc(
        &base,
        "SendMessage",
        json!({"message": answer}),
        Some("1.0"),
        None,
    )
    .await;
    assert_eq!(
        continued["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{continued:#}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_acknowledged_concurrently_all_survive_sigkill() {
    // 24 agent runs at once are more than the default rate limit allows one client.
    let home = home("rate_limit = { enabled = false }");
    let mut first = daemon(&home);
    let base = first.base.clone();
    // Sends in flight together share the store's transactions (group commit); each is answered only
    // once the transaction holding its task has committed.
    let mut sends = tokio::task::JoinSet::new();
    for i in 0..24 {
        let base = base.clone();
        sends.spawn(async move {
            let running = i % 3 == 0;
            let text = format!("{} {i}", if running { "hang" } else { "done" });
            let answer = rpc(
                &base,
                "SendMessage",
                json!({"message": user_message(&text), "configuration": {"returnImmediately": running}}),
                Some("1.0"),
                None,
            )
            .await;
            let id = answer["result"]["task"]["id"]
                .as_str()
                .unwrap_or_else(|| panic!("{answer:#}"))
                .to_string();
            (id, text, running)
        });
    }
    let mut acknowledged = Vec::new();
    while let Some(sent) = sends.join_next().await {
        acknowledged.push(sent.unwrap());
    }
    // At once, with tasks still running and writes maybe still queued.
    crate::support::signal(first.child.id(), crate::support::Signal::KILL);
    first.child.wait().unwrap();

    let second = daemon(&home);
    for (id, text, running) in &acknowledged {
        let got = rpc(
            &second.base,
            "GetTask",
            json!({"id": id}),
            Some("1.0"),
            None,
        )
        .await;
        let task = &got["result"];
        assert_eq!(
            task["history"][0]["parts"][0]["text"],
            text.as_str(),
            "{got:#}"
        );
        if *running {
            assert_eq!(task["status"]["state"], "TASK_STATE_FAILED", "{got:#}");
            assert!(
                text_of_parts(&task["status"]["message"]["parts"]).contains("restarted"),
                "{got:#}"
            );
        } else {
            assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{got:#}");
            assert_eq!(
                text_of_parts(&task["artifacts"][0]["parts"]),
                format!("echo: {text}"),
                "{got:#}"
            );
        }
    }
    assert_eq!(acknowledged.len(), 24);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_store_evicts_finished_tasks_oldest_first_and_refuses_when_all_are_active() {
    let home = home("[a2a]\nmax_tasks = 3");
    let daemon = daemon(&home);
    let base = daemon.base.clone();
    let send = |text: &str, immediately: bool| {
        let base = base.clone();
        let message = user_message(text);
        async move {
            rpc(
                &base,
                "SendMessage",
                json!({"message": message, "configuration": {"returnImmediately": immediately}}),
                Some("1.0"),
                None,
            )
            .await
        }
    };
    let id = |v: &Value| v["result"]["task"]["id"].as_str().unwrap().to_string();
    let done: Vec<String> = {
        let mut ids = Vec::new();
        for i in 0..3 {
            ids.push(id(&send(&format!("done {i}"), false).await));
        }
        ids
    };
    // Two more: the two oldest finished tasks make room, in that order.
    let newer_a = id(&send("hang a", true).await);
    let got = rpc(&base, "GetTask", json!({"id": done[0]}), Some("1.0"), None).await;
    assert_eq!(
        got["error"]["code"], -32001,
        "oldest finished task evicted first"
    );
    let got = rpc(&base, "GetTask", json!({"id": done[1]}), Some("1.0"), None).await;
    assert_eq!(
        got["result"]["id"],
        done[1].as_str(),
        "the next oldest is still there"
    );
    let newer_b = id(&send("hang b", true).await);
    let got = rpc(&base, "GetTask", json!({"id": done[1]}), Some("1.0"), None).await;
    assert_eq!(got["error"]["code"], -32001);
    let newer_c = id(&send("hang c", true).await);
    let got = rpc(&base, "GetTask", json!({"id": done[2]}), Some("1.0"), None).await;
    assert_eq!(got["error"]["code"], -32001);

    // Now every stored task is active: a new one is refused, clearly, and nothing is evicted.
    let refused = send("one too many", false).await;
    assert_eq!(refused["error"]["code"], -32603, "{refused:#}");
    assert_eq!(refused["error"]["data"][0]["reason"], "TASK_STORE_FULL");
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(message.contains("max_tasks"), "{message}");
    for active in [&newer_a, &newer_b, &newer_c] {
        let got = rpc(&base, "GetTask", json!({"id": active}), Some("1.0"), None).await;
        let state = got["result"]["status"]["state"]
            .as_str()
            .unwrap_or_default();
        assert!(
            ["TASK_STATE_SUBMITTED", "TASK_STATE_WORKING"].contains(&state),
            "{got:#}"
        );
    }
    // Once one finishes (cancelled), there is room again.
    rpc(
        &base,
        "CancelTask",
        json!({"id": newer_a}),
        Some("1.0"),
        None,
    )
    .await;
    let accepted = send("room now", false).await;
    assert_eq!(
        accepted["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{accepted:#}"
    );
}
