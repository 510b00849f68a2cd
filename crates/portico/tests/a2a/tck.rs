//! What the A2A TCK found, kept fixed: scripted rules keyed on the A2A `messageId`, answers as a plain
//! Message, artifacts of every part kind, a card strictly in one version's schema, `POST :subscribe`.
//! Most run on the TCK harness's own config (`tests/a2a-tck/portico.toml`, see `scripts/a2a-tck`).

use std::process::{Command, Stdio};

use serde_json::{Value, json};

use crate::client::*;
use crate::helpers::*;
use crate::support::*;

fn tck_home() -> Home {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/a2a-tck/portico.toml"
    );
    Home::new(&std::fs::read_to_string(path).unwrap())
}

fn kit_message(message_id: &str, text: &str) -> Value {
    json!({"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": text}]})
}

/// One JSON-RPC call to the harness's `tck` agent.
async fn kit_rpc(base: &str, method: &str, params: Value, version: &str) -> Value {
    let response = http()
        .post(format!("{base}/a2a/tck"))
        .header("A2A-Version", version)
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    response.json().await.unwrap()
}

async fn send_1_0(base: &str, message_id: &str, text: &str) -> Value {
    let body = kit_rpc(
        base,
        "SendMessage",
        json!({"message": kit_message(message_id, text)}),
        "1.0",
    )
    .await;
    assert!(body["error"].is_null(), "{body}");
    body["result"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scripted_rule_keyed_on_the_message_id_prefix_answers_over_a2a() {
    let home = tck_home();
    let daemon = daemon(&home);

    let keyed = send_1_0(&daemon.base, "tck-complete-task-7f3a", "anything").await;
    assert_eq!(keyed["task"]["status"]["state"], "TASK_STATE_COMPLETED");
    assert_eq!(
        keyed["task"]["status"]["message"]["parts"],
        json!([{"text": "Hello from TCK"}])
    );
    let asked = send_1_0(&daemon.base, "tck-input-required-7f3a", "anything").await;
    assert_eq!(
        asked["task"]["status"]["state"],
        "TASK_STATE_INPUT_REQUIRED"
    );
    // The follow-up's own messageId picks the rule of the continued task's next turn.
    let continued = kit_rpc(
        &daemon.base,
        "SendMessage",
        json!({"message": {"messageId": "tck-complete-task-7f3b", "role": "ROLE_USER",
            "taskId": asked["task"]["id"], "contextId": asked["task"]["contextId"],
            "parts": [{"text": "go on"}]}}),
        "1.0",
    )
    .await;
    assert_eq!(
        continued["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{continued}"
    );
    assert_eq!(
        continued["result"]["task"]["status"]["message"]["parts"],
        json!([{"text": "Hello from TCK"}])
    );
    let other = send_1_0(&daemon.base, "m-unkeyed", "plain text").await;
    assert_eq!(
        other["task"]["status"]["message"]["parts"],
        json!([{"text": "echo: plain text"}])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_answers_a_blocking_send_with_a_plain_message_on_every_binding() {
    let home = tck_home();
    let daemon = daemon(&home);
    let base = daemon.base.clone();

    let answer = send_1_0(&base, "tck-message-response-1", "hi").await;
    let message = &answer["message"];
    assert_eq!(
        answer.as_object().unwrap().keys().collect::<Vec<_>>(),
        ["message"]
    );
    assert_eq!(message["role"], "ROLE_AGENT");
    assert_eq!(
        message["parts"],
        json!([{"text": "Direct message response"}])
    );
    assert!(
        message["messageId"]
            .as_str()
            .is_some_and(|id| !id.is_empty())
    );
    assert!(
        message["contextId"]
            .as_str()
            .is_some_and(|id| !id.is_empty())
    );
    assert!(message.get("taskId").is_none(), "{message}");

    let old = kit_rpc(
        &base,
        "message/send",
        json!({"message": {"kind": "message", "messageId": "tck-message-response-2",
            "role": "user", "parts": [{"kind": "text", "text": "hi"}]}}),
        "0.3",
    )
    .await;
    assert_eq!(old["result"]["kind"], "message", "{old}");
    assert_eq!(old["result"]["role"], "agent");
    assert_eq!(
        old["result"]["parts"],
        json!([{"kind": "text", "text": "Direct message response"}])
    );

    let rest: Value = http()
        .post(format!("{base}/a2a/tck/message:send"))
        .header("A2A-Version", "1.0")
        .json(&json!({"message": kit_message("tck-message-response-3", "hi")}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        rest["message"]["parts"],
        json!([{"text": "Direct message response"}]),
        "{rest}"
    );
    assert!(rest.get("task").is_none(), "{rest}");

    // A message answer makes no task.
    let listed = kit_rpc(&base, "ListTasks", json!({}), "1.0").await;
    assert_eq!(listed["result"]["tasks"], json!([]), "{listed}");

    // A send answered at once already told of its task: that task completes with the message.
    let at_once = kit_rpc(
        &base,
        "SendMessage",
        json!({"message": kit_message("tck-message-response-4", "hi"),
            "configuration": {"returnImmediately": true}}),
        "1.0",
    )
    .await;
    let id = at_once["result"]["task"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let mut state = Value::Null;
    for _ in 0..100 {
        let got = kit_rpc(&base, "GetTask", json!({"id": id}), "1.0").await;
        state = got["result"]["status"].clone();
        if state["state"] == "TASK_STATE_COMPLETED" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(state["state"], "TASK_STATE_COMPLETED", "{state}");
    assert_eq!(
        state["message"]["parts"],
        json!([{"text": "Direct message response"}])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn artifacts_carry_every_part_kind_in_both_versions() {
    let home = tck_home();
    let daemon = daemon(&home);
    let base = daemon.base.clone();

    let artifact = |result: &Value, name: &str| -> Value {
        result["task"]["artifacts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["name"] == name)
            .unwrap_or_else(|| panic!("no artifact {name} in {result}"))["parts"]
            .clone()
    };
    let file = send_1_0(&base, "tck-artifact-file-1", "x").await;
    assert_eq!(
        artifact(&file, "file-artifact"),
        // base64 of "Generated file content"
        json!([{"raw": "R2VuZXJhdGVkIGZpbGUgY29udGVudA==", "filename": "output.txt",
            "mediaType": "text/plain"}])
    );
    let url = send_1_0(&base, "tck-artifact-file-url-1", "x").await;
    assert_eq!(
        artifact(&url, "file-url-artifact"),
        json!([{"url": "https://example.com/output.txt", "filename": "output.txt",
            "mediaType": "text/plain"}])
    );
    let data = send_1_0(&base, "tck-artifact-data-1", "x").await;
    assert_eq!(
        artifact(&data, "data-artifact"),
        json!([{"data": {"key": "value", "count": 42}}])
    );
    let text = send_1_0(&base, "tck-artifact-text-1", "x").await;
    assert_eq!(
        artifact(&text, "text-artifact"),
        json!([{"text": "Generated text content"}])
    );

    let old = kit_rpc(
        &base,
        "message/send",
        json!({"message": {"kind": "message", "messageId": "tck-artifact-file-2",
            "role": "user", "parts": [{"kind": "text", "text": "x"}]}}),
        "0.3",
    )
    .await;
    let parts = old["result"]["artifacts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == "file-artifact")
        .unwrap()["parts"]
        .clone();
    assert_eq!(
        parts,
        json!([{"kind": "file", "file": {"bytes": "R2VuZXJhdGVkIGZpbGUgY29udGVudA==",
            "mimeType": "text/plain", "name": "output.txt"}}])
    );
}

/// An agent scripted by message text, for the SDK, whose messages carry random ids.
const PARTS_AGENT: &str = r#"
[server]
listen = "127.0.0.1:0"
[[agents]]
name = "parts"
tools = []
[agents.model]
provider = "scripted"
rules = [
  { when = { text = "^parts" }, steps = [
      { artifact = { name = "all", chunks = ["some text"], parts = [
          { file = { text = "hello", name = "hello.txt", media_type = "text/plain" } },
          { file_url = { url = "https://example.com/report.pdf", name = "report.pdf", media_type = "application/pdf" } },
          { data = { key = "value", count = 42 } } ] } },
      { reply = "done" } ] },
  { when = { text = "^direct" }, steps = [ { reply_message = "straight back" } ] },
]
"#;

fn python_client(base: &str, transport: &str, actions: &[&str]) -> Value {
    let output = Command::new(venv_python())
        .arg(python_peer("a2a_client.py"))
        .args(["--card-url", base, "--transport", transport])
        .args(actions)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "client failed: {stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_part_kind_and_a_message_answer_reach_the_python_sdk() {
    let home = Home::new(PARTS_AGENT);
    let daemon = daemon(&home);
    for transport in ["jsonrpc", "rest"] {
        let report = tokio::task::block_in_place(|| {
            python_client(
                &daemon.base,
                transport,
                &["--send", "parts please", "--send", "direct please"],
            )
        });
        let sent = &report["actions"][0];
        assert!(sent["error"].is_null(), "{report:#}");
        assert_eq!(sent["state"], "TASK_STATE_COMPLETED");
        let all: Vec<&Value> = sent["artifact_parts"].as_array().unwrap().iter().collect();
        assert_eq!(
            all[0],
            &json!([
                {"text": "some text"},
                {"raw": "aGVsbG8=", "filename": "hello.txt", "mediaType": "text/plain"},
                {"url": "https://example.com/report.pdf", "filename": "report.pdf",
                    "mediaType": "application/pdf"},
                {"data": {"key": "value", "count": 42.0}},
            ]),
            "{transport}: {report:#}"
        );
        let direct = &report["actions"][1];
        assert!(direct["error"].is_null(), "{report:#}");
        assert_eq!(
            direct["response_kind"], "message",
            "{transport}: {report:#}"
        );
        assert_eq!(direct["message_text"], "straight back");
        assert_eq!(direct["task_id"], Value::Null);
    }
}

/// Every field the 1.0 `AgentCard` has; its JSON schema allows no others.
const CARD_1_0_FIELDS: &[&str] = &[
    "name",
    "description",
    "supportedInterfaces",
    "provider",
    "version",
    "documentationUrl",
    "capabilities",
    "securitySchemes",
    "securityRequirements",
    "defaultInputModes",
    "defaultOutputModes",
    "skills",
    "signatures",
    "iconUrl",
];

async fn card(url: &str, version: Option<&str>) -> Value {
    let mut request = http().get(url);
    if let Some(version) = version {
        request = request.header("A2A-Version", version);
    }
    let response = request.send().await.unwrap();
    assert_eq!(response.status(), 200, "{url}");
    response.json().await.unwrap()
}

/// The TCK's CARD-CACHE checks: a card says how long it may be kept (`Cache-Control` with a
/// `max-age`) and when it last changed (`Last-Modified`), and a client revalidating with either the
/// ETag or the date gets a 304.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cards_say_how_long_to_keep_them_and_when_they_changed_and_revalidate_with_304() {
    let home = tck_home();
    let daemon = daemon(&home);
    let base = daemon.base.clone();
    for url in [
        format!("{base}/.well-known/agent-card.json"),
        format!("{base}/a2a/tck/.well-known/agent-card.json"),
        format!("{base}/.well-known/agent.json"),
    ] {
        let before = std::time::SystemTime::now();
        let first = http().get(&url).send().await.unwrap();
        assert_eq!(first.status(), 200, "{url}");
        let header = |response: &reqwest::Response, name: &str| {
            response
                .headers()
                .get(name)
                .unwrap_or_else(|| panic!("{url}: no {name} in {:?}", response.headers()))
                .to_str()
                .unwrap()
                .to_string()
        };
        assert_eq!(header(&first, "cache-control"), "private, max-age=60");
        let etag = header(&first, "etag");
        let last_modified = header(&first, "last-modified");
        let date = httpdate::parse_http_date(&last_modified)
            .unwrap_or_else(|e| panic!("{url}: Last-Modified {last_modified:?}: {e}"));
        assert!(
            date <= std::time::SystemTime::now(),
            "{url}: {last_modified} is in the future"
        );
        assert!(
            date + std::time::Duration::from_secs(120) >= before,
            "{url}: {last_modified} is long before the daemon started"
        );
        // The same card keeps its date.
        let again = http().get(&url).send().await.unwrap();
        assert_eq!(header(&again, "last-modified"), last_modified, "{url}");

        let by_tag = http()
            .get(&url)
            .header("If-None-Match", &etag)
            .send()
            .await
            .unwrap();
        assert_eq!(by_tag.status(), 304, "{url}");
        assert_eq!(header(&by_tag, "etag"), etag);
        assert_eq!(header(&by_tag, "last-modified"), last_modified);
        assert_eq!(header(&by_tag, "cache-control"), "private, max-age=60");
        assert!(by_tag.bytes().await.unwrap().is_empty());

        let by_date = http()
            .get(&url)
            .header("If-Modified-Since", &last_modified)
            .send()
            .await
            .unwrap();
        assert_eq!(by_date.status(), 304, "{url}");
        let older = httpdate::fmt_http_date(date - std::time::Duration::from_secs(1));
        let stale = http()
            .get(&url)
            .header("If-Modified-Since", &older)
            .send()
            .await
            .unwrap();
        assert_eq!(stale.status(), 200, "{url}");
        // An ETag that does not match wins over a date that would.
        let other_tag = http()
            .get(&url)
            .header("If-None-Match", "\"something-else\"")
            .header("If-Modified-Since", &last_modified)
            .send()
            .await
            .unwrap();
        assert_eq!(other_tag.status(), 200, "{url}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_card_without_a_version_is_strictly_the_1_0_card_and_0_3_clients_get_theirs() {
    let home = tck_home();
    let daemon = daemon(&home);
    let base = daemon.base.clone();
    let url = format!("{base}/a2a/tck");

    let unversioned = card(&format!("{base}/.well-known/agent-card.json"), None).await;
    for key in unversioned.as_object().unwrap().keys() {
        assert!(
            CARD_1_0_FIELDS.contains(&key.as_str()),
            "`{key}` is not a 1.0 card field: {unversioned:#}"
        );
    }
    let capabilities: Vec<&String> = unversioned["capabilities"]
        .as_object()
        .unwrap()
        .keys()
        .collect();
    assert_eq!(
        capabilities,
        ["streaming", "pushNotifications", "extendedAgentCard"]
    );
    let v1 = card(&format!("{base}/.well-known/agent-card.json"), Some("1.0")).await;
    let response = http()
        .get(format!("{base}/.well-known/agent-card.json"))
        .send()
        .await
        .unwrap();
    assert_eq!(
        response.headers()["cache-control"].to_str().unwrap(),
        "private, max-age=60"
    );
    assert_eq!(unversioned, v1);
    let per_agent = card(&format!("{url}/.well-known/agent-card.json"), None).await;
    assert_eq!(per_agent, v1);

    // The 0.3 form, where a 0.3 client asks for it: by header, by query, at the legacy path.
    let by_header = card(&format!("{base}/.well-known/agent-card.json"), Some("0.3")).await;
    let by_query = card(
        &format!("{base}/.well-known/agent-card.json?version=0.3"),
        None,
    )
    .await;
    let legacy = card(&format!("{base}/.well-known/agent.json"), None).await;
    for old in [&by_header, &by_query, &legacy] {
        assert_eq!(old, &by_header);
        assert_eq!(old["url"], url);
        assert_eq!(old["protocolVersion"], "0.3.0");
        assert_eq!(old["preferredTransport"], "JSONRPC");
        assert!(old.get("supportedInterfaces").is_none(), "{old:#}");
        assert!(
            old["capabilities"].get("extendedAgentCard").is_none(),
            "{old:#}"
        );
    }

    // And a 0.3 client speaking to the card's URL without a version header is served as 0.3.
    let response: Value = http()
        .post(&url)
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "message/send",
            "params": {"message": {"kind": "message", "messageId": "tck-complete-task-9",
                "role": "user", "parts": [{"kind": "text", "text": "hi"}]}}}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(response["result"]["kind"], "task", "{response}");
    assert_eq!(response["result"]["status"]["state"], "completed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deployment_of_0_3_clients_serves_the_0_3_card_without_a_version() {
    let home = Home::new(&format!("[a2a]\nunversioned_card = \"0.3\"\n{PARTS_AGENT}"));
    let daemon = daemon(&home);
    let base = daemon.base.clone();

    let unversioned = card(&format!("{base}/.well-known/agent-card.json"), None).await;
    assert_eq!(unversioned["url"], format!("{base}/a2a/parts"));
    assert_eq!(unversioned["protocolVersion"], "0.3.0");
    assert!(unversioned.get("supportedInterfaces").is_none());
    let v1 = card(&format!("{base}/.well-known/agent-card.json"), Some("1.0")).await;
    assert!(v1.get("url").is_none(), "{v1:#}");
    assert_eq!(v1["supportedInterfaces"][0]["protocolVersion"], "1.0");
    let by_query = card(
        &format!("{base}/.well-known/agent-card.json?version=1.0"),
        None,
    )
    .await;
    assert_eq!(by_query, v1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscribe_over_http_json_answers_post_as_get() {
    let home = tck_home();
    let daemon = daemon(&home);
    let base = daemon.base.clone();
    let asked = send_1_0(&base, "tck-input-required-s", "x").await;
    let id = asked["task"]["id"].as_str().unwrap();

    for method in [reqwest::Method::POST, reqwest::Method::GET] {
        let response = http()
            .request(
                method.clone(),
                format!("{base}/a2a/tck/tasks/{id}:subscribe"),
            )
            .header("A2A-Version", "1.0")
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{method}");
        assert_eq!(
            response.headers()["content-type"].to_str().unwrap(),
            "text/event-stream",
            "{method}"
        );
        // The stream opens with the task (and stays open for its next run's events).
        let mut response = response;
        let mut body = String::new();
        while !body.contains("\n\n") {
            let chunk = response
                .chunk()
                .await
                .unwrap()
                .expect("the stream ended early");
            body.push_str(&String::from_utf8_lossy(&chunk));
        }
        let events = sse_events(&body);
        assert_eq!(events.len(), 1, "{method}: {events:?}");
        assert_eq!(events[0]["task"]["id"], id);
        assert_eq!(
            events[0]["task"]["status"]["state"],
            "TASK_STATE_INPUT_REQUIRED"
        );
    }
}
