//! The inotify watches on the configured paths: each is watched itself when it exists, else
//! through its nearest existing ancestor until it appears; re-planned when a watch goes away.

use std::collections::HashMap;
use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};

use futures_util::{FutureExt, StreamExt};
use inotify::{EventMask, EventOwned, EventStream, Inotify, WatchDescriptor, WatchMask};

use tracing::warn;

use super::events::{Effect, EventKind, WatchRole, classify};

/// Errors of the watch set.
#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    #[error("failed to initialise inotify")]
    InitFailed(#[source] io::Error),
    #[error("failed to read inotify events")]
    ReadFailed(#[source] io::Error),
    #[error("failed to watch {path}")]
    AddFailed {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// Logs the watches that could not be set.
pub fn warn_unset(errors: Vec<WatchError>) {
    for err in errors {
        warn!(error = %crate::report::one_line(&err), "watch not set; will retry on the next re-check");
    }
}

/// How often one re-plan may go deeper because the path appeared meanwhile.
const MAX_REPLANS: usize = 8;

/// What is watched on every path: entries appearing, vanishing, closed after writing (not
/// each write: a half-written file is not a new version); the path itself going away.
fn mask() -> WatchMask {
    WatchMask::CREATE
        | WatchMask::DELETE
        | WatchMask::MOVED_FROM
        | WatchMask::MOVED_TO
        | WatchMask::CLOSE_WRITE
        | WatchMask::DELETE_SELF
        | WatchMask::MOVE_SELF
}

/// Where to watch for `target`: itself if it exists, else its nearest existing ancestor
/// together with the name leading towards `target`.
pub fn plan(target: &Path, exists: impl Fn(&Path) -> bool) -> (PathBuf, WatchRole) {
    if exists(target) {
        return (target.to_path_buf(), WatchRole::Own);
    }
    let mut child = target;
    while let Some(parent) = child.parent() {
        let parent = if parent.as_os_str().is_empty() {
            Path::new(".")
        } else {
            parent
        };
        if exists(parent) {
            let next = child.file_name().map(OsString::from).unwrap_or_default();
            return (parent.to_path_buf(), WatchRole::Ancestor { next });
        }
        child = parent;
    }
    (PathBuf::from("/"), WatchRole::Own)
}

/// The kind of one inotify event mask.
pub fn kind_of(mask: EventMask) -> EventKind {
    if mask.contains(EventMask::Q_OVERFLOW) {
        EventKind::Overflow
    } else if mask.intersects(EventMask::IGNORED | EventMask::DELETE_SELF | EventMask::MOVE_SELF) {
        EventKind::WatchGone
    } else if mask.intersects(EventMask::CREATE | EventMask::MOVED_TO) {
        EventKind::Appeared
    } else if mask.intersects(EventMask::DELETE | EventMask::MOVED_FROM) {
        EventKind::Vanished
    } else if mask.intersects(EventMask::MODIFY | EventMask::CLOSE_WRITE) {
        EventKind::Written
    } else {
        EventKind::Other
    }
}

/// The live watches.
pub struct WatchSet {
    stream: EventStream<Vec<u8>>,
    targets: Vec<PathBuf>,
    roles: HashMap<WatchDescriptor, Vec<WatchRole>>,
}

impl WatchSet {
    /// Sets up inotify (on the current tokio runtime) and watches every target.
    pub fn new(targets: Vec<PathBuf>) -> Result<(WatchSet, Vec<WatchError>), WatchError> {
        let inotify = Inotify::init().map_err(WatchError::InitFailed)?;
        let stream = inotify
            .into_event_stream(vec![0; 16 * 1024])
            .map_err(WatchError::InitFailed)?;
        let mut set = WatchSet {
            stream,
            targets,
            roles: HashMap::new(),
        };
        let errors = set.rearm();
        Ok((set, errors))
    }

    /// Re-plans every watch (after a watch went away, and on every resync); returns the
    /// watches that could not be added (retried on the next re-plan). An ancestor is watched
    /// *before* checking again whether the path below it appeared, so none is missed.
    pub fn rearm(&mut self) -> Vec<WatchError> {
        let mut errors = Vec::new();
        let mut roles: HashMap<WatchDescriptor, Vec<WatchRole>> = HashMap::new();
        let mut added = Vec::new();
        let mut watches = self.stream.watches();
        for target in &self.targets {
            let mut result = None;
            for _ in 0..MAX_REPLANS {
                let (path, role) = plan(target, |p| p.exists());
                match watches.add(&path, mask()) {
                    Ok(wd) => {
                        added.push(wd.clone());
                        let settled = match &role {
                            WatchRole::Own => true,
                            WatchRole::Ancestor { next } => !path.join(next).exists(),
                        };
                        result = Some(Ok((wd, role)));
                        if settled {
                            break;
                        }
                    }
                    // The path may vanish between the check and the watch: plan again.
                    Err(source) => result = Some(Err(WatchError::AddFailed { path, source })),
                }
            }
            match result {
                Some(Ok((wd, role))) => roles.entry(wd).or_default().push(role),
                Some(Err(err)) => errors.push(err),
                None => {}
            }
        }
        let unused: Vec<WatchDescriptor> = self
            .roles
            .keys()
            .chain(added.iter())
            .filter(|wd| !roles.contains_key(*wd))
            .cloned()
            .collect();
        for wd in unused {
            let _ = watches.remove(wd);
        }
        self.roles = roles;
        errors
    }

    /// Waits for events, then takes every one already available; returns how many were
    /// read and what they mean together.
    pub async fn next_batch(&mut self) -> Result<(u64, Effect), WatchError> {
        let mut next = Some(self.stream.next().await);
        let (mut count, mut effect) = (0, Effect::default());
        while let Some(event) = next {
            let ended = || io::Error::new(io::ErrorKind::UnexpectedEof, "the inotify stream ended");
            let event = event.unwrap_or_else(|| Err(ended()));
            let event = event.map_err(WatchError::ReadFailed)?;
            count += 1;
            effect = effect.union(self.effect_of(&event));
            next = self.stream.next().now_or_never();
        }
        Ok((count, effect))
    }

    fn effect_of(&self, event: &EventOwned) -> Effect {
        let kind = kind_of(event.mask);
        if kind == EventKind::Overflow {
            return classify(&WatchRole::Own, kind, None);
        }
        self.roles
            .get(&event.wd)
            .into_iter()
            .flatten()
            .fold(Effect::default(), |effect, role| {
                effect.union(classify(role, kind, event.name.as_deref()))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_existing_path_is_watched_itself() {
        let (path, role) = plan(Path::new("/etc/config"), |_| true);
        assert_eq!(path, Path::new("/etc/config"));
        assert_eq!(role, WatchRole::Own);
    }

    #[test]
    fn a_missing_path_is_watched_through_its_nearest_ancestor() {
        for (case, target, existing, watched) in [
            (
                "nearest ancestor",
                "/etc/config/app",
                &["/", "/etc"][..],
                "/etc",
            ),
            ("relative: the working directory", "config", &["."][..], "."),
        ] {
            let exists = |p: &Path| existing.iter().any(|e| p == Path::new(e));
            let (path, role) = plan(Path::new(target), exists);
            assert_eq!(path, Path::new(watched), "{case}");
            let next = "config".into();
            assert_eq!(role, WatchRole::Ancestor { next }, "{case}");
        }
    }

    #[test]
    fn event_masks_map_to_kinds() {
        for (mask, kind) in [
            (EventMask::MOVED_TO, EventKind::Appeared),
            (EventMask::CREATE | EventMask::ISDIR, EventKind::Appeared),
            (EventMask::MOVED_FROM, EventKind::Vanished),
            (EventMask::DELETE, EventKind::Vanished),
            (EventMask::CLOSE_WRITE, EventKind::Written),
            (EventMask::DELETE_SELF, EventKind::WatchGone),
            (EventMask::IGNORED, EventKind::WatchGone),
            (EventMask::Q_OVERFLOW, EventKind::Overflow),
            (EventMask::ACCESS, EventKind::Other),
        ] {
            assert_eq!(kind_of(mask), kind, "{mask:?}");
        }
    }
}
