use std::cell::RefCell;
use std::collections::HashMap;

use super::*;
use crate::controller::test_fixtures::{self, names, web};
use crate::controller::write_target::{TargetKind, Write};

fn pod(name: &str) -> Target {
    test_fixtures::pod(TargetKind::PodEnv, name)
}

fn write(name: &str, desired: &str) -> Write {
    test_fixtures::write(TargetKind::PodEnv, name, desired)
}

/// Waves with `sha256:new` queued for each of `pods`, in order.
fn queued(pods: &[&str]) -> RestartWaves {
    let mut waves = RestartWaves::default();
    for name in pods {
        waves.enqueue(web(), write(name, "sha256:new"));
    }
    waves
}

/// The Pods as a test's kubelet leaves them: Ready, no restarts, until a test says otherwise.
#[derive(Default)]
struct Cluster {
    pods: RefCell<HashMap<String, PodNow>>,
}

impl Cluster {
    fn with(names: &[&str]) -> Cluster {
        let cluster = Cluster::default();
        for name in names {
            cluster.set(name, Some(true), 0, 0);
        }
        cluster
    }

    fn set(&self, name: &str, ready: Option<bool>, sidecar: u32, others: u32) {
        let now = PodNow {
            ready,
            restarts: Restarts { sidecar, others },
        };
        self.pods.borrow_mut().insert(name.to_owned(), now);
    }

    /// The Pod restarted in place once and is Ready again.
    fn restarted(&self, name: &str) {
        self.set(name, Some(true), 1, 1);
    }

    fn step(&self, waves: &mut RestartWaves, now: Instant, size: usize) -> Step {
        let pods = self.pods.borrow();
        let others_ready = |_: &Target, queued: &[Target]| {
            pods.iter()
                .filter(|(name, _)| !queued.contains(&pod(name)))
                .all(|(_, p)| p.ready != Some(false))
        };
        waves.step(
            now,
            |_, _| size,
            |p| pods.get(&*p.name).copied(),
            others_ready,
        )
    }
}

#[test]
fn a_wave_ends_once_its_pods_restarted_and_stayed_ready() {
    let cluster = Cluster::with(&["a", "b", "c"]);
    let mut waves = RestartWaves::default();
    for name in ["a", "b", "c"] {
        assert!(waves.enqueue(web(), write(name, "sha256:new")));
    }
    let t0 = Instant::now();
    let first = cluster.step(&mut waves, t0, 1);
    assert_eq!(names(&first.submit), ["a"]);
    assert!(first.wake.is_some());
    // Not restarted yet: nothing moves, however long the settle time.
    let still = cluster.step(&mut waves, t0 + SETTLE * 3, 1);
    assert!(still.submit.is_empty() && still.stopped.is_empty());
    // Restarting: unready for a moment, which stops nothing.
    cluster.set("a", Some(false), 1, 1);
    let restarting = cluster.step(&mut waves, t0 + SETTLE * 4, 1);
    assert!(restarting.submit.is_empty() && restarting.stopped.is_empty());
    cluster.restarted("a");
    let ready = t0 + SETTLE * 5;
    assert!(
        cluster.step(&mut waves, ready, 1).submit.is_empty(),
        "settling"
    );
    let second = cluster.step(&mut waves, ready + SETTLE, 1);
    assert_eq!(names(&second.submit), ["b"]);
    assert!(waves.holds(&pod("c")));
}

#[test]
fn an_app_that_crashes_after_its_restart_stops_the_run_and_the_rest_keep_their_env() {
    let cluster = Cluster::with(&["a", "b", "c"]);
    let mut waves = RestartWaves::default();
    for name in ["a", "b", "c"] {
        waves.enqueue(web(), write(name, "sha256:crash"));
    }
    let t0 = Instant::now();
    cluster.step(&mut waves, t0, 1);
    // Restarted in place, then the app exited and was restarted again: not Ready, and then
    // restarted a third time after its back-off.
    cluster.set("a", Some(false), 1, 2);
    let waiting = cluster.step(&mut waves, t0 + SETTLE, 1);
    assert!(waiting.stopped.is_empty(), "{:?}", waiting.stopped);
    assert_eq!(waiting.wake, Some(t0 + SETTLE + AGAIN_READY_WITHIN));
    cluster.set("a", Some(false), 1, 3);
    let step = cluster.step(&mut waves, t0 + SETTLE * 2, 1);
    let [stopped] = step.stopped.as_slice() else {
        panic!("{:?}", step.stopped);
    };
    assert_eq!((stopped.pod.clone(), stopped.why), (pod("a"), Why::Crashed));
    assert_eq!(
        stopped.left,
        [write("b", "sha256:crash"), write("c", "sha256:crash")]
    );
    assert!(step.submit.is_empty());
    // The value held back is not queued again; a new value is (the fix), and the crashed Pod
    // (unready, queued) does not keep its own fix from starting.
    assert!(!waves.enqueue(web(), write("b", "sha256:crash")));
    assert!(waves.enqueue(web(), write("a", "sha256:fixed")));
    let fix = cluster.step(&mut waves, t0 + SETTLE * 3, 1);
    assert_eq!(names(&fix.submit), ["a"]);
}

/// Pods `a` and `b` queued, the first wave (`a`) started at the instant returned, and `a` since
/// restarted twice and Ready.
fn restarted_twice_and_ready() -> (Cluster, RestartWaves, Instant) {
    let cluster = Cluster::with(&["a", "b"]);
    let mut waves = queued(&["a", "b"]);
    let t0 = Instant::now();
    cluster.step(&mut waves, t0, 1);
    cluster.set("a", Some(true), 1, 2);
    (cluster, waves, t0)
}

#[test]
fn a_pod_restarted_twice_that_stays_ready_is_no_crash_once_it_lasted() {
    // A kubelet restarted mid-restart: the containers were started again, the app runs.
    let (cluster, mut waves, t0) = restarted_twice_and_ready();
    let ready = t0 + SETTLE;
    let early = cluster.step(&mut waves, ready, 1);
    assert!(early.stopped.is_empty(), "{:?}", early.stopped);
    // Past the usual settle time, not yet past the longer one.
    let settling = cluster.step(&mut waves, ready + SETTLE * 2, 1);
    assert!(settling.submit.is_empty() && settling.stopped.is_empty());
    let next = cluster.step(&mut waves, ready + SETTLE_AFTER_AGAIN, 1);
    assert_eq!(names(&next.submit), ["b"]);
}

#[test]
fn a_pod_restarted_twice_and_unready_for_a_moment_is_no_crash() {
    // A kubelet restarted mid-restart: the containers started again, their probes not yet
    // passed (seen on a loaded node).
    let (cluster, mut waves, t0) = restarted_twice_and_ready();
    cluster.set("a", Some(false), 1, 2);
    let unready = cluster.step(&mut waves, t0 + SETTLE, 1);
    assert!(unready.stopped.is_empty(), "{:?}", unready.stopped);
    cluster.set("a", Some(true), 1, 2);
    let ready = t0 + SETTLE + AGAIN_READY_WITHIN / 2;
    assert!(cluster.step(&mut waves, ready, 1).stopped.is_empty());
    let next = cluster.step(&mut waves, ready + SETTLE_AFTER_AGAIN, 1);
    assert_eq!(names(&next.submit), ["b"]);
}

#[test]
fn a_pod_restarted_twice_and_unready_for_too_long_crashed() {
    let (cluster, mut waves, t0) = restarted_twice_and_ready();
    cluster.set("a", Some(false), 1, 2);
    assert!(cluster.step(&mut waves, t0 + SETTLE, 1).stopped.is_empty());
    let step = cluster.step(&mut waves, t0 + SETTLE + AGAIN_READY_WITHIN, 1);
    let [stopped] = step.stopped.as_slice() else {
        panic!("{:?}", step.stopped);
    };
    assert_eq!(stopped.why, Why::Crashed);
}

#[test]
fn a_pod_restarted_twice_that_goes_unready_while_settling_crashed() {
    let (cluster, mut waves, t0) = restarted_twice_and_ready();
    assert!(cluster.step(&mut waves, t0 + SETTLE, 1).stopped.is_empty());
    cluster.set("a", Some(false), 1, 3);
    let step = cluster.step(&mut waves, t0 + SETTLE * 2, 1);
    let [stopped] = step.stopped.as_slice() else {
        panic!("{:?}", step.stopped);
    };
    assert_eq!(stopped.why, Why::Crashed);
}

#[test]
fn a_pod_that_never_restarts_or_never_comes_back_stops_the_run() {
    let t0 = Instant::now();
    let cluster = Cluster::with(&["a", "b"]);
    let mut waves = queued(&["a", "b"]);
    cluster.step(&mut waves, t0, 1);
    let early = cluster.step(&mut waves, t0 + RESTART_WITHIN / 2, 1);
    assert!(early.stopped.is_empty());
    assert_eq!(early.wake, Some(t0 + RESTART_WITHIN));
    let late = cluster.step(&mut waves, t0 + RESTART_WITHIN, 1);
    assert_eq!(late.stopped[0].why, Why::NotRestarted);

    let cluster = Cluster::with(&["a", "b"]);
    let mut waves = queued(&["a", "b"]);
    cluster.step(&mut waves, t0, 1);
    cluster.set("a", Some(false), 1, 1);
    assert!(
        cluster
            .step(&mut waves, t0 + READY_WITHIN / 2, 1)
            .stopped
            .is_empty()
    );
    let late = cluster.step(&mut waves, t0 + READY_WITHIN, 1);
    assert_eq!(late.stopped[0].why, Why::NotReady);
}

#[test]
fn no_wave_starts_while_another_pod_of_the_workload_is_unready() {
    let t0 = Instant::now();
    let cluster = Cluster::with(&["a", "b", "c"]);
    cluster.set("c", Some(false), 0, 0);
    let mut waves = queued(&["a"]);
    let held = cluster.step(&mut waves, t0, 1);
    assert!(held.submit.is_empty());
    let again = held.wake.expect("it looks again");
    cluster.set("c", Some(true), 0, 0);
    assert!(
        cluster.step(&mut waves, t0, 1).submit.is_empty(),
        "not before then"
    );
    assert_eq!(names(&cluster.step(&mut waves, again, 1).submit), ["a"]);
}

#[test]
fn a_pod_deleted_mid_wave_is_done_and_the_waves_go_on() {
    let t0 = Instant::now();
    let cluster = Cluster::with(&["a", "b"]);
    let mut waves = queued(&["a", "b"]);
    cluster.step(&mut waves, t0, 1);
    cluster.pods.borrow_mut().remove("a");
    assert_eq!(names(&cluster.step(&mut waves, t0, 1).submit), ["b"]);
    assert!(!waves.holds(&pod("a")));
}
