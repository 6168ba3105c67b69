//! Delivery of reloads (a pure state machine over content snapshots and instants: a reload is
//! wanted while the latest snapshot differs from the last delivered; capped exponential backoff
//! reset by a success, a newer change attempted at once and never dropped, one retrying cannot
//! fix waiting for the next change), and the debounce in front of it ([`Debouncer`]).

use std::time::{Duration, Instant};

use crate::backoff::Backoff;

/// The delay between retries of a failed reload: 200 ms, doubling, at most 10 s.
pub const BACKOFF: Backoff = Backoff::new(Duration::from_millis(200), Duration::from_secs(10));

/// How one attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Delivered,
    /// Retry with backoff (no target yet, HTTP error, timeout).
    Retry,
    /// Wait for the next change (permission denied).
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

    /// Records fresh content; a different snapshot is attempted without waiting for a backoff.
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

/// How many debounce periods a burst may last before it is looked at anyway.
const MAX_WAIT_FACTOR: u32 = 10;

/// Merges a burst of events into one re-check: each event pushes the deadline to `delay` after
/// it, never beyond `max_wait` after the first, so an endless stream is still looked at.
#[derive(Debug, Clone)]
pub struct Debouncer {
    delay: Duration,
    max_wait: Duration,
    burst_start: Option<Instant>,
    deadline: Option<Instant>,
}

impl Debouncer {
    /// A debouncer with the given quiet period (`0` = immediate).
    pub fn new(delay: Duration) -> Debouncer {
        Debouncer {
            delay,
            max_wait: delay.saturating_mul(MAX_WAIT_FACTOR),
            burst_start: None,
            deadline: None,
        }
    }

    /// Records an event seen at `now`.
    pub fn on_event(&mut self, now: Instant) {
        let start = *self.burst_start.get_or_insert(now);
        self.deadline = Some((now + self.delay).min(start + self.max_wait));
    }

    /// When the pending burst is due, if one is pending.
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// Whether a burst is due at `now`; if so it is consumed (the caller re-checks once).
    pub fn take_due(&mut self, now: Instant) -> bool {
        match self.deadline {
            Some(deadline) if deadline <= now => {
                self.deadline = None;
                self.burst_start = None;
                true
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod debounce_tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn idle_has_no_deadline() {
        let mut debouncer = Debouncer::new(250 * MS);
        assert_eq!(debouncer.deadline(), None);
        assert!(!debouncer.take_due(Instant::now()));
    }

    #[test]
    fn zero_delay_is_due_immediately() {
        let t0 = Instant::now();
        let mut debouncer = Debouncer::new(Duration::ZERO);
        debouncer.on_event(t0);
        assert_eq!(debouncer.deadline(), Some(t0));
        assert!(debouncer.take_due(t0));
        assert!(!debouncer.take_due(t0));
    }

    #[test]
    fn a_burst_is_one_check_after_the_last_event() {
        let t0 = Instant::now();
        let mut debouncer = Debouncer::new(250 * MS);
        for i in 0..20 {
            debouncer.on_event(t0 + i * 50 * MS);
            assert!(!debouncer.take_due(t0 + i * 50 * MS));
        }
        let last = t0 + 19 * 50 * MS;
        assert_eq!(debouncer.deadline(), Some(last + 250 * MS));
        assert!(!debouncer.take_due(last + 249 * MS));
        assert!(debouncer.take_due(last + 250 * MS));
        assert_eq!(debouncer.deadline(), None);
    }

    #[test]
    fn an_endless_stream_is_still_looked_at() {
        let t0 = Instant::now();
        let mut debouncer = Debouncer::new(100 * MS);
        let mut due = 0;
        for i in 0..100 {
            let now = t0 + i * 50 * MS;
            if debouncer.take_due(now) {
                due += 1;
            }
            debouncer.on_event(now);
        }
        // 5 s of events every 50 ms with a 1 s cap: looked at about every second.
        assert!((4..=5).contains(&due), "due {due} times");
    }

    #[test]
    fn a_new_burst_starts_after_a_due_one() {
        let t0 = Instant::now();
        let mut debouncer = Debouncer::new(100 * MS);
        debouncer.on_event(t0);
        assert!(debouncer.take_due(t0 + 100 * MS));
        debouncer.on_event(t0 + 5000 * MS);
        assert_eq!(debouncer.deadline(), Some(t0 + 5100 * MS));
    }
}
