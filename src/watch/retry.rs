//! Delivery of reloads: a pure state machine over content snapshots and instants. A reload is
//! wanted whenever the latest snapshot differs from the last delivered. Failures are retried
//! with capped exponential backoff (reset by a success); a newer change is attempted at once
//! and never dropped; one retrying cannot fix (permission denied) waits for the next change.

use std::time::{Duration, Instant};

use crate::backoff::Backoff;

/// The delay between retries of a failed reload: 200 ms, doubling, at most 10 s.
pub const BACKOFF: Backoff = Backoff::new(Duration::from_millis(200), Duration::from_secs(10));

/// How one attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The app was told.
    Delivered,
    /// It did not work this time (no target yet, HTTP error, timeout): retry with backoff.
    Retry,
    /// Retrying will not help (permission denied): wait for the next change.
    GiveUp,
}

/// The delivery state for snapshots of type `S`.
#[derive(Debug, Clone)]
pub struct Delivery<S> {
    latest: S,
    delivered: S,
    set_aside: Option<S>,
    in_flight: Option<S>,
    failures: u32,
    retry_at: Option<Instant>,
}

impl<S: Clone + PartialEq> Delivery<S> {
    /// Starts with the initial content as delivered: no reload for the initial state.
    pub fn new(initial: S) -> Delivery<S> {
        Delivery {
            latest: initial.clone(),
            delivered: initial,
            set_aside: None,
            in_flight: None,
            failures: 0,
            retry_at: None,
        }
    }

    /// The content the app was last told about.
    pub fn delivered(&self) -> &S {
        &self.delivered
    }

    /// Retries so far for the pending reload.
    pub fn failures(&self) -> u32 {
        self.failures
    }

    /// Records freshly computed content. A different snapshot supersedes a pending retry
    /// and is attempted without waiting for the backoff.
    pub fn observe(&mut self, snapshot: S) {
        if snapshot != self.latest {
            self.latest = snapshot;
            self.retry_at = None;
        }
    }

    fn wanted(&self) -> bool {
        self.latest != self.delivered && self.set_aside.as_ref() != Some(&self.latest)
    }

    /// When the next attempt may start, if one is wanted and none is running.
    pub fn next_attempt_at(&self, now: Instant) -> Option<Instant> {
        if self.in_flight.is_some() || !self.wanted() {
            return None;
        }
        Some(self.retry_at.unwrap_or(now))
    }

    /// Starts an attempt if one is due at `now`, returning the snapshot to deliver.
    pub fn start(&mut self, now: Instant) -> Option<S> {
        let at = self.next_attempt_at(now)?;
        if at > now {
            return None;
        }
        self.in_flight = Some(self.latest.clone());
        self.in_flight.clone()
    }

    /// Records how the running attempt ended; returns the delay before a retry, if any.
    pub fn finish(&mut self, outcome: Outcome, now: Instant) -> Option<Duration> {
        let attempted = self.in_flight.take()?;
        self.retry_at = None;
        match outcome {
            Outcome::Delivered => {
                self.delivered = attempted;
                self.failures = 0;
                self.set_aside = None;
                None
            }
            Outcome::GiveUp => {
                self.set_aside = Some(attempted);
                self.failures = 0;
                None
            }
            Outcome::Retry => {
                self.failures = self.failures.saturating_add(1);
                let delay = BACKOFF.delay(self.failures);
                if attempted == self.latest {
                    self.retry_at = Some(now + delay);
                    Some(delay)
                } else {
                    // Newer content arrived meanwhile: try it now.
                    Some(Duration::ZERO)
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
