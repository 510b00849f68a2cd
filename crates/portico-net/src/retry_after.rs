//! How long a server asked us to wait before trying again (`Retry-After`, RFC 9110 §10.2.3).
//!
//! The wait itself, backoff and jitter, is `portico_core::retry::RetryPolicy`; this is only the
//! header's reading, kept beside the HTTP client every caller sends through.

use std::time::{Duration, SystemTime};

use http::HeaderMap;

/// The server's requested wait, if it gave one we can read. `retry-after-ms` (sent by OpenAI and
/// Azure) is more precise than `Retry-After`, so it wins when both are present.
pub fn retry_after(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
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

/// `Retry-After` is either delay-seconds or an HTTP-date. A date in the past means "now".
pub fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
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
        // The obsolete forms RFC 9110 still asks recipients to accept.
        assert_eq!(
            parse_retry_after("Sunday, 06-Nov-94 08:50:07 GMT", now),
            Some(Duration::from_secs(30))
        );
        assert_eq!(
            parse_retry_after("Sun Nov  6 08:50:07 1994", now),
            Some(Duration::from_secs(30))
        );
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:00:00 GMT", now),
            Some(Duration::ZERO)
        );
        assert_eq!(parse_retry_after("soon", now), None);
        assert_eq!(parse_retry_after("-1", now), None);
        assert_eq!(parse_retry_after("", now), None);
    }

    #[test]
    fn retry_after_ms_wins() {
        let mut headers = HeaderMap::new();
        let now = SystemTime::now();
        assert_eq!(retry_after(&headers, now), None);
        headers.insert("retry-after", "10".parse().unwrap());
        headers.insert("retry-after-ms", "250".parse().unwrap());
        assert_eq!(retry_after(&headers, now), Some(Duration::from_millis(250)));
        headers.insert("retry-after-ms", "later".parse().unwrap());
        assert_eq!(retry_after(&headers, now), Some(Duration::from_secs(10)));
        headers.remove("retry-after-ms");
        assert_eq!(retry_after(&headers, now), Some(Duration::from_secs(10)));
    }
}
