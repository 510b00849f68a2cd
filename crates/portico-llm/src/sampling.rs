//! Completions by the MCP client that called the agent (`sampling/createMessage`): the user's own
//! model, chosen and paid for by their client, with no key in Portico.

use std::sync::Arc;

use portico_core::relay::{BoxFuture, Caller, RelayRequest};
use serde_json::{Value, json};

use crate::openai::{json_f32, object_schema};
use crate::types::{
    ChatMessage, ChatRequest, EventSink, ModelDriver, ModelTurn, StreamEvent, ToolCall, excerpt,
};
use crate::{JsonObject, LlmError};

/// `maxTokens` is required by sampling; this is used when the request does not say.
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
        let params = request_params(request);
        let result = self
            .caller
            .request(RelayRequest::Sampling, params)
            .await
            .map_err(|e| LlmError::Sampling {
                detail: format!("the client answered error {}: {}", e.code, e.message),
            })?;
        let turn = parse_result(&result)?;
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

/// `sampling/createMessage` params in the MCP 2025-11-25 shape (sampling with tools).
pub(crate) fn request_params(request: &ChatRequest) -> JsonObject {
    let mut messages: Vec<Value> = Vec::new();
    for message in &request.messages {
        match message {
            ChatMessage::User { text, .. } => messages.push(json!({
                "role": "user",
                "content": {"type": "text", "text": text},
            })),
            ChatMessage::Assistant { text, tool_calls } if tool_calls.is_empty() => {
                messages.push(json!({
                    "role": "assistant",
                    "content": {"type": "text", "text": text},
                }));
            }
            ChatMessage::Assistant { text, tool_calls } => {
                let mut content = Vec::new();
                if !text.is_empty() {
                    content.push(json!({"type": "text", "text": text}));
                }
                content.extend(tool_calls.iter().map(|call| {
                    json!({
                        "type": "tool_use",
                        "id": call.id,
                        "name": call.name,
                        "input": call.arguments,
                    })
                }));
                messages.push(json!({"role": "assistant", "content": content}));
            }
            ChatMessage::Tool {
                call_id,
                text,
                is_error,
                ..
            } => {
                let block = json!({
                    "type": "tool_result",
                    "toolUseId": call_id,
                    "content": [{"type": "text", "text": text}],
                    "isError": is_error,
                });
                // All results of one round go in one user message, which (per the spec) holds
                // nothing but tool results.
                match messages.last_mut() {
                    Some(last) if is_tool_result_message(last) => {
                        if let Some(content) = last["content"].as_array_mut() {
                            content.push(block);
                        }
                    }
                    _ => messages.push(json!({"role": "user", "content": [block]})),
                }
            }
        }
    }
    let mut params = JsonObject::new();
    params.insert("messages".into(), Value::Array(messages));
    if let Some(system) = request.system.as_deref().filter(|s| !s.is_empty()) {
        params.insert("systemPrompt".into(), json!(system));
    }
    params.insert(
        "maxTokens".into(),
        json!(request.max_tokens.unwrap_or(DEFAULT_SAMPLING_MAX_TOKENS)),
    );
    if let Some(t) = request.temperature {
        params.insert("temperature".into(), json_f32(t));
    }
    if !request.tools.is_empty() {
        let tools: Vec<Value> = request
            .tools
            .iter()
            .map(|tool| {
                json!({
                    "name": tool.name,
                    "description": tool.description,
                    "inputSchema": object_schema(&tool.input_schema),
                })
            })
            .collect();
        params.insert("tools".into(), Value::Array(tools));
        params.insert("toolChoice".into(), json!({"mode": "auto"}));
    }
    params
}

fn is_tool_result_message(message: &Value) -> bool {
    message["role"] == "user"
        && message["content"]
            .as_array()
            .is_some_and(|blocks| blocks.first().is_some_and(|b| b["type"] == "tool_result"))
}

/// Reads a `CreateMessageResult`: `content` is one block or (with tools) an array of them.
pub(crate) fn parse_result(result: &JsonObject) -> Result<ModelTurn, LlmError> {
    let blocks: Vec<&Value> = match result.get("content") {
        Some(Value::Array(blocks)) => blocks.iter().collect(),
        Some(block @ Value::Object(_)) => vec![block],
        _ => {
            return Err(LlmError::Sampling {
                detail: format!(
                    "the client's result has no content: {}",
                    excerpt(&Value::Object(result.clone()).to_string(), 300)
                ),
            });
        }
    };
    let mut turn = ModelTurn {
        stop_reason: result
            .get("stopReason")
            .and_then(Value::as_str)
            .map(str::to_owned),
        ..ModelTurn::default()
    };
    for block in blocks {
        match block["type"].as_str() {
            Some("text") => turn
                .text
                .push_str(block["text"].as_str().unwrap_or_default()),
            Some("tool_use") => {
                let name = block["name"].as_str().unwrap_or_default();
                if name.is_empty() {
                    return Err(LlmError::Sampling {
                        detail: "the client's result has a tool_use block without a name"
                            .to_owned(),
                    });
                }
                let arguments = match &block["input"] {
                    Value::Object(map) => map.clone(),
                    Value::Null => JsonObject::new(),
                    other => {
                        return Err(LlmError::Sampling {
                            detail: format!(
                                "the client's tool_use block for {name:?} has a non-object input: {}",
                                excerpt(&other.to_string(), 200)
                            ),
                        });
                    }
                };
                // The id links the result back to the call; a client that leaves it out still
                // gets distinct ones.
                let id = match block["id"].as_str().filter(|id| !id.is_empty()) {
                    Some(id) => id.to_owned(),
                    None => format!("call_{}", turn.tool_calls.len() + 1),
                };
                turn.tool_calls.push(ToolCall {
                    id,
                    name: name.to_owned(),
                    arguments,
                });
            }
            // Images and audio have no place in a text agent's turn.
            other => tracing::debug!(
                block_type = other.unwrap_or("(none)"),
                "ignoring a sampling result block"
            ),
        }
    }
    Ok(turn)
}
