//! The controller's own half of the view (pure): which namespaces opted in, the objects it may
//! write to reduced to what they consume, and the index from each ConfigMap/Secret to its
//! consumers. An object that opts in itself in a namespace without the label has that
//! namespace's config watched too.

use std::collections::{BTreeSet, HashMap, HashSet};

use super::config_store::{Changes, ConfigKey};
use super::reduce::Consumer;
use super::restart_waves::PodNow;
use super::waves::{self, Budget};
use super::write_target::Target;
use crate::hash::{ConfigId, Consumed};
use crate::policy;

/// A consumer and when the view last saw its hash or consumption change.
#[derive(Debug, Clone)]
pub struct Tracked {
    pub consumer: Consumer,
    /// The view's tick when its hash or what it reads last changed.
    pub seen: u64,
}

/// Namespaces, consumers and the reverse index.
#[derive(Debug, Default)]
pub struct View {
    own_namespace: String,
    /// `--reloader-retired`: the objects Reloader's annotations select are acted on.
    reloader_retired: bool,
    opted_in: BTreeSet<String>,
    /// Namespaces without the label, with how many consumers there opt in themselves.
    held: HashMap<String, usize>,
    consumers: HashMap<Target, Tracked>,
    /// A `HashSet` rather than a `BTreeSet`, whose first node has room for 11 targets: most
    /// objects have one to a few consumers.
    by_config: HashMap<ConfigKey, HashSet<Target>>,
    /// Every watched workload's rolling-update budget (stamped or not: its Pods' refreshes go
    /// in waves by it).
    budgets: HashMap<Target, Budget>,
    tick: u64,
}

impl View {
    /// An empty view for a webhook running in `own_namespace` (never acted on).
    pub fn new(own_namespace: &str, reloader_retired: bool) -> Self {
        Self {
            own_namespace: own_namespace.to_owned(),
            reloader_retired,
            ..Self::default()
        }
    }

    /// Advances and returns the view's clock (it orders what was seen against what was fetched).
    pub fn tick(&mut self) -> u64 {
        self.tick += 1;
        self.tick
    }

    /// Records a namespace's opt-in label; returns whether that changed whether it is acted on.
    pub fn set_namespace(&mut self, name: &str, labelled: bool) -> bool {
        let acted_on = labelled && !policy::excluded(name, &self.own_namespace);
        if acted_on {
            self.opted_in.insert(name.to_owned())
        } else {
            self.opted_in.remove(name)
        }
    }

    pub fn is_opted_in(&self, namespace: &str) -> bool {
        self.opted_in.contains(namespace)
    }

    /// Whether the ConfigMaps and Secrets of `namespace` are watched and kept (the one decision
    /// of the config watches' scope).
    pub fn config_watched(&self, namespace: &str) -> bool {
        self.is_opted_in(namespace) || self.held.contains_key(namespace)
    }

    pub fn config_namespaces(&self) -> impl Iterator<Item = &String> {
        let held = self.held.keys().filter(|ns| !self.opted_in.contains(*ns));
        self.opted_in.iter().chain(held)
    }

    /// Whether the product acts on `target`: its namespace is labelled or it opts in itself,
    /// and Reloader's annotations do not leave it to Reloader.
    pub fn acts_on(&self, target: &Target) -> bool {
        let labelled = self.is_opted_in(&target.namespace);
        self.consumers.get(target).is_some_and(|t| {
            let opt_ins = t.consumer.opt_ins;
            opt_ins.acted_on(labelled, self.reloader_retired)
        })
    }

    /// Whether a change of `id` counts for `target`: not an object its Reloader `search` counts
    /// only while it carries `match` (`matched`: it does now).
    pub fn counts_change(&self, target: &Target, id: &ConfigId, matched: bool) -> bool {
        matched
            || self
                .consumers
                .get(target)
                .is_none_or(|t| !t.consumer.if_matched.contains(id))
    }

    /// Whether `consumer` in a namespace without the label is acted on.
    fn holds(&self, target: &Target, consumer: &Consumer) -> bool {
        !policy::excluded(&target.namespace, &self.own_namespace)
            && consumer.opt_ins.acted_on(false, self.reloader_retired)
    }

    /// Counts `target`'s namespace held (`by` +1 or -1).
    fn hold(&mut self, namespace: &str, by: isize) {
        let count = self.held.entry(namespace.to_owned()).or_default();
        *count = count.saturating_add_signed(by);
        if *count == 0 {
            self.held.remove(namespace);
        }
    }

    pub fn namespaces(&self) -> impl Iterator<Item = &String> {
        self.opted_in.iter()
    }

    /// Records a consumer (or its removal with `None`). Returns whether its hash or what it
    /// reads changed.
    pub fn set_consumer(&mut self, target: &Target, consumer: Option<Consumer>) -> bool {
        let held_before = self
            .consumers
            .get(target)
            .is_some_and(|t| self.holds(target, &t.consumer));
        let held_now = consumer.as_ref().is_some_and(|c| self.holds(target, c));
        if held_before != held_now {
            self.hold(&target.namespace, if held_now { 1 } else { -1 });
        }
        let old = match consumer {
            None => self.consumers.remove(target),
            Some(consumer) => {
                if let Some(tracked) = self.consumers.get_mut(target)
                    && tracked.consumer.hash == consumer.hash
                    && tracked.consumer.consumption == consumer.consumption
                    && tracked.consumer.opt_ins == consumer.opt_ins
                    && tracked.consumer.if_matched == consumer.if_matched
                {
                    let earlier = tracked.consumer.earlier.take();
                    tracked.consumer = Consumer {
                        earlier,
                        ..consumer
                    };
                    return false;
                }
                let seen = self.tick();
                for key in config_keys(target, &consumer) {
                    self.by_config
                        .entry(key)
                        .or_default()
                        .insert(target.clone());
                }
                self.consumers
                    .insert(target.clone(), Tracked { consumer, seen })
            }
        };
        if let Some(old) = &old {
            let still = self.keys_of(target);
            for key in config_keys(target, &old.consumer).difference(&still) {
                if let Some(set) = self.by_config.get_mut(key) {
                    set.remove(target);
                    if set.is_empty() {
                        self.by_config.remove(key);
                    }
                }
            }
        }
        true
    }

    pub fn set_budget(&mut self, workload: &Target, budget: Option<Budget>) {
        match budget {
            Some(budget) => drop(self.budgets.insert(workload.clone(), budget)),
            None => drop(self.budgets.remove(workload)),
        }
    }

    pub fn budget(&self, workload: &Target) -> Option<&Budget> {
        self.budgets.get(workload)
    }

    pub fn consumer(&self, target: &Target) -> Option<&Tracked> {
        self.consumers.get(target)
    }

    pub fn targets(&self) -> impl Iterator<Item = &Target> {
        self.consumers.keys()
    }

    pub fn consumers_of(&self, key: &ConfigKey) -> impl Iterator<Item = &Target> {
        self.by_config.get(key).into_iter().flatten()
    }

    /// Whether something in a namespace whose config is watched consumes `key` (so its digests
    /// are kept).
    pub fn wants(&self, key: &ConfigKey) -> bool {
        self.config_watched(&key.namespace) && self.by_config.contains_key(key)
    }

    pub fn keys_of(&self, target: &Target) -> BTreeSet<ConfigKey> {
        self.consumers
            .get(target)
            .map(|t| config_keys(target, &t.consumer))
            .unwrap_or_default()
    }

    /// Whether `changes` of `key` touch what `target` reads of it.
    pub fn reads_changed(&self, target: &Target, key: &ConfigKey, changes: &Changes) -> bool {
        let Some(tracked) = self.consumers.get(target) else {
            return false;
        };
        let consumed = tracked.consumer.consumption.consumed().iter();
        consumed.filter(|c| c.id() == &key.id).any(|c| match c {
            Consumed::Key(_, k) => changes.touches(Some(k)),
            Consumed::Whole(_) => changes.touches(None),
        })
    }

    pub fn wave_size(&self, workload: &Target, left: usize) -> usize {
        match self.budgets.get(workload) {
            Some(budget) => budget.wave_size(left),
            None => waves::default_wave_size(left),
        }
    }

    pub fn ready(&self, pod: &Target) -> Option<bool> {
        self.consumers.get(pod)?.consumer.ready
    }

    /// How a Pod that restarts in place stands now (`None`: no longer tracked).
    pub fn pod_now(&self, pod: &Target) -> Option<PodNow> {
        let consumer = &self.consumers.get(pod)?.consumer;
        Some(PodNow {
            ready: consumer.ready,
            restarts: consumer.restarts.unwrap_or_default(),
        })
    }

    /// Whether every Pod of `workload` the view tracks is Ready (or says nothing), but those
    /// named in `except`.
    pub fn others_ready(&self, workload: &Target, except: &[Target]) -> bool {
        let named = |t: &Target| {
            except
                .iter()
                .any(|e| e.namespace == t.namespace && e.name == t.name)
        };
        self.consumers.iter().all(|(target, tracked)| {
            tracked.consumer.owner.as_ref() != Some(workload)
                || tracked.consumer.ready != Some(false)
                || named(target)
        })
    }

    pub fn count(&self, kind: super::write_target::TargetKind) -> usize {
        self.consumers.keys().filter(|t| t.kind == kind).count()
    }
}

/// The objects a consumer in `target`'s namespace reads.
pub fn config_keys(target: &Target, consumer: &Consumer) -> BTreeSet<ConfigKey> {
    consumer
        .consumption
        .ids()
        .into_iter()
        .map(|id| ConfigKey {
            namespace: target.namespace.clone(),
            id: id.clone(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::test_fixtures;
    use crate::controller::write_target::TargetKind;
    use crate::hash::{ConfigId, Consumed};
    use crate::workload::consumption::Consumption;

    fn target(name: &str) -> Target {
        Target {
            kind: TargetKind::Deployment,
            namespace: "shop".into(),
            name: name.into(),
        }
    }

    fn consumer(hash: &str, reads: &[&str]) -> Consumer {
        let consumed = reads
            .iter()
            .map(|n| Consumed::Whole(ConfigId::config_map(*n)));
        let consumption = Consumption {
            consumed: consumed.collect(),
            optional: BTreeSet::new(),
        };
        test_fixtures::consumer("u", Some(hash), consumption)
    }

    fn key(name: &str) -> ConfigKey {
        ConfigKey {
            namespace: "shop".into(),
            id: ConfigId::config_map(name),
        }
    }

    #[test]
    fn the_index_follows_what_each_consumer_reads() {
        let mut view = View::new("reload-injector", true);
        assert!(view.set_namespace("shop", true));
        assert!(view.set_consumer(&target("a"), Some(consumer("h1", &["x", "y"]))));
        assert!(view.set_consumer(&target("b"), Some(consumer("h1", &["y"]))));
        assert_eq!(view.consumers_of(&key("y")).count(), 2);
        assert!(view.wants(&key("x")));
        let seen = view.consumer(&target("a")).unwrap().seen;
        assert!(
            !view.set_consumer(&target("a"), Some(consumer("h1", &["x", "y"]))),
            "a status update changes nothing the view keeps"
        );
        assert_eq!(view.consumer(&target("a")).unwrap().seen, seen);
        assert!(view.set_consumer(&target("a"), Some(consumer("h2", &["y"]))));
        assert!(!view.wants(&key("x")), "nothing reads x any more");
        assert!(view.consumer(&target("a")).unwrap().seen > seen);
        assert!(view.set_consumer(&target("b"), None));
        assert_eq!(
            view.consumers_of(&key("y")).collect::<Vec<_>>(),
            vec![&target("a")]
        );
    }

    #[test]
    fn only_labelled_namespaces_that_are_not_excluded_are_acted_on() {
        let mut view = View::new("reload-injector", true);
        assert!(!view.set_namespace("kube-system", true));
        assert!(!view.set_namespace("reload-injector", true));
        assert!(!view.set_namespace("other", false));
        assert!(view.set_namespace("shop", true));
        assert!(!view.set_namespace("shop", true));
        assert!(view.set_consumer(&target("a"), Some(consumer("h", &["x"]))));
        assert!(view.wants(&key("x")));
        assert!(view.set_namespace("shop", false));
        assert!(!view.wants(&key("x")), "opted out: its config is not kept");
    }

    #[test]
    fn a_consumer_that_opts_in_itself_has_its_namespaces_config_watched() {
        use crate::policy::OptIns;
        let mut view = View::new("reload-injector", true);
        let plain = |name: &str| Target {
            namespace: "plain".into(),
            ..target(name)
        };
        let key = ConfigKey {
            namespace: "plain".into(),
            id: ConfigId::config_map("x"),
        };
        let ours = OptIns {
            ours: true,
            ..OptIns::default()
        };
        assert!(view.set_consumer(&plain("other"), Some(consumer("h", &["x"]))));
        assert!(!view.config_watched("plain") && !view.acts_on(&plain("other")));
        let opted = Consumer {
            opt_ins: ours,
            ..consumer("h", &["x"])
        };
        assert!(view.set_consumer(&plain("a"), Some(opted.clone())));
        assert!(view.config_watched("plain") && view.wants(&key));
        assert!(view.acts_on(&plain("a")) && !view.acts_on(&plain("other")));
        assert_eq!(view.config_namespaces().collect::<Vec<_>>(), ["plain"]);
        assert!(view.set_consumer(&plain("b"), Some(opted)));
        assert!(view.set_consumer(&plain("a"), None));
        assert!(view.config_watched("plain"), "b still holds it");
        assert!(view.set_consumer(&plain("b"), Some(consumer("h2", &["x"]))));
        assert!(!view.config_watched("plain"), "b no longer opts in");

        // Reloader's annotations, while Reloader may run: left to it, its namespace not watched.
        let mut beside = View::new("reload-injector", false);
        let reloader = Consumer {
            opt_ins: OptIns {
                reloader: Some(true),
                ..OptIns::default()
            },
            if_matched: vec![ConfigId::config_map("x")].into(),
            ..consumer("h", &["x"])
        };
        assert!(beside.set_consumer(&plain("r"), Some(reloader.clone())));
        assert!(!beside.config_watched("plain") && !beside.acts_on(&plain("r")));
        assert!(view.set_consumer(&plain("r"), Some(reloader)));
        assert!(view.acts_on(&plain("r")));
        let x = ConfigId::config_map("x");
        assert!(!view.counts_change(&plain("r"), &x, false), "x lacks match");
        assert!(view.counts_change(&plain("r"), &x, true));
    }
}
