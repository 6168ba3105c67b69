//! The pure election decision and records, then the I/O loop against a mock Lease API
//! (tower-test) on a paused clock.

use std::sync::{Arc, Mutex};

use http::Method;
use serde_json::Value;
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;

use super::*;
use crate::controller::mock_api::{self, status};

const D: Duration = Duration::from_secs(15);
const NS: &str = "reload-injector";
const NAME: &str = "reload-injector";

fn lease(holder: Option<&str>, seconds: Option<i32>) -> Lease {
    Lease {
        metadata: ObjectMeta {
            name: Some(NAME.into()),
            namespace: Some(NS.into()),
            resource_version: Some("1".into()),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: holder.map(str::to_owned),
            lease_duration_seconds: seconds,
            lease_transitions: Some(3),
            ..LeaseSpec::default()
        }),
    }
}

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

// ---- the pure decision ----

#[test]
fn timing_derives_from_the_lease_duration() {
    let timing = Timing::new(D);
    assert_eq!(timing.renew_interval, secs(5));
    assert_eq!(timing.renew_deadline, secs(10));
    assert_eq!(timing.retry_interval, Duration::from_millis(3750));
    assert_eq!(timing.call_timeout, secs(5));
    assert!(timing.renew_interval + timing.call_timeout <= timing.renew_deadline);
    assert!(timing.renew_deadline < timing.lease_duration);
}

#[test]
fn the_decision_follows_the_lease_and_the_local_clock() {
    let (t0, timing) = (Instant::now(), Timing::new(D));
    assert_eq!(
        next_action(None, "me", t0, t0 + secs(100), &timing),
        Action::Create,
        "no lease means create"
    );
    let (mine, theirs) = (lease(Some("me"), Some(15)), lease(Some("them"), Some(15)));
    let long = lease(Some("them"), Some(40));
    let unset = [None, Some(0), Some(-5)].map(|seconds| lease(Some("them"), seconds));
    let (released, blank) = (lease(None, Some(1)), lease(Some(""), Some(15)));
    let mut no_spec = lease(None, None);
    no_spec.spec = None;
    let wait = Action::Wait {
        until: t0 + secs(5),
    };
    let follow = |seconds| Action::Follow {
        holder: "them".into(),
        expires: t0 + secs(seconds),
    };
    let ns = Duration::from_nanos(1);
    let cases = [
        ("mine: waits", &mine, secs(0), wait.clone()),
        ("mine: waits until due", &mine, secs(5) - ns, wait),
        ("mine: renews when due", &mine, secs(5), Action::Renew),
        // Past its expiry the record still names us: renewing with its resourceVersion is safe.
        ("mine: renews even late", &mine, secs(60), Action::Renew),
        ("theirs: followed", &theirs, secs(0), follow(15)),
        ("theirs: until expiry", &theirs, secs(15) - ns, follow(15)),
        ("theirs: expired", &theirs, secs(15), Action::TakeOver),
        ("theirs: long expired", &theirs, secs(99), Action::TakeOver),
        // The record's own duration wins over ours when set.
        ("own duration", &long, secs(39), follow(40)),
        ("own duration, expired", &long, secs(40), Action::TakeOver),
        ("no duration", &unset[0], secs(14), follow(15)),
        ("no duration, expired", &unset[0], D, Action::TakeOver),
        ("zero", &unset[1], secs(14), follow(15)),
        ("zero, expired", &unset[1], D, Action::TakeOver),
        ("negative", &unset[2], secs(14), follow(15)),
        ("negative, expired", &unset[2], D, Action::TakeOver),
        // A free Lease is taken at once.
        ("free: released", &released, secs(0), Action::TakeOver),
        ("free: blank holder", &blank, secs(0), Action::TakeOver),
        ("free: no spec", &no_spec, secs(0), Action::TakeOver),
    ];
    for (case, lease, after, expected) in cases {
        let action = next_action(Some(lease), "me", t0, t0 + after, &timing);
        assert_eq!(action, expected, "{case}");
    }
}

#[test]
fn only_a_changed_record_moves_the_change_time() {
    let t0 = Instant::now();
    let first = observe(None, lease(Some("them"), Some(15)), t0);
    assert_eq!(first.changed_at, t0);
    // A new resourceVersion or label with the same record is no renewal.
    let mut relabeled = lease(Some("them"), Some(15));
    relabeled.metadata.resource_version = Some("9".into());
    relabeled.metadata.labels = Some([("a".to_owned(), "b".to_owned())].into());
    let same = observe(Some(&first), relabeled, t0 + secs(7));
    assert_eq!(same.changed_at, t0);
    let mut renewed = lease(Some("them"), Some(15));
    renewed.spec.as_mut().unwrap().renew_time = Some(MicroTime(Timestamp::UNIX_EPOCH));
    let moved = observe(Some(&same), renewed, t0 + secs(8));
    assert_eq!(moved.changed_at, t0 + secs(8));
}

#[test]
fn records_written_for_create_renew_takeover_and_release() {
    let now = Timestamp::from_second(1_800_000_000).unwrap();
    let later = Timestamp::from_second(1_800_000_005).unwrap();

    let created = held_spec(None, "me", D, now);
    assert_eq!(created.holder_identity.as_deref(), Some("me"));
    assert_eq!(created.lease_duration_seconds, Some(15));
    assert_eq!(created.lease_transitions, Some(0));
    assert_eq!(created.acquire_time, Some(MicroTime(now)));
    assert_eq!(created.renew_time, Some(MicroTime(now)));

    let renewed = held_spec(Some(&created), "me", D, later);
    assert_eq!(renewed.acquire_time, Some(MicroTime(now)));
    assert_eq!(renewed.renew_time, Some(MicroTime(later)));
    assert_eq!(renewed.lease_transitions, Some(0));

    let theirs = lease(Some("them"), Some(15)).spec.unwrap();
    let taken = held_spec(Some(&theirs), "me", D, later);
    assert_eq!(taken.holder_identity.as_deref(), Some("me"));
    assert_eq!(taken.lease_transitions, Some(4));
    assert_eq!(taken.acquire_time, Some(MicroTime(later)));

    let released = released_spec(&renewed, later);
    assert_eq!(released.holder_identity, None);
    assert_eq!(released.lease_duration_seconds, Some(1));
    assert_eq!(released.lease_transitions, Some(0));
    assert_eq!(released.acquire_time, Some(MicroTime(now)));
    assert_eq!(released.renew_time, Some(MicroTime(later)));
    // Taking over a released Lease is a transition too.
    assert_eq!(
        held_spec(Some(&released), "you", D, later).lease_transitions,
        Some(1)
    );

    // Written as MicroTime: microseconds, UTC.
    let json = serde_json::to_value(&created).unwrap();
    assert_eq!(json["renewTime"], "2027-01-15T08:00:00.000000Z");
}

#[test]
fn lease_seconds_round_up_and_stay_positive() {
    assert_eq!(lease_seconds(secs(15)), 15);
    assert_eq!(lease_seconds(Duration::from_millis(1500)), 2);
    assert_eq!(lease_seconds(Duration::from_millis(200)), 1);
    assert_eq!(lease_seconds(Duration::ZERO), 1);
    assert_eq!(lease_seconds(secs(u64::MAX)), i32::MAX);
}

#[test]
fn identity_is_pod_or_host_and_a_suffix() {
    assert_eq!(
        identity_from(Some("web-0"), Some("node"), 0xab),
        "web-0-000000ab"
    );
    assert_eq!(
        identity_from(Some(" "), Some("host-1\n"), 0xdead_beef),
        "host-1-deadbeef"
    );
    assert_eq!(identity_from(None, None, 1), "reload-injector-00000001");
    let (a, b) = (identity(), identity());
    let suffix = |id: &str| id.rsplit_once('-').map(|(_, s)| s.to_owned()).unwrap();
    assert_eq!(suffix(&a).len(), 8);
    assert!(suffix(&a).chars().all(|c| c.is_ascii_hexdigit()));
    assert_ne!(a, b, "each process draws its own suffix");
}

// ---- the I/O loop against a mock Lease API ----

/// How the mock fails.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Fault {
    /// Every request fails with this status.
    Status(u16),
    /// No request is answered.
    Hang,
}

/// One request the mock received.
#[derive(Clone)]
struct Call {
    method: Method,
    at: Instant,
    /// Which client sent it.
    client: &'static str,
    body: Value,
    /// The sender's published leadership when the request arrived.
    leading: bool,
    /// The status answered (0: none).
    code: u16,
}

/// A Lease store with resourceVersion checks, shared by the mock clients.
#[derive(Default)]
struct Store {
    lease: Option<Lease>,
    version: u64,
    calls: Vec<Call>,
    fault: Option<Fault>,
    /// On the next PUT, this holder renews first, so the PUT conflicts.
    rival_first: Option<String>,
}

type Shared = Arc<Mutex<Store>>;

impl Store {
    fn put(&mut self, mut lease: Lease) -> Lease {
        self.version += 1;
        lease.metadata.resource_version = Some(self.version.to_string());
        self.lease = Some(lease.clone());
        lease
    }

    /// `holder` writes a fresh renewal of its own.
    fn renew_as(&mut self, holder: &str) {
        let current = self.lease.clone().unwrap_or_else(|| lease(None, None));
        let spec = held_spec(current.spec.as_ref(), holder, D, Timestamp::now());
        self.put(Lease {
            spec: Some(spec),
            ..current
        });
    }

    fn calls_from(&self, client: &str) -> Vec<Call> {
        self.calls
            .iter()
            .filter(|call| call.client == client)
            .cloned()
            .collect()
    }
}

fn answer(store: &mut Store, method: &Method, path: &str, body: &Value) -> (u16, Value) {
    let collection = format!("/apis/coordination.k8s.io/v1/namespaces/{NS}/leases");
    let item = format!("{collection}/{NAME}");
    match (method, path) {
        (&Method::GET, p) if p == item => match &store.lease {
            Some(lease) => (200, serde_json::to_value(lease).unwrap()),
            None => (404, status(404, "NotFound")),
        },
        (&Method::POST, p) if p == collection => {
            if store.lease.is_some() {
                return (409, status(409, "AlreadyExists"));
            }
            let lease: Lease = serde_json::from_value(body.clone()).unwrap();
            (201, serde_json::to_value(store.put(lease)).unwrap())
        }
        (&Method::PUT, p) if p == item => {
            if let Some(rival) = store.rival_first.take() {
                store.renew_as(&rival);
            }
            let lease: Lease = serde_json::from_value(body.clone()).unwrap();
            let current = store
                .lease
                .as_ref()
                .map(|l| l.metadata.resource_version.clone());
            match current {
                None => (404, status(404, "NotFound")),
                Some(version) if version != lease.metadata.resource_version => {
                    (409, status(409, "Conflict"))
                }
                Some(_) => (200, serde_json::to_value(store.put(lease)).unwrap()),
            }
        }
        _ => (405, status(405, "MethodNotAllowed")),
    }
}

/// A kube client named `name` whose requests the shared store answers; `leading` is the
/// sender's published leadership, recorded with each request.
fn mock_client(store: &Shared, name: &'static str, leading: watch::Receiver<bool>) -> kube::Client {
    let store = store.clone();
    mock_api::client(move |parts, body| {
        let mut store = store.lock().unwrap();
        let mut call = Call {
            method: parts.method.clone(),
            at: Instant::now(),
            client: name,
            body: body.clone(),
            leading: *leading.borrow(),
            code: 0,
        };
        let (code, reply) = match store.fault {
            Some(Fault::Hang) => {
                store.calls.push(call);
                return None;
            }
            Some(Fault::Status(code)) => (code, status(code, "InternalError")),
            None => answer(&mut store, &parts.method, parts.uri.path(), &body),
        };
        call.code = code;
        store.calls.push(call);
        Some((code, reply))
    })
}

/// A running elector: its identity, its leadership log, and how to stop it.
struct Running {
    identity: String,
    leading: watch::Receiver<bool>,
    /// Every published value with the time it was seen.
    log: Arc<Mutex<Vec<(Instant, bool)>>>,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
}

impl Running {
    fn start(store: &Shared, name: &'static str) -> Running {
        let (sender, leading) = watch::channel(false);
        let client = mock_client(store, name, leading.clone());
        let identity = format!("{name}-0000abcd");
        let config = LeaseConfig {
            namespace: NS.into(),
            name: NAME.into(),
            identity: identity.clone(),
            lease_duration: D,
        };
        let log = Arc::new(Mutex::new(Vec::new()));
        let mut watched = leading.clone();
        let record = log.clone();
        tokio::spawn(async move {
            while watched.changed().await.is_ok() {
                let value = *watched.borrow_and_update();
                record.lock().unwrap().push((Instant::now(), value));
            }
        });
        let (stop, stopped) = oneshot::channel();
        let task = tokio::spawn(run(client, config, sender, async move {
            let _ = stopped.await;
        }));
        Running {
            identity,
            leading,
            log,
            stop: Some(stop),
            task,
        }
    }

    fn is_leading(&self) -> bool {
        *self.leading.borrow()
    }

    fn ever_led(&self) -> bool {
        self.log.lock().unwrap().iter().any(|(_, leading)| *leading)
    }

    /// The first time `value` was published.
    fn first(&self, value: bool) -> Option<Instant> {
        let log = self.log.lock().unwrap();
        log.iter().find(|(_, v)| *v == value).map(|(at, _)| *at)
    }

    async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        tokio::time::timeout(secs(30), self.task)
            .await
            .expect("run returns after shutdown")
            .expect("run does not panic");
    }
}

fn shared(lease: Option<Lease>) -> Shared {
    let mut store = Store::default();
    if let Some(lease) = lease {
        store.put(lease);
    }
    Arc::new(Mutex::new(store))
}

/// A store without a Lease, and elector `a` leading once it has created it.
async fn leading() -> (Shared, Running) {
    let store = shared(None);
    let me = Running::start(&store, "a");
    until(secs(1), || me.is_leading()).await;
    (store, me)
}

/// Waits (on the paused clock) until `check` holds, for at most `limit`.
async fn until(limit: Duration, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !check() {
        assert!(
            Instant::now() < deadline,
            "condition not met within {limit:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Keeps renewing the Lease as `holder` every 5 s, like a live leader elsewhere.
fn rival(store: &Shared, holder: &'static str) -> JoinHandle<()> {
    let store = store.clone();
    tokio::spawn(async move {
        loop {
            store.lock().unwrap().renew_as(holder);
            tokio::time::sleep(secs(5)).await;
        }
    })
}

/// The resourceVersion a written body carries.
fn rv(value: &Value) -> u64 {
    value["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|rv| rv.parse().ok())
        .expect("a numeric resourceVersion")
}

#[tokio::test(start_paused = true)]
async fn creates_the_missing_lease_then_renews_it() {
    let store = shared(None);
    let start = Instant::now();
    let me = Running::start(&store, "a");
    until(secs(1), || me.is_leading()).await;
    {
        let guard = store.lock().unwrap();
        let calls = guard.calls_from("a");
        assert_eq!(calls[0].method, Method::GET);
        assert_eq!(calls[0].code, 404);
        assert_eq!(calls[1].method, Method::POST);
        let spec = &calls[1].body["spec"];
        assert_eq!(spec["holderIdentity"], me.identity.as_str());
        assert_eq!(spec["leaseDurationSeconds"], 15);
        assert_eq!(spec["leaseTransitions"], 0);
        assert_eq!(spec["acquireTime"], spec["renewTime"]);
        assert_eq!(calls[1].body["metadata"]["name"], NAME);
    }
    tokio::time::sleep(secs(60)).await;
    assert!(me.is_leading());
    assert_eq!(me.log.lock().unwrap().len(), 1, "never stepped down");
    let calls = store.lock().unwrap().calls_from("a");
    let puts = &calls[2..];
    assert!(
        puts.iter()
            .all(|c| c.method == Method::PUT && c.code == 200)
    );
    // One renewal every lease_duration/3.
    assert_eq!(puts.len(), 12, "renewals in 60 s");
    for pair in puts.windows(2) {
        assert_eq!(pair[1].at - pair[0].at, secs(5));
        assert_eq!(rv(&pair[1].body), rv(&pair[0].body) + 1);
    }
    assert!(puts[0].at - start <= secs(5));
    let first = &calls[1].body["spec"];
    let last = &puts[11].body["spec"];
    assert_eq!(last["acquireTime"], first["acquireTime"]);
    assert_eq!(last["leaseTransitions"], 0);
    me.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_live_lease_held_by_another_makes_a_follower() {
    let store = shared(None);
    let other = rival(&store, "other");
    let me = Running::start(&store, "a");
    tokio::time::sleep(secs(120)).await;
    assert!(!me.ever_led());
    let calls = store.lock().unwrap().calls_from("a");
    assert!(
        calls.iter().all(|c| c.method == Method::GET),
        "a follower only reads"
    );
    // Polled every 3.75 s or a little sooner (jitter), never more often than every 2.8 s.
    assert!(
        (32..=43).contains(&calls.len()),
        "{} reads in 120 s",
        calls.len()
    );
    other.abort();
    me.shutdown().await;
    let calls = store.lock().unwrap().calls_from("a");
    assert!(
        calls.iter().all(|c| c.method == Method::GET),
        "a follower releases nothing"
    );
}

#[tokio::test(start_paused = true)]
async fn an_expired_lease_is_taken_over_with_the_version_read() {
    let store = shared(Some(lease(Some("gone"), Some(15))));
    let start = Instant::now();
    let me = Running::start(&store, "a");
    until(secs(30), || me.is_leading()).await;
    let calls = store.lock().unwrap().calls_from("a");
    let put = calls.iter().find(|c| c.method == Method::PUT).unwrap();
    // Expiry by the local clock: unchanged for the whole duration since first seen.
    let waited = put.at - start;
    assert!(
        waited >= D && waited <= D + secs(4),
        "took over after {waited:?}"
    );
    assert_eq!(rv(&put.body), 1);
    assert_eq!(put.code, 200);
    assert_eq!(put.body["spec"]["holderIdentity"], me.identity.as_str());
    assert_eq!(put.body["spec"]["leaseTransitions"], 4);
    assert_eq!(me.first(true), Some(put.at));
    me.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn losing_the_takeover_race_keeps_a_follower() {
    let store = shared(Some(lease(Some("gone"), Some(15))));
    store.lock().unwrap().rival_first = Some("other".into());
    let me = Running::start(&store, "a");
    // The rival that won keeps renewing from the moment it wrote.
    let mut other = None;
    until(secs(30), || {
        let won = store.lock().unwrap().rival_first.is_none();
        if won && other.is_none() {
            other = Some(rival(&store, "other"));
        }
        won
    })
    .await;
    tokio::time::sleep(secs(60)).await;
    assert!(!me.ever_led());
    let calls = store.lock().unwrap().calls_from("a");
    let puts: Vec<_> = calls.iter().filter(|c| c.method == Method::PUT).collect();
    assert_eq!(puts.len(), 1, "one takeover attempt");
    assert_eq!(puts[0].code, 409);
    let after = calls.iter().position(|c| c.method == Method::PUT).unwrap() + 1;
    assert_eq!(calls[after].method, Method::GET);
    assert_eq!(calls[after].at, puts[0].at, "re-read at once after losing");
    other.unwrap().abort();
    me.shutdown().await;
}

/// Acquires, then sets `fault`: leadership must end at once or by the renew deadline.
async fn steps_down_on(fault: Fault) -> (Duration, Running, Shared) {
    let (store, me) = leading().await;
    tokio::time::sleep(secs(7)).await;
    store.lock().unwrap().fault = Some(fault);
    until(secs(20), || !me.is_leading()).await;
    let calls = store.lock().unwrap().calls_from("a");
    let ok = calls.iter().filter(|c| c.code == 200 || c.code == 201);
    let stepped_down = me.first(false).unwrap() - ok.map(|c| c.at).next_back().unwrap();
    (stepped_down, me, store)
}

#[tokio::test(start_paused = true)]
async fn a_failed_renewal_ends_leadership_at_once() {
    let (stepped_down, me, store) = steps_down_on(Fault::Status(500)).await;
    // The renewal due 5 s after the last success failed, and leadership ended with it.
    assert_eq!(stepped_down, secs(5));
    // It keeps trying, and leads again once the API answers and the record is still its own.
    store.lock().unwrap().fault = None;
    until(secs(10), || me.is_leading()).await;
    let calls = store.lock().unwrap().calls_from("a");
    let failures = calls.iter().filter(|c| c.code == 500).count();
    assert!(failures >= 1);
    me.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn an_unanswered_renewal_ends_leadership_by_the_deadline() {
    let (stepped_down, me, _store) = steps_down_on(Fault::Hang).await;
    // Two thirds of the duration after the last success, well before others see it expire.
    assert_eq!(stepped_down, secs(10));
    me.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn shutdown_publishes_false_then_releases() {
    let (store, me) = leading().await;
    tokio::time::sleep(secs(12)).await;
    let log = me.log.clone();
    let identity = me.identity.clone();
    me.shutdown().await;
    let calls = store.lock().unwrap().calls_from("a");
    let release = calls.last().unwrap();
    let renewal = &calls[calls.len() - 2];
    assert_eq!(release.method, Method::PUT);
    assert!(
        !release.leading,
        "false is published before the release is sent"
    );
    assert_eq!(release.code, 200);
    assert_eq!(rv(&release.body), rv(&renewal.body) + 1);
    assert_eq!(release.body["spec"]["holderIdentity"], Value::Null);
    assert_eq!(release.body["spec"]["leaseDurationSeconds"], 1);
    assert_eq!(release.body["spec"]["leaseTransitions"], 0);
    assert_ne!(identity, "");
    let log = log.lock().unwrap();
    assert_eq!(log.last().map(|(_, v)| *v), Some(false));
}

#[tokio::test(start_paused = true)]
async fn a_released_lease_passes_to_the_follower_at_once() {
    let (store, first) = leading().await;
    let second = Running::start(&store, "b");
    tokio::time::sleep(secs(40)).await;
    assert!(
        first.is_leading() && !second.ever_led(),
        "one leader at a time"
    );
    first.shutdown().await;
    let released = Instant::now();
    until(secs(10), || second.is_leading()).await;
    // The follower's next read finds no holder: no lease-duration wait.
    assert!(Instant::now() - released <= Duration::from_millis(3760));
    let lease = store.lock().unwrap().lease.clone().unwrap();
    let spec = lease.spec.unwrap();
    assert_eq!(
        spec.holder_identity.as_deref(),
        Some(second.identity.as_str())
    );
    assert_eq!(spec.lease_transitions, Some(1));
    second.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_deleted_lease_is_created_again() {
    let (store, me) = leading().await;
    store.lock().unwrap().lease = None;
    until(secs(10), || !me.is_leading()).await;
    until(secs(10), || me.is_leading()).await;
    let calls = store.lock().unwrap().calls_from("a");
    let codes: Vec<_> = calls.iter().map(|c| (c.method.clone(), c.code)).collect();
    assert!(codes.contains(&(Method::PUT, 404)));
    assert_eq!(codes.last(), Some(&(Method::POST, 201)));
    me.shutdown().await;
}

#[test]
fn a_zero_duration_does_not_spin() {
    let timing = Timing::new(Duration::ZERO);
    assert_eq!(timing.lease_duration, Duration::from_millis(100));
    assert_eq!(timing.retry_interval, Duration::from_millis(25));
}

#[tokio::test(start_paused = true)]
async fn a_release_after_a_landed_renewal_reads_again() {
    let (store, me) = leading().await;
    // A renewal the elector no longer knows of (as if cut short by the shutdown) landed.
    store.lock().unwrap().renew_as(&me.identity);
    me.shutdown().await;
    let calls = store.lock().unwrap().calls_from("a");
    let tail: Vec<_> = calls[calls.len() - 3..]
        .iter()
        .map(|c| (c.method.clone(), c.code))
        .collect();
    assert_eq!(
        tail,
        [(Method::PUT, 409), (Method::GET, 200), (Method::PUT, 200)]
    );
    let lease = store.lock().unwrap().lease.clone().unwrap();
    assert_eq!(lease.spec.unwrap().holder_identity, None);
}

#[tokio::test(start_paused = true)]
async fn a_release_taken_by_another_is_left_alone() {
    let (store, me) = leading().await;
    store.lock().unwrap().renew_as("thief");
    me.shutdown().await;
    let calls = store.lock().unwrap().calls_from("a");
    assert_eq!(
        calls.last().map(|c| (c.method.clone(), c.code)),
        Some((Method::GET, 200))
    );
    let lease = store.lock().unwrap().lease.clone().unwrap();
    assert_eq!(
        lease.spec.unwrap().holder_identity.as_deref(),
        Some("thief")
    );
}
