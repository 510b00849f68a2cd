//! `portico-a2a-client` is Portico's A2A edge, client side: it reads another agent's card, sends it
//! messages over A2A 1.0 or 0.3 (JSON-RPC or HTTP+JSON, streamed or polled) through the SSRF-safe
//! client, and serves `[[a2a.external_agents]]` to the call pipeline as `a2a_*` tools
//! ([`RemoteAgents`]). It also holds the A2A protocol types ([`protocol`]: 1.0, and 0.3 with
//! conversions) and the older JSON translations ([`wire`]) that the server side shares.
//!
//! What it is not: the A2A server (cards, doors, tasks and push are `portico-a2a`, above the engine),
//! or the pipeline's checks (a remote agent's tool is called through `Pipeline::call` like any other).

mod client;
pub mod protocol;
mod remote;
pub mod wire;

pub use client::{
    A2aClient, A2aEvent, AgentCard, Binding, CardInterface, ClientError, ClientOptions, Endpoint,
    SendOutcome, SendRequest, Skill,
};
pub use remote::{RemoteAgentStatus, RemoteAgents, remote_agents_source, remote_tool_name};
