//! Capped, jittered exponential backoff for restarting upstreams.

use std::time::Duration;

/// Restart delays: `base * 2^attempt`, capped, with "full jitter" so that many servers failing together
/// (a network blip) do not all retry in lockstep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    pub base: Duration,
    pub cap: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            base: Duration::from_millis(500),
            cap: Duration::from_secs(60),
        }
    }
}

impl Backoff {
    /// The un-jittered ceiling for the given attempt (0-based).
    pub fn ceiling(&self, attempt: u32) -> Duration {
        let factor = 1u32.checked_shl(attempt.min(20)).unwrap_or(u32::MAX);
        self.base.saturating_mul(factor).min(self.cap)
    }

    /// A delay drawn uniformly from `[ceiling/2, ceiling]`: half fixed so a crash loop cannot spin, half
    /// random to spread retries.
    pub fn delay(&self, attempt: u32) -> Duration {
        let ceiling = self.ceiling(attempt);
        let half = ceiling / 2;
        let jitter = rand::random_range(0..=half.as_millis() as u64);
        half + Duration::from_millis(jitter)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_and_caps() {
        let b = Backoff {
            base: Duration::from_millis(100),
            cap: Duration::from_secs(2),
        };
        assert_eq!(b.ceiling(0), Duration::from_millis(100));
        assert_eq!(b.ceiling(3), Duration::from_millis(800));
        assert_eq!(b.ceiling(10), Duration::from_secs(2));
        assert_eq!(b.ceiling(u32::MAX), Duration::from_secs(2));
        for attempt in 0..30 {
            let d = b.delay(attempt);
            assert!(
                d >= b.ceiling(attempt) / 2 && d <= b.ceiling(attempt),
                "{d:?}"
            );
        }
    }
}
