//! Saying why a connection failed in plain words: the innermost cause of an error chain, and the
//! last connect failure a client saw, for callers whose error passed through a library (rmcp) that
//! kept only a top-level message.

use std::error::Error as StdError;
use std::sync::{Arc, Mutex};

/// The innermost cause of `error`, as a user reads it: `connection refused`, not `tcp connect
/// error` or `Connection refused (os error 111)`. The wrappers above it (reqwest's "error sending
/// request", hyper's "client error (Connect)") say only that something failed.
pub fn root_cause(error: &(dyn StdError + 'static)) -> String {
    let mut innermost = error;
    while let Some(source) = innermost.source() {
        innermost = source;
    }
    if let Some(io) = innermost.downcast_ref::<std::io::Error>()
        && let Some(words) = io_words(io.kind())
    {
        return words.to_string();
    }
    plain(&innermost.to_string())
}

/// The common socket failures in the words people search for.
fn io_words(kind: std::io::ErrorKind) -> Option<&'static str> {
    use std::io::ErrorKind;
    Some(match kind {
        ErrorKind::ConnectionRefused => "connection refused",
        ErrorKind::ConnectionReset => "connection reset by peer",
        ErrorKind::ConnectionAborted => "connection aborted",
        ErrorKind::TimedOut => "timed out",
        ErrorKind::HostUnreachable => "host unreachable",
        ErrorKind::NetworkUnreachable => "network unreachable",
        ErrorKind::AddrNotAvailable => "address not available",
        _ => return None,
    })
}

/// Drops the `(os error N)` tail and lowercases a leading capital of a sentence, so the cause reads
/// as the end of our sentence.
fn plain(text: &str) -> String {
    let text = match text.rfind(" (os error ") {
        Some(at) if text.ends_with(')') => &text[..at],
        _ => text,
    };
    let mut chars = text.chars();
    match (chars.next(), chars.next()) {
        (Some(first), Some(second)) if first.is_uppercase() && second.is_lowercase() => first
            .to_lowercase()
            .chain(text[first.len_utf8()..].chars())
            .collect(),
        _ => text.to_string(),
    }
}

/// The last connect failure of one client (shared by its clones), recorded by the connector
/// guard. Only the newest is kept: it is read right after the request that failed.
#[derive(Clone, Default)]
pub(crate) struct ConnectFailures(Arc<Mutex<Option<String>>>);

impl ConnectFailures {
    pub(crate) fn record(&self, error: &(dyn StdError + 'static)) {
        if let Ok(mut last) = self.0.lock() {
            *last = Some(root_cause(error));
        }
    }

    pub(crate) fn last(&self) -> Option<String> {
        self.0.lock().ok()?.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("error sending request for url (http://127.0.0.1:9/mcp)")]
    struct Outer(#[source] Middle);

    #[derive(Debug, thiserror::Error)]
    #[error("client error (Connect)")]
    struct Middle(#[source] std::io::Error);

    #[test]
    fn the_innermost_cause_is_named_in_plain_words() {
        let refused = Outer(Middle(std::io::Error::from_raw_os_error(111)));
        assert_eq!(root_cause(&refused), "connection refused");
        let other = Outer(Middle(std::io::Error::other(
            "Name or service not known (os error -2)",
        )));
        assert_eq!(root_cause(&other), "name or service not known");
        let unknown = std::io::Error::other("invalid peer certificate: UnknownIssuer");
        assert_eq!(
            root_cause(&unknown),
            "invalid peer certificate: UnknownIssuer"
        );
        // An acronym keeps its capitals.
        let tls = std::io::Error::other("TLS handshake eof");
        assert_eq!(root_cause(&tls), "TLS handshake eof");
    }

    #[test]
    fn only_the_newest_failure_is_kept() {
        let failures = ConnectFailures::default();
        assert_eq!(failures.last(), None);
        failures.record(&std::io::Error::from(std::io::ErrorKind::TimedOut));
        failures.record(&std::io::Error::from_raw_os_error(111));
        assert_eq!(failures.last().as_deref(), Some("connection refused"));
    }
}
