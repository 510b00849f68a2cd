//! The protocol fixes the typed A2A core brought (found by the A2A TCK): the card's URL with a
//! trailing slash, JSON errors on every A2A path, push config requests in the proto's field names
//! and idempotent deletes, subscriptions to unknown tasks, params errors that name the field.

use serde_json::{Value, json};

use crate::helpers::*;

/// One JSON-RPC 1.0 request to `path`, answered with 200 and a JSON body.
async fn rpc_at(base: &str, path: &str, method: &str, params: Value) -> Value {
    let response = http()
        .post(format!("{base}{path}"))
        .header("A2A-Version", "1.0")
        .json(&json!({"jsonrpc": "2.0", "id": 3, "method": method, "params": params}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200, "{method} at {path}");
    let body: Value = response.json().await.unwrap();
    assert_eq!(
        (&body["jsonrpc"], &body["id"]),
        (&json!("2.0"), &json!(3)),
        "{body}"
    );
    body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_rpc_is_served_at_the_card_url_with_a_trailing_slash() {
    let home = home("");
    let daemon = daemon(&home);
    let base = daemon.base.clone();
    let sent = rpc_at(
        &base,
        "/a2a/echo/",
        "SendMessage",
        json!({"message": user_message("hi")}),
    )
    .await;
    let task = &sent["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{sent}");
    let id = task["id"].as_str().unwrap();
    let got = rpc_at(&base, "/a2a/echo/", "GetTask", json!({"id": id})).await;
    assert_eq!(got["result"]["id"], id, "{got}");
    assert_eq!(
        text_of_parts(&got["result"]["artifacts"][0]["parts"]),
        "echo: hi"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_error_on_an_a2a_path_is_json() {
    let home = home("");
    let daemon = daemon(&home);
    let base = daemon.base.clone();
    // An unknown path under the listen path, a known one with the wrong method, the JSON-RPC
    // endpoint read with GET: each a JSON error (they were empty bodies).
    for (method, path, status) in [
        (reqwest::Method::POST, "/a2a/echo/no/such/operation", 404),
        (reqwest::Method::GET, "/a2a/echo/tasks/t1/nothing", 404),
        (reqwest::Method::DELETE, "/a2a/echo/message:send", 405),
        (reqwest::Method::GET, "/a2a/echo", 405),
        (reqwest::Method::PUT, "/a2a/echo/", 405),
    ] {
        let response = http()
            .request(method.clone(), format!("{base}{path}"))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), status, "{method} {path}");
        let content_type = response.headers()["content-type"]
            .to_str()
            .unwrap()
            .to_string();
        assert_eq!(content_type, "application/json", "{method} {path}");
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["error"]["code"], status, "{method} {path}: {body}");
        assert_eq!(
            body["error"]["details"][0]["reason"], "METHOD_NOT_FOUND",
            "{method} {path}: {body}"
        );
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains(path), "{message}");
    }
    // An unknown agent on JSON-RPC is a JSON-RPC error.
    let unknown = rpc_at(&base, "/a2a/nobody/", "GetTask", json!({"id": "t"})).await;
    assert_eq!(unknown["error"]["code"], -32601, "{unknown}");
    // Outside the A2A paths nothing changes: a plain 404.
    let outside = http()
        .get(format!("{base}/no-such-door"))
        .send()
        .await
        .unwrap();
    assert_eq!(outside.status(), 404);
    assert_eq!(outside.bytes().await.unwrap().len(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_configs_take_the_proto_field_names_and_a_second_delete_succeeds() {
    let home = home("");
    let daemon = daemon(&home);
    let base = daemon.base.clone();
    let sent = rpc_at(
        &base,
        "/a2a/echo",
        "SendMessage",
        json!({"message": user_message("hi")}),
    )
    .await;
    let id = sent["result"]["task"]["id"].as_str().unwrap().to_string();
    let hook = "https://hooks.example.com/a2a";
    // The TCK's shapes: proto field names (`task_id`), the config's fields beside it.
    let created = rpc_at(
        &base,
        "/a2a/echo/",
        "CreateTaskPushNotificationConfig",
        json!({"task_id": id, "id": "c1", "url": hook, "token": "tok"}),
    )
    .await;
    assert_eq!(
        created["result"],
        json!({"id": "c1", "taskId": id, "url": hook, "token": "tok"}),
        "{created}"
    );
    let got = rpc_at(
        &base,
        "/a2a/echo",
        "GetTaskPushNotificationConfig",
        json!({"task_id": id, "id": "c1"}),
    )
    .await;
    assert_eq!(got["result"], created["result"], "{got}");
    let listed = rpc_at(
        &base,
        "/a2a/echo",
        "ListTaskPushNotificationConfigs",
        json!({"task_id": id}),
    )
    .await;
    assert_eq!(
        listed["result"]["configs"],
        json!([created["result"]]),
        "{listed}"
    );
    for _ in 0..2 {
        let deleted = rpc_at(
            &base,
            "/a2a/echo",
            "DeleteTaskPushNotificationConfig",
            json!({"task_id": id, "id": "c1"}),
        )
        .await;
        assert_eq!(deleted["result"], json!({}), "{deleted}");
    }
    let listed = rpc_at(
        &base,
        "/a2a/echo",
        "ListTaskPushNotificationConfigs",
        json!({"taskId": id}),
    )
    .await;
    assert_eq!(listed["result"]["configs"], json!([]), "{listed}");
    // The same over HTTP+JSON.
    let url = format!("{base}/a2a/echo/tasks/{id}/pushNotificationConfigs");
    let response = http()
        .post(&url)
        .json(&json!({"id": "c2", "url": hook}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    for _ in 0..2 {
        let response = http().delete(format!("{url}/c2")).send().await.unwrap();
        assert_eq!(response.status(), 200);
        assert_eq!(response.json::<Value>().await.unwrap(), json!({}));
    }
    // A config of a task that is not the caller's (or not there) is still not found.
    let missing = rpc_at(
        &base,
        "/a2a/echo",
        "DeleteTaskPushNotificationConfig",
        json!({"task_id": "nope", "id": "c1"}),
    )
    .await;
    assert_eq!(missing["error"]["code"], -32001, "{missing}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscribing_to_an_unknown_task_is_task_not_found_on_every_binding() {
    let home = home("");
    let daemon = daemon(&home);
    let base = daemon.base.clone();
    for path in ["/a2a/echo", "/a2a/echo/"] {
        let answer = rpc_at(
            &base,
            path,
            "SubscribeToTask",
            json!({"id": "no-such-task"}),
        )
        .await;
        assert_eq!(answer["error"]["code"], -32001, "{answer}");
        assert_eq!(
            answer["error"]["data"][0]["reason"], "TASK_NOT_FOUND",
            "{answer}"
        );
    }
    let answer = rpc(
        &base,
        "tasks/resubscribe",
        json!({"id": "no-such-task"}),
        None,
        None,
    )
    .await;
    assert_eq!(answer["error"]["code"], -32001, "{answer}");
    let response = http()
        .get(format!("{base}/a2a/echo/tasks/no-such-task:subscribe"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 404);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["status"], "NOT_FOUND", "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn params_of_the_wrong_shape_name_the_field() {
    let home = home("");
    let daemon = daemon(&home);
    let base = daemon.base.clone();
    for (method, params, message) in [
        (
            "GetTask",
            json!({"id": 7}),
            "invalid parameters: `id` must be a string, not a number",
        ),
        ("ListTasks", json!({"pageSize": "lots"}), "`pageSize`"),
        (
            "SendMessage",
            json!({"message": {"messageId": "m", "role": "ROLE_USER", "parts": {}}}),
            "`message.parts` must be an array, not an object",
        ),
        (
            "CreateTaskPushNotificationConfig",
            json!({"task_id": "t"}),
            "missing field `url`",
        ),
    ] {
        let answer = rpc_at(&base, "/a2a/echo", method, params.clone()).await;
        assert_eq!(
            answer["error"]["code"], -32602,
            "{method} {params}: {answer}"
        );
        let text = answer["error"]["message"].as_str().unwrap();
        assert!(text.contains(message), "{method} {params}: {text}");
    }
    let unknown = rpc_at(&base, "/a2a/echo", "FrobnicateTask", json!({})).await;
    assert_eq!(unknown["error"]["code"], -32601, "{unknown}");
    // The daemon is still serving.
    let sent = rpc_at(
        &base,
        "/a2a/echo",
        "SendMessage",
        json!({"message": user_message("still here")}),
    )
    .await;
    assert_eq!(
        sent["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{sent}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_rpc_refuses_a_body_that_says_it_is_not_json() {
    let home = home("");
    let daemon = daemon(&home);
    let base = daemon.base.clone();
    let request = json!({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "t"}});
    for content_type in ["text/plain", "application/x-www-form-urlencoded"] {
        let response = http()
            .post(format!("{base}/a2a/echo"))
            .header("Content-Type", content_type)
            .header("A2A-Version", "1.0")
            .body(request.to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{content_type}");
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["error"]["code"], -32005, "{content_type}: {body}");
        assert_eq!(
            body["error"]["data"][0]["reason"],
            "CONTENT_TYPE_NOT_SUPPORTED"
        );
    }
    // JSON, with parameters or as a `+json` type, is read.
    for content_type in ["application/json; charset=utf-8", "application/a2a+json"] {
        let response = http()
            .post(format!("{base}/a2a/echo"))
            .header("Content-Type", content_type)
            .header("A2A-Version", "1.0")
            .body(request.to_string())
            .send()
            .await
            .unwrap();
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["error"]["code"], -32001, "{content_type}: {body}");
    }
}

/// The HTTP+JSON bindings (1.0, 0.3 under `/v1`) and the draft's `tasks/send` read the same typed
/// requests: a body of the wrong shape is their invalid-params error, naming the field.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_binding_names_the_field_of_a_malformed_request() {
    let home = home("");
    let daemon = daemon(&home);
    let base = daemon.base.clone();
    let post = |path: &str, body: Value| {
        let url = format!("{base}{path}");
        async move {
            let response = http().post(url).json(&body).send().await.unwrap();
            let status = response.status().as_u16();
            (status, response.json::<Value>().await.unwrap())
        }
    };
    let (status, body) = post(
        "/a2a/echo/message:send",
        json!({"message": {"messageId": "m", "role": "ROLE_USER", "parts": "hi"}}),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["status"], "INVALID_ARGUMENT", "{body}");
    assert_eq!(
        body["error"]["message"],
        "invalid parameters: `message.parts` must be an array, not a string"
    );
    let (status, body) = post(
        "/a2a/echo/tasks/t1/pushNotificationConfigs",
        json!({"url": 5}),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(
        body["error"]["message"],
        "invalid parameters: `url` must be a string, not a number"
    );
    let (status, body) = post(
        "/a2a/echo/v1/message:send",
        json!({"message": {"content": 3}}),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["type"], "InvalidParamsError", "{body}");
    let (status, body) = post(
        "/a2a/tasks/send",
        json!({"id": "1", "message": {"parts": [{"type": "text"}]}}),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.starts_with("invalid parameters: `message.parts"),
        "{message}"
    );
}
