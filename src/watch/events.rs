//! Which inotify events matter (pure). The kubelet's update is a rename of `..data_tmp` onto
//! `..data`; the other `..` names are bookkeeping that changes nothing the app reads. On the
//! nearest existing parent of a missing directory, only the name leading to it matters.

use std::ffi::OsStr;

/// What happened, reduced to what the watcher cares about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    /// Created or moved in.
    Appeared,
    /// Deleted or moved out.
    Vanished,
    Written,
    /// The watched path itself was deleted, moved, or its watch dropped by the kernel.
    WatchGone,
    /// The kernel's event queue overflowed.
    Overflow,
    Other,
}

/// How a watch relates to a configured directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WatchRole {
    /// On the configured path itself.
    Own,
    /// On the nearest existing ancestor of the missing path; `next` leads towards it.
    Ancestor { next: std::ffi::OsString },
}

/// What an event asks the watcher to do for one configured directory.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Effect {
    /// The content may have changed: re-hash (after the debounce).
    pub rehash: bool,
    /// The set of watches must be re-planned (a directory appeared or vanished).
    pub rewatch: bool,
    /// The visible names of a watched directory may have changed: list it again.
    pub relist: bool,
}

impl Effect {
    /// Re-hash, re-watch and list again.
    pub const ALL: Effect = Effect {
        rehash: true,
        rewatch: true,
        relist: true,
    };

    /// Either effect.
    pub fn union(self, other: Effect) -> Effect {
        Effect {
            rehash: self.rehash || other.rehash,
            rewatch: self.rewatch || other.rewatch,
            relist: self.relist || other.relist,
        }
    }
}

/// The name the kubelet renames over to publish a new version.
const DATA: &str = "..data";

/// What one event means for a configured directory watched in `role`.
pub fn classify(role: &WatchRole, kind: EventKind, name: Option<&OsStr>) -> Effect {
    match kind {
        EventKind::Overflow | EventKind::WatchGone => return Effect::ALL,
        EventKind::Other => return Effect::default(),
        _ => {}
    }
    match role {
        WatchRole::Ancestor { next } => match name {
            Some(name) if name == next.as_os_str() => Effect::ALL,
            _ => Effect::default(),
        },
        WatchRole::Own => {
            let Some(name) = name else {
                // On the watched path itself (a watched file).
                return Effect {
                    rehash: kind == EventKind::Written,
                    ..Effect::default()
                };
            };
            let bookkeeping = name.as_encoded_bytes().starts_with(b"..");
            let rehash = !bookkeeping || (name == DATA && kind != EventKind::Written);
            Effect {
                rehash,
                rewatch: false,
                relist: !bookkeeping && kind != EventKind::Written,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn own(kind: EventKind, name: &str) -> Effect {
        classify(&WatchRole::Own, kind, Some(OsStr::new(name)))
    }

    #[test]
    fn the_kubelet_swap_is_a_change() {
        assert!(own(EventKind::Appeared, "..data").rehash);
        assert!(own(EventKind::Vanished, "..data").rehash);
    }

    #[test]
    fn kubelet_bookkeeping_is_not_a_change() {
        for name in ["..data_tmp", "..2026_11_20_22_33_00.123456789"] {
            for kind in [EventKind::Appeared, EventKind::Vanished] {
                assert_eq!(own(kind, name), Effect::default(), "{kind:?} {name}");
            }
        }
    }

    #[test]
    fn plain_files_created_written_moved_deleted_are_changes() {
        for kind in [EventKind::Appeared, EventKind::Vanished, EventKind::Written] {
            assert!(own(kind, "nginx.conf").rehash, "{kind:?}");
            assert!(!own(kind, "nginx.conf").rewatch, "{kind:?}");
        }
        assert_eq!(own(EventKind::Other, "nginx.conf"), Effect::default());
    }

    #[test]
    fn only_visible_names_coming_or_going_call_for_a_new_listing() {
        assert!(own(EventKind::Appeared, "nginx.conf").relist);
        assert!(own(EventKind::Vanished, "nginx.conf").relist);
        assert!(!own(EventKind::Written, "nginx.conf").relist);
        for name in ["..data", "..data_tmp", "..2026_11_20_22_33_00.1"] {
            assert!(!own(EventKind::Appeared, name).relist, "{name}");
            assert!(!own(EventKind::Vanished, name).relist, "{name}");
        }
    }

    #[test]
    fn losing_the_watch_or_events_rechecks_everything() {
        for kind in [EventKind::WatchGone, EventKind::Overflow] {
            let effect = classify(&WatchRole::Own, kind, None);
            assert!(effect.rehash && effect.rewatch && effect.relist);
        }
    }

    #[test]
    fn a_written_single_file_is_a_change() {
        assert!(classify(&WatchRole::Own, EventKind::Written, None).rehash);
        assert!(!classify(&WatchRole::Own, EventKind::Appeared, None).rehash);
    }

    #[test]
    fn on_an_ancestor_only_the_way_to_the_directory_matters() {
        let role = WatchRole::Ancestor {
            next: "config".into(),
        };
        let hit = classify(&role, EventKind::Appeared, Some(OsStr::new("config")));
        assert!(hit.rehash && hit.rewatch && hit.relist);
        assert_eq!(
            classify(&role, EventKind::Appeared, Some(OsStr::new("other"))),
            Effect::default()
        );
    }

    #[test]
    fn effects_combine() {
        let d = Effect::default();
        let a = Effect { rehash: true, ..d };
        let b = Effect { rewatch: true, ..d };
        let c = Effect { relist: true, ..d };
        let all = Effect {
            rehash: true,
            rewatch: true,
            relist: true,
        };
        assert_eq!(a.union(b).union(c), all);
    }
}
