//! `[server.oauth]`: the daemon's HTTP door as an OAuth 2.1 protected resource, driven over real
//! sockets: against an in-process issuer (`door`), and with the Python SDK's own OAuth client
//! against a small authorization server written for the tests (`sdk`), and with Portico itself as
//! the OAuth client of the door (`both_ways`).

#[path = "upstreams/support.rs"]
mod support;

#[path = "doors/client.rs"]
mod client;

#[path = "oauth_server/issuer.rs"]
mod issuer;

#[path = "oauth_server/door.rs"]
mod door;

#[path = "oauth_server/sdk.rs"]
mod sdk;

#[path = "oauth_server/both_ways.rs"]
mod both_ways;
