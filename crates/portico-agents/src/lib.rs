//! `portico-agents` runs Portico's agents: each is a model, a system prompt and a set of tools from
//! the catalog (chosen by glob patterns), driven in a loop (model, tool calls, results, model again)
//! until it gives a final answer.
//!
//! Every tool call an agent makes goes through the call pipeline under the agent's own identity, so
//! the agent sees and may call only what its patterns match, whichever door it was reached through.
//! The loop runs one turn's tool calls in parallel, guards against loops ([`loop_guard`]), bounds the
//! run by `max_iterations` and `timeout_secs`, counts tokens per call and per conversation, and stores
//! every message in the embedded store so conversations survive restarts.
//!
//! Agents are also tools: [`AgentTools`] serves each as `portico_agent_{name}` to every door, and
//! [`agent_tools`] gives agents `agent_list` and `agent_send`.
//!
//! What it is not: a model driver (`portico-llm`), the pipeline (`portico-pipeline`), or a protocol
//! edge: the doors decide how a conversation is reached.

mod drivers;
pub mod loop_guard;
mod runtime;

pub use drivers::{DriverChoice, MODEL_VARIABLES, NEEDS_A_MODEL, choose};
pub use runtime::{
    AGENT_SEND, Agent, AgentChanges, AgentError, AgentInfo, AgentReply, AgentRuntime, AgentTools,
    RuntimeSettings, UNTRUSTED_META, UsageCounts, agent_tools,
};
