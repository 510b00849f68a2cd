//! The standard `process_*` families every Prometheus user expects of a process (CPU time, memory,
//! open and allowed file descriptors, start time), read from `/proc/self` at scrape time.
//!
//! Read here by hand rather than through a collector crate: prometheus-client, the metrics stack
//! Portico uses, has no process collector, the `prometheus` crate's works only with its own
//! registry, and the few files and fields needed are stable kernel ABI (see proc(5)). The parsing
//! is pure, so it is unit tested on real file contents; on a system without `/proc` the families
//! are left out of the scrape.

use std::sync::atomic::AtomicU64;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// One reading of the process's own figures.
#[derive(Debug, Clone, PartialEq)]
pub struct ProcessSample {
    pub cpu_seconds: f64,
    pub resident_bytes: u64,
    pub virtual_bytes: u64,
    pub open_fds: u64,
    /// The soft limit on open files; `None` when it is unlimited.
    pub max_fds: Option<u64>,
    /// Seconds since the Unix epoch.
    pub start_time_seconds: f64,
}

impl ProcessSample {
    /// Reads `/proc/self`; `None` when any of it cannot be read (not Linux, `/proc` not mounted).
    pub fn read() -> Option<ProcessSample> {
        let read = |path: &str| std::fs::read_to_string(path).ok();
        let ticks = rustix::param::clock_ticks_per_second() as f64;
        let stat = parse_stat(&read("/proc/self/stat")?)?;
        let status = read("/proc/self/status")?;
        let boot_time = parse_boot_time(&read("/proc/stat")?)?;
        let open_fds = std::fs::read_dir("/proc/self/fd").ok()?.count() as u64;
        Some(ProcessSample {
            cpu_seconds: (stat.user_ticks + stat.system_ticks) as f64 / ticks,
            resident_bytes: status_kib(&status, "VmRSS")? * 1024,
            virtual_bytes: status_kib(&status, "VmSize")? * 1024,
            open_fds,
            max_fds: parse_max_open_files(&read("/proc/self/limits")?)?,
            start_time_seconds: boot_time as f64 + stat.start_ticks as f64 / ticks,
        })
    }

    /// Registers this reading's families in `registry`.
    pub(crate) fn register(&self, registry: &mut Registry) {
        let cpu = Counter::<f64, AtomicU64>::default();
        cpu.inc_by(self.cpu_seconds);
        // Counters are registered without `_total`: the encoder adds it.
        registry.register(
            "process_cpu_seconds",
            "Total user and system CPU time spent in seconds",
            cpu,
        );
        registry.register(
            "process_resident_memory_bytes",
            "Resident memory size in bytes",
            gauge(self.resident_bytes),
        );
        registry.register(
            "process_virtual_memory_bytes",
            "Virtual memory size in bytes",
            gauge(self.virtual_bytes),
        );
        registry.register(
            "process_open_fds",
            "Number of open file descriptors",
            gauge(self.open_fds),
        );
        if let Some(max) = self.max_fds {
            registry.register(
                "process_max_fds",
                "Maximum number of open file descriptors",
                gauge(max),
            );
        }
        let start = Gauge::<f64, AtomicU64>::default();
        start.set(self.start_time_seconds);
        registry.register(
            "process_start_time_seconds",
            "Start time of the process since unix epoch in seconds",
            start,
        );
    }
}

fn gauge(value: u64) -> Gauge {
    let gauge = Gauge::<i64>::default();
    gauge.set(i64::try_from(value).unwrap_or(i64::MAX));
    gauge
}

/// What is used of `/proc/self/stat`.
#[derive(Debug, PartialEq, Eq)]
struct Stat {
    user_ticks: u64,
    system_ticks: u64,
    /// Clock ticks after boot at which the process started.
    start_ticks: u64,
}

/// `/proc/self/stat`: fields 14 (utime), 15 (stime) and 22 (starttime) of proc(5). The command
/// name, field 2, is in parentheses and may itself hold spaces and parentheses, so the fields are
/// counted from the last `)`.
fn parse_stat(stat: &str) -> Option<Stat> {
    let (_, after_name) = stat.rsplit_once(')')?;
    // The first field after the name is field 3 (state).
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let field = |n: usize| fields.get(n - 3)?.parse().ok();
    Some(Stat {
        user_ticks: field(14)?,
        system_ticks: field(15)?,
        start_ticks: field(22)?,
    })
}

/// A `NAME:   1234 kB` line of `/proc/self/status`, in KiB.
fn status_kib(status: &str, name: &str) -> Option<u64> {
    status.lines().find_map(|line| {
        let value = line.strip_prefix(name)?.strip_prefix(':')?;
        value.trim().strip_suffix("kB")?.trim().parse().ok()
    })
}

/// `btime` of `/proc/stat`: the boot time, in seconds since the Unix epoch.
fn parse_boot_time(stat: &str) -> Option<u64> {
    stat.lines()
        .find_map(|line| line.strip_prefix("btime ")?.trim().parse().ok())
}

/// The soft limit of `Max open files` in `/proc/self/limits`: `Some(None)` when unlimited.
fn parse_max_open_files(limits: &str) -> Option<Option<u64>> {
    let line = limits
        .lines()
        .find_map(|line| line.strip_prefix("Max open files"))?;
    match line.split_whitespace().next()? {
        "unlimited" => Some(None),
        soft => soft.parse().ok().map(Some),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_counted_from_the_last_parenthesis() {
        let stat = "4242 (tokio (rt) x) S 1 4242 4242 0 -1 4194560 2048 0 0 0 731 95 0 0 20 0 9 0 \
                    123456 104857600 5000 18446744073709551615 1 1 0 0 0 0 0 4096 17922 0 0 0 17 \
                    1 0 0 0 0 0";
        assert_eq!(
            parse_stat(stat),
            Some(Stat {
                user_ticks: 731,
                system_ticks: 95,
                start_ticks: 123456,
            })
        );
        assert_eq!(parse_stat("4242 (cut) S 1 2"), None);
        assert_eq!(parse_stat("no name at all"), None);
    }

    #[test]
    fn status_sizes_are_read_in_kib() {
        let status =
            "Name:\tportico\nVmPeak:\t  300000 kB\nVmSize:\t  262144 kB\nVmRSS:\t   20480 kB\n";
        assert_eq!(status_kib(status, "VmRSS"), Some(20480));
        assert_eq!(status_kib(status, "VmSize"), Some(262144));
        assert_eq!(status_kib(status, "VmSwap"), None);
    }

    #[test]
    fn boot_time_and_the_open_files_limit() {
        assert_eq!(
            parse_boot_time("cpu  1 2 3\nintr 5\nbtime 1765000000\nprocesses 9\n"),
            Some(1_765_000_000)
        );
        let limits = "Limit                     Soft Limit           Hard Limit           Units     \n\
                      Max processes             63704                63704                processes \n\
                      Max open files            1024                 524288               files     \n";
        assert_eq!(parse_max_open_files(limits), Some(Some(1024)));
        let unlimited =
            "Max open files            unlimited            unlimited            files\n";
        assert_eq!(parse_max_open_files(unlimited), Some(None));
        assert_eq!(parse_max_open_files("Max processes 1 1 processes\n"), None);
    }

    #[test]
    fn this_process_reads_as_plausible() {
        let sample = ProcessSample::read().expect("/proc/self is readable on Linux");
        assert!(sample.resident_bytes > 0, "{sample:?}");
        assert!(sample.virtual_bytes >= sample.resident_bytes, "{sample:?}");
        assert!(sample.open_fds >= 3, "{sample:?}");
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        assert!(sample.start_time_seconds <= now + 1.0, "{sample:?}");
        assert!(sample.start_time_seconds > now - 3600.0, "{sample:?}");
    }
}
