//! An open handle on one process: the watcher re-checks and signals a remembered target in two
//! system calls, with no path lookup in `/proc` and no PID-reuse race. The handle is the opened
//! `/proc/PID` directory plus its `comm`; both name the process, not its number (once it is
//! reaped they fail with `ESRCH`, whoever holds the PID). `comm` is re-read in place (`pread`,
//! far cheaper than `stat`); the signal goes through the directory (`pidfd_send_signal`, Linux
//! 5.1; `kill` by PID where that call is missing or refused).

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

use nix::errno::Errno;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use rustix::fs::{Mode, OFlags, open, openat};

/// One process, held open (see the module documentation).
#[derive(Debug)]
pub struct ProcessHandle {
    pid: i32,
    dir: File,
    comm: File,
}

impl ProcessHandle {
    /// Opens process `pid` under `proc_root` (normally `/proc`).
    pub fn open(proc_root: &Path, pid: i32) -> io::Result<ProcessHandle> {
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let dir = File::from(open(proc_root.join(pid.to_string()), flags, Mode::empty())?);
        let flags = OFlags::RDONLY | OFlags::CLOEXEC;
        let comm = File::from(openat(&dir, "comm", flags, Mode::empty())?);
        Ok(ProcessHandle { pid, dir, comm })
    }

    /// The process's command name now (`None` once it has exited and been reaped).
    pub fn comm(&self) -> Option<String> {
        let mut buffer = [0u8; 64];
        let read = self.comm.read_at(&mut buffer, 0).ok()?;
        let text = std::str::from_utf8(&buffer[..read]).ok()?;
        Some(text.strip_suffix('\n').unwrap_or(text).to_owned())
    }

    /// Sends `signal` to this very process: `ESRCH` once it has exited, whatever holds its PID
    /// now.
    pub fn signal(&self, signal: Signal) -> Result<(), Errno> {
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

#[cfg(test)]
mod tests {
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
