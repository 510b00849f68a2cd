//! `kill -9` of the replica running a batch of A2A tasks: the other replica fails every unfinished
//! one once the dead replica's lease runs out, loses none, and leaves the finished ones as they were.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::a2a::{AGENT, get_task, send_now, state};
use crate::cluster::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_replicas_unfinished_tasks_are_failed_by_the_other_and_none_is_lost() {
    let Some(mut cluster) = tokio::task::block_in_place(|| Replicas::start(2, AGENT)) else {
        return;
    };
    let (a, b, lb) = (
        cluster.a().base.clone(),
        cluster.b().base.clone(),
        cluster.lb.base.clone(),
    );

    // Ten tasks through A, each acknowledged: four finish at once, six wait.
    let mut quick = Vec::new();
    let mut hanging = Vec::new();
    for i in 0..10 {
        if i % 5 < 2 {
            let text = format!("quick {i}");
            quick.push((send_now(&a, &text).await, text));
        } else {
            hanging.push(send_now(&a, &format!("hang {i}")).await);
        }
    }
    let (b_ref, quick_ref, hanging_ref) = (&b, &quick, &hanging);
    eventually(
        Duration::from_secs(15),
        "B reads A's quick tasks completed and the others working",
        move || async move {
            for (id, _) in quick_ref {
                let task = get_task(b_ref, id).await?;
                if state(&task) != "TASK_STATE_COMPLETED" {
                    return Err(task.to_string());
                }
            }
            for id in hanging_ref {
                let task = get_task(b_ref, id).await?;
                if state(&task) != "TASK_STATE_WORKING" {
                    return Err(task.to_string());
                }
            }
            Ok(())
        },
    )
    .await;

    let killed = Instant::now();
    tokio::task::block_in_place(|| cluster.kill9("gw-a"));

    // None lost: right after the kill every acknowledged task reads through B, and the finished
    // ones keep their answer.
    for (id, text) in &quick {
        let task = get_task(&b, id).await.unwrap();
        assert_eq!(state(&task), "TASK_STATE_COMPLETED", "{task:#}");
        assert_eq!(
            text_of_parts(&task["artifacts"][0]["parts"]),
            format!("echo: {text}"),
            "{task:#}"
        );
    }
    let listed = rpc(&b, "echo", "ListTasks", json!({"pageSize": 50})).await;
    let listed_ids: BTreeSet<&str> = listed["result"]["tasks"]
        .as_array()
        .unwrap_or_else(|| panic!("{listed:#}"))
        .iter()
        .filter_map(|t| t["id"].as_str())
        .collect();
    let sent: BTreeSet<&str> = quick
        .iter()
        .map(|(id, _)| id.as_str())
        .chain(hanging.iter().map(String::as_str))
        .collect();
    assert_eq!(listed_ids, sent, "{listed:#}");

    // The balancer sends everything to B at once; B sees A dead once its lease has run out.
    for _ in 0..4 {
        let (status, body) = health(&lb).await;
        assert_eq!(
            (status, body["replica"].as_str()),
            (200, Some("gw-b")),
            "{body}"
        );
    }
    let dead_after = eventually(
        Duration::from_secs(30),
        "B sees A dead",
        move || async move {
            let (status, body) = health(b_ref).await;
            let dead: Vec<&str> = body["store"]["replicas"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|r| r["alive"] == false)
                .filter_map(|r| r["name"].as_str())
                .collect();
            (status == 200 && dead == ["gw-a"])
                .then(|| killed.elapsed())
                .ok_or(body.to_string())
        },
    )
    .await;
    eprintln!("replicas: B saw gw-a dead {dead_after:?} after the kill");

    // B fails every unfinished one once A's lease has run out (polled, bounded: 30 s from the
    // kill).
    let after = eventually(
        Duration::from_secs(30).saturating_sub(killed.elapsed()),
        "B fails the dead replica's unfinished tasks",
        move || async move {
            let mut states = Vec::new();
            for id in hanging_ref {
                states.push(state(&get_task(b_ref, id).await?).to_string());
            }
            states
                .iter()
                .all(|s| s == "TASK_STATE_FAILED")
                .then(|| killed.elapsed())
                .ok_or(format!("{states:?} after {:?}", killed.elapsed()))
        },
    )
    .await;
    eprintln!(
        "replicas: B failed A's 6 unfinished tasks {after:?} after the kill (lease {LEASE:?})"
    );
    // Not before A's lease could have run out: its last heartbeat was at most one heartbeat
    // (2 s) before the kill.
    assert!(
        after >= LEASE.saturating_sub(Duration::from_secs(2)),
        "B failed A's tasks {after:?} after the kill, before A's lease of {LEASE:?} ran out"
    );

    // Failed, and only those.
    for id in &hanging {
        let task = get_task(&b, id).await.unwrap();
        assert_eq!(state(&task), "TASK_STATE_FAILED", "{task:#}");
    }
    for (id, _) in &quick {
        let task = get_task(&b, id).await.unwrap();
        assert_eq!(state(&task), "TASK_STATE_COMPLETED", "{task:#}");
    }
}
