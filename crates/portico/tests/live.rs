//! The daemon's live config and its shutdown, driven through the binary over real sockets: a reload
//! an attached MCP client sees (list_changed, the catalog, a call in flight on an untouched server),
//! a refused config, SIGHUP, shutdown with idle sessions, a second Ctrl-C, and the door's answers to
//! a client going away.

#[path = "upstreams/support.rs"]
mod support;

#[path = "doors/client.rs"]
mod client;

#[path = "live/http.rs"]
mod http;

#[path = "live/reload.rs"]
mod reload;
#[path = "live/shutdown.rs"]
mod shutdown;
