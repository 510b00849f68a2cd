//! The resources a door session, or one 2026-07-28 `subscriptions/listen` stream, holds upstream,
//! and their giving back.
//!
//! Upstream, a subscription is shared by every session that wants its URI and counted per
//! subscriber (on a 2026-07-28 upstream it is one long-lived stream, at most 256 per upstream
//! session). So each session records what it holds, at most [`MAX_SUBSCRIPTIONS_PER_SESSION`]
//! URIs, and gives back exactly that: on `resources/unsubscribe`, and all of it when the session
//! ends (HTTP DELETE or idle expiry, stdio EOF, a legacy SSE disconnect: rmcp drops the session's
//! handler, and with it the last handle of its [`SessionSubscriptions`]). A listen stream gives back
//! what it subscribed when it ends, also when its request is dropped half-way ([`ListenHold`]).

use std::collections::HashSet;
use std::future::Future;
use std::sync::Mutex;

use rmcp::ErrorData as McpError;

use crate::backend::Backend;

/// Resources one MCP session may be subscribed to at once, and one `subscriptions/listen` stream
/// may follow: each can hold one of an upstream session's 256 update streams, so one client cannot
/// take them all with a session or two.
pub const MAX_SUBSCRIPTIONS_PER_SESSION: usize = 32;

/// The exposed URIs one session subscribed to with `resources/subscribe`; dropped with the
/// session, it gives them all back upstream.
pub(crate) struct SessionSubscriptions {
    uris: Mutex<HashSet<String>>,
    backend: Backend,
}

/// A URI recorded for a subscribe still in flight: dropped before [`Claim::keep`] (the upstream
/// refused, or the request was dropped), it is taken off the session again.
pub(crate) struct Claim<'a> {
    subscriptions: &'a SessionSubscriptions,
    uri: Option<String>,
}

impl Claim<'_> {
    /// The upstream took the subscription: the session holds it from now on.
    pub(crate) fn keep(mut self) {
        self.uri = None;
    }
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        if let Some(uri) = self.uri.take() {
            self.subscriptions.lock().remove(&uri);
        }
    }
}

impl SessionSubscriptions {
    pub(crate) fn new(backend: Backend) -> Self {
        SessionSubscriptions {
            uris: Mutex::default(),
            backend,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        // Every operation leaves the set consistent; poison from a panic elsewhere is moot.
        self.uris
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Records `uri` for a subscribe about to go upstream: `None` when the session holds it already
    /// (a session counts once per URI upstream, however often it subscribes); refused, before
    /// anything is asked of the upstream, when the session holds its bound. Recorded before the
    /// round-trip, so concurrent subscribes of one session can neither both count nor pass the
    /// bound together.
    pub(crate) fn claim(&self, uri: &str) -> Result<Option<Claim<'_>>, McpError> {
        let mut uris = self.lock();
        if uris.contains(uri) {
            return Ok(None);
        }
        if uris.len() >= MAX_SUBSCRIPTIONS_PER_SESSION {
            return Err(McpError::new(
                rmcp::model::ErrorCode(-32000),
                format!(
                    "this session is subscribed to {} resources, the most one session may be (Portico's MAX_SUBSCRIPTIONS_PER_SESSION); unsubscribe from one (resources/unsubscribe) before subscribing to `{uri}`",
                    uris.len()
                ),
                None,
            ));
        }
        uris.insert(uri.to_string());
        Ok(Some(Claim {
            subscriptions: self,
            uri: Some(uri.to_string()),
        }))
    }

    /// Takes `uri` off the session: true if the session held it, and so must give it back.
    pub(crate) fn release(&self, uri: &str) -> bool {
        self.lock().remove(uri)
    }

    pub(crate) fn contains(&self, uri: &str) -> bool {
        self.lock().contains(uri)
    }
}

impl Drop for SessionSubscriptions {
    fn drop(&mut self) {
        let uris = std::mem::take(&mut *self.lock());
        give_back(&self.backend, uris);
    }
}

/// What one `subscriptions/listen` stream subscribed upstream; given back when dropped, whether
/// the stream ended or its request was dropped mid-way (the client hung up).
pub(crate) struct ListenHold {
    uris: Vec<String>,
    backend: Backend,
}

impl ListenHold {
    pub(crate) fn new(backend: Backend) -> Self {
        ListenHold {
            uris: Vec::new(),
            backend,
        }
    }

    /// The upstream took `uri`'s subscription for this stream.
    pub(crate) fn held(&mut self, uri: String) {
        self.uris.push(uri);
    }
}

impl Drop for ListenHold {
    fn drop(&mut self) {
        give_back(&self.backend, std::mem::take(&mut self.uris));
    }
}

/// Unsubscribes each of `uris` upstream. Giving back a 2026-07-28 upstream's stream needs no
/// round-trip, so it is done before this returns: the place is free when the session's end is.
/// What needs one (a handshake-era upstream's `resources/unsubscribe`) is finished in a task.
fn give_back(backend: &Backend, uris: impl IntoIterator<Item = String>) {
    for uri in uris {
        let backend = backend.clone();
        let mut unsubscribe = Box::pin(async move {
            if let Err(error) = backend.unsubscribe(&uri).await {
                tracing::debug!(uri, "giving back a resource subscription failed: {error}");
            }
        });
        let mut context = std::task::Context::from_waker(std::task::Waker::noop());
        if unsubscribe.as_mut().poll(&mut context).is_pending() {
            // Without a runtime (the process is ending) there is nothing left to tell.
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                runtime.spawn(unsubscribe);
            }
        }
    }
}
