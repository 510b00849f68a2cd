//! The downstream half of relaying: an MCP client of Portico's doors, seen by the hub as a [`Caller`].

// Sampling, roots and logging are deprecated from protocol 2026-07-28 on (SEP-2577), but clients of every
// earlier era use them, and relaying them is the point of this module.
#![allow(deprecated)]

use portico_core::relay::{
    BoxFuture, Caller, Confirmation, RelayError, RelayNotification, RelayRequest, SamplingAnswer,
    SamplingError, SamplingRequest,
};
use portico_core::{JsonObject, to_object};
use portico_mcp::{confirm_through, notification_method, request_method, sample_through};
use rmcp::model::{
    CreateMessageRequestParams, ElicitRequestParams, LoggingMessageNotificationParam,
    ProgressNotificationParam, ProgressToken,
};
use rmcp::service::{Peer, RoleServer, ServiceError};
use serde::de::DeserializeOwned;
use serde_json::Value;

/// The client of one request: its session, the progress token it asked for, and what it can do.
pub(crate) struct DownstreamCaller {
    pub(crate) peer: Peer<RoleServer>,
    pub(crate) progress_token: Option<ProgressToken>,
    /// The client's declared capabilities, as JSON.
    pub(crate) capabilities: Value,
    /// The client is Portico's own proxy (`portico mcp` in front of a daemon), whose declared
    /// capabilities say what upstreams may ask, not what the person behind it can answer.
    pub(crate) portico_proxy: bool,
}

/// The `clientInfo.name` Portico's MCP client gives (`portico mcp` in front of a daemon too).
pub(crate) const PORTICO_CLIENT_NAME: &str = "portico";

fn parse<T: DeserializeOwned>(method: &str, params: JsonObject) -> Result<T, RelayError> {
    serde_json::from_value(Value::Object(params)).map_err(|e| RelayError {
        code: -32602,
        message: format!("the upstream's {method} request is not valid MCP: {e}"),
    })
}

fn service_error(method: &str, error: ServiceError) -> RelayError {
    match error {
        ServiceError::McpError(e) => RelayError {
            code: e.code.0,
            message: e.message.to_string(),
        },
        other => RelayError {
            code: -32603,
            message: format!("relaying {method} to the client failed: {other}"),
        },
    }
}

impl Caller for DownstreamCaller {
    fn accepts(&self, request: RelayRequest) -> bool {
        let capability = match request {
            RelayRequest::Sampling => "sampling",
            RelayRequest::Elicitation => "elicitation",
            RelayRequest::Roots => "roots",
        };
        self.capabilities
            .get(capability)
            .is_some_and(|c| !c.is_null())
    }

    fn accepts_tasks(&self) -> bool {
        self.capabilities
            .get("extensions")
            .and_then(|extensions| extensions.get(rmcp::model::TASKS_EXTENSION_ID))
            .is_some_and(|c| !c.is_null())
    }

    fn request<'a>(
        &'a self,
        request: RelayRequest,
        params: JsonObject,
    ) -> BoxFuture<'a, Result<JsonObject, RelayError>> {
        Box::pin(async move {
            let method = request_method(request);
            match request {
                RelayRequest::Sampling => {
                    let params: CreateMessageRequestParams = parse(method, params)?;
                    let result = self
                        .peer
                        .create_message(params)
                        .await
                        .map_err(|e| service_error(method, e))?;
                    Ok(to_object(&result))
                }
                RelayRequest::Elicitation => {
                    let params: ElicitRequestParams = parse(method, params)?;
                    let result = self
                        .peer
                        .create_elicitation(params)
                        .await
                        .map_err(|e| service_error(method, e))?;
                    Ok(to_object(&result))
                }
                RelayRequest::Roots => {
                    let result = self
                        .peer
                        .list_roots()
                        .await
                        .map_err(|e| service_error(method, e))?;
                    Ok(to_object(&result))
                }
            }
        })
    }

    fn sample<'a>(
        &'a self,
        request: SamplingRequest,
    ) -> BoxFuture<'a, Result<SamplingAnswer, SamplingError>> {
        sample_through(self, request)
    }

    /// A Portico proxy is never asked: it cannot say whether the person behind it can answer.
    fn can_confirm(&self) -> bool {
        !self.portico_proxy && self.accepts(RelayRequest::Elicitation)
    }

    fn confirm<'a>(&'a self, question: String) -> BoxFuture<'a, Result<Confirmation, RelayError>> {
        confirm_through(self, question)
    }

    fn notify<'a>(
        &'a self,
        notification: RelayNotification,
        mut params: JsonObject,
    ) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let method = notification_method(notification);
            let sent = match notification {
                RelayNotification::Progress => {
                    let Some(token) = &self.progress_token else {
                        return;
                    };
                    params.insert(
                        "progressToken".into(),
                        serde_json::to_value(token).unwrap_or_default(),
                    );
                    match parse::<ProgressNotificationParam>(method, params) {
                        Ok(progress) => self.peer.notify_progress(progress).await,
                        Err(_) => return,
                    }
                }
                RelayNotification::Log => {
                    match parse::<LoggingMessageNotificationParam>(method, params) {
                        Ok(message) => self.peer.notify_logging_message(message).await,
                        Err(_) => return,
                    }
                }
            };
            // The client may have gone; the call itself will notice.
            if let Err(e) = sent {
                tracing::debug!("could not relay {method} to the client: {e}");
            }
        })
    }
}
