//! Plans the `config-reloader` sidecar: which volumes it watches, how it reloads the app
//! (signal or HTTP), which process it targets, which user it must run as to be allowed
//! to signal the app, and the empty volume that keeps the API token out of it. Pure: reads the
//! typed pod spec, writes warnings, returns a plan.

use std::collections::{BTreeMap, BTreeSet};

use super::pod::{Container, PodSpec, SecurityContext};
use serde_json::{Value, json};

use super::analysis::{ConfigVolume, PodAnalysis};
use super::messages::{Warnings, quoted, quoted_list};
use super::strategy::{Choice, Told};
use super::values;
use super::{NO_TOKEN_VOLUME, PROCESS, SIDECAR_NAME, TOKEN_MOUNT_PATH, WATCH};
use crate::hash::ConfigKind;

/// Where the watched volumes are mounted in the sidecar: a directory the image does not
/// have (under `/reload-injector`, the image's binary, a real runtime refuses the mount:
/// "not a directory").
pub const WATCH_ROOT: &str = "/etc/reload-injector/watch";
/// UID/GID of the sidecar when it does not need to match the app (the image's user).
pub const NONROOT_UID: i64 = 65532;
/// `sizeLimit` of [`NO_TOKEN_VOLUME`]. Nothing is ever written to it (its one mount is
/// read-only), so this only has to exceed what the kubelet measures for an empty directory
/// (nothing on tmpfs, one 4 KiB block on disk), or the kubelet would evict the Pod.
pub const NO_TOKEN_SIZE_LIMIT: &str = "64Ki";

/// The user the sidecar runs as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunAs {
    /// The app's own UID (and GID when known): signalling needs no capability.
    AppUser {
        uid: i64,
        /// `runAsGroup`, when every target has the same one.
        gid: Option<i64>,
    },
    /// Root with only CAP_KILL: the app's UID is unknown or differs between targets.
    RootWithKill,
    /// The image's unprivileged user (HTTP mode, or when root is not allowed).
    Unprivileged,
}

/// The sidecar to inject.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SidecarPlan {
    /// Volumes to watch, sorted.
    pub volumes: Vec<String>,
    /// Those of `volumes` with Secret data (passed as `--secret-dir`, so the watcher never
    /// shows a bare hash of them).
    pub secret_volumes: BTreeSet<String>,
    /// Signal (to the process, when known, else to each other container's main process) or HTTP.
    pub mode: Told,
    /// Who it runs as.
    pub run_as: RunAs,
    /// Mounts [`no_token_volume`] at [`TOKEN_MOUNT_PATH`]: false when the pod already has a
    /// volume of that name, which is the user's and is neither replaced nor shared.
    pub hides_token: bool,
}

/// The volume the sidecar mounts at [`TOKEN_MOUNT_PATH`] so that it holds no API token: a
/// memory-backed `emptyDir` (no node disk, no ephemeral-storage accounting) capped at
/// [`NO_TOKEN_SIZE_LIMIT`].
pub fn no_token_volume() -> Value {
    json!({"name": NO_TOKEN_VOLUME, "emptyDir": small_memory_dir()})
}

/// A memory `emptyDir` of [`NO_TOKEN_SIZE_LIMIT`].
pub(super) fn small_memory_dir() -> Value {
    json!({"medium": "Memory", "sizeLimit": NO_TOKEN_SIZE_LIMIT})
}

/// The `config-reloader` container for `plan` or, without one, for a Pod that restarts in place
/// and hot-reloads nothing (no watched volume, no reload mode, the image's unprivileged user;
/// `in_place` adds the rest). It gets small requests and limits, a hardened securityContext,
/// and the empty token volume's mount when `hides_token`; `native` adds `restartPolicy: Always`
/// (for `initContainers`).
pub fn container(
    plan: Option<&SidecarPlan>,
    image: &str,
    native: bool,
    hides_token: bool,
) -> Value {
    let mut args = vec!["watch".to_owned()];
    let mut mounts = Vec::new();
    if let Some(plan) = plan {
        for volume in &plan.volumes {
            let secret = plan.secret_volumes.contains(volume);
            let flag = if secret { "--secret-dir" } else { "--dir" };
            let path = format!("{WATCH_ROOT}/{volume}");
            mounts.push(read_only_mount(volume, &path));
            args.extend([flag.to_owned(), path]);
        }
        match &plan.mode {
            Told::Signal { signal, process } => {
                args.extend(["--signal".to_owned(), signal.name.to_owned()]);
                if let Some(process) = process {
                    args.extend(["--process".to_owned(), process.clone()]);
                }
            }
            Told::Http { url } => args.extend(["--url".to_owned(), url.clone()]),
        }
    }
    if hides_token {
        mounts.push(read_only_mount(NO_TOKEN_VOLUME, TOKEN_MOUNT_PATH));
    }
    let run_as = plan.map_or(&RunAs::Unprivileged, |plan| &plan.run_as);
    let mut container = json!({
        "name": SIDECAR_NAME,
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "args": args,
        "resources": {
            "requests": {"cpu": "5m", "memory": "8Mi"},
            "limits": {"cpu": "100m", "memory": "32Mi"},
        },
        "securityContext": security_context(run_as),
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "volumeMounts": mounts,
    });
    if native {
        container["restartPolicy"] = json!("Always");
    }
    container
}

/// A `volumeMounts` entry, read-only.
pub fn read_only_mount(name: &str, path: &str) -> Value {
    json!({"name": name, "mountPath": path, "readOnly": true})
}

fn security_context(run_as: &RunAs) -> Value {
    let (uid, gid, non_root, add) = match run_as {
        RunAs::AppUser { uid, gid } => (*uid, *gid, *uid != 0, None),
        RunAs::RootWithKill => (0, None, false, Some("KILL")),
        RunAs::Unprivileged => (NONROOT_UID, Some(NONROOT_UID), true, None),
    };
    let mut sc = json!({
        "allowPrivilegeEscalation": false,
        "readOnlyRootFilesystem": true,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
        "runAsUser": uid,
        "runAsNonRoot": non_root,
    });
    if let Some(cap) = add {
        sc["capabilities"]["add"] = json!([cap]);
    }
    if let Some(gid) = gid {
        sc["runAsGroup"] = json!(gid);
    }
    sc
}

/// Plans the sidecar for the hot-reloaded containers of `choice` (their volumes, narrowed by
/// `watch`), or `None` (with a warning where it matters) when nothing is watched or ruled out.
pub fn plan(
    annotations: &BTreeMap<String, String>,
    spec: &PodSpec,
    analysis: &PodAnalysis<'_>,
    choice: &Choice,
    native: bool,
    warnings: &mut Warnings,
) -> Option<SidecarPlan> {
    let volumes = watched_volumes(annotations, &choice.reload_volumes(), warnings);
    if volumes.is_empty() {
        return None;
    }
    // A regular sidecar never exits, so a pod that should run to completion (a Job's) never would.
    if let Some(policy @ ("Never" | "OnFailure")) =
        spec.restart_policy.as_deref().filter(|_| !native)
    {
        warnings.push(format!(
            "restartPolicy {policy} needs a native sidecar (Kubernetes >= 1.29) to complete; no watcher injected"
        ));
        return None;
    }
    // A signal without a named process goes to the one derived from the app's command.
    let mut mode = choice.told()?.clone();
    if let Told::Signal { signal, process } = &mut mode
        && process.is_none()
    {
        *process = derived_process(analysis, &volumes, signal.name, warnings);
    }
    let run_as = match &mode {
        Told::Http { .. } => RunAs::Unprivileged,
        Told::Signal { .. } => run_as(spec, analysis, &choice.signalled(), warnings),
    };
    let secret = |cv: &ConfigVolume| cv.sources.iter().any(|s| s.id.kind == ConfigKind::Secret);
    let secret_volumes = volumes
        .iter()
        .filter(|v| analysis.config_volumes.get(*v).is_some_and(secret))
        .cloned()
        .collect();
    Some(SidecarPlan {
        volumes: volumes.into_iter().collect(),
        secret_volumes,
        mode,
        run_as,
        hides_token: token_volume_free(spec, analysis, warnings),
    })
}

/// Whether the pod has no volume named [`NO_TOKEN_VOLUME`] yet: one it has is the user's, so
/// the sidecar goes without it (and holds the API token, with a warning). A pod that already has
/// the sidecar is not asked.
pub(super) fn token_volume_free(
    spec: &PodSpec,
    analysis: &PodAnalysis<'_>,
    warnings: &mut Warnings,
) -> bool {
    if analysis.has_sidecar {
        return true;
    }
    let taken = spec
        .volumes
        .iter()
        .flatten()
        .any(|v| v.name == NO_TOKEN_VOLUME);
    if taken {
        warnings.push(format_args!(
            "container {} gets the API token: volume {} is the pod's own",
            quoted(SIDECAR_NAME),
            quoted(NO_TOKEN_VOLUME)
        ));
    }
    !taken
}

/// The config volumes of hot-reloaded containers, narrowed by the `watch` annotation.
fn watched_volumes(
    annotations: &BTreeMap<String, String>,
    mounted: &BTreeSet<String>,
    warnings: &mut Warnings,
) -> BTreeSet<String> {
    let Some(wanted) = annotations.get(WATCH) else {
        return mounted.clone();
    };
    let mut watched = BTreeSet::new();
    for name in wanted.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        if mounted.contains(name) {
            watched.insert(name.to_owned());
        } else {
            warnings.push(format!(
                "{WATCH}: {} is not a hot-reloaded config volume an app container mounts as a directory; ignored",
                quoted(name)
            ));
        }
    }
    watched
}

/// The process to signal, from the `command` of the one app container that mounts the
/// watched volumes; warns when several app containers leave the target ambiguous.
fn derived_process(
    analysis: &PodAnalysis<'_>,
    volumes: &BTreeSet<String>,
    signal: &str,
    warnings: &mut Warnings,
) -> Option<String> {
    let watchers: BTreeSet<&str> = analysis
        .dir_mounts
        .iter()
        .filter(|m| volumes.contains(&m.volume))
        .map(|m| m.container.as_str())
        .collect();
    let mounting = analysis.apps_named(&watchers);
    let derived = (mounting.len() == 1)
        .then(|| process_from_command(mounting[0]))
        .flatten();
    if derived.is_none() && analysis.apps.len() > 1 {
        let names = analysis.apps.iter().map(|c| c.name.as_str());
        warnings.push(format!(
            "containers {} all get {signal} on change; set {PROCESS} to pick one",
            quoted_list(names)
        ));
    }
    derived
}

/// The basename of `command[0]`, unless it is a shell (whose child is the real server).
fn process_from_command(container: &Container) -> Option<String> {
    const SHELLS: [&str; 6] = ["sh", "bash", "dash", "ash", "zsh", "busybox"];
    let first = container.command.as_ref()?.first()?;
    let base = first.rsplit('/').next().unwrap_or(first);
    let base = values::parse_process(base).ok()?;
    (!SHELLS.contains(&base)).then(|| base.to_owned())
}

/// Decides who the sidecar runs as so that it may signal its targets: the user of the
/// containers it signals (`signalled`), not of every container of the pod.
fn run_as(
    spec: &PodSpec,
    analysis: &PodAnalysis<'_>,
    signalled: &BTreeSet<&str>,
    warnings: &mut Warnings,
) -> RunAs {
    let pod_sc = spec.security_context.as_ref();
    let targets = analysis.apps_named(signalled);
    // The container's own setting, else the Pod's.
    let id_of = |c: &Container, id: fn(&SecurityContext) -> Option<i64>| {
        [c.security_context.as_ref(), pod_sc]
            .into_iter()
            .flatten()
            .find_map(id)
    };
    // The id every target has, when they all have the same one.
    let shared = |id: fn(&SecurityContext) -> Option<i64>| {
        let ids: BTreeSet<Option<i64>> = targets.iter().map(|c| id_of(c, id)).collect();
        ids.first().copied().flatten().filter(|_| ids.len() == 1)
    };
    if let Some(uid) = shared(|s| s.run_as_user) {
        let gid = shared(|s| s.run_as_group);
        return RunAs::AppUser { uid, gid };
    }
    let unknown: Vec<&str> = targets
        .iter()
        .filter(|c| id_of(c, |s| s.run_as_user).is_none())
        .map(|c| c.name.as_str())
        .collect();
    let who = if unknown.is_empty() {
        let names = quoted_list(targets.iter().map(|c| c.name.as_str()));
        format!("containers {names} run as different users")
    } else {
        format!("container {} sets no runAsUser", quoted_list(unknown))
    };
    if declares_non_root(spec, analysis) {
        warnings.push(format!(
            "{who} and runAsNonRoot: reloads may fail with EPERM; set runAsUser"
        ));
        RunAs::Unprivileged
    } else {
        warnings.push(format!("{who}: sidecar runs as root with CAP_KILL only"));
        RunAs::RootWithKill
    }
}

/// Whether the pod says it runs as non-root (`runAsNonRoot: true` on the Pod or an app container):
/// then the sidecar is never root. Pod Security `restricted` requires that flag and runs after
/// us, so a root sidecar would get the Pod rejected; deciding from the Pod alone, not namespace
/// labels, keeps `inject` and the webhook equal.
fn declares_non_root(spec: &PodSpec, analysis: &PodAnalysis<'_>) -> bool {
    let app_contexts = analysis.apps.iter().map(|c| c.security_context.as_ref());
    let mut contexts = app_contexts.chain([spec.security_context.as_ref()]);
    contexts.any(|sc| sc.and_then(|s| s.run_as_non_root) == Some(true))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_no_token_volume_is_named_as_kubernetes_requires() {
        // A volume name is a DNS-1123 label.
        let name = NO_TOKEN_VOLUME;
        assert!(name.len() <= 63, "{name}");
        assert!(
            name.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'),
            "{name}"
        );
        assert!(!name.starts_with('-') && !name.ends_with('-'), "{name}");
        let volume = no_token_volume();
        assert_eq!(volume["name"], name);
        assert_eq!(volume["emptyDir"]["medium"], "Memory");
        // It must not look like the ServiceAccount plugin's own volume, or the plugin would
        // mount it into the app containers as their token.
        assert!(!name.starts_with("kube-api-access-"), "{name}");
    }
}
