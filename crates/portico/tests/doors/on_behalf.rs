//! An agent's held call is bound to the client whose call started the run (`onBehalfOf`), against
//! the real daemon with two `[[server.clients]]` tokens: the same call of one scripted agent for
//! client a and client b are two requests; approving a's runs a's retry only; a person declining at
//! client a (through elicitation, over `/mcp` with the official Python SDK) is recorded as
//! `client:a` and does not stand against b's call; a, scoped, sees its agent's request and not b's.
//! And a conversation is read and continued only by the client that started it.

use serde_json::{Value, json};

use crate::client::*;

const OWNER: &str = "owner-secret-token";
const A: &str = "a-secret-token";
const B: &str = "b-secret-token";

fn config() -> String {
    format!(
        r#"[server]
listen = "127.0.0.1:0"
token = "{OWNER}"

[[server.clients]]
name = "a"
token = "{A}"
tools = ["portico_agent_keeper"]

[[server.clients]]
name = "b"
token = "{B}"

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
  {{ when = {{}}, steps = [
      {{ call_tool = {{ name = "memory_store", arguments = {{ key = "colour", value = "teal" }} }} }},
      {{ reply = "keeper: {{{{last_tool_result}}}}" }} ] }},
]
"#
    )
}

fn http() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().build().unwrap()
}

async fn api(
    base: &str,
    token: &str,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let url = format!("{base}{path}");
    let request = match method {
        "GET" => http().get(url),
        _ => http().post(url),
    };
    let request = request.header("authorization", format!("Bearer {token}"));
    let request = match body {
        Some(body) => request.json(&body),
        None => request,
    };
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap())
}

/// One run of the agent as `token`'s client: its reply.
async fn run_keeper(base: &str, token: &str) -> String {
    let (status, reply) = api(
        base,
        token,
        "POST",
        "/api/agents/keeper/message",
        Some(json!({"message": "remember teal"})),
    )
    .await;
    assert_eq!(status, 200, "{reply}");
    reply["reply"].as_str().unwrap().to_string()
}

/// How many times `memory_store` really ran: its audit records with outcome `ok`.
async fn runs(base: &str) -> usize {
    let (status, body) = api(
        base,
        OWNER,
        "GET",
        "/api/audit?tool=memory_store&limit=1000",
        None,
    )
    .await;
    assert_eq!(status, 200);
    body["records"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["outcome"] == "ok")
        .count()
}

/// The requests as the owner lists them, `(id, status, onBehalfOf)`, oldest first.
async fn requests(base: &str) -> Vec<(String, String, String)> {
    let (status, listed) = api(base, OWNER, "GET", "/api/approvals?status=all", None).await;
    assert_eq!(status, 200, "{listed}");
    let mut rows: Vec<(String, String, String)> = listed["approvals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|view| {
            assert_eq!(view["principal"], "agent:keeper", "{view}");
            (
                view["id"].as_str().unwrap().to_string(),
                view["status"].as_str().unwrap().to_string(),
                view["onBehalfOf"].as_str().unwrap_or("(none)").to_string(),
            )
        })
        .collect();
    rows.reverse();
    rows
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agents_held_call_is_bound_to_the_client_that_started_the_run() {
    let home = Home::new(&config());
    let mut daemon = Daemon::start(&home);
    daemon.wait_for_line("portico: ready");
    let base = daemon.base.clone();

    let held_a = run_keeper(&base, A).await;
    assert!(
        held_a.contains("requires approval and was not run"),
        "{held_a}"
    );
    run_keeper(&base, B).await;
    let listed = requests(&base).await;
    assert_eq!(listed.len(), 2, "{listed:#?}");
    let (id_a, id_b) = (listed[0].0.clone(), listed[1].0.clone());
    assert_ne!(id_a, id_b);
    assert_eq!(
        listed,
        [
            (id_a.clone(), "pending".into(), "client:a".into()),
            (id_b.clone(), "pending".into(), "client:b".into()),
        ]
    );

    // a's scope limits it to its own requests, which include its agent run's, and not b's.
    let (status, seen_by_a) = api(&base, A, "GET", "/api/approvals", None).await;
    assert_eq!(status, 200, "{seen_by_a}");
    let seen: Vec<&str> = seen_by_a["approvals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|view| view["id"].as_str().unwrap())
        .collect();
    assert_eq!(seen, [id_a.as_str()]);
    let (status, _) = api(&base, A, "GET", &format!("/api/approvals/{id_b}"), None).await;
    assert_eq!(status, 404);

    let (status, approved) = api(
        &base,
        OWNER,
        "POST",
        &format!("/api/approvals/{id_a}/approve"),
        None,
    )
    .await;
    assert_eq!(status, 200, "{approved}");
    assert_eq!(approved["onBehalfOf"], "client:a", "{approved}");
    // b's identical call neither uses a's grant nor makes a new request: it is held on its own.
    let held_b = run_keeper(&base, B).await;
    assert!(held_b.contains(&id_b), "{held_b}");
    assert_eq!(runs(&base).await, 0);
    assert_eq!(
        run_keeper(&base, A).await,
        r#"keeper: {"key":"colour","stored":true}"#
    );
    assert_eq!(runs(&base).await, 1);
    assert_eq!(
        requests(&base).await,
        [
            (id_a.clone(), "consumed".into(), "client:a".into()),
            (id_b.clone(), "pending".into(), "client:b".into()),
        ]
    );

    // A person at client a declines the next run's call through elicitation: recorded as
    // client:a (not agent:keeper), and b's call is still only held.
    let (result, asked) = eliciting_agent_call(&base, A, "decline").await;
    let asked = asked.as_array().unwrap();
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert!(
        asked[0]["message"].as_str().unwrap().starts_with(
            "Approve this call of `memory_store` by agent:keeper on behalf of client:a?"
        ),
        "{asked:?}"
    );
    assert_eq!(result["isError"], false, "{result}");
    let listed = requests(&base).await;
    assert_eq!(listed.len(), 3, "{listed:#?}");
    let id_declined = listed[2].0.clone();
    let (_, view) = api(
        &base,
        OWNER,
        "GET",
        &format!("/api/approvals/{id_declined}"),
        None,
    )
    .await;
    assert_eq!(
        (
            &view["status"],
            &view["onBehalfOf"],
            &view["decidedBy"],
            &view["decidedVia"]
        ),
        (
            &json!("denied"),
            &json!("client:a"),
            &json!("client:a"),
            &json!("elicitation")
        ),
        "{view}"
    );
    let held_b = run_keeper(&base, B).await;
    assert!(held_b.contains(&id_b), "{held_b}");
    assert_eq!(runs(&base).await, 1);
    assert!(daemon.stop().success());
}

/// `portico_agent_keeper` called over `/mcp` by an SDK client with `token` that declares
/// elicitation and gives `answer` to every question: the result, and the questions it was asked.
async fn eliciting_agent_call(base: &str, token: &str, answer: &str) -> (Value, Value) {
    let url = format!("{base}/mcp");
    let header = format!("Authorization: Bearer {token}");
    let answer = answer.to_string();
    let mut report = sdk_report_async(move |command| {
        command
            .args(["--era", "legacy", "--elicit", &answer, "--http", &url])
            .args(["--header", &header])
            .args(["--call", "portico_agent_keeper", "--args"])
            .arg(json!({"message": "remember teal"}).to_string());
    })
    .await;
    (
        report["calls"][0]["result"].take(),
        report["elicitations"].take(),
    )
}

/// A conversation is its creator's: another client reading it (`/api/conversations/{id}`) or
/// continuing it (`conversation_id`) finds no such conversation; its creator does both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversation_is_read_and_continued_only_by_the_client_that_started_it() {
    let home = Home::new(&config());
    let mut daemon = Daemon::start(&home);
    daemon.wait_for_line("portico: ready");
    let base = daemon.base.clone();
    let message = |conversation: &str| json!({"message": "again", "conversation_id": conversation});

    let (status, started) = api(
        &base,
        A,
        "POST",
        "/api/agents/keeper/message",
        Some(json!({"message": "remember teal"})),
    )
    .await;
    assert_eq!(status, 200, "{started}");
    let id = started["conversation_id"].as_str().unwrap().to_string();
    let path = format!("/api/conversations/{id}");

    let (status, body) = api(&base, B, "GET", &path, None).await;
    assert_eq!(
        (status, &body),
        (404, &json!({"error": "no such conversation"}))
    );
    let (status, body) = api(
        &base,
        B,
        "POST",
        "/api/agents/keeper/message",
        Some(message(&id)),
    )
    .await;
    // Refused as not found, in the same words as an id that does not exist: nothing tells b
    // that the conversation is there.
    let refusal = |id: &str| {
        format!(
            "agent `keeper`: conversation `{id}` does not exist, belongs to another agent or was \
             started by another client; omit conversation_id to start a new one"
        )
    };
    assert_eq!(
        (status, &body["error"]),
        (404, &json!(refusal(&id))),
        "{body}"
    );
    let (status, body) = api(
        &base,
        B,
        "POST",
        "/api/agents/keeper/message",
        Some(json!({"message": "again", "conversation_id": "c_nope", "stream": true})),
    )
    .await;
    assert_eq!(
        (status, &body["error"]),
        (404, &json!(refusal("c_nope"))),
        "{body}"
    );

    let (status, continued) = api(
        &base,
        A,
        "POST",
        "/api/agents/keeper/message",
        Some(message(&id)),
    )
    .await;
    assert_eq!(status, 200, "{continued}");
    assert_eq!(continued["conversation_id"], id.as_str());
    let (status, body) = api(&base, A, "GET", &path, None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["conversation"]["owner"], "client:a", "{body}");
    // Two user messages, each answered after one held tool call: b's attempt stored nothing.
    let roles: Vec<&str> = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles.iter().filter(|r| **r == "user").count(),
        2,
        "{roles:?}"
    );
    assert!(daemon.stop().success());
}
