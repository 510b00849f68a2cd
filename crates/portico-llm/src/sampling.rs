//! Completions by the MCP client that called the agent (MCP sampling): the user's own model, chosen
//! and paid for by their client, with no key in Portico. The conversation goes to the client as a
//! `portico_core` [`SamplingRequest`] through its [`Caller`]; the MCP edge writes the protocol's JSON.

use std::sync::Arc;

use crate::LlmError;
use crate::openai::object_schema;
use crate::types::{
    ChatMessage, ChatRequest, EventSink, ModelDriver, ModelTurn, StreamEvent, ToolCall,
};
use portico_core::call::text_block;
use portico_core::relay::{
    BoxFuture, Caller, RelayRequest, SamplingAnswer, SamplingContent, SamplingMessage,
    SamplingRequest, SamplingRole, SamplingTool, SamplingToolChoice, SamplingToolUse,
};

/// Sampling requires a token limit; this is used when the request does not say.
pub const DEFAULT_SAMPLING_MAX_TOKENS: u32 = 1024;

/// A model reached through the calling client.
#[derive(Clone)]
pub struct Sampling {
    caller: Arc<dyn Caller>,
}

impl std::fmt::Debug for Sampling {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sampling").finish_non_exhaustive()
    }
}

impl Sampling {
    pub fn new(caller: Arc<dyn Caller>) -> Self {
        Sampling { caller }
    }

    /// Whether the client declared sampling at all.
    pub fn available(&self) -> bool {
        self.caller.accepts(RelayRequest::Sampling)
    }

    async fn run(&self, request: &ChatRequest, events: &EventSink) -> Result<ModelTurn, LlmError> {
        if !self.available() {
            return Err(LlmError::NotAvailable {
                detail: "the calling MCP client did not declare the sampling capability, so it \
                         cannot run this agent's model; use a client that supports sampling or \
                         configure a provider model for this agent"
                    .to_owned(),
            });
        }
        let answer = self
            .caller
            .sample(sampling_request(request))
            .await
            .map_err(|e| LlmError::Sampling {
                detail: e.to_string(),
            })?;
        let turn = model_turn(answer);
        if !turn.text.is_empty() {
            // The client answers in one piece; streaming consumers still get the text as a delta.
            events(StreamEvent::TextDelta(turn.text.clone()));
        }
        Ok(turn)
    }
}

impl ModelDriver for Sampling {
    fn describe(&self) -> String {
        "sampling through the calling MCP client".to_owned()
    }

    fn complete<'a>(
        &'a self,
        request: &'a ChatRequest,
        events: &'a EventSink,
    ) -> BoxFuture<'a, Result<ModelTurn, LlmError>> {
        Box::pin(self.run(request, events))
    }
}

/// The conversation as a sampling request (sampling with tools). All results of one round go in
/// one user message, which (per the spec) holds nothing but tool results.
fn sampling_request(request: &ChatRequest) -> SamplingRequest {
    let mut messages: Vec<SamplingMessage> = Vec::new();
    for message in &request.messages {
        match message {
            ChatMessage::User { text, .. } => messages.push(SamplingMessage {
                role: SamplingRole::User,
                content: vec![SamplingContent::Text(text.clone())],
            }),
            ChatMessage::Assistant { text, tool_calls } => {
                let mut content = Vec::new();
                if !text.is_empty() || tool_calls.is_empty() {
                    content.push(SamplingContent::Text(text.clone()));
                }
                content.extend(tool_calls.iter().map(|call| {
                    SamplingContent::ToolUse(SamplingToolUse {
                        id: call.id.clone(),
                        name: call.name.clone(),
                        input: call.arguments.clone(),
                    })
                }));
                messages.push(SamplingMessage {
                    role: SamplingRole::Assistant,
                    content,
                });
            }
            ChatMessage::Tool {
                call_id,
                text,
                is_error,
                ..
            } => {
                let result = SamplingContent::ToolResult {
                    tool_use_id: call_id.clone(),
                    content: vec![text_block(text.as_str())],
                    is_error: *is_error,
                };
                match messages.last_mut() {
                    Some(last) if is_tool_result_message(last) => last.content.push(result),
                    _ => messages.push(SamplingMessage {
                        role: SamplingRole::User,
                        content: vec![result],
                    }),
                }
            }
        }
    }
    let tools: Vec<SamplingTool> = request
        .tools
        .iter()
        .map(|tool| SamplingTool {
            name: tool.name.clone(),
            description: tool.description.clone(),
            input_schema: object_schema(&tool.input_schema)
                .as_object()
                .cloned()
                .unwrap_or_default(),
        })
        .collect();
    SamplingRequest {
        messages,
        system_prompt: request
            .system
            .as_deref()
            .filter(|s| !s.is_empty())
            .map(str::to_owned),
        max_tokens: request.max_tokens.unwrap_or(DEFAULT_SAMPLING_MAX_TOKENS),
        temperature: request.temperature,
        tool_choice: (!tools.is_empty()).then_some(SamplingToolChoice::Auto),
        tools,
    }
}

fn is_tool_result_message(message: &SamplingMessage) -> bool {
    message.role == SamplingRole::User
        && matches!(
            message.content.first(),
            Some(SamplingContent::ToolResult { .. })
        )
}

/// The client's answer as a model turn.
fn model_turn(answer: SamplingAnswer) -> ModelTurn {
    ModelTurn {
        text: answer.text,
        tool_calls: answer
            .tool_uses
            .into_iter()
            .map(|call| ToolCall {
                id: call.id,
                name: call.name,
                arguments: call.input,
            })
            .collect(),
        stop_reason: answer.stop_reason,
        ..ModelTurn::default()
    }
}

/// Answers a sampling request with `driver`: the other direction of [`Sampling`], for an MCP client
/// whose upstream asks it for a completion (`portico call` answering with a configured model).
pub async fn complete_sampling(
    driver: &dyn ModelDriver,
    request: &SamplingRequest,
) -> Result<SamplingAnswer, LlmError> {
    let events: EventSink = Arc::new(|_| {});
    let turn = driver.complete(&chat_request(request), &events).await?;
    Ok(SamplingAnswer {
        text: turn.text,
        tool_uses: turn
            .tool_calls
            .into_iter()
            .map(|call| SamplingToolUse {
                id: call.id,
                name: call.name,
                input: call.arguments,
            })
            .collect(),
        stop_reason: turn.stop_reason,
        model: Some(driver.describe()),
    })
}

/// A sampling request as the conversation a driver takes: text blocks joined per message, each
/// tool result a tool message named after the tool use it answers.
fn chat_request(request: &SamplingRequest) -> ChatRequest {
    let mut messages = Vec::new();
    let mut tool_names = std::collections::HashMap::new();
    for message in &request.messages {
        let mut text = String::new();
        let mut tool_calls = Vec::new();
        let mut results = Vec::new();
        for content in &message.content {
            match content {
                SamplingContent::Text(more) => text.push_str(more),
                SamplingContent::ToolUse(call) => {
                    tool_names.insert(call.id.clone(), call.name.clone());
                    tool_calls.push(ToolCall {
                        id: call.id.clone(),
                        name: call.name.clone(),
                        arguments: call.input.clone(),
                    });
                }
                SamplingContent::ToolResult {
                    tool_use_id,
                    content,
                    is_error,
                } => results.push(ChatMessage::Tool {
                    call_id: tool_use_id.clone(),
                    name: tool_names.get(tool_use_id).cloned().unwrap_or_default(),
                    text: content
                        .iter()
                        .filter_map(|block| block["text"].as_str())
                        .collect::<Vec<_>>()
                        .join("\n"),
                    is_error: *is_error,
                }),
            }
        }
        match message.role {
            SamplingRole::Assistant => messages.push(ChatMessage::Assistant { text, tool_calls }),
            SamplingRole::User => {
                messages.extend(results);
                if !text.is_empty() {
                    messages.push(ChatMessage::User {
                        text,
                        message_id: None,
                    });
                }
            }
        }
    }
    ChatRequest {
        system: request.system_prompt.clone(),
        messages,
        tools: request
            .tools
            .iter()
            .map(|tool| crate::types::ToolSpec {
                name: tool.name.clone(),
                description: tool.description.clone(),
                input_schema: tool.input_schema.clone(),
            })
            .collect(),
        temperature: request.temperature,
        max_tokens: Some(request.max_tokens),
    }
}

#[cfg(test)]
mod answering_tests {
    use super::*;
    use crate::JsonObject;

    #[tokio::test]
    async fn a_sampling_request_is_answered_by_the_driver_over_the_same_conversation() {
        let asked = SamplingRequest {
            messages: vec![
                SamplingMessage {
                    role: SamplingRole::User,
                    content: vec![SamplingContent::Text("Find docs".into())],
                },
                SamplingMessage {
                    role: SamplingRole::Assistant,
                    content: vec![SamplingContent::ToolUse(SamplingToolUse {
                        id: "t1".into(),
                        name: "search".into(),
                        input: JsonObject::new(),
                    })],
                },
                SamplingMessage {
                    role: SamplingRole::User,
                    content: vec![SamplingContent::ToolResult {
                        tool_use_id: "t1".into(),
                        content: vec![text_block("found 3")],
                        is_error: false,
                    }],
                },
            ],
            system_prompt: Some("Be brief.".into()),
            max_tokens: 64,
            ..SamplingRequest::default()
        };
        let conversation = chat_request(&asked);
        assert_eq!(
            conversation.messages,
            vec![
                ChatMessage::User {
                    text: "Find docs".into(),
                    message_id: None
                },
                ChatMessage::Assistant {
                    text: String::new(),
                    tool_calls: vec![ToolCall {
                        id: "t1".into(),
                        name: "search".into(),
                        arguments: JsonObject::new()
                    }]
                },
                ChatMessage::Tool {
                    call_id: "t1".into(),
                    name: "search".into(),
                    text: "found 3".into(),
                    is_error: false
                },
            ]
        );
        assert_eq!(
            (conversation.system.as_deref(), conversation.max_tokens),
            (Some("Be brief."), Some(64))
        );
        let driver = crate::Scripted::new(vec![crate::ScriptRule {
            when: crate::RuleMatch::default(),
            steps: vec![crate::Step::Reply("three docs".into())],
        }]);
        let just_asked = SamplingRequest {
            messages: asked.messages[..1].to_vec(),
            ..asked
        };
        let answer = complete_sampling(&driver, &just_asked).await.unwrap();
        assert_eq!(answer.text, "three docs");
        assert!(answer.tool_uses.is_empty());
        assert_eq!(answer.model, Some(driver.describe()));
    }
}
