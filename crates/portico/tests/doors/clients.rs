//! `[[server.clients]]` against the real daemon: two client tokens (laptop, scoped to two tools;
//! ci, unscoped) and `[server] token` (`client:default`) on every HTTP door: `/mcp`, legacy `/sse`,
//! `/api` and A2A. What each lists and may call, the exact refusal outside a scope, what the audit
//! log names, that a session or a task of one client is not another's, that a wrong token gets 401
//! everywhere, and that rate limits are per client.

use serde_json::{Value, json};

use crate::client::*;

const LAPTOP: &str = "laptop-secret-token";
const CI: &str = "ci-secret-token";
const DEFAULT: &str = "default-secret-token";

/// Two scripted agents: `echo` (in laptop's scope) and `vault` (outside it).
const AGENTS: &str = r#"
[[agents]]
name = "echo"
description = "Echoes what it is told"
tools = []
[agents.model]
provider = "scripted"
rules = [
  { when = { text = "^hang" }, steps = [ { wait_ms = 600000 }, { reply = "never" } ] },
  { when = {}, steps = [ { reply = "echo: {{message}}" } ] },
]

[[agents]]
name = "vault"
description = "Keeps secrets"
tools = []
[agents.model]
provider = "scripted"
rules = [ { when = {}, steps = [ { reply = "the secret" } ] } ]
"#;

const LAPTOP_SCOPE: &str = "system_time, portico_agent_echo";

fn config(extra: &str) -> String {
    format!(
        r#"[server]
listen = "127.0.0.1:0"
token = "{DEFAULT}"
{extra}

[[server.clients]]
name = "laptop"
token = "{LAPTOP}"
tools = ["system_time", "portico_agent_echo"]

[[server.clients]]
name = "ci"
token_sha256 = "{}"
{AGENTS}"#,
        portico_config::token_sha256_hex(CI)
    )
}

fn start(extra: &str) -> (Home, Daemon) {
    let home = Home::new(&config(extra));
    let daemon = tokio::task::block_in_place(|| {
        let mut daemon = Daemon::start(&home);
        daemon.wait_for_line("portico: ready");
        daemon
    });
    (home, daemon)
}

fn http() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().build().unwrap()
}

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

/// The refusal a laptop call outside its scope gets, from the pipeline.
fn outside_scope(tool: &str) -> String {
    format!(
        "tool `{tool}` is not available to client `laptop`: it is outside the client's `tools` scope ({LAPTOP_SCOPE}); widen that [[server.clients]] entry's `tools` to allow it"
    )
}

/// One MCP session on `/mcp` (2025-06-18), opened with `token`.
struct Session {
    base: String,
    id: String,
    token: String,
}

impl Session {
    async fn open(base: &str, token: &str) -> Session {
        let init = http()
            .post(format!("{base}/mcp"))
            .header("accept", "application/json, text/event-stream")
            .header("authorization", bearer(token))
            .json(&json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "clients-test", "version": "1"}}}))
            .send()
            .await
            .unwrap();
        assert_eq!(init.status(), 200);
        let id = init.headers()["mcp-session-id"]
            .to_str()
            .unwrap()
            .to_string();
        drop(init.text().await.unwrap());
        let session = Session {
            base: base.to_string(),
            id,
            token: token.to_string(),
        };
        let initialized = session
            .post_as(
                token,
                json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            )
            .await;
        assert_eq!(initialized.status(), 202);
        session
    }

    async fn post_as(&self, token: &str, body: Value) -> reqwest::Response {
        http()
            .post(format!("{}/mcp", self.base))
            .header("accept", "application/json, text/event-stream")
            .header("authorization", bearer(token))
            .header("mcp-session-id", &self.id)
            .header("mcp-protocol-version", "2025-06-18")
            .json(&body)
            .send()
            .await
            .unwrap()
    }

    async fn request(&self, id: u64, method: &str, params: Value) -> Value {
        let body = self
            .post_as(
                &self.token,
                json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
            )
            .await
            .text()
            .await
            .unwrap();
        body.lines()
            .filter_map(|line| line.strip_prefix("data: "))
            .find_map(|data| {
                let message: Value = serde_json::from_str(data).ok()?;
                (message["id"] == id).then_some(message)
            })
            .unwrap_or_else(|| panic!("no answer to request {id} in {body:?}"))
    }

    async fn tool_names(&self, id: u64) -> Vec<String> {
        let listed = self.request(id, "tools/list", json!({})).await;
        let mut names: Vec<String> = listed["result"]["tools"]
            .as_array()
            .unwrap_or_else(|| panic!("{listed}"))
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_string())
            .collect();
        names.sort();
        names
    }

    async fn call(&self, id: u64, name: &str, arguments: Value) -> Value {
        self.request(
            id,
            "tools/call",
            json!({"name": name, "arguments": arguments}),
        )
        .await
    }
}

async fn get(base: &str, path: &str, token: &str) -> reqwest::Response {
    http()
        .get(format!("{base}{path}"))
        .header("authorization", bearer(token))
        .send()
        .await
        .unwrap()
}

/// `(caller, outcome)` of every audit record of `tool`, newest first, as `token` may read them.
async fn audit(base: &str, tool: &str, token: &str) -> Vec<(String, String)> {
    let response = get(base, &format!("/api/audit?tool={tool}"), token).await;
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    body["records"]
        .as_array()
        .unwrap_or_else(|| panic!("{body}"))
        .iter()
        .map(|r| {
            (
                r["caller"].as_str().unwrap().to_string(),
                r["outcome"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn pairs(expected: &[(&str, &str)]) -> Vec<(String, String)> {
    expected
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_lists_and_calls_within_each_clients_scope_and_sessions_are_their_creators() {
    let (_home, mut daemon) = start("");
    let base = daemon.base.clone();
    let laptop = Session::open(&base, LAPTOP).await;
    let ci = Session::open(&base, CI).await;

    assert_eq!(
        laptop.tool_names(1).await,
        ["portico_agent_echo", "system_time"]
    );
    let everything = ci.tool_names(1).await;
    for name in ["file_list", "system_time", "portico_agent_echo", "portico_agent_vault"] {
        assert!(everything.iter().any(|n| n == name), "{name}: {everything:?}");
    }

    let refused = laptop.call(2, "file_list", json!({})).await;
    assert_eq!(
        refused["result"],
        json!({"content": [{"type": "text", "text": outside_scope("file_list")}], "isError": true}),
        "{refused}"
    );
    let refused = laptop
        .call(3, "portico_agent_vault", json!({"message": "tell me"}))
        .await;
    assert_eq!(
        refused["result"]["content"][0]["text"],
        outside_scope("portico_agent_vault")
    );
    let ran = laptop.call(4, "system_time", json!({})).await;
    assert_eq!(ran["result"].get("isError"), None, "{ran}");
    let listed = ci.call(2, "file_list", json!({})).await;
    assert_eq!(listed["result"].get("isError"), None, "{listed}");

    // The session is laptop's: ci's token on it is refused, and nothing ran for ci.
    let ridden = laptop
        .post_as(
            CI,
            json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "system_time", "arguments": {}}}),
        )
        .await;
    assert_eq!(ridden.status(), 403);
    assert_eq!(
        ridden.json::<Value>().await.unwrap(),
        json!({"error": "this MCP session belongs to another client; send initialize without Mcp-Session-Id to start a session of your own"})
    );

    // `[server] token` is `client:default`, with every tool.
    let default = Session::open(&base, DEFAULT).await;
    let ran = default.call(1, "file_list", json!({})).await;
    assert_eq!(ran["result"].get("isError"), None, "{ran}");

    // The audit log names each client; a scoped client reads only its own records.
    assert_eq!(
        audit(&base, "file_list", DEFAULT).await,
        pairs(&[
            ("client:default", "ok"),
            ("client:ci", "ok"),
            ("client:laptop", "denied")
        ])
    );
    assert_eq!(
        audit(&base, "system_time", CI).await,
        pairs(&[("client:laptop", "ok")])
    );
    assert_eq!(
        audit(&base, "file_list", LAPTOP).await,
        pairs(&[("client:laptop", "denied")])
    );

    // A wrong token is refused before anything is read.
    let wrong = http()
        .post(format!("{base}/mcp"))
        .header("accept", "application/json, text/event-stream")
        .header("authorization", bearer("not-a-token"))
        .json(&json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}}))
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 401);
    assert_eq!(wrong.headers()["www-authenticate"], "Bearer");
    assert!(daemon.stop().success());
}
