//! A pod (template) read for the objects that count only (see [`Selection`]): an object
//! Reloader's annotations leave out is read as though the pod did not use it, so nothing
//! downstream (hash, sidecar, warnings, subPath denial) acts on it; an object a `reload` list
//! names that the pod does not use at all is added as read whole. Pure.

use std::collections::BTreeSet;

use super::analysis::{PodAnalysis, analyse};
use super::consumption::Consumption;
use super::pod::PodSpec;
use crate::hash::{ConfigId, Consumed};
use crate::policy::{Counts, Selection};

/// `spec` analysed, left with what `selection` counts.
pub fn analysed<'a>(spec: &'a PodSpec, selection: &Selection) -> PodAnalysis<'a> {
    let mut analysis = analyse(spec);
    if !selection.is_everything() {
        narrow(&mut analysis, selection);
    }
    analysis
}

/// Drops what `selection` never counts: config volumes with no source that counts (a volume with
/// one is kept whole), their mounts, and env references of objects that do not count.
fn narrow(analysis: &mut PodAnalysis<'_>, selection: &Selection) {
    let counts = |id: &ConfigId| selection.counts(id) != Counts::No;
    analysis
        .config_volumes
        .retain(|_, volume| volume.sources.iter().any(|s| counts(&s.id)));
    let volumes = &analysis.config_volumes;
    analysis
        .dir_mounts
        .retain(|m| volumes.contains_key(&m.volume));
    analysis
        .subpath_mounts
        .retain(|m| volumes.contains_key(&m.volume));
    analysis.env_refs.retain(|r| counts(r.consumed.id()));
}

/// The objects a `reload` list names that the pod does not read: they count whole, and may be
/// absent (an object nothing mounts or reads stops no pod from starting).
pub fn unreferenced(selection: &Selection, analysis: &PodAnalysis<'_>) -> Vec<ConfigId> {
    let named = selection.named();
    if named.is_empty() {
        return named;
    }
    let referenced: BTreeSet<&ConfigId> = analysis
        .config_volumes
        .values()
        .flat_map(|v| v.sources.iter().map(|s| &s.id))
        .chain(analysis.env_refs.iter().map(|r| r.consumed.id()))
        .collect();
    named
        .into_iter()
        .filter(|id| !referenced.contains(id))
        .collect()
}

/// Adds `objects` to a restart-only consumption, whole and optional.
pub fn add_unreferenced(consumption: &mut Consumption, objects: &[ConfigId]) {
    for id in objects {
        consumption.consumed.insert(Consumed::Whole(id.clone()));
        consumption.optional.insert(id.clone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Map;
    use crate::policy::reloader::{CONFIGMAP_RELOAD, SECRET_AUTO};

    fn spec() -> PodSpec {
        serde_json::from_value(serde_json::json!({
            "containers": [{
                "name": "app",
                "env": [
                    {"name": "A", "valueFrom": {"configMapKeyRef": {"name": "env", "key": "a"}}},
                    {"name": "B", "valueFrom": {"secretKeyRef": {"name": "db", "key": "b"}}}
                ],
                "volumeMounts": [
                    {"name": "conf", "mountPath": "/etc/app"},
                    {"name": "both", "mountPath": "/etc/both"}
                ]
            }],
            "volumes": [
                {"name": "conf", "configMap": {"name": "conf"}},
                {"name": "both", "projected": {"sources": [
                    {"configMap": {"name": "env"}}, {"secret": {"name": "tls"}}
                ]}}
            ]
        }))
        .expect("a pod spec")
    }

    fn selection(pairs: &[(&str, &str)]) -> Selection {
        let workload: Map = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Selection::read(&workload, &Map::new()).expect("Reloader annotations")
    }

    #[test]
    fn what_does_not_count_is_not_read() {
        let spec = spec();
        let named = selection(&[(CONFIGMAP_RELOAD, "env, extra")]);
        let analysis = analysed(&spec, &named);
        assert_eq!(
            analysis.config_volumes.keys().collect::<Vec<_>>(),
            ["both"],
            "conf does not count; both has a source that does"
        );
        assert_eq!(analysis.dir_mounts.len(), 1);
        let env: Vec<_> = analysis.env_refs.iter().map(|r| r.consumed.id()).collect();
        assert_eq!(env, [&ConfigId::config_map("env")]);
        assert_eq!(
            unreferenced(&named, &analysis),
            [ConfigId::config_map("extra")]
        );
        let secrets = analysed(&spec, &selection(&[(SECRET_AUTO, "true")]));
        let env: Vec<_> = secrets.env_refs.iter().map(|r| r.consumed.id()).collect();
        assert_eq!(env, [&ConfigId::secret("db")]);
        assert_eq!(secrets.config_volumes.keys().collect::<Vec<_>>(), ["both"]);
    }

    #[test]
    fn everything_leaves_the_analysis_as_it_is() {
        let spec = spec();
        let all = analysed(&spec, &Selection::everything());
        assert_eq!(all.config_volumes.len(), 2);
        assert_eq!(all.env_refs.len(), 2);
        assert!(unreferenced(&Selection::everything(), &all).is_empty());
        let mut consumption = Consumption::default();
        add_unreferenced(&mut consumption, &[ConfigId::secret("x")]);
        assert!(
            consumption
                .consumed
                .contains(&Consumed::Whole(ConfigId::secret("x")))
        );
        assert!(consumption.optional.contains(&ConfigId::secret("x")));
    }
}
