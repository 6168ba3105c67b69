//! Restarts in place in waves (pure): a ConfigMap change read through env reaches a workload's
//! Pods a few at a time, each Pod restarting every container where it is. A wave holds at most the
//! workload's `maxUnavailable` Pods (as [`super::waves::Budget`] says) and starts only while every
//! other Pod of the workload is Ready. A wave's Pod is done once it restarted (its containers' restart
//! counts rose) and has been Ready again for [`waves::SETTLE`]; the next wave starts when all of
//! the wave's Pods are. A Pod whose app crashes after its restart (a container restarted again
//! and the Pod not Ready; one Ready again, as after a kubelet restart mid-restart, must stay
//! Ready for [`SETTLE_AFTER_AGAIN`]), that does not restart within [`RESTART_WITHIN`], or that is not Ready again within
//! [`READY_WITHIN`] stops the workload's waves: the rest keep the env they run with.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::time::Duration;

use tokio::time::Instant;

use super::waves::SETTLE;
use super::write_target::{Target, Write};

pub use crate::inject::in_place::RESTARTS_STOPPED;
/// Longest a Pod may take to restart once its env hash was written: the kubelet syncs it within
/// a second or two, or a few more when its own ConfigMap watch lags (the second nudge).
pub const RESTART_WITHIN: Duration = Duration::from_secs(120);
/// Longest a restarted Pod may take to be Ready again.
pub const READY_WITHIN: Duration = Duration::from_secs(120);
/// How long a Pod whose containers restarted more than once, and that is Ready, must stay Ready
/// before its wave is done: an app that fails with the new env does not last that long.
pub const SETTLE_AFTER_AGAIN: Duration = Duration::from_secs(10);

/// A Pod's containers' restart counts, from its status.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Restarts {
    /// The `config-reloader`'s.
    pub sidecar: u32,
    /// The highest of the other containers'.
    pub others: u32,
}

/// How a Pod stands now, as the view has it (`None`: the Pod is gone).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PodNow {
    /// Its `Ready` condition, when it has one.
    pub ready: Option<bool>,
    pub restarts: Restarts,
}

/// Why a workload's restarts in place stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Why {
    /// A container restarted again after the restart in place: the app fails with the new env.
    Crashed,
    /// The Pod did not restart within [`RESTART_WITHIN`].
    NotRestarted,
    /// The Pod restarted but was not Ready again within [`READY_WITHIN`].
    NotReady,
}

impl Why {
    /// In the Event.
    pub fn words(self) -> &'static str {
        match self {
            Why::Crashed => "crashed after restarting in place",
            Why::NotRestarted => "did not restart in place in time",
            Why::NotReady => "was not Ready again in time after restarting in place",
        }
    }
}

/// A workload's restarts in place stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stopped {
    pub workload: Target,
    /// The Pod that stopped them, and why.
    pub pod: Target,
    pub why: Why,
    /// The Pods left with the env they run with.
    pub left: Vec<Target>,
}

/// What [`RestartWaves::step`] says to do.
#[derive(Debug, Default)]
pub struct Step {
    pub submit: Vec<Write>,
    pub stopped: Vec<Stopped>,
    /// When to step again if nothing else happens.
    pub wake: Option<Instant>,
}

/// The restarts in place under way, per workload.
#[derive(Debug, Default)]
pub struct RestartWaves {
    groups: HashMap<Target, Group>,
}

#[derive(Debug, Default)]
struct Group {
    queue: VecDeque<Write>,
    wave: Vec<InWave>,
    /// When the wave under way was submitted.
    started: Option<Instant>,
    /// After a stop: the values not to write again until the config changes.
    stopped: BTreeSet<String>,
    /// A wave waits for the other Pods to be Ready: not asked again before this.
    blocked_until: Option<Instant>,
}

/// How often a wave held back by an unready Pod looks again (each look goes over the view).
const BLOCKED_RECHECK: Duration = Duration::from_secs(1);

/// A Pod of the wave under way.
#[derive(Debug, Clone)]
struct InWave {
    pod: Target,
    /// Its restart counts when its write was submitted.
    before: Restarts,
    /// Since when it is restarted and Ready.
    settled_since: Option<Instant>,
}

/// Where one Pod of a wave is.
enum Stand {
    Done,
    Wait(Instant),
    Stop(Why),
}

impl RestartWaves {
    /// Queues a Pod's new env hash in its workload's waves. A value a stopped run held back is
    /// dropped (`false`); a new value starts a new run.
    pub fn enqueue(&mut self, workload: Target, write: Write) -> bool {
        let group = self.groups.entry(workload).or_default();
        if group.stopped.contains(&write.desired) {
            return false;
        }
        group.stopped.clear();
        match group.queue.iter_mut().find(|w| w.target == write.target) {
            Some(queued) => *queued = write,
            None => group.queue.push_back(write),
        }
        true
    }

    /// Forgets everything (leadership lost).
    pub fn clear(&mut self) {
        self.groups.clear();
    }

    /// Whether a Pod waits in a queue or is in a wave under way.
    pub fn holds(&self, pod: &Target) -> bool {
        self.groups.values().any(|g| {
            g.queue.iter().any(|w| &w.target == pod) || g.wave.iter().any(|m| &m.pod == pod)
        })
    }

    /// Moves every workload's run on: `pod` says how a Pod stands (`None`: gone), `others_ready`
    /// whether every Pod of a workload but the given ones (those still to write) is Ready: a wave
    /// starts only then, so a run taken over by a new leader, or a Pod unready for another
    /// reason, never makes more Pods unavailable than the budget.
    pub fn step(
        &mut self,
        now: Instant,
        wave_size: impl Fn(&Target, usize) -> usize,
        pod: impl Fn(&Target) -> Option<PodNow>,
        others_ready: impl Fn(&Target, &[Target]) -> bool,
    ) -> Step {
        let mut step = Step::default();
        let mut wake = |at: Instant| step.wake = Some(step.wake.map_or(at, |w| w.min(at)));
        let mut stopped = Vec::new();
        let mut submit = Vec::new();
        for (workload, group) in &mut self.groups {
            if let Some(started) = group.started {
                match group.stand(now, started, &pod) {
                    Err((at, why)) => {
                        stopped.push(Stopped {
                            workload: workload.clone(),
                            pod: at,
                            why,
                            left: group.queue.iter().map(|w| w.target.clone()).collect(),
                        });
                        group.stopped = group.queue.drain(..).map(|w| w.desired).collect();
                        group.wave.clear();
                        group.started = None;
                        continue;
                    }
                    Ok(Some(at)) => {
                        wake(at);
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
                wake(until);
                continue;
            }
            let queued: Vec<Target> = group.queue.iter().map(|w| w.target.clone()).collect();
            if !others_ready(workload, &queued) {
                let until = now + BLOCKED_RECHECK;
                group.blocked_until = Some(until);
                wake(until);
                continue;
            }
            group.blocked_until = None;
            let size = wave_size(workload, group.queue.len()).max(1);
            let wave: Vec<Write> = group.queue.drain(..size.min(group.queue.len())).collect();
            group.wave = wave
                .iter()
                .map(|w| InWave {
                    pod: w.target.clone(),
                    before: pod(&w.target).map(|p| p.restarts).unwrap_or_default(),
                    settled_since: None,
                })
                .collect();
            group.started = Some(now);
            wake(now + SETTLE.min(RESTART_WITHIN));
            submit.extend(wave);
        }
        self.groups
            .retain(|_, g| !g.queue.is_empty() || !g.wave.is_empty() || !g.stopped.is_empty());
        step.submit = submit;
        step.stopped = stopped;
        step
    }
}

impl Group {
    /// Whether the wave under way is done (`Ok(None)`), must be looked at again by a time
    /// (`Ok(Some)`), or stops the run (`Err`, with the Pod and why).
    fn stand(
        &mut self,
        now: Instant,
        started: Instant,
        pod: &impl Fn(&Target) -> Option<PodNow>,
    ) -> Result<Option<Instant>, (Target, Why)> {
        let mut wake: Option<Instant> = None;
        for member in &mut self.wave {
            match member.stand(now, started, pod(&member.pod)) {
                Stand::Done => {}
                Stand::Wait(at) => wake = Some(wake.map_or(at, |w| w.min(at))),
                Stand::Stop(why) => return Err((member.pod.clone(), why)),
            }
        }
        Ok(wake)
    }
}

impl InWave {
    fn stand(&mut self, now: Instant, started: Instant, pod: Option<PodNow>) -> Stand {
        // A Pod deleted meanwhile (scaled down, replaced) has nothing left to restart.
        let Some(pod) = pod else {
            return Stand::Done;
        };
        let (before, after) = (self.before, pod.restarts);
        // Restarted more than once: an app that fails with the new env, unless the Pod is Ready
        // (a kubelet restarted mid-restart starts the containers again); then it must stay
        // Ready for longer.
        let again = after.others >= before.others.saturating_add(2);
        if again && pod.ready != Some(true) {
            return Stand::Stop(Why::Crashed);
        }
        let restarted = after.sidecar > before.sidecar || after.others > before.others;
        if !restarted {
            self.settled_since = None;
            let limit = started + RESTART_WITHIN;
            return if now >= limit {
                Stand::Stop(Why::NotRestarted)
            } else {
                Stand::Wait(limit)
            };
        }
        if pod.ready == Some(false) {
            self.settled_since = None;
            let limit = started + READY_WITHIN;
            return if now >= limit {
                Stand::Stop(Why::NotReady)
            } else {
                Stand::Wait(limit)
            };
        }
        let since = *self.settled_since.get_or_insert(now);
        let settle = if again { SETTLE_AFTER_AGAIN } else { SETTLE };
        if now >= since + settle {
            Stand::Done
        } else {
            Stand::Wait(since + settle)
        }
    }
}

#[cfg(test)]
mod tests;
