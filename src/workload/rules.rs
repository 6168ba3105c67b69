//! The admission rules on one analysed pod (template): which subPath mounts are denied, and
//! what counts as restart-only config (hashed, with a warning saying so).

use std::collections::BTreeSet;

use super::analysis::{PodAnalysis, SubPathMount};
use super::messages::quoted;
use crate::hash::{ConfigId, Consumed};

/// How a container reads config (restart-only config, or any read `status` lays out).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum How {
    /// `env[].valueFrom`.
    Env,
    /// `envFrom[]`.
    EnvFrom,
    /// A subPath mount in a long-running container (allowed, or not denied here).
    SubPath,
    /// A subPath mount in a regular init container (read once, at start).
    InitSubPath,
    /// A directory mount in a regular init container (read once, at start: copied or
    /// templated into the pod, as the copy-to-emptyDir pattern does).
    InitMount,
    /// A directory mount in a long-running container; as restart-only config, one that gets no
    /// hot reload (its server is not known to reload, or the Pod chose `on-change: restart`).
    Mount,
}

/// One piece of restart-only config a container reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Use {
    pub container: String,
    pub consumed: Consumed,
    pub optional: bool,
    pub how: How,
}

/// Whether a long-running subPath mount is denied, given where the request comes from.
#[derive(Debug, Clone)]
pub enum SubPathPolicy {
    /// `allow-subpath: "true"`, or a controller-created Pod: never deny.
    Allow,
    /// Workload CREATE, bare Pod CREATE: deny every one.
    DenyAll,
    /// Workload UPDATE: deny those `oldObject` did not have (container, volume, subPath).
    DenyNew(BTreeSet<(String, String, Option<String>)>),
}

/// The outcome of the rules.
#[derive(Debug, Default)]
pub struct RuleOutcome<'p> {
    /// subPath mounts that make the request denied.
    pub denied: Vec<&'p SubPathMount>,
    /// Restart-only config, to hash.
    pub uses: Vec<Use>,
}

/// Applies the subPath policy and collects restart-only config.
pub fn apply<'p>(analysis: &'p PodAnalysis<'_>, policy: &SubPathPolicy) -> RuleOutcome<'p> {
    let mut out = RuleOutcome::default();
    for mount in &analysis.subpath_mounts {
        let how = if mount.long_running {
            How::SubPath
        } else {
            How::InitSubPath
        };
        if mount.long_running && is_denied(mount, policy) {
            out.denied.push(mount);
            continue;
        }
        let Some(volume) = analysis.config_volumes.get(&mount.volume) else {
            continue;
        };
        for consumed in volume.consumed_by_subpath(mount.sub_path.as_deref()) {
            let optional = volume
                .sources
                .iter()
                .any(|s| &s.id == consumed.id() && s.optional);
            out.uses.push(Use {
                container: mount.container.clone(),
                consumed,
                optional,
                how,
            });
        }
    }
    out.uses.extend(analysis.env_refs.iter().cloned());
    out
}

fn is_denied(mount: &SubPathMount, policy: &SubPathPolicy) -> bool {
    match policy {
        SubPathPolicy::Allow => false,
        SubPathPolicy::DenyAll => true,
        SubPathPolicy::DenyNew(old) => !old.contains(&(
            mount.container.clone(),
            mount.volume.clone(),
            mount.sub_path.clone(),
        )),
    }
}

/// The long-running subPath mounts of an analysed pod, as compared across an UPDATE.
pub fn subpath_keys(analysis: &PodAnalysis<'_>) -> BTreeSet<(String, String, Option<String>)> {
    analysis
        .subpath_mounts
        .iter()
        .filter(|m| m.long_running)
        .map(|m| (m.container.clone(), m.volume.clone(), m.sub_path.clone()))
        .collect()
}

/// The denial message: names container, volume, ConfigMap/Secret, mount path, and the fix.
pub fn denial_message(
    analysis: &PodAnalysis<'_>,
    denied: &[&SubPathMount],
    on_template: bool,
) -> String {
    let mut parts = Vec::new();
    for mount in denied {
        let sources = analysis
            .config_volumes
            .get(&mount.volume)
            .map(|v| {
                v.sources
                    .iter()
                    .map(|s| describe(&s.id).to_string())
                    .collect::<Vec<_>>()
                    .join(" + ")
            })
            .unwrap_or_default();
        let sub = match &mount.sub_path {
            Some(p) => format!("subPath {}", quoted(p)),
            None => "subPathExpr".to_owned(),
        };
        parts.push(format!(
            "container {} mounts {sources} (volume {}) at {} with {sub}",
            quoted(&mount.container),
            quoted(&mount.volume),
            quoted(&mount.mount_path),
        ));
    }
    let target = if on_template {
        "the pod template"
    } else {
        "the pod"
    };
    format!(
        "reload-injector: {}. subPath mounts of a ConfigMap/Secret never receive updates. Fix: mount the volume as a \
         directory (drop subPath; use items to pick keys), or annotate {target} with \
         reload-injector.io/allow-subpath: \"true\" to accept restarts on change instead.",
        parts.join("; ")
    )
}

/// `ConfigMap "name"`, written where it is displayed.
pub fn describe(id: &ConfigId) -> Described<'_> {
    Described(id)
}

/// A ConfigMap or Secret as [`describe`] shows it.
#[derive(Debug, Clone, Copy)]
pub struct Described<'a>(&'a ConfigId);

impl std::fmt::Display for Described<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.0.kind, quoted(&self.0.name))
    }
}
