//! What the soak reads of the server process from `/proc`: resident memory, open
//! descriptors and CPU time.

use std::time::Duration;

use nix::time::{ClockId, clock_gettime};
use nix::unistd::Pid;

/// One reading of the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reading {
    /// Resident set (`VmRSS`), KiB.
    pub rss_kib: u64,
    /// Its anonymous part (`RssAnon`: heap, stacks), KiB.
    pub anon_kib: u64,
    /// Its file-backed part (`RssFile`: the binary's pages), KiB.
    pub file_kib: u64,
    /// Open file descriptors.
    pub fds: usize,
}

impl Reading {
    /// Reads `pid`; panics when the process is gone (the soak must not judge zeros).
    pub fn of(pid: i32) -> Self {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
            .unwrap_or_else(|err| panic!("failed to read /proc/{pid}/status: {err}"));
        let field = |name: &str| {
            kib(&status, name).unwrap_or_else(|| panic!("no {name} in /proc/{pid}/status"))
        };
        let fds = std::fs::read_dir(format!("/proc/{pid}/fd"))
            .unwrap_or_else(|err| panic!("failed to list /proc/{pid}/fd: {err}"))
            .count();
        Self {
            rss_kib: field("VmRSS:"),
            anon_kib: field("RssAnon:"),
            file_kib: field("RssFile:"),
            fds,
        }
    }
}

/// The median reading by RSS (the lower one of the middle two), with the median descriptor
/// count: the middle of a window of quiet readings, which a leak would move with every reading.
/// `None` for no readings.
pub fn median(readings: &[Reading]) -> Option<Reading> {
    let mid = readings.len().checked_sub(1)? / 2;
    let mut by_rss = readings.to_vec();
    by_rss.sort_by_key(|r| r.rss_kib);
    let mut fds: Vec<usize> = readings.iter().map(|r| r.fds).collect();
    fds.sort_unstable();
    Some(Reading {
        fds: fds[mid],
        ..by_rss[mid]
    })
}

/// Resident set of `pid` (`VmRSS`) in KiB, 0 when it cannot be read: for the peak under load,
/// read often, where a missed reading does not matter.
pub fn rss_now(pid: i32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| kib(&status, "VmRSS:"))
        .unwrap_or(0)
}

/// The value of a `/proc/PID/status` line such as `VmRSS:  1234 kB`.
fn kib(status: &str, name: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix(name))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
}

/// CPU time (user + system) `pid` has used so far.
pub fn cpu_time(pid: i32) -> Duration {
    let clock = ClockId::pid_cpu_clock_id(Pid::from_raw(pid))
        .unwrap_or_else(|err| panic!("failed to get the CPU clock of {pid}: {err}"));
    let t = clock_gettime(clock).unwrap_or_else(|err| panic!("failed to read it: {err}"));
    Duration::new(t.tv_sec() as u64, t.tv_nsec() as u32)
}

/// KiB as MiB with one decimal.
pub fn mib(kib: u64) -> String {
    format!("{:.1}", kib as f64 / 1024.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reading(rss_kib: u64, fds: usize) -> Reading {
        Reading {
            rss_kib,
            anon_kib: rss_kib - 10_000,
            file_kib: 10_000,
            fds,
        }
    }

    #[test]
    fn median_takes_the_middle_rss_reading_and_the_middle_descriptor_count() {
        let window = [
            reading(19_000, 18),
            reading(17_500, 19),
            reading(30_000, 18),
            reading(18_200, 25),
            reading(16_000, 18),
        ];
        assert_eq!(
            median(&window),
            Some(Reading {
                rss_kib: 18_200,
                anon_kib: 8_200,
                file_kib: 10_000,
                fds: 18
            })
        );
    }

    #[test]
    fn median_of_an_even_window_is_a_reading_taken() {
        let window = [reading(19_000, 18), reading(17_500, 18)];
        assert_eq!(median(&window).map(|r| r.rss_kib), Some(17_500));
        assert_eq!(median(&[]), None);
    }
}
