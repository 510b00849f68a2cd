use std::time::Duration;

use portico_llm::{
    Anthropic, AnthropicSettings, ChatMessage, ChatRequest, JsonObject, LlmError, ModelDriver,
    ModelTurn, RetryPolicy, ToolCall, ToolSpec, Usage,
};
use portico_net::{BlockRule, NetPolicy, SafeClient};
use serde_json::{Value, json};

use crate::fake::{FakeServer, Reply, client, dead_origin, deltas, recorder, sse_body};

const KEY: &str = "sk-ant-test-0123456789";

fn obj(value: Value) -> JsonObject {
    value.as_object().unwrap().clone()
}

fn settings(origin: &str) -> AnthropicSettings {
    AnthropicSettings {
        base_url: origin.to_owned(),
        api_key: Some(KEY.to_owned()),
        api_key_env: Some("TEST_ANTHROPIC_KEY".to_owned()),
        model: "claude-test".to_owned(),
        extra_headers: Vec::new(),
        retry: RetryPolicy {
            max_retries: 3,
            base: Duration::from_millis(1),
            cap: Duration::from_millis(20),
        },
    }
}

fn ev(name: &'static str, data: Value) -> (&'static str, String) {
    (name, data.to_string())
}

fn message_start(input_tokens: u64) -> (&'static str, String) {
    ev(
        "message_start",
        json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant",
            "model": "claude-test", "content": [], "stop_reason": null,
            "usage": {"input_tokens": input_tokens, "output_tokens": 1}}}),
    )
}

fn text_stream(text: &str) -> String {
    sse_body(&[
        message_start(3),
        ev(
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        ),
        ev(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}}),
        ),
        ev(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ),
        ev(
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 2}}),
        ),
        ev("message_stop", json!({"type": "message_stop"})),
    ])
}

fn request() -> ChatRequest {
    ChatRequest {
        system: Some("Be brief.".into()),
        messages: vec![
            ChatMessage::User {
                text: "Weather and time in Paris?".into(),
                message_id: None,
            },
            ChatMessage::Assistant {
                text: "Looking.".into(),
                tool_calls: vec![
                    ToolCall {
                        id: "toolu_a".into(),
                        name: "get_weather".into(),
                        arguments: obj(json!({"city": "Paris"})),
                    },
                    ToolCall {
                        id: "toolu_b".into(),
                        name: "get_time".into(),
                        arguments: JsonObject::new(),
                    },
                ],
            },
            ChatMessage::Tool {
                call_id: "toolu_a".into(),
                name: "get_weather".into(),
                text: "sunny".into(),
                is_error: false,
            },
            ChatMessage::Tool {
                call_id: "toolu_b".into(),
                name: "get_time".into(),
                text: "clock broken".into(),
                is_error: true,
            },
            ChatMessage::User {
                text: "And tomorrow?".into(),
                message_id: None,
            },
        ],
        tools: vec![ToolSpec {
            name: "get_weather".into(),
            description: "Weather for a city".into(),
            input_schema: obj(
                json!({"type": "object", "properties": {"city": {"type": "string"}}}),
            ),
        }],
        temperature: None,
        max_tokens: None,
    }
}

#[tokio::test]
async fn streamed_blocks_assemble_into_a_turn() {
    let body = sse_body(&[
        message_start(25),
        ev(
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        ),
        ev("ping", json!({"type": "ping"})),
        ev(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Let me "}}),
        ),
        ev(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "check ☀."}}),
        ),
        ev(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ),
        ev(
            "content_block_start",
            json!({"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "toolu_01", "name": "get_weather", "input": {}}}),
        ),
        ev(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": ""}}),
        ),
        ev(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "{\"city\": \"Pa"}}),
        ),
        ev(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "ris\", \"days\": 2}"}}),
        ),
        ev(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 1}),
        ),
        ev(
            "content_block_start",
            json!({"type": "content_block_start", "index": 2, "content_block": {"type": "tool_use", "id": "toolu_02", "name": "get_time", "input": {}}}),
        ),
        ev(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 2}),
        ),
        ev(
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": null}, "usage": {"output_tokens": 30}}),
        ),
        ev("message_stop", json!({"type": "message_stop"})),
    ]);
    let server = FakeServer::start(vec![Reply::sse(body)]).await;
    let driver = Anthropic::new(settings(&server.origin), client());
    let (sink, seen) = recorder();

    let turn = driver.complete(&request(), &sink).await.unwrap();

    assert_eq!(
        turn,
        ModelTurn {
            text: "Let me check ☀.".into(),
            tool_calls: vec![
                ToolCall {
                    id: "toolu_01".into(),
                    name: "get_weather".into(),
                    arguments: obj(json!({"city": "Paris", "days": 2})),
                },
                ToolCall {
                    id: "toolu_02".into(),
                    name: "get_time".into(),
                    arguments: JsonObject::new(),
                },
            ],
            // message_delta's output count is cumulative: it replaces message_start's.
            usage: Usage {
                input_tokens: 25,
                output_tokens: 30,
            },
            stop_reason: Some("tool_use".into()),
        }
    );
    assert_eq!(
        deltas(&seen.lock().unwrap()),
        vec!["Let me ".to_owned(), "check ☀.".to_owned()]
    );

    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let received = &requests[0];
    assert_eq!(received.path, "/v1/messages");
    assert_eq!(received.headers["x-api-key"], KEY);
    assert_eq!(received.headers["anthropic-version"], "2023-06-01");
    assert!(!received.headers.contains_key("authorization"));
    assert_eq!(
        received.body,
        json!({
            "model": "claude-test",
            "max_tokens": 4096,
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "Weather and time in Paris?"}]},
                {"role": "assistant", "content": [
                    {"type": "text", "text": "Looking."},
                    {"type": "tool_use", "id": "toolu_a", "name": "get_weather", "input": {"city": "Paris"}},
                    {"type": "tool_use", "id": "toolu_b", "name": "get_time", "input": {}},
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_a", "content": "sunny"},
                    {"type": "tool_result", "tool_use_id": "toolu_b", "content": "clock broken", "is_error": true},
                    {"type": "text", "text": "And tomorrow?"},
                ]},
            ],
            "stream": true,
            "system": "Be brief.",
            "tools": [{
                "name": "get_weather",
                "description": "Weather for a city",
                "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
            }],
        })
    );
}

#[tokio::test]
async fn overload_is_retried_after_retry_after() {
    let server = FakeServer::start(vec![
        Reply::status(
            529,
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        )
        .with_header("retry-after", "0"),
        Reply::sse(text_stream("fine")),
    ])
    .await;
    let mut settings = settings(&server.origin);
    settings.retry.base = Duration::from_secs(100);
    settings.retry.cap = Duration::from_secs(100);
    let driver = Anthropic::new(settings, client());
    let (sink, _) = recorder();

    let turn = tokio::time::timeout(Duration::from_secs(20), driver.complete(&request(), &sink))
        .await
        .expect("Retry-After: 0 was not honoured")
        .unwrap();

    assert_eq!(turn.text, "fine");
    assert_eq!(
        turn.usage,
        Usage {
            input_tokens: 3,
            output_tokens: 2
        }
    );
    assert_eq!(server.hits(), 2);
}

#[tokio::test]
async fn an_error_event_mid_stream_fails_without_retry() {
    let body = sse_body(&[
        message_start(3),
        ev(
            "error",
            json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
        ),
    ]);
    let server = FakeServer::start(vec![Reply::sse(body), Reply::sse(text_stream("again"))]).await;
    let driver = Anthropic::new(settings(&server.origin), client());
    let (sink, _) = recorder();

    let err = driver.complete(&request(), &sink).await.unwrap_err();

    assert_eq!(
        err,
        LlmError::Protocol {
            provider: "anthropic".into(),
            detail: "the stream reported overloaded_error: Overloaded".into(),
        }
    );
    assert_eq!(server.hits(), 1);
}

#[tokio::test]
async fn bad_tool_json_names_the_tool() {
    let body = sse_body(&[
        message_start(3),
        ev(
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "toolu_x", "name": "search", "input": {}}}),
        ),
        ev(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "{\"q\": tru"}}),
        ),
        ev(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ),
        ev("message_stop", json!({"type": "message_stop"})),
    ]);
    let server = FakeServer::start(vec![Reply::sse(body)]).await;
    let driver = Anthropic::new(settings(&server.origin), client());
    let (sink, _) = recorder();

    let err = driver.complete(&request(), &sink).await.unwrap_err();

    match &err {
        LlmError::Protocol { detail, .. } => {
            assert!(detail.contains("\"search\""), "{detail}");
            assert!(detail.contains("{\"q\": tru"), "{detail}");
        }
        other => panic!("expected Protocol, got {other:?}"),
    }
}

#[tokio::test]
async fn client_errors_are_not_retried() {
    let server = FakeServer::start(vec![
        Reply::status(
            400,
            r#"{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: too big"}}"#,
        ),
        Reply::sse(text_stream("never")),
    ])
    .await;
    let driver = Anthropic::new(settings(&server.origin), client());
    let (sink, _) = recorder();

    let err = driver.complete(&request(), &sink).await.unwrap_err();

    match &err {
        LlmError::Http {
            status: 400,
            body_excerpt,
            ..
        } => assert!(
            body_excerpt.contains("max_tokens: too big"),
            "{body_excerpt}"
        ),
        other => panic!("expected HTTP 400, got {other:?}"),
    }
    assert_eq!(server.hits(), 1);
}

#[tokio::test]
async fn missing_key_names_the_variable() {
    let server = FakeServer::start(vec![Reply::sse(text_stream("no"))]).await;
    let mut settings = settings(&server.origin);
    settings.api_key = None;
    let driver = Anthropic::new(settings, client());
    let (sink, _) = recorder();

    let err = driver.complete(&request(), &sink).await.unwrap_err();

    assert!(
        matches!(&err, LlmError::MissingKey { env_var, .. } if env_var == "TEST_ANTHROPIC_KEY"),
        "{err:?}"
    );
    assert!(err.to_string().contains("TEST_ANTHROPIC_KEY"), "{err}");
    assert_eq!(server.hits(), 0);

    let default = Anthropic::new(AnthropicSettings::default(), client());
    assert!(
        default
            .check()
            .unwrap_err()
            .to_string()
            .contains("ANTHROPIC_API_KEY")
    );
}

#[tokio::test]
async fn unreachable_and_blocked() {
    let origin = dead_origin().await;
    let mut dead = settings(&origin);
    dead.retry.max_retries = 0;
    let err = Anthropic::new(dead, client())
        .complete(&request(), &recorder().0)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, LlmError::Unreachable { url, .. } if url == &format!("{origin}/v1/messages")),
        "{err:?}"
    );

    let server = FakeServer::start(vec![Reply::sse(text_stream("no"))]).await;
    let strict = Anthropic::new(
        settings(&server.origin),
        SafeClient::new(NetPolicy::public_only()).unwrap(),
    );
    let err = strict
        .complete(&request(), &recorder().0)
        .await
        .unwrap_err();
    assert!(
        matches!(
            &err,
            LlmError::Blocked {
                rule: Some(BlockRule::Loopback),
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(server.hits(), 0);
    assert!(!format!("{:?}", strict.settings()).contains(KEY));
    assert_eq!(
        strict.describe(),
        format!("anthropic claude-test at {}", server.origin)
    );
}
