//! Filters on the log: events that are not what their level says.

/// What rmcp logs at ERROR when a client went away while an answer to it was still on its way
/// (an IDE closing, or `portico mcp` detaching, with its `subscriptions/listen` stream open): the
/// answer has nowhere to go, which is how every disconnect ends, not an error of Portico's.
const CLIENT_GONE: &str = "failed to send pending response during drain";

/// Keeps [`CLIENT_GONE`] out of the log unless it is at debug level (`-vv`, or `PORTICO_LOG`
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
            || *metadata.level() != tracing::Level::ERROR
            || !metadata.target().starts_with("rmcp")
        {
            return true;
        }
        struct Message(bool);
        impl tracing::field::Visit for Message {
            fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
                if field.name() == "message" {
                    self.0 = format!("{value:?}") == CLIENT_GONE;
                }
            }
        }
        let mut message = Message(false);
        event.record(&mut message);
        !message.0
    }
}
