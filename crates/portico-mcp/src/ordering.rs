//! A transport wrapper that takes an upstream's progress and log notifications out of rmcp's hands and
//! queues them, in arrival order, for the calls they belong to.
//!
//! rmcp hands every incoming notification to a task of its own. Those tasks race: a call's progress
//! reached its client shuffled (1, 2, 4, 5, 3, ...), and the answer to a call could reach the caller
//! before the progress sent ahead of it (clients such as the Python SDK drop progress that comes after
//! the answer). Here messages are still in the order the upstream sent them, so each progress or log
//! notification goes straight onto its call's queue (see [`ActiveCalls`]), and the call relays that
//! queue to its client while it waits for the answer, and drains it before returning.
//!
//! Outgoing requests pass through here too: a call's request carries its registration, and the
//! progress token rmcp gave it is recorded before the request reaches the upstream, so no progress
//! can arrive for a call that is not yet known.

use std::sync::Arc;

use rmcp::RoleClient;
use rmcp::model::{GetExtensions, GetMeta, JsonRpcMessage, JsonRpcRequest, ServerNotification};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;

use crate::client_handler::{ActiveCalls, CallRegistration, log_upstream_message};

pub(crate) struct ProgressInOrder<T> {
    inner: T,
    server: String,
    active: Arc<ActiveCalls>,
}

impl<T> ProgressInOrder<T> {
    pub(crate) fn new(inner: T, server: &str, active: &Arc<ActiveCalls>) -> Self {
        ProgressInOrder {
            inner,
            server: server.to_string(),
            active: active.clone(),
        }
    }
}

impl<T: Transport<RoleClient>> Transport<RoleClient> for ProgressInOrder<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        if let JsonRpcMessage::Request(JsonRpcRequest { request, id, .. }) = &item
            && let Some(call) = request.extensions().get::<CallRegistration>()
            && let Some(token) = request.get_meta().get_progress_token()
        {
            self.active.sent(*call, token, id.clone());
        }
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        // Nothing is awaited between taking a message from the inner transport and queueing it, so
        // this future can be dropped at any await (rmcp polls it in a `select!`) without losing one.
        loop {
            let message = self.inner.receive().await?;
            if let JsonRpcMessage::Notification(notification) = &message {
                match &notification.notification {
                    ServerNotification::ProgressNotification(progress) => {
                        self.active.progress(&progress.params);
                        continue;
                    }
                    ServerNotification::LoggingMessageNotification(log) => {
                        log_upstream_message(&self.server, &log.params);
                        self.active.log(&log.params);
                        continue;
                    }
                    _ => {}
                }
            }
            return Some(message);
        }
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}
