//! A model completion asked of the calling client (MCP sampling, with tools), as domain values.
//!
//! The agent's `sampling` driver builds a [`SamplingRequest`] and reads a [`SamplingAnswer`]; the MCP
//! edges write the request as `sampling/createMessage` params and read the client's result. Tool
//! result content stays opaque content blocks, as in [`crate::ToolResult`].

use serde_json::Value;

use crate::JsonObject;
use crate::relay::RelayError;

/// What the model is asked: the conversation so far and how to answer it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SamplingRequest {
    pub messages: Vec<SamplingMessage>,
    /// Sent only when there is one.
    pub system_prompt: Option<String>,
    /// Required by the protocol, so always given.
    pub max_tokens: u32,
    pub temperature: Option<f32>,
    /// The tools the model may ask to call; empty for none.
    pub tools: Vec<SamplingTool>,
    /// How the model may use `tools`; `None` leaves it to the client.
    pub tool_choice: Option<SamplingToolChoice>,
}

/// One turn of the conversation.
#[derive(Debug, Clone, PartialEq)]
pub struct SamplingMessage {
    pub role: SamplingRole,
    /// In order. A message of tool results holds nothing but tool results.
    pub content: Vec<SamplingContent>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SamplingRole {
    User,
    Assistant,
}

/// One piece of a message.
#[derive(Debug, Clone, PartialEq)]
pub enum SamplingContent {
    Text(String),
    /// The model asked for a tool call (in an assistant message).
    ToolUse(SamplingToolUse),
    /// What a tool call answered (in a user message).
    ToolResult {
        tool_use_id: String,
        /// Content blocks, kept verbatim.
        content: Vec<Value>,
        is_error: bool,
    },
}

/// A tool call the model asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct SamplingToolUse {
    /// Links the call's result back to it.
    pub id: String,
    pub name: String,
    pub input: JsonObject,
}

/// A tool the model may ask to call.
#[derive(Debug, Clone, PartialEq)]
pub struct SamplingTool {
    pub name: String,
    pub description: String,
    /// A JSON Schema object, passed on as given.
    pub input_schema: JsonObject,
}

/// How the model may use the tools it is offered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SamplingToolChoice {
    /// The model decides whether to call one (the only mode Portico asks for).
    Auto,
}

/// What the client's model answered.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SamplingAnswer {
    /// The text blocks of the answer, joined.
    pub text: String,
    /// The tool calls the model asked for, in order; empty when it answered.
    pub tool_uses: Vec<SamplingToolUse>,
    /// The client's stop reason as it spelled it (`endTurn`, `toolUse`, ...), unmapped.
    pub stop_reason: Option<String>,
    /// The model the client chose, if it said.
    pub model: Option<String>,
}

/// Why a sampling request got no answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SamplingError {
    /// The client refused or failed the request.
    #[error("the client answered error {}: {}", .0.code, .0.message)]
    Refused(RelayError),
    /// The client answered something that is not a sampling result; the text says what is wrong.
    #[error("{0}")]
    Malformed(String),
}
