//! What Portico does with requests and notifications an upstream sends it.

use rmcp::ClientHandler;
#[allow(deprecated)]
use rmcp::model::{
    ClientCapabilities, ClientConfig, Implementation, LoggingLevel, LoggingMessageNotificationParam,
};
use rmcp::service::{NotificationContext, RoleClient};
use tokio::sync::mpsc;

/// Something an upstream told us that the hub must act on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpstreamEvent {
    ToolsChanged,
    PromptsChanged,
    ResourcesChanged,
}

/// The rmcp client handler for one upstream: relays list changes to the hub and logs under the server's
/// name.
pub(crate) struct PorticoClient {
    pub(crate) server: String,
    pub(crate) events: mpsc::UnboundedSender<UpstreamEvent>,
}

impl PorticoClient {
    fn notify(&self, event: UpstreamEvent) {
        // The hub may already be gone during shutdown; nothing to refresh then.
        let _ = self.events.send(event);
    }
}

impl ClientHandler for PorticoClient {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("portico", env!("CARGO_PKG_VERSION")),
        )
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.notify(UpstreamEvent::ToolsChanged);
    }

    async fn on_prompt_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.notify(UpstreamEvent::PromptsChanged);
    }

    async fn on_resource_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.notify(UpstreamEvent::ResourcesChanged);
    }

    // Logging is deprecated from 2026-07-28 on, but every older era still sends it and users want it.
    #[allow(deprecated)]
    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let server = &self.server;
        let logger = params.logger.as_deref().unwrap_or("");
        let data = params.data;
        match params.level {
            LoggingLevel::Debug => tracing::debug!(server, logger, "{data}"),
            LoggingLevel::Info | LoggingLevel::Notice => tracing::info!(server, logger, "{data}"),
            LoggingLevel::Warning => tracing::warn!(server, logger, "{data}"),
            _ => tracing::error!(server, logger, "{data}"),
        }
    }
}
