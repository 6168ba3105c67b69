//! Reloader's annotations (stakater/Reloader), read the way Reloader documents them, and what
//! they select: the ConfigMaps and Secrets whose changes a workload follows. Pure.
//!
//! The semantics are Reloader's own, from its README
//! (<https://github.com/stakater/Reloader#-usage>) and annotation reference
//! (<https://docs.stakater.com/reloader/1.4/reference/annotations.html>):
//! - `auto: "true"` follows every ConfigMap and Secret the workload references; the typed
//!   `configmap.…/auto` and `secret.…/auto` one kind only; either being true is enough;
//! - `configmap.…/reload` and `secret.…/reload` name objects (a comma-separated list; each entry
//!   a pattern matched against the whole name, since Reloader 1.0, stakater/Reloader#314), which
//!   count however they are used, even when the pod does not reference them;
//! - `search: "true"` on the workload follows the referenced objects annotated `match: "true"`;
//! - `ignore: "true"` on a ConfigMap or Secret: its changes never reload anything;
//! - the annotations are read on the workload's own metadata; only when it has none of a kind's
//!   annotations are they read on the pod template (stakater/Reloader#122).

use std::collections::BTreeMap;

use regex::{Regex, RegexBuilder};

use crate::hash::{ConfigId, ConfigKind};

/// `"true"`: every referenced ConfigMap and Secret counts; `"false"`: none by discovery.
pub const AUTO: &str = "reloader.stakater.com/auto";
/// `"true"`: every referenced ConfigMap counts.
pub const CONFIGMAP_AUTO: &str = "configmap.reloader.stakater.com/auto";
/// `"true"`: every referenced Secret counts.
pub const SECRET_AUTO: &str = "secret.reloader.stakater.com/auto";
/// Comma-separated ConfigMap names (patterns) that count, referenced or not.
pub const CONFIGMAP_RELOAD: &str = "configmap.reloader.stakater.com/reload";
/// Comma-separated Secret names (patterns) that count, referenced or not.
pub const SECRET_RELOAD: &str = "secret.reloader.stakater.com/reload";
/// `"true"` on a workload: the referenced objects annotated [`MATCH`] count.
pub const SEARCH: &str = "reloader.stakater.com/search";
/// `"true"` on a ConfigMap or Secret: it counts for workloads in [`SEARCH`] mode.
pub const MATCH: &str = "reloader.stakater.com/match";
/// `"true"` on a ConfigMap or Secret: its changes never cause anything.
pub const IGNORE: &str = "reloader.stakater.com/ignore";

/// The annotations of a workload (or its pod template) that select what counts.
pub const WORKLOAD_KEYS: [&str; 6] = [
    AUTO,
    CONFIGMAP_AUTO,
    SECRET_AUTO,
    CONFIGMAP_RELOAD,
    SECRET_RELOAD,
    SEARCH,
];

/// Annotations Reloader writes itself (never a user's choice, never worth a warning).
const WRITTEN_BY_RELOADER: [&str; 2] = [
    "reloader.stakater.com/last-reloaded-from",
    "deployment.reloader.stakater.com/paused-at",
];

/// The most memory one compiled name pattern may take: names are short.
const PATTERN_SIZE_LIMIT: usize = 1 << 20;

/// Labels or annotations.
type Map = BTreeMap<String, String>;

/// Whether `key` is one of Reloader's (`reloader.stakater.com/…` or `….reloader.stakater.com/…`).
pub fn is_key(key: &str) -> bool {
    key.split_once('/').is_some_and(|(domain, _)| {
        domain == "reloader.stakater.com" || domain.ends_with(".reloader.stakater.com")
    })
}

/// Which objects of one kind count.
#[derive(Debug, Clone)]
pub enum Pick {
    /// Every object the pod references (`auto`, or the kind's typed `auto`).
    Referenced,
    /// The objects named by the kind's `reload` annotation, and with `search`, the referenced
    /// ones annotated [`MATCH`].
    Only {
        /// The entries of the `reload` list.
        names: Vec<Name>,
        /// `search: "true"`.
        search: bool,
    },
}

/// One entry of a `reload` list.
#[derive(Debug, Clone)]
pub struct Name {
    /// As written (spaces around it trimmed).
    pub text: String,
    /// The entry as Reloader matches it (`^entry$`); `None` when it is not a valid pattern.
    pattern: Option<Regex>,
}

impl Name {
    fn new(text: &str) -> Self {
        let pattern = RegexBuilder::new(&format!("^(?:{text})$"))
            .size_limit(PATTERN_SIZE_LIMIT)
            .build()
            .ok();
        Self {
            text: text.to_owned(),
            pattern,
        }
    }

    fn matches(&self, name: &str) -> bool {
        self.pattern.as_ref().is_some_and(|p| p.is_match(name))
    }

    /// Whether the entry can only be one object's name (lower-case letters, digits, `-`, `.`):
    /// such an object counts even when the pod does not reference it.
    fn literal(&self) -> bool {
        !self.text.is_empty()
            && self
                .text
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
    }
}

/// Whether a change of one object counts, as a [`Selection`] says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counts {
    /// It counts.
    Yes,
    /// It counts when the object carries `reloader.stakater.com/match: "true"`.
    IfMatched,
    /// It never counts.
    No,
}

/// What Reloader's annotations on a workload select, per kind.
#[derive(Debug, Clone)]
pub struct Selection {
    config_maps: Pick,
    secrets: Pick,
}

impl Selection {
    /// Every referenced object counts (no Reloader annotation narrows it).
    pub fn everything() -> Self {
        Self {
            config_maps: Pick::Referenced,
            secrets: Pick::Referenced,
        }
    }

    /// What the Reloader annotations of a workload select: `workload` are the annotations of
    /// its own metadata, `pod` those of its pod template (or Pod). `None` when neither carries
    /// one of [`WORKLOAD_KEYS`].
    pub fn read(workload: &Map, pod: &Map) -> Option<Self> {
        let present = |map: &Map| WORKLOAD_KEYS.iter().any(|k| map.contains_key(*k));
        (present(workload) || present(pod)).then(|| Self {
            config_maps: pick(ConfigKind::ConfigMap, workload, pod),
            secrets: pick(ConfigKind::Secret, workload, pod),
        })
    }

    /// The pick of one kind.
    pub fn of(&self, kind: ConfigKind) -> &Pick {
        match kind {
            ConfigKind::ConfigMap => &self.config_maps,
            ConfigKind::Secret => &self.secrets,
        }
    }

    /// Whether a change of `id` counts (for a referenced object; see [`Selection::named`] for
    /// the others).
    pub fn counts(&self, id: &ConfigId) -> Counts {
        match self.of(id.kind) {
            Pick::Referenced => Counts::Yes,
            Pick::Only { names, .. } if names.iter().any(|n| n.matches(&id.name)) => Counts::Yes,
            Pick::Only { search: true, .. } => Counts::IfMatched,
            Pick::Only { .. } => Counts::No,
        }
    }

    /// Whether nothing at all can count (`auto: "false"` alone, an empty list).
    pub fn is_nothing(&self) -> bool {
        let empty =
            |pick: &Pick| matches!(pick, Pick::Only { names, search: false } if names.is_empty());
        empty(&self.config_maps) && empty(&self.secrets)
    }

    /// Whether every referenced object counts, of both kinds.
    pub fn is_everything(&self) -> bool {
        matches!(
            (&self.config_maps, &self.secrets),
            (Pick::Referenced, Pick::Referenced)
        )
    }

    /// The objects named by a `reload` list that can only be one object each: they count even
    /// when the pod does not reference them.
    pub fn named(&self) -> Vec<ConfigId> {
        let mut out = Vec::new();
        for kind in [ConfigKind::ConfigMap, ConfigKind::Secret] {
            if let Pick::Only { names, .. } = self.of(kind) {
                out.extend(names.iter().filter(|n| n.literal()).map(|n| ConfigId {
                    kind,
                    name: n.text.clone(),
                }));
            }
        }
        out
    }

    /// The `reload` entries that are not valid patterns (they select nothing), with their key.
    pub fn bad_names(&self) -> Vec<(&'static str, &str)> {
        let mut out = Vec::new();
        for kind in [ConfigKind::ConfigMap, ConfigKind::Secret] {
            if let Pick::Only { names, .. } = self.of(kind) {
                let bad = names.iter().filter(|n| n.pattern.is_none());
                out.extend(bad.map(|n| (reload_key(kind), n.text.as_str())));
            }
        }
        out
    }
}

/// The Reloader annotations on `workload` or `pod` that are not honoured (none of
/// [`WORKLOAD_KEYS`], nor one Reloader writes itself), in order.
pub fn unhonoured<'m>(workload: &'m Map, pod: &'m Map) -> Vec<&'m str> {
    let mut keys: Vec<&str> = workload
        .keys()
        .chain(pod.keys())
        .map(String::as_str)
        .filter(|k| is_key(k) && !WORKLOAD_KEYS.contains(k) && !WRITTEN_BY_RELOADER.contains(k))
        .collect();
    keys.sort_unstable();
    keys.dedup();
    keys
}

/// Whether a ConfigMap or Secret with these annotations carries `match: "true"`.
pub fn matched(annotations: Option<&Map>) -> bool {
    annotations.and_then(|a| a.get(MATCH)).map(String::as_str) == Some("true")
}

/// Whether a ConfigMap or Secret with these annotations carries `ignore: "true"`.
pub fn ignored(annotations: Option<&Map>) -> bool {
    annotations.and_then(|a| a.get(IGNORE)).map(String::as_str) == Some("true")
}

/// The `reload` annotation of `kind`.
pub fn reload_key(kind: ConfigKind) -> &'static str {
    match kind {
        ConfigKind::ConfigMap => CONFIGMAP_RELOAD,
        ConfigKind::Secret => SECRET_RELOAD,
    }
}

fn typed_auto_key(kind: ConfigKind) -> &'static str {
    match kind {
        ConfigKind::ConfigMap => CONFIGMAP_AUTO,
        ConfigKind::Secret => SECRET_AUTO,
    }
}

/// What counts of `kind`: read on the workload's metadata when it carries one of the kind's
/// annotations (its `reload`, `search`, `auto` or typed `auto`), else on the pod template.
fn pick(kind: ConfigKind, workload: &Map, pod: &Map) -> Pick {
    let (reload, typed) = (reload_key(kind), typed_auto_key(kind));
    let own = [reload, SEARCH, AUTO, typed];
    let map = if own.iter().any(|k| workload.contains_key(*k)) {
        workload
    } else {
        pod
    };
    let get = |key: &str| map.get(key).map(String::as_str);
    if go_true(get(AUTO)) || go_true(get(typed)) {
        return Pick::Referenced;
    }
    let names = get(reload)
        .into_iter()
        .flat_map(|list| list.split(','))
        .map(str::trim)
        .filter(|entry| !entry.is_empty())
        .map(Name::new)
        .collect();
    Pick::Only {
        names,
        search: get(SEARCH) == Some("true"),
    }
}

/// A value Go's `strconv.ParseBool` reads as true (how Reloader reads `auto`).
fn go_true(value: Option<&str>) -> bool {
    matches!(value, Some("1" | "t" | "T" | "true" | "TRUE" | "True"))
}

#[cfg(test)]
mod tests;
