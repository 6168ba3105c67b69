//! The watcher's event loop: inotify, debounce, resync, delivery, shutdown.

use std::future::Future;
use std::pin::Pin;
use std::time::{SystemTime, UNIX_EPOCH};

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use tokio::time::{Instant, MissedTickBehavior, interval_at, sleep_until};
use tracing::{debug, error, info, warn};

use super::Config;
use super::app_reload::{self, Report};
use super::content::{ContentHash, Names, hash_path_listed};
use super::events::Effect;
use super::inotify_watches::{WatchError, WatchSet, warn_unset};
use super::retry::{Debouncer, Delivery, Outcome};
use super::trim;
use super::watch_metrics::{self, Metrics};

type Snapshot = Vec<ContentHash>;
type Attempt = Pin<Box<dyn Future<Output = Report>>>;
/// A delivered signal being watched for an exit of its targets (see [`app_reload::judge`]).
type Judging = Pin<Box<dyn Future<Output = (Line, Option<String>)>>>;

/// What the log line of a delivered reload names.
struct Line {
    dirs: String,
    hashes: String,
    targets: String,
    duration_ms: String,
}

/// Mutable state of the loop besides the watches.
struct State {
    config: Config,
    metrics: Metrics,
    delivery: Delivery<Snapshot>,
    attempted: Option<Snapshot>,
    last_error: Option<String>,
    warned_unreadable: bool,
    /// Per watched path, its visible names as last listed (see [`hash_path_listed`]); cleared
    /// when names may have come or gone, so the next hash lists them again.
    listed: Vec<Option<Names>>,
}

/// Runs until SIGTERM or SIGINT.
pub async fn run(config: Config) -> anyhow::Result<()> {
    let stop = super::termination()?;
    tokio::pin!(stop);
    let (mut state, mut watches) = State::start(config).await?;
    let mut debouncer = Debouncer::new(state.config.debounce);
    let period = state.config.resync;
    let mut resync = interval_at(Instant::now() + period, period);
    resync.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut in_flight: Option<Attempt> = None;
    let mut judging: FuturesUnordered<Judging> = FuturesUnordered::new();
    let code_pages = trim::CodePages::of_this_process()
        .inspect_err(
            |err| debug!(error = %crate::report::one_line(err), "keeping the mapped pages"),
        )
        .ok();
    drop_code_pages(code_pages.as_ref());
    loop {
        let now = Instant::now();
        // Counted at the end of the turn, once `reload_pending` says what they caused.
        let mut events_read = 0;
        let wake = [
            debouncer.deadline(),
            state.delivery.next_attempt_at(now.into_std()),
        ]
        .into_iter()
        .flatten()
        .min();
        let resynced = tokio::select! {
            biased;
            () = &mut stop => break,
            report = async { in_flight.as_mut().expect("guarded by the branch condition").await },
                if in_flight.is_some() => {
                in_flight = None;
                if let Some(judge) = state.finish(report) {
                    judging.push(judge);
                }
                false
            }
            Some(verdict) = judging.next(), if !judging.is_empty() => {
                state.judged(verdict);
                false
            }
            batch = watches.next_batch() => {
                events_read = state.take_batch(batch, &mut watches, &mut debouncer);
                false
            }
            _ = sleep_until(wake.map_or(now, Instant::from_std)), if wake.is_some() => false,
            _ = resync.tick() => {
                state.resync(&mut watches);
                true
            }
        };
        let now = std::time::Instant::now();
        if debouncer.take_due(now) {
            state.observe();
        }
        if in_flight.is_none() {
            in_flight = state.attempt_due(now);
        }
        let waiting =
            debouncer.deadline().is_some() || state.delivery.next_attempt_at(now).is_some();
        // A resync that leaves nothing to do: a quiet moment to close the handles of targets
        // that exited and to give back code pages.
        if resynced && in_flight.is_none() && !waiting {
            if let app_reload::Action::Signal(signaller) = &state.config.action {
                signaller.forget_exited();
            }
            drop_code_pages(code_pages.as_ref());
        }
        let busy = in_flight.is_some() || !judging.is_empty() || waiting;
        state.metrics.reload_pending.set(i64::from(busy));
        state.metrics.events.inc_by(events_read);
    }
    info!("stopping");
    Ok(())
}

/// Gives back the mapped pages of code not running now (see [`trim`]).
fn drop_code_pages(code_pages: Option<&trim::CodePages>) {
    match code_pages.map(trim::CodePages::drop_clean) {
        Some(Ok(bytes)) => debug!(bytes, "dropped the mapped pages of the executable"),
        Some(Err(err)) => debug!(error = %crate::report::one_line(&err), "kept the mapped pages"),
        None => {}
    }
}

fn report_watch_errors(metrics: &Metrics, errors: Vec<WatchError>) {
    metrics.errors.inc_by(errors.len() as u64);
    warn_unset(errors);
}

impl State {
    /// Sets the watches, hashes the baseline, serves the metrics, and says what it watches.
    async fn start(config: Config) -> anyhow::Result<(State, WatchSet)> {
        let metrics = Metrics::default();
        let (watches, errors) = WatchSet::new(config.dirs.clone())?;
        report_watch_errors(&metrics, errors);
        let mut state = State {
            delivery: Delivery::new(Vec::new()),
            config,
            metrics,
            attempted: None,
            last_error: None,
            warned_unreadable: false,
            listed: Vec::new(),
        };
        let baseline = state.snapshot();
        for (dir, hash) in state.config.dirs.iter().zip(&baseline) {
            state
                .metrics
                .set_config(&dir.display().to_string(), None, &hash.to_string());
        }
        state.delivery = Delivery::new(baseline);
        let metrics_addr = match state.config.metrics_listen {
            Some(addr) => Some(watch_metrics::serve(addr, &state.metrics).await?),
            None => None,
        };
        let dirs: Vec<_> = state
            .config
            .dirs
            .iter()
            .map(|d| d.display().to_string())
            .collect();
        info!(
            dirs = %dirs.join(","),
            action = %state.config.action.describe(),
            debounce = ?state.config.debounce,
            resync = ?state.config.resync,
            metrics = %metrics_addr.map_or_else(|| "off".to_owned(), |addr| addr.to_string()),
            "watching"
        );
        Ok((state, watches))
    }

    /// Acts on a batch of inotify events (or a failed read of them); returns how many it held.
    fn take_batch(
        &mut self,
        batch: Result<(u64, Effect), WatchError>,
        watches: &mut WatchSet,
        debouncer: &mut Debouncer,
    ) -> u64 {
        let (count, effect) = batch.unwrap_or_else(|err| {
            self.metrics.errors.inc();
            warn!(error = %crate::report::one_line(&err), "reading events failed; re-checking");
            (0, Effect::ALL)
        });
        if effect.rewatch {
            report_watch_errors(&self.metrics, watches.rearm());
        }
        if effect.relist {
            self.listed.clear();
        }
        if effect.rehash {
            debouncer.on_event(std::time::Instant::now());
        }
        count
    }

    /// The periodic re-check: re-watches, then lists and hashes every directory again.
    fn resync(&mut self, watches: &mut WatchSet) {
        report_watch_errors(&self.metrics, watches.rearm());
        self.listed.clear();
        self.observe();
    }

    fn observe(&mut self) {
        let snapshot = self.snapshot();
        self.delivery.observe(snapshot);
    }

    fn attempt_due(&mut self, now: std::time::Instant) -> Option<Attempt> {
        let snapshot = self.delivery.start(now)?;
        self.attempted = Some(snapshot);
        let action = self.config.action.clone();
        let verify = self.config.verify.clone();
        Some(Box::pin(app_reload::attempt(action, verify)))
    }

    /// Hashes every watched path.
    fn snapshot(&mut self) -> Snapshot {
        let mut snapshot = Vec::with_capacity(self.config.dirs.len());
        self.listed.resize(self.config.dirs.len(), None);
        let paths = self.config.dirs.iter().zip(&self.config.private);
        for ((dir, private), listed) in paths.zip(&mut self.listed) {
            let hashed = hash_path_listed(dir, listed);
            if !hashed.unreadable.is_empty() {
                self.metrics.errors.inc_by(hashed.unreadable.len() as u64);
                if !self.warned_unreadable {
                    self.warned_unreadable = true;
                    warn!(
                        unreadable = %hashed.unreadable.join("; "),
                        "some watched files cannot be read by the watcher; their updates are \
                         detected by file identity instead of content"
                    );
                }
            }
            snapshot.push(if *private {
                hashed.hash.private(&self.config.private_key)
            } else {
                hashed.hash
            });
        }
        snapshot
    }

    /// Records the end of an attempt: state machine, metrics, one log line — or, for a delivered
    /// signal, the watch of its targets that decides the line ([`State::judged`]).
    fn finish(&mut self, report: Report) -> Option<Judging> {
        let attempted = self.attempted.take().unwrap_or_default();
        let previous = self.delivery.delivered().clone();
        let retry_in = self
            .delivery
            .finish(report.outcome, std::time::Instant::now());
        let (dirs, hashes) = self.changes(&previous, &attempted);
        let error = report.error.unwrap_or_default();
        if report.outcome != Outcome::Delivered {
            self.metrics.count_reload(report.result);
        }
        match report.outcome {
            Outcome::Delivered => {
                self.last_error = None;
                for ((dir, old), new) in self.config.dirs.iter().zip(&previous).zip(&attempted) {
                    if old != new {
                        let dir = dir.display().to_string();
                        let old = old.to_string();
                        self.metrics.set_config(&dir, Some(&old), &new.to_string());
                    }
                }
                let line = Line {
                    dirs,
                    hashes,
                    targets: report.target,
                    duration_ms: format!("{:.3}", report.duration.as_secs_f64() * 1000.0),
                };
                match &self.config.action {
                    app_reload::Action::Signal(signaller) if !report.told.is_empty() => {
                        let (signaller, grace) = (signaller.clone(), self.config.reload_grace);
                        return Some(Box::pin(async move {
                            let failed = app_reload::judge(signaller, report.told, grace).await;
                            (line, failed)
                        }));
                    }
                    _ => self.judged((line, None)),
                }
            }
            Outcome::GiveUp => {
                self.last_error = None;
                error!(dir = %dirs, hash = %hashes, result = report.result,
                       "{error}; not retried until the content changes again");
            }
            Outcome::Retry => {
                let retry_in = retry_in.unwrap_or_default();
                if self.last_error.as_deref() != Some(error.as_str()) {
                    warn!(dir = %dirs, hash = %hashes, result = report.result,
                          retry_in = ?retry_in, "reload failed: {error}");
                } else {
                    debug!(dir = %dirs, hash = %hashes, result = report.result,
                           retry_in = ?retry_in, "reload failed again: {error}");
                }
                self.last_error = Some(error);
            }
        }
        None
    }

    /// Logs a delivered reload: `reloaded`, or the one error line of a signalled target that
    /// died of it (`Some(error)`; counted in `reload_failures_total`, never a success).
    fn judged(&mut self, (line, failed): (Line, Option<String>)) {
        let Line {
            dirs,
            hashes,
            targets,
            duration_ms,
        } = &line;
        match &failed {
            None => {
                self.metrics.count_reload("success");
                let unix = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .unwrap_or_default();
                self.metrics.last_success.set(unix.as_secs_f64());
                info!(dir = %dirs, hash = %hashes, targets = %targets,
                      result = "success", duration_ms = %duration_ms, "reloaded");
            }
            Some(error) => {
                self.metrics.count_reload(app_reload::TARGET_EXITED);
                self.metrics.reload_failures.inc();
                error!(dir = %dirs, hash = %hashes, targets = %targets, result = app_reload::TARGET_EXITED,
                       "reload failed: {error}; not retried until the content changes again");
            }
        }
    }

    /// The directories that differ between two snapshots, and their new short hashes.
    fn changes(&self, before: &Snapshot, after: &Snapshot) -> (String, String) {
        let pairs = self.config.dirs.iter().zip(before.iter().zip(after));
        let changed = pairs.filter(|(_, (old, new))| old != new);
        let (dirs, hashes): (Vec<_>, Vec<_>) = changed
            .map(|(dir, (_, new))| (dir.display().to_string(), new.short()))
            .unzip();
        (dirs.join(","), hashes.join(","))
    }
}
