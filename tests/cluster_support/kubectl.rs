//! The user's view: the real `kubectl`, with what it printed on stdout and stderr.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

use super::Cluster;

/// One `kubectl` call, not yet run.
pub struct Kubectl {
    command: Command,
    line: String,
    stdin: Option<String>,
    logs: PathBuf,
}

/// What a `kubectl` call printed.
#[derive(Debug, Clone)]
pub struct Output {
    /// Exit status 0.
    pub ok: bool,
    /// stdout.
    pub stdout: String,
    /// stderr (where kubectl prints `Warning:` lines and errors).
    pub stderr: String,
}

impl Output {
    /// stdout as JSON (for `-o json`).
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("kubectl printed no JSON ({e}): {}", self.stdout))
    }

    /// The `Warning:` lines on stderr (the admission warnings kubectl shows), without the prefix.
    pub fn warnings(&self) -> Vec<String> {
        self.stderr
            .lines()
            .filter_map(|l| l.strip_prefix("Warning: "))
            .map(str::to_owned)
            .collect()
    }
}

impl Kubectl {
    /// `kubectl --kubeconfig KUBECONFIG ARGS…`, every request bounded to 30 s.
    pub fn new(cluster: &Cluster, kubeconfig: &Path, args: &[&str]) -> Kubectl {
        let mut command = Command::new(&cluster.assets.kubectl);
        command
            .arg(format!("--kubeconfig={}", kubeconfig.display()))
            .arg("--request-timeout=30s")
            .args(args);
        Kubectl {
            command,
            line: format!("kubectl {}", args.join(" ")),
            stdin: None,
            logs: cluster.dir.clone(),
        }
    }

    /// Feeds `text` on stdin (for `-f -`).
    pub fn stdin(mut self, text: &str) -> Kubectl {
        self.stdin = Some(text.to_owned());
        self
    }

    /// Runs it, whatever the exit status.
    pub fn try_run(mut self) -> Output {
        self.command
            .stdin(if self.stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = self
            .command
            .spawn()
            .unwrap_or_else(|e| panic!("failed to run {} ({e}): is kubectl installed?", self.line));
        if let Some(text) = self.stdin.take() {
            let mut pipe = child.stdin.take().unwrap();
            std::thread::spawn(move || {
                let _ = pipe.write_all(text.as_bytes());
            });
        }
        let out = child
            .wait_with_output()
            .expect("failed to wait for kubectl");
        Output {
            ok: out.status.success(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// Runs it and panics, with what it printed, unless it succeeds.
    pub fn run(self) -> Output {
        let (line, logs) = (self.line.clone(), self.logs.clone());
        let out = self.try_run();
        assert!(
            out.ok,
            "{line} failed:\n{}\n(cluster logs in {})",
            out.stderr,
            logs.display()
        );
        out
    }
}
