//! Test tooling, not product: the bodies of Portico's fuzz targets.
//!
//! Each target is one `pub fn name(data: &[u8])` that must never panic, whatever the bytes. Two
//! harnesses call the same functions: the cargo-fuzz crate in `fuzz/` (nightly, libFuzzer, one thin
//! `fuzz_target!` per function) and the stable test `tests/corpus.rs`, which replays every file
//! committed under `fuzz/corpus/<target>/`, so `cargo test --workspace` runs the corpora as
//! regression cases with no nightly toolchain.
//!
//! The door targets drive the real router and the real MCP server in-process: one engine, one
//! router and one current-thread runtime per process ([`door`]), each input fed as requests through
//! `tower::ServiceExt::oneshot` (HTTP) or as the bytes of a stdio session. Besides "no panic", the
//! targets check what the code promises: the stdio decoder reads the same messages whatever the
//! read boundaries, `config check` accepts only what deserialises, a URL the SSRF check lets through
//! names no blocked address, and every JSON answer is JSON.

mod a2a;
mod config;
pub mod door;
mod framing;
mod mcp;
mod requests;
mod ssrf;

pub use a2a::{a2a_jsonrpc, a2a_parse, a2a_rest};
pub use config::config;
pub use framing::stdio_framing;
pub use mcp::{legacy_message, mcp_http, mcp_stdio};
pub use ssrf::ssrf;

/// A target's body.
pub type Target = fn(&[u8]);

/// Every target by the name of its corpus directory (`fuzz/corpus/<name>/`) and its `fuzz_target!`.
pub const TARGETS: &[(&str, Target)] = &[
    ("stdio_framing", stdio_framing),
    ("mcp_stdio", mcp_stdio),
    ("mcp_http", mcp_http),
    ("legacy_message", legacy_message),
    ("a2a_jsonrpc", a2a_jsonrpc),
    ("a2a_rest", a2a_rest),
    ("a2a_parse", a2a_parse),
    ("config", config),
    ("ssrf", ssrf),
];
