//! The controller's loop: one task owns the view and ties the owners together, reading top to
//! bottom. What the watches report goes into the view and the store the webhook reads
//! ([`Listings`] says where each list stands and when a relist leaves something behind); what
//! a consumer lacks is fetched ([`FetchBook`]); what changed is scheduled ([`Schedule`]); and,
//! while this replica holds the Lease, what falls due is decided ([`reconcile`]) and handed to
//! the writer ([`WriteBook`], in waves for Pods).

use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use super::cluster_watches::{Item, Source, Stream, Watched, target_name};
use super::config_store::{Changes, ConfigKey, Fetched, StoreWriter};
use super::config_watches::{ConfigWatches, Scope};
use super::controller_metrics::{ControllerMetrics, PendingShare};
use super::fetch::{FetchDone, Fetcher};
use super::fetch_book::FetchBook;
use super::intern::Interner;
use super::listings::Listings;
use super::reconcile::{self, Verdict};
use super::schedule::{Due, Schedule};
use super::view::View;
use super::waves;
use super::write_book::{WriteBook, stopped_note};
use super::write_target::{Target, TargetKind};
use super::writer::{Outcome, Writer};
use crate::hash::{ConfigKind, Consumed, SecretKey};

/// After a conflict, the target is checked again this late if no watch event came first.
const CONFLICT_RECHECK: Duration = Duration::from_secs(2);

/// The channels the loop listens on.
pub struct Inputs {
    /// From the watches and discovery.
    pub watched: mpsc::Receiver<Watched>,
    /// From the fetcher.
    pub fetched: mpsc::UnboundedReceiver<FetchDone>,
    /// From the writer.
    pub outcomes: mpsc::UnboundedReceiver<Outcome>,
    /// Whether this replica holds the Lease.
    pub leader: watch::Receiver<bool>,
}

/// What the loop acts through.
pub struct Outputs {
    /// GETs digests (of objects no watch knows).
    pub fetcher: Fetcher,
    /// Starts and stops the per-namespace ConfigMap/Secret watches.
    pub config_watches: ConfigWatches,
    /// PATCHes and Events.
    pub writer: Writer,
    /// Set once every watch has listed.
    pub synced: watch::Sender<bool>,
    /// Counters and gauges.
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
    /// A loop with an empty view for a webhook running in `own_namespace` (never acted on).
    pub fn new(
        own_namespace: &str,
        store: StoreWriter,
        secret_key: Option<SecretKey>,
        rollout_delay: Duration,
        out: Outputs,
    ) -> Self {
        Self {
            view: View::new(own_namespace),
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

    /// Runs until every input is closed.
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

    fn on_watched(&mut self, watched: Watched) {
        match watched {
            Watched::Served(served) => {
                self.listings.serve(served);
                self.check_synced();
            }
            Watched::Init(source) => self.list_starts(source),
            Watched::Apply(item) => {
                let item = self.shared(item);
                self.count_config_event(&item);
                self.listings.saw(&item.source(), || item.listed_name());
                self.apply(item);
            }
            Watched::Delete(item) => {
                let item = self.shared(item);
                self.count_config_event(&item);
                self.gone(match item {
                    Item::Namespace { name, .. } => Known::Namespace(name),
                    Item::Config { key, .. } => Known::Config(key),
                    Item::Target { target, .. } => Known::Target(target),
                });
            }
            Watched::InitDone(source) => self.list_done(source),
            Watched::Refused(scope) => self.refused(scope),
        }
    }

    /// A (re)list starts; a namespace's config is not answered from the view until it is done.
    fn list_starts(&mut self, source: Source) {
        let Some(source) = self.shared_source(source) else {
            return;
        };
        if let Source::Config(scope) = &source {
            self.store
                .write(|store| store.set_listing(&scope.namespace, scope.kind, true));
        }
        self.listings.init(source);
    }

    /// A (re)list is complete: whatever was known there and not listed again is gone (the one
    /// relist clean-up, for every watch).
    fn list_done(&mut self, source: Source) {
        let Some(source) = self.shared_source(source) else {
            return;
        };
        if let Some(listed) = self.listings.done(source.clone()) {
            let known = self.known_in(&source);
            for (_, gone) in known.into_iter().filter(|(name, _)| !listed.contains(name)) {
                self.gone(gone);
            }
        }
        match source {
            Source::Config(scope) => {
                // Only now is what the view holds there as new as the cluster; its consumers
                // are checked (only what no watch knows is fetched by GET).
                self.store
                    .write(|store| store.set_listing(&scope.namespace, scope.kind, false));
                self.check_synced();
                self.track_where(|t| t.namespace == scope.namespace);
            }
            Source::Cluster(_) => {
                self.start_config_watches();
                self.check_synced();
            }
        }
    }

    /// What the view knows of `source`, by the names its list gives.
    fn known_in(&self, source: &Source) -> Vec<(String, Known)> {
        match source {
            Source::Cluster(Stream::Namespaces) => self
                .view
                .namespaces()
                .map(|name| (name.clone(), Known::Namespace(name.clone())))
                .collect(),
            Source::Cluster(Stream::Targets(kind)) => self
                .view
                .targets()
                .filter(|t| t.kind == *kind)
                .map(|t| (target_name(t), Known::Target(t.clone())))
                .collect(),
            Source::Config(scope) => self.store.read(|store| {
                let keys = store.keys().filter(|k| scope.holds(k));
                keys.map(|k| (k.id.name.clone(), Known::Config(k.clone())))
                    .collect()
            }),
        }
    }

    fn refused(&mut self, scope: Scope) {
        if !self.view.is_opted_in(&scope.namespace) {
            return;
        }
        tracing::warn!(
            namespace = %scope.namespace,
            kind = %scope.kind,
            "failed to list {scope}: the API server refused (RBAC?); its consumers are not acted \
             on until it lists, retrying with backoff"
        );
        let namespace = self.names.intern(&scope.namespace);
        self.store
            .write(|store| store.set_listing(&namespace, scope.kind, false));
        self.listings.refuse(Scope {
            kind: scope.kind,
            namespace,
        });
        self.check_synced();
    }

    fn apply(&mut self, item: Item) {
        match item {
            Item::Namespace { name, labelled } => self.set_namespace(&name, labelled),
            Item::Config { key, meta, digests } => {
                // Late news from a watch stopped when its namespace opted out.
                if !self.view.is_opted_in(&key.namespace) {
                    return;
                }
                let (ignore, resource_version) = (meta.ignore, meta.resource_version.clone());
                if !self.store.write(|store| store.set_meta(key.clone(), meta)) {
                    return;
                }
                match digests {
                    // Only what something consumes keeps its digests (the consumers are known:
                    // config is watched once workloads and Pods have listed); a consumer that
                    // comes later GETs them.
                    Some(_) if !self.view.wants(&key) => {}
                    Some(digests) => {
                        let fetched = Fetched {
                            resource_version: Some(resource_version),
                            object: Some(digests),
                            sent: self.view.tick(),
                        };
                        self.record(key, fetched, ignore);
                    }
                    // Metadata only (a Secret without a hash key: never hashed).
                    None if self.listings.synced() && self.view.wants(&key) => {
                        let now = self.view.tick();
                        self.fetch(key, now);
                    }
                    None => {}
                }
            }
            Item::Target {
                target,
                reduced: Ok(consumer),
                budget,
            } => {
                if target.kind.is_workload() {
                    self.view.set_budget(&target, budget);
                }
                if let Some(consumer) = &consumer {
                    self.writes.seen(&target, consumer.hash.as_ref());
                }
                let present = consumer.is_some();
                if self.view.set_consumer(&target, consumer) && present {
                    self.track(&target);
                }
                if !present {
                    self.forget(&target);
                }
            }
            Item::Target {
                target,
                reduced: Err(err),
                ..
            } => {
                tracing::warn!(object = %target, error = %err, "ignoring an object the controller cannot read");
                self.target_gone(&target);
            }
        }
    }

    /// An object was deleted, or a relist did not find it again.
    fn gone(&mut self, known: Known) {
        match known {
            Known::Namespace(name) => self.set_namespace(&name, false),
            Known::Config(key) => self.config_gone(key),
            Known::Target(target) => {
                self.view.set_budget(&target, None);
                self.target_gone(&target);
            }
        }
    }

    /// A ConfigMap/Secret was deleted: for its consumers, it is now absent (a change).
    fn config_gone(&mut self, key: ConfigKey) {
        let meta = self.store.write(|store| store.remove_meta(&key));
        if !self.view.wants(&key) {
            self.store.write(|store| store.remove(&key));
        } else {
            let gone = Fetched {
                resource_version: None,
                object: None,
                sent: self.view.tick(),
            };
            let ignore = meta.is_some_and(|m| m.ignore);
            self.record(key, gone, ignore);
        }
    }

    /// A workload or Pod was deleted (or can no longer be written to).
    fn target_gone(&mut self, target: &Target) {
        self.view.set_consumer(target, None);
        self.forget(target);
    }

    fn forget(&mut self, target: &Target) {
        self.schedule.remove(target);
        self.writes.forget(target);
    }

    /// Records a namespace's opt-in label: its config watches start or stop with it.
    fn set_namespace(&mut self, name: &str, labelled: bool) {
        if !self.view.set_namespace(name, labelled) {
            return;
        }
        let shared = self.names.intern(name);
        if self.view.is_opted_in(name) {
            if self.listings.configs_started() {
                self.out.config_watches.start(&shared);
            }
            self.track_where(|t| t.namespace == shared);
        } else {
            self.out.config_watches.stop(name);
            self.listings.forget_namespace(name);
            self.store.write(|store| store.forget_namespace(name));
        }
    }

    /// Once every workload and Pod watch has listed, starts the config watches of the
    /// namespaces that opted in so far (later ones start as they opt in).
    fn start_config_watches(&mut self) {
        if !self.listings.start_configs() {
            return;
        }
        for namespace in self.view.namespaces() {
            let namespace = self.names.intern(namespace);
            self.out.config_watches.start(&namespace);
        }
    }

    fn check_synced(&mut self) {
        if !self.listings.sync(self.view.namespaces()) {
            return;
        }
        self.store.write(|store| {
            store.retain_digests(|key| self.view.wants(key));
            store.set_synced(true);
        });
        let _ = self.out.synced.send(true);
        tracing::info!(
            targets = self.view.targets().count(),
            "the controller's view has synced"
        );
        self.track_where(|_| true);
        self.pending_share.set(self.pending_writes());
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
        if !self.listings.synced() || !self.view.is_opted_in(&target.namespace) {
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
        let source = Source::Config(Scope {
            kind: key.id.kind,
            namespace: key.namespace.clone(),
        });
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
        let changes = changes.filter(|_| !ignore && self.view.is_opted_in(&key.namespace));
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
                Some(changes) if self.reads_changed(&target, &key, changes) => {
                    self.schedule.change(&target, &key, changes, now);
                }
                _ if self.schedule.awaits_fetch(&target) => self.schedule.check(&target, now),
                _ => {}
            }
        }
    }

    fn reads_changed(&self, target: &Target, key: &ConfigKey, changes: &Changes) -> bool {
        let Some(tracked) = self.view.consumer(target) else {
            return false;
        };
        let consumed = tracked.consumer.consumption.consumed().iter();
        consumed.filter(|c| c.id() == &key.id).any(|c| match c {
            Consumed::Key(_, k) => changes.touches(Some(k)),
            Consumed::Whole(_) => changes.touches(None),
        })
    }

    /// Decides every target due now (a follower only forgets them).
    fn decide_due(&mut self) {
        let now = Instant::now();
        while let Some((target, due)) = self.schedule.pop_due(now) {
            if self.leader {
                self.decide(target, due);
            }
        }
    }

    fn decide(&mut self, target: Target, due: Due) {
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
                let owner = (target.kind == TargetKind::Pod)
                    .then(|| self.view.consumer(&target)?.consumer.owner.clone())
                    .flatten();
                if let Some(write) = self.writes.decided(write, due.causes, owner) {
                    self.out.writer.submit(write);
                }
            }
        }
    }

    /// Moves the refreshes in waves on: submits the next wave where the last one settled Ready,
    /// and stops a workload's refresh where a wave's Pod went unready (an Event on the workload
    /// says so, and `status` finds the Pods left with a stale mounted hash).
    fn step_waves(&mut self) {
        if !self.leader {
            return;
        }
        let view = &self.view;
        let (submit, stopped) = self.writes.step(
            Instant::now(),
            |workload, left| match view.budget(workload) {
                Some(budget) => budget.wave_size(left),
                None => waves::default_wave_size(left),
            },
            |pod| view.consumer(pod).and_then(|t| t.consumer.ready),
        );
        for write in submit {
            self.out.writer.submit(write);
        }
        for stopped in stopped {
            let uid = view.budget(&stopped.workload).map(|b| b.uid.clone());
            let note = stopped_note(&stopped, uid.unwrap_or_default());
            let message = note.event.as_deref().unwrap_or_default();
            tracing::warn!(object = %stopped.workload, pod = %stopped.unready, left = stopped.left.len(), "{message}");
            self.out.writer.note(note);
        }
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
                let at = Instant::now() + CONFLICT_RECHECK;
                self.schedule.retry(&target, causes, at);
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

    /// Targets due or waiting for a fetch, and writes submitted (or queued in waves) whose
    /// outcome is not known yet.
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

    fn count_config_event(&mut self, item: &Item) {
        if matches!(item, Item::Config { .. }) {
            self.config_events += 1;
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

    /// The item with its namespace's shared name.
    fn shared(&mut self, mut item: Item) -> Item {
        match &mut item {
            Item::Config { key, .. } => key.namespace = self.names.intern(&key.namespace),
            Item::Target { target, .. } => target.namespace = self.names.intern(&target.namespace),
            Item::Namespace { .. } => {}
        }
        item
    }

    /// The source with its namespace's shared name; `None` for the config of a namespace that
    /// is not opted in (late news from a stopped watch).
    fn shared_source(&mut self, source: Source) -> Option<Source> {
        let Source::Config(scope) = source else {
            return Some(source);
        };
        if !self.view.is_opted_in(&scope.namespace) {
            return None;
        }
        let namespace = self.names.intern(&scope.namespace);
        Some(Source::Config(Scope {
            kind: scope.kind,
            namespace,
        }))
    }
}
