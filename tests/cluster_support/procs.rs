//! The harness's child processes. Each is started from one thread that lives as long as the
//! test binary, with the parent-death signal set: when the test binary exits — tests done, a
//! panic, or killed — every process it started gets SIGKILL. (The signal follows the thread
//! that forked, so a test's own thread, which ends with the test, must not fork them.)

use std::fs::File;
use std::io;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Sender, SyncSender, channel, sync_channel};
use std::sync::{Mutex, OnceLock};

type Request = (Command, SyncSender<io::Result<Child>>);

/// A running process whose output goes to a log file; killed on drop.
pub struct Proc {
    /// What it is, for messages.
    pub name: String,
    /// Its stdout and stderr.
    pub log: PathBuf,
    child: Child,
}

impl Proc {
    /// Starts `command` with stdout and stderr appended to `log`.
    pub fn start(name: &str, mut command: Command, log: &Path) -> Proc {
        let out = File::options()
            .create(true)
            .append(true)
            .open(log)
            .unwrap_or_else(|e| panic!("failed to open the log {}: {e}", log.display()));
        command
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out);
        let child = spawn(command)
            .unwrap_or_else(|e| panic!("failed to start {name}: {e} (log: {})", log.display()));
        Proc {
            name: name.to_owned(),
            log: log.to_owned(),
            child,
        }
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether it still runs; when it exited, how.
    pub fn exited(&mut self) -> Option<String> {
        match self.child.try_wait() {
            Ok(None) => None,
            Ok(Some(status)) => Some(status.to_string()),
            Err(e) => Some(e.to_string()),
        }
    }

    /// SIGKILL, and wait for it.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// The last `lines` lines of its log, for a failure message.
    pub fn tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Spawns `command` from the long-lived spawner thread, with the parent-death signal set.
pub fn spawn(command: Command) -> io::Result<Child> {
    let (reply, answer) = sync_channel(1);
    spawner()
        .lock()
        .unwrap()
        .send((command, reply))
        .expect("the spawner thread is gone");
    answer.recv().expect("the spawner thread is gone")
}

fn spawner() -> &'static Mutex<Sender<Request>> {
    static SPAWNER: OnceLock<Mutex<Sender<Request>>> = OnceLock::new();
    SPAWNER.get_or_init(|| {
        let (tx, rx) = channel::<Request>();
        std::thread::Builder::new()
            .name("cluster-spawner".into())
            .spawn(move || {
                for (mut command, reply) in rx {
                    // SAFETY: prctl(2) is async-signal-safe; nothing else runs between fork and exec.
                    unsafe {
                        command.pre_exec(|| {
                            nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)
                                .map_err(io::Error::from)
                        });
                    }
                    let _ = reply.send(command.spawn());
                }
            })
            .expect("failed to start the spawner thread");
        Mutex::new(tx)
    })
}
