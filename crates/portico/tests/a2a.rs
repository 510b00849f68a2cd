//! Integration tests of Portico's A2A server: the real daemon, driven over HTTP in JSON-RPC (1.0 and
//! 0.3), HTTP+JSON and the legacy `tasks/send`, with scripted agents; durability across SIGKILL and the
//! bounded task store.

#[path = "upstreams/support.rs"]
mod support;

#[path = "doors/client.rs"]
mod client;

#[path = "a2a/helpers.rs"]
mod helpers;

#[path = "a2a/client.rs"]
mod client_side;

#[path = "a2a/lifecycle.rs"]
mod lifecycle;
#[path = "a2a/protocol.rs"]
mod protocol;
#[path = "a2a/push.rs"]
mod push;
#[path = "a2a/sdk.rs"]
mod sdk;
#[path = "a2a/server.rs"]
mod server;
#[path = "a2a/store.rs"]
mod store;
#[path = "a2a/tck.rs"]
mod tck;
