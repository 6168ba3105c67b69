//! Giving back the mapped pages of code the watcher is not running. It shares one binary with
//! the webhook; start-up and each reload touch code all over it, and the kernel maps 64 KiB
//! around every page it faults in, which stays in RSS while the watcher sleeps. So the watcher
//! drops its mappings of its executable's clean pages (`MADV_DONTNEED`) after start-up and at
//! each quiet `--resync`. They stay in the page cache; the next reload maps a few dozen back.

use std::ops::Range;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// Errors of [`CodePages`].
#[derive(Debug, thiserror::Error)]
pub enum TrimError {
    #[error("failed to read {path}")]
    Read {
        path: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("failed to drop the pages at {start:#x}")]
    Advise {
        /// Start of the mapping.
        start: usize,
        #[source]
        source: nix::errno::Errno,
    },
}

/// The file a mapping shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MappedFile {
    pub path: String,
    pub inode: u64,
}

/// The address ranges in `smaps` whose pages can be dropped without losing anything: private,
/// read-only mappings of `file` with no anonymous (copy-on-write) page, so every page is an
/// unmodified page of the file (relocated read-only data holds anonymous pages).
pub fn droppable(smaps: &str, file: &MappedFile) -> Vec<Range<usize>> {
    let mut found = Vec::new();
    let mut candidate: Option<Range<usize>> = None;
    for line in smaps.lines() {
        if let Some(mapping) = parse_header(line) {
            candidate = mapping.qualifies(file).then_some(mapping.range);
        } else if let Some(value) = line.strip_prefix("Anonymous:") {
            let anonymous_kb = value.trim().trim_end_matches("kB").trim();
            if let Some(range) = candidate.take()
                && anonymous_kb == "0"
            {
                found.push(range);
            }
        }
    }
    found
}

/// One `/proc/PID/smaps` header line.
struct Mapping<'a> {
    range: Range<usize>,
    perms: &'a str,
    inode: u64,
    path: &'a str,
}

impl Mapping<'_> {
    fn qualifies(&self, file: &MappedFile) -> bool {
        let private_read_only = matches!(self.perms.as_bytes(), [b'r', b'-', _, b'p']);
        private_read_only && self.inode == file.inode && self.path == file.path
    }
}

/// Parses `start-end perms offset dev inode [path]`; `None` for the `Key: value` lines.
fn parse_header(line: &str) -> Option<Mapping<'_>> {
    let mut fields = line.split_ascii_whitespace();
    let (start, end) = fields.next()?.split_once('-')?;
    let range = usize::from_str_radix(start, 16).ok()?..usize::from_str_radix(end, 16).ok()?;
    let perms = fields.next()?;
    // offset, device, then inode.
    let inode = fields.nth(2)?.parse().ok()?;
    // A file's path is absolute, the rest of the line (it may contain spaces); no field before
    // it holds a `/`.
    let path = line.find('/').map_or("", |at| line[at..].trim_end());
    Some(Mapping {
        range,
        perms,
        inode,
        path,
    })
}

/// This process's own executable.
#[derive(Debug, Clone)]
pub struct CodePages {
    exe: MappedFile,
}

impl CodePages {
    /// Finds this process's executable (once: it does not change while the process runs).
    pub fn of_this_process() -> Result<CodePages, TrimError> {
        let exe = Path::new("/proc/self/exe");
        let read = |source| TrimError::Read {
            path: "/proc/self/exe",
            source,
        };
        let path = std::fs::read_link(exe).map_err(read)?;
        let inode = std::fs::metadata(exe).map_err(read)?.ino();
        let path = path.to_string_lossy().into_owned();
        Ok(CodePages {
            exe: MappedFile { path, inode },
        })
    }

    /// Drops the mappings of the executable's clean pages; returns the bytes advised.
    pub fn drop_clean(&self) -> Result<usize, TrimError> {
        let smaps =
            std::fs::read_to_string("/proc/self/smaps").map_err(|source| TrimError::Read {
                path: "/proc/self/smaps",
                source,
            })?;
        let mut advised = 0;
        for range in droppable(&smaps, &self.exe) {
            advise_dont_need(&range)?;
            advised += range.len();
        }
        Ok(advised)
    }
}

#[allow(unsafe_code)]
fn advise_dont_need(range: &Range<usize>) -> Result<(), TrimError> {
    let advise_error = |source| TrimError::Advise {
        start: range.start,
        source,
    };
    let start = std::ptr::NonNull::new(range.start as *mut std::ffi::c_void)
        .ok_or(advise_error(nix::errno::Errno::EINVAL))?;
    // SAFETY: `range` is a whole private, read-only mapping of this executable with no
    // anonymous page (see `droppable`): every page in it is an unmodified page of the file,
    // and the file cannot change while it runs (ETXTBSY). Dropping the mapping of such pages
    // changes no byte any code can read; the next access faults the same page in again.
    unsafe {
        nix::sys::mman::madvise(
            start,
            range.len(),
            nix::sys::mman::MmapAdvise::MADV_DONTNEED,
        )
    }
    .map_err(advise_error)
}

#[cfg(test)]
mod tests;
