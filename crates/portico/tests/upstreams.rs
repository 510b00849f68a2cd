//! Integration tests of the hub against real MCP servers: the npm reference servers, a Python server on
//! the `mcp` 2.x SDK, and stdlib fault servers. Installed by `scripts/install-test-peers`.
//!
//! Tests drive both the `portico` binary (over its real stdout and exit codes) and the library (`Hub`).

#[path = "upstreams/support.rs"]
mod support;

#[path = "upstreams/binary.rs"]
mod binary;
#[path = "upstreams/catalog.rs"]
mod catalog;
#[path = "upstreams/eras.rs"]
mod eras;
#[path = "upstreams/faults.rs"]
mod faults;
#[path = "upstreams/passthrough.rs"]
mod passthrough;
#[path = "upstreams/ssrf.rs"]
mod ssrf;
