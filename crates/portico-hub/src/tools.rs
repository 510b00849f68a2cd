//! The hub's aggregated upstream catalog as a tool source of the call pipeline (`mcp_*` tools).

use std::time::Duration;

use portico_core::context::ToolContext;
use portico_core::relay::BoxFuture;
use portico_core::source::{ToolEntry, ToolOrigin, ToolSource, Trust};
use portico_core::{CallError, JsonObject, ToolResult};

use crate::Hub;

/// How long a lookup waits for servers still making their first connection attempt: an IDE calls a tool
/// it remembers right after start.
const SETTLE_WAIT: Duration = Duration::from_secs(5);

/// Upstream MCP tools. Their output is untrusted: Portico does not control what a server returns.
pub struct HubTools {
    hub: Hub,
}

impl HubTools {
    /// Its [`ToolSource::kind`].
    pub const KIND: &'static str = "hub";

    pub fn new(hub: Hub) -> Self {
        HubTools { hub }
    }

    fn generation(&self) -> u64 {
        *self.hub.subscribe().borrow()
    }
}

fn entry(tool: &portico_core::CatalogTool, generation: u64) -> ToolEntry {
    ToolEntry {
        name: tool.name.clone(),
        definition: tool.exposed(),
        trust: Trust::Untrusted,
        sensitive: false,
        timeout: None,
        generation,
    }
}

impl ToolSource for HubTools {
    fn kind(&self) -> &'static str {
        Self::KIND
    }

    fn entries(&self) -> Vec<ToolEntry> {
        let generation = self.generation();
        self.hub
            .catalog()
            .tools()
            .iter()
            .map(|tool| entry(tool, generation))
            .collect()
    }

    fn find(&self, name: &str) -> Option<ToolEntry> {
        let generation = self.generation();
        Some(entry(self.hub.catalog().tool(name)?, generation))
    }

    /// The passed-through server's names it does not list ([`Hub::passthrough_server`]): the
    /// call goes to it under the name as given, and its answer, or its error, is the client's.
    fn unlisted(&self, name: &str) -> Option<ToolEntry> {
        self.hub.passthrough_server()?;
        let mut definition = JsonObject::new();
        definition.insert("name".into(), name.into());
        Some(ToolEntry {
            name: name.to_string(),
            definition: std::sync::Arc::new(definition),
            trust: Trust::Untrusted,
            sensitive: false,
            timeout: None,
            generation: self.generation(),
        })
    }

    fn origin(&self, name: &str) -> Option<ToolOrigin> {
        let catalog = self.hub.catalog();
        let tool = catalog.tool(name)?;
        Some(ToolOrigin {
            server: tool.server.clone(),
            upstream_name: tool.upstream_name.clone(),
        })
    }

    fn settle(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            if !self.hub.settled() {
                let _ = tokio::time::timeout(SETTLE_WAIT, self.hub.wait_settled()).await;
            }
        })
    }

    fn call<'a>(
        &'a self,
        entry: &'a ToolEntry,
        arguments: JsonObject,
        context: &'a ToolContext,
    ) -> BoxFuture<'a, Result<ToolResult, CallError>> {
        Box::pin(async move {
            self.hub
                .call_tool_with(&entry.name, Some(arguments), &context.relay)
                .await
                .map_err(CallError::from)
        })
    }
}
