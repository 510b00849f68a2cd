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
    /// CPU time the measured server process spent per call during the concurrent run, when known.
    pub server_cpu_us: Option<f64>,
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
            "cpu_us": self.server_cpu_us,
        })
        .to_string()
    }
}

/// CPU time (user + system) process `pid` has used so far, from /proc; `None` off Linux or when the
/// process is gone.
pub fn cpu_time(pid: u32) -> Option<std::time::Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may hold spaces; the fields after it are plain.
    let after_name = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = after_name.split(' ').collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    let per_second = rustix::param::clock_ticks_per_second();
    (per_second > 0).then(|| std::time::Duration::from_secs_f64(ticks as f64 / per_second as f64))
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

    #[test]
    fn cpu_time_of_this_process_grows_with_work() {
        let before = cpu_time(std::process::id()).unwrap();
        let mut x = 0u64;
        let started = std::time::Instant::now();
        while started.elapsed() < Duration::from_millis(100) {
            x = x.wrapping_add(std::hint::black_box(1));
        }
        std::hint::black_box(x);
        assert!(cpu_time(std::process::id()).unwrap() > before);
    }
}
