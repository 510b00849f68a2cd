//! A minimal Streamable HTTP MCP client (2025-06-18, one session) for the live tests, over reqwest.

#![allow(dead_code)]

use serde_json::{Value, json};

pub fn http() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().build().unwrap()
}

pub struct Session {
    pub base: String,
    pub id: String,
    client: reqwest::Client,
}

/// The JSON-RPC messages of an answer: one JSON body, or the `data:` lines of an SSE body.
pub fn messages(body: &str) -> Vec<Value> {
    if let Ok(value) = serde_json::from_str::<Value>(body) {
        return vec![value];
    }
    body.lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .filter_map(|data| serde_json::from_str(data.trim()).ok())
        .collect()
}

impl Session {
    /// `initialize` and `notifications/initialized`, declaring no capabilities.
    pub async fn open(base: &str) -> Session {
        let client = http();
        let init = client
            .post(format!("{base}/mcp"))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .json(&json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "live", "version": "1"}}}))
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
            client,
        };
        let initialized = session
            .post(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        assert_eq!(initialized.status(), 202);
        session
    }

    fn with_headers(&self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        request
            .header("mcp-session-id", &self.id)
            .header("mcp-protocol-version", "2025-06-18")
    }

    pub async fn post(&self, body: Value) -> reqwest::Response {
        self.with_headers(self.client.post(format!("{}/mcp", self.base)))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .json(&body)
            .send()
            .await
            .unwrap()
    }

    /// A request's answer (its `result`, or the whole message if it is an error).
    pub async fn request(&self, id: u64, method: &str, params: Value) -> Value {
        let body = self
            .post(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await
            .text()
            .await
            .unwrap();
        let answer = messages(&body)
            .into_iter()
            .find(|m| m["id"] == json!(id))
            .unwrap_or_else(|| panic!("no answer to {method} in {body}"));
        answer.get("result").cloned().unwrap_or(answer)
    }

    pub async fn tool_names(&self, id: u64) -> Vec<String> {
        let listed = self.request(id, "tools/list", json!({})).await;
        let mut names: Vec<String> = listed["tools"]
            .as_array()
            .unwrap_or_else(|| panic!("tools/list: {listed}"))
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_string())
            .collect();
        names.sort();
        names
    }

    /// The session's GET stream, open (the answer's head has come) when this returns.
    pub async fn listen(&self) -> Events {
        let response = self
            .with_headers(self.client.get(format!("{}/mcp", self.base)))
            .header("accept", "text/event-stream")
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        Events {
            response,
            buffer: String::new(),
            methods: Vec::new(),
        }
    }

    pub async fn delete(&self) -> reqwest::StatusCode {
        self.with_headers(self.client.delete(format!("{}/mcp", self.base)))
            .send()
            .await
            .unwrap()
            .status()
    }
}

/// An open SSE stream's JSON-RPC messages, as they come.
pub struct Events {
    response: reqwest::Response,
    buffer: String,
    /// The method of every notification read so far, in order.
    pub methods: Vec<String>,
}

impl Events {
    /// The next message, or `None` when the stream ends.
    pub async fn next(&mut self) -> Option<Value> {
        loop {
            while let Some(end) = self.buffer.find("\n\n") {
                let event: String = self.buffer.drain(..end + 2).collect();
                if let Some(message) = messages(&event).into_iter().next() {
                    if let Some(method) = message["method"].as_str() {
                        self.methods.push(method.to_string());
                    }
                    return Some(message);
                }
            }
            let chunk = self.response.chunk().await.ok()??;
            self.buffer.push_str(&String::from_utf8_lossy(&chunk));
        }
    }

    /// Waits for a notification with this method; panics if the stream ends first.
    pub async fn notification(&mut self, method: &str) -> Value {
        loop {
            let message = self
                .next()
                .await
                .unwrap_or_else(|| panic!("the stream ended before {method}"));
            if message["method"] == method {
                return message;
            }
        }
    }
}

/// Writes a config file whole (a new file renamed over the old one, as editors save), so that the
/// daemon never reads half of it.
pub fn write_config(path: &std::path::Path, text: &str) {
    let tmp = path.with_extension("toml.tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}
