//! OpenAI Chat Completions, streamed: OpenAI itself and the servers that speak its dialect (Ollama,
//! vLLM, llama.cpp, LM Studio, OpenRouter, ...).

use std::collections::BTreeMap;
use std::fmt;

use http::header::{AUTHORIZATION, HeaderMap};
use portico_core::json_f32;
use portico_core::relay::BoxFuture;
use portico_net::SafeClient;
use serde_json::{Value, json};

use crate::retry::RetryPolicy;
use crate::transport::{self, Endpoint, header, join_url, present_key, redact_url};
use crate::types::{
    ChatMessage, ChatRequest, EventSink, ModelDriver, ModelTurn, StreamEvent, ToolCall, Usage,
    parse_tool_arguments,
};
use crate::{JsonObject, LlmError};

const OPENAI_HOST: &str = "api.openai.com";
const OPENAI_KEY_ENV: &str = "OPENAI_API_KEY";

/// Settings of an OpenAI-compatible endpoint, already resolved from configuration.
#[derive(Clone, PartialEq)]
pub struct OpenAiSettings {
    /// The API root, e.g. `https://api.openai.com/v1` or `http://127.0.0.1:11434/v1`; requests go
    /// to `{base_url}/chat/completions`.
    pub base_url: String,
    /// Sent as `Authorization: Bearer`; local servers usually need none.
    pub api_key: Option<String>,
    /// The environment variable the key is configured from, named when the key is missing.
    pub api_key_env: Option<String>,
    pub model: String,
    /// Who this is, for messages: `openai`, `ollama`, `openrouter`, ...
    pub provider_label: String,
    /// Headers some gateways want (`HTTP-Referer`, `OpenAI-Organization`, ...). Values are treated
    /// as secrets: never logged or shown.
    pub extra_headers: Vec<(String, String)>,
    pub retry: RetryPolicy,
}

impl Default for OpenAiSettings {
    /// OpenAI itself; `model` must still be set.
    fn default() -> Self {
        OpenAiSettings {
            base_url: "https://api.openai.com/v1".to_owned(),
            api_key: None,
            api_key_env: None,
            model: String::new(),
            provider_label: "openai".to_owned(),
            extra_headers: Vec::new(),
            retry: RetryPolicy::default(),
        }
    }
}

/// Shows everything but secrets: the key and header values are redacted.
impl fmt::Debug for OpenAiSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let headers: Vec<&str> = self.extra_headers.iter().map(|(n, _)| n.as_str()).collect();
        f.debug_struct("OpenAiSettings")
            .field("base_url", &redact_url(&self.base_url))
            .field("api_key", &self.api_key.as_ref().map(|_| "[redacted]"))
            .field("api_key_env", &self.api_key_env)
            .field("model", &self.model)
            .field("provider_label", &self.provider_label)
            .field("extra_headers (names)", &headers)
            .field("retry", &self.retry)
            .finish()
    }
}

/// A model behind an OpenAI-compatible Chat Completions endpoint.
#[derive(Debug, Clone)]
pub struct OpenAiCompatible {
    settings: OpenAiSettings,
    client: SafeClient,
}

impl OpenAiCompatible {
    /// Does no I/O and cannot fail; [`OpenAiCompatible::check`] reports unusable settings early,
    /// and every completion checks them again.
    pub fn new(settings: OpenAiSettings, client: SafeClient) -> Self {
        OpenAiCompatible { settings, client }
    }

    pub fn settings(&self) -> &OpenAiSettings {
        &self.settings
    }

    /// Whether this endpoint refuses requests without a key: OpenAI does; local servers don't, and
    /// for other gateways we cannot know, so we let them answer 401 themselves.
    pub fn requires_key(&self) -> bool {
        self.settings.provider_label.eq_ignore_ascii_case("openai") || self.is_openai_host()
    }

    /// Checks what can be checked without the network: the key, the URL against the client's
    /// policy, the extra headers.
    pub fn check(&self) -> Result<(), LlmError> {
        self.endpoint().map(|_| ())
    }

    fn is_openai_host(&self) -> bool {
        url::Url::parse(&self.settings.base_url)
            .ok()
            .and_then(|u| u.host_str().map(|h| h.eq_ignore_ascii_case(OPENAI_HOST)))
            .unwrap_or(false)
    }

    fn url(&self) -> String {
        join_url(&self.settings.base_url, "chat/completions")
    }

    fn endpoint(&self) -> Result<(String, HeaderMap), LlmError> {
        let provider = &self.settings.provider_label;
        let key = present_key(&self.settings.api_key);
        if key.is_none() && self.requires_key() {
            return Err(LlmError::MissingKey {
                provider: provider.clone(),
                env_var: self
                    .settings
                    .api_key_env
                    .clone()
                    .unwrap_or_else(|| OPENAI_KEY_ENV.to_owned()),
            });
        }
        let url = self.url();
        self.client
            .check_url(&url)
            .map_err(|e| transport::net_refusal(provider, e))?;
        let mut headers = HeaderMap::new();
        for (name, value) in &self.settings.extra_headers {
            header(provider, &mut headers, name, value, true)?;
        }
        if let Some(key) = key {
            header(
                provider,
                &mut headers,
                AUTHORIZATION.as_str(),
                &format!("Bearer {key}"),
                true,
            )?;
        }
        Ok((url, headers))
    }

    /// The Chat Completions request body for `request`.
    pub(crate) fn request_body(&self, request: &ChatRequest) -> Value {
        let mut messages = Vec::new();
        if let Some(system) = request.system.as_deref().filter(|s| !s.is_empty()) {
            messages.push(json!({"role": "system", "content": system}));
        }
        for message in &request.messages {
            messages.push(wire_message(message));
        }
        let mut body = json!({
            "model": self.settings.model,
            "messages": messages,
            "stream": true,
            // Without this the stream carries no token counts at all.
            "stream_options": {"include_usage": true},
        });
        if !request.tools.is_empty() {
            let tools: Vec<Value> = request
                .tools
                .iter()
                .map(|tool| {
                    json!({
                        "type": "function",
                        "function": {
                            "name": tool.name,
                            "description": tool.description,
                            "parameters": object_schema(&tool.input_schema),
                        }
                    })
                })
                .collect();
            body["tools"] = Value::Array(tools);
        }
        if let Some(t) = request.temperature {
            body["temperature"] = json_f32(t);
        }
        if let Some(max) = request.max_tokens {
            // OpenAI's reasoning models reject the older `max_tokens`; the compatible servers
            // mostly know only `max_tokens`.
            let field = if self.is_openai_host() {
                "max_completion_tokens"
            } else {
                "max_tokens"
            };
            body[field] = json!(max);
        }
        body
    }

    async fn run(&self, request: &ChatRequest, events: &EventSink) -> Result<ModelTurn, LlmError> {
        let provider = self.settings.provider_label.as_str();
        let (url, headers) = self.endpoint()?;
        let endpoint = Endpoint {
            provider,
            url: &url,
            headers,
            secret: present_key(&self.settings.api_key),
            retry: &self.settings.retry,
        };
        let body = self.request_body(request);
        let mut stream = transport::open_event_stream(&self.client, &endpoint, &body).await?;
        let mut turn = StreamState::default();
        while let Some(event) = stream.next().await? {
            if turn.on_data(provider, &event.data, events)? {
                break;
            }
        }
        turn.finish(provider)
    }
}

impl ModelDriver for OpenAiCompatible {
    fn describe(&self) -> String {
        format!(
            "{} {} at {}",
            self.settings.provider_label,
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

fn wire_message(message: &ChatMessage) -> Value {
    match message {
        ChatMessage::User { text, .. } => json!({"role": "user", "content": text}),
        ChatMessage::Assistant { text, tool_calls } if tool_calls.is_empty() => {
            json!({"role": "assistant", "content": text})
        }
        ChatMessage::Assistant { text, tool_calls } => {
            let calls: Vec<Value> = tool_calls
                .iter()
                .map(|call| {
                    json!({
                        "id": call.id,
                        "type": "function",
                        "function": {
                            "name": call.name,
                            // The API carries arguments as a JSON string, not an object.
                            "arguments": Value::Object(call.arguments.clone()).to_string(),
                        }
                    })
                })
                .collect();
            // `content: null` is the documented form for a turn that is only tool calls.
            let content = if text.is_empty() {
                Value::Null
            } else {
                json!(text)
            };
            json!({"role": "assistant", "content": content, "tool_calls": calls})
        }
        ChatMessage::Tool {
            call_id,
            text,
            is_error,
            ..
        } => {
            // Chat Completions has no error flag for tool results; without a marker the model
            // would take an error message for the tool's answer.
            let content = if *is_error {
                format!("Error: {text}")
            } else {
                text.clone()
            };
            json!({"role": "tool", "tool_call_id": call_id, "content": content})
        }
    }
}

/// Providers reject an empty schema for a function's parameters; an empty one means "no
/// arguments", which is this.
pub(crate) fn object_schema(schema: &JsonObject) -> Value {
    if schema.is_empty() {
        json!({"type": "object", "properties": {}})
    } else {
        Value::Object(schema.clone())
    }
}

/// A tool call being assembled from `delta.tool_calls` fragments.
#[derive(Debug, Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
}

/// The turn being assembled from stream chunks.
#[derive(Debug, Default)]
struct StreamState {
    text: String,
    calls: BTreeMap<u64, PartialCall>,
    usage: Usage,
    finish_reason: Option<String>,
    done: bool,
}

impl StreamState {
    /// Takes one `data:` payload; true once the stream said `[DONE]`.
    fn on_data(
        &mut self,
        provider: &str,
        data: &str,
        events: &EventSink,
    ) -> Result<bool, LlmError> {
        let data = data.trim();
        if data == "[DONE]" {
            self.done = true;
            return Ok(true);
        }
        if data.is_empty() {
            return Ok(false);
        }
        let chunk: Value = serde_json::from_str(data).map_err(|e| LlmError::Protocol {
            provider: provider.to_owned(),
            detail: format!(
                "a stream chunk is not JSON ({e}): {}",
                crate::types::excerpt(data, 200)
            ),
        })?;
        if let Some(error) = chunk.get("error").filter(|e| !e.is_null()) {
            return Err(LlmError::Protocol {
                provider: provider.to_owned(),
                detail: format!("the stream reported an error: {}", error_text(error)),
            });
        }
        if let Some(usage) = chunk.get("usage").filter(|u| u.is_object()) {
            self.usage = Usage {
                input_tokens: usage["prompt_tokens"].as_u64().unwrap_or(0),
                output_tokens: usage["completion_tokens"].as_u64().unwrap_or(0),
            };
        }
        let choices = chunk
            .get("choices")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        // We never ask for n > 1, so only the first choice exists.
        for choice in choices
            .iter()
            .filter(|c| c["index"].as_u64().unwrap_or(0) == 0)
        {
            let delta = &choice["delta"];
            if let Some(text) = delta["content"].as_str().filter(|t| !t.is_empty()) {
                self.text.push_str(text);
                events(StreamEvent::TextDelta(text.to_owned()));
            }
            if let Some(calls) = delta["tool_calls"].as_array() {
                for (position, fragment) in calls.iter().enumerate() {
                    self.on_tool_fragment(position as u64, fragment);
                }
            }
            if let Some(reason) = choice["finish_reason"].as_str() {
                self.finish_reason = Some(reason.to_owned());
            }
        }
        Ok(false)
    }

    fn on_tool_fragment(&mut self, position: u64, fragment: &Value) {
        // Servers that send each call whole sometimes leave out `index`; the position in the
        // array is then the only thing that tells calls apart.
        let index = fragment["index"].as_u64().unwrap_or(position);
        let call = self.calls.entry(index).or_default();
        // The id and name come whole in the first fragment of a call; later fragments repeat them
        // at most, so they are set once and never concatenated.
        if let Some(id) = fragment["id"].as_str().filter(|s| !s.is_empty())
            && call.id.is_empty()
        {
            call.id = id.to_owned();
        }
        let function = &fragment["function"];
        if let Some(name) = function["name"].as_str().filter(|s| !s.is_empty())
            && call.name.is_empty()
        {
            call.name = name.to_owned();
        }
        match &function["arguments"] {
            Value::String(part) => call.arguments.push_str(part),
            // Some servers send the arguments as an object rather than the encoded string.
            Value::Object(map) => call
                .arguments
                .push_str(&Value::Object(map.clone()).to_string()),
            _ => {}
        }
    }

    fn finish(self, provider: &str) -> Result<ModelTurn, LlmError> {
        if !self.done && self.finish_reason.is_none() {
            return Err(LlmError::Protocol {
                provider: provider.to_owned(),
                detail:
                    "the stream ended before the model finished (no finish_reason, no [DONE]); \
                         the connection may have been cut"
                        .to_owned(),
            });
        }
        let mut tool_calls = Vec::with_capacity(self.calls.len());
        for (index, call) in self.calls {
            if call.name.is_empty() {
                return Err(LlmError::Protocol {
                    provider: provider.to_owned(),
                    detail: format!("tool call #{index} in the stream has no function name"),
                });
            }
            let arguments = parse_tool_arguments(provider, &call.name, &call.arguments)?;
            let id = if call.id.is_empty() {
                format!("call_{index}")
            } else {
                call.id
            };
            tool_calls.push(ToolCall {
                id,
                name: call.name,
                arguments,
            });
        }
        Ok(ModelTurn {
            text: self.text,
            tool_calls,
            usage: self.usage,
            stop_reason: self.finish_reason,
        })
    }
}

/// An error object's message (and type or code when given).
fn error_text(error: &Value) -> String {
    let message = error["message"]
        .as_str()
        .map(str::to_owned)
        .unwrap_or_else(|| error.to_string());
    match error["type"].as_str().or(error["code"].as_str()) {
        Some(kind) => format!("{kind}: {message}"),
        None => message,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    fn sink() -> (EventSink, Arc<Mutex<Vec<StreamEvent>>>) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s = seen.clone();
        (Arc::new(move |e| s.lock().unwrap().push(e)), seen)
    }

    fn feed(chunks: &[&str]) -> Result<ModelTurn, LlmError> {
        let (events, _) = sink();
        let mut state = StreamState::default();
        for chunk in chunks {
            if state.on_data("test", chunk, &events)? {
                break;
            }
        }
        state.finish("test")
    }

    #[test]
    fn fragments_assemble_into_calls() {
        let turn = feed(&[
            r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"c0","type":"function","function":{"name":"a","arguments":""}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"x\":"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"c1","function":{"name":"b","arguments":{"y":2}}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"1}"}}]},"finish_reason":"tool_calls"}]}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4}}"#,
            "[DONE]",
        ])
        .unwrap();
        assert_eq!(turn.tool_calls.len(), 2);
        assert_eq!(turn.tool_calls[0].id, "c0");
        assert_eq!(turn.tool_calls[0].arguments["x"], json!(1));
        assert_eq!(turn.tool_calls[1].arguments["y"], json!(2));
        assert_eq!(turn.usage.output_tokens, 4);
        assert_eq!(turn.stop_reason.as_deref(), Some("tool_calls"));
    }

    #[test]
    fn broken_streams_are_errors() {
        let err = feed(&[r#"{"choices":[{"index":0,"delta":{"content":"hi"}}]}"#]).unwrap_err();
        assert!(err.to_string().contains("ended before"), "{err}");
        let err =
            feed(&[r#"{"error":{"message":"overloaded","type":"server_error"}}"#]).unwrap_err();
        assert!(
            err.to_string().contains("server_error: overloaded"),
            "{err}"
        );
        let err = feed(&[
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"lookup","arguments":"{oops"}}]},"finish_reason":"tool_calls"}]}"#,
        ])
        .unwrap_err();
        assert!(matches!(err, LlmError::Protocol { .. }));
        assert!(err.to_string().contains("\"lookup\""), "{err}");
    }

    #[test]
    fn temperatures_are_sent_as_written() {
        assert_eq!(json_f32(0.7).to_string(), "0.7");
        assert_eq!(json_f32(1.0).to_string(), "1.0");
    }
}
