//! Push notifications: delivered to a webhook with the client's token and credentials, retried when
//! the webhook fails, refused for addresses the SSRF rules forbid.

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use serde_json::{Value, json};
use tokio::sync::Notify;

use crate::helpers::*;

#[derive(Clone, Default)]
struct Hook {
    received: Arc<Mutex<Vec<(HeaderMap, Value)>>>,
    /// How many deliveries to fail with 503 before accepting.
    fail_first: Arc<Mutex<u32>>,
    arrived: Arc<Notify>,
}

async fn receive(
    State(hook): State<Hook>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> StatusCode {
    {
        let mut fail = hook.fail_first.lock().unwrap();
        if *fail > 0 {
            *fail -= 1;
            return StatusCode::SERVICE_UNAVAILABLE;
        }
    }
    let body: Value = serde_json::from_slice(&body).unwrap();
    hook.received.lock().unwrap().push((headers, body));
    hook.arrived.notify_one();
    StatusCode::OK
}

async fn webhook(fail_first: u32) -> (String, Hook, tokio::task::JoinHandle<()>) {
    let hook = Hook::default();
    *hook.fail_first.lock().unwrap() = fail_first;
    let app = Router::new()
        .route("/hook", post(receive))
        .with_state(hook.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let task = tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, hook, task)
}

/// Waits (bounded) until the webhook has seen a status update in `state`.
async fn until_state(hook: &Hook, state: &str) -> Vec<(HeaderMap, Value)> {
    let wait = async {
        loop {
            let notified = hook.arrived.notified();
            {
                let received = hook.received.lock().unwrap();
                if received
                    .iter()
                    .any(|(_, b)| b["statusUpdate"]["status"]["state"] == state)
                {
                    return received.clone();
                }
            }
            notified.await;
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(30), wait)
        .await
        .unwrap_or_else(|_| {
            panic!("no push notification with state {state} within 30s (test guard)")
        })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_changes_reach_the_webhook_with_token_and_credentials_even_after_failures() {
    let (url, hook, server) = webhook(2).await;
    let home = home("[a2a]\npush_allow_private_network = true");
    let daemon = daemon(&home);
    let base = daemon.base.clone();
    let config = json!({"url": url, "token": "tok-123", "authentication": {"scheme": "Bearer", "credentials": "hook-secret"}});
    let started = rpc(
        &base,
        "SendMessage",
        json!({"message": user_message("slow push"), "configuration": {"returnImmediately": true, "taskPushNotificationConfig": config}}),
        Some("1.0"),
        None,
    )
    .await;
    let id = started["result"]["task"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let received = until_state(&hook, "TASK_STATE_COMPLETED").await;
    let states: Vec<&str> = received
        .iter()
        .map(|(_, b)| b["statusUpdate"]["status"]["state"].as_str().unwrap())
        .collect();
    // The first two deliveries failed with 503 and were retried: nothing is missing, in order.
    assert_eq!(
        states,
        [
            "TASK_STATE_WORKING",
            "TASK_STATE_WORKING",
            "TASK_STATE_COMPLETED"
        ],
        "{received:#?}"
    );
    for (headers, body) in &received {
        assert_eq!(headers["x-a2a-notification-token"], "tok-123");
        assert_eq!(headers["authorization"], "Bearer hook-secret");
        assert_eq!(body["statusUpdate"]["taskId"], id.as_str());
    }
    // The config can be read back, listed and deleted.
    let listed = rpc(
        &base,
        "ListTaskPushNotificationConfigs",
        json!({"taskId": id}),
        Some("1.0"),
        None,
    )
    .await;
    let configs = listed["result"]["configs"].as_array().unwrap();
    assert_eq!(configs.len(), 1, "{listed:#}");
    assert_eq!(configs[0]["url"], url.as_str());
    let config_id = configs[0]["id"].as_str().unwrap();
    let got = rpc(
        &base,
        "GetTaskPushNotificationConfig",
        json!({"taskId": id, "id": config_id}),
        Some("1.0"),
        None,
    )
    .await;
    assert_eq!(got["result"]["token"], "tok-123");
    let deleted = rpc(
        &base,
        "DeleteTaskPushNotificationConfig",
        json!({"taskId": id, "id": config_id}),
        Some("1.0"),
        None,
    )
    .await;
    assert_eq!(deleted["result"], json!({}));
    let listed = rpc(
        &base,
        "ListTaskPushNotificationConfigs",
        json!({"taskId": id}),
        Some("1.0"),
        None,
    )
    .await;
    assert_eq!(listed["result"]["configs"], json!([]));
    server.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhooks_on_forbidden_addresses_are_refused_before_anything_is_stored() {
    let home = home("");
    let daemon = daemon(&home);
    let base = daemon.base.clone();
    for url in [
        "http://127.0.0.1:9/hook",
        "http://169.254.169.254/latest/meta-data",
    ] {
        let refused = rpc(
            &base,
            "SendMessage",
            json!({"message": user_message("hi"), "configuration": {"taskPushNotificationConfig": {"url": url}}}),
            Some("1.0"),
            None,
        )
        .await;
        assert_eq!(refused["error"]["code"], -32602, "{refused:#}");
        let message = refused["error"]["message"].as_str().unwrap();
        assert!(message.contains(url), "{message}");
        if url.contains("127.0.0.1") {
            // The setting that lifts it is the webhooks' own, not a server entry's.
            assert!(
                message.ends_with(
                    "is a loopback address; set push_allow_private_network = true in the config's [a2a] section to allow it"
                ),
                "{message}"
            );
        }
    }
    let listed = rpc(&base, "ListTasks", json!({}), Some("1.0"), None).await;
    assert_eq!(listed["result"]["totalSize"], 0, "no task was created");
    // 0.3 clients set configs with their own method and shape.
    let task = rpc(&base, "message/send", json!({"message": {"kind": "message", "messageId": "m", "role": "user", "parts": [{"kind": "text", "text": "x"}]}}), None, None).await;
    let id = task["result"]["id"].as_str().unwrap();
    let set = rpc(
        &base,
        "tasks/pushNotificationConfig/set",
        json!({"taskId": id, "pushNotificationConfig": {"url": "https://hooks.example.com/a2a", "token": "t"}}),
        None,
        None,
    )
    .await;
    assert_eq!(set["result"]["taskId"], id, "{set:#}");
    assert_eq!(
        set["result"]["pushNotificationConfig"]["url"],
        "https://hooks.example.com/a2a"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_named_by_a_loopback_host_is_refused_at_delivery_with_the_reason_at_warn() {
    // A host name passes registration (it may resolve anywhere later); it is checked at delivery.
    let (url, hook, server) = webhook(0).await;
    let url = url.replace("127.0.0.1", "localhost");
    let home = home("");
    let mut daemon = daemon(&home);
    let base = daemon.base.clone();
    let done = rpc(
        &base,
        "SendMessage",
        json!({"message": user_message("hi"), "configuration": {"taskPushNotificationConfig": {"url": url}}}),
        Some("1.0"),
        None,
    )
    .await;
    assert_eq!(
        done["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{done:#}"
    );
    let line = daemon.wait_for_line_containing("push notification");
    assert!(line.contains(" WARN "), "{line}");
    assert!(
        line.contains(&format!(
            "push notification not sent: refused {url}: localhost resolves to "
        )),
        "{line}"
    );
    assert!(
        line.contains("which is a loopback address; set push_allow_private_network = true in the config's [a2a] section to allow it"),
        "{line}"
    );
    assert!(!line.contains("on this server entry"), "{line}");
    assert!(hook.received.lock().unwrap().is_empty());
    server.abort();
}
