//! The A2A door (JSON-RPC 1.0 and 0.3, HTTP+JSON 1.0 and 0.3, the legacy `tasks/send`) and the
//! A2A documents Portico reads: agent cards and messages in either form.

use http::Method;
use portico_a2a_client::AgentCard;
use portico_a2a_client::wire;
use serde_json::Value;

use crate::door::runtime;
use crate::requests::{self, Memo};

fn run(data: &[u8], method: Method, path: &str, what: &str) {
    runtime().block_on(async {
        let mut memo = Memo::default();
        for part in requests::split(data) {
            let req = requests::parse(part, method.clone(), path);
            let Some(request) = requests::build(&req, &memo, "application/json, text/event-stream")
            else {
                continue;
            };
            let resp = requests::send(request).await;
            requests::check(&resp, what);
            requests::remember(&resp, &mut memo);
        }
    });
}

/// `data` is up to eight requests to the A2A routes, POST `{listen_path}/echo` (JSON-RPC) unless a
/// request line says otherwise; `A2A-Version` picks 1.0 or 0.3 method names.
pub fn a2a_jsonrpc(data: &[u8]) {
    run(data, Method::POST, "/a2a/echo", "A2A JSON-RPC");
}

/// `data` is up to eight requests to the A2A HTTP+JSON routes (1.0 under `/a2a/echo`, 0.3 under
/// `/a2a/echo/v1`, the legacy `/a2a/tasks/send`), POST `message:send` unless a request line says
/// otherwise.
pub fn a2a_rest(data: &[u8]) {
    run(
        data,
        Method::POST,
        "/a2a/echo/message:send",
        "A2A HTTP+JSON",
    );
}

/// `data` is a JSON document read as an agent card (the client's discovery), as a message in either
/// form, as a task and as a stream event (the converters between the 1.0 and 0.3 forms).
pub fn a2a_parse(data: &[u8]) {
    let Ok(value) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    for card_url in [
        "https://agent.example/.well-known/agent-card.json",
        "http://127.0.0.1:4200/a2a/echo/.well-known/agent-card.json",
        "not a url",
    ] {
        if let Ok(card) = AgentCard::parse(card_url, &value) {
            // The client sends every request to this URL: it must be absolute.
            if let Err(e) = url::Url::parse(&card.endpoint.url) {
                panic!(
                    "a parsed card's endpoint `{}` is not an absolute URL: {e}",
                    card.endpoint.url
                );
            }
            assert!(!card.name.trim().is_empty(), "a parsed card has a name");
            let _ = card.summary();
        }
    }
    let candidates = [
        &value,
        value.get("message").unwrap_or(&Value::Null),
        value.pointer("/params/message").unwrap_or(&Value::Null),
        value.get("task").unwrap_or(&Value::Null),
        value.get("result").unwrap_or(&Value::Null),
    ];
    for candidate in candidates {
        let v1 = wire::message_from_any(candidate);
        let text = wire::message_text(&v1);
        // 1.0 → 0.3 → 1.0 keeps what the agent reads.
        let back = wire::message_from_any(&wire::message_to_v03(&v1));
        assert_eq!(
            wire::message_text(&back),
            text,
            "a message read in the 1.0 form, sent as 0.3 and read back, says something else: {v1}"
        );
        let _ = wire::task_to_v03(candidate);
        let _ = wire::stream_event_to_v03(candidate);
        if let Some(state) = candidate.pointer("/status/state").and_then(Value::as_str)
            && let Some(known) = wire::state_from_any(state)
        {
            let _ = wire::state_to_v03(known);
            let _ = (wire::is_terminal(known), wire::is_interrupted(known));
        }
        typed_round_trips(candidate);
    }
}

/// The protocol types read what they read without panicking, and a message or task read as 1.0,
/// written as 0.3 and read back says the same.
fn typed_round_trips(candidate: &Value) {
    use portico_a2a_client::protocol::{v1, v03};
    if let Ok(message) = serde_json::from_value::<v03::IncomingMessage>(candidate.clone()) {
        let v1 = v1::Message::from(message);
        let as_v03 = serde_json::to_value(v03::Message::from(v1.clone())).unwrap();
        let back: v1::Message = serde_json::from_value::<v03::IncomingMessage>(as_v03)
            .expect("a message Portico wrote as 0.3 reads back")
            .into();
        assert_eq!(back.text(), v1.text(), "{candidate}");
    }
    if let Ok(task) = serde_json::from_value::<v1::Task>(candidate.clone()) {
        let state = task.status.state;
        let v03 = serde_json::to_value(v03::Task::from(task)).unwrap();
        assert_eq!(v03["kind"], "task");
        assert_eq!(v03["status"]["state"], state.v03_name(), "{candidate}");
    }
    let _ = serde_json::from_value::<v1::StreamResponse>(candidate.clone())
        .map(|event| serde_json::to_value(v03::StreamEvent::from(event)).unwrap());
}
