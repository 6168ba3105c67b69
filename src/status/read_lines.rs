//! What a workload reads, one line per key or volume, what a change of each does (the core's
//! [`Strategy`] and [`Consequence`] in words), and the findings about those reads (pure).

use serde::Serialize;

use super::config_objects::{Configs, Seen};
use super::findings::{Code, Finding};
use super::hash_check::KeyState;
use super::target_arg::Kind;
use crate::hash::{ConfigId, ConfigKind, Consumed};
use crate::policy::{Counts, Selection, reloader};
use crate::workload::catalogue::Takes;
use crate::workload::explain::{Explained, How, Read, Told};
use crate::workload::strategy::{Consequence, Strategy, Why};
use crate::workload::{ON_CHANGE, PROCESS, SIDECAR_NAME, WATCH, describe, quoted};

/// One key or object a container reads.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReadLine {
    pub container: String,
    pub object_kind: String,
    pub object: String,
    pub key: Option<String>,
    pub via: &'static str,
    pub volume: Option<String>,
    pub optional: bool,
    /// Whether the object exists (`None`: could not be read).
    pub exists: Option<bool>,
    #[serde(flatten)]
    pub effect: Effect,
}

/// What a change of a read does and why (in a workload's read line and a config's reader line).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Effect {
    pub on_change: OnChange,
    pub detail: String,
    /// The catalogue's program the decision comes from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub program: Option<&'static str>,
    /// The container (a reloader such as configmap-reload) that already reloads it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reloaded_by: Option<String>,
}

/// What a change of a read does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum OnChange {
    Rollout,
    HotReload,
    /// Each Pod restarts every container in place, wave by wave.
    RestartInPlace,
    /// The program re-reads it by itself: nobody is told, nothing rolls.
    ReloadsItself,
    /// A reloader container of the pod already reloads it: nothing rolls.
    AlreadyReloaded,
    /// A Job or CronJob: a running Job keeps it, the next Job reads the new one.
    NextJob,
    Nothing,
}

/// What the read lines of one workload are judged against.
#[derive(Debug, Clone, Copy)]
pub struct Judging<'k> {
    pub kind: Kind,
    /// What a change of restart-only config does to it, as the core says.
    pub consequence: Consequence,
    pub key: KeyState<'k>,
    /// Its template carries a `config-hash`.
    pub stamped: bool,
    /// Opted in, and not opted out.
    pub active: bool,
    /// What counts of what it reads (Reloader's annotations may leave some out).
    pub selection: &'k Selection,
}

/// What a change does to a Secret read through env when the webhook has no hash key.
const UNKEYED_SECRET: &str = "Secret without a hash key";

/// One line per key or volume `explained` reads: how, and what a change of it does.
pub fn read_lines(
    explained: &Explained,
    configs: &Configs,
    judging: &Judging<'_>,
) -> Vec<ReadLine> {
    let line = |read: &Read| {
        let id = read.consumed.id();
        let seen = configs.get(id);
        let ignored = seen.is_some_and(|s| s.ignored);
        let (on_change, detail) = match not_counted(judging, id, seen) {
            Some(nothing) => nothing,
            None => change(read, explained, ignored, judging),
        };
        let (program, reloaded_by) = match &read.strategy {
            Some(Strategy::Itself(title)) => (Some(*title), None),
            Some(Strategy::Restart(Why::AtStart(p) | Why::Unmet(p))) => (Some(p.title), None),
            Some(Strategy::Reloaded(by)) => (None, Some(by.clone())),
            _ => (None, None),
        };
        ReadLine {
            container: read.container.clone(),
            object_kind: id.kind.to_string(),
            object: id.name.clone(),
            key: match &read.consumed {
                Consumed::Key(_, key) => Some(key.clone()),
                Consumed::Whole(_) => None,
            },
            via: via_name(read.via),
            volume: read.volume.clone(),
            optional: read.optional,
            exists: configs.exists(id),
            effect: Effect {
                on_change,
                detail,
                program,
                reloaded_by,
            },
        }
    };
    explained.reads.iter().map(line).collect()
}

/// Nothing, and why, when the workload is not acted on or Reloader's annotations leave `id` out.
fn not_counted(
    judging: &Judging<'_>,
    id: &ConfigId,
    seen: Option<&Seen>,
) -> Option<(OnChange, String)> {
    let why = match judging.selection.counts(id) {
        _ if !judging.active => "not opted in".to_owned(),
        Counts::IfMatched if !seen.is_some_and(|s| s.matched) => {
            format!("search: not annotated {}: \"true\"", reloader::MATCH)
        }
        Counts::No => "left out by Reloader's annotations".to_owned(),
        Counts::Yes | Counts::IfMatched => return None,
    };
    Some((OnChange::Nothing, why))
}

/// What a change of `read` does, as the core decided it, and why in a few words.
fn change(
    read: &Read,
    explained: &Explained,
    ignored: bool,
    judging: &Judging,
) -> (OnChange, String) {
    let rolls = |reason: String| restart(read.consumed.id(), reason, ignored, judging);
    match &read.strategy {
        None if explained.in_place.contains(&read.consumed) && ignored => {
            ignored_change(read.consumed.id())
        }
        None if explained.in_place.contains(&read.consumed) => (
            OnChange::RestartInPlace,
            "read at container start; the pods restart in place, wave by wave".to_owned(),
        ),
        None if read.via == How::SubPath => rolls("subPath is never updated in place".to_owned()),
        None => rolls("read at container start".to_owned()),
        Some(Strategy::Restart(why)) => rolls(why_text(why)),
        Some(Strategy::Reload(_)) => hot_reload(read, explained, ignored),
        Some(Strategy::Itself(title)) => (
            OnChange::ReloadsItself,
            format!("{title} re-reads it; nothing rolls"),
        ),
        Some(Strategy::Reloaded(by)) if *by == read.container => (
            OnChange::AlreadyReloaded,
            "by this container, a reloader; nothing rolls".to_owned(),
        ),
        Some(Strategy::Reloaded(by)) => (
            OnChange::AlreadyReloaded,
            format!("by container {}; nothing rolls", quoted(by)),
        ),
        Some(Strategy::Nothing) => (
            OnChange::Nothing,
            format!("{ON_CHANGE}: none; the app is not told"),
        ),
    }
}

/// Nothing: `id` is annotated to be ignored.
fn ignored_change(id: &ConfigId) -> (OnChange, String) {
    let what = describe(id);
    let why = format!("{what} is annotated reload-injector.io/ignore");
    (OnChange::Nothing, why)
}

/// A mount the sidecar reloads: how, unless the `watch` annotation leaves it out.
fn hot_reload(read: &Read, explained: &Explained, ignored: bool) -> (OnChange, String) {
    let watched = |volumes: &Vec<String>| read.volume.as_ref().is_some_and(|v| volumes.contains(v));
    match explained.watcher.as_ref().filter(|w| watched(&w.volumes)) {
        None => (
            OnChange::Nothing,
            format!("the sidecar does not watch it ({WATCH})"),
        ),
        Some(w) if ignored => (
            OnChange::HotReload,
            format!(
                "{}, after the kubelet's periodic sync (ignored: no refresh)",
                mode_text(&w.mode)
            ),
        ),
        Some(w) => (OnChange::HotReload, mode_text(&w.mode)),
    }
}

/// Restart-only config (read at start, `reason`): what a change of it does to this object.
fn restart(
    id: &ConfigId,
    reason: String,
    ignored: bool,
    judging: &Judging<'_>,
) -> (OnChange, String) {
    match judging.consequence {
        // Whatever is stamped: the next Job, or the new pod, reads the data as it is then.
        Consequence::NextJob => (
            OnChange::NextJob,
            format!("{reason}; {}", Consequence::NextJob.on_change()),
        ),
        Consequence::NewPod => (
            OnChange::Nothing,
            format!("{reason}; {}", Consequence::NewPod.on_change()),
        ),
        Consequence::Rolls if ignored => ignored_change(id),
        Consequence::Rolls
            if id.kind == ConfigKind::Secret && matches!(judging.key, KeyState::NoKey) =>
        {
            (OnChange::Nothing, UNKEYED_SECRET.to_owned())
        }
        Consequence::Rolls if !judging.stamped => (OnChange::Nothing, "not stamped".to_owned()),
        Consequence::Rolls if judging.kind == Kind::Pod => (
            OnChange::Nothing,
            "this Pod keeps it until replaced (its workload rolls)".to_owned(),
        ),
        Consequence::Rolls => (OnChange::Rollout, reason),
    }
}

/// Why the core rolls a directory mount, in a few words.
fn why_text(why: &Why) -> String {
    match why {
        Why::Chosen => format!("{ON_CHANGE}: restart"),
        Why::Unknown(name) => {
            let of = name.as_deref().map(|n| format!(" for {}", quoted(n)));
            let of = of.unwrap_or_default();
            format!("no known reload signal{of} ({ON_CHANGE})")
        }
        Why::Unmet(program) => {
            let how = match program.takes {
                Takes::Itself => "reloads by itself",
                _ => "reloads",
            };
            let (title, needs) = (program.title, program.needs.text());
            format!("{title} {how} only with {needs} on its command line")
        }
        Why::AtStart(program) => format!("{} reads it at start", program.title),
        Why::OtherTarget => format!("the sidecar signals one process ({PROCESS})"),
        Why::BadValue => "an annotation value the sidecar would refuse: no sidecar".to_owned(),
        Why::NoSharedPid => "hostPID or shareProcessNamespace: false rule out a signal".to_owned(),
        Why::NameTaken => {
            let sidecar = quoted(SIDECAR_NAME);
            format!(
                "the pod's own container {sidecar} has the sidecar's name, so no watcher is added"
            )
        }
        Why::InitContainer => "an init container reads it at start".to_owned(),
    }
}

/// The findings about `reads`, once per object.
pub fn read_findings(reads: &[ReadLine]) -> Vec<Finding> {
    let mut findings = Vec::new();
    let mut said = std::collections::BTreeSet::new();
    for read in reads {
        let object = format!("{} {}", read.object_kind, quoted(&read.object));
        let container = quoted(&read.container);
        let found = [
            (
                read.exists == Some(false) && !read.optional,
                Code::MissingConfig,
                format!(
                    "container {container} needs {object}, which does not exist: the pod cannot start until it does"
                ),
                "create it, or mark the reference `optional: true`",
            ),
            (
                read.via == "subPath",
                Code::Subpath,
                format!(
                    "container {container} mounts {object} via subPath (never updated); pods roll when it changes"
                ),
                "mount the directory to get hot reload",
            ),
            (
                read.effect.detail == UNKEYED_SECRET,
                Code::SecretNotHashed,
                format!(
                    "container {container} reads {object} via {}; no secret hash key, so no restart on change",
                    read.via
                ),
                "give the webhook a --secret-hash-key-file (the install does)",
            ),
        ];
        for (applies, code, message, fix) in found {
            if applies && said.insert((code, object.clone())) {
                findings.push(Finding::new(code, message, fix));
            }
        }
    }
    findings
}

/// How the sidecar reloads: `SIGHUP to "nginx"`, `POST http://…`.
pub fn mode_text(mode: &Told) -> String {
    match mode {
        Told::Signal {
            signal,
            process: Some(process),
        } => format!("{signal} to {}", quoted(process)),
        Told::Signal {
            signal,
            process: None,
        } => format!("{signal} to each app container's main process"),
        Told::Http { url } => format!("POST {}", quoted(url)),
    }
}

fn via_name(via: How) -> &'static str {
    match via {
        How::Env => "env",
        How::EnvFrom => "envFrom",
        How::SubPath => "subPath",
        How::InitSubPath => "initSubPath",
        How::Mount => "directory",
        How::InitMount => "initDirectory",
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde::Deserialize;
    use serde_json::json;

    use super::*;
    use crate::workload::explain::explain;
    use crate::workload::pod::PodSpec;

    /// (container, volume or object, onChange, detail) of each line of `spec` judged as `judging`.
    fn said(
        annotations: &[(&str, &str)],
        spec: serde_json::Value,
        judging: Judging<'_>,
    ) -> Vec<(String, String, OnChange, String)> {
        let annotations: BTreeMap<String, String> = (annotations.iter())
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let spec = PodSpec::deserialize(spec).unwrap();
        let explained = explain(&annotations, &spec, true);
        let lines = read_lines(&explained, &Configs::default(), &judging);
        let line = |l: ReadLine| {
            let what = l.volume.unwrap_or(l.object);
            (l.container, what, l.effect.on_change, l.effect.detail)
        };
        lines.into_iter().map(line).collect()
    }

    fn rolls(stamped: bool) -> Judging<'static> {
        Judging {
            kind: Kind::Deployment,
            consequence: Consequence::Rolls,
            key: KeyState::NoKey,
            stamped,
            active: true,
            selection: Box::leak(Box::new(crate::policy::Selection::everything())),
        }
    }

    fn line(
        c: &str,
        what: &str,
        on_change: OnChange,
        detail: &str,
    ) -> (String, String, OnChange, String) {
        (c.into(), what.into(), on_change, detail.into())
    }

    #[test]
    fn a_reloader_beside_prometheus_and_what_prometheus_re_reads_itself_roll_nothing() {
        let spec = json!({
            "containers": [
                {"name": "prometheus", "image": "quay.io/prometheus/prometheus:v3.1.0",
                 "args": ["--config.file=/etc/config/prometheus.yml", "--web.config.file=/etc/web/web.yml"],
                 "volumeMounts": [{"name": "config", "mountPath": "/etc/config"},
                                  {"name": "web", "mountPath": "/etc/web"}]},
                {"name": "reload", "image": "ghcr.io/jimmidyson/configmap-reload:v0.14.0",
                 "args": ["--volume-dir=/etc/config", "--webhook-url=http://127.0.0.1:9090/-/reload"],
                 "volumeMounts": [{"name": "config", "mountPath": "/etc/config"}]}],
            "volumes": [{"name": "config", "configMap": {"name": "prom"}},
                        {"name": "web", "configMap": {"name": "prom-web"}}]
        });
        assert_eq!(
            said(&[], spec, rolls(true)),
            [
                line(
                    "prometheus",
                    "config",
                    OnChange::AlreadyReloaded,
                    "by container \"reload\"; nothing rolls"
                ),
                line(
                    "prometheus",
                    "web",
                    OnChange::ReloadsItself,
                    "Prometheus re-reads it; nothing rolls"
                ),
                line(
                    "reload",
                    "config",
                    OnChange::AlreadyReloaded,
                    "by this container, a reloader; nothing rolls"
                ),
            ]
        );
    }

    #[test]
    fn restart_only_config_is_said_by_the_objects_consequence() {
        let spec = json!({
            "restartPolicy": "OnFailure",
            "initContainers": [{"name": "render", "image": "example/envsubst:1",
                "volumeMounts": [{"name": "templates", "mountPath": "/templates"}]}],
            "containers": [{"name": "app", "image": "example/app:1",
                "env": [{"name": "A", "valueFrom": {"configMapKeyRef": {"name": "env", "key": "a"}}}]}],
            "volumes": [{"name": "templates", "configMap": {"name": "templates"}}]
        });
        let init = "an init container reads it at start";
        let start = "read at container start";
        let next = Judging {
            kind: Kind::CronJob,
            consequence: Consequence::NextJob,
            stamped: false,
            ..rolls(false)
        };
        let next_job = Consequence::NextJob.on_change();
        assert_eq!(
            said(&[], spec.clone(), next),
            [
                line(
                    "app",
                    "env",
                    OnChange::NextJob,
                    &format!("{start}; {next_job}")
                ),
                line(
                    "render",
                    "templates",
                    OnChange::NextJob,
                    &format!("{init}; {next_job}")
                ),
            ]
        );
        let bare = Judging {
            kind: Kind::Pod,
            consequence: Consequence::NewPod,
            ..rolls(true)
        };
        let new_pod = format!("{init}; {}", Consequence::NewPod.on_change());
        assert_eq!(
            said(&[], spec.clone(), bare)[1],
            line("render", "templates", OnChange::Nothing, &new_pod)
        );
        assert_eq!(
            said(&[], spec.clone(), rolls(false))[1],
            line("render", "templates", OnChange::Nothing, "not stamped")
        );
        assert_eq!(
            said(&[], spec, rolls(true))[1],
            line("render", "templates", OnChange::Rollout, init)
        );
    }

    #[test]
    fn hot_reload_names_the_signal_unless_the_watch_annotation_leaves_the_volume_out() {
        let spec = json!({
            "containers": [{"name": "web", "image": "nginx",
                "volumeMounts": [{"name": "a", "mountPath": "/etc/nginx/conf.d"},
                                 {"name": "b", "mountPath": "/etc/nginx/extra"}]}],
            "volumes": [{"name": "a", "configMap": {"name": "a"}}, {"name": "b", "configMap": {"name": "b"}}]
        });
        let watch = [(WATCH, "a")];
        assert_eq!(
            said(&watch, spec.clone(), rolls(true)),
            [
                line("web", "a", OnChange::HotReload, "SIGHUP to \"nginx\""),
                line(
                    "web",
                    "b",
                    OnChange::Nothing,
                    "the sidecar does not watch it (reload-injector.io/watch)"
                ),
            ]
        );
        let none = [(ON_CHANGE, "none")];
        let told = "reload-injector.io/on-change: none; the app is not told";
        assert_eq!(
            said(&none, spec.clone(), rolls(true))[0],
            line("web", "a", OnChange::Nothing, told)
        );
        let restart = [(ON_CHANGE, "restart")];
        let chosen = "reload-injector.io/on-change: restart";
        assert_eq!(
            said(&restart, spec, rolls(true))[0],
            line("web", "a", OnChange::Rollout, chosen)
        );
    }
}
