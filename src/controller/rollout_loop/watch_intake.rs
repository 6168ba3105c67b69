//! The loop's intake: what the watches report, into the view and the store.

use super::*;
use crate::controller::reduce::Consumer;

impl Loop {
    pub(super) fn on_watched(&mut self, watched: Watched) {
        match watched {
            Watched::Served(served) => {
                self.listings.serve(served);
                self.check_synced();
            }
            Watched::Init(source) => self.list_starts(source),
            Watched::Apply(item) => {
                let item = self.take_in(item);
                self.listings.saw(&item.source(), || item.listed_name());
                self.apply(item);
            }
            Watched::Delete(item) => {
                let known = match self.take_in(item) {
                    Item::Namespace { name, .. } => Known::Namespace(name),
                    Item::Config { key, .. } => Known::Config(key),
                    Item::Target { target, .. } => Known::Target(target),
                };
                self.gone(known);
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
                let keys = store
                    .keys()
                    .filter(|k| k.id.kind == scope.kind && k.namespace == scope.namespace);
                keys.map(|k| (k.id.name.clone(), Known::Config(k.clone())))
                    .collect()
            }),
        }
    }

    fn refused(&mut self, scope: Scope) {
        let Some(Source::Config(scope)) = self.shared_source(Source::Config(scope)) else {
            return;
        };
        tracing::warn!(
            namespace = %scope.namespace,
            kind = %scope.kind,
            "failed to list {scope}: the API server refused (RBAC?); its consumers are not acted \
             on until it lists, retrying with backoff"
        );
        self.store
            .write(|store| store.set_listing(&scope.namespace, scope.kind, false));
        self.listings.refuse(scope);
        self.check_synced();
    }

    fn apply(&mut self, item: Item) {
        match item {
            Item::Namespace { name, labelled } => self.set_namespace(&name, labelled),
            Item::Config { key, meta, digests } => {
                // Late news from a watch stopped when its namespace opted out.
                if !self.view.config_watched(&key.namespace) {
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
                in_place,
            } => {
                if target.kind.is_workload() {
                    self.view.set_budget(&target, budget);
                }
                let watched = self.view.config_watched(&target.namespace);
                if target.kind == TargetKind::Pod {
                    self.set_target(&target.env_twin(), in_place.map(|c| *c));
                }
                self.set_target(&target, consumer);
                self.rescope(&target.namespace, watched);
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

    /// Records what a target consumes now (`None`: it must not be written to).
    fn set_target(&mut self, target: &Target, consumer: Option<Consumer>) {
        if let Some(consumer) = &consumer {
            self.writes.seen(target, consumer.hash.as_ref());
        }
        let present = consumer.is_some();
        if self.view.set_consumer(target, consumer) && present {
            self.track(target);
        }
        if !present {
            self.forget(target);
        }
    }

    /// A workload or Pod was deleted (or can no longer be written to); a Pod's env twin with it.
    fn target_gone(&mut self, target: &Target) {
        if target.kind == TargetKind::Pod {
            self.target_gone(&target.env_twin());
        }
        let watched = self.view.config_watched(&target.namespace);
        self.view.set_consumer(target, None);
        self.forget(target);
        self.rescope(&target.namespace, watched);
    }

    /// Records a namespace's opt-in label: which of its consumers are acted on changes with it,
    /// and its config watches may start or stop.
    fn set_namespace(&mut self, name: &str, labelled: bool) {
        let watched = self.view.config_watched(name);
        if !self.view.set_namespace(name, labelled) {
            return;
        }
        if !self.rescope(name, watched) && self.view.config_watched(name) {
            let shared = self.names.intern(name);
            self.track_where(|t| t.namespace == shared);
        }
    }

    /// Starts or stops the config watches of `name` if whether its config is watched changed
    /// from `was`; returns whether it did.
    fn rescope(&mut self, name: &str, was: bool) -> bool {
        let now = self.view.config_watched(name);
        if now == was {
            return false;
        }
        let shared = self.names.intern(name);
        if now {
            if self.listings.configs_started() {
                self.out.config_watches.start(&shared);
            }
            self.track_where(|t| t.namespace == shared);
        } else {
            self.out.config_watches.stop(name);
            self.listings.forget_namespace(name);
            self.store.write(|store| store.forget_namespace(name));
        }
        true
    }

    /// Once every workload and Pod watch has listed, starts the config watches so far.
    fn start_config_watches(&mut self) {
        if !self.listings.start_configs() {
            return;
        }
        let namespaces: Vec<String> = self.view.config_namespaces().cloned().collect();
        for namespace in namespaces {
            let namespace = self.names.intern(&namespace);
            self.out.config_watches.start(&namespace);
        }
    }

    fn check_synced(&mut self) {
        if !self.listings.sync(self.view.config_namespaces()) {
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

    /// The item with its namespace's shared name, its config events counted.
    fn take_in(&mut self, item: Item) -> Item {
        if matches!(item, Item::Config { .. }) {
            self.config_events += 1;
        }
        item.interned(&mut self.names)
    }

    /// The source with its namespace's shared name; `None` for the config of a namespace that
    /// is not opted in (late news from a stopped watch).
    fn shared_source(&mut self, source: Source) -> Option<Source> {
        let Source::Config(scope) = source else {
            return Some(source);
        };
        if !self.view.config_watched(&scope.namespace) {
            return None;
        }
        let namespace = self.names.intern(&scope.namespace);
        Some(Source::Config(Scope { namespace, ..scope }))
    }
}
