//! What a pod (template) reads from ConfigMaps/Secrets, what a change of each directory mount
//! does, and how its sidecar would reload the app: the webhook's own analysis laid out for
//! `status` (which must never keep a second copy of it).

use std::collections::{BTreeMap, BTreeSet};

use super::analysis::{PodAnalysis, analyse};
use super::consumption::{self, Consumption};
use super::in_place;
use super::messages::Warnings;
use super::pod::PodSpec;
use super::rules::{self, SubPathPolicy};
use super::selected;
use super::sidecar;
use super::strategy::{self, Choice, Strategy};
use crate::hash::Consumed;

pub use super::analysis::is_ours;
pub use super::rules::How;
pub use super::strategy::Told;

/// One thing a container reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Read {
    pub container: String,
    /// The key or object.
    pub consumed: Consumed,
    pub optional: bool,
    /// How it is read ([`How::Mount`]: any directory mount of a long-running container).
    pub via: How,
    /// The volume, for mounts.
    pub volume: Option<String>,
    /// What a change of a directory mount does, as [`strategy::choose`] decided it; `None` for
    /// env and subPath reads, which always count in the `config-hash`.
    pub strategy: Option<Strategy>,
}

/// What the sidecar of a pod made from this spec would watch, and how it reloads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Watcher {
    /// Watched volumes, sorted.
    pub volumes: Vec<String>,
    /// Signal (and process) or URL.
    pub mode: Told,
    /// What the watched volumes show (the `mounted-config-hash` is over this).
    pub consumption: Consumption,
}

/// Everything [`explain`] finds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Explained {
    /// One line per key/object read: env and subPath first, then directory mounts (init
    /// containers' first).
    pub reads: Vec<Read>,
    /// What the `config-hash` is over (as the controller recomputes it).
    pub restart_only: Consumption,
    /// The ConfigMap keys and objects read through env that restart the Pods in place (see
    /// [`super::in_place`]), as recorded on the pod (template).
    pub in_place: BTreeSet<Consumed>,
    /// The sidecar, or `None` when none would be injected.
    pub watcher: Option<Watcher>,
    /// The webhook's warnings about the sidecar (why none, or why a reload may fail), each
    /// starting with `reload-injector:`.
    pub sidecar_warnings: Vec<String>,
}

/// Lays out what `spec` (with its pod's `annotations`) reads and what the sidecar would do.
/// `native` says whether the watcher would be a native sidecar.
pub fn explain(annotations: &BTreeMap<String, String>, spec: &PodSpec, native: bool) -> Explained {
    let analysis = analyse(spec);
    let mut reads = Vec::new();
    let volume_of = |container: &str, consumed: &Consumed| {
        analysis
            .subpath_mounts
            .iter()
            .find(|m| {
                m.container == container
                    && analysis
                        .config_volumes
                        .get(&m.volume)
                        .is_some_and(|v| v.sources.iter().any(|s| &s.id == consumed.id()))
            })
            .map(|m| m.volume.clone())
    };
    let mut uses = rules::apply(&analysis, &SubPathPolicy::Allow).uses;
    for used in &uses {
        let volume = match used.how {
            How::Env | How::EnvFrom => None,
            How::SubPath | How::InitSubPath => volume_of(&used.container, &used.consumed),
            // Directory mounts are laid out below, whatever their strategy.
            How::Mount | How::InitMount => continue,
        };
        reads.push(Read {
            container: used.container.clone(),
            consumed: used.consumed.clone(),
            optional: used.optional,
            via: used.how,
            volume,
            strategy: None,
        });
    }
    // The sidecar watches only what counts (Reloader's annotations may leave some out); every
    // directory mount still gets its line.
    let counted = selected::analysed(spec, &crate::policy::selection_of(annotations));
    let (choice, bad) = strategy::choose(annotations, spec, &counted);
    reads.extend(directory_reads(&analysis, &choice));
    let mut warnings = Warnings::default();
    uses.extend(choice.restart_uses(&analysis));
    let in_place = in_place::recorded_reads(annotations, spec, &uses);
    if let Some(bad) = bad {
        warnings.push(format_args!("{bad}"));
    }
    strategy::warn(&choice, strategy::Consequence::Rolls, &mut warnings);
    let plan = sidecar::plan(annotations, spec, &counted, &choice, native, &mut warnings);
    let watcher = plan.map(|plan| {
        let consumption = consumption::of_volumes(
            plan.volumes.iter().map(String::as_str),
            &counted.config_volumes,
        );
        Watcher {
            volumes: plan.volumes,
            mode: plan.mode,
            consumption,
        }
    });
    Explained {
        reads,
        restart_only: consumption::restart_only(spec, annotations),
        in_place,
        watcher,
        sidecar_warnings: warnings.into_list(None),
    }
}

/// One line per key or object each directory mount shows (init containers' first), with the
/// strategy [`strategy::choose`] gave it.
fn directory_reads(analysis: &PodAnalysis<'_>, choice: &Choice) -> Vec<Read> {
    let mut reads = Vec::new();
    let inits = analysis.init_dir_mounts.iter().map(|m| (m, How::InitMount));
    for (mount, via) in inits.chain(analysis.dir_mounts.iter().map(|m| (m, How::Mount))) {
        let chosen = choice.containers.iter().find(|(container, _, volumes)| {
            *container == mount.container && volumes.contains(&mount.volume)
        });
        // The only directory mounts without a strategy are what a helper that already reloads
        // config watches itself.
        let strategy = chosen.map_or(Strategy::Reloaded(mount.container.clone()), |c| c.1.clone());
        let shown = consumption::of_volumes([mount.volume.as_str()], &analysis.config_volumes);
        for consumed in shown.consumed {
            let optional = shown.optional.contains(consumed.id());
            reads.push(Read {
                container: mount.container.clone(),
                consumed,
                optional,
                via,
                volume: Some(mount.volume.clone()),
                strategy: Some(strategy.clone()),
            });
        }
    }
    reads
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;
    use serde_json::json;

    use super::*;
    use crate::hash::ConfigId;

    fn spec(value: serde_json::Value) -> PodSpec {
        PodSpec::deserialize(value).unwrap()
    }

    #[test]
    fn env_subpath_and_directories_each_get_a_line() {
        let spec = spec(json!({
            "containers": [{"name": "app", "command": ["nginx"],
                "env": [{"name": "A", "valueFrom": {"configMapKeyRef": {"name": "env", "key": "a"}}}],
                "volumeMounts": [
                    {"name": "conf", "mountPath": "/etc/app"},
                    {"name": "one", "mountPath": "/etc/one.conf", "subPath": "one.conf"}]}],
            "volumes": [
                {"name": "conf", "configMap": {"name": "conf"}},
                {"name": "one", "configMap": {"name": "files", "optional": true}}]
        }));
        let got = explain(&BTreeMap::new(), &spec, true);
        let lines: Vec<(How, &Consumed, Option<&str>)> = got
            .reads
            .iter()
            .map(|r| (r.via, &r.consumed, r.volume.as_deref()))
            .collect();
        let key = |name: &str, key: &str| Consumed::Key(ConfigId::config_map(name), key.into());
        let whole = Consumed::Whole(ConfigId::config_map("conf"));
        assert_eq!(
            lines,
            [
                (How::SubPath, &key("files", "one.conf"), Some("one")),
                (How::Env, &key("env", "a"), None),
                (How::Mount, &whole, Some("conf")),
            ]
        );
        assert!(got.reads[0].optional);
        let watcher = got.watcher.unwrap();
        assert_eq!(watcher.volumes, ["conf"]);
        assert_eq!(
            watcher.mode,
            Told::Signal {
                signal: crate::workload::values::parse_signal("SIGHUP").unwrap(),
                process: Some("nginx".into())
            }
        );
        assert_eq!(got.restart_only.consumed.len(), 2);
    }

    #[test]
    fn no_sidecar_says_why() {
        let spec = spec(json!({
            "shareProcessNamespace": false,
            "containers": [{"name": "app", "image": "nginx",
                "volumeMounts": [{"name": "conf", "mountPath": "/c"}]}],
            "volumes": [{"name": "conf", "configMap": {"name": "conf"}}]
        }));
        let got = explain(&BTreeMap::new(), &spec, true);
        assert_eq!(got.watcher, None);
        assert!(
            got.sidecar_warnings[0].contains("shareProcessNamespace"),
            "{:?}",
            got.sidecar_warnings
        );
    }
}
