//! After a signal: did the target reload, or die of it (exit within the grace window)? The check
//! reads `/proc` (thin I/O); what an exit status means is pure.

use std::path::Path;
use std::time::Duration;

use super::procfs;
use super::signal_targets::ProcessInfo;

/// How often the targets are looked at during the grace window.
const POLL: Duration = Duration::from_millis(20);

/// A signalled process that exited within the grace window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exited {
    /// `comm[pid]`.
    pub target: String,
    /// Its wait status, when it was seen as a zombie before it was reaped.
    pub status: Option<i32>,
}

/// Words for a wait status (as `waitpid` reports it): `exited with status 129`, `was killed
/// by SIGHUP`, or `exited`.
pub fn describe_status(status: Option<i32>) -> String {
    match status {
        None => "exited".to_owned(),
        Some(status) if status & 0x7f == 0 => {
            format!("exited with status {}", (status >> 8) & 0xff)
        }
        Some(status) => {
            let signal = status & 0x7f;
            match nix::sys::signal::Signal::try_from(signal) {
                Ok(name) => format!("was killed by {name}"),
                Err(_) => format!("was killed by signal {signal}"),
            }
        }
    }
}

/// Whether `told` (read when it was signalled) is gone: no longer in `proc_root`, a zombie, or
/// its PID reused by another process. `Some(status)` when the zombie's exit code was readable.
fn gone(proc_root: &Path, told: &ProcessInfo) -> Option<Option<i32>> {
    let path = proc_root.join(told.pid.to_string()).join("stat");
    let text = std::fs::read_to_string(path).unwrap_or_default();
    match procfs::parse_stat(&text) {
        Some(stat) if stat.start_time == told.start_time => {
            (stat.state == 'Z').then(|| procfs::parse_exit_code(&text))
        }
        _ => Some(None),
    }
}

/// Watches `told` for `grace`; the first that exits, if any. Returns as soon as one does.
pub async fn watch(proc_root: &Path, told: &[ProcessInfo], grace: Duration) -> Option<Exited> {
    let deadline = tokio::time::Instant::now() + grace;
    loop {
        for process in told {
            if let Some(status) = gone(proc_root, process) {
                let target = process.label();
                return Some(Exited { target, status });
            }
        }
        let now = tokio::time::Instant::now();
        if now >= deadline {
            return None;
        }
        tokio::time::sleep(POLL.min(deadline - now)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wait_statuses_are_worded() {
        assert_eq!(describe_status(None), "exited");
        assert_eq!(describe_status(Some(129 << 8)), "exited with status 129");
        assert_eq!(describe_status(Some(1)), "was killed by SIGHUP");
        assert_eq!(describe_status(Some(0x7f & 9)), "was killed by SIGKILL");
    }
}
