//! What a pod (template) reads from ConfigMaps/Secrets, as the two hashes count it: restart-only
//! (the `config-hash`) and mounted into the sidecar (the `mounted-config-hash`). The webhook and
//! the controller both call these, so they agree on every hash.

use std::collections::{BTreeMap, BTreeSet};

use super::pod::PodSpec;

use super::analysis::{ConfigVolume, PodAnalysis, analyse};
use super::in_place;
use super::rules::{self, SubPathPolicy, Use};
use super::selected;
use super::strategy;
use crate::hash::{self, ConfigData, ConfigId, Consumed, HashReport, SecretKey};

/// A set of consumed keys/objects and which objects are `optional` everywhere they are named.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Consumption {
    /// What is read: one key, or a whole object.
    pub consumed: BTreeSet<Consumed>,
    /// Objects whose every reference is `optional: true` (their absence is no problem).
    pub optional: BTreeSet<ConfigId>,
}

impl Consumption {
    /// Whether nothing is consumed.
    pub fn is_empty(&self) -> bool {
        self.consumed.is_empty()
    }

    /// The objects read.
    pub fn ids(&self) -> BTreeSet<&ConfigId> {
        self.consumed.iter().map(Consumed::id).collect()
    }

    /// The canonical hash of what is consumed, over `data`.
    pub fn hash(&self, data: &ConfigData, key: Option<&SecretKey>) -> HashReport {
        hash::config_hash(&self.consumed, &self.optional, data, key)
    }

    /// What `reads` (a key or object, and whether that read is optional) add up to: an object
    /// is optional when every read of it is.
    fn of_reads(reads: impl IntoIterator<Item = (Consumed, bool)>) -> Self {
        let mut out = Consumption::default();
        let mut all_optional = BTreeMap::new();
        for (consumed, optional) in reads {
            *all_optional.entry(consumed.id().clone()).or_insert(true) &= optional;
            out.consumed.insert(consumed);
        }
        let optional = all_optional
            .into_iter()
            .filter_map(|(id, o)| o.then_some(id));
        out.optional = optional.collect();
        out
    }
}

/// Restart-only consumption from the rules' uses (what the webhook stamps as `config-hash`).
pub fn of_uses(uses: &[Use]) -> Consumption {
    Consumption::of_reads(uses.iter().map(|u| (u.consumed.clone(), u.optional)))
}

/// Restart-only consumption of a stamped pod template, as the controller recomputes it: every
/// subPath mount counts (a stamped template was admitted), and the directory mounts whose
/// strategy is restart; `annotations` choose, and say what counts (see [`selected`]).
pub fn restart_only(spec: &PodSpec, annotations: &BTreeMap<String, String>) -> Consumption {
    let selection = crate::policy::selection_of(annotations);
    let analysis = selected::analysed(spec, &selection);
    let mut out = of_uses(&restart_uses(annotations, spec, &analysis));
    selected::add_unreferenced(&mut out, &selected::unreferenced(&selection, &analysis));
    out
}

/// Restart-only consumption as an earlier version counted it, to recognise the `config-hash` it
/// stamped (so that upgrading starts no rollout): as before the catalogue when that differs from
/// now, else as before the reload strategies (env, envFrom, subPath).
pub fn restart_only_earlier(spec: &PodSpec, annotations: &BTreeMap<String, String>) -> Consumption {
    let analysis = analyse(spec);
    let env_and_subpath = rules::apply(&analysis, &SubPathPolicy::Allow).uses;
    let mut before_catalogue = env_and_subpath.clone();
    let legacy = strategy::choose_before_catalogue(annotations, spec, &analysis);
    before_catalogue.extend(legacy.restart_uses(&analysis));
    let before_catalogue = of_uses(&before_catalogue);
    if before_catalogue != of_uses(&restart_uses(annotations, spec, &analysis)) {
        before_catalogue
    } else {
        of_uses(&env_and_subpath)
    }
}

/// The restart-only uses of an analysed pod whose subPath mounts are all allowed, without the
/// env reads recorded to restart in place.
pub fn restart_uses(
    annotations: &BTreeMap<String, String>,
    spec: &PodSpec,
    analysis: &PodAnalysis<'_>,
) -> Vec<Use> {
    let mut uses = rules::apply(analysis, &SubPathPolicy::Allow).uses;
    let (choice, _) = strategy::choose(annotations, spec, analysis);
    uses.extend(choice.restart_uses(analysis));
    in_place::without_recorded(annotations, uses)
}

/// What our sidecar watches in a pod (nothing without one): the config volumes mounted into it,
/// but for the ConfigMaps it mounts to restart in place (those are the env hash's).
pub fn mounted(spec: &PodSpec) -> Consumption {
    let Some(sidecar) = in_place::existing_sidecar(spec) else {
        return Consumption::default();
    };
    let volumes = sidecar
        .volume_mounts
        .iter()
        .flatten()
        .filter(|m| !m.mount_path.starts_with(in_place::ENV_ROOT))
        .map(|m| m.name.as_str());
    of_volumes(volumes, &analyse(spec).config_volumes)
}

/// The keys a set of directory-mounted config volumes shows: the `items` when a source picks
/// keys, the whole object otherwise.
pub fn of_volumes<'v>(
    names: impl IntoIterator<Item = &'v str>,
    config_volumes: &BTreeMap<String, ConfigVolume>,
) -> Consumption {
    let volumes = names.into_iter().filter_map(|n| config_volumes.get(n));
    let sources = volumes.flat_map(|v| &v.sources);
    Consumption::of_reads(sources.flat_map(|s| s.shown().into_iter().map(|c| (c, s.optional))))
}

#[cfg(test)]
mod tests;
