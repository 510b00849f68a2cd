//! One view: the CLI through a running daemon (`portico tools|servers|agents|call|chat|
//! audit|conversations` show what `/mcp` serves), `--standalone`, and the CLI papercuts, driven
//! through the real binary.

#[path = "upstreams/support.rs"]
mod support;

#[path = "doors/client.rs"]
mod client;

#[path = "oneview/call_client.rs"]
mod call_client;
#[path = "oneview/daemon_view.rs"]
mod daemon_view;
#[path = "oneview/papercuts.rs"]
mod papercuts;
