//! Fake model providers: an OpenAI-compatible Chat Completions server and an Anthropic Messages server,
//! both streaming (SSE), following one script: which tool calls to make, given how many tool results the
//! conversation already holds, and then a final text built from those results.

#![allow(dead_code)]

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::routing::post;
use serde_json::{Value, json};

/// One planned model turn.
#[derive(Clone, Debug)]
pub enum Turn {
    /// Call these tools (name, arguments) in parallel.
    Calls(Vec<(&'static str, Value)>),
    /// Answer with the tool results seen so far, joined with " | ", after this prefix.
    Final(&'static str),
}

#[derive(Clone)]
struct Fake {
    turns: Arc<Vec<Turn>>,
    requests: Arc<Mutex<Vec<(HeaderMap, Value)>>>,
}

/// A fake provider on 127.0.0.1, stopped on drop.
pub struct FakeModel {
    pub base: String,
    requests: Arc<Mutex<Vec<(HeaderMap, Value)>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FakeModel {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FakeModel {
    pub async fn openai(turns: Vec<Turn>) -> FakeModel {
        Self::start(turns, "/v1/chat/completions", openai).await
    }

    pub async fn anthropic(turns: Vec<Turn>) -> FakeModel {
        Self::start(turns, "/v1/messages", anthropic).await
    }

    async fn start<H, T>(turns: Vec<Turn>, path: &str, handler: H) -> FakeModel
    where
        H: axum::handler::Handler<T, Fake>,
        T: 'static,
    {
        let fake = Fake {
            turns: Arc::new(turns),
            requests: Arc::default(),
        };
        let requests = fake.requests.clone();
        let app = Router::new().route(path, post(handler)).with_state(fake);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        assert!(address.ip().is_loopback());
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        FakeModel {
            base: format!("http://{address}"),
            requests,
            task,
        }
    }

    /// Every request body received, in order.
    pub fn requests(&self) -> Vec<Value> {
        self.requests
            .lock()
            .unwrap()
            .iter()
            .map(|(_, body)| body.clone())
            .collect()
    }

    pub fn headers(&self, index: usize) -> HeaderMap {
        self.requests.lock().unwrap()[index].0.clone()
    }
}

fn sse(events: Vec<(Option<&str>, Value)>, done: bool) -> Response {
    let mut body = String::new();
    for (event, data) in events {
        if let Some(event) = event {
            body.push_str(&format!("event: {event}\n"));
        }
        body.push_str(&format!("data: {data}\n\n"));
    }
    if done {
        body.push_str("data: [DONE]\n\n");
    }
    Response::builder()
        .status(StatusCode::OK)
        .header("content-type", "text/event-stream")
        .body(Body::from(body))
        .unwrap()
}

/// Splits a string into three pieces, so every value crosses chunk boundaries.
fn thirds(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let n = chars.len();
    let cuts = [0, n / 3, 2 * n / 3, n];
    cuts.windows(2)
        .map(|w| chars[w[0]..w[1]].iter().collect())
        .filter(|s: &String| !s.is_empty())
        .collect()
}

fn plan(turns: &[Turn], tool_results: usize) -> Turn {
    let mut seen = 0;
    for turn in turns {
        match turn {
            Turn::Calls(calls) if seen >= tool_results => return turn.clone(),
            Turn::Calls(calls) => seen += calls.len(),
            Turn::Final(_) => return turn.clone(),
        }
    }
    Turn::Final("(script ran out)")
}

async fn openai(State(fake): State<Fake>, headers: HeaderMap, body: axum::body::Bytes) -> Response {
    let body: Value = serde_json::from_slice(&body).unwrap();
    fake.requests.lock().unwrap().push((headers, body.clone()));
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let results: Vec<String> = messages
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or_default().to_string())
        .collect();
    let chunk = |delta: Value, finish: Value| {
        (
            None,
            json!({"id": "c", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}),
        )
    };
    let mut events = vec![chunk(json!({"role": "assistant"}), Value::Null)];
    match plan(&fake.turns, results.len()) {
        Turn::Calls(calls) => {
            for (index, (name, arguments)) in calls.iter().enumerate() {
                let id = format!("call_{}_{index}", results.len());
                let text = arguments.to_string();
                let pieces = thirds(&text);
                events.push(chunk(json!({"tool_calls": [{"index": index, "id": id, "type": "function", "function": {"name": name, "arguments": pieces[0]}}]}), Value::Null));
                for piece in &pieces[1..] {
                    events.push(chunk(
                        json!({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}),
                        Value::Null,
                    ));
                }
            }
            events.push(chunk(json!({}), json!("tool_calls")));
        }
        Turn::Final(prefix) => {
            let text = format!("{prefix}{}", results.join(" | "));
            for piece in thirds(&text) {
                events.push(chunk(json!({"content": piece}), Value::Null));
            }
            events.push(chunk(json!({}), json!("stop")));
        }
    }
    events.push((None, json!({"id": "c", "object": "chat.completion.chunk", "choices": [], "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}})));
    sse(events, true)
}

async fn anthropic(
    State(fake): State<Fake>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let body: Value = serde_json::from_slice(&body).unwrap();
    fake.requests.lock().unwrap().push((headers, body.clone()));
    let mut results = Vec::new();
    for message in body["messages"].as_array().cloned().unwrap_or_default() {
        for block in message["content"].as_array().cloned().unwrap_or_default() {
            if block["type"] == "tool_result" {
                let text = match &block["content"] {
                    Value::String(s) => s.clone(),
                    Value::Array(parts) => parts
                        .iter()
                        .filter_map(|p| p["text"].as_str())
                        .collect::<Vec<_>>()
                        .join(""),
                    _ => String::new(),
                };
                results.push(text);
            }
        }
    }
    let mut events = vec![(
        Some("message_start"),
        json!({"type": "message_start", "message": {"id": "msg", "type": "message", "role": "assistant", "content": [], "model": "fake", "usage": {"input_tokens": 200, "output_tokens": 1}}}),
    )];
    let stop = match plan(&fake.turns, results.len()) {
        Turn::Calls(calls) => {
            for (index, (name, arguments)) in calls.iter().enumerate() {
                let id = format!("toolu_{}_{index}", results.len());
                events.push((Some("content_block_start"), json!({"type": "content_block_start", "index": index, "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}})));
                for piece in thirds(&arguments.to_string()) {
                    events.push((Some("content_block_delta"), json!({"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": piece}})));
                }
                events.push((
                    Some("content_block_stop"),
                    json!({"type": "content_block_stop", "index": index}),
                ));
            }
            "tool_use"
        }
        Turn::Final(prefix) => {
            let text = format!("{prefix}{}", results.join(" | "));
            events.push((Some("content_block_start"), json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})));
            for piece in thirds(&text) {
                events.push((Some("content_block_delta"), json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": piece}})));
            }
            events.push((
                Some("content_block_stop"),
                json!({"type": "content_block_stop", "index": 0}),
            ));
            "end_turn"
        }
    };
    events.push((Some("message_delta"), json!({"type": "message_delta", "delta": {"stop_reason": stop}, "usage": {"output_tokens": 20}})));
    events.push((Some("message_stop"), json!({"type": "message_stop"})));
    sse(events, false)
}
