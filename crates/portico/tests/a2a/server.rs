//! The A2A server's bindings, lifecycle, errors and cards.

use serde_json::{Value, json};

use crate::helpers::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cards_in_both_forms_with_etags_at_every_documented_path() {
    let home = home("");
    let daemon = daemon(&home);
    let base = daemon.base.clone();
    let url = format!("{base}/a2a/echo");

    let response = http()
        .get(format!("{base}/.well-known/agent-card.json"))
        .header("A2A-Version", "1.0")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let etag = response.headers()["etag"].to_str().unwrap().to_string();
    let card: Value = response.json().await.unwrap();
    assert_eq!(card["name"], "echo");
    assert_eq!(card["description"], "Echoes what it is told");
    assert_eq!(
        card["supportedInterfaces"],
        json!([
            {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
            {"url": url, "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"},
            {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "0.3"},
            {"url": url, "protocolBinding": "HTTP+JSON", "protocolVersion": "0.3"},
        ])
    );
    assert_eq!(card["capabilities"]["streaming"], true);
    assert_eq!(card["capabilities"]["pushNotifications"], true);
    let skills: Vec<&str> = card["skills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        skills,
        ["echo", "system_time"],
        "the agent itself, then its tools"
    );

    let again = http()
        .get(format!("{base}/.well-known/agent-card.json"))
        .header("A2A-Version", "1.0")
        .header("If-None-Match", &etag)
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), 304);
    assert_eq!(again.headers()["etag"].to_str().unwrap(), etag);

    let old: Value = http()
        .get(format!("{base}/.well-known/agent-card.json"))
        .header("A2A-Version", "0.3")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(old["protocolVersion"], "0.3.0");
    assert_eq!(old["url"], url);
    assert_eq!(old["preferredTransport"], "JSONRPC");
    assert_eq!(
        old["additionalInterfaces"],
        json!([
            {"url": url, "transport": "JSONRPC"},
            {"url": url, "transport": "HTTP+JSON"},
        ])
    );
    let legacy: Value = http()
        .get(format!("{base}/.well-known/agent.json"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(legacy["url"], url);
    // No API exposes the stored status history, so the card does not claim it.
    assert_eq!(legacy["capabilities"]["stateTransitionHistory"], false);
    let per_agent: Value = http()
        .get(format!("{url}/.well-known/agent-card.json?version=1.0"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(per_agent, card);
    // Without a version, the 1.0 card (see tck::a_card_without_a_version_is_strictly_the_1_0_card…).
    let unversioned: Value = http()
        .get(format!("{base}/.well-known/agent-card.json"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(unversioned, card);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_rpc_1_0_sends_gets_lists_and_streams() {
    let home = home("");
    let daemon = daemon(&home);
    let base = daemon.base.clone();

    let sent = rpc(
        &base,
        "SendMessage",
        json!({"message": user_message("hello there")}),
        Some("1.0"),
        None,
    )
    .await;
    let task = &sent["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{sent:#}");
    assert_eq!(
        text_of_parts(&task["artifacts"][0]["parts"]),
        "echo: hello there"
    );
    assert_eq!(task["artifacts"][0]["artifactId"], "response");
    assert_eq!(
        text_of_parts(&task["status"]["message"]["parts"]),
        "echo: hello there"
    );
    let roles: Vec<&str> = task["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["ROLE_USER", "ROLE_AGENT"]);
    let id = task["id"].as_str().unwrap();

    let got = rpc(
        &base,
        "GetTask",
        json!({"id": id, "historyLength": 1}),
        Some("1.0"),
        None,
    )
    .await;
    assert_eq!(got["result"]["id"], id);
    assert_eq!(got["result"]["history"].as_array().unwrap().len(), 1);

    let listed = rpc(&base, "ListTasks", json!({}), Some("1.0"), None).await;
    assert_eq!(listed["result"]["totalSize"], 1, "{listed:#}");
    assert_eq!(listed["result"]["tasks"][0]["id"], id);

    // Streaming: the task first, then working, the answer as artifact chunks, then completed.
    let response = http()
        .post(format!("{base}/a2a/echo"))
        .header("A2A-Version", "1.0")
        .json(&json!({"jsonrpc": "2.0", "id": 7, "method": "SendStreamingMessage", "params": {"message": user_message("slow stream")}}))
        .send()
        .await
        .unwrap();
    assert!(
        response.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    let events = sse_events(&response.text().await.unwrap());
    assert!(events.iter().all(|e| e["id"] == 7 && e["jsonrpc"] == "2.0"));
    let results: Vec<&Value> = events.iter().map(|e| &e["result"]).collect();
    assert_eq!(
        results[0]["task"]["status"]["state"], "TASK_STATE_SUBMITTED",
        "{results:#?}"
    );
    let states: Vec<&str> = results
        .iter()
        .filter_map(|r| r["statusUpdate"]["status"]["state"].as_str())
        .collect();
    assert_eq!(
        states,
        [
            "TASK_STATE_WORKING",
            "TASK_STATE_WORKING",
            "TASK_STATE_COMPLETED"
        ],
        "{results:#?}"
    );
    let thinking = results
        .iter()
        .find(|r| r["statusUpdate"]["status"]["message"].is_object())
        .unwrap();
    assert_eq!(
        text_of_parts(&thinking["statusUpdate"]["status"]["message"]["parts"]),
        "thinking"
    );
    let last_artifact = results
        .iter()
        .rev()
        .find(|r| r["artifactUpdate"].is_object())
        .unwrap();
    assert_eq!(last_artifact["artifactUpdate"]["lastChunk"], true);
    assert_eq!(
        text_of_parts(&last_artifact["artifactUpdate"]["artifact"]["parts"]),
        "slow done: slow stream"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_rpc_0_3_speaks_the_0_3_shapes() {
    let home = home("");
    let daemon = daemon(&home);
    let base = daemon.base.clone();
    let message = json!({"kind": "message", "messageId": "m1", "role": "user", "parts": [{"kind": "text", "text": "old school"}]});
    // No A2A-Version header means 0.3.
    let sent = rpc(
        &base,
        "message/send",
        json!({"message": message}),
        None,
        None,
    )
    .await;
    let task = &sent["result"];
    assert_eq!(task["kind"], "task", "{sent:#}");
    assert_eq!(task["status"]["state"], "completed");
    assert_eq!(
        task["artifacts"][0]["parts"][0],
        json!({"kind": "text", "text": "echo: old school"})
    );
    assert_eq!(task["history"][1]["role"], "agent");
    let id = task["id"].as_str().unwrap();
    let got = rpc(&base, "tasks/get", json!({"id": id}), Some("0.3"), None).await;
    assert_eq!(got["result"]["status"]["state"], "completed");
    // 0.3 streaming ends with a final status-update.
    let response = http()
        .post(format!("{base}/a2a/echo"))
        .json(&json!({"jsonrpc": "2.0", "id": 7, "method": "message/stream", "params": {"message": message}}))
        .send()
        .await
        .unwrap();
    let events = sse_events(&response.text().await.unwrap());
    let kinds: Vec<&str> = events
        .iter()
        .map(|e| e["result"]["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds.first(), Some(&"task"));
    assert_eq!(kinds.last(), Some(&"status-update"));
    let last = &events.last().unwrap()["result"];
    assert_eq!(last["final"], true);
    assert_eq!(last["status"]["state"], "completed");
    // A 1.0 method under a 0.3 header is not a 0.3 method.
    let wrong = rpc(&base, "GetTask", json!({"id": id}), Some("0.3"), None).await;
    assert_eq!(wrong["error"]["code"], -32601);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_turn_input_required_then_continued_on_the_same_task() {
    let home = home("");
    let daemon = daemon(&home);
    let base = daemon.base.clone();
    let first = rpc(
        &base,
        "SendMessage",
        json!({"message": user_message("ask me")}),
        Some("1.0"),
        None,
    )
    .await;
    let task = &first["result"]["task"];
    assert_eq!(
        task["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
        "{first:#}"
    );
    assert_eq!(
        text_of_parts(&task["status"]["message"]["parts"]),
        "which colour?"
    );
    let (id, context) = (
        task["id"].as_str().unwrap(),
        task["contextId"].as_str().unwrap(),
    );

    let mut answer = user_message("red");
    answer["taskId"] = json!(id);
    let second = rpc(
        &base,
        "SendMessage",
        json!({"message": answer}),
        Some("1.0"),
        None,
    )
    .await;
    let task = &second["result"]["task"];
    assert_eq!(task["id"], id);
    assert_eq!(task["contextId"], context);
    assert_eq!(
        task["status"]["state"], "TASK_STATE_COMPLETED",
        "{second:#}"
    );
    assert_eq!(
        text_of_parts(&task["artifacts"][0]["parts"]),
        "you chose red"
    );
    assert_eq!(
        task["history"].as_array().unwrap().len(),
        4,
        "question, answer, each with the agent's reply"
    );

    // A finished task takes no more messages; the same context does (a new task).
    let again = rpc(
        &base,
        "SendMessage",
        json!({"message": answer}),
        Some("1.0"),
        None,
    )
    .await;
    assert_eq!(again["error"]["code"], -32004, "{again:#}");
    let mut follow = user_message("blue");
    follow["contextId"] = json!(context);
    let third = rpc(
        &base,
        "SendMessage",
        json!({"message": follow}),
        Some("1.0"),
        None,
    )
    .await;
    assert_eq!(third["result"]["task"]["contextId"], context);
    assert_ne!(third["result"]["task"]["id"], id);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_stops_the_agent_and_finished_tasks_cannot_be_canceled() {
    let home = home("");
    let daemon = daemon(&home);
    let base = daemon.base.clone();
    let started = rpc(
        &base,
        "SendMessage",
        json!({"message": user_message("hang on"), "configuration": {"returnImmediately": true}}),
        Some("1.0"),
        None,
    )
    .await;
    let task = &started["result"]["task"];
    let state = task["status"]["state"].as_str().unwrap();
    assert!(
        ["TASK_STATE_SUBMITTED", "TASK_STATE_WORKING"].contains(&state),
        "{started:#}"
    );
    let id = task["id"].as_str().unwrap();
    let canceled = rpc(&base, "CancelTask", json!({"id": id}), Some("1.0"), None).await;
    assert_eq!(
        canceled["result"]["status"]["state"], "TASK_STATE_CANCELED",
        "{canceled:#}"
    );
    let again = rpc(&base, "CancelTask", json!({"id": id}), Some("1.0"), None).await;
    assert_eq!(again["error"]["code"], -32002);
    assert_eq!(again["error"]["data"][0]["reason"], "TASK_NOT_CANCELABLE");
    // The agent's run really ended: its call was recorded as finished, not left running.
    let audit: Value = http()
        .get(format!("{base}/api/audit?tool=portico_agent_echo"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let records = audit["records"].as_array().unwrap();
    assert_eq!(records.len(), 1, "{audit:#}");
    assert_eq!(records[0]["outcome"], "cancelled", "{audit:#}");
    assert_eq!(records[0]["caller"], "client:a2a");
    let got = rpc(&base, "GetTask", json!({"id": id}), Some("1.0"), None).await;
    assert_eq!(got["result"]["status"]["state"], "TASK_STATE_CANCELED");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_use_the_spec_codes_and_tasks_belong_to_their_caller() {
    let home = home("");
    let daemon = daemon(&home);
    let base = daemon.base.clone();
    let missing = rpc(&base, "GetTask", json!({"id": "nope"}), Some("1.0"), None).await;
    assert_eq!(missing["error"]["code"], -32001);
    assert_eq!(
        missing["error"]["data"][0]["@type"],
        "type.googleapis.com/google.rpc.ErrorInfo"
    );
    let version = rpc(&base, "GetTask", json!({"id": "nope"}), Some("9.9"), None).await;
    assert_eq!(version["error"]["code"], -32009);
    let method = rpc(&base, "Teleport", json!({}), Some("1.0"), None).await;
    assert_eq!(method["error"]["code"], -32601);
    let params = rpc(&base, "SendMessage", json!({}), Some("1.0"), None).await;
    assert_eq!(params["error"]["code"], -32602);
    let push = rpc(
        &base,
        "CreateTaskPushNotificationConfig",
        json!({"taskId": "x", "url": "https://example.com"}),
        Some("1.0"),
        None,
    )
    .await;
    assert_eq!(
        push["error"]["code"], -32001,
        "push configs need a task the caller owns"
    );
    let parse: Value = http()
        .post(format!("{base}/a2a/echo"))
        .body("{not json")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(parse["error"]["code"], -32700);

    // A task made with one credential is invisible with another, or without one.
    let mine = rpc(
        &base,
        "SendMessage",
        json!({"message": user_message("secret")}),
        Some("1.0"),
        Some("Bearer alice"),
    )
    .await;
    let id = mine["result"]["task"]["id"].as_str().unwrap();
    let theirs = rpc(
        &base,
        "GetTask",
        json!({"id": id}),
        Some("1.0"),
        Some("Bearer bob"),
    )
    .await;
    assert_eq!(theirs["error"]["code"], -32001);
    let nobody = rpc(&base, "GetTask", json!({"id": id}), Some("1.0"), None).await;
    assert_eq!(nobody["error"]["code"], -32001);
    let listed = rpc(
        &base,
        "ListTasks",
        json!({}),
        Some("1.0"),
        Some("Bearer bob"),
    )
    .await;
    assert_eq!(listed["result"]["totalSize"], 0);
    let own = rpc(
        &base,
        "GetTask",
        json!({"id": id}),
        Some("1.0"),
        Some("Bearer alice"),
    )
    .await;
    assert_eq!(own["result"]["id"], id);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_json_binding_and_the_legacy_tasks_send() {
    let home = home("");
    let daemon = daemon(&home);
    let base = daemon.base.clone();
    let sent: Value = http()
        .post(format!("{base}/a2a/echo/message:send"))
        .json(&json!({"message": user_message("report please")}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let task = &sent["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{sent:#}");
    let artifacts: Vec<(&str, String)> = task["artifacts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["artifactId"].as_str().unwrap(),
                text_of_parts(&a["parts"]),
            )
        })
        .collect();
    assert_eq!(
        artifacts,
        [
            ("report", "part 1part 2".to_string()),
            ("response", "report ready".to_string())
        ]
    );
    let id = task["id"].as_str().unwrap();
    let got: Value = http()
        .get(format!("{base}/a2a/echo/tasks/{id}"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(got["id"], id);
    let listed: Value = http()
        .get(format!(
            "{base}/a2a/echo/tasks?pageSize=10&includeArtifacts=true"
        ))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(listed["tasks"][0]["artifacts"].as_array().unwrap().len(), 2);
    let cancel = http()
        .post(format!("{base}/a2a/echo/tasks/{id}:cancel"))
        .send()
        .await
        .unwrap();
    assert_eq!(cancel.status(), 409);
    let error: Value = cancel.json().await.unwrap();
    assert_eq!(error["error"]["status"], "FAILED_PRECONDITION");
    assert_eq!(
        error["error"]["details"][0]["reason"],
        "TASK_NOT_CANCELABLE"
    );
    let missing = http()
        .get(format!("{base}/a2a/echo/tasks/nope"))
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);

    // The early draft's shape, in both envelopes.
    let legacy: Value = http()
        .post(format!("{base}/a2a/tasks/send"))
        .json(&json!({"id": "draft-1", "sessionId": "s1", "message": {"role": "user", "parts": [{"type": "text", "text": "from the past"}]}}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(legacy["sessionId"], "s1", "{legacy:#}");
    assert_eq!(legacy["status"]["state"], "completed");
    assert_eq!(
        legacy["artifacts"][0]["parts"][0],
        json!({"kind": "text", "type": "text", "text": "echo: from the past"})
    );
    let enveloped: Value = http()
        .post(format!("{base}/a2a/tasks/send"))
        .json(&json!({"jsonrpc": "2.0", "id": 3, "method": "tasks/send", "params": {"id": "draft-2", "message": {"role": "user", "parts": [{"type": "text", "text": "again"}]}}}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(enveloped["id"], 3);
    assert_eq!(enveloped["result"]["status"]["state"], "completed");
}

/// The 0.3 HTTP+JSON binding under `/v1`, spoken by hand: the proto-JSON shapes, an error in the form
/// both 0.3 SDK clients map (`code` for JS, `type` for Python), and the push config routes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_json_0_3_binding_under_v1() {
    let home = home("");
    let daemon = daemon(&home);
    let base = daemon.base.clone();
    let v1 = format!("{base}/a2a/echo/v1");

    // The Python SDK's body: proto field names, the message in `request`.
    let sent = http()
        .post(format!("{v1}/message:send"))
        .header("A2A-Version", "0.3")
        .json(
            &json!({"request": {"message_id": format!("m-{}", rand_id()), "role": "ROLE_USER",
            "content": [{"text": "hello v1"}]}, "configuration": {"blocking": true}}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(sent.status(), 200);
    let sent: Value = sent.json().await.unwrap();
    let task = &sent["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{sent:#}");
    assert_eq!(task["status"]["message"]["role"], "ROLE_AGENT");
    assert_eq!(
        text_of_parts(&task["status"]["message"]["content"]),
        "echo: hello v1"
    );
    assert_eq!(
        text_of_parts(&task["artifacts"][0]["parts"]),
        "echo: hello v1"
    );
    assert!(task.get("kind").is_none(), "{sent:#}");
    let id = task["id"].as_str().unwrap();

    // The JS SDK's body: JSON names, the message in `message`; streamed.
    let streamed = http()
        .post(format!("{v1}/message:stream"))
        .json(
            &json!({"message": {"messageId": format!("m-{}", rand_id()), "role": "ROLE_USER",
            "content": [{"text": "slow v1"}]}, "configuration": {"blocking": true}}),
        )
        .send()
        .await
        .unwrap();
    assert!(
        streamed.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    let events = sse_events(&streamed.text().await.unwrap());
    assert!(events[0]["task"]["id"].is_string(), "{events:?}");
    let last = events.last().unwrap();
    assert_eq!(
        last["statusUpdate"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{events:?}"
    );
    assert_eq!(last["statusUpdate"]["final"], true);
    assert!(
        events
            .iter()
            .any(|e| e["artifactUpdate"]["artifact"]["parts"].is_array())
    );

    let got: Value = http()
        .get(format!("{v1}/tasks/{id}?historyLength=1"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(got["id"], id);
    assert_eq!(got["history"].as_array().unwrap().len(), 1, "{got:#}");

    // An unknown task: 404, with the JSON-RPC code and the SDK error class.
    let missing = http()
        .get(format!("{v1}/tasks/no-such-task"))
        .header("A2A-Version", "0.3")
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);
    let error: Value = missing.json().await.unwrap();
    assert_eq!(error["code"], -32001, "{error:#}");
    assert_eq!(error["type"], "TaskNotFoundError");
    assert_eq!(error["message"], "task `no-such-task` not found");
    assert_eq!(error["data"][0]["reason"], "TASK_NOT_FOUND");
    let finished = http()
        .post(format!("{v1}/tasks/{id}:cancel"))
        .send()
        .await
        .unwrap();
    assert_eq!(finished.status(), 409);
    let error: Value = finished.json().await.unwrap();
    assert_eq!(error["code"], -32002);
    assert_eq!(error["type"], "TaskNotCancelableError");

    // Push configs: the JS body (the HTTP rule's `config`), then the Python one (the whole request).
    let configs = format!("{v1}/tasks/{id}/pushNotificationConfigs");
    let created: Value = http()
        .post(&configs)
        .json(
            &json!({"name": format!("tasks/{id}/pushNotificationConfigs/js"),
            "pushNotificationConfig": {"url": "https://hooks.example.com/a2a", "token": "t",
                "authentication": {"schemes": ["Bearer"], "credentials": "s"}}}),
        )
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        created,
        json!({"name": format!("tasks/{id}/pushNotificationConfigs/js"),
            "pushNotificationConfig": {"id": "js", "url": "https://hooks.example.com/a2a", "token": "t",
                "authentication": {"schemes": ["Bearer"], "credentials": "s"}}})
    );
    let created: Value = http()
        .post(&configs)
        .json(
            &json!({"parent": format!("tasks/{id}"), "config_id": "py", "config": {
            "name": format!("tasks/{id}/pushNotificationConfigs/py"),
            "push_notification_config": {"id": "py", "url": "https://hooks.example.com/py"}}}),
        )
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(created["pushNotificationConfig"]["id"], "py", "{created:#}");
    let listed: Value = http()
        .get(&configs)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let mut names: Vec<&str> = listed["configs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            format!("tasks/{id}/pushNotificationConfigs/js"),
            format!("tasks/{id}/pushNotificationConfigs/py")
        ]
    );
    let one: Value = http()
        .get(format!("{configs}/py"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        one["pushNotificationConfig"]["url"],
        "https://hooks.example.com/py"
    );
    let deleted = http().delete(format!("{configs}/py")).send().await.unwrap();
    assert_eq!(deleted.status(), 200);
    let gone = http().get(format!("{configs}/py")).send().await.unwrap();
    assert_eq!(gone.status(), 400);
    assert_eq!(
        gone.json::<Value>().await.unwrap()["type"],
        "InvalidParamsError"
    );

    // A push config given with the send is the task's (it was once dropped on this binding).
    let sent: Value = http()
        .post(format!("{v1}/message:send"))
        .json(
            &json!({"request": {"message_id": format!("m-{}", rand_id()), "role": "ROLE_USER",
            "content": [{"text": "with a hook"}]}, "configuration": {"blocking": false,
                "push_notification": {"id": "at-send", "url": "https://hooks.example.com/send"}}}),
        )
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = sent["task"]["id"].as_str().expect("a task");
    let listed: Value = http()
        .get(format!("{v1}/tasks/{id}/pushNotificationConfigs"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        listed,
        json!({"configs": [{"name": format!("tasks/{id}/pushNotificationConfigs/at-send"),
            "pushNotificationConfig": {"id": "at-send", "url": "https://hooks.example.com/send"}}],
            "nextPageToken": ""})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disabled_a2a_serves_nothing_and_listen_path_is_honoured() {
    let off = home("[a2a]\nenabled = false");
    let daemon_off = daemon(&off);
    for path in ["/.well-known/agent-card.json", "/.well-known/agent.json"] {
        let response = http()
            .get(format!("{}{path}", daemon_off.base))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 404, "{path}");
    }
    let post = http()
        .post(format!("{}/a2a/echo", daemon_off.base))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(post.status(), 404);

    let moved =
        home("[a2a]\nlisten_path = \"/agents\"\npublic_url = \"https://agents.example.com\"");
    let daemon_moved = daemon(&moved);
    let card: Value = http()
        .get(format!("{}/.well-known/agent-card.json", daemon_moved.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        card["supportedInterfaces"][0]["url"],
        "https://agents.example.com/agents/echo"
    );
    let sent: Value = http()
        .post(format!("{}/agents/echo", daemon_moved.base))
        .header("A2A-Version", "1.0")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": user_message("moved")}}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        sent["result"]["task"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
    let old = http()
        .post(format!("{}/a2a/echo", daemon_moved.base))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(old.status(), 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limits_answer_429_with_retry_after_and_recover() {
    let home = home("rate_limit = { per_second = 1, burst = 3, agent_cost = 2 }");
    let first = daemon(&home);
    let base = first.base.clone();
    let card = |auth: &'static str| {
        let base = base.clone();
        async move {
            http()
                .get(format!("{base}/.well-known/agent-card.json"))
                .header("Authorization", auth)
                .send()
                .await
                .unwrap()
        }
    };
    for _ in 0..3 {
        assert_eq!(card("Bearer reader").await.status(), 200);
    }
    let limited = card("Bearer reader").await;
    assert_eq!(limited.status(), 429);
    let retry_after: u64 = limited.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=2).contains(&retry_after), "{retry_after}");
    let body: Value = limited.json().await.unwrap();
    assert!(body["error"].as_str().unwrap().contains("rate limit"));
    // On a door without a token an `Authorization` header proves nothing: a new value is the same
    // client (this machine), not a fresh bucket. The health check is never limited.
    assert_eq!(card("Bearer someone-else").await.status(), 429);
    assert_eq!(card("Bearer   reader").await.status(), 429);
    for _ in 0..5 {
        let health = http()
            .get(format!("{base}/api/health"))
            .header("Authorization", "Bearer reader")
            .send()
            .await
            .unwrap();
        assert_eq!(health.status(), 200);
    }
    // Recovery: waiting as told is enough.
    tokio::time::sleep(std::time::Duration::from_secs(retry_after)).await;
    assert_eq!(card("Bearer reader").await.status(), 200);
    drop(first);

    // Running an agent costs 2 of the burst of 3, reading a card 1 (a fresh daemon: a full bucket).
    let second = daemon(&home);
    let base = second.base.clone();
    let card = |auth: &'static str| {
        let base = base.clone();
        async move {
            http()
                .get(format!("{base}/.well-known/agent-card.json"))
                .header("Authorization", auth)
                .send()
                .await
                .unwrap()
        }
    };
    let send = |auth: &'static str| {
        let base = base.clone();
        async move {
            http()
                .post(format!("{base}/a2a/echo"))
                .header("A2A-Version", "1.0")
                .header("Authorization", auth)
                .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": user_message("hi")}}))
                .send()
                .await
                .unwrap()
        }
    };
    assert_eq!(send("Bearer sender").await.status(), 200);
    assert_eq!(send("Bearer sender").await.status(), 429, "2 + 2 is over 3");
    assert_eq!(card("Bearer sender").await.status(), 200, "2 + 1 is not");
    drop(second);
    // The MCP door is limited the same way.
    let third = daemon(&home);
    let base = third.base.clone();
    let mut statuses = Vec::new();
    for _ in 0..4 {
        let response = http()
            .post(format!("{base}/mcp"))
            .header("Authorization", "Bearer mcp-client")
            .header("accept", "application/json, text/event-stream")
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}))
            .send()
            .await
            .unwrap();
        statuses.push(response.status().as_u16());
    }
    assert_eq!(statuses[3], 429, "{statuses:?}");
}

/// A message that is not an object (a string, an array, a number), to the legacy `tasks/send` in both
/// envelopes and to `SendMessage`: each gets a clear error naming what was wrong, and the daemon goes
/// on serving. The legacy route used to panic on it, and the connection died with an empty reply.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_that_is_not_an_object_is_refused_not_a_panic() {
    let home = home("");
    let daemon = daemon(&home);
    let base = daemon.base.clone();
    for (message, kind) in [
        (json!("hi"), "a string"),
        (json!(["hi"]), "an array"),
        (json!(7), "a number"),
    ] {
        let plain = http()
            .post(format!("{base}/a2a/tasks/send"))
            .json(&json!({"id": "1", "message": message}))
            .send()
            .await
            .unwrap();
        assert_eq!(plain.status(), 400, "{message}");
        let error: Value = plain.json().await.unwrap();
        let text = error["error"]["message"].as_str().unwrap_or_default();
        assert!(
            text.contains("`message` must be an object") && text.contains(kind),
            "{error}"
        );
        let enveloped = http()
            .post(format!("{base}/a2a/tasks/send"))
            .json(&json!({"jsonrpc": "2.0", "id": 9, "method": "tasks/send", "params": {"id": "1", "message": message}}))
            .send()
            .await
            .unwrap();
        assert_eq!(enveloped.status(), 200);
        let error: Value = enveloped.json().await.unwrap();
        assert_eq!(error["id"], 9);
        assert_eq!(error["error"]["code"], -32602, "{error}");
        assert!(
            error["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains(kind)),
            "{error}"
        );
        let rpc_error = rpc(
            &base,
            "SendMessage",
            json!({"message": message}),
            None,
            None,
        )
        .await;
        assert_eq!(rpc_error["error"]["code"], -32602, "{rpc_error}");
        assert!(
            rpc_error["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("`message` must be an object") && m.contains(kind)),
            "{rpc_error}"
        );
    }
    // Still serving.
    let legacy: Value = http()
        .post(format!("{base}/a2a/tasks/send"))
        .json(&json!({"id": "2", "message": {"role": "user", "parts": [{"type": "text", "text": "still here"}]}}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(legacy["status"]["state"], "completed", "{legacy}");
}
