//! Is a series of samples (RSS, open descriptors) flat? Pure: the soak reads the server,
//! this judges the readings.
//!
//! The rule, on the samples taken after warm-up: the last one is within `tolerance` of the
//! first one (the criterion), and the least-squares trend through all of them,
//! projected over the same span, is within `tolerance` too. The first check alone can be
//! passed by a leak whose last sample happens to be low; the second alone by a jump at the
//! end. A real leak (steady growth) fails both.

use std::fmt;

/// One sample: seconds since the start of the run, and the value read.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    pub at: f64,
    pub value: f64,
}

/// What "flat" means for one series.
#[derive(Debug, Clone, Copy)]
pub struct Rule {
    /// Samples taken before this many seconds are ignored.
    pub warm_up: f64,
    /// Largest allowed change, relative to the first sample after warm-up (0.10 = 10%).
    pub tolerance: f64,
}

/// The figures behind a verdict.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Flatness {
    /// The first sample after warm-up.
    pub first: Sample,
    /// The last sample.
    pub last: Sample,
    /// `last / first - 1`.
    pub change: f64,
    /// The least-squares trend over the samples after warm-up, projected from `first.at` to
    /// `last.at`, relative to `first.value`.
    pub trend: f64,
    /// Samples after warm-up.
    pub samples: usize,
}

impl fmt::Display for Flatness {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} (t={:.0}s) -> {} (t={:.0}s), change {:+.1}%, trend {:+.1}% over {} samples",
            self.first.value,
            self.first.at,
            self.last.value,
            self.last.at,
            self.change * 100.0,
            self.trend * 100.0,
            self.samples
        )
    }
}

/// Why a series is not flat.
#[derive(Debug, Clone, PartialEq)]
pub enum NotFlat {
    /// Fewer than three samples after warm-up: no trend can be told.
    TooFew { samples: usize },
    /// The first sample after warm-up is not a positive number: nothing to compare with.
    NoBaseline(Sample),
    /// The last sample is more than the tolerance away from the first.
    LastSample(Flatness),
    /// The trend moves more than the tolerance over the run.
    Trend(Flatness),
}

impl fmt::Display for NotFlat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::TooFew { samples } => write!(f, "only {samples} samples after warm-up"),
            Self::NoBaseline(first) => {
                write!(f, "no baseline: {} at t={:.0}s", first.value, first.at)
            }
            Self::LastSample(figures) => write!(f, "last sample out of tolerance: {figures}"),
            Self::Trend(figures) => write!(f, "trend out of tolerance: {figures}"),
        }
    }
}

/// Judges `series` (in time order) by `rule`.
pub fn judge(series: &[Sample], rule: Rule) -> Result<Flatness, NotFlat> {
    let warm: Vec<Sample> = series
        .iter()
        .copied()
        .filter(|s| s.at >= rule.warm_up)
        .collect();
    let (Some(&first), Some(&last), true) = (warm.first(), warm.last(), warm.len() >= 3) else {
        return Err(NotFlat::TooFew {
            samples: warm.len(),
        });
    };
    if !(first.value > 0.0 && first.value.is_finite()) {
        return Err(NotFlat::NoBaseline(first));
    }
    let figures = Flatness {
        first,
        last,
        change: last.value / first.value - 1.0,
        trend: slope(&warm) * (last.at - first.at) / first.value,
        samples: warm.len(),
    };
    if !within(figures.change, rule.tolerance) {
        Err(NotFlat::LastSample(figures))
    } else if !within(figures.trend, rule.tolerance) {
        Err(NotFlat::Trend(figures))
    } else {
        Ok(figures)
    }
}

/// `|change| <= tolerance`; false for NaN (a sample that is not a number).
fn within(change: f64, tolerance: f64) -> bool {
    change.abs() <= tolerance
}

/// Least-squares slope of value over time (per second); 0 when all samples share one time.
fn slope(samples: &[Sample]) -> f64 {
    let n = samples.len() as f64;
    let mean_t = samples.iter().map(|s| s.at).sum::<f64>() / n;
    let mean_v = samples.iter().map(|s| s.value).sum::<f64>() / n;
    let (mut cov, mut var) = (0.0, 0.0);
    for s in samples {
        cov += (s.at - mean_t) * (s.value - mean_v);
        var += (s.at - mean_t) * (s.at - mean_t);
    }
    if var == 0.0 { 0.0 } else { cov / var }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ten-minute run: a sample every 30 s, `value(i)` for the i-th.
    fn run(value: impl Fn(usize) -> f64) -> Vec<Sample> {
        (1..=20)
            .map(|i| Sample {
                at: 30.0 * i as f64,
                value: value(i),
            })
            .collect()
    }

    const RULE: Rule = Rule {
        warm_up: 60.0,
        tolerance: 0.10,
    };

    /// Deterministic noise in [-1, 1].
    fn noise(i: usize) -> f64 {
        [0.3, -0.8, 1.0, -0.2, 0.6, -1.0, 0.1, 0.9, -0.5, -0.1][i % 10]
    }

    #[test]
    fn flat_and_noisy_passes() {
        // ±6% around 40 MiB, and a warm-up that grows from 25 MiB (ignored).
        let series = run(|i| {
            if i < 2 {
                25_000.0
            } else {
                40_000.0 * (1.0 + 0.06 * noise(i))
            }
        });
        let figures = judge(&series, RULE).unwrap();
        assert_eq!(figures.samples, 19);
        assert!(figures.trend.abs() < 0.05, "{figures}");
    }

    #[test]
    fn steady_growth_of_15_percent_fails() {
        let series = run(|i| 40_000.0 * (1.0 + 0.15 * (i as f64 - 2.0) / 18.0));
        assert!(matches!(judge(&series, RULE), Err(NotFlat::LastSample(_))));
    }

    #[test]
    fn noisy_growth_with_a_low_last_sample_fails_on_the_trend() {
        // 20% growth over the run, but the last sample dips back to 8% above the first.
        let mut series = run(|i| 40_000.0 * (1.0 + 0.20 * (i as f64 - 2.0) / 18.0));
        series.last_mut().unwrap().value = 43_200.0;
        match judge(&series, RULE) {
            Err(NotFlat::Trend(figures)) => {
                assert!((figures.change - 0.08).abs() < 1e-9, "{figures}");
                assert!(figures.trend > 0.10, "{figures}");
            }
            other => panic!("wanted a trend failure, got {other:?}"),
        }
    }

    #[test]
    fn a_jump_at_the_end_fails() {
        let mut series = run(|_| 40_000.0);
        series.last_mut().unwrap().value = 45_000.0;
        assert!(matches!(judge(&series, RULE), Err(NotFlat::LastSample(_))));
    }

    #[test]
    fn a_drop_beyond_the_tolerance_is_not_flat_either() {
        let series = run(|i| 40_000.0 * (1.0 - 0.15 * (i as f64 - 2.0) / 18.0));
        assert!(matches!(judge(&series, RULE), Err(NotFlat::LastSample(_))));
    }

    #[test]
    fn descriptors_flat_with_a_blip_pass() {
        let series = run(|i| if i == 7 { 20.0 } else { 18.0 });
        let figures = judge(&series, RULE).unwrap();
        assert_eq!((figures.first.value, figures.last.value), (18.0, 18.0));
    }

    #[test]
    fn one_descriptor_leaked_per_minute_fails() {
        let series = run(|i| 18.0 + (i / 2) as f64);
        assert!(matches!(judge(&series, RULE), Err(NotFlat::LastSample(_))));
    }

    #[test]
    fn the_60_s_shape_tells_flat_from_growth() {
        // `cargo test`: a sample every 10 s, warm-up 30 s, so four samples are judged.
        let short = |value: &dyn Fn(f64) -> f64| -> Vec<Sample> {
            (1..=6)
                .map(|i| {
                    let at = 10.0 * i as f64;
                    Sample {
                        at,
                        value: value(at),
                    }
                })
                .collect()
        };
        let rule = Rule {
            warm_up: 30.0,
            tolerance: 0.10,
        };
        let flat = short(&|at| 37_000.0 + [0.0, 900.0, -800.0, 700.0][(at as usize / 10) % 4]);
        assert!(judge(&flat, rule).is_ok(), "{:?}", judge(&flat, rule));
        // 1.5 MiB every 10 s.
        let leak = short(&|at| 37_000.0 + 150.0 * at);
        assert!(matches!(judge(&leak, rule), Err(NotFlat::LastSample(_))));
    }

    /// The medians (MiB) of the ten-minute release run of 2026-11-23 18:05 UTC, t = 30..600 s.
    const TEN_MINUTES: [f64; 20] = [
        18.5, 18.8, 18.9, 19.0, 18.0, 19.2, 19.0, 18.5, 18.8, 18.2, 17.9, 18.1, 18.2, 18.1, 18.5,
        18.5, 18.2, 18.5, 17.9, 19.0,
    ];

    #[test]
    fn the_measured_run_passes_and_the_same_run_with_a_2_mib_leak_fails() {
        let measured = run(|i| TEN_MINUTES[i - 1] * 1024.0);
        assert!(
            judge(&measured, RULE).is_ok(),
            "{:?}",
            judge(&measured, RULE)
        );
        // 2 MiB over the nine minutes after warm-up: about 1.3 bytes per request of that run.
        let leaking = run(|i| (TEN_MINUTES[i - 1] + 2.0 * (i as f64 - 2.0) / 18.0) * 1024.0);
        assert!(
            judge(&leaking, RULE).is_err(),
            "{:?}",
            judge(&leaking, RULE)
        );
    }

    #[test]
    fn a_zero_or_unreadable_baseline_fails() {
        let series = run(|i| if i == 2 { 0.0 } else { 18.0 });
        assert!(matches!(judge(&series, RULE), Err(NotFlat::NoBaseline(_))));
        let mut series = run(|_| 40_000.0);
        series[10].value = f64::NAN;
        assert!(judge(&series, RULE).is_err(), "a NaN sample passed");
    }

    #[test]
    fn too_few_samples_after_warm_up_fail() {
        let series: Vec<_> = run(|_| 18.0).into_iter().take(3).collect();
        assert_eq!(judge(&series, RULE), Err(NotFlat::TooFew { samples: 2 }));
    }
}
