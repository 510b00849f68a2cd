//! Filters on the log: events that are not what their level says.

/// What rmcp logs at ERROR when a client went away while an answer to it was still on its way
/// (an IDE closing, or `portico mcp` detaching, with its `subscriptions/listen` stream open): the
/// answer has nowhere to go, which is how every disconnect ends, not an error of Portico's.
const CLIENT_GONE: &str = "failed to send pending response during drain";

/// The same, from rmcp's task that sends one answer, when the client's channel closed before it
/// was sent (which of the two a disconnect logs depends on timing).
const ANSWER_TO_CLIENT_GONE: &str = "fail to response message";

/// What rmcp logs at WARN for every request answered with an error, the error in Rust debug form
/// (`ErrorData { code: ErrorCode(-32602), ... }`); Portico logs its own answers in words instead.
const RESPONSE_ERROR: &str = "response error";

/// Keeps [`CLIENT_GONE`] and [`ANSWER_TO_CLIENT_GONE`] out of the log unless it is at debug level (`-vv`, or `PORTICO_LOG`
/// allowing debug): an ERROR on every disconnect taught people to ignore errors.
pub(crate) struct QuietClientGone {
    show: bool,
}

impl QuietClientGone {
    /// `filter`: the log's filter; the event is shown when it lets debug events through.
    pub(crate) fn for_filter(filter: &tracing_subscriber::EnvFilter) -> Self {
        QuietClientGone {
            show: filter
                .max_level_hint()
                .is_some_and(|level| level >= tracing::level_filters::LevelFilter::DEBUG),
        }
    }
}

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for QuietClientGone {
    fn event_enabled(
        &self,
        event: &tracing::Event<'_>,
        _: tracing_subscriber::layer::Context<'_, S>,
    ) -> bool {
        let metadata = event.metadata();
        if self.show
            || *metadata.level() > tracing::Level::WARN
            || !metadata.target().starts_with("rmcp")
        {
            return true;
        }
        struct Message(bool);
        impl tracing::field::Visit for Message {
            fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
                if field.name() == "message" {
                    let text = format!("{value:?}");
                    self.0 = text == CLIENT_GONE
                        || text == ANSWER_TO_CLIENT_GONE
                        || text == RESPONSE_ERROR;
                }
            }
        }
        let mut message = Message(false);
        event.record(&mut message);
        !message.0
    }
}

/// Keeps rmcp's debug and trace output out of the log at every level: it prints whole messages
/// (a tool call's arguments and its result, which may hold secrets the audit keeps only as keyed
/// digests) and, in its OAuth module, the authorization code and the token exchange's result. No
/// filter a user sets lets them through; rmcp's info, warnings and errors still do.
pub(crate) struct NoMessageBodies;

/// Crates whose events below INFO quote the messages they carry.
const BODY_LOGGING_TARGETS: &[&str] = &["rmcp"];

impl NoMessageBodies {
    fn keeps_out(metadata: &tracing::Metadata<'_>) -> bool {
        *metadata.level() > tracing::Level::INFO
            && BODY_LOGGING_TARGETS.iter().any(|target| {
                metadata
                    .target()
                    .strip_prefix(target)
                    .is_some_and(|rest| rest.is_empty() || rest.starts_with("::"))
            })
    }
}

/// Decided on the callsite, never per event: an event one layer drops in `event_enabled` after
/// the log's own filters looked at it leaves their state behind, and the next event (an
/// upstream's stderr line) was then dropped with it.
impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for NoMessageBodies {
    fn register_callsite(
        &self,
        metadata: &'static tracing::Metadata<'static>,
    ) -> tracing::subscriber::Interest {
        if Self::keeps_out(metadata) {
            tracing::subscriber::Interest::never()
        } else {
            tracing::subscriber::Interest::always()
        }
    }

    fn enabled(
        &self,
        metadata: &tracing::Metadata<'_>,
        _: tracing_subscriber::layer::Context<'_, S>,
    ) -> bool {
        !Self::keeps_out(metadata)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use tracing_subscriber::layer::SubscriberExt;

    use super::*;

    /// Records the message of every event it is given.
    struct Messages(Arc<Mutex<Vec<String>>>);

    impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Messages {
        fn on_event(
            &self,
            event: &tracing::Event<'_>,
            _: tracing_subscriber::layer::Context<'_, S>,
        ) {
            struct Text(String);
            impl tracing::field::Visit for Text {
                fn record_debug(
                    &mut self,
                    field: &tracing::field::Field,
                    value: &dyn std::fmt::Debug,
                ) {
                    if field.name() == "message" {
                        self.0 = format!("{value:?}");
                    }
                }
            }
            let mut text = Text(String::new());
            event.record(&mut text);
            self.0.lock().unwrap().push(text.0);
        }
    }

    fn logged(show: bool) -> Vec<String> {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let subscriber = tracing_subscriber::registry()
            .with(QuietClientGone { show })
            .with(Messages(seen.clone()));
        tracing::subscriber::with_default(subscriber, || {
            tracing::error!(target: "rmcp::service", error = "channel closed", "{CLIENT_GONE}");
            tracing::error!(target: "rmcp::service", error = "channel closed", "{ANSWER_TO_CLIENT_GONE}");
            tracing::error!(target: "rmcp::service", "response send task failed during drain");
            tracing::error!(target: "portico", "{CLIENT_GONE}");
            tracing::debug!(target: "rmcp::service", "{CLIENT_GONE}");
            tracing::warn!(target: "rmcp::service", id = 2, error = "ErrorData { .. }", "{RESPONSE_ERROR}");
        });
        seen.lock().unwrap().clone()
    }

    #[test]
    fn only_rmcps_client_gone_error_is_kept_out_and_only_below_debug() {
        assert_eq!(
            logged(false),
            [
                "response send task failed during drain",
                CLIENT_GONE,
                CLIENT_GONE
            ]
        );
        assert_eq!(logged(true).len(), 6);
    }

    #[test]
    fn rmcps_debug_and_trace_output_never_reaches_the_log() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let subscriber = tracing_subscriber::registry()
            .with(NoMessageBodies)
            .with(Messages(seen.clone()));
        tracing::subscriber::with_default(subscriber, || {
            tracing::debug!(target: "rmcp::transport::auth", "exchange token result: id_token=secret");
            tracing::trace!(target: "rmcp::transport::auth::metadata_resolver", "trace");
            tracing::info!(target: "rmcp::transport::auth", "Refreshed access token.");
            tracing::debug!(target: "rmcp::service", "received request: arguments=secret");
            tracing::trace!(target: "rmcp", "message=secret");
            tracing::warn!(target: "rmcp::service", "warned");
            tracing::debug!(target: "rmcpx", "another crate");
            tracing::debug!(target: "portico_hub", "ours");
        });
        assert_eq!(
            *seen.lock().unwrap(),
            ["Refreshed access token.", "warned", "another crate", "ours"]
        );
    }
}
