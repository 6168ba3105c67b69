//! The controller's loop: one task owns the view, applies what the watches and fetches report,
//! and — while this replica holds the Lease — decides writes when they fall due. Pod refreshes
//! are due at once; workload rollouts `--rollout-delay` after the change, so changes close
//! together become one patch.

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap, HashMap, HashSet};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use super::fetch::{FetchDone, Fetcher};
use super::intern::Interner;
use super::metrics::{ControllerMetrics, PendingShare};
use super::reconcile::{self, Causes, Verdict};
use super::scoped::{Scope, ScopedWatches};
use super::store::{Changes, ConfigKey, ConfigStore, Fetched};
use super::target::{Target, TargetKind};
use super::view::View;
use super::watches::{Item, Stream, Watched};
use super::waves::{self, Waves};
use super::writer::{Outcome, Writer};
use crate::backoff::Backoff;
use crate::hash::{ConfigKind, Consumed, SecretKey};
use crate::inject::quoted;

/// Capacity a work map keeps however empty it is.
const SPARE: usize = 64;

/// Shrinks each work map (or set, or queue) that is less than a quarter full, down to its
/// length (those within [`SPARE`] keep their room).
macro_rules! shrink {
    ($($work:expr),*) => {$(
        if $work.len() * 4 < $work.capacity() && $work.capacity() > SPARE {
            $work.shrink_to_fit();
        }
    )*};
}

/// A workload's changes are merged for at most this many `--rollout-delay`s.
const MAX_DELAYS: u32 = 10;
/// After a conflict, the target is checked again this late if no watch event came first.
const CONFLICT_RECHECK: Duration = Duration::from_secs(2);
/// First and longest wait before a failed GET is tried again.
const FETCH_RETRY: Backoff = Backoff::new(Duration::from_millis(200), Duration::from_secs(30));

/// A target due for a decision.
#[derive(Debug)]
struct Pending {
    /// When it falls due (`None`: waiting for a fetch).
    due: Option<Instant>,
    /// When the first change merged into it was seen.
    first: Instant,
    /// The changes merged into it.
    causes: Causes,
}

impl Pending {
    /// Not due yet, first seen `now`.
    fn new(now: Instant) -> Self {
        Pending {
            due: None,
            first: now,
            causes: Causes::new(),
        }
    }
}

/// Where one namespace's ConfigMap or Secret watch stands.
#[derive(Debug)]
enum ScopeState {
    /// (Re)listing: the names listed so far.
    Listing(HashSet<String>),
    /// Listed: its objects are in the store, each with its digests.
    Listed,
    /// The API server refused the list (said once).
    Refused,
}

/// The loop's state.
pub struct Loop {
    view: View,
    /// One shared copy of each namespace name, for every record that holds one.
    names: Interner,
    store: Arc<RwLock<ConfigStore>>,
    fetcher: Fetcher,
    /// The ConfigMap/Secret watches of the opted-in namespaces.
    scoped: ScopedWatches,
    scopes: HashMap<Scope, ScopeState>,
    /// The scopes that have listed, or been refused, at least once (`/readyz` waits for them).
    settled: HashSet<Scope>,
    /// Every workload and Pod watch has listed once: the config watches start only then, so
    /// that each object's digests are kept only when something consumes it.
    targets_listed: bool,
    writer: Writer,
    secret_key: Option<SecretKey>,
    rollout_delay: Duration,
    metrics: ControllerMetrics,
    /// The loop's part of `pending_writes`.
    pending_share: PendingShare,
    /// ConfigMap/Secret watch events handled and not yet counted in the metrics.
    config_events: u64,
    leader: bool,
    synced: watch::Sender<bool>,
    /// The streams discovery started: the view has synced once each has listed.
    served: HashSet<Stream>,
    done: HashSet<Stream>,
    relisting: HashMap<Stream, HashSet<String>>,
    pending: HashMap<Target, Pending>,
    queue: BinaryHeap<Reverse<(Instant, Target)>>,
    inflight: HashMap<ConfigKey, u64>,
    again: HashSet<ConfigKey>,
    failures: HashMap<ConfigKey, u32>,
    last_written: HashMap<Target, String>,
    /// The changes behind each write under way, kept until its outcome is known.
    writing: HashMap<Target, Causes>,
    /// Pod refreshes going in waves, per owning workload.
    waves: Waves,
    /// When the waves must be looked at again.
    wave_wake: Option<Instant>,
}

/// The channels the loop listens on.
pub struct Inputs {
    /// From the watches.
    pub watched: mpsc::Receiver<Watched>,
    /// From the fetcher.
    pub fetched: mpsc::UnboundedReceiver<FetchDone>,
    /// From the writer.
    pub outcomes: mpsc::UnboundedReceiver<Outcome>,
    /// Whether this replica holds the Lease.
    pub leader: watch::Receiver<bool>,
}

/// What the loop is built from.
pub struct Parts {
    /// The webhook's own namespace (never acted on).
    pub own_namespace: String,
    /// Shared with the webhook.
    pub store: Arc<RwLock<ConfigStore>>,
    /// GETs digests (of objects no watch knows).
    pub fetcher: Fetcher,
    /// Starts and stops the per-namespace ConfigMap/Secret watches.
    pub scoped: ScopedWatches,
    /// PATCHes and Events.
    pub writer: Writer,
    /// The HMAC key for Secrets.
    pub secret_key: Option<SecretKey>,
    /// `--rollout-delay`.
    pub rollout_delay: Duration,
    /// Counters and gauges.
    pub metrics: ControllerMetrics,
    /// Set once every watch has listed.
    pub synced: watch::Sender<bool>,
}

impl Loop {
    /// A loop with an empty view.
    pub fn new(parts: Parts) -> Self {
        Self {
            view: View::new(&parts.own_namespace),
            names: Interner::default(),
            store: parts.store,
            fetcher: parts.fetcher,
            scoped: parts.scoped,
            scopes: HashMap::new(),
            settled: HashSet::new(),
            targets_listed: false,
            writer: parts.writer,
            secret_key: parts.secret_key,
            rollout_delay: parts.rollout_delay,
            pending_share: parts.metrics.pending_share(),
            metrics: parts.metrics,
            config_events: 0,
            leader: false,
            synced: parts.synced,
            served: HashSet::new(),
            done: HashSet::new(),
            relisting: HashMap::new(),
            pending: HashMap::new(),
            queue: BinaryHeap::new(),
            inflight: HashMap::new(),
            again: HashSet::new(),
            failures: HashMap::new(),
            last_written: HashMap::new(),
            writing: HashMap::new(),
            waves: Waves::default(),
            wave_wake: None,
        }
    }

    /// Runs until every input is closed.
    pub async fn run(mut self, mut inputs: Inputs) {
        let mut gauges = tokio::time::interval(Duration::from_secs(1));
        loop {
            let queued = self.queue.peek().map(|Reverse((due, _))| *due);
            let next_due = queued.into_iter().chain(self.wave_wake).min();
            // Without a due time the branch is disabled: its sleep is never polled.
            let sleep = tokio::time::sleep_until(next_due.unwrap_or_else(Instant::now));
            tokio::select! {
                Some(watched) = inputs.watched.recv() => self.on_watched(watched),
                Some(done) = inputs.fetched.recv() => self.on_fetched(done),
                Some(outcome) = inputs.outcomes.recv() => self.on_outcome(outcome),
                Ok(()) = inputs.leader.changed() => {
                    let leader = *inputs.leader.borrow_and_update();
                    self.on_leader(leader);
                }
                () = sleep, if next_due.is_some() => {}
                _ = gauges.tick() => self.update_gauges(),
                else => return,
            }
            self.run_due();
            self.step_waves();
            self.release_spare();
            self.publish_progress();
        }
    }

    /// Says how many writes are pending, then counts the config events handled: a scrape that
    /// sees an event counted (the counter is exported first) sees the writes it scheduled.
    fn publish_progress(&mut self) {
        self.pending_share.set(self.pending_writes());
        if self.config_events > 0 {
            self.metrics
                .config_events(std::mem::take(&mut self.config_events));
        }
    }

    /// Targets due or waiting for a fetch, and writes submitted (or queued in waves) whose
    /// outcome is not known yet.
    fn pending_writes(&self) -> usize {
        self.pending.len() + self.writing.len()
    }

    /// Gives back the room the work maps kept after a burst (the initial sync schedules every
    /// target and fetches every consumed object at once). A map is shrunk only once it is a
    /// quarter full, so a steady load does not make it grow and shrink over and over.
    fn release_spare(&mut self) {
        shrink!(
            self.pending,
            self.inflight,
            self.last_written,
            self.writing,
            self.failures,
            self.again,
            self.queue
        );
    }

    fn on_watched(&mut self, watched: Watched) {
        match watched {
            Watched::Served(served) => {
                self.done.retain(|stream| served.contains(stream));
                self.served = served;
                self.check_synced();
            }
            Watched::Init(stream) => {
                self.relisting.insert(stream, HashSet::new());
            }
            Watched::Apply(stream, item) => {
                if let Item::Config { key, .. } = &item {
                    self.config_events += 1;
                    let scope = scope_of(key);
                    if let Some(ScopeState::Listing(listed)) = self.scopes.get_mut(&scope) {
                        listed.insert(key.id.name.clone());
                    }
                } else if let Some(listed) = self.relisting.get_mut(&stream) {
                    listed.insert(item_name(&item));
                }
                let item = self.shared(item);
                self.apply(item);
            }
            Watched::Delete(_, item) => {
                if matches!(item, Item::Config { .. }) {
                    self.config_events += 1;
                }
                let item = self.shared(item);
                self.delete(item);
            }
            Watched::InitDone(stream) => self.sweep(stream),
            Watched::ScopeInit(scope) => {
                if self.view.is_opted_in(&scope.namespace) {
                    let scope = self.shared_scope(scope);
                    write(&self.store).set_listing(&scope.namespace, scope.kind, true);
                    self.scopes
                        .insert(scope, ScopeState::Listing(HashSet::new()));
                }
            }
            Watched::ScopeDone(scope) => self.scope_listed(scope),
            Watched::ScopeRefused(scope) => {
                if self.view.is_opted_in(&scope.namespace) {
                    tracing::warn!(
                        namespace = %scope.namespace,
                        kind = %scope.kind,
                        "failed to list {scope}: the API server refused (RBAC?); its consumers \
                         are not acted on until it lists, retrying with backoff"
                    );
                    let scope = self.shared_scope(scope);
                    write(&self.store).set_listing(&scope.namespace, scope.kind, false);
                    self.scopes.insert(scope.clone(), ScopeState::Refused);
                    self.settled.insert(scope);
                    self.check_synced();
                }
            }
        }
    }

    /// The scope with its namespace's shared name.
    fn shared_scope(&mut self, scope: Scope) -> Scope {
        Scope {
            kind: scope.kind,
            namespace: self.names.intern(&scope.namespace),
        }
    }

    /// A namespace's (re)list is complete: what it did not list is gone; its consumers are
    /// checked (only what no watch knows is fetched by GET).
    fn scope_listed(&mut self, scope: Scope) {
        if !self.view.is_opted_in(&scope.namespace) {
            return;
        }
        let scope = self.shared_scope(scope);
        let state = self.scopes.insert(scope.clone(), ScopeState::Listed);
        self.settled.insert(scope.clone());
        if let Some(ScopeState::Listing(listed)) = state {
            let gone: Vec<ConfigKey> = read(&self.store)
                .keys()
                .filter(|k| scope_of(k) == scope && !listed.contains(&k.id.name))
                .cloned()
                .collect();
            for key in gone {
                self.config_gone(key);
            }
        }
        // Only now is what the view holds there as new as the cluster.
        write(&self.store).set_listing(&scope.namespace, scope.kind, false);
        self.check_synced();
        self.track_where(|t| t.namespace == scope.namespace);
    }

    /// Records a namespace's opt-in label: its config watches start or stop with it.
    fn set_namespace(&mut self, name: &str, labelled: bool) {
        if !self.view.set_namespace(name, labelled) {
            return;
        }
        let shared = self.names.intern(name);
        if self.view.is_opted_in(name) {
            if self.targets_listed {
                self.scoped.start(&shared);
            }
            self.track_where(|t| t.namespace == shared);
        } else {
            self.scoped.stop(name);
            self.scopes.retain(|scope, _| *scope.namespace != *name);
            self.settled.retain(|scope| *scope.namespace != *name);
            write(&self.store).forget_namespace(name);
        }
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

    /// Whether the watch of `key`'s namespace has listed: until then a missing digest is on
    /// its way, not a reason to GET.
    fn listed(&self, key: &ConfigKey) -> bool {
        matches!(self.scopes.get(&scope_of(key)), Some(ScopeState::Listed))
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

    fn apply(&mut self, item: Item) {
        match item {
            Item::Namespace { name, labelled } => self.set_namespace(&name, labelled),
            Item::Config { key, meta, digests } => {
                // Late news from a watch stopped when its namespace opted out.
                if !self.view.is_opted_in(&key.namespace) {
                    return;
                }
                let (ignore, resource_version) = (meta.ignore, meta.resource_version.clone());
                let moved = write(&self.store).set_meta(key.clone(), meta);
                if !moved {
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
                    None if *self.synced.borrow() && self.view.wants(&key) => {
                        let now = self.view.tick();
                        self.fetch(key, now);
                    }
                    None => {}
                }
            }
            Item::Target {
                target,
                reduced,
                budget,
            } => match reduced {
                Ok(consumer) => {
                    if target.kind.is_workload() {
                        self.view.set_budget(&target, budget);
                    }
                    if let Some(consumer) = &consumer
                        && self.last_written.get(&target) == consumer.hash.as_ref()
                    {
                        self.last_written.remove(&target);
                    }
                    let present = consumer.is_some();
                    if self.view.set_consumer(&target, consumer) && present {
                        self.track(&target);
                    }
                    if !present {
                        self.forget(&target);
                    }
                }
                Err(err) => {
                    tracing::warn!(object = %target, error = %err, "ignoring an object the controller cannot read");
                    self.target_gone(&target);
                }
            },
        }
    }

    fn delete(&mut self, item: Item) {
        match item {
            Item::Namespace { name, .. } => self.set_namespace(&name, false),
            Item::Config { key, .. } => self.config_gone(key),
            Item::Target { target, .. } => {
                self.view.set_budget(&target, None);
                self.target_gone(&target);
            }
        }
    }

    /// A ConfigMap/Secret was deleted: for its consumers, it is now absent (a change).
    fn config_gone(&mut self, key: ConfigKey) {
        let meta = write(&self.store).remove_meta(&key);
        if !self.view.wants(&key) {
            write(&self.store).remove(&key);
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

    /// After a (re)list: whatever was known of the stream and not listed again is gone.
    fn sweep(&mut self, stream: Stream) {
        let listed = self.relisting.remove(&stream).unwrap_or_default();
        match stream {
            Stream::Namespaces => {
                let gone: Vec<String> = self
                    .view
                    .namespaces()
                    .filter(|n| !listed.contains(*n))
                    .cloned()
                    .collect();
                for name in gone {
                    self.set_namespace(&name, false);
                }
            }
            // Listed per namespace: see `scope_listed`.
            Stream::Config(_) => {}
            Stream::Targets(kind) => {
                let gone: Vec<Target> = self
                    .view
                    .targets()
                    .filter(|t| t.kind == kind && !listed.contains(&target_name(t)))
                    .cloned()
                    .collect();
                for target in gone {
                    self.target_gone(&target);
                }
            }
        }
        self.done.insert(stream);
        self.start_config_watches();
        self.check_synced();
    }

    /// Once every workload and Pod watch has listed, starts the config watches of the
    /// namespaces that opted in so far (later ones start as they opt in).
    fn start_config_watches(&mut self) {
        let all_listed = self
            .served
            .iter()
            .filter(|stream| matches!(stream, Stream::Targets(_)))
            .all(|stream| self.done.contains(stream));
        if self.targets_listed || self.served.is_empty() || !all_listed {
            return;
        }
        self.targets_listed = true;
        let namespaces: Vec<Arc<str>> = self
            .view
            .namespaces()
            .map(|n| self.names.intern(n))
            .collect();
        for namespace in namespaces {
            self.scoped.start(&namespace);
        }
    }

    /// The first time every served stream has listed, and the config of every opted-in
    /// namespace has listed (or been refused), the view has synced.
    fn check_synced(&mut self) {
        if !*self.synced.borrow()
            && !self.served.is_empty()
            && self.served.iter().all(|stream| self.done.contains(stream))
            && self.view.namespaces().all(|namespace| {
                [ConfigKind::ConfigMap, ConfigKind::Secret]
                    .into_iter()
                    .all(|kind| {
                        self.settled.contains(&Scope {
                            kind,
                            namespace: namespace.as_str().into(),
                        })
                    })
            })
        {
            self.on_synced();
        }
    }

    fn on_synced(&mut self) {
        {
            let mut store = write(&self.store);
            store.retain_digests(|key| self.view.wants(key));
            store.set_synced(true);
        }
        let _ = self.synced.send(true);
        tracing::info!(
            targets = self.view.targets().count(),
            "the controller's view has synced"
        );
        self.track_where(|_| true);
        self.pending_share.set(self.pending_writes());
    }

    /// A target's hash or consumption changed (or it became relevant): make sure its digests
    /// are coming, and check it.
    fn track(&mut self, target: &Target) {
        if !*self.synced.borrow() || !self.view.is_opted_in(&target.namespace) {
            return;
        }
        let keys = self.view.keys_of(target);
        let stale: Vec<ConfigKey> = {
            let store = read(&self.store);
            keys.into_iter()
                .filter(|k| self.needs_data(k) && store.fresh(k).is_none())
                .collect()
        };
        for key in stale {
            self.fetch(key, 0);
        }
        self.schedule(target, None);
    }

    fn needs_data(&self, key: &ConfigKey) -> bool {
        key.id.kind == ConfigKind::ConfigMap || self.secret_key.is_some()
    }

    fn forget(&mut self, target: &Target) {
        self.pending.remove(target);
        self.last_written.remove(target);
    }

    /// GETs `key`'s digests with a request sent after tick `after`: a GET under way that was
    /// sent later serves; one sent earlier is followed by another.
    /// Only objects of a namespace whose watch has listed are fetched: the others' digests are
    /// on their way.
    fn fetch(&mut self, key: ConfigKey, after: u64) {
        if !self.needs_data(&key) || !self.listed(&key) {
            return;
        }
        if let Some(&sent) = self.inflight.get(&key) {
            if sent <= after {
                self.again.insert(key);
            }
            return;
        }
        let sent = self.view.tick();
        self.inflight.insert(key.clone(), sent);
        self.fetcher.fetch(key, sent);
    }

    fn on_fetched(&mut self, done: FetchDone) {
        let key = done.key;
        match done.result {
            Err(reason) => {
                let failures = self.failures.entry(key.clone()).or_default();
                *failures += 1;
                let wait = FETCH_RETRY.delay(*failures);
                tracing::debug!(object = %key, reason, retry_in = ?wait, "failed to fetch config; retrying");
                let fetcher = self.fetcher.clone();
                let sent = self.view.tick();
                self.inflight.insert(key.clone(), sent);
                tokio::spawn(async move {
                    tokio::time::sleep(wait).await;
                    fetcher.fetch(key, sent);
                });
            }
            Ok(fetched) => {
                self.failures.remove(&key);
                self.inflight.remove(&key);
                if self.again.remove(&key) {
                    let now = self.view.tick();
                    self.fetch(key.clone(), now);
                }
                let (ignore, newer) = {
                    let store = read(&self.store);
                    let ignore = store.meta(&key).is_some_and(|m| m.ignore);
                    (ignore, store.sent(&key).is_some_and(|s| s > fetched.sent))
                };
                // A watch event that came after the GET was sent is at least as new.
                if !newer {
                    self.record(key, fetched, ignore);
                }
            }
        }
    }

    /// Stores fetched (or deleted) digests; a data change makes its consumers due.
    fn record(&mut self, key: ConfigKey, fetched: Fetched, ignore: bool) {
        let changes = write(&self.store).set_fetched(key.clone(), fetched);
        let consumers: Vec<Target> = self.view.consumers_of(&key).cloned().collect();
        // First digests, or a change that causes nothing by itself, make due only the
        // consumers waiting for these digests.
        let changes = changes.filter(|_| !ignore && self.view.is_opted_in(&key.namespace));
        if let Some(changes) = &changes {
            self.metrics.config_change(key.id.kind);
            tracing::info!(
                object = %key,
                keys = changes.keys.len(),
                consumers = consumers.len(),
                "config data changed"
            );
        }
        for target in consumers {
            match &changes {
                Some(changes) if self.reads_changed(&target, &key, changes) => {
                    self.schedule(&target, Some((&key, changes)));
                }
                _ if self.waiting(&target) => self.schedule(&target, None),
                _ => {}
            }
        }
    }

    /// Whether `target` waits for digests before it can be decided.
    fn waiting(&self, target: &Target) -> bool {
        self.pending.get(target).is_some_and(|p| p.due.is_none())
    }

    fn reads_changed(&self, target: &Target, key: &ConfigKey, changes: &Changes) -> bool {
        let Some(tracked) = self.view.consumer(target) else {
            return false;
        };
        tracked
            .consumer
            .consumption
            .consumed()
            .iter()
            .filter(|c| c.id() == &key.id)
            .any(|c| match c {
                Consumed::Key(_, k) => changes.touches(Some(k)),
                Consumed::Whole(_) => changes.touches(None),
            })
    }

    /// Makes `target` due: at once for Pods and checks, `--rollout-delay` after a change for
    /// workloads (merging changes that come close together).
    fn schedule(&mut self, target: &Target, cause: Option<(&ConfigKey, &Changes)>) {
        let now = Instant::now();
        let pending = self
            .pending
            .entry(target.clone())
            .or_insert(Pending::new(now));
        let due = match cause {
            Some((key, changes)) => {
                let keys = if changes.existence {
                    BTreeSet::new()
                } else {
                    changes.keys.clone()
                };
                pending.causes.entry(key.clone()).or_default().extend(keys);
                if target.kind == TargetKind::Pod {
                    now
                } else {
                    if pending.due.is_none() {
                        pending.first = now;
                    }
                    let latest = pending.first + self.rollout_delay * MAX_DELAYS;
                    (now + self.rollout_delay).min(latest)
                }
            }
            None => match pending.due {
                Some(due) if !pending.causes.is_empty() => due,
                _ => now,
            },
        };
        pending.due = Some(due);
        self.queue.push(Reverse((due, target.clone())));
    }

    fn run_due(&mut self) {
        let now = Instant::now();
        while let Some(Reverse((due, _))) = self.queue.peek() {
            if *due > now {
                break;
            }
            let Some(Reverse((due, target))) = self.queue.pop() else {
                break;
            };
            if self.pending.get(&target).and_then(|p| p.due) != Some(due) {
                continue;
            }
            if !self.leader {
                self.pending.remove(&target);
                continue;
            }
            self.decide(&target);
        }
    }

    fn decide(&mut self, target: &Target) {
        let causes = self
            .pending
            .get(target)
            .map(|p| p.causes.clone())
            .unwrap_or_default();
        let verdict = {
            let store = read(&self.store);
            reconcile::evaluate(
                &self.view,
                &store,
                target,
                &causes,
                self.secret_key.as_ref(),
            )
        };
        match verdict {
            Verdict::Nothing => {
                self.pending.remove(target);
            }
            Verdict::Fetch(keys) => {
                if let Some(pending) = self.pending.get_mut(target) {
                    pending.due = None;
                }
                let seen = self.view.consumer(target).map_or(0, |t| t.seen);
                for key in keys {
                    self.fetch(key, seen);
                }
            }
            Verdict::Write(write) => {
                let causes = self.pending.remove(target).map(|p| p.causes);
                if self.last_written.get(target) == Some(&write.desired) {
                    return;
                }
                self.writing
                    .insert(target.clone(), causes.unwrap_or_default());
                // A Pod of a workload is refreshed in that workload's waves.
                let owner = (target.kind == TargetKind::Pod)
                    .then(|| self.view.consumer(target)?.consumer.owner.clone())
                    .flatten();
                if let Some(owner) = owner {
                    if !self.waves.enqueue(owner, write) {
                        self.writing.remove(target);
                    }
                    return;
                }
                self.last_written
                    .insert(target.clone(), write.desired.clone());
                self.writer.submit(write);
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
        let step = self.waves.step(
            Instant::now(),
            |workload, left| match view.budget(workload) {
                Some(budget) => budget.wave_size(left),
                None => waves::default_wave_size(left),
            },
            |pod| view.consumer(pod).and_then(|t| t.consumer.ready),
        );
        self.wave_wake = step.wake;
        for write in step.submit {
            self.last_written
                .insert(write.target.clone(), write.desired.clone());
            self.writer.submit(write);
        }
        for stopped in step.stopped {
            let message = format!(
                "reload-injector: {}: pod {} went unready after its refresh; {} pods keep their \
                 current config until the config changes again",
                waves::REFRESH_STOPPED,
                quoted(&stopped.unready.name),
                stopped.left.len()
            );
            tracing::warn!(object = %stopped.workload, pod = %stopped.unready, left = stopped.left.len(), "{message}");
            // Their writes are dropped: no outcome will come for them.
            for pod in &stopped.left {
                self.writing.remove(pod);
            }
            let uid = self
                .view
                .budget(&stopped.workload)
                .map(|b| b.uid.clone())
                .unwrap_or_default();
            self.writer.note(super::target::Write::hash(
                stopped.workload,
                uid,
                None,
                String::new(),
                Some(message),
            ));
        }
    }

    fn on_outcome(&mut self, outcome: Outcome) {
        match outcome {
            Outcome::Written(target, value) => {
                self.writing.remove(&target);
                tracing::debug!(object = %target, value, "written");
            }
            Outcome::Conflict(target) => {
                // Checked again (with the changes behind the write) once the view has the
                // object's newer version, or after a while if no event brings one.
                self.last_written.remove(&target);
                let causes = self.writing.remove(&target).unwrap_or_default();
                let now = Instant::now();
                let due = now + CONFLICT_RECHECK;
                let pending = self
                    .pending
                    .entry(target.clone())
                    .or_insert(Pending::new(now));
                for (key, keys) in causes {
                    pending.causes.entry(key).or_default().extend(keys);
                }
                pending.due = Some(due);
                self.queue.push(Reverse((due, target)));
            }
            Outcome::Gone(target) => {
                self.writing.remove(&target);
                self.forget(&target);
            }
        }
    }

    fn on_leader(&mut self, leader: bool) {
        if leader == self.leader {
            return;
        }
        self.leader = leader;
        tracing::info!(leader, "leadership changed");
        self.pending.clear();
        self.queue.clear();
        self.last_written.clear();
        self.writing.clear();
        self.waves.clear();
        self.wave_wake = None;
        if leader {
            self.track_where(|_| true);
        }
        // The checks the new leader owes are pending before it says it leads.
        self.pending_share.set(self.pending_writes());
        self.metrics.set_leader(leader);
    }

    fn update_gauges(&mut self) {
        self.names.prune();
        let (config_maps, secrets) = read(&self.store).counts();
        self.metrics.watched("ConfigMap", config_maps);
        self.metrics.watched("Secret", secrets);
        self.metrics
            .watched("Namespace", self.view.namespaces().count());
        for kind in TargetKind::WORKLOADS.into_iter().chain([TargetKind::Pod]) {
            self.metrics.watched(kind.kind(), self.view.count(kind));
        }
    }
}

fn item_name(item: &Item) -> String {
    match item {
        Item::Namespace { name, .. } => name.clone(),
        Item::Config { key, .. } => format!("{}/{}", key.namespace, key.id.name),
        Item::Target { target, .. } => target_name(target),
    }
}

fn scope_of(key: &ConfigKey) -> Scope {
    Scope {
        kind: key.id.kind,
        namespace: key.namespace.clone(),
    }
}

fn target_name(target: &Target) -> String {
    format!("{}/{}", target.namespace, target.name)
}

fn read(store: &RwLock<ConfigStore>) -> std::sync::RwLockReadGuard<'_, ConfigStore> {
    store.read().unwrap_or_else(|p| p.into_inner())
}

fn write(store: &RwLock<ConfigStore>) -> std::sync::RwLockWriteGuard<'_, ConfigStore> {
    store.write().unwrap_or_else(|p| p.into_inner())
}
