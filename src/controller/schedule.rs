//! What is due when (pure): the targets waiting for a decision, each with the data changes
//! behind it and a time or the digests a fetch will bring. A workload's rollout is due
//! `--rollout-delay` after the change, so changes close together become one patch; the rest
//! at once. The time index never holds stale entries.

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use tokio::time::Instant;

use super::config_store::{Changes, ConfigKey};
use super::reconcile::Causes;
use super::write_target::Target;

/// A workload's changes are merged for at most this many `--rollout-delay`s.
pub const MAX_DELAYS: u32 = 10;

/// What a scheduled target waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    Until(Instant),
    /// Digests a fetch is bringing; [`Schedule::check`] makes it due when they come.
    Fetch,
}

/// One target waiting for a decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Due {
    pub wait: Wait,
    /// When the first change merged into it was seen.
    pub first: Instant,
    pub causes: Causes,
}

#[derive(Debug)]
pub struct Schedule {
    rollout_delay: Duration,
    entries: HashMap<Target, Due>,
    /// `(time, target)` of every entry waiting [`Wait::Until`] a time.
    times: BTreeSet<(Instant, Target)>,
}

impl Schedule {
    /// An empty schedule; workloads wait `rollout_delay` after a change.
    pub fn new(rollout_delay: Duration) -> Self {
        Self {
            rollout_delay,
            entries: HashMap::new(),
            times: BTreeSet::new(),
        }
    }

    /// `target`'s data changed (`changes` of `key`): due at once for a Pod, `--rollout-delay`
    /// from now for a workload, merged with the changes already waiting.
    pub fn change(&mut self, target: &Target, key: &ConfigKey, changes: &Changes, now: Instant) {
        let mut due = self.take(target, now);
        let keys = if changes.existence {
            BTreeSet::new()
        } else {
            changes.keys.clone()
        };
        due.causes.entry(key.clone()).or_default().extend(keys);
        let at = if target.kind.is_pod() {
            now
        } else {
            if due.wait == Wait::Fetch {
                due.first = now;
            }
            let latest = due.first + self.rollout_delay * MAX_DELAYS;
            (now + self.rollout_delay).min(latest)
        };
        self.put(target.clone(), Wait::Until(at), due);
    }

    /// `target` is to be checked: at once, unless changes already wait for their time.
    pub fn check(&mut self, target: &Target, now: Instant) {
        let due = self.take(target, now);
        let at = match due.wait {
            Wait::Until(at) if !due.causes.is_empty() => at,
            _ => now,
        };
        self.put(target.clone(), Wait::Until(at), due);
    }

    /// `target` is due again `after` `now`, with `causes` merged in (a write that conflicted).
    pub fn retry(&mut self, target: &Target, causes: Causes, now: Instant, after: Duration) {
        let at = now + after;
        let mut due = self.take(target, now);
        for (key, keys) in causes {
            due.causes.entry(key).or_default().extend(keys);
        }
        self.put(target.clone(), Wait::Until(at), due);
    }

    /// `target`, just popped, waits for fetched digests before it is decided again.
    pub fn await_fetch(&mut self, target: Target, due: Due) {
        self.put(target, Wait::Fetch, due);
    }

    /// Whether `target` waits for fetched digests.
    pub fn awaits_fetch(&self, target: &Target) -> bool {
        self.entries
            .get(target)
            .is_some_and(|d| d.wait == Wait::Fetch)
    }

    /// The earliest target due at `now`, taken out of the schedule.
    pub fn pop_due(&mut self, now: Instant) -> Option<(Target, Due)> {
        let (at, _) = self.times.first()?;
        if *at > now {
            return None;
        }
        let (_, target) = self.times.pop_first()?;
        let due = self.entries.remove(&target)?;
        Some((target, due))
    }

    pub fn next_due(&self) -> Option<Instant> {
        self.times.first().map(|(at, _)| *at)
    }

    /// Takes `target` out of the schedule; returns what was waiting.
    pub fn remove(&mut self, target: &Target) -> Option<Due> {
        let due = self.entries.remove(target)?;
        if let Wait::Until(at) = due.wait {
            self.times.remove(&(at, target.clone()));
        }
        Some(due)
    }

    pub fn clear(&mut self) {
        self.entries.clear();
        self.times.clear();
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn shrink(&mut self) {
        super::shrink_spare(&mut self.entries);
    }

    /// `target`'s entry taken out (a new one, first seen `now`, if it had none).
    fn take(&mut self, target: &Target, now: Instant) -> Due {
        self.remove(target).unwrap_or(Due {
            wait: Wait::Fetch,
            first: now,
            causes: Causes::new(),
        })
    }

    fn put(&mut self, target: Target, wait: Wait, mut due: Due) {
        due.wait = wait;
        if let Wait::Until(at) = wait {
            self.times.insert((at, target.clone()));
        }
        self.entries.insert(target, due);
    }
}

#[cfg(test)]
mod tests;
