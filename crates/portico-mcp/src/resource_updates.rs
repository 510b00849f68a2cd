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
    streams: Mutex<HashMap<String, Stream>>,
}

struct Stream {
    /// Subscriptions through Portico to this URI (several door sessions may want it).
    subscribers: usize,
    /// Ends the stream's task, which cancels the stream at the upstream.
    _stop: DropGuard,
}

/// What [`ResourceStreams::add`] found.
pub(crate) enum Added {
    /// The URI already had a stream; one more subscriber counts on it.
    Shared,
    /// A stream must be opened for it (then [`ResourceStreams::opened`]).
    New,
    /// The session has [`MAX_RESOURCE_STREAMS`] already.
    Full,
}

impl ResourceStreams {
    /// Counts a subscriber on `uri`'s stream when it has one.
    pub(crate) fn add(&self, uri: &str) -> Added {
        let mut streams = self.streams.lock().expect("resource streams lock");
        let full = streams.len() >= MAX_RESOURCE_STREAMS;
        match streams.get_mut(uri) {
            Some(stream) => {
                stream.subscribers += 1;
                Added::Shared
            }
            None if full => Added::Full,
            None => Added::New,
        }
    }

    /// Keeps the stream just opened for `uri` and relays its updates as [`UpstreamEvent`]s until
    /// the last subscriber leaves or the session stops. A stream opened meanwhile by a concurrent
    /// subscriber wins: this one is counted on it and closed.
    pub(crate) fn opened(
        &self,
        uri: &str,
        mut subscription: rmcp::service::Subscription,
        events: mpsc::UnboundedSender<UpstreamEvent>,
        session_stop: &CancellationToken,
    ) {
        let mut streams = self.streams.lock().expect("resource streams lock");
        if let Some(stream) = streams.get_mut(uri) {
            stream.subscribers += 1;
            drop(streams);
            tokio::spawn(async move {
                let _ = subscription.cancel().await;
            });
            return;
        }
        let stop = session_stop.child_token();
        let ended = stop.clone();
        streams.insert(
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
        let mut streams = self.streams.lock().expect("resource streams lock");
        let Some(stream) = streams.get_mut(uri) else {
            return false;
        };
        stream.subscribers -= 1;
        if stream.subscribers == 0 {
            streams.remove(uri);
        }
        true
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
