//! Restarts in place in waves (pure): a ConfigMap change read through env reaches a workload's
//! Pods `maxUnavailable` at a time, each restarting its containers where it is; a wave starts only
//! while every other Pod is Ready. A Pod is done once its restart counts rose and it has been
//! Ready again for [`SETTLE`]. One that crashes after its restart, does not restart within
//! [`RESTART_WITHIN`] or is not Ready again within [`READY_WITHIN`] stops the workload's waves:
//! the rest keep the env they run with.

use std::collections::HashMap;
use std::time::Duration;

use tokio::time::Instant;

use super::waves::{self, SETTLE, WaveQueue};
use super::write_target::{Target, Write};

pub use crate::workload::in_place::RESTARTS_STOPPED;
/// Longest a Pod may take to restart once its env hash was written: the kubelet syncs it within
/// a second or two, or a few more when its own ConfigMap watch lags (the second nudge).
pub const RESTART_WITHIN: Duration = Duration::from_secs(120);
/// Longest a restarted Pod may take to be Ready again.
pub const READY_WITHIN: Duration = Duration::from_secs(120);
/// How long a Pod whose containers restarted more than once, and that is Ready, must stay Ready
/// before its wave is done: an app that fails with the new env does not last that long.
pub const SETTLE_AFTER_AGAIN: Duration = Duration::from_secs(10);
/// How long a Pod whose containers restarted twice may be not Ready before it counts as crashed:
/// a kubelet restarted mid-restart starts the containers again, and the Pod is unready until
/// their probes pass again (seen on a loaded node). An app that fails with the new env exits
/// again within its back-off (a third restart is a crash at once) or stays unready this long.
pub const AGAIN_READY_WITHIN: Duration = Duration::from_secs(30);

/// A Pod's containers' restart counts, from its status.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Restarts {
    pub sidecar: u32,
    /// The highest of the other containers'.
    pub others: u32,
}

/// How a Pod stands now, as the view has it (`None`: the Pod is gone).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PodNow {
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
    /// The writes held back (see [`super::waves::Stopped::left`]).
    pub left: Vec<Write>,
}

pub type Step = waves::Step<Stopped>;

/// The restarts in place under way, per workload.
#[derive(Debug, Default)]
pub struct RestartWaves {
    groups: HashMap<Target, Group>,
}

#[derive(Debug, Default)]
struct Group {
    queue: WaveQueue,
    wave: Vec<InWave>,
    /// When the wave under way was submitted.
    started: Option<Instant>,
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
    /// Since when it is restarted twice and not Ready.
    unready_again_since: Option<Instant>,
}

/// Where one Pod of a wave is.
enum Stand {
    Done,
    Wait(Instant),
    Stop(Why),
}

impl RestartWaves {
    /// Queues a Pod's new env hash in its workload's waves (see [`WaveQueue::enqueue`]).
    pub fn enqueue(&mut self, workload: Target, write: Write) -> bool {
        let group = self.groups.entry(workload).or_default();
        group.queue.enqueue(write)
    }

    pub fn clear(&mut self) {
        self.groups.clear();
    }

    /// Whether a Pod waits in a queue or is in a wave under way.
    pub fn holds(&self, pod: &Target) -> bool {
        self.groups
            .values()
            .any(|g| g.queue.holds(pod) || g.wave.iter().any(|m| &m.pod == pod))
    }

    /// Moves every workload's run on: `pod` says how a Pod stands (`None`: gone), `others_ready`
    /// whether every Pod of a workload but those still to write is Ready (a run taken over by a
    /// new leader never makes more Pods unavailable than the budget).
    pub fn step(
        &mut self,
        now: Instant,
        wave_size: impl Fn(&Target, usize) -> usize,
        pod: impl Fn(&Target) -> Option<PodNow>,
        others_ready: impl Fn(&Target, &[Target]) -> bool,
    ) -> Step {
        let mut step = Step::default();
        for (workload, group) in &mut self.groups {
            if let Some(started) = group.started {
                match group.stand(now, started, &pod) {
                    Err((at, why)) => {
                        step.stopped.push(Stopped {
                            workload: workload.clone(),
                            pod: at,
                            why,
                            left: group.queue.stop(),
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
            if !others_ready(workload, &group.queue.targets()) {
                let until = now + BLOCKED_RECHECK;
                group.blocked_until = Some(until);
                step.wake_by(until);
                continue;
            }
            group.blocked_until = None;
            let wave = group
                .queue
                .next_wave(wave_size(workload, group.queue.len()));
            group.wave = wave
                .iter()
                .map(|w| InWave {
                    pod: w.target.clone(),
                    before: pod(&w.target).map(|p| p.restarts).unwrap_or_default(),
                    settled_since: None,
                    unready_again_since: None,
                })
                .collect();
            group.started = Some(now);
            step.wake_by(now + SETTLE.min(RESTART_WITHIN));
            step.submit.extend(wave);
        }
        self.groups
            .retain(|_, g| !g.queue.is_idle() || !g.wave.is_empty());
        step
    }
}

impl Group {
    /// Done (`Ok(None)`), to look at again by a time (`Ok(Some)`), or stopped at a Pod (`Err`).
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
        // soon (a kubelet restarted mid-restart starts the containers again); then it must stay
        // Ready for longer. A third restart is a crash.
        let again = after.others >= before.others.saturating_add(2);
        if again && pod.ready != Some(true) {
            self.settled_since = None;
            let since = *self.unready_again_since.get_or_insert(now);
            let limit = since + AGAIN_READY_WITHIN;
            return if after.others >= before.others.saturating_add(3) || now >= limit {
                Stand::Stop(Why::Crashed)
            } else {
                Stand::Wait(limit)
            };
        }
        self.unready_again_since = None;
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
