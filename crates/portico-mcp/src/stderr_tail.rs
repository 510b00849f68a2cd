//! The last lines a stdio child wrote to stderr, kept so that a child that fails at start can say
//! why in its connect error and in `portico servers`, not only in a log line nobody saw.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// At most this many lines are kept ...
pub const STDERR_TAIL_LINES: usize = 20;
/// ... and at most this many bytes of them: a child printing one huge line cannot make an error
/// message of megabytes.
pub const STDERR_TAIL_BYTES: usize = 4096;

/// Words in a child's stderr that point at a TLS certificate problem, lowercase.
const CERTIFICATE_WORDS: &[&str] = &[
    "certificate",
    "cert_",
    "self signed",
    "self-signed",
    "unable_to_get_issuer",
    "ssl",
    "tls",
];

/// The CA-bundle variables children get from Portico's environment (see `stdio::BASE_ENV`).
pub const CA_BUNDLE_VARS: &[&str] = &[
    "NODE_EXTRA_CA_CERTS",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE",
];

/// The bounded tail of one child's stderr, shared between the task reading it and the connect
/// that reports it.
#[derive(Clone, Default)]
pub(crate) struct StderrTail {
    lines: Arc<Mutex<Tail>>,
    ended: Arc<tokio::sync::Notify>,
    /// The server's log over its whole life, which every line also goes to.
    log: Option<crate::ServerLog>,
}

#[derive(Default)]
struct Tail {
    lines: VecDeque<String>,
    bytes: usize,
    ended: bool,
}

impl StderrTail {
    /// A tail whose lines also go to the server's log.
    pub(crate) fn logging_to(log: &crate::ServerLog) -> Self {
        StderrTail {
            log: Some(log.clone()),
            ..Default::default()
        }
    }

    /// Keeps `line` (cut to the byte bound on a character boundary), dropping the oldest lines past
    /// either bound.
    pub(crate) fn push(&self, line: &str) {
        if let Some(log) = &self.log {
            log.push(line);
        }
        let line = cut(line, STDERR_TAIL_BYTES);
        let Ok(mut tail) = self.lines.lock() else {
            return;
        };
        tail.bytes += line.len();
        tail.lines.push_back(line);
        while tail.lines.len() > STDERR_TAIL_LINES || tail.bytes > STDERR_TAIL_BYTES {
            match tail.lines.pop_front() {
                Some(old) => tail.bytes -= old.len(),
                None => break,
            }
        }
    }

    /// The child closed its stderr (it exited, usually).
    pub(crate) fn end(&self) {
        if let Ok(mut tail) = self.lines.lock() {
            tail.ended = true;
        }
        self.ended.notify_waiters();
    }

    pub(crate) fn lines(&self) -> Vec<String> {
        self.lines
            .lock()
            .map(|tail| tail.lines.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Waits, at most `limit`, for the child's stderr to end, so a child that is exiting has
    /// written its last words before they are read.
    pub(crate) async fn settle(&self, limit: Duration) -> Vec<String> {
        let ended = self.ended.notified();
        tokio::pin!(ended);
        ended.as_mut().enable();
        let done = self.lines.lock().map(|t| t.ended).unwrap_or(true);
        if !done {
            let _ = tokio::time::timeout(limit, ended).await;
        }
        self.lines()
    }
}

fn cut(line: &str, max: usize) -> String {
    if line.len() <= max {
        return line.to_string();
    }
    let mut end = max;
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    line[..end].to_string()
}

/// Whether the lines speak of a TLS certificate problem.
pub fn mentions_certificates(lines: &[String]) -> bool {
    lines.iter().any(|line| {
        let line = line.to_lowercase();
        CERTIFICATE_WORDS.iter().any(|word| line.contains(word))
    })
}

/// What to add to the error of a child whose stderr speaks of certificates: that the CA-bundle
/// variables are passed, and which of them are unset here.
pub fn certificate_hint(lookup: impl Fn(&str) -> Option<String>) -> String {
    let unset: Vec<&str> = CA_BUNDLE_VARS
        .iter()
        .copied()
        .filter(|name| lookup(name).is_none_or(|v| v.is_empty()))
        .collect();
    let unset = if unset.is_empty() {
        "all of them are set".to_string()
    } else {
        format!("unset here: {}", unset.join(", "))
    };
    format!(
        "a TLS certificate problem? Portico passes {} to children from its environment ({unset}); \
         export the one your server's runtime reads, pointing at your CA bundle",
        CA_BUNDLE_VARS.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tail_keeps_the_last_lines_within_both_bounds() {
        let tail = StderrTail::default();
        for n in 0..25 {
            tail.push(&format!("line {n}"));
        }
        let lines = tail.lines();
        assert_eq!(lines.len(), STDERR_TAIL_LINES);
        assert_eq!(lines.first().map(String::as_str), Some("line 5"));
        assert_eq!(lines.last().map(String::as_str), Some("line 24"));

        let tail = StderrTail::default();
        tail.push("first");
        tail.push(&"x".repeat(3000));
        tail.push(&"y".repeat(2000));
        let lines = tail.lines();
        // 3000 + 2000 is over 4096: only the newest line is left.
        assert_eq!(lines, vec!["y".repeat(2000)]);

        let tail = StderrTail::default();
        tail.push(&"é".repeat(5000));
        let lines = tail.lines();
        assert_eq!(lines.len(), 1);
        assert_eq!(lines[0].len(), 4096);
        assert_eq!(lines[0].chars().count(), 2048);
    }

    #[tokio::test]
    async fn settle_returns_once_stderr_ends_or_the_limit_passes() {
        let tail = StderrTail::default();
        tail.push("fatal");
        let started = std::time::Instant::now();
        assert_eq!(tail.settle(Duration::from_millis(50)).await, vec!["fatal"]);
        assert!(started.elapsed() >= Duration::from_millis(50));

        let ending = tail.clone();
        let ender = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            ending.end();
        });
        let started = std::time::Instant::now();
        tail.settle(Duration::from_secs(30)).await;
        assert!(started.elapsed() < Duration::from_secs(30));
        ender.await.unwrap();
        // Once ended, settling does not wait at all.
        let started = std::time::Instant::now();
        tail.settle(Duration::from_secs(30)).await;
        assert!(started.elapsed() < Duration::from_secs(1));
    }

    #[test]
    fn certificate_words_are_found_and_the_hint_names_the_unset_variables() {
        let lines = vec!["Error: self-signed certificate in certificate chain".to_string()];
        assert!(mentions_certificates(&lines));
        assert!(!mentions_certificates(&["fatal: cannot start".to_string()]));
        let hint = certificate_hint(|name| (name == "SSL_CERT_FILE").then(|| "/x.pem".to_string()));
        assert_eq!(
            hint,
            "a TLS certificate problem? Portico passes NODE_EXTRA_CA_CERTS, SSL_CERT_FILE, \
             SSL_CERT_DIR, REQUESTS_CA_BUNDLE to children from its environment (unset here: \
             NODE_EXTRA_CA_CERTS, SSL_CERT_DIR, REQUESTS_CA_BUNDLE); export the one your server's \
             runtime reads, pointing at your CA bundle"
        );
    }
}
