//! When to try again, and after how long: the one retry policy, for model requests, webhook
//! deliveries, A2A polling, remote agent cards and upstream restarts alike.
//!
//! Pure logic: it computes waits and never sleeps. Reading a server's `Retry-After` is HTTP, so it
//! lives with the HTTP client (`portico_net::retry_after`); its result comes in here as a hint.

use std::time::Duration;

/// Capped exponential backoff with jitter, a bounded number of retries, and a server's hint
/// honoured up to the cap.
///
/// The wait before retry `attempt` (0-based) is drawn from `[ceiling/2, ceiling]` where the ceiling
/// is `base * 2^attempt`, capped: half fixed, so a crash loop cannot spin, half random, so many
/// clients failing together (a network blip, a rate limit) do not all retry in lockstep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retries after the first attempt; 0 disables retrying, `u32::MAX` retries for ever.
    pub max_retries: u32,
    /// The first backoff ceiling; each retry doubles it.
    pub base: Duration,
    /// The longest wait, for backoff and for a server's hint alike, so a server cannot park a
    /// caller for an hour.
    pub cap: Duration,
}

impl Default for RetryPolicy {
    /// Retrying one request: 3 retries, from 0.5 s up to 30 s.
    fn default() -> Self {
        RetryPolicy {
            max_retries: 3,
            base: Duration::from_millis(500),
            cap: Duration::from_secs(30),
        }
    }
}

impl RetryPolicy {
    /// Retries for as long as the caller keeps going (restarts, polling, refreshes).
    pub const fn unlimited(base: Duration, cap: Duration) -> Self {
        RetryPolicy {
            max_retries: u32::MAX,
            base,
            cap,
        }
    }

    /// Whether another try may follow `retries_done` retries.
    pub fn allows_retry(&self, retries_done: u32) -> bool {
        retries_done < self.max_retries
    }

    /// The un-jittered ceiling for retry `attempt` (0-based).
    pub fn ceiling(&self, attempt: u32) -> Duration {
        let factor = 1u32.checked_shl(attempt.min(20)).unwrap_or(u32::MAX);
        self.base.saturating_mul(factor).min(self.cap)
    }

    /// The jittered backoff before retry `attempt`: uniform in `[ceiling/2, ceiling]`.
    pub fn backoff(&self, attempt: u32) -> Duration {
        let ceiling = self.ceiling(attempt);
        let half = ceiling / 2;
        let jitter = rand::random_range(0..=(ceiling - half).as_millis() as u64);
        (half + Duration::from_millis(jitter)).min(ceiling)
    }

    /// The wait before retry `attempt`: the server's hint (`Retry-After`) if it gave one, as it
    /// asked, else the jittered backoff; capped either way.
    pub fn delay(&self, attempt: u32, server_hint: Option<Duration>) -> Duration {
        match server_hint {
            Some(hint) => hint.min(self.cap),
            None => self.backoff(attempt),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schedule_grows_and_caps() {
        let policy = RetryPolicy::unlimited(Duration::from_millis(100), Duration::from_secs(2));
        assert_eq!(policy.ceiling(0), Duration::from_millis(100));
        assert_eq!(policy.ceiling(3), Duration::from_millis(800));
        assert_eq!(policy.ceiling(10), Duration::from_secs(2));
        assert_eq!(policy.ceiling(u32::MAX), Duration::from_secs(2));
        for attempt in 0..30 {
            let d = policy.backoff(attempt);
            assert!(
                d >= policy.ceiling(attempt) / 2 && d <= policy.ceiling(attempt),
                "{d:?}"
            );
        }
        let huge = RetryPolicy::unlimited(Duration::from_secs(u64::MAX / 4), Duration::MAX);
        assert!(huge.ceiling(40) >= huge.ceiling(1), "no overflow");
    }

    #[test]
    fn jitter_spreads_over_the_upper_half() {
        let policy = RetryPolicy {
            max_retries: 3,
            base: Duration::from_millis(1000),
            cap: Duration::from_secs(30),
        };
        let draws: Vec<Duration> = (0..2000).map(|_| policy.backoff(0)).collect();
        let (min, max) = (draws.iter().min().unwrap(), draws.iter().max().unwrap());
        assert!(*min >= Duration::from_millis(500), "{min:?}");
        assert!(*max <= Duration::from_millis(1000), "{max:?}");
        // 2000 uniform draws over 500 ms: both ends of the range are reached within 50 ms.
        assert!(*min < Duration::from_millis(550), "{min:?}");
        assert!(*max > Duration::from_millis(950), "{max:?}");
        let distinct: std::collections::HashSet<_> = draws.iter().collect();
        assert!(distinct.len() > 100, "jittered, not fixed");
    }

    #[test]
    fn a_server_hint_is_honoured_up_to_the_cap() {
        let policy = RetryPolicy::default();
        assert_eq!(
            policy.delay(0, Some(Duration::from_secs(7))),
            Duration::from_secs(7)
        );
        assert_eq!(policy.delay(2, Some(Duration::ZERO)), Duration::ZERO);
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
    fn retries_are_counted() {
        let policy = RetryPolicy::default();
        assert!(policy.allows_retry(0) && policy.allows_retry(2));
        assert!(!policy.allows_retry(3));
        let never = RetryPolicy {
            max_retries: 0,
            ..RetryPolicy::default()
        };
        assert!(!never.allows_retry(0));
        assert!(RetryPolicy::unlimited(Duration::ZERO, Duration::ZERO).allows_retry(1_000_000));
    }
}
