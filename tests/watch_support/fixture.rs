//! Child processes that count the SIGHUPs they receive, written as small bash scripts.
//!
//! A master process sets its SIGHUP trap first and only then renames itself (its `comm`) to
//! the name the watcher looks for, so it can never be signalled before it can count. Its
//! workers are forked afterwards and carry the same name, as nginx or PostgreSQL workers do.

use std::fs;
use std::path::{Path, PathBuf};

/// Files of one counting app.
pub struct Counter {
    /// One line per SIGHUP: `master` or `worker`.
    pub out: PathBuf,
    /// One line per process ready to count: `master-ready` / `worker-ready`.
    pub ready: PathBuf,
    /// How many workers it forks.
    pub workers: usize,
}

impl Counter {
    /// Paths `<dir>/<tag>.out` and `<dir>/<tag>.ready`.
    pub fn new(dir: &Path, tag: &str, workers: usize) -> Counter {
        Counter {
            out: dir.join(format!("{tag}.out")),
            ready: dir.join(format!("{tag}.ready")),
            workers,
        }
    }

    /// The bash script of a master named `name` (via `/proc/self/comm`) with workers.
    pub fn script(&self, name: &str) -> String {
        let out = self.out.display();
        let ready = self.ready.display();
        format!(
            r#"trap 'echo master >> {out}; kill $! 2>/dev/null' HUP
printf '%s' '{name}' > /proc/$BASHPID/comm
for i in $(seq 1 {workers}); do
  ( trap 'echo worker >> {out}; kill $! 2>/dev/null' HUP
    echo worker-ready >> {ready}
    while :; do sleep 1000 & wait $!; done ) &
done
echo master-ready >> {ready}
while :; do sleep 1000 & wait $!; done
"#,
            workers = self.workers
        )
    }

    /// The script of a pause-like PID 1 that counts SIGHUPs as `pid1` lines.
    pub fn pid1_script(&self) -> String {
        let out = self.out.display();
        let ready = self.ready.display();
        format!(
            r#"trap 'echo pid1 >> {out}; kill $! 2>/dev/null' HUP
echo master-ready >> {ready}
while :; do sleep 1000 & wait $!; done
"#
        )
    }

    /// Whether the master and all workers have their traps set.
    pub fn is_ready(&self) -> bool {
        let text = fs::read_to_string(&self.ready).unwrap_or_default();
        text.lines().any(|line| line == "master-ready")
            && text.lines().filter(|line| *line == "worker-ready").count() == self.workers
    }

    /// How many SIGHUPs were counted by lines equal to `who` (`master`, `worker`, `pid1`).
    pub fn count(&self, who: &str) -> usize {
        fs::read_to_string(&self.out)
            .unwrap_or_default()
            .lines()
            .filter(|line| *line == who)
            .count()
    }
}
