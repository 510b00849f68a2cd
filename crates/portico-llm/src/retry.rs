//! When and how long to wait before trying a request again.

use std::time::{Duration, SystemTime};

use portico_core::backoff::Backoff;

/// Retries of one request: capped exponential backoff with jitter, or the server's `Retry-After`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retries after the first attempt; 0 disables retrying.
    pub max_retries: u32,
    /// The first backoff ceiling; each retry doubles it.
    pub base: Duration,
    /// The longest wait, for backoff and for a server's `Retry-After` alike, so a server cannot park
    /// an agent for an hour.
    pub cap: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_retries: 3,
            base: Duration::from_millis(500),
            cap: Duration::from_secs(30),
        }
    }
}

impl RetryPolicy {
    /// The wait before retry number `attempt` (0-based): the server's hint if it gave one, else
    /// jittered backoff; capped either way.
    pub(crate) fn delay(&self, attempt: u32, server_hint: Option<Duration>) -> Duration {
        match server_hint {
            Some(hint) => hint.min(self.cap),
            None => Backoff {
                base: self.base,
                cap: self.cap,
            }
            .delay(attempt),
        }
    }
}

/// Rate limits (429), server errors that mean "try again" (500, 502, 503, 504) and Anthropic's
/// "overloaded" (529). Other statuses will fail the same way next time.
pub(crate) fn is_retryable_status(status: u16) -> bool {
    matches!(status, 429 | 500 | 502 | 503 | 504 | 529)
}

/// The server's requested wait. `retry-after-ms` (sent by OpenAI and Azure) is more precise than
/// `Retry-After`, so it wins when both are present.
pub(crate) fn server_delay(headers: &http::HeaderMap, now: SystemTime) -> Option<Duration> {
    let text = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    if let Some(ms) = text("retry-after-ms").and_then(|v| v.parse::<f64>().ok())
        && ms.is_finite()
        && ms >= 0.0
    {
        return Some(Duration::from_secs_f64(ms / 1000.0));
    }
    parse_retry_after(text("retry-after")?, now)
}

/// `Retry-After` is either delay-seconds or an HTTP-date (RFC 9110 §10.2.3). A date in the past
/// means "now".
pub(crate) fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if let Ok(secs) = value.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    // Not in the RFC, but some gateways send fractional seconds.
    if let Ok(secs) = value.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_seconds_and_dates() {
        let now = httpdate::parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT").unwrap();
        assert_eq!(parse_retry_after("0", now), Some(Duration::ZERO));
        assert_eq!(
            parse_retry_after(" 12 ", now),
            Some(Duration::from_secs(12))
        );
        assert_eq!(
            parse_retry_after("1.5", now),
            Some(Duration::from_millis(1500))
        );
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:50:07 GMT", now),
            Some(Duration::from_secs(30))
        );
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:00:00 GMT", now),
            Some(Duration::ZERO)
        );
        assert_eq!(parse_retry_after("soon", now), None);
        assert_eq!(parse_retry_after("-1", now), None);
    }

    #[test]
    fn retry_after_ms_wins_and_hints_are_capped() {
        let mut headers = http::HeaderMap::new();
        headers.insert("retry-after", "10".parse().unwrap());
        headers.insert("retry-after-ms", "250".parse().unwrap());
        let now = SystemTime::now();
        assert_eq!(
            server_delay(&headers, now),
            Some(Duration::from_millis(250))
        );
        headers.remove("retry-after-ms");
        assert_eq!(server_delay(&headers, now), Some(Duration::from_secs(10)));

        let policy = RetryPolicy::default();
        assert_eq!(
            policy.delay(0, Some(Duration::from_secs(3600))),
            Duration::from_secs(30)
        );
        let d = policy.delay(2, None);
        assert!(
            d >= Duration::from_secs(1) && d <= Duration::from_secs(2),
            "{d:?}"
        );
    }

    #[test]
    fn retryable_statuses() {
        for s in [429, 500, 502, 503, 504, 529] {
            assert!(is_retryable_status(s), "{s}");
        }
        for s in [400, 401, 403, 404, 413, 422, 501] {
            assert!(!is_retryable_status(s), "{s}");
        }
    }
}
