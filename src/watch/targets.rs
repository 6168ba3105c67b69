//! Which processes to signal: a pure choice over a process list.
//!
//! In a pod with `shareProcessNamespace: true`, PID 1 is the pause process and every
//! container's first process has parent PID 0 (its real parent lives outside the namespace).
//! PID 1 and the watcher itself are never chosen, nor are kernel threads or zombies.

/// What the watcher knows about one process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessInfo {
    /// Process ID (in the watcher's PID namespace).
    pub pid: i32,
    /// Parent process ID (0 when the parent is outside the namespace).
    pub ppid: i32,
    /// Start time in clock ticks after boot: with `pid`, names one process for good.
    pub start_time: u64,
    /// Kernel command name (`/proc/PID/comm`, at most 15 bytes).
    pub comm: String,
    /// Basename of `argv[0]`, when the command line could be read.
    pub argv0: Option<String>,
    /// A kernel thread (never signalled).
    pub kernel_thread: bool,
    /// Exited but not yet reaped (never signalled).
    pub zombie: bool,
}

/// Longest name the kernel keeps in `comm`.
const COMM_LEN: usize = 15;

/// Whether `process` is called `name`: by `comm` (also when `name` is longer than the kernel
/// keeps) or by the basename of `argv[0]`.
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

/// Chooses the processes to signal.
///
/// With `name`, the processes called `name` whose parent is not also called `name` (the
/// master, not its workers). Without, the first process of every other container: parent
/// PID 0. Never PID 1, never `own_pid`, never kernel threads or zombies.
pub fn choose(processes: &[ProcessInfo], own_pid: i32, name: Option<&str>) -> Vec<ProcessInfo> {
    let eligible = |p: &&ProcessInfo| p.pid != 1 && p.pid != own_pid && !p.kernel_thread;
    let mut chosen: Vec<ProcessInfo> = match name {
        Some(name) => {
            let named = |pid: i32| {
                processes
                    .iter()
                    .any(|p| p.pid == pid && !p.kernel_thread && is_named(p, name))
            };
            processes
                .iter()
                .filter(eligible)
                .filter(|p| is_named(p, name) && !named(p.ppid))
                .filter(|p| !p.zombie)
                .cloned()
                .collect()
        }
        None => processes
            .iter()
            .filter(eligible)
            .filter(|p| p.ppid == 0 && !p.zombie)
            .cloned()
            .collect(),
    };
    chosen.sort_by_key(|p| p.pid);
    chosen
}

/// Whether `now`, a fresh read of `before` (a process chosen earlier), is still the same
/// process and still a target: same start time, same parent, alive, and still called `name`
/// (or, without a name, still a container's first process).
///
/// A process keeps its parent until that parent exits, so an unchanged parent PID means it is
/// still a master rather than a worker. Processes that appeared since are not seen here; the
/// caller finds them with a full scan.
pub fn still_target(before: &ProcessInfo, now: &ProcessInfo, name: Option<&str>) -> bool {
    let same = now.pid == before.pid
        && now.start_time == before.start_time
        && now.ppid == before.ppid
        && !now.kernel_thread
        && !now.zombie;
    same && match name {
        Some(name) => is_named(now, name),
        None => now.ppid == 0,
    }
}

#[cfg(test)]
mod tests;
