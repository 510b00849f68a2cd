//! What one load run measured, printed as one JSON line for `scripts/bench` to read.

use std::time::Duration;

/// Latency percentiles of a sequential run and the rate of a concurrent one.
#[derive(Debug, Default)]
pub struct Measured {
    pub sequential_calls: usize,
    pub p50: Duration,
    pub p99: Duration,
    pub concurrent_calls: u64,
    pub rate: f64,
}

impl Measured {
    pub fn latencies(&mut self, mut samples: Vec<Duration>) {
        samples.sort();
        self.sequential_calls = samples.len();
        if samples.is_empty() {
            return;
        }
        let at = |q: f64| samples[((samples.len() as f64 - 1.0) * q).round() as usize];
        self.p50 = at(0.50);
        self.p99 = at(0.99);
    }

    pub fn json(&self) -> String {
        serde_json::json!({
            "sequential_calls": self.sequential_calls,
            "p50_ms": self.p50.as_secs_f64() * 1e3,
            "p99_ms": self.p99.as_secs_f64() * 1e3,
            "concurrent_calls": self.concurrent_calls,
            "rate": self.rate,
        })
        .to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_come_from_the_sorted_samples() {
        let mut measured = Measured::default();
        measured.latencies((1..=100).rev().map(Duration::from_millis).collect());
        assert_eq!(measured.p50, Duration::from_millis(51));
        assert_eq!(measured.p99, Duration::from_millis(99));
        assert_eq!(measured.sequential_calls, 100);
    }
}
