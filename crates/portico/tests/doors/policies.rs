//! `[[policies]]` at the daemon's `/mcp`: what a client is told of a refused call (the failure
//! envelope, byte for byte), that the refused call did not run, what the audit log says, and how
//! `tools/list` marks the tools a policy denies or holds.

use serde_json::{Value, json};

use crate::client::*;

const CONFIG: &str = r#"
[server]
listen = "127.0.0.1:0"

[policy]
default = "deny"

[[policies]]
tools = ["file_write"]
when = [{ pointer = "/path", matches = "^protected/" }]
action = "deny"
reason = "files under protected/ are read-only"

[[policies]]
tools = ["file_*", "system_time", "memory_recall"]
action = "allow"

[[policies]]
tools = ["memory_store"]
callers = ["client:*"]
action = "approve"
reason = "an owner approves what clients remember"
"#;

fn http() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().build().unwrap()
}

/// One MCP session on the daemon's `/mcp` (2025-06-18, answers as event streams).
struct Session {
    base: String,
    id: String,
}

impl Session {
    async fn open(base: &str) -> Session {
        let init = http()
            .post(format!("{base}/mcp"))
            .header("accept", "application/json, text/event-stream")
            .json(
                &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "policies-test", "version": "1"}}}),
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
        };
        let initialized = session
            .post(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        assert_eq!(initialized.status(), 202);
        session
    }

    async fn post(&self, body: Value) -> reqwest::Response {
        http()
            .post(format!("{}/mcp", self.base))
            .header("accept", "application/json, text/event-stream")
            .header("mcp-session-id", &self.id)
            .header("mcp-protocol-version", "2025-06-18")
            .json(&body)
            .send()
            .await
            .unwrap()
    }

    /// The answer to request `id`: the JSON text exactly as the door wrote it, and parsed.
    async fn request(&self, id: u64, method: &str, params: Value) -> (String, Value) {
        let body = self
            .post(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await
            .text()
            .await
            .unwrap();
        body.lines()
            .filter_map(|line| line.strip_prefix("data: "))
            .find_map(|data| {
                let message: Value = serde_json::from_str(data).ok()?;
                (message["id"] == id).then(|| (data.to_string(), message))
            })
            .unwrap_or_else(|| panic!("no answer to request {id} in {body:?}"))
    }

    async fn call(&self, id: u64, name: &str, arguments: Value) -> (String, Value) {
        self.request(
            id,
            "tools/call",
            json!({"name": name, "arguments": arguments}),
        )
        .await
    }
}

async fn audit(base: &str, tool: &str) -> Vec<Value> {
    let response = http()
        .get(format!("{base}/api/audit?tool={tool}"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let mut body: Value = response.json().await.unwrap();
    let Value::Array(records) = body["records"].take() else {
        panic!("{body}")
    };
    records
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn policies_allow_deny_and_hold_calls_with_the_seeds_envelope_and_mark_the_listing() {
    let home = Home::new(CONFIG);
    let workspace = home.dir.path().join("workspace");
    let mut daemon = Daemon::start(&home);
    daemon.wait_for_line("portico: ready");
    let session = Session::open(&daemon.base).await;

    // Allowed: the first entry's condition does not hold, the second allows `file_*`.
    let (_, written) = session
        .call(
            1,
            "file_write",
            json!({"path": "open/a.txt", "content": "hello"}),
        )
        .await;
    assert_eq!(written["result"].get("isError"), None, "{written}");
    assert_eq!(
        std::fs::read_to_string(workspace.join("open/a.txt")).unwrap(),
        "hello"
    );

    // Denied by the `when` entry: the envelope, byte for byte, and the tool did not run.
    let (raw, denied) = session
        .call(
            2,
            "file_write",
            json!({"path": "protected/b.txt", "content": "hello"}),
        )
        .await;
    assert!(
        raw.contains(
            r#""structuredContent":{"ok":false,"error":{"code":"policy_denied","tool":"file_write","reason":"files under protected/ are read-only"}}"#
        ),
        "{raw}"
    );
    assert_eq!(
        denied["result"],
        json!({
            "content": [{"type": "text", "text": "call to `file_write` refused: files under protected/ are read-only"}],
            "structuredContent": {"ok": false, "error": {
                "code": "policy_denied", "tool": "file_write",
                "reason": "files under protected/ are read-only"}},
            "isError": true,
        })
    );
    assert!(!workspace.join("protected/b.txt").exists());
    assert!(!workspace.join("protected").exists());

    // Invalid arguments never reach the policies: the schema refuses them first.
    let (_, invalid) = session
        .call(3, "file_write", json!({"path": "protected/c.txt"}))
        .await;
    assert_eq!(invalid["result"]["isError"], true);
    assert_eq!(
        invalid["result"].get("structuredContent"),
        None,
        "{invalid}"
    );
    let text = invalid["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        text.starts_with("invalid arguments for `file_write`"),
        "{text}"
    );

    // Held for an approval: the call does not run (approvals.rs answers them).
    let (raw, held) = session
        .call(
            4,
            "memory_store",
            json!({"key": "k", "value": "remembered-secret"}),
        )
        .await;
    let id = held["result"]["structuredContent"]["error"]["approvalRequestId"]
        .as_str()
        .unwrap_or_else(|| panic!("{raw}"));
    assert!(
        raw.contains(&format!(
            r#""structuredContent":{{"ok":false,"error":{{"code":"approval_required","approvalRequestId":"{id}","approvalPath":"/approvals/{id}","tool":"memory_store","reason":"an owner approves what clients remember"}}}}"#
        )),
        "{raw}"
    );
    assert_eq!(held["result"]["isError"], true);
    assert_eq!(
        held["result"]["content"][0]["text"],
        format!(
            "call to `memory_store` requires approval and was not run: an owner approves what clients remember; approve it with `portico approvals approve {id}` or open {}/approvals/{id}, then retry the same call",
            daemon.base
        )
    );
    let (_, recalled) = session.call(5, "memory_recall", json!({})).await;
    assert_eq!(recalled["result"].get("isError"), None, "{recalled}");
    assert!(
        !recalled.to_string().contains("remembered-secret"),
        "{recalled}"
    );

    // No entry matches `web_fetch`: `[policy] default = "deny"` refuses it.
    let (raw, defaulted) = session
        .call(6, "web_fetch", json!({"url": "https://example.com/"}))
        .await;
    assert!(
        raw.contains(
            r#""structuredContent":{"ok":false,"error":{"code":"policy_denied","tool":"web_fetch","reason":"no [[policies]] entry allows this call, and [policy] default is \"deny\""}}"#
        ),
        "{raw}"
    );
    assert_eq!(defaulted["result"]["isError"], true);

    // The audit log: outcome and reason per call, newest first.
    let writes: Vec<(Value, Value, Value)> = audit(&daemon.base, "file_write")
        .await
        .into_iter()
        .map(|r| {
            (
                r["caller"].clone(),
                r["outcome"].clone(),
                r["detail"].clone(),
            )
        })
        .collect();
    assert_eq!(writes.len(), 3, "{writes:?}");
    assert_eq!(writes[0].1, "invalid_arguments");
    assert_eq!(
        writes[1],
        (
            json!("client:http"),
            json!("denied"),
            json!("files under protected/ are read-only")
        )
    );
    assert_eq!(writes[2], (json!("client:http"), json!("ok"), Value::Null));
    let stores = audit(&daemon.base, "memory_store").await;
    assert_eq!(stores.len(), 2, "{stores:?}");
    assert_eq!(stores[1]["outcome"], "approval_requested");
    assert_eq!(stores[0]["outcome"], "approval_required");
    assert_eq!(
        stores[0]["detail"],
        "an owner approves what clients remember"
    );
    assert_eq!(
        audit(&daemon.base, "web_fetch").await[0]["outcome"],
        "denied"
    );

    // The listing marks what a policy denies or holds, and nothing else.
    let (_, listed) = session.request(7, "tools/list", json!({})).await;
    let tools = listed["result"]["tools"].as_array().unwrap();
    let policy_of = |name: &str| {
        let tool = tools
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("{name} not listed: {listed}"));
        tool.get("_meta")
            .and_then(|meta| meta.get("portico/hostPolicy"))
            .cloned()
    };
    assert_eq!(
        policy_of("file_write"),
        Some(
            json!({"action": "deny", "reason": "files under protected/ are read-only", "conditional": true})
        )
    );
    assert_eq!(
        policy_of("memory_store"),
        Some(json!({"action": "approve", "reason": "an owner approves what clients remember"}))
    );
    assert_eq!(
        policy_of("web_fetch"),
        Some(
            json!({"action": "deny", "reason": "no [[policies]] entry allows this call, and [policy] default is \"deny\""})
        )
    );
    for open in ["file_read", "file_list", "system_time", "memory_recall"] {
        assert_eq!(policy_of(open), None, "{open}");
    }
    assert!(daemon.stop().success());
}
