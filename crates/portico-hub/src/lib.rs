//! The hub: every configured upstream connected concurrently, supervised, and aggregated into one catalog.
//!
//! Each enabled server gets its own supervisor task, so a slow, failing or hanging server never delays or
//! breaks another. (A one-shot command's hub starts [`Hub::idle`] and connects only the servers the
//! command needs.) A supervisor connects, lists the server's catalog, then waits for one of three things:
//! the session ending (the server died: its in-flight calls have already failed, and it is restarted with
//! capped, jittered exponential backoff), a list-changed notification (the server's part of the catalog
//! is listed again), or shutdown (the session is closed and a stdio child stopped and reaped).
//! [`Hub::reload`] applies a new config's server list: each server has its own stop token, so a removed
//! or changed one is stopped alone, a new one started, and the others are not touched.
//!
//! The aggregated [`Catalog`] is rebuilt whole on every change and swapped in behind an `Arc`, so readers
//! never wait on writers and never see half a catalog. Locks here are plain `std` locks held only for
//! copies and swaps, never across an await.
//!
//! [`HubTools`] offers the catalog's tools to the call pipeline, through `portico-core`'s `ToolSource`
//! (the hub does not depend on the pipeline).
//!
//! A server that requires OAuth and has no usable token is `needs login`: its supervisor waits for
//! its credentials file to change (a login in any Portico process) instead of backing off.
//!
//! The hub is not a protocol edge: it neither speaks MCP to clients nor parses wire formats.

mod hub;
mod tools;

pub use hub::{Hub, HubError, HubSettings, ListKind, ServerChanges};
pub use portico_mcp::StopGrace;
pub use portico_mcp::oauth::OAuthHome;
/// A server's stderr log, as [`Hub::server_log`] hands it out.
pub use portico_mcp::{LogLine, ServerLog};
pub use tools::HubTools;
