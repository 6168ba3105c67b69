//! Which processes to signal: a pure choice over a process list. With
//! `shareProcessNamespace: true`, PID 1 is the pause process and every container's first
//! process has parent PID 0.

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

#[cfg(test)]
mod tests;
