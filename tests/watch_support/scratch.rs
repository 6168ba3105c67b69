//! Scratch directories, removed on drop.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

static NEXT: AtomicU32 = AtomicU32::new(0);

/// A fresh directory under the system temp dir, world-readable (an unprivileged watcher
/// must be able to read it), removed with everything in it on drop.
pub struct Scratch {
    path: PathBuf,
}

impl Scratch {
    /// Creates `/tmp/ri-watch-<tag>-<pid>-<n>`.
    pub fn new(tag: &str) -> Scratch {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("ri-watch-{tag}-{}-{n}", std::process::id()));
        let _ = fs::remove_dir_all(&path);
        fs::create_dir_all(&path).expect("create scratch dir");
        fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).expect("chmod scratch");
        Scratch { path }
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A path inside it.
    pub fn join(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.path);
    }
}
