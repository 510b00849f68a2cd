//! Change notifications in the 2026-07-28 form: `subscriptions/listen` streams (SEP-2575).
//!
//! A 2026-07-28 client opens one long-lived `subscriptions/listen` request naming what it wants
//! (`toolsListChanged`, `promptsListChanged`, `resourceSubscriptions: [uri…]`); rmcp acknowledges it
//! and hands the fixture a [`SubscriptionSink`] that filters and tags every notification with the
//! subscription's id. Stateless clients send each request on its own connection, and rmcp builds a
//! handler per connection, so the open streams live here, shared by every handler of the process:
//! `test_trigger_tool_change` on one connection notifies a listen stream on another.
//!
//! Resource subscriptions mirror the handshake era's `resources/subscribe`: one
//! `notifications/resources/updated` for each listed resource shortly after the stream opens, so a
//! gateway that turns a 2025 client's `resources/subscribe` into a listen stream has an update to relay.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use rmcp::service::SubscriptionSink;

/// Every open `subscriptions/listen` stream of the process.
#[derive(Default)]
pub struct Listeners {
    /// Keyed by a number of our own: request ids repeat across stateless connections.
    open: Mutex<Vec<(u64, SubscriptionSink)>>,
    next: AtomicU64,
}

/// What a trigger tool announces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    Tools,
    Prompts,
}

impl Listeners {
    /// Registers `sink` until the returned guard is dropped (when its stream ends).
    pub fn register(&self, sink: SubscriptionSink) -> Registration<'_> {
        let key = self.next.fetch_add(1, Ordering::Relaxed);
        lock(&self.open).push((key, sink));
        Registration {
            listeners: self,
            key,
        }
    }

    /// Sends the change to every stream that asked for it; returns how many got it.
    pub async fn announce(&self, change: Change) -> usize {
        let sinks: Vec<SubscriptionSink> = lock(&self.open)
            .iter()
            .map(|(_, sink)| sink.clone())
            .collect();
        let mut delivered = 0;
        for sink in sinks {
            let sent = match change {
                Change::Tools => sink.notify_tool_list_changed().await,
                Change::Prompts => sink.notify_prompt_list_changed().await,
            };
            // A stream that did not ask for this kind of change refuses it; that is the filter working.
            match sent {
                Ok(()) => delivered += 1,
                Err(error) => tracing::debug!(%error, ?change, "listen stream skipped"),
            }
        }
        delivered
    }
}

/// Removes its stream from [`Listeners`] when dropped.
pub struct Registration<'a> {
    listeners: &'a Listeners,
    key: u64,
}

impl Drop for Registration<'_> {
    fn drop(&mut self) {
        lock(&self.listeners.open).retain(|(key, _)| *key != self.key);
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Single pushes and retains keep the list consistent across a panic elsewhere.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
