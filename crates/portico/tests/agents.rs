//! Integration tests of Portico's agents: the real binary, real upstream MCP servers, and fake model
//! providers (OpenAI-compatible and Anthropic) speaking their streaming wire formats over real HTTP.

#[path = "upstreams/support.rs"]
mod support;

#[path = "doors/client.rs"]
mod client;

#[path = "agents/fake_models.rs"]
mod fake_models;

#[path = "agents/default_agent.rs"]
mod default_agent;
#[path = "agents/loops.rs"]
mod loops;
#[path = "agents/store.rs"]
mod store;
