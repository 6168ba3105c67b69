//! Runs in waves (pure; [`Runs`], shared with restarts in place): a mounted change reaches a
//! workload's Pods at most its `maxUnavailable` at a time; the next wave starts once the last
//! one's Pods are still Ready [`SETTLE`] after their refresh. A Pod gone unready stops the run:
//! the rest keep their config until it changes again.

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

/// A workload's run stopped at `pod` (a refresh's: it went unready; a restart's: `why`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stopped<W = ()> {
    pub workload: Target,
    pub pod: Target,
    pub why: W,
    /// The writes held back: the Pods left as they are, and the value each was to get.
    pub left: Vec<Write>,
}

/// What a step of the waves says to do.
#[derive(Debug)]
pub struct Step<S = Stopped> {
    pub submit: Vec<Write>,
    pub stopped: Vec<S>,
    /// When to step again if nothing else happens.
    pub wake: Option<Instant>,
}

impl<S> Step<S> {
    pub fn wake_by(&mut self, at: Instant) {
        self.wake = Some(self.wake.map_or(at, |w| w.min(at)));
    }
}

/// Where one Pod of the wave under way stands (`W`: why it stops a run).
pub enum Stand<W> {
    Done,
    Wait(Instant),
    Stop(W),
}

impl<W> Stand<W> {
    /// `then` from `at` on; until then, a wait for `at`.
    pub fn from(now: Instant, at: Instant, then: Self) -> Self {
        if now >= at { then } else { Stand::Wait(at) }
    }
}

/// Runs in waves under way, per workload: `M` is what is kept of each Pod of a wave.
#[derive(Debug, Default)]
pub struct Runs<M> {
    groups: HashMap<Target, Group<M>>,
}

/// The refreshes under way, per workload.
pub type Waves = Runs<()>;

/// One workload's run: the writes waiting for their wave, and the wave under way.
#[derive(Debug, Default)]
struct Group<M> {
    queue: VecDeque<Write>,
    /// After a stop: the values not to write again until the config changes.
    held_back: BTreeSet<String>,
    wave: Vec<(Target, M)>,
    /// When the wave under way was submitted.
    started: Option<Instant>,
    /// A wave waits for the other Pods to be Ready: not asked again before this.
    blocked_until: Option<Instant>,
}

/// How often a wave held back by an unready Pod looks again (each look goes over the view).
const BLOCKED_RECHECK: Duration = Duration::from_secs(1);

impl<M: Default> Runs<M> {
    /// Queues a Pod's write in its workload's waves, in place of one queued for the same Pod.
    /// A value a stop held back is dropped (`false`); a new value ends the hold.
    pub fn enqueue(&mut self, workload: Target, write: Write) -> bool {
        let group = self.groups.entry(workload).or_default();
        if group.held_back.contains(&write.desired) {
            return false;
        }
        group.held_back.clear();
        match group.queue.iter_mut().find(|w| w.target == write.target) {
            Some(queued) => *queued = write,
            None => group.queue.push_back(write),
        }
        true
    }

    pub fn is_queued(&self, pod: &Target) -> bool {
        let mut queued = self.groups.values().flat_map(|g| &g.queue);
        queued.any(|w| &w.target == pod)
    }

    /// Whether a Pod waits in a queue or is in a wave under way.
    pub fn holds(&self, pod: &Target) -> bool {
        self.is_queued(pod) || (self.groups.values()).any(|g| g.wave.iter().any(|(p, _)| p == pod))
    }

    pub fn clear(&mut self) {
        self.groups.clear();
    }

    /// Moves every workload's run on: `stand` says where a Pod of the wave under way (started
    /// at the given time) stands; the next wave (`wave_size(workload, pods left)` Pods, kept as
    /// `member` makes them) starts once every Pod is done, and only while `others_ready` says
    /// every Pod of the workload but those still to write is Ready.
    pub fn run<W>(
        &mut self,
        now: Instant,
        wave_size: impl Fn(&Target, usize) -> usize,
        stand: impl Fn(&Target, &mut M, Instant) -> Stand<W>,
        member: impl Fn(&Target) -> M,
        others_ready: impl Fn(&Target, &[Target]) -> bool,
    ) -> Step<Stopped<W>> {
        let mut step = Step {
            submit: Vec::new(),
            stopped: Vec::new(),
            wake: None,
        };
        for (workload, group) in &mut self.groups {
            if let Some(started) = group.started {
                match group.stand(started, &stand) {
                    Err((pod, why)) => {
                        // Every queued write is held back.
                        let left: Vec<Write> = group.queue.drain(..).collect();
                        group.held_back = left.iter().map(|w| w.desired.clone()).collect();
                        let workload = workload.clone();
                        step.stopped.push(Stopped {
                            workload,
                            pod,
                            why,
                            left,
                        });
                        group.wave.clear();
                        group.started = None;
                        continue;
                    }
                    Ok(Some(at)) => {
                        step.wake_by(at);
                        continue;
                    }
                    Ok(None) => {
                        group.wave.clear();
                        group.started = None;
                    }
                }
            }
            if group.queue.is_empty() {
                continue;
            }
            if let Some(until) = group.blocked_until.filter(|until| now < *until) {
                step.wake_by(until);
                continue;
            }
            let targets: Vec<Target> = group.queue.iter().map(|w| w.target.clone()).collect();
            if !others_ready(workload, &targets) {
                let until = now + BLOCKED_RECHECK;
                group.blocked_until = Some(until);
                step.wake_by(until);
                continue;
            }
            group.blocked_until = None;
            let size = wave_size(workload, group.queue.len());
            let wave: Vec<Write> = group
                .queue
                .drain(..size.clamp(1, group.queue.len()))
                .collect();
            let members = wave.iter().map(|w| (w.target.clone(), member(&w.target)));
            group.wave = members.collect();
            group.started = Some(now);
            step.wake_by(now + SETTLE);
            step.submit.extend(wave);
        }
        self.groups
            .retain(|_, g| !g.queue.is_empty() || !g.held_back.is_empty() || !g.wave.is_empty());
        step
    }
}

impl<M> Group<M> {
    /// Done (`Ok(None)`), to look at again by a time (`Ok(Some)`), or stopped at a Pod (`Err`).
    fn stand<W>(
        &mut self,
        started: Instant,
        stand: &impl Fn(&Target, &mut M, Instant) -> Stand<W>,
    ) -> Result<Option<Instant>, (Target, W)> {
        let mut wake: Option<Instant> = None;
        for (pod, member) in &mut self.wave {
            match stand(pod, member, started) {
                Stand::Done => {}
                Stand::Wait(at) => wake = Some(wake.map_or(at, |w| w.min(at))),
                Stand::Stop(why) => return Err((pod.clone(), why)),
            }
        }
        Ok(wake)
    }
}

impl Waves {
    /// Moves every workload's refresh on: a wave whose Pods stayed Ready for [`SETTLE`] ends;
    /// one with a Pod gone unready stops its workload's refresh.
    pub fn step(
        &mut self,
        now: Instant,
        wave_size: impl Fn(&Target, usize) -> usize,
        ready: impl Fn(&Target) -> Option<bool>,
    ) -> Step {
        let stand = |pod: &Target, _: &mut (), started: Instant| match ready(pod) {
            Some(false) => Stand::Stop(()),
            _ => Stand::from(now, started + SETTLE, Stand::Done),
        };
        self.run(now, wave_size, stand, |_| (), |_, _| true)
    }
}

#[cfg(test)]
mod tests;
