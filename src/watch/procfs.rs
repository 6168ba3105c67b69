//! Reading the process list from `/proc` (thin I/O over pure parsers), and which processes to
//! signal: a pure choice over that list. With `shareProcessNamespace: true`, PID 1 is the pause
//! process and every container's first process has parent PID 0.

use std::fs;
use std::io::Read;
use std::path::Path;

/// What the watcher knows about one process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessInfo {
    pub pid: i32,
    /// 0 when the parent is outside the namespace.
    pub ppid: i32,
    /// Start time in clock ticks after boot: with `pid`, names one process for good.
    pub start_time: u64,
    /// Kernel command name (`/proc/PID/comm`, at most 15 bytes).
    pub comm: String,
    /// Basename of `argv[0]`, when the command line could be read.
    pub argv0: Option<String>,
    pub kernel_thread: bool,
    /// Exited but not yet reaped.
    pub zombie: bool,
}

impl ProcessInfo {
    /// `comm[pid]`, as log lines and errors name a process.
    pub fn label(&self) -> String {
        format!("{}[{}]", self.comm, self.pid)
    }
}

/// Longest name the kernel keeps in `comm`.
const COMM_LEN: usize = 15;

/// Whether `process` is called `name`: by `comm` (truncated as the kernel keeps it) or by the
/// basename of `argv[0]`.
pub fn is_named(process: &ProcessInfo, name: &str) -> bool {
    let truncated = truncate_to_boundary(name, COMM_LEN);
    process.comm == name
        || (name.len() > COMM_LEN && process.comm == truncated)
        || process.argv0.as_deref() == Some(name)
}

fn truncate_to_boundary(name: &str, max: usize) -> &str {
    let mut end = name.len().min(max);
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    &name[..end]
}

/// Chooses the processes to signal: with `name`, those called `name` whose parent is not (the
/// master, not its workers); without, every other container's first process (parent PID 0).
/// Never PID 1, never `own_pid`, never kernel threads or zombies.
pub fn choose(processes: &[ProcessInfo], own_pid: i32, name: Option<&str>) -> Vec<ProcessInfo> {
    let named = |p: &ProcessInfo| !p.kernel_thread && name.is_some_and(|name| is_named(p, name));
    let parent_named = |ppid: i32| processes.iter().any(|p| p.pid == ppid && named(p));
    let mut chosen: Vec<ProcessInfo> = processes
        .iter()
        .filter(|p| p.pid != 1 && p.pid != own_pid && !p.kernel_thread && !p.zombie)
        .filter(|p| match name {
            Some(_) => named(p) && !parent_named(p.ppid),
            None => p.ppid == 0,
        })
        .cloned()
        .collect();
    chosen.sort_by_key(|p| p.pid);
    chosen
}

/// Whether a process chosen earlier (`before`, held open) may be signalled before the next
/// `/proc` scan: only if its command name is unchanged (a new one means it exec'd another
/// program, which may not expect the signal).
pub fn may_signal_early(before: &ProcessInfo, comm_now: &str) -> bool {
    !before.kernel_thread && before.comm == comm_now
}

/// `PF_KTHREAD` in `/proc/PID/stat`'s flags field.
const PF_KTHREAD: u64 = 0x0020_0000;

/// The fields of `/proc/PID/stat` the watcher uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stat {
    /// The command name (between the parentheses; may itself contain spaces or parens).
    pub comm: String,
    pub state: char,
    pub ppid: i32,
    pub flags: u64,
    pub start_time: u64,
}

/// Parses the text of `/proc/PID/stat`.
pub fn parse_stat(text: &str) -> Option<Stat> {
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let comm = text.get(open + 1..close)?.to_owned();
    let mut fields = text.get(close + 1..)?.split_ascii_whitespace();
    let state = fields.next()?.chars().next()?;
    let ppid = fields.next()?.parse().ok()?;
    // pgrp, session, tty_nr, tpgid, then flags.
    let flags = fields.nth(4)?.parse().ok()?;
    // minflt ... itrealvalue (12 fields), then starttime.
    let start_time = fields.nth(12)?.parse().ok()?;
    Some(Stat {
        comm,
        state,
        ppid,
        flags,
        start_time,
    })
}

/// The `exit_code` field (the 52nd) of `/proc/PID/stat`: the wait status of a zombie (Linux
/// 3.5 and later).
pub fn parse_exit_code(text: &str) -> Option<i32> {
    let close = text.rfind(')')?;
    // Fields after the comm start at the 3rd (state): the 52nd is the 50th of those.
    text.get(close + 1..)?
        .split_ascii_whitespace()
        .nth(49)?
        .parse()
        .ok()
}

/// Basename of `argv[0]` from the raw bytes of `/proc/PID/cmdline` (`None` if empty).
pub fn argv0_basename(cmdline: &[u8]) -> Option<String> {
    let argv0 = cmdline.split(|b| *b == 0).next()?;
    if argv0.is_empty() {
        return None;
    }
    let base = argv0.rsplit(|b| *b == b'/').next().unwrap_or(argv0);
    Some(String::from_utf8_lossy(base).into_owned())
}

/// Real UID from the text of `/proc/PID/status`.
pub fn parse_uid(status: &str) -> Option<u32> {
    let line = status.lines().find(|line| line.starts_with("Uid:"))?;
    line.split_ascii_whitespace().nth(1)?.parse().ok()
}

/// Lists the processes in `proc_root` (normally `/proc`) but `own_pid`; those that exit while
/// being read are skipped.
pub fn list_processes(
    proc_root: &Path,
    name: Option<&str>,
    own_pid: i32,
) -> std::io::Result<Vec<ProcessInfo>> {
    let mut processes = Vec::new();
    for entry in fs::read_dir(proc_root)?.flatten() {
        let pid = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok());
        if let Some(pid) = pid.filter(|&pid| pid != own_pid)
            && let Some(process) = read_process(&entry.path(), pid, name)
        {
            processes.push(process);
        }
    }
    Ok(processes)
}

/// Reads one process from its directory in `/proc` (`None` if it has exited). `argv[0]` is
/// read only when it can change the choice (looking for `name`, `comm` is not `name`, not PID
/// 1): reading `cmdline` is the costly part of a scan.
pub fn read_process(dir: &Path, pid: i32, name: Option<&str>) -> Option<ProcessInfo> {
    let mut buffer = [0u8; 1024];
    let stat = read_head(&dir.join("stat"), &mut buffer)
        .and_then(|bytes| std::str::from_utf8(bytes).ok())
        .and_then(parse_stat)?;
    let argv0 = if pid != 1 && name.is_some_and(|name| name != stat.comm) {
        read_head(&dir.join("cmdline"), &mut buffer).and_then(argv0_basename)
    } else {
        None
    };
    Some(ProcessInfo {
        pid,
        ppid: stat.ppid,
        start_time: stat.start_time,
        comm: stat.comm,
        argv0,
        kernel_thread: stat.flags & PF_KTHREAD != 0,
        zombie: matches!(stat.state, 'Z' | 'X'),
    })
}

/// Reads the start of a small `/proc` file with one `read` (enough for `stat` and `argv[0]`).
fn read_head<'b>(path: &Path, buffer: &'b mut [u8]) -> Option<&'b [u8]> {
    let mut file = fs::File::open(path).ok()?;
    let read = file.read(buffer).ok()?;
    Some(&buffer[..read])
}

/// Real UID of process `pid`, if it can still be read.
pub fn process_uid(proc_root: &Path, pid: i32) -> Option<u32> {
    let status = fs::read_to_string(proc_root.join(pid.to_string()).join("status")).ok()?;
    parse_uid(&status)
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod parse_tests {
    use super::*;

    #[test]
    fn stat_with_odd_comm_parses() {
        let text =
            "42 (we (ird) name) S 7 42 42 0 -1 4194560 120 0 0 0 1 2 0 0 20 0 1 0 987654 5 6";
        let stat = parse_stat(text).unwrap();
        assert_eq!(stat.comm, "we (ird) name");
        assert_eq!(stat.state, 'S');
        assert_eq!(stat.ppid, 7);
        assert_eq!(stat.flags, 4194560);
        assert_eq!(stat.start_time, 987654);
    }

    #[test]
    fn kernel_thread_flag_is_visible() {
        let stat =
            parse_stat("2 (kthreadd) S 0 0 0 0 -1 2129984 0 0 0 0 0 0 0 0 20 0 1 0 3 0 0").unwrap();
        assert_ne!(stat.flags & PF_KTHREAD, 0);
    }

    #[test]
    fn truncated_stat_is_rejected() {
        assert_eq!(parse_stat("42 (x) S 7"), None);
        assert_eq!(parse_stat("garbage"), None);
        assert_eq!(parse_stat("1 (x) S notanumber 1 1 1 1 1"), None);
        // Everything up to flags, but no start time.
        assert_eq!(parse_stat("1 (x) S 0 1 1 0 -1 4194560 0 0 0"), None);
    }

    #[test]
    fn argv0_basename_from_cmdline() {
        assert_eq!(
            argv0_basename(b"/usr/sbin/nginx\0-g\0daemon off;\0").as_deref(),
            Some("nginx")
        );
        assert_eq!(argv0_basename(b"postgres\0").as_deref(), Some("postgres"));
        assert_eq!(argv0_basename(b""), None);
        assert_eq!(argv0_basename(b"\0x\0"), None);
    }

    #[test]
    fn uid_from_status() {
        let status = "Name:\tnginx\nUid:\t101\t101\t101\t101\nGid:\t0\t0\t0\t0\n";
        assert_eq!(parse_uid(status), Some(101));
        assert_eq!(parse_uid("Name:\tx\n"), None);
    }

    #[test]
    fn own_process_is_listed() {
        let processes =
            list_processes(Path::new("/proc"), Some("surely-not-this-test"), -1).unwrap();
        let me = i32::try_from(std::process::id()).unwrap();
        let own = processes.iter().find(|p| p.pid == me).expect("self listed");
        assert!(own.argv0.is_some());
        assert!(!own.kernel_thread && !own.zombie);
        assert!(process_uid(Path::new("/proc"), me).is_some());
        let again = read_process(&Path::new("/proc").join(me.to_string()), me, None).unwrap();
        assert_eq!((again.pid, again.start_time), (own.pid, own.start_time));
        assert!(own.start_time > 0);
        let without_self = list_processes(Path::new("/proc"), None, me).unwrap();
        assert!(without_self.iter().all(|p| p.pid != me));
    }
}
