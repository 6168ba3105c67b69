//! Scratch directories, removed on drop.

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use super::copies::copy_program;

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

/// A copy of `program` in `dir` that any user may run, for processes a test starts as another
/// user. The original may sit below directories only their owner can enter (a checkout in a
/// 0700 home directory or in `mktemp -d`), which another user cannot traverse; `dir` and every
/// directory above it must be traversable by others (a [`Scratch`] under `/tmp` is).
pub fn runnable_by_others(program: &Path, dir: &Path) -> PathBuf {
    for ancestor in dir.ancestors() {
        let mode = fs::metadata(ancestor)
            .unwrap_or_else(|e| panic!("failed to stat {}: {e}", ancestor.display()))
            .mode();
        assert!(
            mode & 0o001 != 0,
            "{} (mode {:o}) cannot be entered by other users, so a process started as another \
             user cannot reach {}: point TMPDIR at a directory like /tmp",
            ancestor.display(),
            mode & 0o7777,
            dir.display()
        );
    }
    let name = program
        .file_name()
        .expect("a program path ends in a file name");
    let copy = dir.join(name);
    copy_program(program, &copy);
    fs::set_permissions(&copy, fs::Permissions::from_mode(0o755)).expect("chmod the copy");
    copy
}
