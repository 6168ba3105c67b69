//! Writes decided and not yet settled (pure): the value last submitted per target (the same
//! value is not submitted twice), the changes behind each write until its outcome is known (a
//! conflict schedules them again), and the Pod refreshes and restarts in place going in their
//! workload's waves.

use std::collections::HashMap;

use tokio::time::Instant;

use super::reconcile::Causes;
use super::restart_waves::{self, PodNow, RestartWaves};
use super::waves::{self, Stopped, Waves};
use super::write_target::{Target, TargetKind, Write};
use super::writer::Outcome;
use crate::workload::quoted;

/// The writes between their decision and their outcome.
#[derive(Debug, Default)]
pub struct WriteBook {
    /// The value last submitted per target, until the target shows another.
    last_written: HashMap<Target, String>,
    /// The changes behind each write under way (or queued in waves).
    writing: HashMap<Target, Causes>,
    waves: Waves,
    wave_wake: Option<Instant>,
    restarts: RestartWaves,
    restart_wake: Option<Instant>,
}

impl WriteBook {
    /// A write decided with the `causes` behind it; `owner` is the workload in whose waves a
    /// Pod's refresh goes. Returns the write to submit now, if any.
    pub fn decided(
        &mut self,
        write: Write,
        causes: Causes,
        owner: Option<Target>,
    ) -> Option<Write> {
        let target = write.target.clone();
        if self.last_written.get(&target) == Some(&write.desired) {
            return None;
        }
        self.writing.insert(target.clone(), causes);
        if let Some(owner) = owner {
            // A value a stopped refresh held back is not written again until the config changes.
            let queued = match target.kind {
                TargetKind::PodEnv => self.restarts.enqueue(owner, write),
                _ => self.waves.enqueue(owner, write),
            };
            if !queued {
                self.writing.remove(&target);
            }
            return None;
        }
        self.last_written.insert(target, write.desired.clone());
        Some(write)
    }

    /// Moves the waves on at `now`: the writes to submit, and the refreshes that stopped (no
    /// outcome will come for the writes they held back).
    pub fn step(
        &mut self,
        now: Instant,
        wave_size: impl Fn(&Target, usize) -> usize,
        ready: impl Fn(&Target) -> Option<bool>,
    ) -> (Vec<Write>, Vec<Stopped>) {
        let step = self.waves.step(now, wave_size, ready);
        self.wave_wake = step.wake;
        self.stepped(step)
    }

    /// Moves the restarts in place on (see [`WriteBook::step`]).
    pub fn step_restarts(
        &mut self,
        now: Instant,
        wave_size: impl Fn(&Target, usize) -> usize,
        pod: impl Fn(&Target) -> Option<PodNow>,
        others_ready: impl Fn(&Target, &[Target]) -> bool,
    ) -> (Vec<Write>, Vec<restart_waves::Stopped>) {
        let step = self.restarts.step(now, wave_size, pod, others_ready);
        self.restart_wake = step.wake;
        self.stepped(step)
    }

    /// Books a step of either waves: its writes are submitted now; those a stop held back
    /// will have no outcome.
    fn stepped<W>(&mut self, step: waves::Step<Stopped<W>>) -> (Vec<Write>, Vec<Stopped<W>>) {
        for write in &step.submit {
            self.last_written
                .insert(write.target.clone(), write.desired.clone());
        }
        for held in step.stopped.iter().flat_map(|s| &s.left) {
            self.writing.remove(&held.target);
        }
        (step.submit, step.stopped)
    }

    pub fn wake(&self) -> Option<Instant> {
        [self.wave_wake, self.restart_wake]
            .into_iter()
            .flatten()
            .min()
    }

    /// Learns what became of a write; a conflict returns the changes behind it, to be checked
    /// again.
    pub fn outcome(&mut self, outcome: &Outcome) -> Option<Causes> {
        match outcome {
            Outcome::Written(target, _) => drop(self.writing.remove(target)),
            Outcome::Conflict(target) => {
                self.last_written.remove(target);
                return Some(self.writing.remove(target).unwrap_or_default());
            }
            Outcome::Gone(target) => {
                self.writing.remove(target);
                self.last_written.remove(target);
            }
        }
        None
    }

    /// The target shows `hash` now: a value submitted earlier and since replaced is no
    /// reason to skip writing it again.
    pub fn seen(&mut self, target: &Target, hash: Option<&String>) {
        if self.last_written.get(target) == hash {
            self.last_written.remove(target);
        }
    }

    pub fn forget(&mut self, target: &Target) {
        self.last_written.remove(target);
    }

    /// Forgets everything (the writer dropped its queue).
    pub fn clear(&mut self) {
        *self = Self::default();
    }

    /// Writes whose outcome is not known yet.
    pub fn len(&self) -> usize {
        self.writing.len()
    }

    pub fn is_empty(&self) -> bool {
        self.writing.is_empty()
    }

    pub fn shrink(&mut self) {
        super::shrink_spare(&mut self.last_written);
        super::shrink_spare(&mut self.writing);
    }
}

/// The Event that says a workload's refresh stopped (`uid`: the workload's), and its message.
pub fn stopped_note(stopped: &Stopped, uid: String) -> Write {
    let message = format!(
        "reload-injector: {}: pod {} went unready after its refresh; {} pods keep their \
         current config until the config changes again",
        waves::REFRESH_STOPPED,
        quoted(&stopped.pod.name),
        stopped.left.len()
    );
    workload_note(&stopped.workload, uid, message)
}

/// The Event that says a workload's restarts in place stopped (`uid`: the workload's).
pub fn restarts_stopped_note(stopped: &restart_waves::Stopped, uid: String) -> Write {
    let message = format!(
        "reload-injector: {}: pod {} {}; {} pods keep the env they run with until the config \
         changes again",
        restart_waves::RESTARTS_STOPPED,
        quoted(&stopped.pod.name),
        stopped.why.words(),
        stopped.left.len()
    );
    workload_note(&stopped.workload, uid, message)
}

fn workload_note(workload: &Target, uid: String, message: String) -> Write {
    Write::hash(workload.clone(), uid, None, String::new(), Some(message))
}

#[cfg(test)]
mod tests;
