//! An open handle on one process: how the watcher re-checks and signals a remembered target
//! in two system calls, with no path lookup in `/proc` and no PID-reuse race.
//!
//! The handle is the process's `/proc/PID` directory, opened, plus its `stat` opened through
//! it. Both name the process itself, not its number: once it exits, reads and signals fail
//! with `ESRCH` even if the PID is given to a new process. `stat` is re-read in place
//! (`pread`), and the signal goes through the directory descriptor (`pidfd_send_signal`,
//! Linux 5.1; on older kernels, `kill` by PID after the re-read).

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

use nix::errno::Errno;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use rustix::fs::{Mode, OFlags, open, openat};

use super::procfs::{self, argv0_basename};
use super::targets::ProcessInfo;

/// One process, held open (see the module documentation).
#[derive(Debug)]
pub struct ProcessHandle {
    pid: i32,
    dir: File,
    stat: File,
}

impl ProcessHandle {
    /// Opens process `pid` under `proc_root` (normally `/proc`).
    pub fn open(proc_root: &Path, pid: i32) -> io::Result<ProcessHandle> {
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let dir = File::from(open(proc_root.join(pid.to_string()), flags, Mode::empty())?);
        let stat = File::from(openat(
            &dir,
            "stat",
            OFlags::RDONLY | OFlags::CLOEXEC,
            Mode::empty(),
        )?);
        Ok(ProcessHandle { pid, dir, stat })
    }

    /// The process's PID.
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// Reads the process again (`None` once it has exited). `argv[0]` is read only when it can
    /// change the choice, as in [`procfs::read_process`].
    pub fn read(&self, name: Option<&str>) -> Option<ProcessInfo> {
        let mut buffer = [0u8; 1024];
        let read = self.stat.read_at(&mut buffer, 0).ok()?;
        let stat = procfs::stat_of(&buffer[..read])?;
        let argv0 = if procfs::wants_argv0(self.pid, name, &stat) {
            self.argv0(&mut buffer)
        } else {
            None
        };
        Some(procfs::process_info(self.pid, stat, argv0))
    }

    fn argv0(&self, buffer: &mut [u8]) -> Option<String> {
        let flags = OFlags::RDONLY | OFlags::CLOEXEC;
        let cmdline = File::from(openat(&self.dir, "cmdline", flags, Mode::empty()).ok()?);
        let read = cmdline.read_at(buffer, 0).ok()?;
        argv0_basename(&buffer[..read])
    }

    /// Sends `signal` to this very process: `ESRCH` if it has exited, whatever now holds its PID.
    pub fn signal(&self, signal: Signal) -> Result<(), Errno> {
        let Some(sig) = rustix::process::Signal::from_named_raw(signal as i32) else {
            return kill(Pid::from_raw(self.pid), signal);
        };
        match rustix::process::pidfd_send_signal(&self.dir, sig) {
            Ok(()) => Ok(()),
            // Before Linux 5.1, or a `/proc` that is not a PID directory the kernel accepts
            // as a process handle: fall back to the PID, just re-read and still this process.
            Err(err) if err == rustix::io::Errno::NOSYS || err == rustix::io::Errno::INVAL => {
                kill(Pid::from_raw(self.pid), signal)
            }
            Err(err) => Err(Errno::from_raw(err.raw_os_error())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::process::{Command, Stdio};

    /// A `sleep` child, once it has become `sleep` (spawn returns before the exec is seen
    /// in `/proc`).
    fn sleeper() -> std::process::Child {
        let mut child = Command::new("sleep")
            .arg("30")
            .stdin(Stdio::null())
            .spawn()
            .expect("start sleep");
        let comm = Path::new("/proc").join(child.id().to_string()).join("comm");
        for _ in 0..500 {
            if std::fs::read_to_string(&comm).is_ok_and(|c| c == "sleep\n") {
                return child;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let _ = child.kill();
        let _ = child.wait();
        panic!("the child did not become `sleep` within 5 s");
    }

    #[test]
    fn a_held_process_is_read_again_and_signalled() {
        let mut child = sleeper();
        let pid = i32::try_from(child.id()).unwrap();
        let handle = ProcessHandle::open(Path::new("/proc"), pid).unwrap();
        let first = handle.read(Some("sleep")).expect("alive");
        let scanned = procfs::read_process(&Path::new("/proc").join(pid.to_string()), pid, None)
            .expect("listed");
        assert_eq!(
            (first.pid, first.start_time, first.ppid),
            (scanned.pid, scanned.start_time, scanned.ppid)
        );
        assert_eq!(first.comm, "sleep");
        assert_eq!(
            handle.read(None),
            Some(first),
            "reading twice gives the same"
        );
        handle.signal(Signal::SIGTERM).expect("signalled");
        let status = child.wait().unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(Signal::SIGTERM as i32));
    }

    #[test]
    fn argv0_is_read_through_the_handle_when_comm_differs() {
        let mut child = sleeper();
        let pid = i32::try_from(child.id()).unwrap();
        let handle = ProcessHandle::open(Path::new("/proc"), pid).unwrap();
        let info = handle.read(Some("not-sleep")).expect("alive");
        assert_eq!(info.argv0.as_deref(), Some("sleep"));
        assert_eq!(handle.read(Some("sleep")).unwrap().argv0, None);
        child.kill().unwrap();
        child.wait().unwrap();
    }

    #[test]
    fn an_exited_process_reads_as_gone_and_cannot_be_signalled() {
        let mut child = sleeper();
        let pid = i32::try_from(child.id()).unwrap();
        let handle = ProcessHandle::open(Path::new("/proc"), pid).unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(handle.read(None), None);
        assert_eq!(handle.signal(Signal::SIGHUP), Err(Errno::ESRCH));
    }
}
