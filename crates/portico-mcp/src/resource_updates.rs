//! Resource subscriptions on 2026-07-28 sessions, where `resources/subscribe` is gone and a client
//! names the URIs it wants updates for in the `resourceSubscriptions` of a `subscriptions/listen`
//! stream. Portico keeps one stream per subscribed URI: subscribing opens one, unsubscribing cancels
//! it, and no other URI's stream is touched, so no update is lost to a re-listen or sent twice.

use std::collections::HashMap;
use std::sync::Mutex;

use rmcp::model::{ServerNotification, SubscriptionFilter};
use rmcp::service::{Peer, RoleClient};
use tokio::sync::mpsc;
use tokio_util::sync::{CancellationToken, DropGuard};

use crate::UpstreamEvent;

/// How many URIs one upstream session may have update streams for: each is a long-lived request
/// (an open response on HTTP), so clients cannot make Portico hold unboundedly many.
pub(crate) const MAX_RESOURCE_STREAMS: usize = 256;

/// The update streams of one session, by the upstream's URI.
#[derive(Default)]
pub(crate) struct ResourceStreams {
    inner: Mutex<Streams>,
}

#[derive(Default)]
struct Streams {
    open: HashMap<String, Stream>,
    /// Places taken by streams being opened: counted against [`MAX_RESOURCE_STREAMS`] from before
    /// the upstream round-trip, so concurrent subscribes cannot all pass the check and overshoot.
    opening: usize,
}

struct Stream {
    /// Subscriptions through Portico to this URI (several door sessions may want it).
    subscribers: usize,
    /// Ends the stream's task, which cancels the stream at the upstream.
    _stop: DropGuard,
}

/// What [`ResourceStreams::add`] found.
pub(crate) enum Added<'a> {
    /// The URI already had a stream; one more subscriber counts on it.
    Shared,
    /// A stream must be opened for it, in the place this holds (then [`ResourceStreams::opened`]);
    /// dropped unused (the open failed or was abandoned), the place is given back.
    New(Reservation<'a>),
    /// The session has [`MAX_RESOURCE_STREAMS`] streams open or being opened already.
    Full,
}

/// A place for one stream being opened; see [`Added::New`].
pub(crate) struct Reservation<'a> {
    streams: &'a ResourceStreams,
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        self.streams.lock().opening -= 1;
    }
}

impl ResourceStreams {
    fn lock(&self) -> std::sync::MutexGuard<'_, Streams> {
        // Every operation leaves the counts consistent; poison from a panic elsewhere is moot.
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Counts a subscriber on `uri`'s stream when it has one, else takes a place for opening one.
    pub(crate) fn add(&self, uri: &str) -> Added<'_> {
        let mut streams = self.lock();
        let taken = streams.open.len() + streams.opening;
        if let Some(stream) = streams.open.get_mut(uri) {
            stream.subscribers += 1;
            return Added::Shared;
        }
        if taken >= MAX_RESOURCE_STREAMS {
            return Added::Full;
        }
        streams.opening += 1;
        Added::New(Reservation { streams: self })
    }

    /// Keeps the stream just opened for `uri` in the place `reserved` took, and relays its
    /// updates as [`UpstreamEvent`]s until the last subscriber leaves or the session stops. A
    /// stream opened meanwhile by a concurrent subscriber wins: this one is counted on it and
    /// closed.
    pub(crate) fn opened(
        &self,
        reserved: Reservation<'_>,
        uri: &str,
        mut subscription: rmcp::service::Subscription,
        events: mpsc::UnboundedSender<UpstreamEvent>,
        session_stop: &CancellationToken,
    ) {
        // The place passes to the stream (or is given back when it shares another) under this
        // one lock, so no other subscribe sees it counted twice or not at all.
        let mut streams = self.lock();
        std::mem::forget(reserved);
        streams.opening -= 1;
        if let Some(stream) = streams.open.get_mut(uri) {
            stream.subscribers += 1;
            drop(streams);
            tokio::spawn(async move {
                let _ = subscription.cancel().await;
            });
            return;
        }
        let stop = session_stop.child_token();
        let ended = stop.clone();
        streams.open.insert(
            uri.to_string(),
            Stream {
                subscribers: 1,
                _stop: stop.drop_guard(),
            },
        );
        tokio::spawn(async move {
            loop {
                let next = tokio::select! {
                    next = subscription.next() => next,
                    _ = ended.cancelled() => {
                        let _ = subscription.cancel().await;
                        return;
                    }
                };
                match next {
                    Ok(Some(ServerNotification::ResourceUpdatedNotification(update))) => {
                        if events
                            .send(UpstreamEvent::ResourceUpdated(update.params.uri))
                            .is_err()
                        {
                            return;
                        }
                    }
                    Ok(Some(_)) => continue,
                    Ok(None) | Err(_) => return,
                }
            }
        });
    }

    /// Takes one subscriber off `uri`; the last one closes its stream. True if it had one.
    pub(crate) fn remove(&self, uri: &str) -> bool {
        let mut streams = self.lock();
        let Some(stream) = streams.open.get_mut(uri) else {
            return false;
        };
        stream.subscribers -= 1;
        if stream.subscribers == 0 {
            streams.open.remove(uri);
        }
        true
    }

    /// Streams open and places taken for streams being opened (for tests).
    #[cfg(test)]
    fn counts(&self) -> (usize, usize) {
        let streams = self.lock();
        (streams.open.len(), streams.opening)
    }
}

/// Subscriptions through Portico on a handshake-era session, counted per URI: the upstream has
/// one subscription per URI however many door sessions want it, so only the last one to leave
/// sends `resources/unsubscribe` (and another session's leaving never ends it).
#[derive(Default)]
pub(crate) struct HandshakeSubscriptions {
    subscribers: Mutex<HashMap<String, usize>>,
}

impl HandshakeSubscriptions {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, usize>> {
        self.subscribers
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Counts one more subscriber on `uri`, once the upstream accepted its `resources/subscribe`.
    pub(crate) fn subscribed(&self, uri: &str) {
        *self.lock().entry(uri.to_string()).or_insert(0) += 1;
    }

    /// Takes one subscriber off `uri`: true when it was the last, so the upstream should be told.
    /// A URI nobody subscribed to through Portico is passed on too (false only while others hold it).
    pub(crate) fn unsubscribed(&self, uri: &str) -> bool {
        let mut subscribers = self.lock();
        match subscribers.get_mut(uri) {
            Some(count) if *count > 1 => {
                *count -= 1;
                false
            }
            Some(_) => {
                subscribers.remove(uri);
                true
            }
            None => true,
        }
    }
}

/// The filter of one URI's update stream.
pub(crate) fn filter_for(uri: &str) -> SubscriptionFilter {
    SubscriptionFilter::builder()
        .resource_subscription(uri)
        .build()
}

/// Whether the upstream agreed to send updates for `uri` on the stream it acknowledged.
pub(crate) fn acknowledged(subscription: &rmcp::service::Subscription, uri: &str) -> bool {
    subscription
        .acknowledged()
        .resource_subscriptions
        .as_ref()
        .is_some_and(|uris| uris.iter().any(|u| u == uri))
}

/// Opens `uri`'s stream on `peer`.
pub(crate) async fn listen(
    peer: &Peer<RoleClient>,
    uri: &str,
) -> Result<rmcp::service::Subscription, rmcp::service::ServiceError> {
    peer.listen(filter_for(uri)).await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression test: `add` only checked the count, and the place was taken when the stream
    /// came back from the upstream, so subscribes in flight together all passed the check and a
    /// session ended up with more than `MAX_RESOURCE_STREAMS` streams.
    #[test]
    fn places_are_taken_before_the_upstream_round_trip() {
        let streams = ResourceStreams::default();
        let mut in_flight = Vec::new();
        for n in 0..MAX_RESOURCE_STREAMS {
            match streams.add(&format!("test://{n}")) {
                Added::New(reserved) => in_flight.push(reserved),
                _ => panic!("subscribe {n} of {MAX_RESOURCE_STREAMS} got no place"),
            }
        }
        assert_eq!(streams.counts(), (0, MAX_RESOURCE_STREAMS));
        assert!(matches!(streams.add("test://one-more"), Added::Full));
        // An open that fails (or whose request is dropped) gives its place back.
        in_flight.pop();
        assert_eq!(streams.counts(), (0, MAX_RESOURCE_STREAMS - 1));
        assert!(matches!(streams.add("test://one-more"), Added::New(_)));
        drop(in_flight);
        assert_eq!(streams.counts(), (0, 0));
    }

    #[test]
    fn a_handshake_subscription_is_given_up_upstream_by_its_last_subscriber_only() {
        let subscriptions = HandshakeSubscriptions::default();
        subscriptions.subscribed("test://a");
        subscriptions.subscribed("test://a");
        assert!(!subscriptions.unsubscribed("test://a"));
        assert!(subscriptions.unsubscribed("test://a"));
        // Not subscribed through Portico: passed on, as `resources/unsubscribe` would be.
        assert!(subscriptions.unsubscribed("test://a"));
        assert!(subscriptions.lock().is_empty());
    }
}
