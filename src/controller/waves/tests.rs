use std::collections::HashSet;

use serde_json::json;

use super::*;
use crate::controller::test_fixtures::{self, names, web};

fn pod(name: &str) -> Target {
    test_fixtures::pod(TargetKind::Pod, name)
}

fn write(name: &str, desired: &str) -> Write {
    test_fixtures::write(TargetKind::Pod, name, desired)
}

#[test]
fn budgets_follow_the_workloads_own_max_unavailable() {
    let of = |kind, object: &Value| Budget::of(kind, "u", object).unwrap();
    // The wave size of a Deployment of `replicas` Pods, all to refresh, with `strategy`.
    let deployment = |strategy: Value, replicas: u64| {
        let object = json!({"spec": {"replicas": replicas, "strategy": strategy}});
        of(TargetKind::Deployment, &object).wave_size(replicas as usize)
    };
    // Unset: 25% of the replicas, rounded down, at least one.
    assert_eq!(deployment(json!({}), 8), 2);
    assert_eq!(deployment(json!({}), 3), 1);
    assert_eq!(deployment(json!({}), 1), 1);
    let pct = json!({"rollingUpdate": {"maxUnavailable": "50%"}});
    assert_eq!(deployment(pct, 10), 5);
    let count = json!({"rollingUpdate": {"maxUnavailable": 3}});
    assert_eq!(deployment(count, 10), 3);
    let zero = json!({"rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}});
    assert_eq!(deployment(zero, 10), 1);
    // A StatefulSet or DaemonSet rolls one Pod at a time unless told otherwise.
    let sts = json!({"spec": {"replicas": 6}});
    assert_eq!(of(TargetKind::StatefulSet, &sts).wave_size(6), 1);
    let ds = json!({"spec": {"updateStrategy": {"rollingUpdate": {"maxUnavailable": "20%"}}}});
    assert_eq!(of(TargetKind::DaemonSet, &ds).wave_size(10), 2);
    assert_eq!(Budget::of(TargetKind::CronJob, "u", &json!({})), None);
}

#[test]
fn a_pod_is_owned_by_the_deployment_of_its_replicaset() {
    let ns: Arc<str> = "shop".into();
    let made_by = |kind: &str, name: &str| -> ObjectMeta {
        serde_json::from_value(json!({
            "labels": {"pod-template-hash": "5d8f9c"},
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "Other", "name": "x", "uid": "1"},
                {"apiVersion": "apps/v1", "kind": kind, "name": name, "uid": "2", "controller": true}
            ]
        }))
        .unwrap()
    };
    assert_eq!(
        owner_of(&ns, &made_by("ReplicaSet", "web-5d8f9c")),
        Some(web())
    );
    let sts = owner_of(&ns, &made_by("StatefulSet", "db")).unwrap();
    assert_eq!((sts.kind, &*sts.name), (TargetKind::StatefulSet, "db"));
    assert_eq!(owner_of(&ns, &made_by("ReplicaSet", "bare-rs")), None);
    assert_eq!(owner_of(&ns, &made_by("Job", "once")), None);
    assert_eq!(owner_of(&ns, &ObjectMeta::default()), None);
}

#[test]
fn a_pod_of_an_argo_rollout_is_owned_by_the_rollout() {
    let ns: Arc<str> = "shop".into();
    let meta: ObjectMeta = serde_json::from_value(json!({
        "labels": {"rollouts-pod-template-hash": "7c9d"},
        "ownerReferences": [
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-7c9d", "uid": "2", "controller": true}
        ]
    }))
    .unwrap();
    let owner = owner_of(&ns, &meta).unwrap();
    assert_eq!((owner.kind, &*owner.name), (TargetKind::Rollout, "web"));
    let canary = json!({"spec": {"replicas": 8, "strategy": {"canary": {"maxUnavailable": 2}}}});
    let budget = Budget::of(TargetKind::Rollout, "u", &canary).unwrap();
    assert_eq!(budget.wave_size(8), 2);
    let blue_green = json!({"spec": {"replicas": 8, "strategy": {"blueGreen": {}}}});
    assert_eq!(
        Budget::of(TargetKind::Rollout, "u", &blue_green)
            .unwrap()
            .wave_size(8),
        2
    );
}

#[test]
fn readiness_is_read_from_the_ready_condition() {
    let with =
        |status: &str| json!({"status": {"conditions": [{"type": "Ready", "status": status}]}});
    assert_eq!(ready_of(&with("True")), Some(true));
    assert_eq!(ready_of(&with("False")), Some(false));
    assert_eq!(ready_of(&json!({"status": {}})), None);
}

#[test]
fn waves_wait_for_the_last_one_to_settle_ready() {
    let mut waves = Waves::default();
    for name in ["a", "b", "c", "d", "e"] {
        assert!(waves.enqueue(web(), write(name, "sha256:new")));
    }
    let t0 = Instant::now();
    let ready = |_: &Target| Some(true);
    let first = waves.step(t0, |_, _| 2, ready);
    assert_eq!(names(&first.submit), ["a", "b"]);
    assert_eq!(first.wake, Some(t0 + SETTLE));
    // Before the settle time: nothing more.
    let early = waves.step(t0 + SETTLE / 2, |_, _| 2, ready);
    assert!(early.submit.is_empty());
    assert!(waves.is_queued(&pod("c")) && !waves.is_queued(&pod("a")));
    let second = waves.step(t0 + SETTLE, |_, _| 2, ready);
    assert_eq!(names(&second.submit), ["c", "d"]);
    let third = waves.step(t0 + SETTLE * 2, |_, _| 2, ready);
    assert_eq!(names(&third.submit), ["e"]);
    let done = waves.step(t0 + SETTLE * 3, |_, _| 2, ready);
    assert!(done.submit.is_empty() && done.wake.is_none() && done.stopped.is_empty());
}

#[test]
fn a_wave_gone_unready_stops_the_refresh_until_the_config_changes_again() {
    let mut waves = Waves::default();
    for name in ["a", "b", "c", "d"] {
        waves.enqueue(web(), write(name, "sha256:new"));
    }
    let t0 = Instant::now();
    let first = waves.step(t0, |_, _| 1, |_| Some(true));
    assert_eq!(names(&first.submit), ["a"]);
    let dead: HashSet<Target> = [pod("a")].into();
    let stop = waves.step(t0 + SETTLE, |_, _| 1, |p| Some(!dead.contains(p)));
    assert!(stop.submit.is_empty());
    assert_eq!(
        stop.stopped,
        [Stopped {
            workload: web(),
            pod: pod("a"),
            why: (),
            left: ["b", "c", "d"]
                .map(|name| write(name, "sha256:new"))
                .to_vec()
        }]
    );
    // The same value is not written again (a later check of b would want it)...
    assert!(!waves.enqueue(web(), write("b", "sha256:new")));
    assert!(
        waves
            .step(t0 + SETTLE * 2, |_, _| 1, |_| Some(true))
            .submit
            .is_empty()
    );
    // ...until the config changes again.
    assert!(waves.enqueue(web(), write("b", "sha256:newer")));
    let again = waves.step(t0 + SETTLE * 3, |_, _| 1, |_| Some(true));
    assert_eq!(names(&again.submit), ["b"]);
}

#[test]
fn a_single_replica_is_one_wave_and_a_requeued_pod_keeps_one_place() {
    let mut waves = Waves::default();
    waves.enqueue(web(), write("a", "sha256:one"));
    waves.enqueue(web(), write("a", "sha256:two"));
    let step = waves.step(Instant::now(), |_, pods| default_wave_size(pods), |_| None);
    assert_eq!(step.submit.len(), 1);
    assert_eq!(step.submit[0].desired, "sha256:two");
}
