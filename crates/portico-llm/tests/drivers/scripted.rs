use std::time::Duration;

use portico_llm::{
    ArtifactPart, ChatMessage, ChatRequest, JsonObject, LlmError, ModelDriver, ScriptRule,
    Scripted, StreamEvent, ToolCall, ToolSpec, Usage,
};
use serde_json::{Value, json};

use crate::fake::{deltas, recorder};

fn user(text: &str) -> ChatMessage {
    ChatMessage::User {
        text: text.into(),
        message_id: None,
    }
}

fn request(messages: Vec<ChatMessage>) -> ChatRequest {
    ChatRequest {
        messages,
        tools: ["search", "fetch"]
            .iter()
            .map(|name| ToolSpec {
                name: (*name).into(),
                description: String::new(),
                input_schema: JsonObject::new(),
            })
            .collect(),
        ..ChatRequest::default()
    }
}

fn script(value: Value) -> Scripted {
    Scripted::from_json(&value).unwrap()
}

/// The assistant message the agent loop would append for a turn's calls.
fn assistant(calls: &[ToolCall]) -> ChatMessage {
    ChatMessage::Assistant {
        text: String::new(),
        tool_calls: calls.to_vec(),
    }
}

fn tool_result(call: &ToolCall, text: &str) -> ChatMessage {
    ChatMessage::Tool {
        call_id: call.id.clone(),
        name: call.name.clone(),
        text: text.into(),
        is_error: false,
    }
}

#[tokio::test]
async fn a_script_plays_turn_by_turn_through_the_conversation() {
    let driver = script(json!([
        {"when": {"text": "^weather in (\\w+)"}, "steps": [
            {"status": {"state": "working", "message": "looking up {{message}}"}},
            {"call_tool": {"name": "search", "arguments": {"q": "{{message}}", "n": 3, "nested": ["{{tools}}"]}}},
            {"reply": "It is {{last_tool_result}}."},
        ]},
    ]));
    let (sink, seen) = recorder();
    let mut messages = vec![user("weather in Paris")];

    let first = driver
        .complete(&request(messages.clone()), &sink)
        .await
        .unwrap();
    assert_eq!(first.text, "");
    assert_eq!(first.stop_reason.as_deref(), Some("tool_use"));
    assert_eq!(
        first.tool_calls,
        vec![ToolCall {
            id: "call_1".into(),
            name: "search".into(),
            arguments: json!({"q": "weather in Paris", "n": 3, "nested": ["search,fetch"]})
                .as_object()
                .unwrap()
                .clone(),
        }]
    );
    assert_eq!(
        seen.lock().unwrap().clone(),
        vec![StreamEvent::Status {
            state: "working".into(),
            message: Some("looking up weather in Paris".into()),
        }]
    );

    messages.push(assistant(&first.tool_calls));
    messages.push(tool_result(&first.tool_calls[0], "sunny"));
    seen.lock().unwrap().clear();
    let second = driver
        .complete(&request(messages.clone()), &sink)
        .await
        .unwrap();
    assert_eq!(second.text, "It is sunny.");
    assert!(second.tool_calls.is_empty());
    assert_eq!(
        deltas(&seen.lock().unwrap()),
        vec!["It ".to_owned(), "is ".to_owned(), "sunny.".to_owned()]
    );
    // 16 + 5 characters of request text, 12 of reply.
    assert_eq!(
        second.usage,
        Usage {
            input_tokens: 5,
            output_tokens: 3
        }
    );

    // Past the end of the script: the last tool result is the answer.
    messages.push(ChatMessage::Assistant {
        text: second.text.clone(),
        tool_calls: Vec::new(),
    });
    let third = driver
        .complete(&request(messages.clone()), &sink)
        .await
        .unwrap();
    assert_eq!(third.text, "sunny");

    // A new user message starts the script over.
    messages.push(user("weather in Oslo"));
    let again = driver.complete(&request(messages), &sink).await.unwrap();
    assert_eq!(again.tool_calls[0].arguments["q"], json!("weather in Oslo"));
    assert_eq!(
        again.tool_calls[0].id, "call_2",
        "ids stay unique in the conversation"
    );
}

#[tokio::test]
async fn consecutive_calls_form_one_parallel_turn() {
    let driver = script(json!([{"steps": [
        {"call_tool": {"name": "search", "arguments": {"q": "a"}}},
        {"call_tool": {"name": "fetch", "arguments": {"url": "b"}}},
        {"call_tool": {"name": "search", "arguments": {"q": "c"}}},
        {"wait_ms": 1},
        {"call_tool": {"name": "fetch"}},
        {"reply": "done"},
    ]}]));
    let (sink, _) = recorder();
    let mut messages = vec![user("go")];

    let first = driver
        .complete(&request(messages.clone()), &sink)
        .await
        .unwrap();
    let names: Vec<&str> = first.tool_calls.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["search", "fetch", "search"]);
    let ids: Vec<&str> = first.tool_calls.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids, ["call_1", "call_2", "call_3"]);

    messages.push(assistant(&first.tool_calls));
    for call in &first.tool_calls {
        messages.push(tool_result(call, "r"));
    }
    let second = driver
        .complete(&request(messages.clone()), &sink)
        .await
        .unwrap();
    assert_eq!(second.tool_calls.len(), 1);
    assert_eq!(second.tool_calls[0].id, "call_4");
    assert_eq!(second.tool_calls[0].arguments, JsonObject::new());

    messages.push(assistant(&second.tool_calls));
    messages.push(tool_result(&second.tool_calls[0], "r"));
    let third = driver.complete(&request(messages), &sink).await.unwrap();
    assert_eq!(third.text, "done");
}

#[tokio::test]
async fn rules_match_by_message_id_prefix_then_text_first_match_wins() {
    let driver = script(json!([
        {"when": {"message_id_prefix": "kit-"}, "steps": [{"reply": "kit"}]},
        {"when": {"text": "hello", "message_id_prefix": "x"}, "steps": [{"reply": "both"}]},
        {"when": {"text": "hello"}, "steps": [{"reply": "text"}]},
        {"steps": [{"reply": "fallback"}]},
    ]));
    let (sink, _) = recorder();
    let with_id = |text: &str, id: Option<&str>| {
        request(vec![ChatMessage::User {
            text: text.into(),
            message_id: id.map(str::to_owned),
        }])
    };

    for (text, id, expected) in [
        ("hello", Some("kit-42"), "kit"),
        ("say hello", Some("x1"), "both"),
        ("say hello", Some("y1"), "text"),
        ("say hello", None, "text"),
        ("bye", Some("ki"), "fallback"),
    ] {
        let turn = driver.complete(&with_id(text, id), &sink).await.unwrap();
        assert_eq!(turn.text, expected, "{text} / {id:?}");
    }
}

#[tokio::test]
async fn no_matching_rule_quotes_the_message() {
    let driver = script(json!([{"when": {"text": "^only this$"}, "steps": [{"reply": "x"}]}]));
    let err = driver
        .complete(&request(vec![user("something else")]), &recorder().0)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, LlmError::Script { detail } if detail.contains("no rule matches the last user message \"something else\"")),
        "{err:?}"
    );
}

#[tokio::test]
async fn status_and_artifact_events_precede_the_reply() {
    let driver = script(json!([{"steps": [
        {"status": {"state": "working"}},
        {"artifact": {"name": "report", "chunks": ["part 1, ", "part 2 for {{message}}"]}},
        {"status": {"state": "input-required", "message": "more?"}},
        {"reply": "ok"},
    ]}]));
    let (sink, seen) = recorder();

    let turn = driver
        .complete(&request(vec![user("q")]), &sink)
        .await
        .unwrap();

    assert_eq!(turn.text, "ok");
    assert_eq!(
        seen.lock().unwrap().clone(),
        vec![
            StreamEvent::Status {
                state: "working".into(),
                message: None
            },
            StreamEvent::Artifact {
                name: "report".into(),
                part: ArtifactPart::Text("part 1, ".into()),
                last_chunk: false
            },
            StreamEvent::Artifact {
                name: "report".into(),
                part: ArtifactPart::Text("part 2 for q".into()),
                last_chunk: true
            },
            StreamEvent::Status {
                state: "input-required".into(),
                message: Some("more?".into())
            },
            StreamEvent::TextDelta("ok".into()),
        ]
    );
}

#[tokio::test]
async fn artifact_parts_of_each_kind_and_a_message_answer_are_emitted_in_order() {
    let driver = Scripted::from_json(&json!([{"steps": [
        {"artifact": {"name": "out", "chunks": ["t {{message}}"], "parts": [
            {"file": {"text": "bytes of {{message}}", "name": "output.txt", "media_type": "text/plain"}},
            {"file_url": {"url": "https://example.com/{{message}}.txt", "name": "output.txt"}},
            {"data": {"key": "value", "count": 42}},
        ]}},
        {"reply_message": "direct {{message}}"},
    ]}]))
    .unwrap();
    let (sink, seen) = recorder();

    let turn = driver
        .complete(&request(vec![user("q")]), &sink)
        .await
        .unwrap();

    assert_eq!(turn.text, "direct q");
    assert!(turn.tool_calls.is_empty());
    assert_eq!(
        seen.lock().unwrap().clone(),
        vec![
            StreamEvent::Artifact {
                name: "out".into(),
                part: ArtifactPart::Text("t q".into()),
                last_chunk: false
            },
            StreamEvent::Artifact {
                name: "out".into(),
                part: ArtifactPart::File {
                    bytes: b"bytes of q".to_vec(),
                    name: Some("output.txt".into()),
                    media_type: Some("text/plain".into())
                },
                last_chunk: false
            },
            StreamEvent::Artifact {
                name: "out".into(),
                part: ArtifactPart::FileUrl {
                    url: "https://example.com/q.txt".into(),
                    name: Some("output.txt".into()),
                    media_type: None
                },
                last_chunk: false
            },
            StreamEvent::Artifact {
                name: "out".into(),
                part: ArtifactPart::Data(
                    json!({"key": "value", "count": 42})
                        .as_object()
                        .unwrap()
                        .clone()
                ),
                last_chunk: true
            },
            StreamEvent::AnswerAsMessage,
            StreamEvent::TextDelta("direct ".into()),
            StreamEvent::TextDelta("q".into()),
        ]
    );
}

#[tokio::test]
async fn an_unknown_part_kind_is_refused_up_front() {
    let err = Scripted::from_json(&json!([{"steps": [
        {"artifact": {"name": "out", "parts": [{"image": {"url": "x"}}]}},
    ]}]))
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "scripted model: rule 1: unknown variant `image`, expected one of `file`, `file_url`, `data`"
    );
}

#[tokio::test]
async fn fail_is_a_script_error() {
    let driver = script(json!([{"steps": [{"fail": "planned failure for {{message}}"}]}]));
    let err = driver
        .complete(&request(vec![user("t")]), &recorder().0)
        .await
        .unwrap_err();
    assert_eq!(
        err,
        LlmError::Script {
            detail: "planned failure for t".into()
        }
    );
}

#[tokio::test(start_paused = true)]
async fn dropping_a_waiting_call_cancels_it() {
    let driver = script(json!([{"steps": [
        {"status": {"state": "working"}},
        {"wait_ms": 3_600_000},
        {"status": {"state": "never"}},
        {"reply": "too late"},
    ]}]));
    let (sink, seen) = recorder();
    let request = request(vec![user("slow")]);

    let outcome =
        tokio::time::timeout(Duration::from_secs(1), driver.complete(&request, &sink)).await;

    assert!(outcome.is_err(), "the call should still have been waiting");
    // Time keeps moving; the dropped call must not resume.
    tokio::time::sleep(Duration::from_secs(7200)).await;
    assert_eq!(
        seen.lock().unwrap().clone(),
        vec![StreamEvent::Status {
            state: "working".into(),
            message: None
        }]
    );
}

#[tokio::test]
async fn new_takes_typed_rules_and_reports_bad_patterns_when_used() {
    let rules: Vec<ScriptRule> = serde_json::from_value(json!([
        {"when": {"text": "(unclosed"}, "steps": [{"reply": "x"}]},
    ]))
    .unwrap();
    let driver = Scripted::new(rules);
    assert_eq!(driver.describe(), "scripted model (1 rules)");
    let err = driver
        .complete(&request(vec![user("a")]), &recorder().0)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("not a valid regex"), "{err}");
}
