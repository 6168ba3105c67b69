//! A PID namespace like a pod's with `shareProcessNamespace: true`: PID 1 is a pause-like
//! process, and every "container" is entered from outside with `nsenter`, so its first
//! process has parent PID 0 inside the namespace, exactly as under a container runtime.

use std::fs;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::fixture::Counter;
use super::scratch::Scratch;
use super::wait_for;

/// What a pod-like test starts with: a scratch directory and a PID namespace whose PID 1
/// counts SIGHUPs as `pid1` (it must never get one).
pub struct Pod {
    /// Files of the test.
    pub scratch: Scratch,
    /// PID 1's SIGHUP counter.
    pub pid1: Counter,
    /// The namespace.
    pub ns: PidNamespace,
}

impl Pod {
    /// A new pod for the test called `tag`.
    pub fn new(tag: &str) -> Pod {
        let scratch = Scratch::new(tag);
        let pid1 = Counter::new(scratch.path(), "pid1", 0);
        let ns = PidNamespace::new(&pid1);
        Pod { scratch, pid1, ns }
    }
}

/// A child process killed and reaped on drop.
pub struct Proc(pub Child);

impl Proc {
    /// Its PID (outside any namespace).
    pub fn id(&self) -> u32 {
        self.0.id()
    }

    /// Whether it is still running.
    pub fn is_running(&mut self) -> bool {
        matches!(self.0.try_wait(), Ok(None))
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The namespace; dropping it kills everything inside.
pub struct PidNamespace {
    init_pid: u32,
    unshare: Proc,
}

impl PidNamespace {
    /// Creates the namespace with a SIGHUP-counting pause process as PID 1.
    pub fn new(pid1: &Counter) -> PidNamespace {
        super::require_root();
        hup_not_ignored();
        let unshare = Command::new("unshare")
            .args([
                "--pid",
                "--fork",
                "--mount-proc",
                "--kill-child",
                "bash",
                "-c",
            ])
            .arg(pid1.pid1_script())
            .stdin(Stdio::null())
            .spawn()
            .expect("run unshare (util-linux) to make a PID namespace");
        let unshare = Proc(unshare);
        let parent = unshare.id();
        let init_pid = wait_for("the namespace's PID 1", Duration::from_secs(10), || {
            child_of(parent)
        });
        wait_for("PID 1 to set its trap", Duration::from_secs(10), || {
            pid1.is_ready().then_some(())
        });
        PidNamespace { init_pid, unshare }
    }

    /// A command run inside the namespace as a new "container" (parent PID 0 there),
    /// optionally as another user: append the program and its arguments.
    pub fn command(&self, uid: Option<u32>) -> Command {
        let mut command = Command::new("nsenter");
        command
            .arg("--target")
            .arg(self.init_pid.to_string())
            .args(["--pid", "--mount"]);
        if let Some(uid) = uid {
            command
                .arg(format!("--setuid={uid}"))
                .arg(format!("--setgid={uid}"));
        }
        command.arg("--").stdin(Stdio::null());
        command
    }

    /// Starts a counting app (a master with workers) as a container named `name`, and
    /// waits until every process of it can count.
    pub fn start_counter(&self, counter: &Counter, name: &str) -> Proc {
        let child = self
            .command(None)
            .arg("bash")
            .arg("-c")
            .arg(counter.script(name))
            .spawn()
            .expect("nsenter a counting app");
        let proc = Proc(child);
        wait_for(
            "the counting app to be ready",
            Duration::from_secs(10),
            || counter.is_ready().then_some(()),
        );
        proc
    }

    /// Keeps the namespace alive until here (for readability at the end of a test).
    pub fn close(self) {
        drop(self.unshare);
    }
}

/// The first process whose parent is `parent` (host PIDs).
pub fn child_of(parent: u32) -> Option<u32> {
    fs::read_dir("/proc").ok()?.find_map(|entry| {
        let pid: u32 = entry.ok()?.file_name().to_str()?.parse().ok()?;
        let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let after = &stat[stat.rfind(')')? + 1..];
        let ppid: u32 = after.split_whitespace().nth(1)?.parse().ok()?;
        (ppid == parent).then_some(pid)
    })
}

/// Makes SIGHUP's disposition the default again if this process ignores it (as under `nohup`,
/// which a CI runner may use): an ignored disposition passes to every child through exec, and
/// bash cannot trap a signal that was ignored when it started, so the counting apps would never
/// count. A container's processes start with the default, as they do then.
fn hup_not_ignored() {
    use nix::sys::signal::{SigHandler, Signal, signal};
    // SAFETY: only the default disposition is installed here, never a handler, so no code runs
    // in signal context; a handler found installed is put back at once.
    unsafe {
        if let Ok(previous) = signal(Signal::SIGHUP, SigHandler::SigDfl)
            && !matches!(previous, SigHandler::SigIgn | SigHandler::SigDfl)
        {
            let _ = signal(Signal::SIGHUP, previous);
        }
    }
}
