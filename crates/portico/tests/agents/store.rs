//! What the embedded store keeps across a daemon restart: conversations, agent memory, the audit log.

use serde_json::{Value, json};

use crate::client::*;

const KEEPER: &str = r#"
[server]
listen = "127.0.0.1:0"

[[agents]]
name = "keeper"
tools = ["memory_*"]
[agents.model]
provider = "scripted"
rules = [
  { when = { text = "^remember" }, steps = [
      { call_tool = { name = "memory_store", arguments = { key = "colour", value = "teal" } } },
      { reply = "stored" } ] },
  { when = { text = "^recall" }, steps = [
      { call_tool = { name = "memory_recall", arguments = { query = "col" } } },
      { reply = "recalled {{last_tool_result}}" } ] },
]
"#;

fn http() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().build().unwrap()
}

async fn get(daemon: &Daemon, path: &str) -> Value {
    let response = http()
        .get(format!("{}{path}", daemon.base))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200, "GET {path}");
    response.json().await.unwrap()
}

async fn send(daemon: &Daemon, body: Value) -> Value {
    let response = http()
        .post(format!("{}/api/agents/keeper/message", daemon.base))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    response.json().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conversations_memory_and_audit_survive_a_daemon_restart() {
    let home = Home::new(KEEPER);
    let mut first = tokio::task::block_in_place(|| Daemon::start(&home));
    let agents = get(&first, "/api/agents").await;
    assert_eq!(agents["agents"][0]["name"], "keeper");
    assert_eq!(agents["agents"][0]["tool"], "portico_agent_keeper");
    let reply = send(&first, json!({"message": "remember my colour"})).await;
    assert_eq!(reply["reply"], "stored");
    let conversation = reply["conversation_id"].as_str().unwrap().to_string();
    let usage_before = reply["conversation_usage"]["input_tokens"]
        .as_u64()
        .unwrap();
    assert!(usage_before > 0);
    assert!(first.stop().success());
    assert!(home.dir.path().join("portico.db").exists());

    let second = tokio::task::block_in_place(|| Daemon::start(&home));
    let stored = get(&second, &format!("/api/conversations/{conversation}")).await;
    let roles: Vec<&str> = stored["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "assistant", "tool", "assistant"]);
    assert_eq!(
        stored["messages"][0]["content"]["text"],
        "remember my colour"
    );
    assert_eq!(
        stored["messages"][1]["content"]["tool_calls"][0]["name"],
        "memory_store"
    );

    // The conversation continues where it stopped, and the memory written before is still there.
    let reply = send(
        &second,
        json!({"message": "recall it", "conversation_id": conversation}),
    )
    .await;
    assert_eq!(reply["conversation_id"], conversation.as_str());
    let text = reply["reply"].as_str().unwrap();
    assert!(text.starts_with("recalled "), "{text}");
    assert!(text.contains("\"value\":\"teal\""), "{text}");
    assert!(
        reply["conversation_usage"]["input_tokens"]
            .as_u64()
            .unwrap()
            > usage_before
    );

    let audit = get(&second, "/api/audit?tool=memory_store").await;
    let records = audit["records"].as_array().unwrap();
    assert_eq!(records.len(), 1, "{audit:#}");
    assert_eq!(records[0]["caller"], "agent:keeper");
    assert_eq!(records[0]["outcome"], "ok");
    assert_eq!(records[0]["arguments_digest"].as_str().unwrap().len(), 32);
    let calls = get(&second, "/api/audit?tool=portico_agent_keeper").await;
    let callers: Vec<&str> = calls["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["caller"].as_str().unwrap())
        .collect();
    assert_eq!(callers, ["client:api", "client:api"]);

    // A conversation of another agent, or one that does not exist, is refused clearly.
    let response = http()
        .post(format!("{}/api/agents/keeper/message", second.base))
        .json(&json!({"message": "recall", "conversation_id": "c_nope"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 502);
    let error: Value = response.json().await.unwrap();
    assert!(
        error["error"]
            .as_str()
            .unwrap()
            .contains("conversation `c_nope` does not exist"),
        "{error}"
    );
}

#[test]
fn portico_agents_lists_and_portico_chat_talks_in_the_terminal() {
    use std::io::Write;
    let home = Home::new(KEEPER);
    let listed = home.command(&["agents", "--json"]).output().unwrap();
    assert!(listed.status.success());
    let agents: Value = serde_json::from_slice(&listed.stdout).unwrap();
    assert_eq!(agents[0]["name"], "keeper");
    assert_eq!(agents[0]["tool"], "portico_agent_keeper");
    assert_eq!(agents[0]["tools"], json!(["memory_*"]));

    let mut chat = home
        .command(&["chat", "keeper"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    chat.stdin
        .take()
        .unwrap()
        .write_all(b"remember my colour\n\nrecall it\n")
        .unwrap();
    let output = chat.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{stdout}");
    assert_eq!(lines[0], "stored");
    assert!(
        lines[1].starts_with("recalled ") && lines[1].contains("teal"),
        "{stdout}"
    );
    // One conversation for the whole session, announced once; tool calls are shown on stderr.
    assert_eq!(
        stderr.matches("portico: conversation c").count(),
        1,
        "{stderr}"
    );
    assert!(stderr.contains("[calling memory_store]"), "{stderr}");
    assert!(stderr.contains("[calling memory_recall]"), "{stderr}");

    let unknown = home
        .command(&["chat", "nobody"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(!unknown.status.success());
    assert!(
        String::from_utf8_lossy(&unknown.stderr)
            .contains("no agent named `nobody`; configured agents: keeper")
    );
}
