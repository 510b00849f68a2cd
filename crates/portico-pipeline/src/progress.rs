//! Progress messages for a client at a door: an agent's streamed text, relayed in order.

use portico_core::context::ToolContext;
use portico_core::relay::RelayNotification;

/// Progress messages on their way to a client at a door, in order. Cheap to clone.
#[derive(Clone)]
pub struct ProgressMessages {
    sender: tokio::sync::mpsc::UnboundedSender<Forward>,
}

enum Forward {
    Message(String),
    /// Answered once everything queued before it has been sent.
    Flush(tokio::sync::oneshot::Sender<()>),
}

impl ProgressMessages {
    /// Queues a message; never blocks.
    pub fn send(&self, message: String) {
        let _ = self.sender.send(Forward::Message(message));
    }

    /// Waits until every message queued so far has reached the client: a call must not answer
    /// before the progress it reported, or the client would see progress after the result.
    pub async fn flush(&self) {
        let (done, wait) = tokio::sync::oneshot::channel();
        if self.sender.send(Forward::Flush(done)).is_ok() {
            let _ = wait.await;
        }
    }
}

/// When the client at the far end of `context` asked for progress, a queue whose messages reach it
/// as `notifications/progress` with those messages, in order (a forwarding task sends them, so
/// queuing never blocks).
pub fn progress_messages(context: &ToolContext) -> Option<ProgressMessages> {
    let caller = context.relay.caller.clone()?;
    if !context.relay.progress {
        return None;
    }
    let (sender, mut receiver) = tokio::sync::mpsc::unbounded_channel::<Forward>();
    tokio::spawn(async move {
        let mut count = 0u64;
        while let Some(forward) = receiver.recv().await {
            match forward {
                Forward::Message(message) => {
                    count += 1;
                    let params = serde_json::json!({"progress": count, "message": message});
                    caller
                        .notify(
                            RelayNotification::Progress,
                            params.as_object().cloned().unwrap_or_default(),
                        )
                        .await;
                }
                Forward::Flush(done) => {
                    let _ = done.send(());
                }
            }
        }
    });
    Some(ProgressMessages { sender })
}
