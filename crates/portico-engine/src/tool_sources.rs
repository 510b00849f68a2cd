//! Where each tool the doors serve comes from, in words a person reads: `portico tools` and
//! `GET /api/tools` show it beside every name, so a catalog of 40 tools says which are Portico's
//! own, which run an agent and which an upstream server answers.

use portico_hub::HubTools;

use crate::Engine;

/// The source of one tool, as `portico tools` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolOriginKind {
    /// Portico's own: the built-ins, `agent_list`/`agent_send`, an embedder's host tools.
    BuiltIn,
    /// A configured agent (`portico_agent_*`).
    Agent,
    /// An external A2A agent (`a2a_*`).
    RemoteAgent,
    /// An upstream MCP server, by its configured name.
    Server(String),
}

impl ToolOriginKind {
    /// The word shown in listings: `built-in`, `agent`, `remote agent` or `server`.
    pub fn label(&self) -> &'static str {
        match self {
            ToolOriginKind::BuiltIn => "built-in",
            ToolOriginKind::Agent => "agent",
            ToolOriginKind::RemoteAgent => "remote agent",
            ToolOriginKind::Server(_) => "server",
        }
    }

    /// The upstream server's name, for a server's tool.
    pub fn server(&self) -> Option<&str> {
        match self {
            ToolOriginKind::Server(name) => Some(name),
            _ => None,
        }
    }

    /// From the pipeline source's [`portico_core::ToolSource::kind`] and, for the hub, the server
    /// that owns the name.
    fn from_kind(kind: &str, server: impl FnOnce() -> Option<String>) -> Option<Self> {
        Some(match kind {
            "local" => ToolOriginKind::BuiltIn,
            "agents" => ToolOriginKind::Agent,
            "a2a" => ToolOriginKind::RemoteAgent,
            HubTools::KIND => ToolOriginKind::Server(server()?),
            // A source added later is shown as Portico's own until it gets a word of its own.
            _ => ToolOriginKind::BuiltIn,
        })
    }
}

impl Engine {
    /// Where the tool `name` comes from now, or `None` when no source knows it.
    pub fn tool_origin(&self, name: &str) -> Option<ToolOriginKind> {
        let kind = self.pipeline().source_kind(name)?;
        ToolOriginKind::from_kind(kind, || {
            self.catalog().tool(name).map(|tool| tool.server.clone())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_source_kind_has_its_word() {
        let server = || Some("github".to_string());
        let shown = |kind| {
            ToolOriginKind::from_kind(kind, server)
                .map(|o| (o.label(), o.server().map(str::to_string)))
        };
        assert_eq!(shown("local"), Some(("built-in", None)));
        assert_eq!(shown("agents"), Some(("agent", None)));
        assert_eq!(shown("a2a"), Some(("remote agent", None)));
        assert_eq!(shown("hub"), Some(("server", Some("github".into()))));
        // A hub name the catalog no longer has is no tool.
        assert_eq!(ToolOriginKind::from_kind("hub", || None), None);
    }
}
