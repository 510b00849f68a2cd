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

use std::collections::HashMap;
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
    uris: Mutex<HashMap<String, Hold>>,
    backend: Backend,
}

/// Where one URI of a session is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Hold {
    /// Its subscribe is on its way upstream.
    Pending,
    /// The upstream took it: the session holds one subscriber's share.
    Held,
    /// Unsubscribed while its subscribe was on its way: given back as soon as that succeeds, so
    /// racing the two cannot leave a share upstream that nobody holds.
    Released,
}

/// A URI recorded for a subscribe still in flight: dropped before [`Claim::keep`] (the upstream
/// refused, or the request was dropped), it is taken off the session again.
pub(crate) struct Claim<'a> {
    subscriptions: &'a SessionSubscriptions,
    uri: Option<String>,
}

impl Claim<'_> {
    /// The upstream took the subscription: the session holds it from now on, unless it was
    /// unsubscribed meanwhile, in which case it is given back at once.
    pub(crate) fn keep(mut self) {
        let Some(uri) = self.uri.take() else {
            return;
        };
        let mut uris = self.subscriptions.lock();
        match uris.get(&uri).copied() {
            Some(Hold::Pending) => {
                uris.insert(uri, Hold::Held);
            }
            Some(Hold::Released) => {
                uris.remove(&uri);
                drop(uris);
                give_back(&self.subscriptions.backend, [uri]);
            }
            Some(Hold::Held) | None => {}
        }
    }
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        if let Some(uri) = self.uri.take() {
            let mut uris = self.subscriptions.lock();
            if uris.get(&uri) != Some(&Hold::Held) {
                uris.remove(&uri);
            }
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

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Hold>> {
        // Every operation leaves the set consistent; poison from a panic elsewhere is moot.
        self.uris
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Records `uri` for a subscribe about to go upstream: `None` when the session holds it already
    /// or is subscribing to it (a session counts once per URI upstream, however often it
    /// subscribes); refused, before anything is asked of the upstream, when the session holds its
    /// bound. Recorded before the round-trip, so concurrent subscribes of one session can neither
    /// both count nor pass the bound together.
    pub(crate) fn claim(&self, uri: &str) -> Result<Option<Claim<'_>>, McpError> {
        let mut uris = self.lock();
        if let Some(hold) = uris.get_mut(uri) {
            // Subscribed again while an unsubscribe waits for the first subscribe: kept after all.
            if *hold == Hold::Released {
                *hold = Hold::Pending;
            }
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
        uris.insert(uri.to_string(), Hold::Pending);
        Ok(Some(Claim {
            subscriptions: self,
            uri: Some(uri.to_string()),
        }))
    }

    /// Takes `uri` off the session: true if the session held it, and so must give it back now; a
    /// subscribe still on its way gives it back when it succeeds.
    pub(crate) fn release(&self, uri: &str) -> bool {
        let mut uris = self.lock();
        match uris.get(uri).copied() {
            Some(Hold::Held) => {
                uris.remove(uri);
                true
            }
            Some(Hold::Pending) => {
                uris.insert(uri.to_string(), Hold::Released);
                false
            }
            Some(Hold::Released) | None => false,
        }
    }

    /// Whether the session wants `uri`'s updates.
    pub(crate) fn contains(&self, uri: &str) -> bool {
        matches!(self.lock().get(uri), Some(Hold::Pending | Hold::Held))
    }
}

impl Drop for SessionSubscriptions {
    fn drop(&mut self) {
        // Nothing is on its way any more (a claim borrows this), so what is here is held.
        let uris = std::mem::take(&mut *self.lock());
        give_back(
            &self.backend,
            uris.into_iter()
                .filter(|(_, hold)| *hold == Hold::Held)
                .map(|(uri, _)| uri),
        );
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

#[cfg(test)]
mod tests {
    use super::*;

    fn subscriptions(dir: &std::path::Path) -> SessionSubscriptions {
        let config = portico_config::parse("test", "[builtins]\nenabled = false").unwrap();
        let engine =
            portico_engine::Engine::start(&config, portico_engine::EngineOptions::in_dir(dir))
                .unwrap();
        SessionSubscriptions::new(Backend::Local(engine))
    }

    fn held(subscriptions: &SessionSubscriptions) -> Vec<String> {
        let mut held: Vec<String> = subscriptions
            .lock()
            .iter()
            .filter(|(_, hold)| **hold == Hold::Held)
            .map(|(uri, _)| uri.clone())
            .collect();
        held.sort();
        held
    }

    #[tokio::test]
    async fn a_session_claims_each_uri_once_and_at_most_its_bound() {
        let dir = tempfile::tempdir().unwrap();
        let subscriptions = subscriptions(dir.path());
        for n in 0..MAX_SUBSCRIPTIONS_PER_SESSION {
            let claim = subscriptions
                .claim(&format!("test://{n}"))
                .unwrap()
                .unwrap();
            claim.keep();
        }
        // Held already: nothing more to ask upstream, nothing counted twice.
        assert!(subscriptions.claim("test://0").unwrap().is_none());
        let refused = subscriptions.claim("test://more").err().unwrap();
        assert_eq!(refused.code.0, -32000);
        assert!(
            refused.message.starts_with(&format!(
                "this session is subscribed to {MAX_SUBSCRIPTIONS_PER_SESSION} resources"
            )),
            "{refused:?}"
        );
        assert!(subscriptions.release("test://0"));
        assert!(!subscriptions.release("test://0"));
        // A subscribe the upstream refused (its claim dropped unkept) leaves no trace.
        drop(subscriptions.claim("test://more").unwrap().unwrap());
        assert!(!subscriptions.contains("test://more"));
        assert_eq!(
            held(&subscriptions).len(),
            MAX_SUBSCRIPTIONS_PER_SESSION - 1
        );
    }

    /// Regression test: an unsubscribe that arrived while the session's subscribe was still on
    /// its way upstream took the URI off the session, and the subscribe then left a share
    /// upstream that nobody held or gave back (one of the 256 streams, for good).
    #[tokio::test]
    async fn an_unsubscribe_racing_its_subscribe_leaves_nothing_held() {
        let dir = tempfile::tempdir().unwrap();
        let subscriptions = subscriptions(dir.path());
        let claim = subscriptions.claim("test://raced").unwrap().unwrap();
        // Nothing to give back yet: the subscribe in flight does it once it succeeds.
        assert!(!subscriptions.release("test://raced"));
        assert!(!subscriptions.contains("test://raced"));
        claim.keep();
        assert!(subscriptions.lock().is_empty());

        // Subscribed again before the first subscribe came back: kept after all.
        let claim = subscriptions.claim("test://again").unwrap().unwrap();
        assert!(!subscriptions.release("test://again"));
        assert!(subscriptions.claim("test://again").unwrap().is_none());
        claim.keep();
        assert_eq!(held(&subscriptions), ["test://again"]);
    }
}
