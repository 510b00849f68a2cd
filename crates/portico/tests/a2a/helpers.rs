//! A small A2A client over reqwest, and the scripted agent the tests talk to.

#![allow(dead_code)]

use serde_json::{Value, json};

use crate::client::*;

/// A scripted agent whose behaviour each test can trigger by the message's first word.
pub const ECHO_AGENT: &str = r#"
[[agents]]
name = "echo"
description = "Echoes what it is told"
tools = ["system_time"]
[agents.model]
provider = "scripted"
rules = [
  { when = { text = "^slow" }, steps = [
      { status = { state = "working", message = "thinking" } },
      { wait_ms = 300 },
      { reply = "slow done: {{message}}" } ] },
  { when = { text = "^ask" }, steps = [
      { status = { state = "input-required", message = "which colour?" } },
      { reply = "which colour?" } ] },
  { when = { text = "^(red|blue)$" }, steps = [ { reply = "you chose {{message}}" } ] },
  { when = { text = "^report" }, steps = [
      { artifact = { name = "report", chunks = ["part 1", "part 2"] } },
      { reply = "report ready" } ] },
  { when = { text = "^fail" }, steps = [ { fail = "it broke" } ] },
  { when = { text = "^linger" }, steps = [
      { status = { state = "working", message = "lingering" } },
      { wait_ms = 1500 },
      { reply = "lingered" } ] },
  { when = { text = "^login" }, steps = [
      { status = { state = "auth-required", message = "sign in first" } },
      { reply = "sign in first" } ] },
  { when = { text = "^token " }, steps = [ { reply = "signed in" } ] },
  { when = { text = "^forbidden" }, steps = [
      { status = { state = "rejected", message = "not doing that" } },
      { reply = "not doing that" } ] },
  { when = { text = "^hang" }, steps = [ { wait_ms = 600000 }, { reply = "never" } ] },
  { when = {}, steps = [ { reply = "echo: {{message}}" } ] },
]
"#;

pub fn home(extra: &str) -> Home {
    Home::new(&format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n{extra}\n{ECHO_AGENT}"
    ))
}

pub fn http() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().build().unwrap()
}

pub fn daemon(home: &Home) -> Daemon {
    tokio::task::block_in_place(|| Daemon::start(home))
}

pub fn user_message(text: &str) -> Value {
    json!({"messageId": format!("m-{}", rand_id()), "role": "ROLE_USER", "parts": [{"text": text}]})
}

pub fn rand_id() -> String {
    format!(
        "{:x}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    )
}

/// One JSON-RPC call; `version` becomes the A2A-Version header when given.
pub async fn rpc(
    base: &str,
    method: &str,
    params: Value,
    version: Option<&str>,
    auth: Option<&str>,
) -> Value {
    let mut request = http()
        .post(format!("{base}/a2a/echo"))
        .json(&json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params}));
    if let Some(version) = version {
        request = request.header("A2A-Version", version);
    }
    if let Some(auth) = auth {
        request = request.header("Authorization", auth);
    }
    let response = request.send().await.unwrap();
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["jsonrpc"], "2.0", "{body}");
    assert_eq!(body["id"], 7, "{body}");
    body
}

/// The `data:` payloads of an SSE body, parsed.
pub fn sse_events(body: &str) -> Vec<Value> {
    body.lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .map(|data| serde_json::from_str(data.trim()).unwrap())
        .collect()
}

pub fn text_of_parts(parts: &Value) -> String {
    parts
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["text"].as_str())
        .collect::<Vec<_>>()
        .join("")
}
