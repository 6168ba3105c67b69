//! Fetches under way (pure): which objects' digests a GET is bringing and from which view tick
//! on, whether another must follow it, and the failed ones waiting out their backoff (a retry
//! is a time in this book, not a task sleeping somewhere).

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use tokio::time::Instant;

use super::config_store::ConfigKey;
use crate::backoff::Backoff;

/// First and longest wait before a failed GET is tried again.
pub const RETRY: Backoff = Backoff::new(Duration::from_millis(200), Duration::from_secs(30));

/// Where one object's GET stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Get {
    /// Sent at this view tick; its answer is at least as new as that moment.
    InFlight { sent: u64 },
    /// Failed; sent again at this time.
    Backoff { until: Instant },
}

#[derive(Debug)]
struct Entry {
    get: Get,
    failures: u32,
    /// Digests newer than the GET in flight were asked for: another GET follows its answer.
    again: bool,
}

#[derive(Debug, Default)]
pub struct FetchBook {
    entries: HashMap<ConfigKey, Entry>,
    /// `(time, key)` of every GET waiting out its backoff.
    retries: BTreeSet<(Instant, ConfigKey)>,
}

impl FetchBook {
    /// Asks for `key`'s digests from a GET sent after view tick `after`; returns whether one
    /// must be sent now. A GET in flight that was sent later serves; one sent earlier is
    /// followed by another once it answers; a GET waiting to be retried will be sent later.
    pub fn want(&mut self, key: &ConfigKey, after: u64) -> bool {
        let Some(entry) = self.entries.get_mut(key) else {
            return true;
        };
        if let Get::InFlight { sent } = entry.get
            && sent <= after
        {
            entry.again = true;
        }
        false
    }

    /// A GET of `key` was sent at view tick `sent` (a first try, or a retry).
    pub fn sent(&mut self, key: &ConfigKey, sent: u64) {
        let entry = self.unscheduled(key, Get::InFlight { sent });
        // Sent now: newer than anything asked for so far.
        entry.get = Get::InFlight { sent };
        entry.again = false;
    }

    /// The GET of `key` failed at `now`; returns how long until it is sent again.
    pub fn failed(&mut self, key: &ConfigKey, now: Instant) -> Duration {
        let entry = self.unscheduled(key, Get::Backoff { until: now });
        entry.failures += 1;
        let wait = RETRY.delay(entry.failures);
        entry.get = Get::Backoff { until: now + wait };
        self.retries.insert((now + wait, key.clone()));
        wait
    }

    /// `key`'s entry (new, as `get`, if it had none), taken out of the retries.
    fn unscheduled(&mut self, key: &ConfigKey, get: Get) -> &mut Entry {
        let entry = self.entries.entry(key.clone()).or_insert(Entry {
            get,
            failures: 0,
            again: false,
        });
        if let Get::Backoff { until } = entry.get {
            self.retries.remove(&(until, key.clone()));
        }
        entry
    }

    /// The GET of `key` answered; returns whether another must be sent now.
    pub fn answered(&mut self, key: &ConfigKey) -> bool {
        match self.entries.remove(key) {
            Some(Entry {
                get: Get::Backoff { until },
                ..
            }) => {
                self.retries.remove(&(until, key.clone()));
                false
            }
            Some(entry) => entry.again,
            None => false,
        }
    }

    /// A failed GET due to be sent again at `now` (send it, then say [`FetchBook::sent`]).
    pub fn pop_retry(&mut self, now: Instant) -> Option<ConfigKey> {
        let (until, _) = self.retries.first()?;
        if *until > now {
            return None;
        }
        self.retries.pop_first().map(|(_, key)| key)
    }

    pub fn next_retry(&self) -> Option<Instant> {
        self.retries.first().map(|(until, _)| *until)
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn shrink(&mut self) {
        super::shrink_spare(&mut self.entries);
    }
}

#[cfg(test)]
mod tests;
