//! `portico-a2a` is Portico's A2A edge, server side: every Portico agent is an A2A agent, with a card
//! (`/.well-known/agent-card.json` for the primary agent in the 1.0 or 0.3 form, the legacy
//! `/.well-known/agent.json`, and `{listen_path}/{agent}/.well-known/agent-card.json` for each), and
//! endpoints in three bindings: JSON-RPC 2.0 (`POST {listen_path}/{agent}`, the 1.0 and 0.3 method
//! names), HTTP+JSON (the 1.0 paths under `{listen_path}/{agent}`, the 0.3 ones under
//! `{listen_path}/{agent}/v1`), and the early draft's `POST {listen_path}/tasks/send`.
//!
//! It works on the protocol's types (`portico_a2a_client::protocol`: 1.0, and 0.3 converted at the
//! edge): each binding reads its request into them (JSON-RPC into one `A2aRequest` variant per
//! method) and calls the one operation for it in `ops`; JSON is written only at the bindings and
//! for the task store, which keeps it.
//!
//! Tasks are stored before they are acknowledged, run the agent through the call pipeline in the
//! background (streamed over SSE, cancelled for real), and are visible only to the caller that made
//! them.
//!
//! What it is not: the agent loop (`portico-agents`), the task store (`portico-store`), the HTTP
//! door's security (`portico-daemon` puts these routes behind it), or the A2A client and the remote
//! agents' `a2a_*` tools (`portico-a2a-client`, below the engine, which serves them itself).

mod card;
mod error;
mod jsonrpc;
mod ops;
mod parts;
pub mod pricing;
mod push;
mod rest03;
mod server;
mod tasks;

// The protocol's versions and the 0.3 JSON forms are shared with the client, below the engine.
use portico_a2a_client::wire;

pub use error::A2aError;
pub use server::{A2aOptions, recover_interrupted, routes};
pub use tasks::{RESPONSE_ARTIFACT, StreamLimits, Tasks, task_json};
