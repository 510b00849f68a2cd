//! A server's stderr over its whole life, across restarts: what `portico logs NAME` shows, and the
//! line a slow start is showing (a package runner's download progress).
//!
//! The supervisor (the hub) owns one per server and hands it to every connection attempt; the stdio
//! child's stderr reader appends to it. It is bounded in lines and bytes, so a chatty child cannot
//! grow the daemon, and followers get each new line through a broadcast channel that drops what a
//! slow follower did not read in time rather than queueing it.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use tokio::sync::broadcast;

/// At most this many lines are kept ...
pub const SERVER_LOG_LINES: usize = 1000;
/// ... and at most this many bytes of them.
pub const SERVER_LOG_BYTES: usize = 256 * 1024;
/// The longest last line a status shows.
const LAST_LINE_CHARS: usize = 200;
/// New lines a follower may be behind before it misses some.
const FOLLOW_BACKLOG: usize = 256;

/// One stderr line, with when it was read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLine {
    /// Milliseconds since the Unix epoch.
    pub at_ms: i64,
    pub text: String,
}

/// The bounded stderr log of one server. Cloning shares it.
#[derive(Clone)]
pub struct ServerLog {
    lines: Arc<Mutex<Lines>>,
    follow: broadcast::Sender<LogLine>,
}

#[derive(Default)]
struct Lines {
    lines: VecDeque<LogLine>,
    bytes: usize,
}

impl Default for ServerLog {
    fn default() -> Self {
        ServerLog {
            lines: Arc::default(),
            follow: broadcast::channel(FOLLOW_BACKLOG).0,
        }
    }
}

impl ServerLog {
    /// Appends a line, dropping the oldest past either bound.
    pub fn push(&self, text: &str) {
        let line = LogLine {
            at_ms: portico_core::time::now_ms(),
            text: text.to_string(),
        };
        if let Ok(mut log) = self.lines.lock() {
            log.bytes += line.text.len();
            log.lines.push_back(line.clone());
            while log.lines.len() > SERVER_LOG_LINES || log.bytes > SERVER_LOG_BYTES {
                match log.lines.pop_front() {
                    Some(old) => log.bytes -= old.text.len(),
                    None => break,
                }
            }
        }
        // No follower is not an error.
        let _ = self.follow.send(line);
    }

    /// Every kept line, oldest first.
    pub fn lines(&self) -> Vec<LogLine> {
        self.lines
            .lock()
            .map(|log| log.lines.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// The newest non-blank line, cut to a status line's length.
    pub fn last_line(&self) -> Option<String> {
        let log = self.lines.lock().ok()?;
        let line = log.lines.iter().rev().find(|l| !l.text.trim().is_empty())?;
        let text = line.text.trim();
        Some(match text.char_indices().nth(LAST_LINE_CHARS) {
            Some((cut, _)) => format!("{}…", &text[..cut]),
            None => text.to_string(),
        })
    }

    /// The lines written from now on. A follower that falls more than a few hundred lines behind
    /// is told how many it missed (`RecvError::Lagged`).
    pub fn follow(&self) -> broadcast::Receiver<LogLine> {
        self.follow.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_is_bounded_in_lines_and_bytes_and_keeps_the_newest() {
        let log = ServerLog::default();
        for n in 0..SERVER_LOG_LINES + 5 {
            log.push(&format!("line {n}"));
        }
        let lines = log.lines();
        assert_eq!(lines.len(), SERVER_LOG_LINES);
        assert_eq!(lines[0].text, "line 5");
        assert_eq!(
            lines.last().unwrap().text,
            format!("line {}", SERVER_LOG_LINES + 4)
        );

        let log = ServerLog::default();
        let big = "x".repeat(100 * 1024);
        for _ in 0..4 {
            log.push(&big);
        }
        // Four 100 KiB lines are over 256 KiB: two are left.
        assert_eq!(log.lines().len(), 2);
    }

    #[test]
    fn the_last_line_skips_blank_lines_and_is_cut() {
        let log = ServerLog::default();
        assert_eq!(log.last_line(), None);
        log.push("npm warn exec The following package was not found and will be installed");
        log.push("   ");
        assert_eq!(
            log.last_line().as_deref(),
            Some("npm warn exec The following package was not found and will be installed")
        );
        log.push(&"é".repeat(300));
        let last = log.last_line().unwrap();
        assert_eq!(last.chars().count(), LAST_LINE_CHARS + 1);
        assert!(last.ends_with('…'));
    }

    #[tokio::test]
    async fn followers_get_the_lines_written_after_they_started() {
        let log = ServerLog::default();
        log.push("before");
        let mut follower = log.follow();
        log.push("after");
        assert_eq!(follower.recv().await.unwrap().text, "after");
    }
}
