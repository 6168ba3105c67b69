//! What the watches have seen (pure): where each watch stands in its (re)list, and from that
//! whether the view has synced. One relist path for every watch: [`Listings::done`] hands back
//! the names listed, so the loop forgets whatever else it knew there.

use std::collections::{HashMap, HashSet};

use super::cluster_watches::{Source, Stream};
use super::config_watches::Scope;
use crate::hash::ConfigKind;

#[derive(Debug)]
enum State {
    /// (Re)listing: the names listed so far.
    Listing(HashSet<String>),
    Listed,
    /// The API server refused the list (a namespace's config, RBAC).
    Refused,
}

/// The watches' progress.
#[derive(Debug, Default)]
pub struct Listings {
    served: HashSet<Stream>,
    states: HashMap<Source, State>,
    /// The sources that have listed, or been refused, at least once (`/readyz` waits for them).
    settled: HashSet<Source>,
    configs_started: bool,
    synced: bool,
}

impl Listings {
    pub fn serve(&mut self, served: HashSet<Stream>) {
        self.settled.retain(|source| match source {
            Source::Cluster(stream) => served.contains(stream),
            Source::Config(_) => true,
        });
        self.served = served;
    }

    pub fn init(&mut self, source: Source) {
        self.states.insert(source, State::Listing(HashSet::new()));
    }

    pub fn saw(&mut self, source: &Source, name: impl FnOnce() -> String) {
        if let Some(State::Listing(names)) = self.states.get_mut(source) {
            names.insert(name());
        }
    }

    /// The (re)list of `source` is complete: the names it listed (`None` if none was under way).
    pub fn done(&mut self, source: Source) -> Option<HashSet<String>> {
        self.settled.insert(source.clone());
        match self.states.insert(source, State::Listed) {
            Some(State::Listing(names)) => Some(names),
            _ => None,
        }
    }

    /// The API server refused to list `scope` (it counts as settled: the others go on).
    pub fn refuse(&mut self, scope: Scope) {
        let source = Source::Config(scope);
        self.settled.insert(source.clone());
        self.states.insert(source, State::Refused);
    }

    pub fn forget_namespace(&mut self, namespace: &str) {
        let other = |source: &Source| match source {
            Source::Config(scope) => *scope.namespace != *namespace,
            Source::Cluster(_) => true,
        };
        self.states.retain(|source, _| other(source));
        self.settled.retain(other);
    }

    /// Whether `source` has listed and is not listing again: until then, a missing digest is
    /// on its way, not a reason to GET.
    pub fn is_listed(&self, source: &Source) -> bool {
        matches!(self.states.get(source), Some(State::Listed))
    }

    /// `true` once, when every workload and Pod watch has listed: the config watches start
    /// then, so that only what something consumes keeps its digests.
    pub fn start_configs(&mut self) -> bool {
        let targets_listed = self
            .served
            .iter()
            .filter(|stream| matches!(stream, Stream::Targets(_)))
            .all(|stream| self.settled.contains(&Source::Cluster(*stream)));
        if self.configs_started || self.served.is_empty() || !targets_listed {
            return false;
        }
        self.configs_started = true;
        true
    }

    pub fn configs_started(&self) -> bool {
        self.configs_started
    }

    /// `true` once, the first time every served stream has listed and the config of every
    /// namespace in `opted_in` has listed (or been refused).
    pub fn sync<'a>(&mut self, mut opted_in: impl Iterator<Item = &'a String>) -> bool {
        let settled = |source| self.settled.contains(&source);
        let synced = !self.synced
            && !self.served.is_empty()
            && self.served.iter().all(|s| settled(Source::Cluster(*s)))
            && opted_in.all(|namespace| {
                [ConfigKind::ConfigMap, ConfigKind::Secret]
                    .into_iter()
                    .all(|kind| settled(Source::Config(Scope::new(kind, namespace))))
            });
        self.synced |= synced;
        synced
    }

    pub fn synced(&self) -> bool {
        self.synced
    }
}

#[cfg(test)]
mod tests;
