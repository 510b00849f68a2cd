//! Which model requests are worth trying again. How long to wait is the one retry policy,
//! [`RetryPolicy`] (`portico_core::retry`), with the server's `Retry-After` read by
//! `portico_net::retry_after`.

pub use portico_core::retry::RetryPolicy;

/// Rate limits (429), server errors that mean "try again" (500, 502, 503, 504) and Anthropic's
/// "overloaded" (529). Other statuses will fail the same way next time.
pub(crate) fn is_retryable_status(status: u16) -> bool {
    matches!(status, 429 | 500 | 502 | 503 | 504 | 529)
}

#[cfg(test)]
mod tests {
    use super::*;

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
