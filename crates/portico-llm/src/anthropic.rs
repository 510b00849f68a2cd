//! Anthropic's Messages API, streamed.

use std::collections::BTreeMap;
use std::fmt;

use http::header::HeaderMap;
use portico_core::relay::BoxFuture;
use portico_net::SafeClient;
use serde_json::{Value, json};

use crate::openai::object_schema;
use crate::retry::RetryPolicy;
use crate::transport::{self, Endpoint, header, join_url, present_key, redact_url};
use crate::types::{
    ChatMessage, ChatRequest, EventSink, ModelDriver, ModelTurn, StreamEvent, ToolCall, Usage,
    excerpt, parse_tool_arguments,
};
use crate::{JsonObject, LlmError};
use portico_core::json_f32;

/// The API version we speak (streaming events and tool blocks as of this version).
pub const ANTHROPIC_VERSION: &str = "2023-06-01";
/// The API requires `max_tokens`; this is used when the request does not say.
pub const DEFAULT_MAX_TOKENS: u32 = 4096;
const PROVIDER: &str = "anthropic";
const ANTHROPIC_KEY_ENV: &str = "ANTHROPIC_API_KEY";

/// Settings of the Anthropic endpoint, already resolved from configuration.
#[derive(Clone, PartialEq)]
pub struct AnthropicSettings {
    /// The API root, e.g. `https://api.anthropic.com`; requests go to `{base_url}/v1/messages`.
    pub base_url: String,
    /// Sent as `x-api-key`; required.
    pub api_key: Option<String>,
    /// The environment variable the key is configured from, named when the key is missing.
    pub api_key_env: Option<String>,
    pub model: String,
    /// Headers a gateway in front of the API may want. Values are treated as secrets: never
    /// logged or shown. `x-api-key` and `anthropic-version` are always ours.
    pub extra_headers: Vec<(String, String)>,
    pub retry: RetryPolicy,
}

impl Default for AnthropicSettings {
    /// Anthropic's API; `model` and `api_key` must still be set.
    fn default() -> Self {
        AnthropicSettings {
            base_url: "https://api.anthropic.com".to_owned(),
            api_key: None,
            api_key_env: None,
            model: String::new(),
            extra_headers: Vec::new(),
            retry: RetryPolicy::default(),
        }
    }
}

/// Shows everything but secrets: the key and header values are redacted.
impl fmt::Debug for AnthropicSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let headers: Vec<&str> = self.extra_headers.iter().map(|(n, _)| n.as_str()).collect();
        f.debug_struct("AnthropicSettings")
            .field("base_url", &redact_url(&self.base_url))
            .field("api_key", &self.api_key.as_ref().map(|_| "[redacted]"))
            .field("api_key_env", &self.api_key_env)
            .field("model", &self.model)
            .field("extra_headers (names)", &headers)
            .field("retry", &self.retry)
            .finish()
    }
}

/// A Claude model behind the Messages API.
#[derive(Debug, Clone)]
pub struct Anthropic {
    settings: AnthropicSettings,
    client: SafeClient,
}

impl Anthropic {
    /// Does no I/O and cannot fail; [`Anthropic::check`] reports unusable settings early, and every
    /// completion checks them again.
    pub fn new(settings: AnthropicSettings, client: SafeClient) -> Self {
        Anthropic { settings, client }
    }

    pub fn settings(&self) -> &AnthropicSettings {
        &self.settings
    }

    /// Checks what can be checked without the network: the key and the URL against the client's
    /// policy.
    pub fn check(&self) -> Result<(), LlmError> {
        self.endpoint().map(|_| ())
    }

    fn endpoint(&self) -> Result<(String, HeaderMap), LlmError> {
        let Some(key) = present_key(&self.settings.api_key) else {
            return Err(LlmError::MissingKey {
                provider: PROVIDER.to_owned(),
                env_var: self
                    .settings
                    .api_key_env
                    .clone()
                    .unwrap_or_else(|| ANTHROPIC_KEY_ENV.to_owned()),
            });
        };
        let url = join_url(&self.settings.base_url, "v1/messages");
        self.client
            .check_url(&url)
            .map_err(|e| transport::net_refusal(PROVIDER, e))?;
        let mut headers = HeaderMap::new();
        for (name, value) in &self.settings.extra_headers {
            header(PROVIDER, &mut headers, name, value, true)?;
        }
        header(PROVIDER, &mut headers, "x-api-key", key, true)?;
        header(
            PROVIDER,
            &mut headers,
            "anthropic-version",
            ANTHROPIC_VERSION,
            false,
        )?;
        Ok((url, headers))
    }

    /// The Messages API request body for `request`.
    pub(crate) fn request_body(&self, request: &ChatRequest) -> Value {
        let mut body = json!({
            "model": self.settings.model,
            "max_tokens": request.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS),
            "messages": wire_messages(&request.messages),
            "stream": true,
        });
        if let Some(system) = request.system.as_deref().filter(|s| !s.is_empty()) {
            body["system"] = json!(system);
        }
        if !request.tools.is_empty() {
            let tools: Vec<Value> = request
                .tools
                .iter()
                .map(|tool| {
                    json!({
                        "name": tool.name,
                        "description": tool.description,
                        "input_schema": object_schema(&tool.input_schema),
                    })
                })
                .collect();
            body["tools"] = Value::Array(tools);
        }
        if let Some(t) = request.temperature {
            body["temperature"] = json_f32(t);
        }
        body
    }

    async fn run(&self, request: &ChatRequest, events: &EventSink) -> Result<ModelTurn, LlmError> {
        let (url, headers) = self.endpoint()?;
        let endpoint = Endpoint {
            provider: PROVIDER,
            url: &url,
            headers,
            secret: present_key(&self.settings.api_key),
            retry: &self.settings.retry,
        };
        let body = self.request_body(request);
        let mut stream = transport::open_event_stream(&self.client, &endpoint, &body).await?;
        let mut state = StreamState::default();
        while let Some(event) = stream.next().await? {
            if state.on_event(&event.event, &event.data, events)? {
                break;
            }
        }
        state.finish()
    }
}

impl ModelDriver for Anthropic {
    fn describe(&self) -> String {
        format!(
            "{PROVIDER} {} at {}",
            self.settings.model,
            redact_url(&self.settings.base_url)
        )
    }

    fn complete<'a>(
        &'a self,
        request: &'a ChatRequest,
        events: &'a EventSink,
    ) -> BoxFuture<'a, Result<ModelTurn, LlmError>> {
        Box::pin(self.run(request, events))
    }
}

/// Converts the conversation into content-block messages. Tool results travel as `tool_result`
/// blocks in user messages, and consecutive messages of one role are merged: the API wants all
/// results of a parallel call in the one user message that follows it.
fn wire_messages(messages: &[ChatMessage]) -> Vec<Value> {
    let mut out: Vec<(&'static str, Vec<Value>)> = Vec::new();
    for message in messages {
        let (role, blocks) = match message {
            // The API refuses empty text blocks, so empty text is left out.
            ChatMessage::User { text, .. } => ("user", text_block(text).into_iter().collect()),
            ChatMessage::Assistant { text, tool_calls } => {
                let mut blocks: Vec<Value> = text_block(text).into_iter().collect();
                blocks.extend(tool_calls.iter().map(|call| {
                    json!({
                        "type": "tool_use",
                        "id": call.id,
                        "name": call.name,
                        "input": call.arguments,
                    })
                }));
                ("assistant", blocks)
            }
            ChatMessage::Tool {
                call_id,
                text,
                is_error,
                ..
            } => {
                let mut block = json!({"type": "tool_result", "tool_use_id": call_id});
                if !text.is_empty() {
                    block["content"] = json!(text);
                }
                if *is_error {
                    block["is_error"] = json!(true);
                }
                ("user", vec![block])
            }
        };
        if blocks.is_empty() {
            continue;
        }
        match out.last_mut() {
            Some((last_role, last_blocks)) if *last_role == role => last_blocks.extend(blocks),
            _ => out.push((role, blocks)),
        }
    }
    out.into_iter()
        .map(|(role, content)| json!({"role": role, "content": content}))
        .collect()
}

fn text_block(text: &str) -> Option<Value> {
    (!text.is_empty()).then(|| json!({"type": "text", "text": text}))
}

/// A content block being streamed.
#[derive(Debug)]
enum Block {
    Text,
    ToolUse {
        id: String,
        name: String,
        /// `input` from `content_block_start`; normally `{}`, with the real input in deltas.
        initial: JsonObject,
        json: String,
    },
    /// Thinking, server-tool and future block types: not part of the answer.
    Other,
}

#[derive(Debug, Default)]
struct StreamState {
    text: String,
    open: BTreeMap<u64, Block>,
    /// Finished tool calls by block index, so they come out in the model's order.
    calls: BTreeMap<u64, ToolCall>,
    usage: Usage,
    stop_reason: Option<String>,
    stopped: bool,
}

impl StreamState {
    /// Takes one event; true after `message_stop`.
    fn on_event(&mut self, name: &str, data: &str, events: &EventSink) -> Result<bool, LlmError> {
        if data.trim().is_empty() {
            return Ok(false);
        }
        let event: Value = serde_json::from_str(data).map_err(|e| {
            protocol(format!(
                "a stream event is not JSON ({e}): {}",
                excerpt(data, 200)
            ))
        })?;
        // The payload's `type` repeats the SSE event name; prefer it, as the SDKs do.
        let kind = event["type"].as_str().unwrap_or(name);
        let index = event["index"].as_u64().unwrap_or(0);
        match kind {
            "message_start" => {
                let usage = &event["message"]["usage"];
                self.usage.input_tokens = input_tokens(usage).unwrap_or(0);
                self.usage.output_tokens = usage["output_tokens"].as_u64().unwrap_or(0);
            }
            "content_block_start" => {
                let block = &event["content_block"];
                let block = match block["type"].as_str() {
                    Some("text") => {
                        // The start block's text is normally empty, but it is text all the same.
                        if let Some(text) = block["text"].as_str().filter(|t| !t.is_empty()) {
                            self.push_text(text, events);
                        }
                        Block::Text
                    }
                    Some("tool_use") => Block::ToolUse {
                        id: block["id"].as_str().unwrap_or_default().to_owned(),
                        name: block["name"].as_str().unwrap_or_default().to_owned(),
                        initial: block["input"].as_object().cloned().unwrap_or_default(),
                        json: String::new(),
                    },
                    _ => Block::Other,
                };
                self.open.insert(index, block);
            }
            "content_block_delta" => {
                let delta = &event["delta"];
                match (delta["type"].as_str(), self.open.get_mut(&index)) {
                    (Some("text_delta"), _) => {
                        if let Some(text) = delta["text"].as_str().filter(|t| !t.is_empty()) {
                            self.push_text(text, events);
                        }
                    }
                    (Some("input_json_delta"), Some(Block::ToolUse { json, .. })) => {
                        json.push_str(delta["partial_json"].as_str().unwrap_or_default());
                    }
                    (Some("input_json_delta"), _) => {
                        return Err(protocol(format!(
                            "input_json_delta for content block {index}, which is not a tool_use block"
                        )));
                    }
                    _ => {} // thinking, signatures, citations: not part of the answer
                }
            }
            "content_block_stop" => {
                if let Some(block) = self.open.remove(&index) {
                    self.close(index, block)?;
                }
            }
            "message_delta" => {
                if let Some(reason) = event["delta"]["stop_reason"].as_str() {
                    self.stop_reason = Some(reason.to_owned());
                }
                // Counts here are cumulative for the message, so they replace, not add.
                let usage = &event["usage"];
                if let Some(output) = usage["output_tokens"].as_u64() {
                    self.usage.output_tokens = output;
                }
                if let Some(input) = input_tokens(usage) {
                    self.usage.input_tokens = input;
                }
            }
            "message_stop" => {
                self.stopped = true;
                return Ok(true);
            }
            "error" => {
                let error = &event["error"];
                return Err(protocol(format!(
                    "the stream reported {}: {}",
                    error["type"].as_str().unwrap_or("an error"),
                    error["message"].as_str().unwrap_or("(no message)")
                )));
            }
            _ => {} // ping and event types added later
        }
        Ok(false)
    }

    fn push_text(&mut self, text: &str, events: &EventSink) {
        self.text.push_str(text);
        events(StreamEvent::TextDelta(text.to_owned()));
    }

    fn close(&mut self, index: u64, block: Block) -> Result<(), LlmError> {
        if let Block::ToolUse {
            id,
            name,
            initial,
            json,
        } = block
        {
            if name.is_empty() {
                return Err(protocol(format!("tool_use block {index} has no tool name")));
            }
            let arguments = if json.trim().is_empty() {
                initial
            } else {
                parse_tool_arguments(PROVIDER, &name, &json)?
            };
            let id = if id.is_empty() {
                format!("toolu_{index}")
            } else {
                id
            };
            self.calls.insert(
                index,
                ToolCall {
                    id,
                    name,
                    arguments,
                },
            );
        }
        Ok(())
    }

    fn finish(mut self) -> Result<ModelTurn, LlmError> {
        if !self.stopped {
            return Err(protocol(
                "the stream ended before message_stop; the connection may have been cut".into(),
            ));
        }
        // A block left open at message_stop is complete all the same.
        for (index, block) in std::mem::take(&mut self.open) {
            self.close(index, block)?;
        }
        Ok(ModelTurn {
            text: self.text,
            tool_calls: self.calls.into_values().collect(),
            usage: self.usage,
            stop_reason: self.stop_reason,
        })
    }
}

/// All input the model read: uncached plus cache writes plus cache reads, as the API reports them
/// separately. `None` when the usage object has none of them.
fn input_tokens(usage: &Value) -> Option<u64> {
    let fields = [
        "input_tokens",
        "cache_creation_input_tokens",
        "cache_read_input_tokens",
    ];
    let counts: Vec<u64> = fields.iter().filter_map(|f| usage[f].as_u64()).collect();
    (!counts.is_empty()).then(|| counts.iter().sum())
}

fn protocol(detail: String) -> LlmError {
    LlmError::Protocol {
        provider: PROVIDER.to_owned(),
        detail,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[test]
    fn consecutive_roles_merge_and_empty_text_is_dropped() {
        let messages = vec![
            ChatMessage::User {
                text: "q".into(),
                message_id: None,
            },
            ChatMessage::Assistant {
                text: String::new(),
                tool_calls: vec![
                    ToolCall {
                        id: "a".into(),
                        name: "t".into(),
                        arguments: JsonObject::new(),
                    },
                    ToolCall {
                        id: "b".into(),
                        name: "t".into(),
                        arguments: JsonObject::new(),
                    },
                ],
            },
            ChatMessage::Tool {
                call_id: "a".into(),
                name: "t".into(),
                text: "1".into(),
                is_error: false,
            },
            ChatMessage::Tool {
                call_id: "b".into(),
                name: "t".into(),
                text: "boom".into(),
                is_error: true,
            },
        ];
        assert_eq!(
            Value::Array(wire_messages(&messages)),
            json!([
                {"role": "user", "content": [{"type": "text", "text": "q"}]},
                {"role": "assistant", "content": [
                    {"type": "tool_use", "id": "a", "name": "t", "input": {}},
                    {"type": "tool_use", "id": "b", "name": "t", "input": {}},
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "a", "content": "1"},
                    {"type": "tool_result", "tool_use_id": "b", "content": "boom", "is_error": true},
                ]},
            ])
        );
    }

    #[test]
    fn a_cut_stream_and_an_error_event_are_errors() {
        let events: EventSink = Arc::new(|_| {});
        let mut state = StreamState::default();
        state
            .on_event(
                "message_start",
                r#"{"type":"message_start","message":{"usage":{"input_tokens":5,"cache_read_input_tokens":2,"output_tokens":1}}}"#,
                &events,
            )
            .unwrap();
        assert_eq!(state.usage.input_tokens, 7);
        assert!(
            state
                .finish()
                .unwrap_err()
                .to_string()
                .contains("message_stop")
        );

        let mut state = StreamState::default();
        let err = state
            .on_event(
                "error",
                r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
                &events,
            )
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "anthropic: unexpected response: the stream reported overloaded_error: Overloaded"
        );
    }
}
