//! Restarts in place in waves (pure): a ConfigMap change read through env reaches a workload's
//! Pods `maxUnavailable` at a time, each restarting its containers where it is; a wave starts only
//! while every other Pod is Ready. A Pod is done once its restart counts rose and it has been
//! Ready again for [`SETTLE`] ([`SETTLE_AFTER_AGAIN`] if it restarted twice, as after a kubelet
//! restart mid-restart). One that crashes after its restart (a third restart, or restarted twice
//! and not Ready for [`AGAIN_READY_WITHIN`]), does not restart within [`RESTART_WITHIN`] or is
//! not Ready again within [`READY_WITHIN`] stops the workload's waves: the rest keep the env
//! they run with.

use std::time::Duration;

use tokio::time::Instant;

use super::waves::{self, Runs, SETTLE, Stand};
use super::write_target::Target;

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
pub type Stopped = waves::Stopped<Why>;

pub type Step = waves::Step<Stopped>;

/// The restarts in place under way, per workload.
pub type RestartWaves = Runs<InWave>;

/// A Pod of the wave under way.
#[derive(Debug, Clone, Default)]
pub struct InWave {
    /// Its restart counts when its write was submitted.
    before: Restarts,
    /// Since when it is restarted and Ready.
    settled_since: Option<Instant>,
    /// Since when it is restarted twice and not Ready.
    unready_again_since: Option<Instant>,
}

impl RestartWaves {
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
        let member = |target: &Target| InWave {
            before: pod(target).map(|p| p.restarts).unwrap_or_default(),
            ..InWave::default()
        };
        let stand = |target: &Target, m: &mut InWave, started| m.stand(now, started, pod(target));
        self.run(now, wave_size, stand, member, others_ready)
    }
}

impl InWave {
    fn stand(&mut self, now: Instant, started: Instant, pod: Option<PodNow>) -> Stand<Why> {
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
            let third = after.others >= before.others.saturating_add(3);
            let limit = if third {
                now
            } else {
                since + AGAIN_READY_WITHIN
            };
            return Stand::from(now, limit, Stand::Stop(Why::Crashed));
        }
        self.unready_again_since = None;
        let restarted = after.sidecar > before.sidecar || after.others > before.others;
        if !restarted {
            self.settled_since = None;
            let limit = started + RESTART_WITHIN;
            return Stand::from(now, limit, Stand::Stop(Why::NotRestarted));
        }
        if pod.ready == Some(false) {
            self.settled_since = None;
            return Stand::from(now, started + READY_WITHIN, Stand::Stop(Why::NotReady));
        }
        let since = *self.settled_since.get_or_insert(now);
        let settle = if again { SETTLE_AFTER_AGAIN } else { SETTLE };
        Stand::from(now, since + settle, Stand::Done)
    }
}

#[cfg(test)]
mod tests;
