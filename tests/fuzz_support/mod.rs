//! The fuzzing harness: proptest runs batches with fresh seeds until a case budget or a time
//! budget is spent, shrinks any failure to a small input, and writes that input as a fixture
//! that `tests/admission/offline/fuzz.rs` replays from then on.
//!
//! Bounded by default (the pass `cargo test` runs); `FUZZ_SECONDS=N` runs each target for N
//! seconds (what `scripts/fuzz.sh` sets); `FUZZ_SEED=<64 hex>` replays one batch's seed.
#![allow(dead_code)]

pub mod generate;
pub mod offline;
pub mod review;

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use proptest::strategy::Strategy;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestError, TestRng, TestRunner};

/// Where replayed crash inputs live: one sub-directory per target.
pub const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/fuzz");

/// Cases per batch (each batch has its own seed).
const BATCH: u32 = 64;

/// How long and how much one target runs.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    /// Stop after this many cases…
    pub cases: u64,
    /// …or after this long, whichever comes first.
    pub time: Duration,
}

impl Budget {
    /// The CI pass (`cases`, at most `seconds`), or `FUZZ_SECONDS` of unbounded cases.
    pub fn from_env(cases: u64, seconds: u64) -> Budget {
        match std::env::var("FUZZ_SECONDS")
            .ok()
            .and_then(|s| s.parse().ok())
        {
            Some(secs) => Budget {
                cases: u64::MAX,
                time: Duration::from_secs(secs),
            },
            None => Budget {
                cases,
                time: Duration::from_secs(seconds),
            },
        }
    }
}

/// What a target did.
#[derive(Debug)]
pub struct Run {
    /// Inputs checked, shrinking included.
    pub inputs: u64,
    /// Wall time.
    pub took: Duration,
}

/// Runs `check` on inputs from `strategy` within `budget`. On a failure, the shrunk input is
/// written by `save` under `tests/fixtures/fuzz/<target>/` and the test panics naming it.
pub fn fuzz<S, F>(
    target: &str,
    budget: Budget,
    strategy: S,
    save: impl Fn(&S::Value) -> Vec<u8>,
    extension: &str,
    check: F,
) -> Run
where
    S: Strategy,
    S::Value: Debug,
    F: Fn(&S::Value) -> Result<(), String>,
{
    let started = Instant::now();
    let inputs = AtomicU64::new(0);
    let fixed_seed = std::env::var("FUZZ_SEED").ok();
    let mut batches = 0u64;
    while inputs.load(Ordering::Relaxed) < budget.cases && started.elapsed() < budget.time {
        let seed: [u8; 32] = match &fixed_seed {
            Some(hex) => parse_seed(hex),
            None => rand::random(),
        };
        let config = Config {
            cases: BATCH,
            failure_persistence: None,
            max_shrink_iters: 4096,
            max_shrink_time: 60_000,
            ..Config::default()
        };
        let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &seed);
        let mut runner = TestRunner::new_with_rng(config, rng);
        let result = runner.run(&strategy, |input| {
            inputs.fetch_add(1, Ordering::Relaxed);
            check(&input).map_err(TestCaseError::fail)
        });
        batches += 1;
        match result {
            Ok(()) => {}
            Err(TestError::Fail(reason, input)) => {
                let path = write_crash(target, &save(&input), extension);
                panic!(
                    "fuzz target {target} failed (seed {}): {reason}\nshrunk input saved as {}; \
                     commit it and fix the bug",
                    hex::encode(seed),
                    path.display()
                );
            }
            Err(TestError::Abort(reason)) => panic!("fuzz target {target} aborted: {reason}"),
        }
        if fixed_seed.is_some() {
            break;
        }
    }
    let run = Run {
        inputs: inputs.load(Ordering::Relaxed),
        took: started.elapsed(),
    };
    let thread = std::thread::current();
    let name = thread.name().unwrap_or(target);
    eprintln!(
        "fuzz: {name}: {} inputs in {:.1} s ({batches} batches)",
        run.inputs,
        run.took.as_secs_f64()
    );
    if let Ok(report) = std::env::var("FUZZ_REPORT") {
        use std::io::Write;
        let line = format!("{name} {} {:.1}\n", run.inputs, run.took.as_secs_f64());
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(report);
        if let Ok(mut file) = file {
            let _ = file.write_all(line.as_bytes());
        }
    }
    run
}

fn parse_seed(hex_seed: &str) -> [u8; 32] {
    let bytes = hex::decode(hex_seed.trim()).expect("FUZZ_SEED must be 64 hex digits");
    bytes.try_into().expect("FUZZ_SEED must be 64 hex digits")
}

/// Writes a crash input as `<target>/crash-<sha256 prefix>.<extension>`.
fn write_crash(target: &str, bytes: &[u8], extension: &str) -> PathBuf {
    use sha2::Digest;
    let dir = Path::new(FIXTURES).join(target);
    std::fs::create_dir_all(&dir).expect("create the fixture directory");
    let digest = hex::encode(sha2::Sha256::digest(bytes));
    let path = dir.join(format!("crash-{}.{extension}", &digest[..12]));
    std::fs::write(&path, bytes).expect("write the crash fixture");
    path
}

/// Every file of `tests/fixtures/fuzz/<target>/`, sorted.
pub fn fixtures(target: &str) -> Vec<PathBuf> {
    let dir = Path::new(FIXTURES).join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|entries| entries.filter_map(|e| Some(e.ok()?.path())).collect())
        .unwrap_or_default();
    files.sort();
    files
}

/// Counts of how inputs ended, to show what the generators reach.
#[derive(Debug, Default)]
pub struct Tally(Mutex<BTreeMap<&'static str, u64>>);

impl Tally {
    /// Counts one `outcome`.
    pub fn add(&self, outcome: &'static str) {
        *self.0.lock().expect("tally").entry(outcome).or_default() += 1;
    }

    /// `outcome n, …` in name order.
    pub fn summary(&self) -> String {
        let counts = self.0.lock().expect("tally");
        let parts: Vec<String> = counts.iter().map(|(k, v)| format!("{k} {v}")).collect();
        parts.join(", ")
    }
}
