//! Updates a directory exactly like the kubelet's AtomicWriter does for ConfigMap/Secret
//! volumes: a new `..YYYY_MM_DD_HH_MM_SS.N` directory with the files, a `..data_tmp` symlink
//! to it renamed over `..data`, user-visible `key -> ..data/key` symlinks for new keys,
//! removal of keys that went away, then removal of the old timestamped directory.

use std::collections::BTreeSet;
use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

static SEQUENCE: AtomicU64 = AtomicU64::new(0);

/// A kubelet-managed volume directory.
pub struct AtomicDir {
    path: PathBuf,
}

impl AtomicDir {
    /// Creates `path` (if needed) and publishes `files` in it.
    pub fn create<K: AsRef<str>, V: AsRef<[u8]>>(path: &Path, files: &[(K, V)]) -> AtomicDir {
        fs::create_dir_all(path).expect("create volume dir");
        let dir = AtomicDir {
            path: path.to_path_buf(),
        };
        dir.update(files);
        dir
    }

    /// The volume directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Publishes a new version: `files` are `(key, value)`; keys may contain `/`.
    pub fn update<K: AsRef<str>, V: AsRef<[u8]>>(&self, files: &[(K, V)]) {
        self.prepare(files).publish();
    }

    /// Writes the new timestamped directory and `..data_tmp`, stopping right before the
    /// rename (benchmarks time the rename alone).
    pub fn prepare<K: AsRef<str>, V: AsRef<[u8]>>(&self, files: &[(K, V)]) -> Pending {
        let data = self.path.join("..data");
        let old = fs::read_link(&data).ok();
        let ts_name = timestamped_name();
        let ts_dir = self.path.join(&ts_name);
        fs::create_dir(&ts_dir).expect("create timestamped dir");
        for (key, value) in files {
            let file = ts_dir.join(key.as_ref());
            if let Some(parent) = file.parent() {
                fs::create_dir_all(parent).expect("create key parent");
            }
            fs::write(&file, value).expect("write key");
        }
        let tmp = self.path.join("..data_tmp");
        let _ = fs::remove_file(&tmp);
        symlink(&ts_name, &tmp).expect("symlink ..data_tmp");
        Pending {
            dir: self.path.clone(),
            old,
            new_keys: files
                .iter()
                .map(|(key, _)| top_level(key.as_ref()))
                .collect(),
        }
    }
}

/// A prepared update: call [`Pending::rename`] then [`Pending::finish`], or
/// [`Pending::publish`] for both.
pub struct Pending {
    dir: PathBuf,
    old: Option<PathBuf>,
    new_keys: BTreeSet<String>,
}

impl Pending {
    /// The atomic step: `..data_tmp` renamed over `..data`.
    pub fn rename(&self) {
        fs::rename(self.dir.join("..data_tmp"), self.dir.join("..data")).expect("rename ..data");
    }

    /// The rest: user-visible symlinks, stale keys removed, old timestamped dir removed.
    pub fn finish(self) {
        for key in &self.new_keys {
            let visible = self.dir.join(key);
            if fs::symlink_metadata(&visible).is_err() {
                symlink(format!("..data/{key}"), &visible).expect("symlink user-visible key");
            }
        }
        for entry in fs::read_dir(&self.dir).expect("list volume dir") {
            let name = entry
                .expect("entry")
                .file_name()
                .to_string_lossy()
                .into_owned();
            if !name.starts_with("..") && !self.new_keys.contains(&name) {
                let _ = fs::remove_file(self.dir.join(&name));
            }
        }
        if let Some(old) = self.old {
            let _ = fs::remove_dir_all(self.dir.join(old));
        }
    }

    /// Rename and finish.
    pub fn publish(self) {
        self.rename();
        self.finish();
    }
}

fn top_level(key: &str) -> String {
    key.split('/').next().unwrap_or(key).to_owned()
}

/// `..YYYY_MM_DD_HH_MM_SS.N` in UTC, as the kubelet names them (N made unique here).
fn timestamped_name() -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970");
    let secs = now.as_secs();
    let (days, rest) = (secs / 86_400, secs % 86_400);
    let (year, month, day) = civil_from_days(days as i64);
    let sequence = SEQUENCE.fetch_add(1, Ordering::Relaxed);
    format!(
        "..{year:04}_{month:02}_{day:02}_{:02}_{:02}_{:02}.{}{sequence:03}",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60,
        now.subsec_nanos()
    )
}

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// Reads a user-visible key the way the app does (through the symlinks).
pub fn read_key(dir: &Path, key: &str) -> Option<String> {
    fs::read_to_string(dir.join(key)).ok()
}
