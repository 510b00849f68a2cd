//! The MCP method names of what is relayed to a calling client ([`RelayRequest`],
//! [`RelayNotification`]): the protocol's names stay in the MCP edges.

use portico_core::relay::{RelayNotification, RelayRequest};

/// The MCP method of a relayed request.
pub const fn request_method(request: RelayRequest) -> &'static str {
    match request {
        RelayRequest::Sampling => "sampling/createMessage",
        RelayRequest::Elicitation => "elicitation/create",
        RelayRequest::Roots => "roots/list",
    }
}

/// The MCP method of a relayed notification.
pub const fn notification_method(notification: RelayNotification) -> &'static str {
    match notification {
        RelayNotification::Progress => "notifications/progress",
        RelayNotification::Log => "notifications/message",
    }
}
