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
