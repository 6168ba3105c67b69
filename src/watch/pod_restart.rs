//! When the sidecar restarts its Pod in place (pure). It exits with the restart code once the
//! Pod's desired env hash (written by the rollout controller, read through the downward API)
//! equals the hash of its own mounted copy of the ConfigMaps read through env, and that hash
//! differs from the one the Pod's containers started with. Equal means the kubelet's cache,
//! which filled the copy, has the new data, so the containers it restarts resolve env from it.
//!
//! What the containers started with is kept in a small `emptyDir` that outlives them: on the
//! first start it is the sidecar's view (the app starts after its native sidecar, from a cache
//! at least that new), and before each restart it becomes the value restarted for. So the
//! initial state never restarts the Pod, one change never restarts it twice, and a sidecar that
//! restarts alone (an OOM kill) does not take new data for what the app runs with.

/// What one check of the desired hash and the view says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    /// Nothing to do (no desired hash, the data has not arrived, or nothing changed).
    Wait,
    /// Restart every container: record `hash` as what they start with, then exit with the code.
    Restart {
        /// The desired hash, equal to the view.
        hash: String,
    },
}

/// The env hash the Pod's containers started with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Started(pub String);

impl Started {
    /// What the state directory kept, else (the first start) the sidecar's view now.
    pub fn new(kept: Option<String>, view: String) -> Self {
        Started(kept.unwrap_or(view))
    }

    /// What to do, given the Pod's desired hash (`None`: not written) and the view (`None`:
    /// could not be read, e.g. mid-update).
    pub fn next(&self, desired: Option<&str>, view: Option<&str>) -> Next {
        match (desired, view) {
            (Some(desired), Some(view)) if desired == view && view != self.0 => Next::Restart {
                hash: desired.to_owned(),
            },
            _ => Next::Wait,
        }
    }
}

/// A file's text as a hash: trimmed, `None` when empty (the downward API writes an empty file
/// for an annotation the Pod does not have).
pub fn read_hash(text: &str) -> Option<String> {
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_owned())
}

/// What the Pod's containers read through env, from `--env-key NAME/KEY` and `--env-object NAME`
/// (the admission's own reading of the sidecar's arguments).
pub use crate::workload::in_place::parse_reads as consumed;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_start_takes_the_view_and_never_restarts_for_it() {
        let started = Started::new(None, "h1".into());
        assert_eq!(started.next(Some("h1"), Some("h1")), Next::Wait);
        // A Pod stamped before the data changed: the app already started with the new data.
        let started = Started::new(None, "h2".into());
        assert_eq!(started.next(Some("h1"), Some("h2")), Next::Wait);
        assert_eq!(started.next(Some("h2"), Some("h2")), Next::Wait);
    }

    #[test]
    fn a_change_restarts_once_the_data_has_arrived() {
        let started = Started::new(Some("h1".into()), "h1".into());
        assert_eq!(
            started.next(Some("h2"), Some("h1")),
            Next::Wait,
            "data not there yet"
        );
        assert_eq!(
            started.next(Some("h1"), Some("h2")),
            Next::Wait,
            "not desired yet"
        );
        assert_eq!(
            started.next(Some("h2"), None),
            Next::Wait,
            "view unreadable"
        );
        assert_eq!(
            started.next(None, Some("h2")),
            Next::Wait,
            "no desired hash"
        );
        assert_eq!(
            started.next(Some("h2"), Some("h2")),
            Next::Restart { hash: "h2".into() }
        );
        // After the restart, the sidecar starts again with what it recorded: no second restart.
        let again = Started::new(Some("h2".into()), "h2".into());
        assert_eq!(again.next(Some("h2"), Some("h2")), Next::Wait);
    }

    #[test]
    fn a_sidecar_restarted_alone_keeps_what_the_app_started_with() {
        let started = Started::new(Some("h1".into()), "h2".into());
        assert_eq!(
            started.next(Some("h2"), Some("h2")),
            Next::Restart { hash: "h2".into() }
        );
    }

    #[test]
    fn hash_files_are_trimmed_and_empty_is_none() {
        assert_eq!(read_hash(""), None);
        assert_eq!(read_hash(" \n"), None);
        assert_eq!(read_hash("sha256:ab\n"), Some("sha256:ab".into()));
    }

    #[test]
    fn env_keys_name_a_configmap_and_a_key() {
        let got = consumed(&["env/a".into(), "env/b".into()], &["all".into()]).unwrap();
        let names: Vec<String> = got.iter().map(|c| format!("{c:?}")).collect();
        assert_eq!(got.len(), 3, "{names:?}");
        for bad in ["env", "/a", "env/", "a/b/c"] {
            assert!(consumed(&[bad.into()], &[]).is_err(), "{bad}");
        }
    }
}
