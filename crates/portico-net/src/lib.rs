//! `portico-net` is the one outbound HTTP client: every request Portico makes
//! to an upstream MCP server goes through [`SafeClient`], which refuses
//! server-side request forgery targets.
//!
//! What it guarantees:
//! - only `http` and `https` URLs are fetched;
//! - every address is checked against a [`NetPolicy`] before a connection is
//!   made, and the connection is pinned to the checked address (the check
//!   lives in the resolver reqwest connects with, so DNS rebinding has no
//!   window); IP-literal hosts, which skip the resolver, are checked
//!   explicitly, and a connector guard re-checks the peer of every socket;
//! - each redirect hop is re-checked, and at most [`MAX_REDIRECTS`] are followed;
//! - a request carrying configured headers (see [`CredentialScope`]) never follows a redirect to
//!   another origin, since reqwest would take those headers along;
//! - cloud metadata, link-local, unspecified, multicast, broadcast and
//!   reserved destinations are always refused; loopback and private ranges
//!   only with `allow_private`;
//! - proxies (including `HTTP_PROXY` & co.) are never used, since a proxy
//!   would connect on our behalf, out of reach of the checks;
//! - refusals name the rule that fired ([`BlockedAddress`]).
//!
//! It also holds the two pieces of HTTP reading every client shares: the one
//! server-sent events parser ([`sse`], capped, WHATWG rules, over a reqwest
//! byte stream) and the reading of `Retry-After` ([`retry_after`]).
//!
//! What it is not: an HTTP abstraction, a retry layer, or an MCP transport.
//! Callers use reqwest's types directly; [`SafeClient::http`] hands the
//! checked `reqwest::Client` to code (rmcp, the SSE client) that drives
//! reqwest itself. When and how often to retry is `portico_core::retry`.
//! It also does not decide policy: which servers may reach
//! private networks is configuration, passed in as a [`NetPolicy`].

mod cause;
mod client;
mod error;
mod guard;
mod lazy;
mod policy;
mod resolve;
pub mod retry_after;
pub mod sse;

pub use cause::root_cause;
pub use client::{CredentialScope, MAX_REDIRECTS, SafeClient, SafeClientBuilder, check_url};
pub use error::{BlockedAddress, NetError, blocked_in_error_chain};
pub use lazy::LazyClient;
pub use policy::{
    BlockRule, NetPolicy, address_class, classify, embedded_ipv4, host_name_class,
    parse_ipv4_lenient,
};
pub use resolve::{BoxFuture, HostResolver, SystemResolver};
pub use retry_after::retry_after;
