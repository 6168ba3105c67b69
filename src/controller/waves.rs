//! Refreshes in waves (pure): a mounted change reaches a workload's Pods at most its
//! `maxUnavailable` at a time; the next wave starts once the last one's Pods are still Ready
//! [`SETTLE`] after their refresh. A Pod gone unready stops the workload's refresh: the rest keep
//! their config until it changes again.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;
use tokio::time::Instant;

use super::write_target::{Target, TargetKind, Write};

/// What the Event on a workload says when its refresh stopped (`status` looks for it).
pub const REFRESH_STOPPED: &str = "refresh of mounted config stopped";

/// How long a wave's Pods must stay Ready after their refresh before the next wave starts.
pub const SETTLE: Duration = Duration::from_secs(2);

/// What bounds a workload's waves: its replicas and rolling-update `maxUnavailable`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Budget {
    /// `spec.replicas` (1 when unset; a DaemonSet's is unknown here: `None`).
    pub replicas: Option<u32>,
    pub max_unavailable: Option<MaxUnavailable>,
    /// Its kind's default when `maxUnavailable` is unset.
    pub default: MaxUnavailable,
    /// For the Event that says a run stopped.
    pub uid: String,
}

/// An `IntOrString` `maxUnavailable`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MaxUnavailable {
    Count(u32),
    /// Of the replicas, rounded down (as Kubernetes does for `maxUnavailable`).
    Percent(u32),
}

impl Budget {
    /// Reads a workload's budget from the whole object; `None` for CronJobs and Pods.
    pub fn of(kind: TargetKind, uid: &str, object: &Value) -> Option<Budget> {
        let (pointer, default) = match kind {
            TargetKind::Deployment => (
                "/spec/strategy/rollingUpdate/maxUnavailable",
                MaxUnavailable::Percent(25),
            ),
            // A canary Rollout's own bound (a blue-green one has none: Argo's 25% default).
            TargetKind::Rollout => (
                "/spec/strategy/canary/maxUnavailable",
                MaxUnavailable::Percent(25),
            ),
            TargetKind::StatefulSet | TargetKind::DaemonSet => (
                "/spec/updateStrategy/rollingUpdate/maxUnavailable",
                MaxUnavailable::Count(1),
            ),
            TargetKind::CronJob | TargetKind::Pod | TargetKind::PodEnv => return None,
        };
        let replicas = match kind {
            TargetKind::DaemonSet => None,
            _ => Some(
                object
                    .pointer("/spec/replicas")
                    .and_then(Value::as_u64)
                    .map_or(1, clamp),
            ),
        };
        let max_unavailable = object.pointer(pointer).and_then(|v| match v {
            Value::Number(n) => n.as_u64().map(|n| MaxUnavailable::Count(clamp(n))),
            Value::String(s) => s
                .trim()
                .strip_suffix('%')
                .and_then(|p| p.trim().parse::<u64>().ok())
                .map(|p| MaxUnavailable::Percent(clamp(p))),
            _ => None,
        });
        Some(Budget {
            replicas,
            max_unavailable,
            default,
            uid: uid.to_owned(),
        })
    }

    /// Pods per wave, for a workload with `pods` Pods to refresh: at least one.
    pub fn wave_size(&self, pods: usize) -> usize {
        let total = self
            .replicas
            .map_or(pods, |r| usize::try_from(r).unwrap_or(usize::MAX))
            .max(1);
        let size = match self.max_unavailable.unwrap_or(self.default) {
            MaxUnavailable::Count(n) => usize::try_from(n).unwrap_or(usize::MAX),
            MaxUnavailable::Percent(p) => total * usize::try_from(p.min(100)).unwrap_or(100) / 100,
        };
        size.max(1)
    }
}

fn clamp(n: u64) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// Pods per wave when the workload's budget is not known: a Deployment's default, 25%.
pub fn default_wave_size(pods: usize) -> usize {
    (pods / 4).max(1)
}

/// The workload that owns a Pod: its controller ownerReference, with a ReplicaSet read as the
/// Deployment or Argo Rollout that made it (the ReplicaSet's name is the workload's plus `-`
/// and the Pod's `pod-template-hash`, or for a Rollout `rollouts-pod-template-hash`, label).
pub fn owner_of(namespace: &Arc<str>, meta: &ObjectMeta) -> Option<Target> {
    let owner = meta
        .owner_references
        .as_ref()?
        .iter()
        .find(|r| r.controller == Some(true))?;
    let name = owner.name.as_str();
    let (kind, name) = match owner.kind.as_str() {
        "ReplicaSet" => {
            // Argo Rollouts labels its ReplicaSets' Pods `rollouts-pod-template-hash`.
            let labels = meta.labels.as_ref()?;
            let (kind, hash) = match labels.get("rollouts-pod-template-hash") {
                Some(hash) => (TargetKind::Rollout, hash),
                None => (TargetKind::Deployment, labels.get("pod-template-hash")?),
            };
            (kind, name.strip_suffix(hash.as_str())?.strip_suffix('-')?)
        }
        "StatefulSet" => (TargetKind::StatefulSet, name),
        "DaemonSet" => (TargetKind::DaemonSet, name),
        _ => return None,
    };
    Some(Target {
        kind,
        namespace: namespace.clone(),
        name: name.into(),
    })
}

/// A Pod's `Ready` condition: `Some(false)` only when it says `False` (a Pod without one, as
/// in a test's fake API, does not stop a refresh).
pub fn ready_of(object: &Value) -> Option<bool> {
    object
        .pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some("Ready"))
        .and_then(|c| c.get("status")?.as_str())
        .map(|s| s == "True")
}

/// A refresh stopped because a wave's Pod went unready.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stopped {
    pub workload: Target,
    pub unready: Target,
    /// The writes held back: the Pods left unrefreshed, and the value each was to get.
    pub left: Vec<Write>,
}

/// What a step of the waves says to do (`S`: how a stop is told, [`Stopped`] for refreshes).
#[derive(Debug)]
pub struct Step<S = Stopped> {
    pub submit: Vec<Write>,
    pub stopped: Vec<S>,
    /// When to step again if nothing else happens.
    pub wake: Option<Instant>,
}

impl<S> Default for Step<S> {
    fn default() -> Self {
        Step {
            submit: Vec::new(),
            stopped: Vec::new(),
            wake: None,
        }
    }
}

impl<S> Step<S> {
    pub fn wake_by(&mut self, at: Instant) {
        self.wake = Some(self.wake.map_or(at, |w| w.min(at)));
    }
}

/// One workload's writes waiting for their wave, and after a stop the values held back: the
/// queue both refreshes and restarts in place keep.
#[derive(Debug, Default)]
pub struct WaveQueue {
    queue: VecDeque<Write>,
    /// After a stop: the values not to write again until the config changes.
    held_back: BTreeSet<String>,
}

impl WaveQueue {
    /// Queues a write, in place of one queued for the same target. A value a stop held back is
    /// dropped (`false`); a new value ends the hold.
    pub fn enqueue(&mut self, write: Write) -> bool {
        if self.held_back.contains(&write.desired) {
            return false;
        }
        self.held_back.clear();
        match self.queue.iter_mut().find(|w| w.target == write.target) {
            Some(queued) => *queued = write,
            None => self.queue.push_back(write),
        }
        true
    }

    /// Stops the run: every queued write is held back (and returned).
    pub fn stop(&mut self) -> Vec<Write> {
        let left: Vec<Write> = self.queue.drain(..).collect();
        self.held_back = left.iter().map(|w| w.desired.clone()).collect();
        left
    }

    /// The next wave: the first `size` writes (at least one).
    pub fn next_wave(&mut self, size: usize) -> Vec<Write> {
        let size = size.max(1).min(self.queue.len());
        self.queue.drain(..size).collect()
    }

    pub fn targets(&self) -> Vec<Target> {
        self.queue.iter().map(|w| w.target.clone()).collect()
    }

    pub fn holds(&self, target: &Target) -> bool {
        self.queue.iter().any(|w| &w.target == target)
    }

    pub fn len(&self) -> usize {
        self.queue.len()
    }

    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Whether nothing waits and nothing is held back (the workload can be forgotten).
    pub fn is_idle(&self) -> bool {
        self.queue.is_empty() && self.held_back.is_empty()
    }
}

/// The refreshes under way, per workload.
#[derive(Debug, Default)]
pub struct Waves {
    groups: HashMap<Target, Group>,
}

#[derive(Debug, Default)]
struct Group {
    queue: WaveQueue,
    /// The Pods of the wave under way, and when it was submitted.
    wave: Vec<Target>,
    started: Option<Instant>,
}

impl Waves {
    /// Queues a Pod's refresh in its workload's waves (see [`WaveQueue::enqueue`]).
    pub fn enqueue(&mut self, workload: Target, write: Write) -> bool {
        let group = self.groups.entry(workload).or_default();
        group.queue.enqueue(write)
    }

    pub fn is_queued(&self, pod: &Target) -> bool {
        self.groups.values().any(|g| g.queue.holds(pod))
    }

    pub fn clear(&mut self) {
        self.groups.clear();
    }

    /// Moves every workload's refresh on (`wave_size(workload, pods left)`).
    pub fn step(
        &mut self,
        now: Instant,
        wave_size: impl Fn(&Target, usize) -> usize,
        ready: impl Fn(&Target) -> Option<bool>,
    ) -> Step {
        let mut step = Step::default();
        for (workload, group) in &mut self.groups {
            if let Some(unready) = group.wave.iter().find(|p| ready(p) == Some(false)) {
                step.stopped.push(Stopped {
                    workload: workload.clone(),
                    unready: unready.clone(),
                    left: group.queue.stop(),
                });
                group.wave.clear();
                group.started = None;
                continue;
            }
            if let Some(started) = group.started {
                let settled = started + SETTLE;
                if now < settled {
                    step.wake_by(settled);
                    continue;
                }
                group.wave.clear();
                group.started = None;
            }
            if group.queue.is_empty() {
                continue;
            }
            let wave = group
                .queue
                .next_wave(wave_size(workload, group.queue.len()));
            group.wave = wave.iter().map(|w| w.target.clone()).collect();
            group.started = Some(now);
            step.wake_by(now + SETTLE);
            step.submit.extend(wave);
        }
        self.groups
            .retain(|_, g| !g.queue.is_idle() || !g.wave.is_empty());
        step
    }
}

#[cfg(test)]
mod tests;
