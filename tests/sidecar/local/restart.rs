//! Restart in place, the sidecar's side: the real `reload-injector watch` with only the
//! restart-in-place flags, its ConfigMaps and its downward API file written as the kubelet writes
//! volumes. It exits with the restart code once the desired env hash equals the hash of its
//! mounted copy and differs from what the containers started with; never for its initial state,
//! never twice for one change, and a sidecar restarted alone still restarts the Pod for data the
//! app has not started with.

use crate::watch_support;

use std::collections::BTreeSet;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use reload_injector::hash::{ConfigData, ConfigId, ConfigObject, Consumed, Lookup, env_hash};
use watch_support::kubelet::AtomicDir;
use watch_support::scratch::Scratch;
use watch_support::watcher::BINARY;

/// How long a watcher that must not exit is given to do so anyway.
const QUIET: Duration = Duration::from_millis(1500);
/// How long one that must exit may take (a loaded 2-core machine).
const PATIENCE: Duration = Duration::from_secs(20);

/// The Pod's layout: ConfigMap `env` (key `a` read through env) and ConfigMap `all` (envFrom)
/// under `env/`, the downward API file under `pod/`, the state directory `state/`.
struct PodFiles {
    scratch: Scratch,
    env: AtomicDir,
    all: AtomicDir,
    pod: AtomicDir,
}

impl PodFiles {
    fn new(tag: &str, a: &str) -> PodFiles {
        let scratch = Scratch::new(tag);
        let env = AtomicDir::create(&scratch.join("env/env"), &[("a", a), ("b", "unread")]);
        let all = AtomicDir::create(&scratch.join("env/all"), &[("x", "1")]);
        let pod = AtomicDir::create(&scratch.join("pod"), &[("env-hash", "")]);
        std::fs::create_dir_all(scratch.join("state")).unwrap();
        PodFiles {
            scratch,
            env,
            all,
            pod,
        }
    }

    /// Starts the watcher (as the kubelet starts the sidecar container).
    fn start(&self) -> Child {
        let path = |name: &str| self.scratch.join(name).display().to_string();
        Command::new(BINARY)
            .args(["watch", "--env-hash-file", &path("pod/env-hash")])
            .args([
                "--env-state-dir",
                &path("state"),
                "--env-root",
                &path("env"),
            ])
            .args([
                "--env-key",
                "env/a",
                "--env-object",
                "all",
                "--resync",
                "1s",
            ])
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(self.scratch.join("watch.log")).unwrap())
            .spawn()
            .expect("start the watcher")
    }

    /// Writes the Pod's desired env hash (as the controller's annotation reaches the file).
    fn desire(&self, hash: &str) {
        self.pod.update(&[("env-hash", hash)]);
    }

    fn recorded(&self) -> String {
        std::fs::read_to_string(self.scratch.join("state/env-hash"))
            .unwrap_or_default()
            .trim()
            .to_owned()
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.scratch.join("watch.log")).unwrap_or_default()
    }
}

/// The env hash the webhook and the controller give for `a` and `all`'s `x`.
fn hash_of(a: &str, x: &str) -> String {
    let object = |name: &str, pairs: &[(&str, &str)]| {
        let id = ConfigId::config_map(name);
        let values = pairs.iter().map(|(k, v)| (*k, v.as_bytes()));
        let object = ConfigObject::from_values(&id, values, None).unwrap();
        (id, Lookup::Found(object))
    };
    let data = ConfigData::from([object("env", &[("a", a)]), object("all", &[("x", x)])]);
    let consumed: BTreeSet<Consumed> = [
        Consumed::Key(ConfigId::config_map("env"), "a".into()),
        Consumed::Whole(ConfigId::config_map("all")),
    ]
    .into();
    env_hash(&consumed, &data).unwrap()
}

/// Waits for the watcher to exit; its code, or `None` if it is still running after `limit`.
fn exit_code(child: &mut Child, limit: Duration) -> Option<i32> {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status.code().unwrap_or(-1));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

fn stop(mut child: Child) {
    let _ = child.kill();
    let _ = child.wait();
}

/// Waits until the watcher has taken its first look (it records what the app starts with).
fn wait_started(files: &PodFiles) {
    let deadline = Instant::now() + PATIENCE;
    while !files.log().contains("restart in place: watching") {
        assert!(Instant::now() < deadline, "never started:\n{}", files.log());
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn the_initial_state_never_restarts_the_pod() {
    let files = PodFiles::new("initial", "1");
    files.desire(&hash_of("1", "1"));
    let mut child = files.start();
    wait_started(&files);
    assert_eq!(exit_code(&mut child, QUIET), None, "{}", files.log());
    assert_eq!(files.recorded(), hash_of("1", "1"));
    stop(child);
    // A Pod stamped before the data changed: its app started with the new data already.
    let files = PodFiles::new("stale-stamp", "2");
    files.desire(&hash_of("1", "1"));
    let mut child = files.start();
    wait_started(&files);
    files.desire(&hash_of("2", "1"));
    assert_eq!(exit_code(&mut child, QUIET), None, "{}", files.log());
    stop(child);
}

#[test]
fn a_change_restarts_once_the_data_matches_and_never_twice() {
    let files = PodFiles::new("change", "1");
    files.desire(&hash_of("1", "1"));
    let mut child = files.start();
    wait_started(&files);
    // The controller's new desired hash arrives before the kubelet's cache has the data.
    let new = hash_of("2", "1");
    files.desire(&new);
    assert_eq!(exit_code(&mut child, QUIET), None, "{}", files.log());
    // A key nobody reads changes: still nothing.
    files.env.update(&[("a", "1"), ("b", "changed")]);
    assert_eq!(exit_code(&mut child, QUIET), None, "{}", files.log());
    let since = Instant::now();
    files.env.update(&[("a", "2"), ("b", "changed")]);
    assert_eq!(exit_code(&mut child, PATIENCE), Some(42), "{}", files.log());
    eprintln!("exited {:?} after the data arrived", since.elapsed());
    assert_eq!(files.recorded(), new);
    assert!(
        files.log().contains("restarting the pod in place"),
        "{}",
        files.log()
    );
    // The kubelet restarts every container, the sidecar too: the same change is done.
    let mut again = files.start();
    wait_started(&files);
    assert_eq!(exit_code(&mut again, QUIET), None, "{}", files.log());
    // A later change of the envFrom ConfigMap restarts it again.
    files.all.update(&[("x", "2")]);
    files.desire(&hash_of("2", "2"));
    assert_eq!(exit_code(&mut again, PATIENCE), Some(42), "{}", files.log());
}

#[test]
fn a_sidecar_restarted_alone_still_restarts_the_pod_for_new_data() {
    let files = PodFiles::new("alone", "1");
    files.desire(&hash_of("1", "1"));
    let first = files.start();
    wait_started(&files);
    stop(first);
    // While it was down (an OOM kill), the data changed and the controller wrote the new hash.
    files.env.update(&[("a", "2")]);
    files.desire(&hash_of("2", "1"));
    let mut second = files.start();
    assert_eq!(
        exit_code(&mut second, PATIENCE),
        Some(42),
        "{}",
        files.log()
    );
}

#[test]
fn without_a_desired_hash_it_waits() {
    let files = PodFiles::new("unstamped", "1");
    let mut child = files.start();
    wait_started(&files);
    files.env.update(&[("a", "2")]);
    assert_eq!(exit_code(&mut child, QUIET), None, "{}", files.log());
    stop(child);
}
