//! The admission warning of each container's strategy: what it got and, where it got no hot
//! reload, how to choose one.

use std::collections::BTreeSet;

use super::super::catalogue::Takes;
use super::super::messages::{Warnings, quoted, quoted_list};
use super::super::object::Workload;
use super::super::pod::PodSpec;
use super::super::{ON_CHANGE, PROCESS, SIDECAR_NAME};
use super::{Choice, Strategy, Told, Why};

/// What a change of restart-only config does to the object under review.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Consequence {
    /// A workload's pods roll: the controller stamps the new hash into its template.
    Rolls,
    /// Nothing rolls the object (a Pod of its own): a change needs a new pod.
    NewPod,
    /// A Job or CronJob: nothing rolls a running Job; the next one starts with the new config.
    NextJob,
}

impl Consequence {
    /// What a change does to a `kind` object (`controlled`: a controller made it): a workload's
    /// pods roll, except a Job's (nothing rolls a running Job); nothing rolls a Pod of its own.
    pub fn of(kind: &str, workload: Workload, controlled: bool, spec: &PodSpec) -> Self {
        let runs_to_completion =
            matches!(spec.restart_policy.as_deref(), Some("Never" | "OnFailure"));
        match workload {
            Workload::Template(_) if matches!(kind, "Job" | "CronJob") => Consequence::NextJob,
            Workload::Template(_) | Workload::Rollout => Consequence::Rolls,
            Workload::Pod if controlled && runs_to_completion => Consequence::NextJob,
            Workload::Pod if controlled => Consequence::Rolls,
            Workload::Pod => Consequence::NewPod,
        }
    }

    /// Said of a container's strategy.
    pub fn on_change(self) -> &'static str {
        match self {
            Consequence::Rolls => "pods roll on change",
            Consequence::NewPod => "a change needs a new pod",
            Consequence::NextJob => {
                "a running Job keeps its config; the next Job reads the new one"
            }
        }
    }

    /// Said of one object a container reads.
    pub fn when_it_changes(self) -> &'static str {
        match self {
            Consequence::Rolls => "pods roll when it changes",
            other => other.on_change(),
        }
    }
}

/// One line per container and strategy: which strategy it got, and how to choose hot reload
/// where it got none.
pub fn warn(choice: &Choice, consequence: Consequence, warnings: &mut Warnings) {
    let restart = consequence.on_change();
    for (container_name, chosen, volumes) in &choice.containers {
        let container_name = container_name.as_str();
        let container = quoted(container_name);
        match chosen {
            Strategy::Reload(Told::Signal { signal, process }) => {
                let to = process.as_deref().unwrap_or("its main process");
                warnings.notice(format_args!(
                    "container {container}: hot reload, {signal} to {to} on change"
                ))
            }
            Strategy::Reload(Told::Http { url }) => warnings.notice(format_args!(
                "container {container}: hot reload, POST {} on change",
                quoted(url)
            )),
            Strategy::Nothing => warnings.notice(format_args!(
                "container {container}: {ON_CHANGE}: none; the app is not told of changes"
            )),
            Strategy::Itself(title) => warnings.notice(format_args!(
                "container {container} ({title}) reloads {} by itself; no restart on change",
                volume_list(volumes)
            )),
            Strategy::Reloaded(by) => warnings.notice(format_args!(
                "container {container}: {} already reloaded by container {}; no roll, no second sidecar",
                volume_list(volumes),
                quoted(by)
            )),
            Strategy::Restart(why) => restart_line(container_name, why, restart, volumes, warnings),
        }
    }
}

/// `volume "a"` or `volumes "a" and "b"`.
fn volume_list(volumes: &BTreeSet<String>) -> String {
    let noun = if volumes.len() == 1 {
        "volume"
    } else {
        "volumes"
    };
    format!("{noun} {}", quoted_list(volumes.iter().map(String::as_str)))
}

/// The line of a container whose config (in `volumes`) rolls the workload, and why.
fn restart_line(
    container_name: &str,
    why: &Why,
    restart: &str,
    volumes: &BTreeSet<String>,
    warnings: &mut Warnings,
) {
    let container = quoted(container_name);
    match why {
        // The error itself is the warning; an init container's reads are warned of one by one.
        Why::BadValue | Why::InitContainer => {}
        Why::Chosen => {
            warnings.notice(format_args!("container {container}: {restart} ({ON_CHANGE}: restart)"))
        }
        Why::Unknown(name) => {
            let name = name
                .as_deref()
                .filter(|n| *n != container_name)
                .map(|n| format!(" ({})", quoted(n)))
                .unwrap_or_default();
            warnings.push(format_args!(
                "container {container}{name}: {restart}; no known reload signal ({ON_CHANGE})"
            ))
        }
        Why::Unmet(program) => {
            let how = match program.takes {
                Takes::Itself => "reloading by itself",
                _ => "hot reload",
            };
            warnings.push(format_args!(
                "container {container} ({}): {restart}; {how} needs {} on its command line, see {ON_CHANGE}",
                program.process,
                program.needs.text()
            ))
        }
        Why::AtStart(program) => warnings.notice(format_args!(
            "container {container} ({}): {restart}; it reads {} at start",
            program.title,
            volume_list(volumes)
        )),
        Why::OtherTarget => warnings.push(format_args!(
            "container {container}: {restart}; the sidecar signals one process: see {PROCESS}"
        )),
        Why::NoSharedPid => warnings.push(format_args!(
            "container {container}: {restart}; hostPID or shareProcessNamespace: false rule out a signal"
        )),
        Why::NameTaken => warnings.push(format_args!(
            "container {container}: {restart}; the pod's own container {} has the sidecar's name, so no watcher is added",
            quoted(SIDECAR_NAME)
        )),
    }
}
