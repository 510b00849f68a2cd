//! Where tools come from: a [`ToolSource`] (local tools, agents, the hub's upstream catalog, remote
//! agents) lists [`ToolEntry`]s and runs them; the pipeline asks each source in turn.

use std::sync::Arc;
use std::time::Duration;

use crate::context::ToolContext;
use crate::relay::BoxFuture;
use crate::{CallError, JsonObject, ToolResult};

/// How far a tool's output can be trusted. Output from outside Portico (an upstream MCP server, a web
/// page, a remote agent) may carry instructions written by someone else.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trust {
    Trusted,
    Untrusted,
}

/// One tool as the pipeline sees it.
#[derive(Debug, Clone)]
pub struct ToolEntry {
    pub name: String,
    pub definition: Arc<JsonObject>,
    pub trust: Trust,
    /// Acts on the world; guarded by the taint rule.
    pub sensitive: bool,
    /// Overrides the pipeline's per-tool timeout (agents run longer than a tool call).
    pub timeout: Option<Duration>,
    /// Changes whenever the source's definitions may have changed; keys the schema cache.
    pub generation: u64,
}

/// Where an upstream tool comes from: what tool pinning keys its pin by. The exposed name is not
/// enough: a name collision elsewhere can change it without the tool changing.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ToolOrigin {
    /// The configured server name.
    pub server: String,
    /// The upstream's own name of the tool.
    pub upstream_name: String,
}

/// A provider of tools. The pipeline asks each source in order; the first that knows a name owns it.
pub trait ToolSource: Send + Sync {
    /// A short name for logs: "local", "agents", "hub".
    fn kind(&self) -> &'static str;
    fn entries(&self) -> Vec<ToolEntry>;
    fn find(&self, name: &str) -> Option<ToolEntry>;
    /// Waits (bounded) until the source's first listing is complete, e.g. upstreams still connecting.
    fn settle(&self) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }
    /// For a tool defined outside Portico (an upstream MCP server's), where it comes from; such
    /// tools are the ones `[policy] pin_tools` pins. `None` for Portico's own tools.
    fn origin(&self, _name: &str) -> Option<ToolOrigin> {
        None
    }
    /// A tool the source does not list but takes anyway, asked only once no source finds the name:
    /// the hub's sole unprefixed upstream, whose unknown names are its own to answer. Its entry
    /// has no schemas, so the upstream checks the arguments itself.
    fn unlisted(&self, _name: &str) -> Option<ToolEntry> {
        None
    }
    /// Runs the tool. `Err` is a failure to reach or run it (shown to the caller as an error result,
    /// and audited by its kind); a tool that ran and failed returns its own error result.
    fn call<'a>(
        &'a self,
        entry: &'a ToolEntry,
        arguments: JsonObject,
        context: &'a ToolContext,
    ) -> BoxFuture<'a, Result<ToolResult, CallError>>;
}
