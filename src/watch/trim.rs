//! Giving back the mapped pages of code the watcher is not running.
//!
//! The watcher shares one binary with the webhook; start-up and each reload touch code all over
//! it, and the kernel maps 64 KiB around every page it faults in, which stays in RSS while the
//! watcher sleeps. So after start-up, and at each `--resync` that finds nothing to do, the
//! watcher drops its mappings of its executable's clean pages (`MADV_DONTNEED`; which qualify is
//! decided by the pure [`droppable`]). They stay in the page cache, shared with every process of
//! the same image; the next reload after a quiet period maps a few dozen back (minor faults).

use std::ops::Range;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// Errors of [`CodePages`].
#[derive(Debug, thiserror::Error)]
pub enum TrimError {
    /// `/proc/self/smaps` or `/proc/self/exe` could not be read.
    #[error("failed to read {path}")]
    Read {
        path: &'static str,
        #[source]
        source: std::io::Error,
    },
    /// The kernel refused the advice.
    #[error("failed to drop the pages at {start:#x}")]
    Advise {
        /// Start of the mapping.
        start: usize,
        #[source]
        source: nix::errno::Errno,
    },
}

/// The file a mapping shows: path and inode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MappedFile {
    /// The path, as `/proc/self/smaps` shows it.
    pub path: String,
    pub inode: u64,
}

/// The address ranges in `smaps` whose pages can be dropped without losing anything: private,
/// read-only mappings of `file` that hold no anonymous (copy-on-write) page. Every page of such
/// a mapping is an unmodified page of the file, so a later access reads the same bytes back.
/// Writable mappings, and relocated read-only data (which holds anonymous pages), never qualify.
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
        let private_read_only = self.perms.len() == 4
            && self.perms.starts_with('r')
            && self.perms.as_bytes()[1] == b'-'
            && self.perms.ends_with('p');
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
    Some(Mapping {
        range,
        perms,
        inode,
        // The path is the rest of the line, and may itself contain spaces.
        path: after_fields(line, 5).trim_end(),
    })
}

/// What follows the first `count` whitespace-separated fields of `line`.
fn after_fields(line: &str, count: usize) -> &str {
    let mut rest = line.trim_start();
    for _ in 0..count {
        let end = rest
            .find(|c: char| c.is_ascii_whitespace())
            .unwrap_or(rest.len());
        rest = rest[end..].trim_start();
    }
    rest
}

/// This process's own executable, whose clean mapped pages can be given back.
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

    /// Drops this process's mappings of the executable's clean pages; returns how many bytes
    /// of address space were advised.
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
