//! The provider-neutral conversation types and the driver trait.

use std::sync::Arc;

pub use portico_core::context::ArtifactPart;
use portico_core::relay::BoxFuture;
use serde::{Deserialize, Serialize};

use crate::LlmError;

/// A JSON object; the same type as [`portico_core::JsonObject`], so tool arguments and schemas pass
/// between the catalog and the drivers without conversion.
pub type JsonObject = portico_core::JsonObject;

/// One request to a model: the whole conversation so far, since the APIs are stateless.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ChatRequest {
    pub system: Option<String>,
    pub messages: Vec<ChatMessage>,
    /// The tools the model may call; empty means no tools are offered.
    pub tools: Vec<ToolSpec>,
    pub temperature: Option<f32>,
    /// Upper bound on output tokens; each driver has its own default where the API demands one.
    pub max_tokens: Option<u32>,
}

/// One message of a conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum ChatMessage {
    User {
        text: String,
        /// The id of the message this came from (A2A message id, say); only [`crate::Scripted`]
        /// looks at it.
        #[serde(default)]
        message_id: Option<String>,
    },
    Assistant {
        text: String,
        #[serde(default)]
        tool_calls: Vec<ToolCall>,
    },
    Tool {
        call_id: String,
        name: String,
        text: String,
        #[serde(default)]
        is_error: bool,
    },
}

/// A tool offered to the model.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// JSON Schema of the arguments, passed to the provider unchanged.
    pub input_schema: JsonObject,
}

/// A tool call the model asked for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The provider's id for the call; a tool result must echo it.
    pub id: String,
    pub name: String,
    pub arguments: JsonObject,
}

/// Token counts as reported by the provider (estimated by [`crate::Scripted`], zero for
/// [`crate::Sampling`], whose clients do not report them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
}

impl Usage {
    /// Adds another turn's counts (an agent run totals its turns). Saturates rather than wraps.
    pub fn add(&mut self, other: Usage) {
        self.input_tokens = self.input_tokens.saturating_add(other.input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(other.output_tokens);
    }
}

/// What the model produced in one completion.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ModelTurn {
    pub text: String,
    /// Empty when the model gave its final answer.
    pub tool_calls: Vec<ToolCall>,
    pub usage: Usage,
    /// The provider's own stop reason (`stop`, `tool_calls`, `end_turn`, `tool_use`, ...), unmapped.
    pub stop_reason: Option<String>,
}

/// Progress reported while a completion runs.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamEvent {
    /// A fragment of the model's text, in order.
    TextDelta(String),
    /// A status update (only [`crate::Scripted`] emits these, to drive task-state test kits).
    Status {
        state: String,
        message: Option<String>,
    },
    /// A piece of an artifact, one part (only [`crate::Scripted`] emits these).
    Artifact {
        name: String,
        part: ArtifactPart,
        last_chunk: bool,
    },
    /// The final answer is a plain message, not a task's result (only [`crate::Scripted`] emits
    /// this, for protocol test kits that expect an agent to answer so).
    AnswerAsMessage,
}

/// Where a driver sends [`StreamEvent`]s. Called on the driver's task, so it must not block.
pub type EventSink = Arc<dyn Fn(StreamEvent) + Send + Sync>;

/// A model, reached however its driver reaches it.
pub trait ModelDriver: Send + Sync {
    /// What this driver talks to, for logs and errors: e.g. `openai gpt-4o-mini at
    /// https://api.openai.com/v1`. Never includes credentials.
    fn describe(&self) -> String;

    /// Runs one completion over the whole conversation, reporting text as it arrives. Dropping the
    /// future cancels the request.
    fn complete<'a>(
        &'a self,
        request: &'a ChatRequest,
        events: &'a EventSink,
    ) -> BoxFuture<'a, Result<ModelTurn, LlmError>>;
}

/// Parses the arguments a model streamed for a tool call. Models send an empty string (or `null`)
/// for tools without parameters; anything else that is not a JSON object is a broken call, reported
/// naming the tool rather than passed on as something the tool never asked for.
pub(crate) fn parse_tool_arguments(
    provider: &str,
    tool: &str,
    raw: &str,
) -> Result<JsonObject, LlmError> {
    if raw.trim().is_empty() {
        return Ok(JsonObject::new());
    }
    match serde_json::from_str::<serde_json::Value>(raw) {
        Ok(serde_json::Value::Object(map)) => Ok(map),
        Ok(serde_json::Value::Null) => Ok(JsonObject::new()),
        Ok(other) => Err(LlmError::Protocol {
            provider: provider.to_owned(),
            detail: format!(
                "the arguments for tool {tool:?} are not a JSON object: {}",
                excerpt(&other.to_string(), 200)
            ),
        }),
        Err(e) => Err(LlmError::Protocol {
            provider: provider.to_owned(),
            detail: format!(
                "the arguments for tool {tool:?} are not valid JSON ({e}): {}",
                excerpt(raw, 200)
            ),
        }),
    }
}

/// The first `max` characters of `text`, with an ellipsis when cut.
pub(crate) fn excerpt(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_adds_and_saturates() {
        let mut u = Usage {
            input_tokens: 1,
            output_tokens: u64::MAX - 1,
        };
        u.add(Usage {
            input_tokens: 2,
            output_tokens: 5,
        });
        assert_eq!(u.input_tokens, 3);
        assert_eq!(u.output_tokens, u64::MAX);
    }

    #[test]
    fn messages_serialise_with_a_role_tag() {
        let m = ChatMessage::Tool {
            call_id: "c1".into(),
            name: "t".into(),
            text: "ok".into(),
            is_error: false,
        };
        let v = serde_json::to_value(&m).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"role": "tool", "call_id": "c1", "name": "t", "text": "ok", "is_error": false})
        );
        let back: ChatMessage =
            serde_json::from_value(serde_json::json!({"role": "user", "text": "hi"})).unwrap();
        assert_eq!(
            back,
            ChatMessage::User {
                text: "hi".into(),
                message_id: None
            }
        );
    }

    #[test]
    fn tool_arguments() {
        assert_eq!(
            parse_tool_arguments("p", "t", "").unwrap(),
            JsonObject::new()
        );
        assert_eq!(
            parse_tool_arguments("p", "t", "null").unwrap(),
            JsonObject::new()
        );
        assert_eq!(
            parse_tool_arguments("p", "t", r#"{"a":1}"#).unwrap()["a"],
            serde_json::json!(1)
        );
        let err = parse_tool_arguments("p", "search", r#"{"a":"#).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("\"search\""), "{text}");
        assert!(text.contains(r#"{"a":"#), "{text}");
        assert!(parse_tool_arguments("p", "t", "[1]").is_err());
    }

    #[test]
    fn excerpt_cuts_on_characters() {
        assert_eq!(excerpt("héllo", 2), "hé…");
        assert_eq!(excerpt("hé", 2), "hé");
    }
}
