//! Portico's MCP edge, server side: serves the hub's aggregated catalog to MCP clients (IDEs, agents).
//!
//! [`PorticoServer`] is an rmcp `ServerHandler` over a [`portico_hub::Hub`]: it lists the catalog's tools,
//! resources, resource templates and prompts under their exposed names, forwards calls through the hub,
//! announces catalog changes as list-changed notifications, and turns results over the response budget
//! into clear errors instead of half-written frames. Transports (stdio with dual framing, Streamable
//! HTTP) are chosen by the caller; this crate only speaks the protocol.
//!
//! It does not connect to upstreams (the hub does) and does not own HTTP routing or authentication (the
//! daemon does).

mod backend;
mod handler;
mod host_tools;
mod relay;
pub mod tool_search;

pub use backend::{Backend, BackendError, DaemonLink, Listing};
pub use handler::{DEFAULT_MAX_RESPONSE_BYTES, Exposure, PorticoServer, ServerOptions};
pub use host_tools::{HostTool, HostTools, ToolFailure};
