//! A fake kubelet for one Pod: publishes the Pod's ConfigMap/Secret volumes into
//! directories with the kubelet's AtomicWriter order, and — like the real kubelet, which
//! syncs a Pod whenever the API sends it an update of that Pod — re-reads the objects and
//! rewrites a directory on every change of the Pod object, if the data differs from what
//! it last wrote. No periodic resync unless [`FakeKubelet::with_periodic_sync`] asks.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::RecvTimeoutError;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use base64::Engine;
use serde_json::Value;

use crate::atomic_dir::AtomicDir;
pub use crate::atomic_dir::read_key;

use super::FakeApi;
use super::resources;
use super::state::{State, lock};
use super::store::ChangeKind;

/// Which kind of object a volume projects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigKind {
    /// A ConfigMap (`data` as text, `binaryData` base64).
    ConfigMap,
    /// A Secret (`data` base64).
    Secret,
}

/// Why the kubelet rewrote a directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    /// The initial publication.
    Start,
    /// An update of the Pod object.
    PodUpdate,
    /// The periodic resync.
    Periodic,
}

/// One directory rewrite.
#[derive(Debug, Clone)]
pub struct Rewrite {
    /// The volume directory.
    pub dir: PathBuf,
    /// The object's name.
    pub object: String,
    /// Why.
    pub trigger: Trigger,
    /// When the `..data` swap was done.
    pub at: Instant,
}

type Files = BTreeMap<String, Vec<u8>>;

struct Volume {
    name: String,
    kind: ConfigKind,
    dir: AtomicDir,
    last: Option<Files>,
}

/// A running fake kubelet; stops when dropped.
pub struct FakeKubelet {
    stop: Arc<AtomicBool>,
    period: Arc<Mutex<Option<Duration>>>,
    rewrites: Arc<Mutex<Vec<Rewrite>>>,
    thread: Option<JoinHandle<()>>,
}

impl FakeKubelet {
    /// Publishes each mount's object into its directory now, then follows the Pod
    /// `pod_namespace/pod_name`. `mounts` are `(object name, kind, directory)`.
    pub fn start(
        api: &FakeApi,
        pod_namespace: &str,
        pod_name: &str,
        mounts: Vec<(String, ConfigKind, PathBuf)>,
    ) -> FakeKubelet {
        let state = api.state.clone();
        let changes = state.subscribe();
        let rewrites = Arc::new(Mutex::new(Vec::new()));
        let mut volumes: Vec<Volume> = mounts
            .into_iter()
            .map(|(name, kind, dir)| Volume {
                name,
                kind,
                dir: AtomicDir::create::<&str, &[u8]>(&dir, &[]),
                last: None,
            })
            .collect();
        // The directory exists but holds nothing until the first sync below.
        for volume in &mut volumes {
            sync(&state, pod_namespace, volume, Trigger::Start, &rewrites);
        }
        let stop = Arc::new(AtomicBool::new(false));
        let period = Arc::new(Mutex::new(None));
        let thread = {
            let (stop, period, rewrites) = (stop.clone(), period.clone(), rewrites.clone());
            let (namespace, pod) = (pod_namespace.to_owned(), pod_name.to_owned());
            std::thread::Builder::new()
                .name("fake-kubelet".into())
                .spawn(move || {
                    let mut next_periodic = Instant::now();
                    while !stop.load(Ordering::Relaxed) {
                        let every: Option<Duration> = *lock(&period);
                        let trigger = match changes.recv_timeout(Duration::from_millis(20)) {
                            Ok(change) => {
                                let object = &change.object;
                                let is_our_pod = object.resource.plural == "pods"
                                    && object.resource.group.is_empty()
                                    && object.namespace == namespace
                                    && object.name == pod
                                    && change.kind != ChangeKind::Deleted;
                                is_our_pod.then_some(Trigger::PodUpdate)
                            }
                            Err(RecvTimeoutError::Timeout) => None,
                            Err(RecvTimeoutError::Disconnected) => return,
                        };
                        let trigger = trigger.or_else(|| {
                            let every = every?;
                            (Instant::now() >= next_periodic).then(|| {
                                next_periodic = Instant::now() + every;
                                Trigger::Periodic
                            })
                        });
                        if let Some(trigger) = trigger {
                            for volume in &mut volumes {
                                sync(&state, &namespace, volume, trigger, &rewrites);
                            }
                        }
                    }
                })
                .expect("spawn fake kubelet")
        };
        FakeKubelet {
            stop,
            period,
            rewrites,
            thread: Some(thread),
        }
    }

    /// Also resyncs every `every`, like the real kubelet's periodic sync.
    pub fn with_periodic_sync(self, every: Duration) -> Self {
        *lock(&self.period) = Some(every);
        self
    }

    /// Every rewrite so far, the initial publication included.
    pub fn rewrites(&self) -> Vec<Rewrite> {
        lock(&self.rewrites).clone()
    }

    /// Waits up to `timeout` until more than `count` rewrites happened; returns the first
    /// one after them.
    pub fn wait_for_rewrite(&self, count: usize, timeout: Duration) -> Option<Rewrite> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(rewrite) = lock(&self.rewrites).get(count) {
                return Some(rewrite.clone());
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for FakeKubelet {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Reads the object's files now; `None` if it does not exist (the volume keeps its content).
fn read_files(state: &State, namespace: &str, name: &str, kind: ConfigKind) -> Option<Files> {
    let plural = match kind {
        ConfigKind::ConfigMap => "configmaps",
        ConfigKind::Secret => "secrets",
    };
    let resource = resources::by_name(plural).expect("known resource");
    let object = state.store().get(resource, namespace, name)?.value();
    let decode = |v: &Value| {
        base64::engine::general_purpose::STANDARD
            .decode(v.as_str().unwrap_or_default())
            .unwrap_or_default()
    };
    let mut files = Files::new();
    let entries = |field: &str| {
        object
            .get(field)
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default()
    };
    match kind {
        ConfigKind::ConfigMap => {
            for (key, value) in entries("data") {
                files.insert(key, value.as_str().unwrap_or_default().as_bytes().to_vec());
            }
            for (key, value) in entries("binaryData") {
                files.insert(key, decode(&value));
            }
        }
        ConfigKind::Secret => {
            for (key, value) in entries("data") {
                files.insert(key, decode(&value));
            }
        }
    }
    Some(files)
}

fn sync(
    state: &State,
    namespace: &str,
    volume: &mut Volume,
    trigger: Trigger,
    rewrites: &Mutex<Vec<Rewrite>>,
) {
    let Some(files) = read_files(state, namespace, &volume.name, volume.kind) else {
        return;
    };
    if volume.last.as_ref() == Some(&files) {
        return;
    }
    let list: Vec<(&str, &[u8])> = files
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_slice()))
        .collect();
    volume.dir.update(&list);
    lock(rewrites).push(Rewrite {
        dir: volume.dir.path().to_path_buf(),
        object: volume.name.clone(),
        trigger,
        at: Instant::now(),
    });
    volume.last = Some(files);
}

/// The directory's current content as the app reads it (through the symlinks).
pub fn read(dir: &Path, key: &str) -> Option<String> {
    read_key(dir, key)
}
