//! Signal mode: find the targets in the shared process namespace and signal them.

use std::path::{Path, PathBuf};
use std::str::FromStr;

use nix::errno::Errno;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use super::procfs;
use super::targets::{self, ProcessInfo};

/// Errors of signal mode.
#[derive(Debug, thiserror::Error)]
pub enum SignalError {
    /// `--signal` named no signal this watcher can send.
    #[error(
        "failed to understand signal {0:?}: use a name like SIGHUP, HUP or hup, or a number like 1"
    )]
    UnknownSignal(String),
    /// No process matched.
    #[error("failed to find {0} to signal (will retry)")]
    NoTarget(String),
    /// `/proc` could not be listed.
    #[error("failed to list processes in {path}")]
    ProcUnreadable {
        /// The proc root.
        path: PathBuf,
        /// Why.
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
        /// The signal.
        signal: Signal,
        /// `comm[pid]`.
        target: String,
        /// The watcher's effective UID.
        own_uid: u32,
        /// The target's real UID (`?` if it could not be read).
        target_uid: String,
    },
    /// Another kill(2) failure (the process exited between listing and signalling, ...).
    #[error("failed to send {signal} to {target}")]
    KillFailed {
        /// The signal.
        signal: Signal,
        /// `comm[pid]`.
        target: String,
        /// Why.
        #[source]
        source: Errno,
    },
}

/// Parses `SIGHUP`, `HUP`, `hup` or a signal number.
pub fn parse_signal(text: &str) -> Result<Signal, SignalError> {
    let unknown = || SignalError::UnknownSignal(text.to_owned());
    let trimmed = text.trim();
    if let Ok(number) = trimmed.parse::<i32>() {
        return Signal::try_from(number).map_err(|_| unknown());
    }
    let upper = trimmed.to_ascii_uppercase();
    let name = if upper.starts_with("SIG") {
        upper
    } else {
        format!("SIG{upper}")
    };
    Signal::from_str(&name).map_err(|_| unknown())
}

/// Sends the reload signal to the chosen processes.
#[derive(Debug, Clone)]
pub struct Signaller {
    /// The signal to send.
    pub signal: Signal,
    /// `--process`, if given.
    pub process: Option<String>,
    /// Where to read processes from (normally `/proc`).
    pub proc_root: PathBuf,
    /// The watcher's own PID (never signalled).
    pub own_pid: i32,
}

impl Signaller {
    /// Describes what is signalled, for log lines.
    pub fn describe_wanted(&self) -> String {
        match &self.process {
            Some(name) => format!("a process named {name:?}"),
            None => "another container's main process (parent PID 0)".to_owned(),
        }
    }

    /// Finds the targets and signals each; returns them as `comm[pid]` on success.
    pub fn send(&self) -> Result<Vec<String>, SignalError> {
        let processes =
            procfs::list_processes(&self.proc_root, self.process.as_deref(), self.own_pid)
                .map_err(|source| SignalError::ProcUnreadable {
                    path: self.proc_root.clone(),
                    source,
                })?;
        let chosen = targets::choose(&processes, self.own_pid, self.process.as_deref());
        if chosen.is_empty() {
            return Err(SignalError::NoTarget(self.describe_wanted()));
        }
        let mut first_error = None;
        let mut signalled = Vec::with_capacity(chosen.len());
        for process in &chosen {
            match self.kill_one(process) {
                Ok(()) => signalled.push(label(process)),
                Err(err) => {
                    first_error.get_or_insert(err);
                }
            }
        }
        // Let a woken target run before the watcher's own bookkeeping (log line, metrics):
        // on a busy node they often share a CPU, and the app's reload is what matters.
        std::thread::yield_now();
        match first_error {
            Some(err) => Err(err),
            None => Ok(signalled),
        }
    }

    fn kill_one(&self, process: &ProcessInfo) -> Result<(), SignalError> {
        match kill(Pid::from_raw(process.pid), self.signal) {
            Ok(()) => Ok(()),
            Err(Errno::EPERM) => Err(SignalError::PermissionDenied {
                signal: self.signal,
                target: label(process),
                own_uid: nix::unistd::geteuid().as_raw(),
                target_uid: uid_text(&self.proc_root, process.pid),
            }),
            Err(source) => Err(SignalError::KillFailed {
                signal: self.signal,
                target: label(process),
                source,
            }),
        }
    }
}

fn label(process: &ProcessInfo) -> String {
    format!("{}[{}]", process.comm, process.pid)
}

fn uid_text(proc_root: &Path, pid: i32) -> String {
    procfs::process_uid(proc_root, pid).map_or_else(|| "?".to_owned(), |uid| uid.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signal_names_and_numbers_parse() {
        for text in ["SIGHUP", "HUP", "hup", "SigHup", "1", " 1 "] {
            assert_eq!(parse_signal(text).unwrap(), Signal::SIGHUP, "{text}");
        }
        assert_eq!(parse_signal("usr1").unwrap(), Signal::SIGUSR1);
        assert_eq!(parse_signal("SIGTERM").unwrap(), Signal::SIGTERM);
        assert_eq!(parse_signal("10").unwrap(), Signal::SIGUSR1);
    }

    #[test]
    fn unknown_signals_are_a_clear_error() {
        for text in ["", "SIGFOO", "0", "999", "-1"] {
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
    fn no_target_is_an_error_naming_what_was_looked_for() {
        let signaller = Signaller {
            signal: Signal::SIGHUP,
            process: Some("no-such-process-anywhere".into()),
            proc_root: PathBuf::from("/proc"),
            own_pid: i32::try_from(std::process::id()).unwrap(),
        };
        let err = signaller.send().unwrap_err();
        assert!(matches!(err, SignalError::NoTarget(_)));
        assert!(err.to_string().contains("no-such-process-anywhere"));
    }
}
