use std::sync::Arc;
use std::time::Duration;

use portico_llm::{
    ChatMessage, ChatRequest, EventSink, JsonObject, LlmError, ModelDriver, ModelTurn,
    OpenAiCompatible, OpenAiSettings, RetryPolicy, StreamEvent, ToolCall, ToolSpec, Usage,
};
use portico_net::{BlockRule, NetPolicy, SafeClient};
use serde_json::{Value, json};
use tokio::sync::Notify;

use crate::fake::{FakeServer, Reply, client, dead_origin, deltas, recorder, sse_body};

const KEY: &str = "sk-test-0123456789";

fn obj(value: Value) -> JsonObject {
    value.as_object().unwrap().clone()
}

fn settings(origin: &str) -> OpenAiSettings {
    OpenAiSettings {
        base_url: format!("{origin}/v1"),
        api_key: Some(KEY.to_owned()),
        api_key_env: Some("TEST_OPENAI_KEY".to_owned()),
        model: "gpt-test".to_owned(),
        provider_label: "testai".to_owned(),
        extra_headers: vec![("X-Title".to_owned(), "portico-tests".to_owned())],
        retry: RetryPolicy {
            max_retries: 3,
            base: Duration::from_millis(1),
            cap: Duration::from_millis(20),
        },
    }
}

fn chunk(delta: Value) -> String {
    json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": null}]})
        .to_string()
}

fn text_stream(text: &str) -> String {
    sse_body(&[
        ("", chunk(json!({"role": "assistant", "content": text}))),
        (
            "",
            json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}).to_string(),
        ),
        ("", "[DONE]".to_owned()),
    ])
}

/// A conversation with one earlier tool round, so the request shows every message kind.
fn request() -> ChatRequest {
    ChatRequest {
        system: Some("You are terse.".into()),
        messages: vec![
            ChatMessage::User {
                text: "Weather in Paris, and the time?".into(),
                message_id: Some("m1".into()),
            },
            ChatMessage::Assistant {
                text: String::new(),
                tool_calls: vec![ToolCall {
                    id: "call_prev".into(),
                    name: "lookup".into(),
                    arguments: obj(json!({"q": "Paris"})),
                }],
            },
            ChatMessage::Tool {
                call_id: "call_prev".into(),
                name: "lookup".into(),
                text: "not found".into(),
                is_error: true,
            },
        ],
        tools: vec![
            ToolSpec {
                name: "get_weather".into(),
                description: "Weather for a city".into(),
                input_schema: obj(
                    json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
                ),
            },
            ToolSpec {
                name: "get_time".into(),
                description: "The time".into(),
                input_schema: JsonObject::new(),
            },
        ],
        temperature: Some(0.5),
        max_tokens: Some(256),
    }
}

#[tokio::test]
async fn streamed_text_and_tool_calls_assemble_into_a_turn() {
    let body = sse_body(&[
        ("", chunk(json!({"role": "assistant", "content": ""}))),
        ("", chunk(json!({"content": "Checking "}))),
        ("", chunk(json!({"content": "the wéather…"}))),
        (
            "",
            chunk(json!({"tool_calls": [{"index": 0, "id": "call_a", "type": "function", "function": {"name": "get_weather", "arguments": ""}}]})),
        ),
        (
            "",
            chunk(json!({"tool_calls": [{"index": 0, "function": {"arguments": "{\"ci"}}]})),
        ),
        (
            "",
            chunk(json!({"tool_calls": [{"index": 1, "id": "call_b", "type": "function", "function": {"name": "get_time", "arguments": ""}}]})),
        ),
        (
            "",
            chunk(json!({"tool_calls": [{"index": 0, "function": {"arguments": "ty\": \"Paris\"}"}}]})),
        ),
        (
            "",
            json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
                .to_string(),
        ),
        (
            "",
            json!({"choices": [], "usage": {"prompt_tokens": 42, "completion_tokens": 17, "total_tokens": 59}}).to_string(),
        ),
        ("", "[DONE]".to_owned()),
    ]);
    let server = FakeServer::start(vec![Reply::sse(body)]).await;
    let driver = OpenAiCompatible::new(settings(&server.origin), client());
    let (sink, seen) = recorder();

    let turn = driver.complete(&request(), &sink).await.unwrap();

    assert_eq!(
        turn,
        ModelTurn {
            text: "Checking the wéather…".into(),
            tool_calls: vec![
                ToolCall {
                    id: "call_a".into(),
                    name: "get_weather".into(),
                    arguments: obj(json!({"city": "Paris"})),
                },
                ToolCall {
                    id: "call_b".into(),
                    name: "get_time".into(),
                    arguments: JsonObject::new(),
                },
            ],
            usage: Usage {
                input_tokens: 42,
                output_tokens: 17,
            },
            stop_reason: Some("tool_calls".into()),
        }
    );
    assert_eq!(
        deltas(&seen.lock().unwrap()),
        vec!["Checking ".to_owned(), "the wéather…".to_owned()]
    );

    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let received = &requests[0];
    assert_eq!(received.method, "POST");
    assert_eq!(received.path, "/v1/chat/completions");
    assert_eq!(
        received.headers["authorization"],
        format!("Bearer {KEY}").as_str()
    );
    assert_eq!(received.headers["x-title"], "portico-tests");
    assert_eq!(received.headers["accept"], "text/event-stream");
    assert_eq!(
        received.body,
        json!({
            "model": "gpt-test",
            "messages": [
                {"role": "system", "content": "You are terse."},
                {"role": "user", "content": "Weather in Paris, and the time?"},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "call_prev", "type": "function",
                     "function": {"name": "lookup", "arguments": "{\"q\":\"Paris\"}"}}
                ]},
                {"role": "tool", "tool_call_id": "call_prev", "content": "Error: not found"},
            ],
            "stream": true,
            "stream_options": {"include_usage": true},
            "tools": [
                {"type": "function", "function": {
                    "name": "get_weather",
                    "description": "Weather for a city",
                    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
                }},
                {"type": "function", "function": {
                    "name": "get_time",
                    "description": "The time",
                    "parameters": {"type": "object", "properties": {}},
                }},
            ],
            "temperature": 0.5,
            "max_tokens": 256,
        })
    );
}

#[tokio::test]
async fn text_is_handed_on_before_the_response_ends() {
    // The server holds the rest of the stream until the sink has seen the first delta: a driver
    // that buffered the response would wait forever.
    let gate = Arc::new(Notify::new());
    let first = sse_body(&[("", chunk(json!({"content": "early"})))]);
    let rest = text_stream(" late");
    let server = FakeServer::start(vec![Reply::Gated {
        first,
        gate: gate.clone(),
        rest,
    }])
    .await;
    let driver = OpenAiCompatible::new(settings(&server.origin), client());
    let opener = gate.clone();
    let sink: EventSink = Arc::new(move |event| {
        if matches!(event, StreamEvent::TextDelta(_)) {
            opener.notify_one();
        }
    });

    let turn = tokio::time::timeout(Duration::from_secs(20), driver.complete(&request(), &sink))
        .await
        .expect("the first delta was not delivered while the stream was open")
        .unwrap();
    assert_eq!(turn.text, "early late");
}

#[tokio::test]
async fn rate_limit_is_retried_after_retry_after() {
    let server = FakeServer::start(vec![
        Reply::status(429, r#"{"error":{"message":"slow down"}}"#).with_header("retry-after", "0"),
        Reply::sse(text_stream("ok")),
    ])
    .await;
    let mut settings = settings(&server.origin);
    // Backoff alone would wait at least 50 s, far past the test's deadline: only honouring the
    // server's `Retry-After: 0` lets this finish.
    settings.retry.base = Duration::from_secs(100);
    settings.retry.cap = Duration::from_secs(100);
    let driver = OpenAiCompatible::new(settings, client());
    let (sink, _) = recorder();

    let turn = tokio::time::timeout(Duration::from_secs(20), driver.complete(&request(), &sink))
        .await
        .expect("Retry-After: 0 was not honoured")
        .unwrap();

    assert_eq!(turn.text, "ok");
    assert_eq!(server.hits(), 2);
}

#[tokio::test]
async fn server_errors_are_retried_up_to_max_retries() {
    let server = FakeServer::start(vec![
        Reply::status(500, "boom"),
        Reply::status(502, "boom"),
        Reply::status(503, "boom"),
        Reply::sse(text_stream("finally")),
    ])
    .await;
    let driver = OpenAiCompatible::new(settings(&server.origin), client());
    let (sink, _) = recorder();

    let turn = driver.complete(&request(), &sink).await.unwrap();

    assert_eq!(turn.text, "finally");
    assert_eq!(server.hits(), 4);
}

#[tokio::test]
async fn retries_run_out() {
    let server = FakeServer::start(vec![
        Reply::status(500, "one"),
        Reply::status(500, "two"),
        Reply::status(500, "three"),
        Reply::status(503, "still down"),
        Reply::sse(text_stream("too late")),
    ])
    .await;
    let driver = OpenAiCompatible::new(settings(&server.origin), client());
    let (sink, _) = recorder();

    let err = driver.complete(&request(), &sink).await.unwrap_err();

    assert_eq!(
        err,
        LlmError::Http {
            provider: "testai".into(),
            status: 503,
            body_excerpt: "still down".into(),
        }
    );
    assert_eq!(server.hits(), 4);
}

#[tokio::test]
async fn client_errors_are_not_retried_and_quote_the_body_without_the_key() {
    let body = format!(
        r#"{{"error":{{"message":"Incorrect API key provided: {KEY}"}}}} {}"#,
        "x".repeat(2000)
    );
    let server = FakeServer::start(vec![
        Reply::status(400, body),
        Reply::sse(text_stream("never")),
    ])
    .await;
    let driver = OpenAiCompatible::new(settings(&server.origin), client());
    let (sink, _) = recorder();

    let err = driver.complete(&request(), &sink).await.unwrap_err();

    assert_eq!(server.hits(), 1);
    let LlmError::Http {
        status,
        body_excerpt,
        ..
    } = &err
    else {
        panic!("expected an HTTP error, got {err:?}");
    };
    assert_eq!(*status, 400);
    assert!(
        body_excerpt
            .starts_with(r#"{"error":{"message":"Incorrect API key provided: [redacted]"}}"#),
        "{body_excerpt}"
    );
    assert_eq!(
        body_excerpt.chars().count(),
        501,
        "500 characters and an ellipsis"
    );
    assert!(!err.to_string().contains(KEY), "{err}");
}

#[tokio::test]
async fn a_stream_cut_short_is_an_error_and_not_retried() {
    let cut = sse_body(&[("", chunk(json!({"content": "half an ans"})))]);
    let server = FakeServer::start(vec![Reply::sse(cut), Reply::sse(text_stream("again"))]).await;
    let driver = OpenAiCompatible::new(settings(&server.origin), client());
    let (sink, seen) = recorder();

    let err = driver.complete(&request(), &sink).await.unwrap_err();

    assert!(matches!(err, LlmError::Protocol { .. }), "{err:?}");
    assert_eq!(server.hits(), 1);
    assert_eq!(
        deltas(&seen.lock().unwrap()),
        vec!["half an ans".to_owned()]
    );
}

#[tokio::test]
async fn a_dead_server_is_unreachable_after_the_retries() {
    let origin = dead_origin().await;
    let mut settings = settings(&origin);
    settings.retry.max_retries = 1;
    let driver = OpenAiCompatible::new(settings, client());
    let (sink, _) = recorder();

    let err = driver.complete(&request(), &sink).await.unwrap_err();

    let url = format!("{origin}/v1/chat/completions");
    match &err {
        LlmError::Unreachable {
            provider,
            url: reported,
            ..
        } => {
            assert_eq!(provider, "testai");
            assert_eq!(reported, &url);
        }
        other => panic!("expected Unreachable, got {other:?}"),
    }
    assert!(
        err.to_string()
            .contains(&format!("is the server running at {url}")),
        "{err}"
    );
}

#[tokio::test]
async fn openai_without_a_key_says_what_to_set_and_sends_nothing() {
    let server = FakeServer::start(vec![Reply::sse(text_stream("no"))]).await;
    let mut settings = settings(&server.origin);
    settings.provider_label = "openai".into();
    settings.api_key = None;
    let driver = OpenAiCompatible::new(settings, client());
    let (sink, _) = recorder();

    let err = driver.complete(&request(), &sink).await.unwrap_err();

    assert_eq!(
        err,
        LlmError::MissingKey {
            provider: "openai".into(),
            env_var: "TEST_OPENAI_KEY".into(),
        }
    );
    assert!(
        err.to_string()
            .contains("set the TEST_OPENAI_KEY environment variable")
    );
    assert_eq!(driver.check(), Err(err));
    assert_eq!(server.hits(), 0);

    // The host alone marks OpenAI too, with the usual variable when none is configured.
    let hosted = OpenAiCompatible::new(
        OpenAiSettings {
            model: "gpt-4o-mini".into(),
            provider_label: "work".into(),
            ..OpenAiSettings::default()
        },
        SafeClient::new(NetPolicy::public_only()).unwrap(),
    );
    assert!(hosted.requires_key());
    match hosted.check() {
        Err(LlmError::MissingKey { env_var, .. }) => assert_eq!(env_var, "OPENAI_API_KEY"),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        hosted.describe(),
        "work gpt-4o-mini at https://api.openai.com/v1"
    );
}

#[tokio::test]
async fn keyless_local_servers_work_without_authorization() {
    let server = FakeServer::start(vec![Reply::sse(text_stream("local"))]).await;
    let mut settings = settings(&server.origin);
    settings.provider_label = "ollama".into();
    settings.api_key = Some(String::new());
    settings.extra_headers.clear();
    let driver = OpenAiCompatible::new(settings, client());
    let (sink, _) = recorder();

    let turn = driver.complete(&request(), &sink).await.unwrap();

    assert_eq!(turn.text, "local");
    assert!(!server.requests()[0].headers.contains_key("authorization"));
    assert!(!driver.describe().contains(KEY));
    assert!(!format!("{:?}", driver.settings()).contains(KEY));
}

#[tokio::test]
async fn loopback_is_refused_under_a_public_only_policy() {
    let server = FakeServer::start(vec![Reply::sse(text_stream("no"))]).await;
    let driver = OpenAiCompatible::new(
        settings(&server.origin),
        SafeClient::new(NetPolicy::public_only()).unwrap(),
    );
    let (sink, _) = recorder();

    let err = driver.complete(&request(), &sink).await.unwrap_err();

    match &err {
        LlmError::Blocked { rule, .. } => assert_eq!(*rule, Some(BlockRule::Loopback)),
        other => panic!("expected Blocked, got {other:?}"),
    }
    assert!(err.to_string().contains("loopback"), "{err}");
    assert_eq!(server.hits(), 0);
}

#[tokio::test]
async fn a_json_answer_to_a_stream_request_is_a_protocol_error() {
    let server = FakeServer::start(vec![Reply::status(
        200,
        r#"{"choices":[{"message":{"content":"hi"}}]}"#,
    )])
    .await;
    let driver = OpenAiCompatible::new(settings(&server.origin), client());
    let (sink, _) = recorder();

    let err = driver.complete(&request(), &sink).await.unwrap_err();

    assert!(
        matches!(&err, LlmError::Protocol { detail, .. } if detail.contains("text/event-stream")),
        "{err:?}"
    );
}
