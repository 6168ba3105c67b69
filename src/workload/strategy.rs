//! Safe by default: what a change of each container's config does. The [`catalogue`] says how a
//! known program takes a new config, checked on its command line; a helper that already reloads
//! config keeps doing so; the Pod may choose (`signal`, `process`, `reload-url`, `on-change`).
//! Whatever is left rolls the workload (it goes into `config-hash`), as does what an init
//! container reads. The webhook, `inject` and the controller all call [`choose`].

mod wording;

use std::collections::{BTreeMap, BTreeSet};

use super::ON_CHANGE;
use super::analysis::{DirMount, PodAnalysis};
use super::catalogue::{self, Helper, Known, LEGACY_PROGRAMS, PROGRAMS, Program, Takes};
use super::pod::{Container, PodSpec};
use super::rules::{How, Use};
use super::values::{self, OnChange, ReloadSignal, ValueError};
use super::{PROCESS, RELOAD_URL, SIDECAR_NAME, SIGNAL};

pub use wording::{Consequence, warn};

/// How the sidecar tells the app.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Told {
    /// Send `signal`; to `process` when known, else the webhook derives it from the command.
    Signal {
        signal: ReloadSignal,
        /// The process, when the Pod names it or the catalogue gives it.
        process: Option<String>,
    },
    /// POST the URL.
    Http { url: String },
}

/// What a container's config gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Strategy {
    /// Hot reload through the sidecar.
    Reload(Told),
    /// A change rolls the workload (counted in `config-hash`).
    Restart(Why),
    /// Nobody is told (`on-change: none`).
    Nothing,
    /// The program re-reads this config by itself (the catalogue's title of it): nobody has to
    /// tell it, and nothing rolls.
    Itself(&'static str),
    /// A helper container of the pod (named here) already reloads it: no second sidecar, no roll.
    Reloaded(String),
}

/// Why a container's config rolls the workload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Why {
    /// The Pod chose it (`on-change: restart`).
    Chosen,
    /// Its program is not in the catalogue (its name, when one could be read).
    Unknown(Option<String>),
    /// Its program is in the catalogue, but the command line that runs lacks what makes it
    /// reload (a flag: HAProxy's `-W`, Fluent Bit's `-Y`, Caddy's `--watch`).
    Unmet(&'static Program),
    /// The catalogue says its program reads this config at start only.
    AtStart(&'static Program),
    /// Another container of the pod got the sidecar's one signal and target.
    OtherTarget,
    /// An annotation value the sidecar would refuse (the Pod gets no sidecar).
    BadValue,
    /// A signal was due, but the pod sets `hostPID: true` or `shareProcessNamespace: false`,
    /// so the sidecar cannot see the app's processes.
    NoSharedPid,
    /// A hot reload was due, but a container of the pod that is not ours has the sidecar's name,
    /// so no sidecar can be added.
    NameTaken,
    /// A regular init container reads it: it is copied or templated once, at start.
    InitContainer,
}

/// What each container that reads config from a volume gets: a container may appear more than
/// once, with the volumes each strategy applies to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Choice {
    /// Per container (in pod order), a strategy and the volumes it mounts that it applies to.
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

    /// The volumes the sidecar watches: those of hot-reloaded containers.
    pub fn reload_volumes(&self) -> BTreeSet<String> {
        let reloaded = self
            .containers
            .iter()
            .filter(|(_, s, _)| matches!(s, Strategy::Reload(_)));
        reloaded.flat_map(|(_, _, v)| v.iter().cloned()).collect()
    }

    /// The containers the sidecar signals.
    pub fn signalled(&self) -> BTreeSet<&str> {
        let signal = |s: &Strategy| matches!(s, Strategy::Reload(Told::Signal { .. }));
        let signalled = self.containers.iter().filter(|(_, s, _)| signal(s));
        signalled.map(|(c, _, _)| c.as_str()).collect()
    }

    /// The config of the containers whose changes roll the workload, as uses of the rules
    /// (hashed into `config-hash` with env).
    pub fn restart_uses(&self, analysis: &PodAnalysis<'_>) -> Vec<Use> {
        let mut uses = Vec::new();
        for (container, strategy, volumes) in &self.containers {
            let Strategy::Restart(why) = strategy else {
                continue;
            };
            let how = match why {
                Why::InitContainer => How::InitMount,
                _ => How::Mount,
            };
            let configs = volumes
                .iter()
                .filter_map(|v| analysis.config_volumes.get(v));
            for source in configs.flat_map(|config| &config.sources) {
                uses.extend(source.shown().into_iter().map(|consumed| Use {
                    container: container.clone(),
                    consumed,
                    optional: source.optional,
                    how,
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

/// Which catalogue decides, and what it knows besides programs.
#[derive(Debug, Clone, Copy)]
struct Table {
    programs: &'static [Program],
    /// Whether helpers that already reload config are recognised and init containers' config
    /// counts (what versions before the catalogue did not do).
    full: bool,
}

/// Decides, for every container that mounts config as a directory, what a change does; a value
/// the sidecar would refuse gives the error, and rolls what would have been told.
pub fn choose(
    annotations: &BTreeMap<String, String>,
    spec: &PodSpec,
    analysis: &PodAnalysis<'_>,
) -> (Choice, Option<ValueError>) {
    let table = Table {
        programs: &PROGRAMS,
        full: true,
    };
    choose_in(table, annotations, spec, analysis)
}

/// [`choose`] as versions before the catalogue decided (their table, no helpers, no init
/// containers): what a `config-hash` they stamped is over.
pub fn choose_before_catalogue(
    annotations: &BTreeMap<String, String>,
    spec: &PodSpec,
    analysis: &PodAnalysis<'_>,
) -> Choice {
    let table = Table {
        programs: &LEGACY_PROGRAMS,
        full: false,
    };
    choose_in(table, annotations, spec, analysis).0
}

/// A long-running container that reads config, with its directory mounts of config volumes.
type Consumer<'a> = (&'a Container, Vec<&'a DirMount>);

fn choose_in(
    table: Table,
    annotations: &BTreeMap<String, String>,
    spec: &PodSpec,
    analysis: &PodAnalysis<'_>,
) -> (Choice, Option<ValueError>) {
    let (consumers, reloaded) = consumers(table, analysis);
    let reloaded = &reloaded;
    let (mut choice, bad) = match asked(annotations) {
        Ok(asked) => (by_asked(table, &asked, &consumers, reloaded), None),
        Err(err) => {
            let rolls = unless_reloaded(reloaded, Strategy::Restart(Why::BadValue));
            (per_mount(&consumers, rolls), Some(err))
        }
    };
    rule_out(&mut choice, spec, analysis);
    if table.full {
        // An init container's read counts like env, unless a reloader beside the app already
        // keeps that config current (prometheus-operator's init-config-reloader renders the
        // first config its config-reloader then keeps up to date).
        let of = unless_reloaded(reloaded, Strategy::Restart(Why::InitContainer));
        for mount in &analysis.init_dir_mounts {
            push(&mut choice, &mount.container, of(mount), &mount.volume);
        }
    }
    (choice, bad)
}

/// What a helper already reloads stays with it, whatever else the Pod asks for.
fn unless_reloaded(
    reloaded: &BTreeMap<String, String>,
    strategy: Strategy,
) -> impl Fn(&DirMount) -> Strategy + '_ {
    move |mount: &DirMount| match reloaded.get(&mount.volume) {
        Some(by) => Strategy::Reloaded(by.clone()),
        None => strategy.clone(),
    }
}

/// The choice the annotations make, or the catalogue's when they make none.
fn by_asked(
    table: Table,
    asked: &Asked,
    consumers: &[Consumer<'_>],
    reloaded: &BTreeMap<String, String>,
) -> Choice {
    let explicit = asked.url.is_some() || asked.signal.is_some() || asked.process.is_some();
    let tell = || Strategy::Reload(asked_told(table, asked, consumers));
    match asked.on_change {
        Some(OnChange::Nothing) => {
            per_mount(consumers, unless_reloaded(reloaded, Strategy::Nothing))
        }
        Some(OnChange::Restart) => per_mount(consumers, |_| Strategy::Restart(Why::Chosen)),
        Some(OnChange::Reload) => per_mount(consumers, unless_reloaded(reloaded, tell())),
        None if explicit => per_mount(consumers, unless_reloaded(reloaded, tell())),
        None => by_catalogue(table, consumers, reloaded),
    }
}

/// The containers that read config from directory mounts, and the volumes that helpers already
/// reload (by which helper; what a helper watches is not its own read).
fn consumers<'a>(
    table: Table,
    analysis: &'a PodAnalysis<'_>,
) -> (Vec<Consumer<'a>>, BTreeMap<String, String>) {
    let mut consumers: Vec<Consumer<'a>> = Vec::new();
    let mut reloaded = BTreeMap::new();
    for container in analysis.apps.iter().copied() {
        let mounts: Vec<&DirMount> = analysis
            .dir_mounts
            .iter()
            .filter(|m| m.container == container.name)
            .collect();
        let watched: Vec<&DirMount> = match table.full.then(|| helps(container)).flatten() {
            None => Vec::new(),
            Some([]) => mounts.clone(),
            Some(flags) => {
                let line = catalogue::CommandLine::of(container);
                let words = line.map(|l| l.words).unwrap_or_default();
                let paths = catalogue::flag_values(&words, flags);
                let watched = mounts.iter().filter(|m| covers(&m.mount_path, &paths, &[]));
                watched.copied().collect()
            }
        };
        for mount in &watched {
            reloaded
                .entry(mount.volume.clone())
                .or_insert_with(|| container.name.clone());
        }
        let own: Vec<&DirMount> = mounts
            .into_iter()
            .filter(|m| !watched.contains(m))
            .collect();
        if !own.is_empty() {
            consumers.push((container, own));
        }
    }
    (consumers, reloaded)
}

/// The flags naming what a container watches, if it is a helper that already reloads config
/// (none: every config volume it mounts).
fn helps(container: &Container) -> Option<&'static [&'static str]> {
    if container.name == SIDECAR_NAME {
        // Not ours (ours is no app): someone's reloader by its very name, e.g.
        // prometheus-operator's.
        return Some(&[]);
    }
    match catalogue::reloader(container)? {
        Helper::Listed(r) => Some(r.watch_flags),
        Helper::Kin => Some(&[]),
    }
}

/// Gives every mount of every consumer the strategy `of` it.
fn per_mount(consumers: &[Consumer<'_>], of: impl Fn(&DirMount) -> Strategy) -> Choice {
    let mut choice = Choice::default();
    for (container, mounts) in consumers {
        for mount in mounts {
            push(&mut choice, &container.name, of(mount), &mount.volume);
        }
    }
    choice
}

/// Adds `volume` to the container's entry with `strategy`, or a new entry.
fn push(choice: &mut Choice, container: &str, strategy: Strategy, volume: &str) {
    let entry = choice
        .containers
        .iter_mut()
        .find(|(c, s, _)| c == container && *s == strategy);
    match entry {
        Some((_, _, volumes)) => drop(volumes.insert(volume.to_owned())),
        None => choice.containers.push((
            container.to_owned(),
            strategy,
            BTreeSet::from([volume.to_owned()]),
        )),
    }
}

/// The pod's explicit choices and shape that rule a hot reload out: whatever was due one rolls.
fn rule_out(choice: &mut Choice, spec: &PodSpec, analysis: &PodAnalysis<'_>) {
    let no_pid = spec.host_pid == Some(true) || spec.share_process_namespace == Some(false);
    let taken = analysis.name_taken && !analysis.has_sidecar;
    for (_, strategy, _) in &mut choice.containers {
        match strategy {
            Strategy::Reload(_) if taken => *strategy = Strategy::Restart(Why::NameTaken),
            Strategy::Reload(Told::Signal { .. }) if no_pid => {
                *strategy = Strategy::Restart(Why::NoSharedPid)
            }
            _ => {}
        }
    }
}

/// How the sidecar tells the app when the Pod asked for hot reload: its URL, or its signal and
/// process, completed from the catalogue when exactly one signalled program is mounted.
fn asked_told(table: Table, asked: &Asked, consumers: &[Consumer<'_>]) -> Told {
    if let Some(url) = &asked.url {
        return Told::Http { url: url.clone() };
    }
    let mut known: Vec<(&'static str, &'static str)> = consumers
        .iter()
        .filter_map(|(c, _)| match catalogue::identify(table.programs, c) {
            Known::Program(p, _) | Known::Unmet(p) => match p.takes {
                Takes::Signal(signal) => Some((p.process, signal)),
                _ => None,
            },
            Known::Unknown(_) => None,
        })
        .collect();
    known.sort();
    known.dedup();
    let only = (known.len() == 1).then(|| known[0]);
    let signal = asked
        .signal
        .or_else(|| only.and_then(|(_, s)| values::parse_signal(s).ok()))
        .unwrap_or(values::RELOAD_SIGNALS[0]);
    let process = asked.process.clone().or_else(|| {
        only.filter(|(_, s)| asked.signal.is_none_or(|sig| sig.name == *s))
            .map(|(p, _)| p.to_owned())
    });
    Told::Signal { signal, process }
}

/// Nothing asked: the catalogue decides, mount by mount. The sidecar sends one signal to one
/// process name, so only the first signalled program (in pod order) is reloaded; others roll.
fn by_catalogue(
    table: Table,
    consumers: &[Consumer<'_>],
    reloaded: &BTreeMap<String, String>,
) -> Choice {
    let mut target: Option<(&str, &str)> = None;
    let mut choice = Choice::default();
    for (container, mounts) in consumers {
        let known = catalogue::identify(table.programs, container);
        for mount in mounts {
            let strategy = match (&known, reloaded.get(&mount.volume)) {
                (_, Some(by)) => Strategy::Reloaded(by.clone()),
                (Known::Program(p, words), None) => {
                    if covers(&mount.mount_path, &p.watched(words), words) {
                        Strategy::Itself(p.title)
                    } else {
                        by_program(p, &mut target)
                    }
                }
                (Known::Unmet(p), None) => Strategy::Restart(Why::Unmet(p)),
                (Known::Unknown(name), None) => {
                    Strategy::Restart(Why::Unknown(name.map(str::to_owned)))
                }
            };
            push(&mut choice, &container.name, strategy, &mount.volume);
        }
    }
    choice
}

/// What a program's `takes` gives a mount it does not re-read by itself.
fn by_program(program: &'static Program, target: &mut Option<(&str, &str)>) -> Strategy {
    match program.takes {
        Takes::Itself => Strategy::Itself(program.title),
        Takes::AtStart => Strategy::Restart(Why::AtStart(program)),
        Takes::Signal(signal) => {
            let this = (program.process, signal);
            if target.is_some_and(|t| t != this) {
                return Strategy::Restart(Why::OtherTarget);
            }
            *target = Some(this);
            Strategy::Reload(Told::Signal {
                signal: values::parse_signal(signal).unwrap_or(values::RELOAD_SIGNALS[0]),
                process: Some(program.process.to_owned()),
            })
        }
    }
}

/// Whether a mount at `mount_path` holds only what the program re-reads by itself (`watched`:
/// directories, files, globs): the mount is a watched directory or lies in one, is the directory
/// of a watched glob, or holds a watched file and nothing else on the command line (`words`)
/// points into it.
pub fn covers(mount_path: &str, watched: &[&str], words: &[&str]) -> bool {
    let mount = mount_path.trim_end_matches('/');
    let within = |path: &str, dir: &str| path == dir || path.starts_with(&format!("{dir}/"));
    let (globs, paths): (Vec<&str>, Vec<&str>) = watched
        .iter()
        .map(|w| w.trim_end_matches('/'))
        .partition(|w| w.contains(['*', '?', '[']));
    let glob_dir = |glob: &&str| glob.rsplit_once('/').is_some_and(|(dir, _)| dir == mount);
    if globs.iter().any(glob_dir) || paths.iter().any(|p| within(mount, p)) {
        return true;
    }
    let named = words
        .iter()
        .filter_map(|w| w.rsplit('=').next())
        .flat_map(|value| value.split(','))
        .filter(|p| p.starts_with('/'));
    let elsewhere = named
        .filter(|p| within(p, mount))
        .any(|p| !watched.contains(&p));
    paths.iter().any(|p| within(p, mount)) && !elsewhere
}

#[cfg(test)]
mod tests;
