//! The states of the 1.0 lifecycle not covered elsewhere: auth-required (and continued), rejected,
//! failed; and resubscribing to a task that is still running.

use serde_json::json;

use crate::helpers::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auth_required_continues_rejected_and_failed_are_final() {
    let home = home("");
    let daemon = daemon(&home);
    let base = daemon.base.clone();

    let auth = rpc(
        &base,
        "SendMessage",
        json!({"message": user_message("login please")}),
        Some("1.0"),
        None,
    )
    .await;
    let task = &auth["result"]["task"];
    assert_eq!(
        task["status"]["state"], "TASK_STATE_AUTH_REQUIRED",
        "{auth:#}"
    );
    assert_eq!(
        text_of_parts(&task["status"]["message"]["parts"]),
        "sign in first"
    );
    let mut credentials = user_message("token abc");
    credentials["taskId"] = task["id"].clone();
    let signed = rpc(
        &base,
        "SendMessage",
        json!({"message": credentials}),
        Some("1.0"),
        None,
    )
    .await;
    assert_eq!(
        signed["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{signed:#}"
    );
    assert_eq!(
        text_of_parts(&signed["result"]["task"]["artifacts"][0]["parts"]),
        "signed in"
    );

    let rejected = rpc(
        &base,
        "SendMessage",
        json!({"message": user_message("forbidden thing")}),
        Some("1.0"),
        None,
    )
    .await;
    let task = &rejected["result"]["task"];
    assert_eq!(
        task["status"]["state"], "TASK_STATE_REJECTED",
        "{rejected:#}"
    );
    assert_eq!(
        text_of_parts(&task["status"]["message"]["parts"]),
        "not doing that"
    );
    let cancel = rpc(
        &base,
        "CancelTask",
        json!({"id": task["id"]}),
        Some("1.0"),
        None,
    )
    .await;
    assert_eq!(cancel["error"]["code"], -32002, "rejected is final");

    let failed = rpc(
        &base,
        "SendMessage",
        json!({"message": user_message("fail now")}),
        Some("1.0"),
        None,
    )
    .await;
    let task = &failed["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_FAILED", "{failed:#}");
    assert!(
        text_of_parts(&task["status"]["message"]["parts"]).contains("it broke"),
        "{failed:#}"
    );
    // The 0.3 form names the same states in lower case.
    let old = rpc(
        &base,
        "tasks/get",
        json!({"id": task["id"]}),
        Some("0.3"),
        None,
    )
    .await;
    assert_eq!(old["result"]["status"]["state"], "failed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resubscribing_to_a_running_task_streams_the_rest_of_it() {
    let home = home("");
    let daemon = daemon(&home);
    let base = daemon.base.clone();
    let started = rpc(
        &base,
        "SendMessage",
        json!({"message": user_message("linger a while"), "configuration": {"returnImmediately": true}}),
        Some("1.0"),
        None,
    )
    .await;
    let id = started["result"]["task"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let response = http()
        .post(format!("{base}/a2a/echo"))
        .header("A2A-Version", "1.0")
        .json(
            &json!({"jsonrpc": "2.0", "id": 7, "method": "SubscribeToTask", "params": {"id": id}}),
        )
        .send()
        .await
        .unwrap();
    let events = sse_events(&response.text().await.unwrap());
    assert_eq!(
        events[0]["result"]["task"]["id"],
        id.as_str(),
        "{events:#?}"
    );
    let last = &events.last().unwrap()["result"]["statusUpdate"]["status"]["state"];
    assert_eq!(last, "TASK_STATE_COMPLETED", "{events:#?}");
    // A finished task is not subscribable; get it instead.
    let again = rpc(
        &base,
        "SubscribeToTask",
        json!({"id": id}),
        Some("1.0"),
        None,
    )
    .await;
    assert_eq!(again["error"]["code"], -32004);
}
