//! The watcher under test: the real binary, logging JSON lines to a file.

use std::fs::{self, File};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::Value;

use super::copies::run_copy;
use super::pidns::{PidNamespace, Proc};
use super::scratch::{Scratch, runnable_by_others};
use super::{PATIENCE, http_get, wait_for};

/// The binary built by cargo for this test run.
pub const BINARY: &str = env!("CARGO_BIN_EXE_reload-injector");

/// A running `reload-injector watch`.
pub struct Watcher {
    proc: Proc,
    log: PathBuf,
    metrics: SocketAddr,
}

impl Watcher {
    /// Starts `reload-injector watch ARGS` (plus JSON logs and a metrics port) and waits
    /// until it has taken its baseline (its `watching` line).
    pub fn start(log: &Path, args: &[&str]) -> Watcher {
        Watcher::start_with(Command::new(BINARY), log, args)
    }

    /// Like [`Watcher::start`], inside `ns` as its own container, optionally as `uid`.
    pub fn start_in(ns: &PidNamespace, uid: Option<u32>, log: &Path, args: &[&str]) -> Watcher {
        Watcher::start_binary_in(BINARY, ns, uid, log, args)
    }

    /// Like [`Watcher::start_in`] with another build of the binary (the benchmarks measure
    /// the static build the image ships too).
    pub fn start_binary_in(
        binary: &str,
        ns: &PidNamespace,
        uid: Option<u32>,
        log: &Path,
        args: &[&str],
    ) -> Watcher {
        let mut command = ns.command(uid);
        match (uid, log.parent()) {
            // Another user may not be able to reach the build directory (an owner-only
            // checkout): run a copy from the test's scratch directory instead.
            (Some(_), Some(dir)) => command.arg(runnable_by_others(Path::new(binary), dir)),
            _ => command.arg(binary),
        };
        Watcher::start_with(command, log, args)
    }

    /// Starts `reload-injector watch --dir DIR ARGS`, logging to `watch.log` in `scratch`.
    pub fn of_dir(scratch: &Scratch, dir: &Path, args: &[&str]) -> Watcher {
        Watcher::start(&scratch.join("watch.log"), &dir_args(dir, args))
    }

    /// Like [`Watcher::of_dir`], inside `ns` as its own container, optionally as `uid`.
    pub fn of_dir_in(
        ns: &PidNamespace,
        uid: Option<u32>,
        scratch: &Scratch,
        dir: &Path,
        args: &[&str],
    ) -> Watcher {
        Watcher::start_in(ns, uid, &scratch.join("watch.log"), &dir_args(dir, args))
    }

    fn start_with(mut command: Command, log: &Path, args: &[&str]) -> Watcher {
        let file = File::create(log).expect("create watcher log");
        command
            .args([
                "watch",
                "--log-format",
                "json",
                "--metrics-listen",
                "127.0.0.1:0",
            ])
            .args(args)
            .env_remove("RUST_LOG")
            .stdout(Stdio::null())
            .stderr(Stdio::from(file));
        let child = run_copy(|| command.spawn()).expect("start the watcher");
        let mut proc = Proc(child);
        let metrics = wait_ready(&mut proc, log);
        let watcher = Watcher {
            proc,
            log: log.to_path_buf(),
            metrics,
        };
        wait_for("the watcher's metrics endpoint", PATIENCE, || {
            http_get(metrics, "/healthz").filter(|(status, _)| *status == 200)
        });
        watcher
    }

    /// Every JSON log line so far.
    pub fn lines(&self) -> Vec<Value> {
        read_lines(&self.log)
    }

    /// Log lines whose message is `message`.
    pub fn messages(&self, message: &str) -> Vec<Value> {
        self.lines()
            .into_iter()
            .filter(|line| line["message"].as_str() == Some(message))
            .collect()
    }

    /// How many `reloaded` lines so far.
    pub fn reloads(&self) -> usize {
        self.messages("reloaded").len()
    }

    /// Waits until at least `n` reloads were logged.
    pub fn wait_reloads(&self, n: usize) {
        wait_for(
            &format!("{n} reload(s); log:\n{}", self.log_text()),
            PATIENCE,
            || (self.reloads() >= n).then_some(()),
        );
    }

    /// The raw log.
    pub fn log_text(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The `/metrics` page.
    pub fn metrics_page(&self) -> String {
        http_get(self.metrics, "/metrics")
            .map(|(_, body)| body)
            .unwrap_or_default()
    }

    /// One metric sample (0 when absent).
    pub fn metric(&self, series: &str) -> f64 {
        super::metric(&self.metrics_page(), series).unwrap_or(0.0)
    }

    /// Waits until `watch_events_total` reached `n`: the events were read and handled.
    pub fn wait_events(&self, n: f64) {
        wait_for(&format!("{n} inotify events"), PATIENCE, || {
            (self.metric("watch_events_total") >= n).then_some(())
        });
    }

    /// Waits until `watch_events_total` passed `events` and `reload_pending` is 0 in the same
    /// page: the watcher read the events of a change made after `events` was noted, and did
    /// all they cause (debounced, looked, reloaded or found nothing to do).
    pub fn wait_idle_after(&self, events: f64) {
        wait_for(
            &format!("the watcher to read events past {events} and go idle"),
            PATIENCE,
            || {
                let page = self.metrics_page();
                let read = super::metric(&page, "watch_events_total")?;
                let pending = super::metric(&page, "reload_pending")?;
                (read > events && pending == 0.0).then_some(())
            },
        );
    }

    /// PID of the process started (`nsenter` when started in a namespace).
    pub fn launcher_pid(&self) -> u32 {
        self.proc.id()
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        self.proc.is_running()
    }

    /// Sends SIGTERM and waits for the exit status.
    pub fn terminate(mut self) -> ExitStatus {
        let pid = Pid::from_raw(self.proc.id() as i32);
        kill(pid, Signal::SIGTERM).expect("SIGTERM the watcher");
        let child = &mut self.proc.0;
        wait_for("the watcher to exit after SIGTERM", PATIENCE, || {
            child.try_wait().ok().flatten()
        })
    }
}

/// Waits for the `watching` line; returns the metrics address it names.
fn wait_ready(proc: &mut Proc, log: &Path) -> SocketAddr {
    wait_for("the watcher's `watching` line", PATIENCE, || {
        if !proc.is_running() {
            panic!(
                "the watcher exited early:\n{}",
                fs::read_to_string(log).unwrap_or_default()
            );
        }
        read_lines(log)
            .iter()
            .find(|line| line["message"] == "watching")
            .and_then(|line| line["metrics"].as_str()?.parse().ok())
    })
}

fn read_lines(log: &Path) -> Vec<Value> {
    fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect()
}

/// `--dir DIR` followed by `args`.
fn dir_args<'a>(dir: &'a Path, args: &[&'a str]) -> Vec<&'a str> {
    let dir = dir.to_str().expect("test paths are UTF-8");
    ["--dir", dir]
        .into_iter()
        .chain(args.iter().copied())
        .collect()
}
