//! A fake Kubernetes API server for reload-injector's integration tests and benches: the real
//! `reload-injector serve` binary talks to it through a kubeconfig over real HTTP. It is kept
//! for what a real API server cannot do on demand (faults, 410s, scale); where the two
//! disagree, the real one is right. Its own tests (`tests/fake_api.rs`) drive it with kube's
//! client.
//!
//! Crates evaluated first: `kube-fake-client` (an in-memory `kube::Client` modelled on
//! controller-runtime's fake client, with interceptors) and `kubernetes-mock` (scripted
//! expectations over `tower-test`) both fake the client inside the test process. Neither
//! serves HTTP, so the separate `serve` process cannot talk to them; this module serves the
//! API itself, over a real socket.
//!
//! What it does: namespaces, configmaps, secrets, pods, events (core and events.k8s.io),
//! deployments, statefulsets, daemonsets, replicasets, cronjobs, jobs, leases and
//! mutatingwebhookconfigurations, at the API server's paths, and Pod logs (`pods/log`, from
//! text a test sets with [`FakeApi::set_log`]); get, list (pagination over one consistent snapshot, selectors,
//! metadata-only), watch (resume, bookmarks, 410 `Expired`), create, update (409 on a stale
//! `resourceVersion`), patch (merge, JSON, strategic as merge), delete; injected faults and
//! outages; a record of every request with the RBAC permission it needs. Like the API
//! server, an update that changes nothing writes nothing (no new revision, no watch event).
//! Server-side apply is approximated as create-or-merge (no field ownership). Not done:
//! namespace existence checks, subresources other than `pods/log`, defaulting.

pub mod atomic_dir;
mod faults;
mod http;
pub mod kubelet;
mod list;
mod logs;
mod objects;
mod patch;
pub mod rbac;
pub mod record;
pub mod resources;
mod route;
pub mod selectors;
mod server;
mod state;
mod status;
pub mod store;
mod watch;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::Value;

#[allow(unused_imports)]
pub use faults::Matcher;
#[allow(unused_imports)]
pub use rbac::{Grant, Rbac};
#[allow(unused_imports)]
pub use record::{RbacNeed, Recorded};
#[allow(unused_imports)]
pub use status::ApiError;
#[allow(unused_imports)]
pub use store::{Change, ChangeKind, Stored};

use state::{Net, State, lock};

/// A running fake API server; stops when dropped.
pub struct FakeApi {
    state: Arc<State>,
    addr: SocketAddr,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    outage_ack: std::sync::Mutex<mpsc::Receiver<()>>,
    thread: Option<JoinHandle<()>>,
}

impl FakeApi {
    /// Binds 127.0.0.1 on a free port and serves on a background thread with its own
    /// two-worker tokio runtime.
    pub fn start() -> FakeApi {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local address");
        let state = Arc::new(State::new());
        let (shutdown, shutdown_rx) = tokio::sync::oneshot::channel();
        let (ack_tx, outage_ack) = mpsc::channel();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("fake-api")
            .enable_all()
            .build()
            .expect("fake API runtime");
        let served = state.clone();
        let net = state.net.subscribe();
        let thread = std::thread::Builder::new()
            .name("fake-api".into())
            .spawn(move || {
                runtime.block_on(server::serve(served, listener, net, shutdown_rx, ack_tx));
                runtime.shutdown_timeout(Duration::from_secs(1));
            })
            .expect("spawn fake API thread");
        FakeApi {
            state,
            addr,
            shutdown: Some(shutdown),
            outage_ack: std::sync::Mutex::new(outage_ack),
            thread: Some(thread),
        }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The listening address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// A kubeconfig pointing at this server (plain HTTP, a dummy token, context `fake`,
    /// namespace `default`).
    pub fn kubeconfig(&self) -> String {
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n    server: {}\n\
             users:\n- name: fake\n  user:\n    token: fake-token\ncontexts:\n- name: fake\n  context:\n\
             \x20   cluster: fake\n    user: fake\n    namespace: default\ncurrent-context: fake\n",
            self.url()
        )
    }

    /// Writes [`Self::kubeconfig`] to `dir/kubeconfig` and returns its path.
    pub fn write_kubeconfig(&self, dir: &Path) -> PathBuf {
        let path = dir.join("kubeconfig");
        std::fs::create_dir_all(dir).expect("create kubeconfig dir");
        std::fs::write(&path, self.kubeconfig()).expect("write kubeconfig");
        path
    }

    /// A `kube::Client` for this server, from [`Self::kubeconfig`].
    pub async fn client(&self) -> kube::Client {
        let kubeconfig =
            kube::config::Kubeconfig::from_yaml(&self.kubeconfig()).expect("read kubeconfig");
        let config = kube::Config::from_custom_kubeconfig(
            kubeconfig,
            &kube::config::KubeConfigOptions::default(),
        )
        .await
        .expect("kubeconfig is valid");
        kube::Client::try_from(config).expect("kube client")
    }

    // ---- objects, in process -------------------------------------------------------

    /// Creates or replaces an object (its `apiVersion`/`kind` pick the resource; a
    /// namespaced object without a namespace goes to `default`). Any `resourceVersion`
    /// in it is ignored. Returns the stored object. Panics on an invalid object.
    pub fn apply(&self, object: Value) -> Value {
        let api_version = object["apiVersion"].as_str().unwrap_or_default().to_owned();
        let kind = object["kind"].as_str().unwrap_or_default().to_owned();
        let resource = resources::by_kind(&api_version, &kind)
            .unwrap_or_else(|| panic!("the fake API does not serve {api_version} {kind}"));
        let name = object["metadata"]["name"]
            .as_str()
            .expect("apply needs metadata.name")
            .to_owned();
        let namespace = if resource.namespaced {
            object["metadata"]["namespace"]
                .as_str()
                .unwrap_or("default")
                .to_owned()
        } else {
            String::new()
        };
        let exists = self
            .state
            .store()
            .get(resource, &namespace, &name)
            .is_some();
        let stored = if exists {
            let mut object = object;
            if let Some(meta) = object["metadata"].as_object_mut() {
                meta.remove("resourceVersion");
            }
            self.state
                .update_with(resource, &namespace, &name, None, |_| Ok(object))
        } else {
            self.state.create(resource, &namespace, object, None)
        };
        stored
            .unwrap_or_else(|e| panic!("apply {kind} {namespace}/{name}: {e}"))
            .value()
    }

    /// Merges `patch` (a JSON merge patch) into an object; returns it, or `None` if absent.
    pub fn merge(
        &self,
        resource: &str,
        namespace: &str,
        name: &str,
        patch: Value,
    ) -> Option<Value> {
        let resource = resource_named(resource);
        let body = serde_json::to_vec(&patch).expect("patch serializes");
        match self.state.patch(
            resource,
            namespace,
            name,
            patch::PatchKind::Merge,
            &body,
            None,
        ) {
            Ok(stored) => Some(stored.value()),
            Err(e) if e.code == 404 => None,
            Err(e) => panic!("merge into {resource:?} {namespace}/{name}: {e}"),
        }
    }

    /// The current object (`namespace` is `""` for cluster-scoped resources).
    pub fn get(&self, resource: &str, namespace: &str, name: &str) -> Option<Value> {
        self.state
            .store()
            .get(resource_named(resource), namespace, name)
            .map(|s| s.value())
    }

    /// Deletes an object; `false` if it did not exist.
    pub fn delete(&self, resource: &str, namespace: &str, name: &str) -> bool {
        self.state
            .delete(resource_named(resource), namespace, name)
            .is_ok()
    }

    /// Every object of a resource, in every namespace, in key order.
    pub fn list(&self, resource: &str) -> Vec<Value> {
        let store = self.state.store();
        let at = store.revision();
        store
            .list(resource_named(resource), None, at, None, None, &|_| true)
            .expect("current revision")
            .0
            .iter()
            .map(|s| s.value())
            .collect()
    }

    /// How many objects a resource holds (cheaper than `list` for big stores).
    pub fn count(&self, resource: &str) -> usize {
        let store = self.state.store();
        let at = store.revision();
        store
            .list(resource_named(resource), None, at, None, None, &|_| true)
            .expect("current revision")
            .0
            .len()
    }

    /// The current revision (the global resourceVersion).
    pub fn revision(&self) -> u64 {
        self.state.store().revision()
    }

    /// Every change from now on, in revision order, each with the `Instant` it was
    /// committed (when watches can see it).
    pub fn subscribe(&self) -> mpsc::Receiver<Arc<Change>> {
        self.state.subscribe()
    }

    /// When the change with revision `rv` was first written to any watch stream.
    pub fn first_sent(&self, rv: u64) -> Option<Instant> {
        lock(&self.state.first_sent).get(&rv).copied()
    }

    /// How many watches have been answered with a 410 `Expired` event so far.
    pub fn expired_watches(&self) -> usize {
        self.state
            .expired_watches
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Sets the log of `container` in Pod `namespace/pod`, as `pods/log` serves it.
    pub fn set_log(&self, namespace: &str, pod: &str, container: &str, text: &str) {
        lock(&self.state.logs).insert(
            (namespace.to_owned(), pod.to_owned(), container.to_owned()),
            text.to_owned(),
        );
    }

    // ---- history --------------------------------------------------------------------

    /// Forgets the history up to now: a watch or list from an older version gets 410.
    pub fn compact(&self) {
        self.state.store().compact();
    }

    /// Keeps at most `changes` changes for watches to replay (default 200,000).
    pub fn set_history_limit(&self, changes: usize) {
        self.state.store().set_history_limit(changes);
    }

    /// How often watches that allow bookmarks get one (default 1 s); applies to watches
    /// started afterwards.
    pub fn set_bookmark_interval(&self, every: Duration) {
        *lock(&self.state.bookmark_interval) = every;
    }

    // ---- faults -----------------------------------------------------------------------

    /// The next `count` requests matching `matcher` are answered with a `Status` of `code`.
    pub fn fail_next(&self, matcher: Matcher, code: u16, count: usize) {
        lock(&self.state.faults).fail_next(matcher, code, count);
    }

    /// Requests matching `matcher` wait `by` before they are handled (until cleared).
    pub fn delay(&self, matcher: Matcher, by: Duration) {
        lock(&self.state.faults).delay(matcher, by);
    }

    /// How many requests a [`FakeApi::delay`] has held so far, counted as they arrive.
    pub fn held_requests(&self) -> usize {
        lock(&self.state.faults).held()
    }

    /// Removes every injected failure and delay.
    pub fn clear_faults(&self) {
        lock(&self.state.faults).clear();
    }

    /// Closes the listener and cuts every open connection (watches included) now, then
    /// accepts again on the same port after `for_how_long`. Returns once the listener is
    /// closed and every connection open before is cut (so no earlier watch sees what the test
    /// does next).
    pub fn set_unreachable(&self, for_how_long: Duration) {
        let acks = lock(&self.outage_ack);
        while acks.try_recv().is_ok() {}
        let mut epoch = 0;
        self.state.net.send_modify(|net: &mut Net| {
            net.epoch += 1;
            net.down_until = Some(Instant::now() + for_how_long);
            epoch = net.epoch;
        });
        acks.recv_timeout(Duration::from_secs(5))
            .expect("the fake API closes its listener");
        let deadline = Instant::now() + Duration::from_secs(5);
        while lock(&self.state.open_connections)
            .range(..epoch)
            .next()
            .is_some()
        {
            assert!(
                Instant::now() < deadline,
                "the fake API cuts its open connections"
            );
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    // ---- recording ----------------------------------------------------------------------

    /// Every request so far, in the order they were answered.
    pub fn requests(&self) -> Vec<Recorded> {
        lock(&self.state.requests).clone()
    }

    /// Forgets the recorded requests.
    pub fn clear_requests(&self) {
        lock(&self.state.requests).clear();
    }

    /// Waits up to `timeout` for a recorded request matching `predicate`.
    pub fn wait_for_request(
        &self,
        predicate: impl Fn(&Recorded) -> bool,
        timeout: Duration,
    ) -> Option<Recorded> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(found) = lock(&self.state.requests).iter().find(|r| predicate(r)) {
                return Some(found.clone());
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for FakeApi {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn resource_named(name: &str) -> &'static resources::Resource {
    resources::by_name(name).unwrap_or_else(|| panic!("the fake API does not serve {name:?}"))
}
