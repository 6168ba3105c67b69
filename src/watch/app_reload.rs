//! One reload attempt: signal the app or call its URL, then optionally verify.

use std::error::Error;
use std::time::{Duration, Instant};

use super::aftermath::{self, Exited};
use super::http::Endpoint;
use super::retry::Outcome;
use super::signal::{SignalError, Signaller};
use super::signal_targets::ProcessInfo;

/// How the app is told to reload.
#[derive(Debug, Clone)]
pub enum Action {
    /// Send a signal to processes in the shared process namespace.
    Signal(Signaller),
    /// Call an HTTP endpoint.
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

    /// Forgets remembered signal targets that have exited (HTTP mode has none).
    pub fn forget_exited_targets(&self) {
        if let Action::Signal(signaller) = self {
            signaller.forget_exited();
        }
    }
}

/// What one attempt did.
#[derive(Debug, Clone)]
pub struct Report {
    /// For the delivery state machine.
    pub outcome: Outcome,
    /// The `result` label of `reloads_total`.
    pub result: &'static str,
    /// Who was told (`nginx[7]`, `POST http://...`).
    pub target: String,
    /// Why it failed, as one line.
    pub error: Option<String>,
    /// How long the attempt took.
    pub duration: Duration,
    /// Signal mode, delivered: the processes told, to be watched for an exit before the reload
    /// counts as a success (see [`judge`]).
    pub told: Vec<ProcessInfo>,
}

/// Runs one attempt. Signal mode completes once the signal is sent (the processes told are in
/// the report, for [`judge`]); HTTP mode is bounded by the endpoint's timeout (and the verify
/// URL's).
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
/// config; another signal would kill it again). Runs beside the next attempts; the reload is
/// logged as a success only once this says so.
pub async fn judge(
    signaller: Signaller,
    told: Vec<ProcessInfo>,
    grace: Duration,
) -> Option<String> {
    let exited = aftermath::watch(&signaller.proc_root, &told, grace).await?;
    Some(died(&signaller, &exited, grace))
}

/// The error line of a target that exited right after the signal: the process, the signal, how
/// it ended and the fix.
fn died(signaller: &Signaller, exited: &Exited, grace: Duration) -> String {
    format!(
        "{} {} within {} after {}: it does not reload on {}; fix: annotate the pod template \
         reload-injector.io/on-change: restart, or set reload-injector.io/signal to the signal \
         it reloads on (or reload-url)",
        exited.target,
        aftermath::describe_status(exited.status),
        humantime::format_duration(grace),
        signaller.signal,
        signaller.signal,
    )
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
