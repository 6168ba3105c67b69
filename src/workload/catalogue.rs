//! The reload catalogue: how each widely deployed program takes a new config, per its own
//! documentation ([`PROGRAMS`]), the helpers that already reload config ([`RELOADERS`]), and the
//! reading of a container's command line against them.

mod entries;

use super::pod::Container;

pub use entries::{LEGACY_PROGRAMS, PROGRAMS, RELOADERS};

/// How a program takes a new config.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Takes {
    /// It reloads when its process gets this signal.
    Signal(&'static str),
    /// It re-reads its config by itself (it watches or polls the files): nobody has to tell it,
    /// and a change rolls nothing.
    Itself,
    /// It reads its config at start only: a change needs a new pod.
    AtStart,
}

/// What must hold on the command line that really runs for an entry to apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Needs {
    /// Nothing.
    Nothing,
    /// One of these flags (alone, or as `flag=value`; Go programs take `-flag` as `--flag`).
    Flag(&'static [&'static str]),
    /// This subcommand: the first word of the command line that is not a flag.
    Subcommand(&'static str),
}

/// What a program's official image runs when the container sets no `command`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageDefault {
    /// The words the image's `CMD` gives the program, used when the container sets no `args`.
    pub cmd: &'static [&'static str],
    /// The words its entrypoint adds when the arguments run the program (none, a flag first,
    /// or the program's name first).
    pub adds: &'static [&'static str],
}

/// One program in the catalogue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Program {
    /// Its name in the docs table.
    pub title: &'static str,
    /// The names it goes by: the basename of a container's `command[0]`, or the last element of
    /// its image repository when the container sets no command.
    pub names: &'static [&'static str],
    /// The process to signal (its `comm`).
    pub process: &'static str,
    /// How it takes a new config.
    pub takes: Takes,
    /// When the entry applies.
    pub needs: Needs,
    /// Flags whose value names a file or directory it re-reads by itself, whatever `takes` says:
    /// config mounted there reloads by itself.
    pub watches: &'static [&'static str],
    /// Directories it polls by itself by default, per its documentation.
    pub polls: &'static [&'static str],
    /// A word on the command line that turns `watches` off.
    pub watch_off: Option<&'static str>,
    /// What its official image runs without a `command`.
    pub image: Option<ImageDefault>,
    /// Where its documentation says so.
    pub source: &'static str,
}

/// A helper container that already watches config and reloads the program beside it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reloader {
    /// Its name in the docs table.
    pub title: &'static str,
    /// The names it goes by (command basename or image name).
    pub names: &'static [&'static str],
    /// When it is a reloader (a Thanos sidecar only with its reloader flags).
    pub needs: Needs,
    /// Flags naming what it watches; empty: every config volume it mounts.
    pub watch_flags: &'static [&'static str],
    /// Where its documentation says so.
    pub source: &'static str,
}

/// Flags by which the kin of configmap-reload and prometheus-config-reloader are known, whatever
/// their image is called: the URL they call when the config they watch changes.
pub const RELOADER_FLAGS: [&str; 2] = ["--webhook-url", "--reload-url"];

/// Commands that start the real program as their child: their name says nothing about it.
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

/// The program a container runs and the words it is given, as far as its spec tells.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandLine<'c> {
    /// The basename of `command[0]`, or the image's name when the container sets no command.
    pub name: &'c str,
    /// Whether `name` is the image's (no command).
    pub from_image: bool,
    /// The words after the program, each argument split at whitespace.
    pub words: Vec<&'c str>,
}

impl<'c> CommandLine<'c> {
    /// Reads a container's command line; `None` when its command is a shell or an init wrapper.
    pub fn of(container: &'c Container) -> Option<Self> {
        let args = container.args.iter().flatten();
        match container.command.as_deref() {
            Some([first, rest @ ..]) => {
                let name = basename(first);
                let words = rest.iter().chain(args).flat_map(|w| w.split_whitespace());
                (!name.is_empty() && !WRAPPERS.contains(&name)).then(|| Self {
                    name,
                    from_image: false,
                    words: words.collect(),
                })
            }
            _ => Some(Self {
                name: image_name(container.image.as_deref()?)?,
                from_image: true,
                words: args.flat_map(|w| w.split_whitespace()).collect(),
            }),
        }
    }

    /// The words `program` runs with: for a container without a command, what the program's
    /// image adds (its default arguments, the flags its entrypoint adds), and never the
    /// program's own name as a first argument.
    pub fn for_program(&self, program: &Program) -> Vec<&'c str> {
        let mut words = self.words.clone();
        if !self.from_image {
            return words;
        }
        let Some(image) = program.image else {
            return words;
        };
        if words.is_empty() {
            words = image.cmd.to_vec();
        }
        // Arguments that start with a word run the program only if it is the program's name.
        if let Some(&first) = words.first().filter(|w| !w.starts_with('-')) {
            if !program.names.contains(&basename(first)) {
                return words;
            }
            words.remove(0);
        }
        image.adds.iter().copied().chain(words).collect()
    }
}

/// The last path element of a command.
fn basename(command: &str) -> &str {
    command.rsplit('/').next().unwrap_or(command)
}

/// `registry:5000/team/nginx:1.27@sha256:…` → `nginx`.
pub fn image_name(image: &str) -> Option<&str> {
    let image = image.split('@').next().unwrap_or(image);
    let last = image.rsplit('/').next().unwrap_or(image);
    let name = last.split(':').next().unwrap_or(last);
    (!name.is_empty()).then_some(name)
}

/// A flag's name without its leading dashes (`--web.config.file` and `-web.config.file` are the
/// same flag to a Go program).
fn bare(flag: &str) -> &str {
    flag.trim_start_matches('-')
}

impl Needs {
    /// Whether `words` meet the need.
    pub fn met(self, words: &[&str]) -> bool {
        match self {
            Needs::Nothing => true,
            Needs::Flag(flags) => words.iter().any(|w| {
                flags
                    .iter()
                    .any(|f| *w == *f || w.strip_prefix(f).is_some_and(|v| v.starts_with('=')))
            }),
            Needs::Subcommand(sub) => words.iter().find(|w| !w.starts_with('-')) == Some(&sub),
        }
    }

    /// The need in words, as warnings and `status` say it: `-W or -Ws`, `subcommand rule`.
    pub fn text(self) -> String {
        match self {
            Needs::Nothing => String::new(),
            Needs::Flag(flags) => flags.join(" or "),
            Needs::Subcommand(sub) => format!("subcommand {sub}"),
        }
    }
}

/// The values given to `flags` on a command line (`--flag=v` or `--flag v`), each split at
/// commas (several files in one value).
pub fn flag_values<'w>(words: &[&'w str], flags: &[&str]) -> Vec<&'w str> {
    let named = |word: &str| flags.iter().any(|f| bare(word) == bare(f));
    let mut values = Vec::new();
    for (i, word) in words.iter().enumerate() {
        let value = match word.split_once('=') {
            Some((flag, value)) if named(flag) => Some(value),
            None if named(word) => words.get(i + 1).copied(),
            _ => None,
        };
        values.extend(value.into_iter().flat_map(|v| v.split(',')));
    }
    values.into_iter().filter(|v| !v.is_empty()).collect()
}

/// What a container's program is, as the catalogue knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Known<'c> {
    /// An entry applies; the words it runs with.
    Program(&'static Program, Vec<&'c str>),
    /// Entries carry its name, but the command line meets none of their needs (the first one).
    Unmet(&'static Program),
    /// The catalogue does not know it (its name, when one could be read).
    Unknown(Option<&'c str>),
}

/// Looks a container up in `programs`: the first entry of its name whose needs its command line
/// meets.
pub fn identify<'c>(programs: &'static [Program], container: &'c Container) -> Known<'c> {
    let Some(line) = CommandLine::of(container) else {
        return Known::Unknown(None);
    };
    let mut named = programs.iter().filter(|p| p.names.contains(&line.name));
    let Some(first) = named.clone().next() else {
        return Known::Unknown(Some(line.name));
    };
    match named.find_map(|p| Some((p, line.for_program(p))).filter(|(p, w)| p.needs.met(w))) {
        Some((program, words)) => Known::Program(program, words),
        None => Known::Unmet(first),
    }
}

/// A helper container that reloads the program beside it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Helper {
    /// An entry of [`RELOADERS`].
    Listed(&'static Reloader),
    /// Known by the flags of its kin ([`RELOADER_FLAGS`]): it watches every config volume it
    /// mounts.
    Kin,
}

/// The reloader a container is, if it is one: by its name or image, or by the flags of its kin.
pub fn reloader(container: &Container) -> Option<Helper> {
    let line = CommandLine::of(container)?;
    let listed = RELOADERS
        .iter()
        .find(|r| r.names.contains(&line.name) && r.needs.met(&line.words));
    match listed {
        Some(reloader) => Some(Helper::Listed(reloader)),
        None => (!flag_values(&line.words, &RELOADER_FLAGS).is_empty()).then_some(Helper::Kin),
    }
}

impl Program {
    /// The directories and files this program re-reads by itself, given the words it runs with.
    pub fn watched<'w>(&self, words: &[&'w str]) -> Vec<&'w str> {
        if self.watch_off.is_some_and(|off| words.contains(&off)) {
            return Vec::new();
        }
        let mut paths = flag_values(words, self.watches);
        paths.extend(self.polls.iter().copied());
        paths
    }
}

#[cfg(test)]
mod tests;
