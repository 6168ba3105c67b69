//! Scratch directories for the unit tests, removed when dropped: what a test makes, it removes.

use std::path::PathBuf;

/// A fresh, empty directory under the system's temporary directory; removed on drop.
pub struct Scratch(pub PathBuf);

impl Scratch {
    /// `ri-<tag>-<pid>-<nanos>`.
    pub fn new(tag: &str) -> Scratch {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let path = std::env::temp_dir().join(format!("ri-{tag}-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&path).unwrap();
        Scratch(path)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
