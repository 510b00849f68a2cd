//! A transport wrapper that notes each progress and log notification as it arrives, in arrival order.
//!
//! rmcp hands every incoming notification to a task of its own, so the answer to a call can reach the
//! caller before the progress and log notifications the server sent ahead of it have been relayed;
//! clients such as the Python SDK drop progress that comes after the answer. Counting them here, where
//! messages are still in order, lets a call wait for them to be relayed before it returns.

use std::sync::Arc;

use rmcp::RoleClient;
use rmcp::model::{JsonRpcMessage, ServerNotification};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;

use crate::client_handler::ActiveCalls;

pub(crate) struct ProgressInOrder<T> {
    inner: T,
    active: Arc<ActiveCalls>,
}

impl<T> ProgressInOrder<T> {
    pub(crate) fn new(inner: T, active: &Arc<ActiveCalls>) -> Self {
        ProgressInOrder {
            inner,
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
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        let message = self.inner.receive().await;
        if let Some(JsonRpcMessage::Notification(notification)) = &message {
            match &notification.notification {
                ServerNotification::ProgressNotification(progress) => {
                    self.active.arrived(Some(&progress.params.progress_token))
                }
                ServerNotification::LoggingMessageNotification(_) => self.active.arrived(None),
                _ => {}
            }
        }
        message
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}
