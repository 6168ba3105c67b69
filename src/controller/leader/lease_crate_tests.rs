//! Why the election is ours and not `kube-lease-manager`'s (the maintained crate that fits our
//! `kube` version): it judges a Lease expired by comparing the holder's `renewTime` plus its
//! duration with the local wall clock. A live holder whose clock runs a minute behind ours
//! writes renewal times that look a minute old, so the crate takes the Lease over (it clears
//! the holder with an unconditional patch, then claims it) while that holder still leads until
//! its next renewal: two writers at once. Our elector, which times expiry on its own monotonic
//! clock from the last change it saw, follows the same holder and never leads.
//!
//! (`kubert`'s lease does the same comparison: `renewTime + leaseDuration` against
//! `chrono::Utc::now()`.) Real time: the crate reads `SystemTime`, which a paused tokio clock
//! does not move.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube_lease_manager::LeaseManagerBuilder;
use serde_json::Value;
use tokio::sync::watch;
use tokio::time::Instant;

use super::{LeaseConfig, run};
use crate::controller::mock_api::{self, status};

const NS: &str = "reload-injector";
const NAME: &str = "reload-injector";
/// The live holder's clock is this far behind the candidate's.
const SKEW: SignedDuration = SignedDuration::from_secs(60);
/// The holder renews this often (our default: a third of the 15 s lease).
const RENEW: Duration = Duration::from_secs(3);
/// How long each candidate is watched.
const WATCH: Duration = Duration::from_secs(5);

type Store = Arc<Mutex<(Lease, u64)>>;

/// A Lease held by `rival`, renewed just now by its clock (`SKEW` behind ours).
fn held_by_rival() -> Store {
    let lease = Lease {
        metadata: ObjectMeta {
            name: Some(NAME.into()),
            namespace: Some(NS.into()),
            resource_version: Some("1".into()),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some("rival".into()),
            lease_duration_seconds: Some(15),
            renew_time: Some(MicroTime(skewed_now())),
            ..LeaseSpec::default()
        }),
    };
    Arc::new(Mutex::new((lease, 1)))
}

fn skewed_now() -> Timestamp {
    Timestamp::now() - SKEW
}

/// A Lease API over `store`: GET, PUT with a resourceVersion check, and PATCH (strategic or
/// apply: both merge these flat fields, `null` removing one).
fn client(store: &Store) -> kube::Client {
    let store = store.clone();
    mock_api::client(move |parts, body| {
        let mut guard = store.lock().unwrap();
        let (lease, version) = &mut *guard;
        let reply = |lease: &Lease| Some((200, serde_json::to_value(lease).unwrap()));
        match parts.method.as_str() {
            "GET" => reply(lease),
            "PUT" => {
                let new: Lease = serde_json::from_value(body).unwrap();
                if new.metadata.resource_version != lease.metadata.resource_version {
                    return Some((409, status(409, "Conflict")));
                }
                *version += 1;
                *lease = new;
                lease.metadata.resource_version = Some(version.to_string());
                reply(lease)
            }
            "PATCH" => {
                let mut spec = serde_json::to_value(lease.spec.clone().unwrap()).unwrap();
                for (field, value) in body["spec"].as_object().cloned().unwrap_or_default() {
                    match value {
                        Value::Null => drop(spec.as_object_mut().unwrap().remove(&field)),
                        value => drop(spec.as_object_mut().unwrap().insert(field, value)),
                    }
                }
                lease.spec = Some(serde_json::from_value(spec).unwrap());
                *version += 1;
                lease.metadata.resource_version = Some(version.to_string());
                reply(lease)
            }
            _ => Some((405, status(405, "MethodNotAllowed"))),
        }
    })
}

/// The live holder: renews every [`RENEW`] while the Lease still names it, writing its own
/// (skewed) time, and leads until a renewal finds another holder.
fn rival(store: &Store) -> watch::Receiver<bool> {
    let (leading, receiver) = watch::channel(true);
    let store = store.clone();
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(RENEW).await;
            let mut guard = store.lock().unwrap();
            let (lease, version) = &mut *guard;
            let spec = lease.spec.as_mut().unwrap();
            if spec.holder_identity.as_deref() != Some("rival") {
                let _ = leading.send(false);
                return;
            }
            spec.renew_time = Some(MicroTime(skewed_now()));
            *version += 1;
            lease.metadata.resource_version = Some(version.to_string());
        }
    });
    receiver
}

/// Whether `candidate` and the rival ever both lead within [`WATCH`].
async fn two_writers(candidate: &watch::Receiver<bool>, rival: &watch::Receiver<bool>) -> bool {
    let deadline = Instant::now() + WATCH;
    while Instant::now() < deadline {
        if *candidate.borrow() && *rival.borrow() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    false
}

#[tokio::test]
async fn kube_lease_manager_takes_a_live_lease_from_a_holder_whose_clock_is_behind() {
    let store = held_by_rival();
    let rival = rival(&store);
    let manager = LeaseManagerBuilder::new(client(&store), NAME)
        .with_namespace(NS)
        .with_identity("kube-lease-manager")
        .with_duration(15)
        .with_grace(5)
        .build()
        .await
        .expect("the crate starts");
    let (candidate, task) = manager.watch().await;
    let started = SystemTime::now();
    assert!(
        two_writers(&candidate, &rival).await,
        "the crate took the Lease while its holder still led"
    );
    assert!(
        started.elapsed().unwrap() < RENEW,
        "before the holder's next renewal: the record was live"
    );
    drop(candidate);
    let _ = task.await;
}

#[tokio::test]
async fn our_election_follows_the_same_live_holder() {
    let store = held_by_rival();
    let rival = rival(&store);
    let (leader, candidate) = watch::channel(false);
    let config = LeaseConfig {
        namespace: NS.into(),
        name: NAME.into(),
        identity: "ours".into(),
        lease_duration: Duration::from_secs(15),
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(run(client(&store), config, leader, async move {
        let _ = stopped.await;
    }));
    assert!(!two_writers(&candidate, &rival).await, "never two writers");
    assert!(
        !*candidate.borrow() && *rival.borrow(),
        "the holder keeps it"
    );
    let _ = stop.send(());
    task.await.unwrap();
}
