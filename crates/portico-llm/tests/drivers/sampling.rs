use std::sync::{Arc, Mutex};

use portico_core::relay::{
    BoxFuture, Caller, RelayError, RelayNotification, RelayRequest, SamplingAnswer, SamplingError,
    SamplingRequest,
};
use portico_llm::{
    ChatMessage, ChatRequest, JsonObject, LlmError, ModelDriver, Sampling, StreamEvent, ToolCall,
    ToolSpec, Usage,
};
use serde_json::{Value, json};

use crate::fake::recorder;

/// A calling client that records what it is asked and answers from a canned result.
struct FakeCaller {
    sampling: bool,
    answer: Result<Value, RelayError>,
    asked: Mutex<Vec<(RelayRequest, JsonObject)>>,
}

impl FakeCaller {
    fn new(sampling: bool, answer: Result<Value, RelayError>) -> Arc<Self> {
        Arc::new(FakeCaller {
            sampling,
            answer,
            asked: Mutex::default(),
        })
    }
}

impl Caller for FakeCaller {
    fn accepts(&self, request: RelayRequest) -> bool {
        self.sampling && request == RelayRequest::Sampling
    }

    fn request<'a>(
        &'a self,
        request: RelayRequest,
        params: JsonObject,
    ) -> BoxFuture<'a, Result<JsonObject, RelayError>> {
        self.asked.lock().unwrap().push((request, params));
        let answer = self.answer.clone().map(|v| v.as_object().unwrap().clone());
        Box::pin(async move { answer })
    }

    /// As the MCP edge's callers do: the request written as protocol JSON, which is what the
    /// tests read, and the canned JSON answer read back.
    fn sample<'a>(
        &'a self,
        request: SamplingRequest,
    ) -> BoxFuture<'a, Result<SamplingAnswer, SamplingError>> {
        portico_mcp::sample_through(self, request)
    }

    fn notify<'a>(
        &'a self,
        _notification: RelayNotification,
        _params: JsonObject,
    ) -> BoxFuture<'a, ()> {
        Box::pin(async {})
    }
}

fn conversation() -> ChatRequest {
    ChatRequest {
        system: Some("Be helpful.".into()),
        messages: vec![
            ChatMessage::User {
                text: "Find docs".into(),
                message_id: None,
            },
            ChatMessage::Assistant {
                text: "Searching.".into(),
                tool_calls: vec![
                    ToolCall {
                        id: "t1".into(),
                        name: "search".into(),
                        arguments: json!({"q": "docs"}).as_object().unwrap().clone(),
                    },
                    ToolCall {
                        id: "t2".into(),
                        name: "search".into(),
                        arguments: JsonObject::new(),
                    },
                ],
            },
            ChatMessage::Tool {
                call_id: "t1".into(),
                name: "search".into(),
                text: "found 3".into(),
                is_error: false,
            },
            ChatMessage::Tool {
                call_id: "t2".into(),
                name: "search".into(),
                text: "bad query".into(),
                is_error: true,
            },
        ],
        tools: vec![ToolSpec {
            name: "search".into(),
            description: "Search docs".into(),
            input_schema: json!({"type": "object", "properties": {"q": {"type": "string"}}})
                .as_object()
                .unwrap()
                .clone(),
        }],
        temperature: Some(0.2),
        max_tokens: None,
    }
}

#[tokio::test]
async fn params_follow_sampling_with_tools_and_text_comes_back() {
    let caller = FakeCaller::new(
        true,
        Ok(
            json!({"role": "assistant", "content": {"type": "text", "text": "Here they are."},
                  "model": "client-model", "stopReason": "endTurn"}),
        ),
    );
    let driver = Sampling::new(caller.clone());
    let (sink, seen) = recorder();

    let turn = driver.complete(&conversation(), &sink).await.unwrap();

    assert_eq!(turn.text, "Here they are.");
    assert!(turn.tool_calls.is_empty());
    assert_eq!(turn.stop_reason.as_deref(), Some("endTurn"));
    assert_eq!(turn.usage, Usage::default());
    assert_eq!(
        seen.lock().unwrap().clone(),
        vec![StreamEvent::TextDelta("Here they are.".into())]
    );

    let asked = caller.asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].0, RelayRequest::Sampling);
    assert_eq!(
        Value::Object(asked[0].1.clone()),
        json!({
            "messages": [
                {"role": "user", "content": {"type": "text", "text": "Find docs"}},
                {"role": "assistant", "content": [
                    {"type": "text", "text": "Searching."},
                    {"type": "tool_use", "id": "t1", "name": "search", "input": {"q": "docs"}},
                    {"type": "tool_use", "id": "t2", "name": "search", "input": {}},
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "toolUseId": "t1",
                     "content": [{"type": "text", "text": "found 3"}], "isError": false},
                    {"type": "tool_result", "toolUseId": "t2",
                     "content": [{"type": "text", "text": "bad query"}], "isError": true},
                ]},
            ],
            "systemPrompt": "Be helpful.",
            "maxTokens": 1024,
            "temperature": 0.2,
            "tools": [{"name": "search", "description": "Search docs",
                       "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}}}],
            "toolChoice": {"mode": "auto"},
        })
    );
}

#[tokio::test]
async fn tool_use_results_become_tool_calls() {
    let caller = FakeCaller::new(
        true,
        Ok(
            json!({"role": "assistant", "model": "m", "stopReason": "toolUse", "content": [
                {"type": "text", "text": "Let me look."},
                {"type": "tool_use", "id": "u1", "name": "search", "input": {"q": "x"}},
                {"type": "tool_use", "id": "u2", "name": "search", "input": {}},
            ]}),
        ),
    );
    let driver = Sampling::new(caller);

    let turn = driver
        .complete(&conversation(), &recorder().0)
        .await
        .unwrap();

    assert_eq!(turn.text, "Let me look.");
    assert_eq!(turn.stop_reason.as_deref(), Some("toolUse"));
    assert_eq!(
        turn.tool_calls,
        vec![
            ToolCall {
                id: "u1".into(),
                name: "search".into(),
                arguments: json!({"q": "x"}).as_object().unwrap().clone(),
            },
            ToolCall {
                id: "u2".into(),
                name: "search".into(),
                arguments: JsonObject::new(),
            },
        ]
    );
}

#[tokio::test]
async fn a_client_without_sampling_is_not_available() {
    let caller = FakeCaller::new(false, Ok(json!({})));
    let driver = Sampling::new(caller.clone());

    let err = driver
        .complete(&conversation(), &recorder().0)
        .await
        .unwrap_err();

    assert!(
        matches!(&err, LlmError::NotAvailable { detail } if detail.contains("did not declare the sampling capability")),
        "{err:?}"
    );
    assert!(caller.asked.lock().unwrap().is_empty());
}

#[tokio::test]
async fn a_refusal_carries_the_clients_message() {
    let caller = FakeCaller::new(
        true,
        Err(RelayError {
            code: -1,
            message: "User rejected sampling request".into(),
        }),
    );
    let err = Sampling::new(caller)
        .complete(&conversation(), &recorder().0)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, LlmError::Sampling { detail } if detail.contains("User rejected sampling request")),
        "{err:?}"
    );
}

#[tokio::test]
async fn without_tools_nothing_about_tools_is_sent() {
    let caller = FakeCaller::new(
        true,
        Ok(json!({"role": "assistant", "content": {"type": "text", "text": "hi"}, "model": "m"})),
    );
    let request = ChatRequest {
        messages: vec![ChatMessage::User {
            text: "hi".into(),
            message_id: None,
        }],
        max_tokens: Some(50),
        ..ChatRequest::default()
    };
    Sampling::new(caller.clone())
        .complete(&request, &recorder().0)
        .await
        .unwrap();
    let params = caller.asked.lock().unwrap()[0].1.clone();
    assert_eq!(
        Value::Object(params),
        json!({"messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}], "maxTokens": 50})
    );
}
