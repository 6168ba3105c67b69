//! Debounce: merge a burst of events into one re-check (pure, over instants). Every event pushes
//! the deadline to `delay` after it, but never beyond `max_wait` after the burst's first event,
//! so an endless stream still gets looked at. With `delay` zero it is immediate.

use std::time::{Duration, Instant};

/// How many debounce periods a burst may last before it is looked at anyway.
const MAX_WAIT_FACTOR: u32 = 10;

/// Pending-change tracker.
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
mod tests {
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
