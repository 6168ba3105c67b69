//! Content hash of a watched directory: a digest of exactly what the app would read, through
//! the kubelet's user-visible symlinks (`key -> ..data/key`); its `..` bookkeeping entries are
//! skipped. A directory that does not exist hashes as [`ContentHash::Absent`], so deletion and
//! re-creation are changes like any other.

use std::ffi::OsString;
use std::fmt;
use std::fs;
use std::io::{self, Read};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

/// Deepest nesting followed below a watched directory (guards against symlink loops).
const MAX_DEPTH: usize = 16;

/// The digest of one watched path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ContentHash {
    /// The path does not exist (yet, or any more).
    Absent,
    /// SHA-256 over the sorted names and contents the app would read.
    Present([u8; 32]),
    /// HMAC-SHA256 of a [`ContentHash::Present`] digest under a key that never leaves the
    /// process: for Secret data, so the hash shown in logs and metrics reveals nothing.
    Private([u8; 32]),
}

impl ContentHash {
    /// A short form for log lines: the first 12 hex digits, or `absent`.
    pub fn short(&self) -> String {
        match self {
            ContentHash::Absent => "absent".to_owned(),
            ContentHash::Present(digest) | ContentHash::Private(digest) => {
                hex::encode(&digest[..6])
            }
        }
    }

    /// This digest keyed with `key` (absent stays absent), for Secret data.
    pub fn private(self, key: &[u8; 32]) -> ContentHash {
        match self {
            ContentHash::Present(digest) => {
                let mut mac =
                    Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes any key length");
                mac.update(&digest);
                ContentHash::Private(mac.finalize().into_bytes().into())
            }
            other => other,
        }
    }
}

impl fmt::Display for ContentHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ContentHash::Absent => f.write_str("absent"),
            ContentHash::Present(digest) => write!(f, "sha256:{}", hex::encode(digest)),
            ContentHash::Private(digest) => write!(f, "private:{}", hex::encode(digest)),
        }
    }
}

/// What hashing a path found: the digest, and entries that exist but could not be read (their
/// error kind is part of the digest, so a permission fix counts as a change).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hashed {
    pub hash: ContentHash,
    pub unreadable: Vec<String>,
}

/// Hashes what an app would read at `path`: a directory's visible entries (recursively,
/// following symlinks), a single file's bytes, or [`ContentHash::Absent`]. It runs before the
/// app is told, so it asks the kernel little: each entry is opened, then `fstat`ed.
pub fn hash_path(path: &Path) -> Hashed {
    hash_path_listed(path, &mut None)
}

/// The visible names of a watched directory, sorted, as listed when it was last hashed.
pub type Names = Vec<OsString>;

/// [`hash_path`], reusing the names `listed` last time if any, and keeping those it lists.
/// The kubelet's swap renames only `..` names, so listing again (which also waits for the
/// kubelet's rename) can mostly be skipped; the caller forgets `listed` when names may have
/// come or gone, and a reused name that is gone makes this list again.
pub fn hash_path_listed(path: &Path, listed: &mut Option<Names>) -> Hashed {
    if let Some(names) = listed.as_deref() {
        let mut walk = Walk::default();
        if walk.names(path, names, 0) {
            return walk.finish();
        }
    }
    *listed = None;
    let mut walk = Walk::default();
    match fs::read_dir(path) {
        Err(err) if err.kind() == io::ErrorKind::NotFound => {
            return Hashed {
                hash: ContentHash::Absent,
                unreadable: Vec::new(),
            };
        }
        Err(err) if err.kind() == io::ErrorKind::NotADirectory => {
            walk.entry(path, None, 0);
        }
        listing => *listed = walk.listing(path, listing, 0),
    }
    walk.finish()
}

/// One hashing pass over a watched path.
#[derive(Default)]
struct Walk {
    hasher: Sha256,
    unreadable: Vec<String>,
}

impl Walk {
    fn finish(self) -> Hashed {
        Hashed {
            hash: ContentHash::Present(self.hasher.finalize().into()),
            unreadable: self.unreadable,
        }
    }

    /// Hashes the visible entries of `dir` and returns their names (`None`: unreadable).
    fn listing(
        &mut self,
        dir: &Path,
        listing: io::Result<fs::ReadDir>,
        depth: usize,
    ) -> Option<Names> {
        match listing {
            Ok(entries) => {
                let names = visible_names(entries);
                self.names(dir, &names, depth);
                Some(names)
            }
            Err(err) => {
                let meta = fs::metadata(dir).ok();
                self.record_unreadable(dir, &err, meta.as_ref());
                None
            }
        }
    }

    /// Hashes the entries `names` of `dir`; returns whether every name was still there (a
    /// dangling symlink is there: it is hashed as an absent entry).
    fn names(&mut self, dir: &Path, names: &[OsString], depth: usize) -> bool {
        let mut all_there = true;
        for name in names {
            let path = dir.join(name);
            let found = self.entry(&path, Some(name.as_encoded_bytes()), depth);
            all_there &= found || fs::symlink_metadata(&path).is_ok();
        }
        all_there
    }

    /// Hashes one entry named `name`, or the watched path itself when that is a file (`None`);
    /// `false` if nothing could be opened there.
    fn entry(&mut self, path: &Path, name: Option<&[u8]>, depth: usize) -> bool {
        let tag = |walk: &mut Walk, tag: u8| {
            if let Some(name) = name {
                walk.put(tag, name);
            }
        };
        let opened = fs::File::open(path).and_then(|file| Ok((file.metadata()?, file)));
        match opened {
            // A dangling symlink or an entry removed while we read: the app sees nothing.
            Err(err) if err.kind() == io::ErrorKind::NotFound => {
                tag(self, b'A');
                return false;
            }
            // The path through a directory that is no longer one: as the app sees it.
            Err(err) if err.kind() == io::ErrorKind::NotADirectory => {
                self.record_unreadable(path, &err, None);
                return false;
            }
            Err(err) => {
                let meta = fs::metadata(path).ok();
                let dir = meta.as_ref().map(fs::Metadata::is_dir);
                if let Some(dir) = dir {
                    tag(self, if dir { b'D' } else { b'F' });
                }
                self.record_unreadable(path, &err, meta.as_ref());
                if dir == Some(true) {
                    tag(self, b'E');
                }
            }
            Ok((meta, _)) if meta.is_dir() => {
                tag(self, b'D');
                if depth < MAX_DEPTH {
                    self.listing(path, fs::read_dir(path), depth + 1);
                }
                tag(self, b'E');
            }
            Ok((meta, file)) => {
                tag(self, b'F');
                match read_all(file, meta.len()) {
                    Ok(bytes) => self.put(b'C', &bytes),
                    Err(err) => self.record_unreadable(path, &err, Some(&meta)),
                }
            }
        }
        true
    }

    /// Records an entry the watcher may not read. Its identity (inode, size, mtime) stands in
    /// for its content: the kubelet writes every update to new files, so updates are still
    /// seen (an identical update then counts as a change too).
    fn record_unreadable(&mut self, path: &Path, err: &io::Error, meta: Option<&fs::Metadata>) {
        let kind = format!("{:?}", err.kind());
        self.put(b'U', kind.as_bytes());
        if let Some(meta) = meta {
            let identity = [
                meta.dev(),
                meta.ino(),
                meta.size(),
                meta.mtime() as u64,
                meta.mtime_nsec() as u64,
            ];
            for value in identity {
                self.hasher.update(value.to_le_bytes());
            }
        }
        self.unreadable.push(format!("{}: {err}", path.display()));
    }

    /// Appends one tagged, length-prefixed record: no two trees share an encoding.
    fn put(&mut self, tag: u8, bytes: &[u8]) {
        self.hasher.update([tag]);
        self.hasher.update((bytes.len() as u64).to_le_bytes());
        self.hasher.update(bytes);
    }
}

/// The names in a listing that the app sees (not the kubelet's `..` bookkeeping), sorted.
fn visible_names(entries: fs::ReadDir) -> Names {
    let mut names: Names = entries
        .filter_map(|entry| entry.ok().map(|entry| entry.file_name()))
        .filter(|name| !name.as_encoded_bytes().starts_with(b".."))
        .collect();
    names.sort();
    names
}

/// Reads a whole open file, sized by the metadata already at hand: through `take`, which skips
/// the `statx` and `lseek` that `File::read_to_end` spends on sizing its buffer.
fn read_all(file: fs::File, size_hint: u64) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::with_capacity(usize::try_from(size_hint).unwrap_or(0).saturating_add(1));
    file.take(u64::MAX).read_to_end(&mut bytes)?;
    Ok(bytes)
}

#[cfg(test)]
mod tests;
