//! The controller's loop: one task owns the view and ties the owners together. What the watches
//! report goes into the view and the store; what a consumer lacks is fetched; what changed is
//! scheduled; and, while this replica leads, what falls due is decided and handed to the writer.

use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use super::cluster_watches::{Item, Source, Stream, Watched, target_name};
use super::config_store::{ConfigKey, Fetched, StoreWriter};
use super::config_watches::{ConfigWatches, Scope};
use super::controller_metrics::{ControllerMetrics, PendingShare};
use super::fetch::{FetchDone, Fetcher};
use super::fetch_book::FetchBook;
use super::intern::Interner;
use super::listings::Listings;
use super::reconcile::{self, Verdict};
use super::schedule::{Due, Schedule};
use super::view::View;
use super::waves::Stopped;
use super::write_book::{WriteBook, restarts_stopped_note, stopped_note};
use super::write_target::{Target, TargetKind, Write};
use super::writer::{Outcome, Writer};
use crate::hash::{ConfigKind, SecretKey};

#[cfg(test)]
mod tests;
mod watch_intake;

/// After a conflict, the target is checked again this late if no watch event came first.
const CONFLICT_RECHECK: Duration = Duration::from_secs(2);

/// The channels the loop listens on.
pub struct Inputs {
    /// From the watches and discovery.
    pub watched: mpsc::Receiver<Watched>,
    pub fetched: mpsc::UnboundedReceiver<FetchDone>,
    pub outcomes: mpsc::UnboundedReceiver<Outcome>,
    /// Whether this replica holds the Lease.
    pub leader: watch::Receiver<bool>,
}

/// What the loop acts through.
pub struct Outputs {
    pub fetcher: Fetcher,
    pub config_watches: ConfigWatches,
    pub writer: Writer,
    /// Set once every watch has listed.
    pub synced: watch::Sender<bool>,
    pub metrics: ControllerMetrics,
}

/// An object a relist may find gone.
enum Known {
    Namespace(String),
    Config(ConfigKey),
    Target(Target),
}

/// The loop's state: the view, the store's one writer, and the owners.
pub struct Loop {
    view: View,
    /// One shared copy of each namespace name, for every record that holds one.
    names: Interner,
    store: StoreWriter,
    listings: Listings,
    schedule: Schedule,
    fetches: FetchBook,
    writes: WriteBook,
    out: Outputs,
    /// The loop's part of `pending_writes`.
    pending_share: PendingShare,
    secret_key: Option<SecretKey>,
    /// ConfigMap/Secret watch events handled and not yet counted in the metrics.
    config_events: u64,
    leader: bool,
}

impl Loop {
    pub fn new(
        view: View,
        store: StoreWriter,
        secret_key: Option<SecretKey>,
        rollout_delay: Duration,
        out: Outputs,
    ) -> Self {
        Self {
            view,
            names: Interner::default(),
            store,
            listings: Listings::default(),
            schedule: Schedule::new(rollout_delay),
            fetches: FetchBook::default(),
            writes: WriteBook::default(),
            pending_share: out.metrics.pending_share(),
            out,
            secret_key,
            config_events: 0,
            leader: false,
        }
    }

    pub async fn run(mut self, mut inputs: Inputs) {
        let mut gauges = tokio::time::interval(Duration::from_secs(1));
        loop {
            let wake = [
                self.schedule.next_due(),
                self.writes.wake(),
                self.fetches.next_retry(),
            ];
            let wake = wake.into_iter().flatten().min();
            // Without a wake time the branch is disabled: its sleep is never polled.
            let sleep = tokio::time::sleep_until(wake.unwrap_or_else(Instant::now));
            tokio::select! {
                Some(watched) = inputs.watched.recv() => self.on_watched(watched),
                Some(done) = inputs.fetched.recv() => self.on_fetched(done),
                Some(outcome) = inputs.outcomes.recv() => self.on_outcome(outcome),
                Ok(()) = inputs.leader.changed() => {
                    let leader = *inputs.leader.borrow_and_update();
                    self.on_leader(leader);
                }
                () = sleep, if wake.is_some() => {}
                _ = gauges.tick() => self.update_gauges(),
                else => return,
            }
            self.send_retries();
            self.decide_due();
            self.step_waves();
            self.schedule.shrink();
            self.fetches.shrink();
            self.writes.shrink();
            self.publish_progress();
        }
    }

    fn forget(&mut self, target: &Target) {
        self.schedule.remove(target);
        self.writes.forget(target);
    }

    /// Tracks every target `tracked` picks.
    fn track_where(&mut self, tracked: impl Fn(&Target) -> bool) {
        let targets: Vec<Target> = self
            .view
            .targets()
            .filter(|t| tracked(t))
            .cloned()
            .collect();
        for target in targets {
            self.track(&target);
        }
    }

    /// A target's hash or consumption changed (or it became relevant): make sure its digests
    /// are coming, and check it.
    fn track(&mut self, target: &Target) {
        if !self.listings.synced() || !self.view.acts_on(target) {
            return;
        }
        let stale: Vec<ConfigKey> = self.store.read(|store| {
            let keys = self.view.keys_of(target).into_iter();
            keys.filter(|k| self.needs_data(k) && store.fresh(k).is_none())
                .collect()
        });
        for key in stale {
            self.fetch(key, 0);
        }
        self.schedule.check(target, Instant::now());
    }

    fn needs_data(&self, key: &ConfigKey) -> bool {
        key.id.kind == ConfigKind::ConfigMap || self.secret_key.is_some()
    }

    /// GETs `key`'s digests with a request sent after view tick `after`. Only objects of a
    /// namespace whose watch has listed are fetched: the others' digests are on their way.
    fn fetch(&mut self, key: ConfigKey, after: u64) {
        let source = Source::Config(Scope::of(&key));
        if self.needs_data(&key)
            && self.listings.is_listed(&source)
            && self.fetches.want(&key, after)
        {
            self.send_fetch(key);
        }
    }

    fn send_fetch(&mut self, key: ConfigKey) {
        let sent = self.view.tick();
        self.fetches.sent(&key, sent);
        self.out.fetcher.fetch(key, sent);
    }

    /// Sends the failed GETs whose backoff is over.
    fn send_retries(&mut self) {
        let now = Instant::now();
        while let Some(key) = self.fetches.pop_retry(now) {
            self.send_fetch(key);
        }
    }

    fn on_fetched(&mut self, done: FetchDone) {
        let key = done.key;
        match done.result {
            Err(reason) => {
                let wait = self.fetches.failed(&key, Instant::now());
                tracing::debug!(object = %key, reason, retry_in = ?wait, "failed to fetch config; retrying");
            }
            Ok(fetched) => {
                if self.fetches.answered(&key) {
                    let now = self.view.tick();
                    self.fetch(key.clone(), now);
                }
                let (ignore, newer) = self.store.read(|store| {
                    let ignore = store.meta(&key).is_some_and(|m| m.ignore);
                    (ignore, store.sent(&key).is_some_and(|s| s > fetched.sent))
                });
                // A watch event that came after the GET was sent is at least as new.
                if !newer {
                    self.record(key, fetched, ignore);
                }
            }
        }
    }

    /// Stores fetched (or deleted) digests; a data change makes its consumers due.
    fn record(&mut self, key: ConfigKey, fetched: Fetched, ignore: bool) {
        let changes = self
            .store
            .write(|store| store.set_fetched(key.clone(), fetched));
        let consumers: Vec<Target> = self.view.consumers_of(&key).cloned().collect();
        // First digests, or a change that causes nothing by itself, make due only the
        // consumers waiting for these digests.
        let changes = changes.filter(|_| !ignore && self.view.config_watched(&key.namespace));
        let matched = self
            .store
            .read(|store| store.meta(&key).is_some_and(|m| m.matched));
        if let Some(changes) = &changes {
            self.out.metrics.config_change(key.id.kind);
            tracing::info!(
                object = %key,
                keys = changes.keys.len(),
                consumers = consumers.len(),
                "config data changed"
            );
        }
        let now = Instant::now();
        for target in consumers {
            match &changes {
                Some(changes)
                    if self.view.reads_changed(&target, &key, changes)
                        && self.view.counts_change(&target, &key.id, matched) =>
                {
                    self.schedule.change(&target, &key, changes, now);
                }
                _ if self.schedule.awaits_fetch(&target) => self.schedule.check(&target, now),
                _ => {}
            }
        }
    }

    /// Decides every target due now (a follower only forgets them).
    fn decide_due(&mut self) {
        let now = Instant::now();
        while let Some((target, due)) = self.schedule.pop_due(now) {
            if self.leader {
                self.reconcile_target(target, due);
            }
        }
    }

    fn reconcile_target(&mut self, target: Target, due: Due) {
        let verdict = self.store.read(|store| {
            let key = self.secret_key.as_ref();
            reconcile::evaluate(&self.view, store, &target, &due.causes, key)
        });
        match verdict {
            Verdict::Nothing => {}
            Verdict::Fetch(keys) => {
                let seen = self.view.consumer(&target).map_or(0, |t| t.seen);
                self.schedule.await_fetch(target, due);
                for key in keys {
                    self.fetch(key, seen);
                }
            }
            Verdict::Write(write) => {
                // A Pod of a workload is refreshed in that workload's waves.
                let owner = target
                    .kind
                    .is_pod()
                    .then(|| self.view.consumer(&target)?.consumer.owner.clone())
                    .flatten();
                if let Some(write) = self.writes.decided(write, due.causes, owner) {
                    self.out.writer.submit(write);
                }
            }
        }
    }

    /// Moves the refreshes and restarts in place in waves on; a stopped run says so on its
    /// workload, and records on each Pod it left the value held back.
    fn step_waves(&mut self) {
        if !self.leader {
            return;
        }
        let view = &self.view;
        let (submit, stopped) = self.writes.step(
            Instant::now(),
            |w, left| view.wave_size(w, left),
            |pod| view.ready(pod),
        );
        self.submit(submit);
        for s in &stopped {
            self.stop(s, |uid| stopped_note(s, uid));
        }
        let (submit, stopped) = self.writes.step_restarts(
            Instant::now(),
            |w, left| view.wave_size(w, left),
            |pod| view.pod_now(pod),
            |w, except| view.others_ready(w, except),
        );
        self.submit(submit);
        for s in &stopped {
            self.stop(s, |uid| restarts_stopped_note(s, uid));
        }
    }

    fn submit(&self, writes: Vec<Write>) {
        for write in writes {
            self.out.writer.submit(write);
        }
    }

    /// Says on the workload of a stopped run (by `note`, given its uid) that it stopped, and
    /// records on each Pod it left the value held back (so that no later leader writes it).
    fn stop<W>(&self, stopped: &Stopped<W>, note: impl Fn(String) -> Write) {
        let Stopped {
            workload,
            pod,
            left,
            ..
        } = stopped;
        let uid = self.view.budget(workload).map(|b| b.uid.clone());
        let note = note(uid.unwrap_or_default());
        let message = note.event.as_deref().unwrap_or_default();
        tracing::warn!(object = %workload, pod = %pod, left = left.len(), "{message}");
        self.out.writer.note(note);
        self.submit(left.iter().filter_map(Write::held_back).collect());
    }

    fn on_outcome(&mut self, outcome: Outcome) {
        if let Outcome::Written(target, value) = &outcome {
            tracing::debug!(object = %target, value, "written");
        }
        let causes = self.writes.outcome(&outcome);
        match (outcome, causes) {
            // Checked again (with the changes behind the write) once the view has the
            // object's newer version, or after a while if no event brings one.
            (Outcome::Conflict(target), Some(causes)) => {
                let now = Instant::now();
                self.schedule.retry(&target, causes, now, CONFLICT_RECHECK);
            }
            (Outcome::Gone(target), _) => self.forget(&target),
            _ => {}
        }
    }

    fn on_leader(&mut self, leader: bool) {
        if leader == self.leader {
            return;
        }
        self.leader = leader;
        tracing::info!(leader, "leadership changed");
        self.schedule.clear();
        self.writes.clear();
        if leader {
            self.track_where(|_| true);
        }
        // The checks the new leader owes are pending before it says it leads.
        self.pending_share.set(self.pending_writes());
        self.out.metrics.set_leader(leader);
    }

    /// Targets due or awaiting a fetch, and writes whose outcome is not known yet.
    fn pending_writes(&self) -> usize {
        self.schedule.len() + self.writes.len()
    }

    /// Says how many writes are pending, then counts the config events handled: a scrape that
    /// sees an event counted (the counter is exported first) sees the writes it scheduled.
    fn publish_progress(&mut self) {
        self.pending_share.set(self.pending_writes());
        if self.config_events > 0 {
            let events = std::mem::take(&mut self.config_events);
            self.out.metrics.config_events(events);
        }
    }

    fn update_gauges(&mut self) {
        self.names.prune();
        let (config_maps, secrets) = self.store.read(|store| store.counts());
        let metrics = &self.out.metrics;
        metrics.watched("ConfigMap", config_maps);
        metrics.watched("Secret", secrets);
        metrics.watched("Namespace", self.view.namespaces().count());
        for kind in TargetKind::WORKLOADS.into_iter().chain([TargetKind::Pod]) {
            metrics.watched(kind.kind(), self.view.count(kind));
        }
    }
}
