//! Safe by default: what a change of a container's mounted config does. A process is signalled
//! only when [`KNOWN_SERVERS`] knows it reloads on that signal, or when the Pod asks
//! (`signal`, `process`, `reload-url`, `on-change: reload`). Any other container's mounted
//! config counts like env: it goes into `config-hash`, so a change rolls the workload.
//! Pure: the webhook, the offline `inject` and the rollout controller all call [`choose`], so
//! they agree on what is hashed.

use std::collections::{BTreeMap, BTreeSet};

use super::ON_CHANGE;
use super::analysis::PodAnalysis;
use super::messages::{Warnings, quoted};
use super::pod::{Container, PodSpec};
use super::rules::{How, Use};
use super::values::{self, OnChange, ReloadSignal, ValueError};
use super::{PROCESS, RELOAD_URL, SIGNAL};

/// A server known to reload its configuration on a signal, from its own documentation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KnownServer {
    /// The names it goes by: the basename of a container's `command[0]`, or of its image
    /// repository when the container sets no command.
    pub names: &'static [&'static str],
    /// The process to signal (its `comm`).
    pub process: &'static str,
    /// Its reload signal.
    pub signal: &'static str,
    /// Command-line flags of which one must be given for the signal to reload (empty: none).
    pub needs_flag: &'static [&'static str],
    /// Where the program documents it.
    pub source: &'static str,
}

/// Servers and their reload signals. Each entry is what the program's own documentation says.
pub const KNOWN_SERVERS: [KnownServer; 8] = [
    // "HUP: changing configuration, ... starting new worker processes with a new configuration,
    // graceful shutdown of old worker processes" (nginx.org, "Controlling nginx").
    KnownServer {
        names: &["nginx", "nginx-unprivileged"],
        process: "nginx",
        signal: "SIGHUP",
        needs_flag: &[],
        source: "https://nginx.org/en/docs/control.html",
    },
    // Master-worker mode (-W, which the official image's entrypoint adds): SIGUSR2 to the master
    // reloads the configuration; without master-worker mode SIGUSR2 is ignored (HAProxy
    // management guide, "-W" and "master-worker").
    KnownServer {
        names: &["haproxy"],
        process: "haproxy",
        signal: "SIGUSR2",
        needs_flag: &[],
        source: "https://docs.haproxy.org/3.0/management.html#4",
    },
    // "Prometheus can reload its configuration at runtime ... sending SIGHUP to the Prometheus
    // process" (Prometheus docs, "Configuration").
    KnownServer {
        names: &["prometheus"],
        process: "prometheus",
        signal: "SIGHUP",
        needs_flag: &[],
        source: "https://prometheus.io/docs/prometheus/latest/configuration/configuration/",
    },
    // "Alertmanager can reload its configuration at runtime ... send a SIGHUP to the process"
    // (Alertmanager docs, "Configuration").
    KnownServer {
        names: &["alertmanager"],
        process: "alertmanager",
        signal: "SIGHUP",
        needs_flag: &[],
        source: "https://prometheus.io/docs/alerting/latest/configuration/",
    },
    // "To tell postgres to reload the configuration files, send a SIGHUP signal" to the
    // postmaster, which passes it on to its children (PostgreSQL docs, "postgres").
    KnownServer {
        names: &["postgres", "postmaster", "postgresql"],
        process: "postgres",
        signal: "SIGHUP",
        needs_flag: &[],
        source: "https://www.postgresql.org/docs/current/app-postgres.html",
    },
    // "SIGHUP: Reload config. Same as issuing the command RELOAD on the console" (PgBouncer
    // docs, "Usage", Signals).
    KnownServer {
        names: &["pgbouncer"],
        process: "pgbouncer",
        signal: "SIGHUP",
        needs_flag: &[],
        source: "https://www.pgbouncer.org/usage.html",
    },
    // Hot reload "can be used with SIGHUP" when enabled with -Y/--enable-hot-reload (or
    // `hot_reload on` in the file, which the webhook cannot see: then choose on-change: reload)
    // (Fluent Bit manual, "Hot reload").
    KnownServer {
        names: &["fluent-bit"],
        process: "fluent-bit",
        signal: "SIGHUP",
        needs_flag: &["-Y", "--enable-hot-reload"],
        source: "https://docs.fluentbit.io/manual/administration/hot-reload",
    },
    // SIGUSR2 to the supervisor: graceful reload (v1.9–v1.17), zero-downtime restart (v1.18+);
    // "If you use fluentd v1.9.0 or later, use SIGUSR2 instead" of SIGHUP (Fluentd docs,
    // "Signals").
    KnownServer {
        names: &["fluentd"],
        process: "fluentd",
        signal: "SIGUSR2",
        needs_flag: &[],
        source: "https://docs.fluentd.org/deployment/signals",
    },
];

/// Commands that start the real server as their child: their name says nothing about it.
const WRAPPERS: [&str; 10] = [
    "sh",
    "bash",
    "dash",
    "ash",
    "zsh",
    "busybox",
    "env",
    "tini",
    "dumb-init",
    "catatonit",
];

/// The name a container's server goes by: the basename of `command[0]` (nothing when it is a
/// shell or an init wrapper), or of its image repository when it sets no command.
pub fn server_name(container: &Container) -> Option<&str> {
    match container.command.as_ref().and_then(|c| c.first()) {
        Some(first) => {
            let base = first.rsplit('/').next().unwrap_or(first);
            (!base.is_empty() && !WRAPPERS.contains(&base)).then_some(base)
        }
        None => image_name(container.image.as_deref()?),
    }
}

/// `registry:5000/team/nginx:1.27@sha256:…` → `nginx`.
fn image_name(image: &str) -> Option<&str> {
    let image = image.split('@').next().unwrap_or(image);
    let last = image.rsplit('/').next().unwrap_or(image);
    let name = last.split(':').next().unwrap_or(last);
    (!name.is_empty()).then_some(name)
}

/// The known server a container runs, if its name is in the table (flags not checked).
pub fn known_server(container: &Container) -> Option<&'static KnownServer> {
    let name = server_name(container)?;
    KNOWN_SERVERS.iter().find(|s| s.names.contains(&name))
}

/// Whether the container's command line gives one of `server`'s needed flags.
fn has_needed_flag(server: &KnownServer, container: &Container) -> bool {
    if server.needs_flag.is_empty() {
        return true;
    }
    let words = container.command.iter().chain(&container.args).flatten();
    words.flat_map(|w| w.split_whitespace()).any(|w| {
        server
            .needs_flag
            .iter()
            .any(|f| w == *f || w.starts_with(&format!("{f}=")))
    })
}

/// How the sidecar tells the app.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Told {
    /// Send `signal`; to `process` when known, else the webhook derives it from the command.
    Signal {
        signal: ReloadSignal,
        /// The process, when the Pod names it or the table gives it.
        process: Option<String>,
    },
    /// POST the URL.
    Http { url: String },
}

/// What one container's mounted config gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Strategy {
    /// Hot reload through the sidecar.
    Reload(Told),
    /// A change rolls the workload (counted in `config-hash`).
    Restart(Why),
    /// Nobody is told (`on-change: none`).
    Nothing,
}

/// Why a container's mounted config rolls the workload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Why {
    /// The Pod chose it (`on-change: restart`).
    Chosen,
    /// Its server is not in the table (its name, when one could be read).
    Unknown(Option<String>),
    /// Its server is in the table, but its command line lacks the flag that enables reloading.
    FlagMissing(&'static KnownServer),
    /// Another container of the pod got the sidecar's one signal and target.
    OtherTarget,
    /// An annotation value the sidecar would refuse (the Pod gets no sidecar).
    BadValue,
    /// A signal was due, but the pod sets `hostPID: true` or `shareProcessNamespace: false`,
    /// so the sidecar cannot see the app's processes.
    NoSharedPid,
}

/// What every container that mounts config as a directory gets.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Choice {
    /// Per container (in pod order), its strategy and the volumes it mounts as directories.
    pub containers: Vec<(String, Strategy, BTreeSet<String>)>,
}

impl Choice {
    /// How the sidecar tells the app, if some container is hot-reloaded.
    pub fn told(&self) -> Option<&Told> {
        self.containers.iter().find_map(|(_, s, _)| match s {
            Strategy::Reload(told) => Some(told),
            _ => None,
        })
    }

    /// The volumes the sidecar watches: those mounted by hot-reloaded containers.
    pub fn reload_volumes(&self) -> BTreeSet<String> {
        self.containers
            .iter()
            .filter(|(_, s, _)| matches!(s, Strategy::Reload(_)))
            .flat_map(|(_, _, v)| v.iter().cloned())
            .collect()
    }

    /// The restart-only config of the containers whose changes roll the workload, as uses of
    /// the rules (hashed into `config-hash` with env).
    pub fn restart_uses(&self, analysis: &PodAnalysis<'_>) -> Vec<Use> {
        let mut uses = Vec::new();
        for (container, strategy, volumes) in &self.containers {
            if !matches!(strategy, Strategy::Restart(_)) {
                continue;
            }
            let configs = volumes
                .iter()
                .filter_map(|v| analysis.config_volumes.get(v));
            for source in configs.flat_map(|config| &config.sources) {
                uses.extend(source.shown().into_iter().map(|consumed| Use {
                    container: container.clone(),
                    consumed,
                    optional: source.optional,
                    how: How::Mount,
                }));
            }
        }
        uses
    }
}

/// The annotation values that choose, read with the one parser.
#[derive(Debug, Clone, Default)]
struct Asked {
    on_change: Option<OnChange>,
    url: Option<String>,
    signal: Option<ReloadSignal>,
    process: Option<String>,
}

fn asked(annotations: &BTreeMap<String, String>) -> Result<Asked, ValueError> {
    let get = |key| annotations.get(key).map(String::as_str);
    let url = get(RELOAD_URL).filter(|u| !u.trim().is_empty());
    Ok(Asked {
        on_change: get(ON_CHANGE).map(values::parse_on_change).transpose()?,
        url: url
            .map(values::parse_reload_url)
            .transpose()?
            .map(str::to_owned),
        signal: get(SIGNAL).map(values::parse_signal).transpose()?,
        process: get(PROCESS)
            .map(values::parse_process)
            .transpose()?
            .map(str::to_owned),
    })
}

/// Decides, for every long-running container that mounts config as a directory, what a change
/// does. A value the sidecar would refuse gives the error with a choice in which every such
/// container rolls instead (no sidecar).
pub fn choose(
    annotations: &BTreeMap<String, String>,
    spec: &PodSpec,
    analysis: &PodAnalysis<'_>,
) -> (Choice, Option<ValueError>) {
    let mut mounts: Vec<(&Container, BTreeSet<String>)> = Vec::new();
    for mount in &analysis.dir_mounts {
        if let Some((_, volumes)) = mounts.iter_mut().find(|(c, _)| c.name == mount.container) {
            volumes.insert(mount.volume.clone());
        } else if let Some(container) = analysis.apps.iter().find(|c| c.name == mount.container) {
            mounts.push((container, BTreeSet::from([mount.volume.clone()])));
        }
    }
    let asked = match asked(annotations) {
        Ok(asked) => asked,
        Err(err) => {
            let containers = mounts
                .into_iter()
                .map(|(c, v)| (c.name.clone(), Strategy::Restart(Why::BadValue), v))
                .collect();
            return (Choice { containers }, Some(err));
        }
    };
    let explicit = asked.url.is_some() || asked.signal.is_some() || asked.process.is_some();
    let all = |strategy: Strategy| Choice {
        containers: mounts
            .iter()
            .map(|(c, v)| (c.name.clone(), strategy.clone(), v.clone()))
            .collect(),
    };
    let mut choice = match asked.on_change {
        Some(OnChange::Nothing) => all(Strategy::Nothing),
        Some(OnChange::Restart) => all(Strategy::Restart(Why::Chosen)),
        Some(OnChange::Reload) => all(Strategy::Reload(asked_told(&asked, &mounts))),
        None if explicit => all(Strategy::Reload(asked_told(&asked, &mounts))),
        None => by_table(&mounts),
    };
    // A pod's explicit choice that rules signals out: whatever was due a signal rolls instead.
    if spec.host_pid == Some(true) || spec.share_process_namespace == Some(false) {
        for (_, strategy, _) in &mut choice.containers {
            if matches!(strategy, Strategy::Reload(Told::Signal { .. })) {
                *strategy = Strategy::Restart(Why::NoSharedPid);
            }
        }
    }
    (choice, None)
}

/// How the sidecar tells the app when the Pod asked for hot reload: its URL, or its signal and
/// process, completed from the table when exactly one known server is mounted.
fn asked_told(asked: &Asked, mounts: &[(&Container, BTreeSet<String>)]) -> Told {
    if let Some(url) = &asked.url {
        return Told::Http { url: url.clone() };
    }
    let mut known: Vec<&'static KnownServer> =
        mounts.iter().filter_map(|(c, _)| known_server(c)).collect();
    known.sort_by_key(|s| s.process);
    known.dedup_by_key(|s| s.process);
    let only = match known.as_slice() {
        [one] => Some(*one),
        _ => None,
    };
    let signal = asked
        .signal
        .or_else(|| only.and_then(|s| values::parse_signal(s.signal).ok()))
        .unwrap_or(values::RELOAD_SIGNALS[0]);
    let process = asked.process.clone().or_else(|| {
        only.filter(|s| asked.signal.is_none_or(|sig| sig.name == s.signal))
            .map(|s| s.process.to_owned())
    });
    Told::Signal { signal, process }
}

/// Nothing asked: the table decides. The sidecar sends one signal to one process name, so only
/// the first known server (in pod order) is reloaded; the others roll.
fn by_table(mounts: &[(&Container, BTreeSet<String>)]) -> Choice {
    let mut target: Option<&KnownServer> = None;
    let containers = mounts
        .iter()
        .map(|(container, volumes)| {
            let strategy = match known_server(container) {
                Some(server) if !has_needed_flag(server, container) => {
                    Strategy::Restart(Why::FlagMissing(server))
                }
                Some(server) if target.is_none_or(|t| t.process == server.process) => {
                    target = Some(server);
                    Strategy::Reload(Told::Signal {
                        signal: values::parse_signal(server.signal)
                            .unwrap_or(values::RELOAD_SIGNALS[0]),
                        process: Some(server.process.to_owned()),
                    })
                }
                Some(_) => Strategy::Restart(Why::OtherTarget),
                None => Strategy::Restart(Why::Unknown(server_name(container).map(str::to_owned))),
            };
            (container.name.clone(), strategy, volumes.clone())
        })
        .collect();
    Choice { containers }
}

/// One line per container that mounts config as a directory: which strategy it got, and how
/// to choose hot reload where it got none.
pub fn warn(choice: &Choice, rolls: bool, warnings: &mut Warnings) {
    let restart = if rolls {
        "pods roll on change"
    } else {
        "a change needs a new pod"
    };
    for (container_name, chosen, _) in &choice.containers {
        let container_name = container_name.as_str();
        let container = quoted(container_name);
        match chosen {
            Strategy::Reload(Told::Signal { signal, process }) => {
                let to = process.as_deref().unwrap_or("its main process");
                warnings.notice(format_args!(
                    "container {container}: hot reload, {signal} to {to} on change"
                ))
            }
            Strategy::Reload(Told::Http { url }) => warnings.notice(format_args!(
                "container {container}: hot reload, POST {} on change",
                quoted(url)
            )),
            Strategy::Nothing => warnings.notice(format_args!(
                "container {container}: {ON_CHANGE}: none; the app is not told of changes"
            )),
            Strategy::Restart(Why::Chosen) => {
                warnings.notice(format_args!("container {container}: {restart} ({ON_CHANGE}: restart)"))
            }
            Strategy::Restart(Why::BadValue) => {}
            Strategy::Restart(Why::Unknown(name)) => {
                let name = name
                    .as_deref()
                    .filter(|n| *n != container_name)
                    .map(|n| format!(" ({})", quoted(n)))
                    .unwrap_or_default();
                warnings.push(format_args!(
                    "container {container}{name}: {restart}, no known reload signal ({ON_CHANGE})"
                ))
            }
            Strategy::Restart(Why::FlagMissing(server)) => warnings.push(format_args!(
                "container {container} ({}): {restart}; hot reload needs {}, see {ON_CHANGE}",
                server.process,
                server.needs_flag.join(" or ")
            )),
            Strategy::Restart(Why::OtherTarget) => warnings.push(format_args!(
                "container {container}: {restart}; the sidecar signals one process: see {PROCESS}"
            )),
            Strategy::Restart(Why::NoSharedPid) => warnings.push(format_args!(
                "container {container}: {restart}; hostPID or shareProcessNamespace: false rule out a signal"
            )),
        }
    }
}

#[cfg(test)]
mod tests;
