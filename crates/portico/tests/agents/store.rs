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
    assert_eq!(response.status(), 404);
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

fn mode(path: &std::path::Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o777
}

/// The digest the audit log shows for the keeper's `memory_store` call, made on a fresh daemon.
async fn memory_store_digests(daemon: &Daemon) -> Vec<String> {
    let reply = send(daemon, json!({"message": "remember my colour"})).await;
    assert_eq!(reply["reply"], "stored");
    let audit = get(daemon, "/api/audit?tool=memory_store").await;
    audit["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["arguments_digest"].as_str().unwrap().to_string())
        .collect()
}

/// The store held conversations, memories (a stored secret sat in the WAL in clear) and push
/// credentials in a 0755 directory, as 0644 files; and the audit log's argument digests were plain
/// SHA-256, so a 4-digit PIN came back from `/api/audit` in 10,000 guesses.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_store_is_owner_only_and_audit_digests_are_keyed_per_install() {
    let home = Home::new(KEEPER);
    let data = home.dir.path().join("data");
    let data_env = data.to_str().unwrap().to_string();
    let env = [("PORTICO_HOME", data_env.as_str())];
    let first = tokio::task::block_in_place(|| Daemon::start_with_env(&home, &env));
    let digests = memory_store_digests(&first).await;
    // While the daemon runs the WAL and shared-memory files exist: every file is owner-only.
    assert_eq!(mode(&data), 0o700, "the data dir");
    for file in [
        "portico.db",
        "portico.db-wal",
        "portico.db-shm",
        "audit.key",
        "daemon.json",
    ] {
        assert_eq!(mode(&data.join(file)), 0o600, "{file}");
    }
    let mut first = first;
    assert!(first.stop().success());

    // Keyed: not the plain hash of the arguments a guesser would compute...
    assert_eq!(digests.len(), 1);
    let plain = portico_pipeline::arguments_digest(&json!({"key": "colour", "value": "teal"}));
    assert_ne!(digests[0], plain);
    // ...the same after a restart, so equal calls still match...
    let second = tokio::task::block_in_place(|| Daemon::start_with_env(&home, &env));
    let after_restart = memory_store_digests(&second).await;
    assert_eq!(after_restart, [digests[0].clone(), digests[0].clone()]);
    drop(second);

    // ...and another install's differ. Its data dir was made open by hand: that is reported.
    let other = Home::new(KEEPER);
    let other_data = other.dir.path().join("data");
    std::fs::create_dir(&other_data).unwrap();
    std::fs::set_permissions(
        &other_data,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let other_env = other_data.to_str().unwrap().to_string();
    let mut third = tokio::task::block_in_place(|| {
        Daemon::start_with_env(&other, &[("PORTICO_HOME", other_env.as_str())])
    });
    let line = tokio::task::block_in_place(|| {
        third.wait_for_line_containing("is open to other users (mode 755)")
    });
    assert!(
        line.contains(&format!("chmod 700 {}", other_data.display())),
        "{line}"
    );
    let elsewhere = memory_store_digests(&third).await;
    assert_eq!(elsewhere.len(), 1);
    assert_ne!(elsewhere[0], digests[0]);
    assert_eq!(mode(&other_data.join("portico.db")), 0o600);
}
