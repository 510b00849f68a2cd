//! Portico's LLM model drivers: the provider-neutral chat types an agent loop speaks, and the drivers
//! that turn them into each provider's wire format and back.
//!
//! What it is:
//! - the domain types ([`ChatRequest`], [`ChatMessage`], [`ModelTurn`], [`StreamEvent`], ...) and the
//!   [`ModelDriver`] trait every model is reached through;
//! - [`OpenAiCompatible`]: Chat Completions, streamed, for OpenAI and the many servers that copy it
//!   (Ollama, vLLM, llama.cpp, LM Studio, gateways);
//! - [`Anthropic`]: the Messages API, streamed;
//! - [`Sampling`]: completions delegated to the MCP client that called the agent (MCP sampling,
//!   with tools as of MCP 2025-11-25), asked as `portico_core`'s typed sampling request through the
//!   calling client's `Caller`; the MCP edge writes the protocol's JSON;
//! - [`Scripted`]: a deterministic driver for tests, demos and protocol test kits.
//!
//! The HTTP drivers always stream, forward text fragments as they arrive, retry what is safe to retry
//! (rate limits, overload, connection failures before any response byte, never after output started)
//! and send every request through [`portico_net::SafeClient`].
//!
//! What it is not: the agent loop (deciding when to call the model again), tool execution (the
//! drivers only report the calls the model asked for), or configuration parsing (settings arrive
//! already resolved, API keys included; the name of the key's environment variable is only used to
//! say what to set when one is missing).

mod anthropic;
mod error;
mod openai;
mod retry;
mod sampling;
mod scripted;
mod transport;
mod types;

pub use anthropic::{ANTHROPIC_VERSION, Anthropic, AnthropicSettings, DEFAULT_MAX_TOKENS};
pub use error::LlmError;
pub use openai::{OpenAiCompatible, OpenAiSettings};
pub use retry::RetryPolicy;
pub use sampling::{DEFAULT_SAMPLING_MAX_TOKENS, Sampling, complete_sampling};
pub use scripted::{PartStep, RuleMatch, ScriptRule, Scripted, Step};
pub use types::{
    ArtifactPart, ChatMessage, ChatRequest, EventSink, JsonObject, ModelDriver, ModelTurn,
    StreamEvent, ToolCall, ToolSpec, Usage,
};
