use std::collections::BTreeSet;

use super::*;
use crate::controller::write_target::TargetKind;
use crate::hash::ConfigId;

const DELAY: Duration = Duration::from_secs(10);
const S: Duration = Duration::from_secs(1);

fn target(kind: TargetKind, name: &str) -> Target {
    Target {
        kind,
        namespace: "shop".into(),
        name: name.into(),
    }
}

fn key(name: &str) -> ConfigKey {
    ConfigKey {
        namespace: "shop".into(),
        id: ConfigId::config_map(name),
    }
}

fn keys(names: &[&str]) -> Changes {
    Changes {
        existence: false,
        keys: names.iter().map(|k| (*k).to_owned()).collect(),
    }
}

fn popped(schedule: &mut Schedule, now: Instant) -> Vec<(String, Causes)> {
    std::iter::from_fn(|| schedule.pop_due(now))
        .map(|(t, due)| (t.name.to_string(), due.causes))
        .collect()
}

#[test]
fn a_pod_is_due_at_once_and_a_workload_after_the_rollout_delay() {
    let start = Instant::now();
    let mut schedule = Schedule::new(DELAY);
    let (pod, web) = (
        target(TargetKind::Pod, "p"),
        target(TargetKind::Deployment, "w"),
    );
    schedule.change(&pod, &key("a"), &keys(&["x"]), start);
    schedule.change(&web, &key("a"), &keys(&["x"]), start);
    assert_eq!(schedule.next_due(), Some(start));
    let due = popped(&mut schedule, start);
    assert_eq!(due.len(), 1, "only the Pod");
    assert_eq!(due[0].0, "p");
    assert_eq!(due[0].1[&key("a")], BTreeSet::from(["x".to_owned()]));
    assert_eq!(schedule.next_due(), Some(start + DELAY));
    assert!(popped(&mut schedule, start + DELAY - S).is_empty());
    assert_eq!(popped(&mut schedule, start + DELAY).len(), 1);
    assert!(schedule.is_empty());
}

#[test]
fn changes_close_together_merge_into_one_rollout_for_at_most_ten_delays() {
    let start = Instant::now();
    let mut schedule = Schedule::new(DELAY);
    let web = target(TargetKind::Deployment, "w");
    // A change every 9 s: each pushes the rollout back, until ten delays after the first.
    let mut now = start;
    for i in 0..20 {
        schedule.change(&web, &key("a"), &keys(&[&format!("k{i}")]), now);
        let expected = (now + DELAY).min(start + DELAY * MAX_DELAYS);
        assert_eq!(schedule.next_due(), Some(expected), "change {i}");
        now += 9 * S;
    }
    assert_eq!(schedule.len(), 1, "one entry, however many changes");
    let due = popped(&mut schedule, start + DELAY * MAX_DELAYS);
    assert_eq!(due.len(), 1, "one rollout, and no stale entry left behind");
    assert_eq!(
        due[0].1[&key("a")].len(),
        20,
        "every changed key is a cause"
    );
    assert_eq!(schedule.next_due(), None);
    let created = Changes {
        existence: true,
        keys: BTreeSet::from(["x".to_owned()]),
    };
    schedule.change(&web, &key("b"), &created, now);
    let (_, due) = schedule.pop_due(now + DELAY).unwrap();
    assert!(
        due.causes[&key("b")].is_empty(),
        "created or deleted: no keys"
    );
}

#[test]
fn a_check_is_due_at_once_unless_changes_wait_for_their_time() {
    let start = Instant::now();
    let mut schedule = Schedule::new(DELAY);
    let (a, b) = (
        target(TargetKind::Deployment, "a"),
        target(TargetKind::Deployment, "b"),
    );
    schedule.check(&a, start);
    schedule.change(&b, &key("x"), &keys(&["k"]), start);
    schedule.check(&b, start + S);
    let due = popped(&mut schedule, start + S);
    assert_eq!(due.len(), 1);
    assert_eq!(due[0].0, "a");
    assert!(due[0].1.is_empty(), "a check has no causes");
    assert_eq!(schedule.next_due(), Some(start + DELAY), "b keeps its time");
}

#[test]
fn a_target_waiting_for_a_fetch_is_not_due_until_checked() {
    let start = Instant::now();
    let mut schedule = Schedule::new(DELAY);
    let web = target(TargetKind::Deployment, "w");
    schedule.change(&web, &key("x"), &keys(&["k"]), start);
    let (popped_target, due) = schedule.pop_due(start + DELAY).unwrap();
    assert!(!schedule.awaits_fetch(&web));
    schedule.await_fetch(popped_target, due);
    assert!(schedule.awaits_fetch(&web));
    assert_eq!(
        schedule.len(),
        1,
        "still pending (counted in pending_writes)"
    );
    assert_eq!(
        schedule.next_due(),
        None,
        "no time: it waits for the digests"
    );
    schedule.check(&web, start + 2 * DELAY);
    assert!(!schedule.awaits_fetch(&web));
    let due = popped(&mut schedule, start + 2 * DELAY);
    assert_eq!(due[0].1.len(), 1, "the causes survive the wait");
    // A change while waiting for a fetch starts a new merge window from now.
    let (t, d) = {
        schedule.change(&web, &key("x"), &keys(&["k"]), start);
        schedule.pop_due(start + DELAY).unwrap()
    };
    schedule.await_fetch(t, d);
    let later = start + 50 * DELAY;
    schedule.change(&web, &key("y"), &keys(&["k"]), later);
    assert_eq!(schedule.next_due(), Some(later + DELAY));
}

#[test]
fn a_conflict_retries_with_its_causes_and_removal_returns_them() {
    let start = Instant::now();
    let mut schedule = Schedule::new(DELAY);
    let web = target(TargetKind::Deployment, "w");
    let causes = Causes::from([(key("a"), BTreeSet::from(["k".to_owned()]))]);
    schedule.change(&web, &key("b"), &keys(&["j"]), start);
    schedule.retry(&web, causes, start, 2 * S);
    assert_eq!(
        schedule.next_due(),
        Some(start + 2 * S),
        "the retry's time wins"
    );
    let merged = schedule.remove(&web).unwrap().causes;
    assert_eq!(
        merged.len(),
        2,
        "the write's causes and the waiting change's"
    );
    assert_eq!(schedule.next_due(), None, "removed from the time index too");
    assert_eq!(schedule.remove(&web), None);
    schedule.check(&web, start);
    schedule.clear();
    assert!(schedule.is_empty() && schedule.next_due().is_none());
}
