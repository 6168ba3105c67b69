//! A token bucket for the controller's writes: pure, driven by explicit instants.

use std::time::{Duration, Instant};

/// Float noise tolerated when counting tokens.
const EPSILON: f64 = 1e-6;

/// Allows `rate` takes per second on average, with bursts of up to `max(1, rate)`.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    rate: f64,
    burst: f64,
    tokens: f64,
    last: Instant,
}

impl TokenBucket {
    /// A full bucket at `now`. A rate that is not a positive finite number is read as 1 per second.
    pub fn new(rate: f64, now: Instant) -> TokenBucket {
        let rate = Some(rate)
            .filter(|rate| rate.is_finite() && *rate > 0.0)
            .unwrap_or(1.0);
        let burst = rate.max(1.0);
        TokenBucket {
            rate,
            burst,
            tokens: burst,
            last: now,
        }
    }

    /// Takes one token at `now`, or says how long to wait until one is there (nothing taken).
    pub fn take(&mut self, now: Instant) -> Result<(), Duration> {
        self.refill(now);
        if self.tokens >= 1.0 - EPSILON {
            self.tokens = (self.tokens - 1.0).max(0.0);
            Ok(())
        } else {
            let missing = 1.0 - self.tokens;
            // Whole microseconds, rounded up but for float noise, so the wait reaches the token.
            let micros = (missing / self.rate * 1e6 - 1e-3).ceil();
            Err(Duration::from_micros(micros as u64))
        }
    }

    fn refill(&mut self, now: Instant) {
        // An instant before `last` (a clock that went back) adds nothing.
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.rate).min(self.burst);
        if now > self.last {
            self.last = now;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn a_full_bucket_allows_the_burst_then_spaces_takes_at_the_rate() {
        let start = Instant::now();
        let mut bucket = TokenBucket::new(20.0, start);
        for _ in 0..20 {
            assert_eq!(bucket.take(start), Ok(()));
        }
        assert_eq!(bucket.take(start), Err(50 * MS));
        assert_eq!(bucket.take(start + 49 * MS), Err(MS));
        assert_eq!(bucket.take(start + 50 * MS), Ok(()));
        assert_eq!(bucket.take(start + 50 * MS), Err(50 * MS));
    }

    #[test]
    fn a_rate_below_one_has_a_burst_of_one() {
        let start = Instant::now();
        let mut bucket = TokenBucket::new(0.5, start);
        assert_eq!(bucket.take(start), Ok(()));
        assert_eq!(bucket.take(start), Err(2000 * MS));
        assert_eq!(bucket.take(start + 2000 * MS), Ok(()));
    }

    #[test]
    fn an_idle_bucket_refills_only_up_to_the_burst() {
        let start = Instant::now();
        let mut bucket = TokenBucket::new(2.0, start);
        let later = start + Duration::from_secs(3600);
        assert_eq!(bucket.take(later), Ok(()));
        assert_eq!(bucket.take(later), Ok(()));
        assert_eq!(bucket.take(later), Err(500 * MS));
    }

    #[test]
    fn a_bad_rate_is_one_per_second_and_an_earlier_instant_adds_nothing() {
        let start = Instant::now() + Duration::from_secs(10);
        for rate in [0.0, -3.0, f64::NAN, f64::INFINITY] {
            let mut bucket = TokenBucket::new(rate, start);
            assert_eq!(bucket.take(start), Ok(()));
            assert_eq!(bucket.take(start - Duration::from_secs(5)), Err(1000 * MS));
        }
    }
}
