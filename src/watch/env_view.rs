//! Restart in place. The sidecar exits with the restart code once the Pod's desired env hash (a
//! downward API file written by the rollout controller) equals the hash of its own mounted copy
//! of the ConfigMaps read through env, and that differs from the hash the containers started
//! with. Equal means the kubelet's cache, which filled the copy, has the new data, so the
//! containers it restarts resolve env from it. What they started with is kept in an `emptyDir`:
//! on the first start it is the sidecar's view (the app starts after its native sidecar, from a
//! cache at least that new), and before each restart the value restarted for. So the initial
//! state never restarts the Pod, one change never restarts it twice, and a sidecar restarted
//! alone (an OOM kill) does not take new data for what the app runs with.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::time::{Instant, MissedTickBehavior, interval_at};
use tracing::{info, warn};

use super::inotify_watches::{WatchSet, warn_unset};
use crate::hash::{self, ConfigData, ConfigId, ConfigObject, Consumed, Lookup};

/// The env hash the Pod's containers started with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Started(pub String);

impl Started {
    /// What the state directory kept, else (the first start) the view; `None` while neither
    /// can be read.
    pub fn new(kept: Option<String>, view: Option<String>) -> Option<Self> {
        kept.or(view).map(Started)
    }

    /// The hash to restart every container for (record it as what they start with, then exit
    /// with the code), given the Pod's desired hash (`None`: not written) and the view (`None`:
    /// could not be read, e.g. mid-update); `None`: wait (no desired hash, the data has not
    /// arrived, or nothing changed).
    pub fn next(&self, desired: Option<&str>, view: Option<&str>) -> Option<String> {
        match (desired, view) {
            (Some(desired), Some(view)) if desired == view && view != self.0 => {
                Some(desired.to_owned())
            }
            _ => None,
        }
    }
}

/// A file's text as a hash: trimmed, `None` when empty (the downward API writes an empty file
/// for an annotation the Pod does not have).
pub fn read_hash(text: &str) -> Option<String> {
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_owned())
}

/// The name of the file in the state directory.
const STARTED_FILE: &str = "env-hash";

/// What the sidecar restarts its Pod for.
#[derive(Debug, Clone)]
pub struct EnvWatch {
    /// The downward API file holding the Pod's desired env hash.
    pub hash_file: PathBuf,
    /// Where the hash the containers started with is kept.
    pub state_dir: PathBuf,
    /// Where each ConfigMap is mounted: `<root>/<name>`.
    pub root: PathBuf,
    /// What the Pod's containers read through env.
    pub consumed: BTreeSet<Consumed>,
    /// Safety-net re-check period.
    pub resync: Duration,
}

/// Why a part of the view could not be read.
#[derive(Debug, thiserror::Error)]
pub enum EnvViewError {
    #[error("failed to read {path}")]
    ReadFailed {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("failed to record the env hash in {path}")]
    WriteFailed {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// The env hash of the mounted ConfigMaps: a directory that does not exist counts as a
/// ConfigMap that does not exist, a missing file as a missing key.
pub fn view_hash(root: &Path, consumed: &BTreeSet<Consumed>) -> Result<String, EnvViewError> {
    let mut wanted: BTreeMap<&ConfigId, Option<BTreeSet<&str>>> = BTreeMap::new();
    for item in consumed {
        let keys = wanted
            .entry(item.id())
            .or_insert_with(|| Some(BTreeSet::new()));
        match (item, keys) {
            (Consumed::Key(_, key), Some(keys)) => drop(keys.insert(key.as_str())),
            (Consumed::Whole(_), keys) => *keys = None,
            (Consumed::Key(..), None) => {}
        }
    }
    let mut data = ConfigData::new();
    for (id, keys) in wanted {
        let dir = root.join(&id.name);
        let names = match keys {
            Some(keys) => keys.into_iter().map(str::to_owned).collect(),
            None => match visible_names(&dir) {
                Ok(names) => names,
                Err(err) if err.kind() == io::ErrorKind::NotFound => {
                    data.insert(id.clone(), Lookup::NotFound);
                    continue;
                }
                Err(source) => return Err(EnvViewError::ReadFailed { path: dir, source }),
            },
        };
        let mut values = Vec::new();
        for name in names {
            let path = dir.join(&name);
            match fs::read(&path) {
                Ok(bytes) => values.push((name, bytes)),
                Err(err) if err.kind() == io::ErrorKind::NotFound => {}
                Err(source) => return Err(EnvViewError::ReadFailed { path, source }),
            }
        }
        let object = ConfigObject::from_values(id, values, None).unwrap_or_default();
        data.insert(id.clone(), Lookup::Found(object));
    }
    Ok(hash::env_hash(consumed, &data).unwrap_or_default())
}

/// The keys of a mounted ConfigMap (not the kubelet's `..` entries).
fn visible_names(dir: &Path) -> io::Result<Vec<String>> {
    let mut names = Vec::new();
    for entry in fs::read_dir(dir)? {
        let name = entry?.file_name().to_string_lossy().into_owned();
        if !name.starts_with("..") {
            names.push(name);
        }
    }
    Ok(names)
}

fn read_hash_file(path: &Path) -> Option<String> {
    fs::read_to_string(path).ok().as_deref().and_then(read_hash)
}

/// Records `hash` as what the containers start with (written beside, then renamed over).
fn record(state_dir: &Path, hash: &str) -> Result<(), EnvViewError> {
    let path = state_dir.join(STARTED_FILE);
    let temporary = state_dir.join(format!(".{STARTED_FILE}.tmp"));
    fs::write(&temporary, format!("{hash}\n"))
        .and_then(|()| fs::rename(&temporary, &path))
        .map_err(|source| EnvViewError::WriteFailed { path, source })
}

/// `sha256:` and 12 hex digits, for log lines.
fn short(hash: &str) -> &str {
    hash.get(..19).unwrap_or(hash)
}

/// Watches until the Pod is to restart; returns once that is recorded. Errors only when inotify
/// cannot be set up at all.
pub async fn run(config: EnvWatch) -> anyhow::Result<()> {
    let parent = config.hash_file.parent().map(Path::to_path_buf);
    let ids: BTreeSet<&ConfigId> = config.consumed.iter().map(Consumed::id).collect();
    let dirs = ids.iter().map(|id| config.root.join(&id.name));
    let (mut watches, errors) = WatchSet::new(parent.into_iter().chain(dirs).collect())?;
    warn_unset(errors);
    let mut resync = interval_at(Instant::now() + config.resync, config.resync);
    resync.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut checker = Checker {
        config,
        started: None,
        said: None,
    };
    loop {
        if checker.check() {
            return Ok(());
        }
        tokio::select! {
            batch = watches.next_batch() => match batch {
                Ok((_, effect)) if effect.rewatch => warn_unset(watches.rearm()),
                Ok(_) => {}
                Err(err) => {
                    warn!(error = %crate::report::one_line(&err), "reading events failed; re-checking");
                    warn_unset(watches.rearm());
                }
            },
            _ = resync.tick() => warn_unset(watches.rearm()),
        }
    }
}

struct Checker {
    config: EnvWatch,
    /// What the containers started with, once known.
    started: Option<Started>,
    /// The desired hash last said to be waited for.
    said: Option<String>,
}

impl Checker {
    /// Reads the desired hash and the view; returns `true` once the Pod is to restart and that
    /// is recorded.
    fn check(&mut self) -> bool {
        let config = &self.config;
        let view = view_hash(&config.root, &config.consumed)
            .inspect_err(|err| warn!(error = %crate::report::one_line(err), "env view unreadable; re-checking on the next change"))
            .ok();
        let desired = read_hash_file(&config.hash_file);
        if self.started.is_none() {
            self.started = self.first_check(view.clone());
        }
        let Some(started) = &self.started else {
            return false;
        };
        match started.next(desired.as_deref(), view.as_deref()) {
            Some(hash) => match record(&config.state_dir, &hash) {
                Ok(()) => {
                    info!(
                        from = short(&started.0),
                        to = short(&hash),
                        "env config changed: restarting the pod in place"
                    );
                    return true;
                }
                Err(err) => {
                    warn!(error = %crate::report::one_line(&err), "not restarting: a restart could not be told from the next one")
                }
            },
            None => {
                let pending = desired.filter(|d| *d != started.0 && view.as_ref() != Some(d));
                if pending.is_some() && pending != self.said {
                    let desired = pending.as_deref().map_or("", short);
                    let view = view.as_deref().map_or("unreadable", short);
                    info!(
                        desired,
                        view, "waiting for the kubelet to mount the desired env config"
                    );
                }
                self.said = pending;
            }
        }
        false
    }

    /// What the containers started with: what the state directory kept, else (the first
    /// start) the view, which is then kept; unknown while neither can be read.
    fn first_check(&self, view: Option<String>) -> Option<Started> {
        let kept = read_hash_file(&self.config.state_dir.join(STARTED_FILE));
        if kept.is_none()
            && let Some(view) = &view
            && let Err(err) = record(&self.config.state_dir, view)
        {
            warn!(error = %crate::report::one_line(&err), "the env hash is not kept; a restart of this sidecar alone takes the data it sees then");
        }
        let started = Started::new(kept, view)?;
        info!(
            keys = self.config.consumed.len(),
            started = short(&started.0),
            "restart in place: watching the env config"
        );
        Some(started)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scratch::Scratch;

    fn key(name: &str, key: &str) -> Consumed {
        Consumed::Key(ConfigId::config_map(name), key.to_owned())
    }

    /// Lays out a ConfigMap as the kubelet does: `..data` pointing at a timestamped directory,
    /// each key a symlink through it.
    fn mount(root: &Path, name: &str, pairs: &[(&str, &str)], version: &str) {
        let dir = root.join(name);
        let data = dir.join(format!("..{version}"));
        fs::create_dir_all(&data).unwrap();
        for (k, v) in pairs {
            fs::write(data.join(k), v).unwrap();
        }
        let link = dir.join("..data_tmp");
        std::os::unix::fs::symlink(format!("..{version}"), &link).unwrap();
        fs::rename(&link, dir.join("..data")).unwrap();
        for (k, _) in pairs {
            let _ = std::os::unix::fs::symlink(format!("..data/{k}"), dir.join(k));
        }
    }

    #[test]
    fn the_view_hashes_as_the_webhook_does() {
        let scratch = Scratch::new("env-view");
        let root = &scratch.0;
        mount(root, "env", &[("a", "1"), ("b", "2")], "v1");
        mount(root, "all", &[("x", "y")], "v1");
        let consumed: BTreeSet<Consumed> = [
            key("env", "a"),
            key("env", "missing"),
            Consumed::Whole(ConfigId::config_map("all")),
            Consumed::Whole(ConfigId::config_map("absent")),
        ]
        .into();
        let digests = |pairs: &[(&str, &str)], name: &str| {
            let id = ConfigId::config_map(name);
            let values = pairs.iter().map(|(k, v)| (*k, v.as_bytes()));
            Lookup::Found(ConfigObject::from_values(&id, values, None).unwrap())
        };
        let data = ConfigData::from([
            (
                ConfigId::config_map("env"),
                digests(&[("a", "1"), ("b", "2")], "env"),
            ),
            (ConfigId::config_map("all"), digests(&[("x", "y")], "all")),
        ]);
        let want = hash::env_hash(&consumed, &data).unwrap();
        assert_eq!(view_hash(root, &consumed).unwrap(), want);
        mount(root, "env", &[("a", "1"), ("b", "changed")], "v2");
        assert_eq!(view_hash(root, &consumed).unwrap(), want, "b is not read");
        mount(root, "env", &[("a", "changed")], "v3");
        assert_ne!(view_hash(root, &consumed).unwrap(), want);
    }

    #[test]
    fn the_state_is_recorded_and_read_back() {
        let scratch = Scratch::new("env-state");
        record(&scratch.0, "sha256:1").unwrap();
        assert_eq!(
            read_hash_file(&scratch.0.join(STARTED_FILE)),
            Some("sha256:1".into())
        );
        record(&scratch.0, "sha256:2").unwrap();
        assert_eq!(
            read_hash_file(&scratch.0.join(STARTED_FILE)),
            Some("sha256:2".into())
        );
        assert!(record(&scratch.0.join("missing"), "x").is_err());
        assert_eq!(read_hash_file(&scratch.0.join("nothing")), None);
    }
}

#[cfg(test)]
mod restart_tests {
    use super::*;

    #[test]
    fn the_first_start_takes_the_view_and_never_restarts_for_it() {
        let started = Started::new(None, Some("h1".into())).unwrap();
        assert_eq!(started.next(Some("h1"), Some("h1")), None);
        // A Pod stamped before the data changed: the app already started with the new data.
        let started = Started::new(None, Some("h2".into())).unwrap();
        assert_eq!(started.next(Some("h1"), Some("h2")), None);
        assert_eq!(started.next(Some("h2"), Some("h2")), None);
    }

    #[test]
    fn a_change_restarts_once_the_data_has_arrived() {
        let started = Started::new(Some("h1".into()), Some("h1".into())).unwrap();
        assert_eq!(
            started.next(Some("h2"), Some("h1")),
            None,
            "data not there yet"
        );
        assert_eq!(
            started.next(Some("h1"), Some("h2")),
            None,
            "not desired yet"
        );
        assert_eq!(started.next(Some("h2"), None), None, "view unreadable");
        assert_eq!(started.next(None, Some("h2")), None, "no desired hash");
        assert_eq!(started.next(Some("h2"), Some("h2")), Some("h2".into()));
        // After the restart, the sidecar starts again with what it recorded: no second restart.
        let again = Started::new(Some("h2".into()), Some("h2".into())).unwrap();
        assert_eq!(again.next(Some("h2"), Some("h2")), None);
    }

    #[test]
    fn what_was_kept_counts_even_while_the_view_is_unreadable() {
        assert_eq!(Started::new(None, None), None);
        assert_eq!(
            Started::new(Some("h1".into()), None),
            Some(Started("h1".into()))
        );
    }

    #[test]
    fn a_sidecar_restarted_alone_keeps_what_the_app_started_with() {
        let started = Started::new(Some("h1".into()), Some("h2".into())).unwrap();
        assert_eq!(started.next(Some("h2"), Some("h2")), Some("h2".into()));
    }

    #[test]
    fn hash_files_are_trimmed_and_empty_is_none() {
        assert_eq!(read_hash(""), None);
        assert_eq!(read_hash(" \n"), None);
        assert_eq!(read_hash("sha256:ab\n"), Some("sha256:ab".into()));
    }

    #[test]
    fn env_keys_name_a_configmap_and_a_key() {
        let got = crate::workload::in_place::parse_reads(
            &["env/a".into(), "env/b".into()],
            &["all".into()],
        )
        .unwrap();
        let names: Vec<String> = got.iter().map(|c| format!("{c:?}")).collect();
        assert_eq!(got.len(), 3, "{names:?}");
        for bad in ["env", "/a", "env/", "a/b/c"] {
            assert!(
                crate::workload::in_place::parse_reads(&[bad.into()], &[]).is_err(),
                "{bad}"
            );
        }
    }
}
