//! Signal mode: find the targets in the shared process namespace and signal them.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::{Arc, Mutex, PoisonError};

use nix::errno::Errno;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use rustix::fs::{Mode, OFlags, open, openat};

use super::procfs::{self, ProcessInfo};
use crate::workload::values::{self, ValueError};

/// Errors of signal mode.
#[derive(Debug, thiserror::Error)]
pub enum SignalError {
    #[error("failed to understand signal {0:?}: {1}")]
    UnknownSignal(String, ValueError),
    #[error("failed to find {0} to signal (will retry)")]
    NoTarget(String),
    #[error("failed to list processes in {path}")]
    ProcUnreadable {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The kernel refused: the watcher may not signal that process.
    #[error(
        "failed to send {signal} to {target}: permission denied (the watcher runs as uid \
         {own_uid}, the target as uid {target_uid}); run the config-reloader container with \
         the same runAsUser as the app ({target_uid}) or add the CAP_KILL capability"
    )]
    PermissionDenied {
        signal: Signal,
        /// `comm[pid]`.
        target: String,
        /// The watcher's effective UID.
        own_uid: u32,
        /// The target's real UID (`?` if it could not be read).
        target_uid: String,
    },
    /// Another kill(2) failure (not ESRCH: a process that exited is skipped).
    #[error("failed to send {signal} to {target}")]
    KillFailed {
        signal: Signal,
        target: String,
        #[source]
        source: Errno,
    },
}

/// Parses `SIGHUP`, `HUP`, `hup` or a number with the core's parser (the one admission uses):
/// only signals that servers reload on, never one that stops or ends a process.
pub fn parse_signal(text: &str) -> Result<Signal, SignalError> {
    let unknown = |err| SignalError::UnknownSignal(text.to_owned(), err);
    let signal = values::parse_signal(text).map_err(unknown)?;
    Signal::from_str(signal.name).map_err(|_| unknown(ValueError::UnknownSignal(text.to_owned())))
}

/// Sends the reload signal to the chosen processes. The targets of the last successful send
/// are held open ([`ProcessHandle`]), and the next send signals those whose command name is
/// unchanged before it scans `/proc`, so the app hears sooner. The scan still follows: it
/// signals any new target, and decides which remembered ones count as told.
#[derive(Debug, Clone)]
pub struct Signaller {
    pub signal: Signal,
    /// `--process`, if given.
    pub process: Option<String>,
    /// Where to read processes from (normally `/proc`).
    pub proc_root: PathBuf,
    /// The watcher's own PID (never signalled).
    pub own_pid: i32,
    /// The targets of the last successful send (shared by clones).
    known: Arc<Mutex<Vec<Known>>>,
}

/// A remembered target: what it was when chosen, and the handle to re-check and signal it.
#[derive(Debug)]
struct Known {
    info: ProcessInfo,
    handle: ProcessHandle,
}

impl Signaller {
    /// A signaller that remembers nothing yet.
    pub fn new(signal: Signal, process: Option<String>, proc_root: PathBuf, own_pid: i32) -> Self {
        Signaller {
            signal,
            process,
            proc_root,
            own_pid,
            known: Arc::default(),
        }
    }

    /// Describes what is signalled, for log lines.
    pub fn describe_wanted(&self) -> String {
        match &self.process {
            Some(name) => format!("a process named {name:?}"),
            None => "another container's main process (parent PID 0)".to_owned(),
        }
    }

    /// Finds the targets and signals each once; returns the processes told, by PID.
    pub fn send(&self) -> Result<Vec<ProcessInfo>, SignalError> {
        let mut known = self.known.lock().unwrap_or_else(PoisonError::into_inner);
        let name = self.process.as_deref();
        let mut sent = Sent::default();
        // Those that may be signalled before the scan (see [`procfs::may_signal_early`]).
        let early: Vec<&Known> = known
            .iter()
            .filter(|k| {
                let comm = k.handle.comm();
                comm.is_some_and(|comm| procfs::may_signal_early(&k.info, &comm))
            })
            .collect();
        for Known { info, handle } in &early {
            sent.record(info, self.result_of(info, handle.signal(self.signal)));
        }
        if !early.is_empty() {
            // Let a woken target run before the scan: on a busy node they often share a CPU,
            // and the app's reload is what matters.
            std::thread::yield_now();
        }
        let processes = match procfs::list_processes(&self.proc_root, name, self.own_pid) {
            Ok(processes) => processes,
            // The remembered targets were told; the scan for new ones is retried next time.
            Err(_) if !sent.done.is_empty() && sent.error.is_none() => {
                return Ok(sent.sorted());
            }
            Err(source) => {
                known.clear();
                return Err(SignalError::ProcUnreadable {
                    path: self.proc_root.clone(),
                    source,
                });
            }
        };
        let chosen = procfs::choose(&processes, self.own_pid, name);
        // The scan decides who counts as told: a remembered process that is a zombie or a
        // worker now got a signal it will not act on.
        sent.done
            .retain(|told| chosen.iter().any(|c| same_process(c, told)));
        for process in &chosen {
            let already = early.iter().any(|k| same_process(&k.info, process));
            if !already {
                let result = kill(Pid::from_raw(process.pid), self.signal);
                sent.record(process, self.result_of(process, result));
            }
        }
        if early.is_empty() {
            std::thread::yield_now();
        }
        if let Some(err) = sent.error.take() {
            known.clear();
            return Err(err);
        }
        if sent.done.is_empty() {
            known.clear();
            return Err(SignalError::NoTarget(self.describe_wanted()));
        }
        let told = sent.sorted();
        let held = std::mem::take(&mut *known);
        *known = self.remember(chosen, held);
        Ok(told)
    }

    /// Forgets the remembered targets that have exited, closing their handles.
    pub fn forget_exited(&self) {
        let mut known = self.known.lock().unwrap_or_else(PoisonError::into_inner);
        known.retain(|k| k.handle.comm().is_some());
    }

    /// The targets to remember after a send: `chosen`, each with the handle held for it or a
    /// new one (one that cannot be opened, as it just exited, is left out).
    fn remember(&self, chosen: Vec<ProcessInfo>, mut held: Vec<Known>) -> Vec<Known> {
        let mut known = Vec::with_capacity(chosen.len());
        for info in chosen {
            let held_at = held.iter().position(|k| same_process(&k.info, &info));
            let handle = held_at.map(|index| held.swap_remove(index).handle);
            if let Some(handle) = handle.or_else(|| self.open_checked(&info)) {
                known.push(Known { info, handle });
            }
        }
        known
    }

    /// A handle on `info`'s process, if what it opens is that process: its PID may have been
    /// reused since the scan.
    fn open_checked(&self, info: &ProcessInfo) -> Option<ProcessHandle> {
        let handle = ProcessHandle::open(&self.proc_root, info.pid).ok()?;
        let dir = self.proc_root.join(info.pid.to_string());
        let now = procfs::read_process(&dir, info.pid, None)?;
        (now.start_time == info.start_time && handle.comm().as_deref() == Some(&info.comm))
            .then_some(handle)
    }

    /// What one `kill` means: `Ok(false)` if the process has exited since it was read (a
    /// failure would make the retry signal the others twice).
    fn result_of(
        &self,
        process: &ProcessInfo,
        result: Result<(), Errno>,
    ) -> Result<bool, SignalError> {
        match result {
            Ok(()) => Ok(true),
            Err(Errno::ESRCH) => Ok(false),
            Err(Errno::EPERM) => Err(SignalError::PermissionDenied {
                signal: self.signal,
                target: process.label(),
                own_uid: nix::unistd::geteuid().as_raw(),
                target_uid: procfs::process_uid(&self.proc_root, process.pid)
                    .map_or_else(|| "?".to_owned(), |uid| uid.to_string()),
            }),
            Err(source) => Err(SignalError::KillFailed {
                signal: self.signal,
                target: process.label(),
                source,
            }),
        }
    }
}

fn same_process(a: &ProcessInfo, b: &ProcessInfo) -> bool {
    a.pid == b.pid && a.start_time == b.start_time
}

#[derive(Default)]
struct Sent {
    done: Vec<ProcessInfo>,
    error: Option<SignalError>,
}

impl Sent {
    fn record(&mut self, process: &ProcessInfo, result: Result<bool, SignalError>) {
        match result {
            Ok(true) => self.done.push(process.clone()),
            Ok(false) => {}
            Err(err) => {
                self.error.get_or_insert(err);
            }
        }
    }

    fn sorted(&self) -> Vec<ProcessInfo> {
        let mut done = self.done.clone();
        done.sort_by_key(|p| p.pid);
        done
    }
}

/// An open handle on one process, so a remembered target is re-checked and signalled in two
/// system calls, with no path lookup and no PID-reuse race: the opened `/proc/PID` directory and
/// its `comm` name the process, not its number (once it is reaped both fail with `ESRCH`).
/// `comm` is re-read in place (`pread`, far cheaper than `stat`); the signal goes through the
/// directory (`pidfd_send_signal`, Linux 5.1; `kill` by PID where that call is missing or
/// refused).
#[derive(Debug)]
struct ProcessHandle {
    pid: i32,
    dir: File,
    comm: File,
}

impl ProcessHandle {
    /// Opens process `pid` under `proc_root` (normally `/proc`).
    fn open(proc_root: &Path, pid: i32) -> io::Result<ProcessHandle> {
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let dir = File::from(open(proc_root.join(pid.to_string()), flags, Mode::empty())?);
        let flags = OFlags::RDONLY | OFlags::CLOEXEC;
        let comm = File::from(openat(&dir, "comm", flags, Mode::empty())?);
        Ok(ProcessHandle { pid, dir, comm })
    }

    /// The command name now (`None` once reaped).
    fn comm(&self) -> Option<String> {
        let mut buffer = [0u8; 64];
        let read = self.comm.read_at(&mut buffer, 0).ok()?;
        let text = std::str::from_utf8(&buffer[..read]).ok()?;
        Some(text.strip_suffix('\n').unwrap_or(text).to_owned())
    }

    /// Sends `signal` to this very process (`ESRCH` once it has exited).
    fn signal(&self, signal: Signal) -> Result<(), Errno> {
        let Some(sig) = rustix::process::Signal::from_named_raw(signal as i32) else {
            return kill(Pid::from_raw(self.pid), signal);
        };
        use rustix::io::Errno as E;
        match rustix::process::pidfd_send_signal(&self.dir, sig) {
            // Before Linux 5.1 (ENOSYS), a `/proc` whose directories the kernel does not take
            // as process handles (EINVAL), or a seccomp profile that refuses the call (EPERM
            // or ENOSYS): fall back to the PID, which also tells a real EPERM.
            Err(E::NOSYS | E::INVAL | E::PERM) => kill(Pid::from_raw(self.pid), signal),
            result => result.map_err(|err| Errno::from_raw(err.raw_os_error())),
        }
    }
}

// The integration tests' helper for running copied programs, included by path.
#[cfg(test)]
#[path = "../../tests/watch_support/copies.rs"]
mod copies;

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::copies::{copy_program, run_copy};
    use super::*;

    #[test]
    fn signal_names_and_numbers_parse() {
        for text in ["SIGHUP", "HUP", "hup", "SigHup", "1", " 1 "] {
            assert_eq!(parse_signal(text).unwrap(), Signal::SIGHUP, "{text}");
        }
        assert_eq!(parse_signal("usr1").unwrap(), Signal::SIGUSR1);
        assert_eq!(parse_signal("10").unwrap(), Signal::SIGUSR1);
        assert_eq!(parse_signal("usr2").unwrap(), Signal::SIGUSR2);
    }

    #[test]
    fn unknown_signals_are_a_clear_error() {
        for text in ["", "SIGFOO", "0", "999", "-1", "SIGTERM", "9", "34", "64"] {
            let err = parse_signal(text).unwrap_err();
            assert!(err.to_string().starts_with("failed to understand signal"));
        }
    }

    #[test]
    fn permission_denied_names_both_uids_and_the_fix() {
        let err = SignalError::PermissionDenied {
            signal: Signal::SIGHUP,
            target: "nginx[7]".into(),
            own_uid: 65534,
            target_uid: "0".into(),
        };
        let text = err.to_string();
        for needle in ["uid 65534", "uid 0", "runAsUser", "CAP_KILL", "nginx[7]"] {
            assert!(text.contains(needle), "{text}");
        }
    }

    #[test]
    fn a_target_that_exited_since_it_was_read_is_skipped_not_a_failure() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = i32::try_from(child.id()).unwrap();
        child.wait().unwrap();
        let gone = ProcessInfo {
            pid,
            ppid: 0,
            start_time: 1,
            comm: "true".into(),
            argv0: None,
            kernel_thread: false,
            zombie: false,
        };
        let signaller = Signaller::new(Signal::SIGHUP, None, PathBuf::from("/proc"), -1);
        let result = kill(Pid::from_raw(gone.pid), Signal::SIGHUP);
        assert!(
            !signaller.result_of(&gone, result).unwrap(),
            "an exited process is skipped"
        );
    }

    /// A running copy of `sleep` under a name no other process has (so a test signals nothing
    /// else), once `/proc` shows that name; with the directory holding the copy.
    struct UniqueSleeper {
        child: std::process::Child,
        pid: i32,
        name: String,
        dir: PathBuf,
    }

    impl UniqueSleeper {
        fn start(tag: &str) -> UniqueSleeper {
            let name = format!("ri{tag}{}", std::process::id());
            let dir = std::env::temp_dir().join(format!("ri-signal-{tag}-{}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            let program = dir.join(&name);
            copy_program(Path::new("/bin/sleep"), &program);
            let child =
                run_copy(|| std::process::Command::new(&program).arg("30").spawn()).unwrap();
            let pid = i32::try_from(child.id()).unwrap();
            let sleeper = UniqueSleeper {
                child,
                pid,
                name,
                dir,
            };
            assert!(
                sleeper.wait_until(|p| p.comm == sleeper.name),
                "never renamed"
            );
            sleeper
        }

        fn wait_until(&self, wanted: impl Fn(&ProcessInfo) -> bool) -> bool {
            let dir = Path::new("/proc").join(self.pid.to_string());
            for _ in 0..500 {
                if procfs::read_process(&dir, self.pid, None).is_some_and(|p| wanted(&p)) {
                    return true;
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            false
        }

        /// A signaller looking for this process by name; SIGWINCH is ignored unless handled,
        /// so signalling disturbs nothing.
        fn signaller(&self) -> Signaller {
            Signaller::new(
                Signal::SIGWINCH,
                Some(self.name.clone()),
                PathBuf::from("/proc"),
                i32::try_from(std::process::id()).unwrap(),
            )
        }
    }

    impl Drop for UniqueSleeper {
        fn drop(&mut self) {
            let _ = self.child.kill();
            let _ = self.child.wait();
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }

    /// The helper the sleepers (and the integration tests) start their copies with.
    #[test]
    fn a_copy_still_open_for_writing_starts_once_it_is_closed() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("ri-signal-busy-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let program = dir.join("true");
        let mut open = std::fs::File::create(&program).unwrap();
        std::io::Write::write_all(&mut open, &std::fs::read("/bin/true").unwrap()).unwrap();
        std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
        let run = || std::process::Command::new(&program).status();
        let busy = run();
        assert!(
            matches!(&busy, Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy),
            "precondition: a file open for writing cannot be run: {busy:?}"
        );
        let closer = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(100));
            drop(open);
        });
        let ran = run_copy(run);
        closer.join().unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        assert!(ran.expect("started once closed").success());
    }

    #[test]
    fn a_remembered_target_that_became_a_zombie_does_not_count_as_told() {
        let sleeper = UniqueSleeper::start("zombie");
        let signaller = sleeper.signaller();
        let first = signaller.send();
        kill(Pid::from_raw(sleeper.pid), Signal::SIGKILL).unwrap();
        assert!(sleeper.wait_until(|p| p.zombie), "never a zombie");
        let second = signaller.send();
        let first: Vec<String> = first.unwrap().iter().map(ProcessInfo::label).collect();
        assert_eq!(first, vec![format!("{}[{}]", sleeper.name, sleeper.pid)]);
        assert!(
            matches!(second, Err(SignalError::NoTarget(_))),
            "a zombie is not told: {second:?}"
        );
    }

    #[test]
    fn remembered_targets_that_exited_are_forgotten() {
        let mut sleeper = UniqueSleeper::start("gone");
        let signaller = sleeper.signaller();
        signaller.send().unwrap();
        let remembered = || signaller.known.lock().unwrap().len();
        assert_eq!(remembered(), 1);
        signaller.forget_exited();
        assert_eq!(remembered(), 1, "a live target is kept");
        sleeper.child.kill().unwrap();
        sleeper.child.wait().unwrap();
        signaller.forget_exited();
        assert_eq!(remembered(), 0, "an exited one is forgotten");
    }

    #[test]
    fn no_target_is_an_error_naming_what_was_looked_for() {
        let signaller = Signaller::new(
            Signal::SIGHUP,
            Some("no-such-process-anywhere".into()),
            PathBuf::from("/proc"),
            i32::try_from(std::process::id()).unwrap(),
        );
        let err = signaller.send().unwrap_err();
        assert!(matches!(err, SignalError::NoTarget(_)));
        assert!(err.to_string().contains("no-such-process-anywhere"));
    }
}

#[cfg(test)]
mod handle_tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;
    use std::process::{Command, Stdio};

    /// A `sleep` child, once it has become `sleep` (spawn returns before the exec is seen
    /// in `/proc`).
    fn sleeper() -> std::process::Child {
        let mut child = Command::new("sleep")
            .arg("30")
            .stdin(Stdio::null())
            .spawn()
            .expect("start sleep");
        let handle = ProcessHandle::open(Path::new("/proc"), child.id() as i32).unwrap();
        if wait_for_comm(&handle, "sleep").as_deref() != Some("sleep") {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the child did not become `sleep` within 5 s");
        }
        child
    }

    #[test]
    fn a_held_process_is_read_again_and_signalled() {
        let mut child = sleeper();
        let pid = i32::try_from(child.id()).unwrap();
        let handle = ProcessHandle::open(Path::new("/proc"), pid).unwrap();
        assert_eq!(handle.comm().as_deref(), Some("sleep"));
        assert_eq!(
            handle.comm().as_deref(),
            Some("sleep"),
            "read again in place"
        );
        handle.signal(Signal::SIGTERM).expect("signalled");
        let status = child.wait().unwrap();
        assert_eq!(status.signal(), Some(Signal::SIGTERM as i32));
    }

    #[test]
    fn an_exec_shows_as_a_new_command_name() {
        // `sh` replaces itself with `sleep` once told to go on.
        let mut child = Command::new("sh")
            .args(["-c", "read line; exec sleep 30"])
            .stdin(Stdio::piped())
            .spawn()
            .unwrap();
        let pid = i32::try_from(child.id()).unwrap();
        let handle = ProcessHandle::open(Path::new("/proc"), pid).unwrap();
        // The handle may be opened before the child has become `sh`: it follows the process.
        let before = wait_for_comm(&handle, "sh");
        use std::io::Write;
        child.stdin.take().unwrap().write_all(b"go\n").unwrap();
        let after = wait_for_comm(&handle, "sleep");
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(before.as_deref(), Some("sh"));
        assert_eq!(after.as_deref(), Some("sleep"));
    }

    /// The handle's command name once it is `wanted`, or the last one seen after 5 s.
    fn wait_for_comm(handle: &ProcessHandle, wanted: &str) -> Option<String> {
        let mut comm = handle.comm();
        for _ in 0..500 {
            if comm.as_deref() == Some(wanted) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
            comm = handle.comm();
        }
        comm
    }

    #[test]
    fn an_exited_process_reads_as_gone_and_cannot_be_signalled() {
        let mut child = sleeper();
        let pid = i32::try_from(child.id()).unwrap();
        let handle = ProcessHandle::open(Path::new("/proc"), pid).unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(handle.comm(), None);
        assert_eq!(handle.signal(Signal::SIGHUP), Err(Errno::ESRCH));
    }
}
