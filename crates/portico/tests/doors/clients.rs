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

[[policies]]
tools = ["file_read"]
callers = ["client:ci"]
action = "deny"
reason = "ci reads no files"
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
        "tool `{tool}` is not available to client `laptop`: it is outside the client's `tools` scope ({LAPTOP_SCOPE}); widen that [[server.clients]] entry's `tools` (for an OAuth token: what its scopes grant in [server.oauth] scopes) to allow it"
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
            .json(
                &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "clients-test", "version": "1"}}}),
            )
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
    for name in [
        "file_list",
        "system_time",
        "portico_agent_echo",
        "portico_agent_vault",
    ] {
        assert!(
            everything.iter().any(|n| n == name),
            "{name}: {everything:?}"
        );
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
    // `[[policies]] callers` see the client's name.
    let denied = ci.call(3, "file_read", json!({"path": "x.txt"})).await;
    assert_eq!(
        denied["result"]["structuredContent"],
        json!({"ok": false, "error": {"code": "policy_denied", "tool": "file_read", "reason": "ci reads no files"}}),
        "{denied}"
    );

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

    // `[server] token` is `client:default`, with every tool, and the policy for ci is not its.
    let default = Session::open(&base, DEFAULT).await;
    let ran = default.call(1, "file_list", json!({})).await;
    assert_eq!(ran["result"].get("isError"), None, "{ran}");
    let read = default.call(2, "file_read", json!({"path": "x.txt"})).await;
    assert_eq!(read["result"].get("structuredContent"), None, "{read}");
    assert_eq!(
        audit(&base, "file_read", DEFAULT).await,
        pairs(&[("client:default", "error"), ("client:ci", "denied")])
    );

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
    // The chain links every client's records: a scoped client may not walk it, others may.
    let refused = get(&base, "/api/audit/verify", LAPTOP).await;
    assert_eq!(refused.status(), 403);
    let refused: Value = refused.json().await.unwrap();
    assert!(
        refused["error"]
            .as_str()
            .unwrap()
            .starts_with("verifying the audit chain reads every client's records"),
        "{refused}"
    );
    let verified = get(&base, "/api/audit/verify", CI).await;
    assert_eq!(verified.status(), 200);
    let verified: Value = verified.json().await.unwrap();
    assert_eq!(verified["ok"], true, "{verified}");

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

/// A legacy `GET /sse` stream, read event by event.
struct Legacy {
    response: reqwest::Response,
    buffer: String,
}

impl Legacy {
    async fn open(base: &str, token: &str) -> (Legacy, String) {
        let response = http()
            .get(format!("{base}/sse"))
            .header("accept", "text/event-stream")
            .header("authorization", bearer(token))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        let mut stream = Legacy {
            response,
            buffer: String::new(),
        };
        let (name, endpoint) = stream.next_event().await;
        assert_eq!(name, "endpoint");
        (stream, endpoint)
    }

    async fn next_event(&mut self) -> (String, String) {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let mut name = "message".to_string();
                let mut data = Vec::new();
                for line in block.lines() {
                    if let Some(value) = line.strip_prefix("event:") {
                        name = value.trim_start().to_string();
                    } else if let Some(value) = line.strip_prefix("data:") {
                        data.push(value.strip_prefix(' ').unwrap_or(value).to_string());
                    }
                }
                if !data.is_empty() {
                    return (name, data.join("\n"));
                }
                continue;
            }
            let chunk =
                tokio::time::timeout(std::time::Duration::from_secs(60), self.response.chunk())
                    .await
                    .expect("no SSE event within 60s (test guard)")
                    .unwrap()
                    .expect("stream ended");
            self.buffer
                .push_str(&String::from_utf8_lossy(&chunk).replace("\r\n", "\n"));
        }
    }

    async fn answer(&mut self, id: u64) -> Value {
        loop {
            let (_, data) = self.next_event().await;
            let message: Value = serde_json::from_str(&data).unwrap();
            if message["id"] == id && message.get("method").is_none() {
                return message;
            }
        }
    }
}

async fn post_legacy(base: &str, endpoint: &str, token: &str, message: Value) -> reqwest::Response {
    http()
        .post(format!("{base}{endpoint}"))
        .header("authorization", bearer(token))
        .json(&message)
        .send()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legacy_sse_sessions_call_as_the_client_that_opened_them() {
    let (_home, mut daemon) = start("");
    let base = daemon.base.clone();
    let (mut stream, endpoint) = Legacy::open(&base, LAPTOP).await;
    let accepted = post_legacy(
        &base,
        &endpoint,
        LAPTOP,
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2024-11-05", "capabilities": {}, "clientInfo": {"name": "legacy-clients", "version": "1"}}}),
    )
    .await;
    assert_eq!(accepted.status(), 202);
    stream.answer(1).await;
    let accepted = post_legacy(
        &base,
        &endpoint,
        LAPTOP,
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    .await;
    assert_eq!(accepted.status(), 202);

    post_legacy(
        &base,
        &endpoint,
        LAPTOP,
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}),
    )
    .await;
    let listed = stream.answer(2).await;
    let mut names: Vec<&str> = listed["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{listed}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["portico_agent_echo", "system_time"]);

    post_legacy(
        &base,
        &endpoint,
        LAPTOP,
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "file_list", "arguments": {}}}),
    )
    .await;
    let refused = stream.answer(3).await;
    assert_eq!(
        refused["result"],
        json!({"content": [{"type": "text", "text": outside_scope("file_list")}], "isError": true})
    );

    // ci cannot post to laptop's session; a wrong token cannot open or post at all.
    let ridden = post_legacy(
        &base,
        &endpoint,
        CI,
        json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "file_list", "arguments": {}}}),
    )
    .await;
    assert_eq!(ridden.status(), 403);
    assert_eq!(
        ridden.json::<Value>().await.unwrap(),
        json!({"error": "this SSE session belongs to another client; open your own with GET /sse"})
    );
    let wrong = post_legacy(&base, &endpoint, "not-a-token", json!({})).await;
    assert_eq!(wrong.status(), 401);
    let wrong = get(&base, "/sse", "not-a-token").await;
    assert_eq!(wrong.status(), 401);

    assert_eq!(
        audit(&base, "file_list", DEFAULT).await,
        pairs(&[("client:laptop", "denied")])
    );
    assert!(daemon.stop().success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_serves_each_client_its_scope() {
    let (_home, mut daemon) = start("");
    let base = daemon.base.clone();
    let agents = |body: Value| -> Vec<String> {
        body["agents"]
            .as_array()
            .unwrap_or_else(|| panic!("{body}"))
            .iter()
            .map(|a| a["name"].as_str().unwrap().to_string())
            .collect()
    };
    let mine: Value = get(&base, "/api/agents", LAPTOP)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(agents(mine), ["echo"]);
    let all: Value = get(&base, "/api/agents", CI).await.json().await.unwrap();
    let mut all = agents(all);
    all.sort();
    assert_eq!(all, ["echo", "vault"]);

    let send = |agent: &str, token: &str| {
        http()
            .post(format!("{base}/api/agents/{agent}/message"))
            .header("authorization", bearer(token))
            .json(&json!({"message": "hi"}))
            .send()
    };
    let refused = send("vault", LAPTOP).await.unwrap();
    assert_eq!(refused.status(), 403);
    assert_eq!(
        refused.json::<Value>().await.unwrap(),
        json!({"error": outside_scope("portico_agent_vault")})
    );
    // The streaming form is refused the same way, before any stream opens.
    let refused = http()
        .post(format!("{base}/api/agents/vault/message"))
        .header("authorization", bearer(LAPTOP))
        .json(&json!({"message": "hi", "stream": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 403);
    let answered = send("echo", LAPTOP).await.unwrap();
    assert_eq!(answered.status(), 200);
    let answered: Value = answered.json().await.unwrap();
    assert_eq!(answered["reply"], "echo: hi", "{answered}");
    let answered = send("vault", CI).await.unwrap();
    assert_eq!(answered.status(), 200);
    let answered: Value = answered.json().await.unwrap();
    let conversation = answered["conversation_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{answered}"));
    // ci's conversation with vault is not there for laptop, whose scope leaves vault out.
    let path = format!("/api/conversations/{conversation}");
    let read = get(&base, &path, CI).await;
    assert_eq!(read.status(), 200);
    let read: Value = read.json().await.unwrap();
    assert_eq!(read["conversation"]["agent"], "vault", "{read}");
    let hidden = get(&base, &path, LAPTOP).await;
    assert_eq!(hidden.status(), 404);
    assert_eq!(
        hidden.json::<Value>().await.unwrap(),
        json!({"error": "no such conversation"})
    );

    assert_eq!(
        audit(&base, "portico_agent_vault", DEFAULT).await,
        pairs(&[
            ("client:ci", "ok"),
            ("client:laptop", "denied"),
            ("client:laptop", "denied")
        ])
    );
    assert_eq!(
        audit(&base, "portico_agent_vault", LAPTOP).await,
        pairs(&[("client:laptop", "denied"), ("client:laptop", "denied")])
    );
    for path in ["/api/agents", "/api/audit", "/api/mcp/servers"] {
        assert_eq!(
            get(&base, path, "not-a-token").await.status(),
            401,
            "{path}"
        );
    }
    assert!(daemon.stop().success());
}

/// One A2A 1.0 JSON-RPC call to `agent` as `token`.
async fn a2a(base: &str, agent: &str, token: &str, method: &str, params: Value) -> Value {
    let response = http()
        .post(format!("{base}/a2a/{agent}"))
        .header("A2A-Version", "1.0")
        .header("authorization", bearer(token))
        .json(&json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    response.json().await.unwrap()
}

fn message(text: &str) -> Value {
    json!({"messageId": format!("m-{text}"), "role": "ROLE_USER", "parts": [{"text": text}]})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a2a_tasks_and_agents_are_per_client() {
    let (_home, mut daemon) = start("");
    let base = daemon.base.clone();

    // An agent outside laptop's scope: no card, and a message is refused before any task exists.
    let card = get(&base, "/a2a/vault/.well-known/agent-card.json", LAPTOP).await;
    assert_eq!(card.status(), 404);
    assert_eq!(
        get(&base, "/a2a/vault/.well-known/agent-card.json", CI)
            .await
            .status(),
        200
    );
    let refused = a2a(
        &base,
        "vault",
        LAPTOP,
        "SendMessage",
        json!({"message": message("tell me")}),
    )
    .await;
    assert_eq!(refused["error"]["code"], -32000, "{refused}");
    assert_eq!(
        refused["error"]["message"],
        outside_scope("portico_agent_vault")
    );
    assert_eq!(refused["error"]["data"][0]["reason"], "PERMISSION_DENIED");
    let listed = a2a(&base, "vault", LAPTOP, "ListTasks", json!({})).await;
    assert_eq!(listed["result"]["tasks"], json!([]), "{listed}");

    // laptop's task is laptop's: ci can neither read nor cancel it.
    let started = a2a(
        &base,
        "echo",
        LAPTOP,
        "SendMessage",
        json!({"message": message("hang on"), "configuration": {"returnImmediately": true}}),
    )
    .await;
    let id = started["result"]["task"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("{started}"))
        .to_string();
    for method in [
        "GetTask",
        "CancelTask",
        "SubscribeToTask",
        "ListTaskPushNotificationConfigs",
    ] {
        let foreign = a2a(&base, "echo", CI, method, json!({"id": id})).await;
        assert_eq!(foreign["error"]["code"], -32001, "{method}: {foreign}");
        assert_eq!(
            foreign["error"]["message"],
            format!("task `{id}` not found")
        );
    }
    let theirs = a2a(&base, "echo", CI, "ListTasks", json!({})).await;
    assert_eq!(theirs["result"]["tasks"], json!([]), "{theirs}");
    let mine = a2a(&base, "echo", LAPTOP, "GetTask", json!({"id": id})).await;
    assert_eq!(mine["result"]["id"], id.as_str(), "{mine}");
    let canceled = a2a(&base, "echo", LAPTOP, "CancelTask", json!({"id": id})).await;
    assert_eq!(
        canceled["result"]["status"]["state"], "TASK_STATE_CANCELED",
        "{canceled}"
    );
    let answered = a2a(
        &base,
        "echo",
        LAPTOP,
        "SendMessage",
        json!({"message": message("hello")}),
    )
    .await;
    assert_eq!(
        answered["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{answered}"
    );

    assert_eq!(
        audit(&base, "portico_agent_vault", DEFAULT).await,
        pairs(&[("client:laptop", "denied")])
    );
    let echoes = audit(&base, "portico_agent_echo", DEFAULT).await;
    assert!(
        echoes.iter().all(|(caller, _)| caller == "client:laptop") && echoes.len() == 2,
        "{echoes:?}"
    );
    let wrong = http()
        .post(format!("{base}/a2a/echo"))
        .header("authorization", bearer("not-a-token"))
        .json(&json!({"jsonrpc": "2.0", "id": 7, "method": "GetTask", "params": {"id": id}}))
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 401);
    assert_eq!(
        get(&base, "/.well-known/agent-card.json", "not-a-token")
            .await
            .status(),
        401
    );
    assert!(daemon.stop().success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_client_has_its_own_rate_limit_bucket() {
    let (_home, mut daemon) = start("[server.rate_limit]\nper_second = 1\nburst = 2\n");
    let base = daemon.base.clone();
    let mut statuses = Vec::new();
    for _ in 0..3 {
        statuses.push(get(&base, "/api/agents", LAPTOP).await.status().as_u16());
    }
    assert_eq!(statuses, [200, 200, 429]);
    // laptop's empty bucket is not ci's, nor the default client's.
    assert_eq!(get(&base, "/api/agents", CI).await.status(), 200);
    assert_eq!(get(&base, "/api/agents", DEFAULT).await.status(), 200);
    assert!(daemon.stop().success());
}

/// `portico mcp` proxying to the daemon is the client whose token it is given
/// (`PORTICO_CLIENT_TOKEN`), and without one the daemon's own `[server] token`: `client:default`.
#[test]
fn portico_mcp_proxies_as_the_client_its_token_names() {
    let home = Home::new(&config(""));
    let mut daemon = Daemon::start(&home);
    daemon.wait_for_line("portico: ready");
    let base = daemon.base.clone();

    let mut laptop = StdioSession::start_with_env(&home, &[], &[("PORTICO_CLIENT_TOKEN", LAPTOP)]);
    laptop.initialize("2025-11-25");
    let mut names = laptop.tool_names(1);
    names.sort();
    assert_eq!(names, ["portico_agent_echo", "system_time"]);
    let (refused, _) = laptop.request(
        2,
        "tools/call",
        json!({"name": "file_list", "arguments": {}}),
    );
    assert_eq!(
        refused["result"]["content"][0]["text"],
        outside_scope("file_list")
    );
    assert!(laptop.finish().success());

    let mut default = StdioSession::start(&home, &[]);
    default.initialize("2025-11-25");
    assert!(default.tool_names(1).iter().any(|n| n == "file_list"));
    let (listed, _) = default.request(
        2,
        "tools/call",
        json!({"name": "file_list", "arguments": {}}),
    );
    assert_eq!(listed["result"].get("isError"), None, "{listed}");
    assert!(default.finish().success());

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    assert_eq!(
        runtime.block_on(audit(&base, "file_list", DEFAULT)),
        pairs(&[("client:default", "ok"), ("client:laptop", "denied")])
    );
    assert!(daemon.stop().success());
}

/// A stateless (2026-07-28) request on `/mcp` as `token`: its JSON answer.
async fn stateless(base: &str, token: &str, method: &str, params: Value) -> Value {
    let mut params = params;
    params["_meta"] = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                             "io.modelcontextprotocol/clientCapabilities": {}});
    let mut request = http()
        .post(format!("{base}/mcp"))
        .header("accept", "application/json, text/event-stream")
        .header("authorization", bearer(token))
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", method);
    if let Some(name) = params["name"].as_str() {
        request = request.header("mcp-name", name);
    }
    let response = request
        .json(&json!({"jsonrpc": "2.0", "id": 5, "method": method, "params": params}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    response.json().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stateless_mcp_requests_are_scoped_too() {
    let (_home, mut daemon) = start("");
    let base = daemon.base.clone();
    let listed = stateless(&base, LAPTOP, "tools/list", json!({})).await;
    let mut names: Vec<&str> = listed["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{listed}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["portico_agent_echo", "system_time"]);
    let refused = stateless(
        &base,
        LAPTOP,
        "tools/call",
        json!({"name": "file_list", "arguments": {}}),
    )
    .await;
    assert_eq!(refused["result"]["isError"], true, "{refused}");
    assert_eq!(
        refused["result"]["content"][0]["text"],
        outside_scope("file_list")
    );
    let ran = stateless(
        &base,
        CI,
        "tools/call",
        json!({"name": "file_list", "arguments": {}}),
    )
    .await;
    assert_eq!(ran["result"].get("isError"), None, "{ran}");
    assert_eq!(
        audit(&base, "file_list", DEFAULT).await,
        pairs(&[("client:ci", "ok"), ("client:laptop", "denied")])
    );
    assert!(daemon.stop().success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_search_finds_and_calls_only_within_the_scope() {
    let (_home, mut daemon) = start("[expose]\ntool_search = \"on\"");
    let base = daemon.base.clone();
    let laptop = Session::open(&base, LAPTOP).await;
    let ci = Session::open(&base, CI).await;
    let found = |answer: Value| -> Vec<String> {
        let mut names: Vec<String> = answer["result"]["structuredContent"]["tools"]
            .as_array()
            .unwrap_or_else(|| panic!("{answer}"))
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_string())
            .collect();
        names.sort();
        names
    };
    // "file" matches the file tools by name: none of them is laptop's.
    let query = json!({"query": "file", "limit": 50});
    assert_eq!(
        found(laptop.call(1, "portico_search_tools", query.clone()).await),
        Vec::<String>::new()
    );
    assert!(
        found(ci.call(1, "portico_search_tools", query).await)
            .iter()
            .any(|n| n == "file_list")
    );
    let refused = laptop
        .call(
            2,
            "portico_call_tool",
            json!({"name": "file_list", "arguments": {}}),
        )
        .await;
    assert_eq!(
        refused["result"]["content"][0]["text"],
        outside_scope("file_list"),
        "{refused}"
    );
    assert_eq!(refused["result"]["isError"], true);
    assert!(daemon.stop().success());
}

/// `portico clients add` prints a token once and the block with its digest; the block, added to
/// the config, makes that token the client; `portico clients list` shows names and scopes only.
#[test]
fn clients_add_prints_a_token_and_the_block_that_admits_it() {
    let home = Home::new("[server]\nlisten = \"127.0.0.1:0\"\n");
    let added = home
        .command(&["clients", "add", "laptop", "--tools", "system_time"])
        .output()
        .unwrap();
    assert!(added.status.success(), "{added:?}");
    let stdout = String::from_utf8(added.stdout).unwrap();
    let (token, block) = stdout.split_once("\n\n").unwrap();
    assert!(
        token.starts_with("portico_") && token.len() == 72,
        "{token}"
    );
    assert_eq!(
        block,
        format!(
            "[[server.clients]]\nname = \"laptop\"\ntoken_sha256 = \"{}\"\ntools = [\"system_time\"]\n\n",
            portico_config::token_sha256_hex(token)
        )
    );
    let stderr = String::from_utf8(added.stderr).unwrap();
    assert!(stderr.contains("it is shown only now"), "{stderr}");
    assert!(!stderr.contains(token), "the token goes to stdout only");

    std::fs::write(
        home.config(),
        format!("[server]\nlisten = \"127.0.0.1:0\"\n\n{block}"),
    )
    .unwrap();
    let listed = home.command(&["clients", "list"]).output().unwrap();
    assert!(listed.status.success(), "{listed:?}");
    assert_eq!(
        String::from_utf8(listed.stdout).unwrap(),
        "client:laptop  system_time\n"
    );
    let listed = home
        .command(&["clients", "list", "--json"])
        .output()
        .unwrap();
    let listed: Value = serde_json::from_slice(&listed.stdout).unwrap();
    assert_eq!(
        listed,
        json!([{"name": "laptop", "principal": "client:laptop", "token": "token_sha256", "tools": ["system_time"]}])
    );

    let mut daemon = Daemon::start(&home);
    daemon.wait_for_line("portico: ready");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let mine: Value = get(&daemon.base, "/api/agents", token)
            .await
            .json()
            .await
            .unwrap();
        assert_eq!(mine, json!({"agents": []}));
        assert_eq!(
            get(&daemon.base, "/api/agents", "other").await.status(),
            401
        );
        // Clients make the door take tokens: none at all is refused too.
        let bare = http()
            .get(format!("{}/api/agents", daemon.base))
            .send()
            .await
            .unwrap();
        assert_eq!(bare.status(), 401);
    });
    assert!(daemon.stop().success());

    let refused = home
        .command(&["clients", "add", "Bad Name"])
        .output()
        .unwrap();
    assert!(!refused.status.success());
    assert!(refused.stdout.is_empty());
    assert!(
        String::from_utf8(refused.stderr)
            .unwrap()
            .contains("client name `Bad Name` must be 1 to 64 of `a-z`, `0-9`, `-` and `_`")
    );
}

async fn post_as(base: &str, path: &str, token: &str) -> reqwest::Response {
    http()
        .post(format!("{base}{path}"))
        .header("authorization", bearer(token))
        .send()
        .await
        .unwrap()
}

/// Approval requests are per client: a scoped client sees only its own and answers none; an
/// unscoped client sees them all, and its answer is recorded as its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approvals_are_seen_per_client_and_answered_only_by_unscoped_clients() {
    let (_home, mut daemon) = start(
        r#"
[[policies]]
tools = ["system_time"]
action = "approve"
reason = "an owner approves reading the clock""#,
    );
    let base = daemon.base.clone();
    let laptop = Session::open(&base, LAPTOP).await;
    let ci = Session::open(&base, CI).await;
    let request_of = |answer: &Value| -> String {
        let error = &answer["result"]["structuredContent"]["error"];
        assert_eq!(error["code"], "approval_required", "{answer:#}");
        error["approvalRequestId"].as_str().unwrap().to_string()
    };
    let laptops = request_of(&laptop.call(1, "system_time", json!({})).await);
    let cis = request_of(&ci.call(1, "system_time", json!({})).await);
    assert_ne!(laptops, cis, "a grant is bound to its caller");

    let listed = |token: &'static str| {
        let base = base.clone();
        async move {
            let response = get(&base, "/api/approvals", token).await;
            assert_eq!(response.status(), 200);
            let body: Value = response.json().await.unwrap();
            let mut seen: Vec<(String, String)> = body["approvals"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| {
                    (
                        a["id"].as_str().unwrap().to_string(),
                        a["principal"].as_str().unwrap().to_string(),
                    )
                })
                .collect();
            seen.sort();
            seen
        }
    };
    assert_eq!(
        listed(LAPTOP).await,
        [(laptops.clone(), "client:laptop".to_string())]
    );
    let mut all = vec![
        (laptops.clone(), "client:laptop".to_string()),
        (cis.clone(), "client:ci".to_string()),
    ];
    all.sort();
    assert_eq!(listed(CI).await, all);
    assert_eq!(
        get(&base, &format!("/api/approvals/{cis}"), LAPTOP)
            .await
            .status(),
        404,
        "another client's request is not there for a scoped client"
    );

    // laptop cannot approve, not even its own call.
    let refused = post_as(&base, &format!("/api/approvals/{laptops}/approve"), LAPTOP).await;
    assert_eq!(refused.status(), 403);
    let body: Value = refused.json().await.unwrap();
    assert_eq!(
        body["error"],
        "`client:laptop` has a `tools` scope, and scoped clients cannot answer approval requests; answer with [server] token or an unscoped [[server.clients]] token"
    );
    let held = laptop.call(2, "system_time", json!({})).await;
    assert_eq!(
        request_of(&held),
        laptops,
        "still pending, the same request"
    );

    // ci approves laptop's call: recorded as ci's answer; laptop's retry runs, ci's stays held.
    let approved = post_as(&base, &format!("/api/approvals/{laptops}/approve"), CI).await;
    assert_eq!(approved.status(), 200);
    let view: Value = approved.json().await.unwrap();
    assert_eq!(view["status"], "approved");
    assert_eq!(view["decidedBy"], "client:ci");
    let ran = laptop.call(3, "system_time", json!({})).await;
    assert_eq!(
        ran["result"]
            .get("isError")
            .cloned()
            .unwrap_or(json!(false)),
        false,
        "{ran:#}"
    );
    assert!(
        ran["result"]["structuredContent"]["utc_rfc3339"].is_string(),
        "{ran:#}"
    );
    assert_eq!(request_of(&ci.call(2, "system_time", json!({})).await), cis);
    assert_eq!(
        audit(&base, "system_time", CI)
            .await
            .into_iter()
            .filter(|(_, outcome)| outcome == "ok")
            .collect::<Vec<_>>(),
        pairs(&[("client:laptop", "ok")])
    );
    assert!(daemon.stop().success());
}
