//! Restart in place for env consumers (Kubernetes >= 1.36, KEP-5532): when a ConfigMap read
//! through env changes, each Pod restarts every container where it is, wave by wave, instead of
//! the workload rolling. Pure: decides whether a pod (template) restarts in place, and plans what
//! a Pod's sidecar gets for it.
//!
//! The sidecar (native, with a `RestartAllContainers` rule for [`RESTART_CODE`]) reads the Pod's
//! desired [`ENV_HASH`] through the downward API beside its own copy of the ConfigMaps, and exits
//! with the code once they agree: the kubelet filled that copy from the cache it resolves env
//! from, so the restarted containers get the new values. Secrets keep rolling: the sidecar holds
//! no key, and the product never shows a bare hash of a Secret.

use std::collections::BTreeSet;

use super::analysis::{PodAnalysis, is_ours};
use super::messages::{Warnings, quoted};
use super::pod::PodSpec;
use super::rules::{How, Use, describe};
use super::strategy::Consequence;
use super::values::{self, EnvChange, ValueError};
use super::{ENV_CHANGE, ENV_RESTART};
use crate::hash::{ConfigId, ConfigKind, Consumed};

/// The sidecar's exit code that makes the kubelet restart every container of its Pod (the one
/// code of its restart rule).
pub const RESTART_CODE: u8 = 42;
/// Where the sidecar reads its Pod's desired env hash: [`ENV_HASH_FILE`] in a `downwardAPI`
/// volume of the [`ENV_HASH`] annotation (a file follows the annotation; env would not).
pub const POD_INFO_DIR: &str = "/etc/reload-injector/pod";
/// The file in [`POD_INFO_DIR`].
pub const ENV_HASH_FILE: &str = "env-hash";
/// Where the sidecar mounts each ConfigMap read through env, whole: `<ENV_ROOT>/<name>`.
pub const ENV_ROOT: &str = "/etc/reload-injector/env";
/// Where the sidecar keeps the env hash the containers last started with (a memory `emptyDir`
/// outlives their restarts): a sidecar that restarts alone must not take new data for it.
pub const STATE_DIR: &str = "/etc/reload-injector/state";
/// The value of [`ENV_RESTART`] on a template whose Pods restart in place.
pub const IN_PLACE: &str = "in-place";
/// The sidecar flag naming the desired-hash file; a sidecar without it cannot restart in place.
pub const HASH_FILE_FLAG: &str = "--env-hash-file";
/// What the Event on a workload says when its restarts in place stopped (`status` looks for it).
pub const RESTARTS_STOPPED: &str = "restart in place stopped";
/// The first Kubernetes minor version with `RestartAllContainers` on by default.
pub const FIRST_MINOR: u32 = 36;

/// Restart in place as the installation has it (by default: roll; the cluster can).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InPlaceSettings {
    /// For a pod (template) without [`ENV_CHANGE`] (`serve --env-change`).
    pub default: EnvChange,
    /// Whether the cluster can.
    pub support: Support,
}

/// Whether the cluster can restart Pods in place.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Support {
    /// It can (or, offline, is taken to).
    #[default]
    Yes,
    /// It cannot, and why (for the warning).
    No(String),
}

/// Whether an API server of `major.minor` (as its version endpoint spells them) restarts Pods
/// in place by default; an unreadable version counts as no.
pub fn support_of_version(major: &str, minor: &str) -> Support {
    let number = |s: &str| -> Option<u32> {
        let digits: String = s.chars().take_while(char::is_ascii_digit).collect();
        digits.parse().ok()
    };
    match (number(major), number(minor)) {
        (Some(major), _) if major > 1 => Support::Yes,
        (Some(1), Some(minor)) if minor >= FIRST_MINOR => Support::Yes,
        _ => Support::No(format!(
            "API server v{major}.{minor}, needs >= 1.{FIRST_MINOR}"
        )),
    }
}

/// The pod (template) under review, as the decision needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Subject {
    /// A workload's pod template (not a Pod).
    pub template: bool,
    /// A Pod made by a controller (it follows its template's [`ENV_RESTART`]).
    pub controlled: bool,
    /// A Job's or CronJob's template.
    pub job: bool,
}

/// What a change of a ConfigMap read through env does to a pod (template).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Not asked for, or nothing to restart for: as before (the workload rolls), nothing said.
    Off,
    /// Its Pods restart in place: these env reads are left out of the `config-hash`.
    InPlace(Vec<Use>),
    /// Asked for, but it rolls as before.
    Rolls(Blocked),
}

/// Why a pod (template) that asked to restart in place rolls instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Blocked {
    /// The cluster cannot (its API server is too old, ...).
    Cluster(String),
    /// The sidecar cannot be a native sidecar here (`--native-sidecars never`, or Kubernetes < 1.29).
    NoNativeSidecar,
    /// A Job's Pods run to completion: restarting them would run the work again.
    Job,
    /// `restartPolicy` is not `Always`.
    RunsToCompletion(String),
    /// A container has restart rules of its own.
    OwnRules(String),
    /// The pod carries a `config-reloader` from a version without restart in place.
    OldSidecar,
}

impl Decision {
    /// Whether `used` is one of the env reads restarted in place (so not in the `config-hash`).
    pub fn covers(&self, used: &Use) -> bool {
        match self {
            Decision::InPlace(reads) => reads.contains(used),
            _ => false,
        }
    }

    /// What the Pods' env hash is over: the ConfigMap keys and objects restarted in place.
    pub fn consumed(&self) -> BTreeSet<Consumed> {
        match self {
            Decision::InPlace(reads) => reads.iter().map(|u| u.consumed.clone()).collect(),
            _ => BTreeSet::new(),
        }
    }

    /// Whether the Pods restart in place.
    pub fn applies(&self) -> bool {
        matches!(self, Decision::InPlace(_))
    }
}

/// Decides for one pod (template): `uses` is its restart-only config as the rules and the
/// reload strategy found it. A bad [`ENV_CHANGE`] value is returned beside a decision to roll.
pub fn choose_env_restart(
    annotations: &std::collections::BTreeMap<String, String>,
    spec: &PodSpec,
    analysis: &PodAnalysis<'_>,
    subject: Subject,
    uses: &[Use],
    settings: &super::Settings,
) -> (Decision, Option<ValueError>) {
    let (asked, bad) = asked(annotations, subject, settings.in_place.default);
    let reads = env_reads(uses);
    if !asked || reads.is_empty() {
        return (Decision::Off, bad);
    }
    match blocked(spec, analysis, subject, settings) {
        Some(why) => (Decision::Rolls(why), bad),
        None => (Decision::InPlace(reads), bad),
    }
}

/// Whether restart in place is asked for: a Pod made from a template follows the template's
/// [`ENV_RESTART`] (so that its `config-hash` and its Pods agree); anything else asks with
/// [`ENV_CHANGE`], or takes the installation's default.
fn asked(
    annotations: &std::collections::BTreeMap<String, String>,
    subject: Subject,
    default: EnvChange,
) -> (bool, Option<ValueError>) {
    if !subject.template && subject.controlled {
        let recorded = annotations.get(ENV_RESTART).map(|v| v.trim());
        return (recorded == Some(IN_PLACE), None);
    }
    let chosen = annotations
        .get(ENV_CHANGE)
        .map(|v| values::parse_env_change(v));
    match chosen.unwrap_or(Ok(default)) {
        Ok(choice) => (choice == EnvChange::RestartInPlace, None),
        Err(err) => (false, Some(err)),
    }
}

/// `uses` without the env reads that restart in place when `annotations` record it
/// ([`ENV_RESTART`]): what a stamped template's (or its Pod's) `config-hash` is over.
pub fn without_recorded(
    annotations: &std::collections::BTreeMap<String, String>,
    mut uses: Vec<Use>,
) -> Vec<Use> {
    if annotations.get(ENV_RESTART).map(|v| v.trim()) == Some(IN_PLACE) {
        let reads = env_reads(&uses);
        uses.retain(|u| !reads.contains(u));
    }
    uses
}

/// The env reads of ConfigMaps that nothing else of the pod reads restart-only (a ConfigMap a
/// subPath mount also reads rolls the workload anyway: restarting in place too would restart
/// twice).
fn env_reads(uses: &[Use]) -> Vec<Use> {
    let env = |u: &Use| matches!(u.how, How::Env | How::EnvFrom);
    let rolled: BTreeSet<&ConfigId> = uses
        .iter()
        .filter(|u| !env(u))
        .map(|u| u.consumed.id())
        .collect();
    uses.iter()
        .filter(|u| env(u) && u.consumed.id().kind == ConfigKind::ConfigMap)
        .filter(|u| !rolled.contains(u.consumed.id()))
        .cloned()
        .collect()
}

fn blocked(
    spec: &PodSpec,
    analysis: &PodAnalysis<'_>,
    subject: Subject,
    settings: &super::Settings,
) -> Option<Blocked> {
    if let Support::No(why) = &settings.in_place.support {
        return Some(Blocked::Cluster(why.clone()));
    }
    if !settings.native_sidecars {
        return Some(Blocked::NoNativeSidecar);
    }
    if subject.job {
        return Some(Blocked::Job);
    }
    if let Some(policy) = spec.restart_policy.as_deref().filter(|p| *p != "Always") {
        return Some(Blocked::RunsToCompletion(policy.to_owned()));
    }
    let mut others = spec.all_containers().filter(|c| !is_ours(c));
    if let Some(own) = others.find(|c| {
        c.restart_policy_rules
            .as_ref()
            .is_some_and(|r| !r.is_empty())
    }) {
        return Some(Blocked::OwnRules(own.name.clone()));
    }
    if analysis.has_sidecar && !existing_sidecar(spec).is_some_and(restarts_in_place) {
        return Some(Blocked::OldSidecar);
    }
    None
}

/// What the decision means at admission, one line each, the Secrets still rolled included.
/// `consequence` is what a change of restart-only config does to the object under review.
pub fn warn(decision: &Decision, uses: &[Use], consequence: Consequence, warnings: &mut Warnings) {
    match decision {
        Decision::Off => {}
        Decision::InPlace(reads) => {
            let what = match consequence {
                Consequence::Rolls => "its pods restart",
                _ => "restarts",
            };
            for u in reads {
                let via = if u.how == How::Env { "env" } else { "envFrom" };
                warnings.notice(format_args!(
                    "container {} reads {} via {via}; {what} in place on change",
                    quoted(&u.container),
                    describe(u.consumed.id())
                ));
            }
            let secret = uses.iter().find(|u| {
                matches!(u.how, How::Env | How::EnvFrom)
                    && u.consumed.id().kind == ConfigKind::Secret
            });
            if let Some(u) = secret {
                warnings.push(format_args!(
                    "restart in place covers ConfigMaps; for {}: {}",
                    describe(u.consumed.id()),
                    consequence.when_it_changes()
                ));
            }
        }
        Decision::Rolls(why) => {
            let why = match why {
                Blocked::Cluster(why) => why.clone(),
                Blocked::NoNativeSidecar => "no native sidecar".to_owned(),
                Blocked::Job => "a Job's pods are never restarted".to_owned(),
                Blocked::RunsToCompletion(p) => format!("restartPolicy {}", quoted(p)),
                Blocked::OwnRules(c) => format!("container {} has restart rules", quoted(c)),
                Blocked::OldSidecar => "its config-reloader predates it".to_owned(),
            };
            let then = match consequence {
                Consequence::Rolls => "pods roll when config read via env changes",
                other => other.on_change(),
            };
            warnings.push(format_args!("no restart in place ({why}): {then}"));
        }
    }
}

mod pod_plan;

pub use pod_plan::{
    BadEnvKey, EnvPlan, existing_sidecar, parse_reads, recorded_reads, restarts_in_place,
    sidecar_reads, stamp,
};

#[cfg(test)]
mod tests;
