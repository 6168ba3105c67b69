//! One reload attempt: signal the app or call its URL, then optionally verify; after a signal,
//! whether a target died of it (exited within the grace window).

use std::error::Error;
use std::path::Path;
use std::time::{Duration, Instant};

use super::http::Endpoint;
use super::procfs::{self, ProcessInfo};
use super::retry::Outcome;
use super::signal::{SignalError, Signaller};

/// How the app is told to reload.
#[derive(Debug, Clone)]
pub enum Action {
    Signal(Signaller),
    Http(Endpoint),
}

impl Action {
    /// Short description for the start-up log line.
    pub fn describe(&self) -> String {
        match self {
            Action::Signal(signaller) => {
                format!("{} to {}", signaller.signal, signaller.describe_wanted())
            }
            Action::Http(endpoint) => endpoint.describe(),
        }
    }
}

/// What one attempt did.
#[derive(Debug, Clone)]
pub struct Report {
    pub outcome: Outcome,
    /// The `result` label of `reloads_total`.
    pub result: &'static str,
    /// Who was told (`nginx[7]`, `POST http://...`).
    pub target: String,
    pub error: Option<String>,
    pub duration: Duration,
    /// Signal mode, delivered: the processes told, for [`judge`].
    pub told: Vec<ProcessInfo>,
}

/// Runs one attempt. Signal mode completes once the signal is sent; HTTP mode is bounded by the
/// endpoint's timeout (and the verify URL's).
pub async fn attempt(action: Action, verify: Option<Endpoint>) -> Report {
    let started = Instant::now();
    let mut report = match &action {
        Action::Signal(signaller) => match signaller.send() {
            Ok(told) => {
                let labels: Vec<String> = told.iter().map(ProcessInfo::label).collect();
                Report {
                    told,
                    ..success(labels.join(","))
                }
            }
            Err(err) => {
                let (outcome, result) = match &err {
                    SignalError::NoTarget(_) => (Outcome::Retry, "no_target"),
                    SignalError::PermissionDenied { .. } => (Outcome::GiveUp, "permission_denied"),
                    _ => (Outcome::Retry, "failure"),
                };
                failure(outcome, result, signaller.describe_wanted(), &err)
            }
        },
        Action::Http(endpoint) => match endpoint.call().await {
            Ok(_) => success(endpoint.describe()),
            Err(err) => failure(Outcome::Retry, "failure", endpoint.describe(), &err),
        },
    };
    if let (Outcome::Delivered, Some(verify)) = (report.outcome, verify)
        && let Err(err) = verify.call().await
    {
        report = failure(Outcome::Retry, "failure", report.target, &err);
    }
    report.duration = started.elapsed();
    report
}

/// After a delivered signal: watches the processes told for `grace`. One that exits died of
/// the signal: the reload failed, and is never retried (the restarted process reads the new
/// config; another signal would kill it again).
pub async fn judge(
    signaller: Signaller,
    told: Vec<ProcessInfo>,
    grace: Duration,
) -> Option<String> {
    let (exited, status) = watch_told(&signaller.proc_root, &told, grace).await?;
    Some(format!(
        "{} {} within {} after {}: it does not reload on {}; fix: annotate the pod template \
         reload-injector.io/on-change: restart, or set reload-injector.io/signal to the signal \
         it reloads on (or reload-url)",
        exited.label(),
        describe_status(status),
        humantime::format_duration(grace),
        signaller.signal,
        signaller.signal,
    ))
}

/// The `result` label of a reload whose target exited right after the signal.
pub const TARGET_EXITED: &str = "target_exited";

fn success(target: String) -> Report {
    Report {
        outcome: Outcome::Delivered,
        result: "success",
        target,
        error: None,
        duration: Duration::ZERO,
        told: Vec::new(),
    }
}

fn failure(
    outcome: Outcome,
    result: &'static str,
    target: String,
    err: &(dyn Error + 'static),
) -> Report {
    Report {
        outcome,
        result,
        error: Some(crate::report::one_line(err)),
        ..success(target)
    }
}

/// How often the targets are looked at during the grace window.
const POLL: Duration = Duration::from_millis(20);

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

/// Whether `told` is gone (exited, a zombie, or its PID reused); `Some(status)` when a zombie's
/// exit code was readable.
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

/// Watches `told` for `grace`; the first that exits (and its wait status, when seen as a
/// zombie), as soon as one does.
async fn watch_told<'t>(
    proc_root: &Path,
    told: &'t [ProcessInfo],
    grace: Duration,
) -> Option<(&'t ProcessInfo, Option<i32>)> {
    let deadline = tokio::time::Instant::now() + grace;
    loop {
        for process in told {
            if let Some(status) = gone(proc_root, process) {
                return Some((process, status));
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
    #[derive(Debug, thiserror::Error)]
    #[error("failed to do the outer thing")]
    struct Outer(#[source] std::io::Error);

    #[test]
    fn errors_become_one_line_with_causes() {
        let err = Outer(std::io::Error::other("disk on fire"));
        assert_eq!(
            crate::report::one_line(&err),
            "failed to do the outer thing: disk on fire"
        );
    }
}

#[cfg(test)]
mod status_tests {
    use super::*;

    #[test]
    fn wait_statuses_are_worded() {
        assert_eq!(describe_status(None), "exited");
        assert_eq!(describe_status(Some(129 << 8)), "exited with status 129");
        assert_eq!(describe_status(Some(1)), "was killed by SIGHUP");
        assert_eq!(describe_status(Some(0x7f & 9)), "was killed by SIGKILL");
    }
}
