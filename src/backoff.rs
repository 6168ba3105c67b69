//! The one retry delay (pure): doubling from a first delay up to a cap. The sidecar's reloads,
//! the controller's writes and its fetches all wait by it.

use std::time::Duration;

/// A capped doubling backoff.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// The delay after the first failure.
    pub first: Duration,
    /// The longest delay.
    pub cap: Duration,
}

impl Backoff {
    /// `first`, doubling per failure, at most `cap`.
    pub const fn new(first: Duration, cap: Duration) -> Backoff {
        Backoff { first, cap }
    }

    /// The delay before retry number `failures` (1 = after the first failure).
    pub fn delay(&self, failures: u32) -> Duration {
        let doublings = failures.saturating_sub(1).min(31);
        self.first.saturating_mul(1 << doublings).min(self.cap)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_doubles_up_to_the_cap() {
        const MS: Duration = Duration::from_millis(1);
        let backoff = Backoff::new(100 * MS, 2000 * MS);
        let delays: Vec<_> = (1..=8).map(|n| backoff.delay(n)).collect();
        assert_eq!(
            delays,
            [100, 200, 400, 800, 1600, 2000, 2000, 2000].map(|ms| ms * MS)
        );
        assert_eq!(
            backoff.delay(0),
            100 * MS,
            "no failure yet counts as the first"
        );
        assert_eq!(backoff.delay(u32::MAX), 2000 * MS);
    }
}
