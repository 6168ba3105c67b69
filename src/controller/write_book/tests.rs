use std::collections::BTreeSet;
use std::time::Duration;

use super::*;
use crate::controller::config_store::ConfigKey;
use crate::controller::write_target::TargetKind;
use crate::hash::ConfigId;

fn target(kind: TargetKind, name: &str) -> Target {
    Target {
        kind,
        namespace: "shop".into(),
        name: name.into(),
    }
}

fn write(kind: TargetKind, name: &str, desired: &str) -> Write {
    Write::hash(
        target(kind, name),
        "uid".into(),
        Some("sha256:old".into()),
        desired.into(),
        None,
    )
}

fn causes(name: &str) -> Causes {
    let key = ConfigKey {
        namespace: "shop".into(),
        id: ConfigId::config_map(name),
    };
    Causes::from([(key, BTreeSet::from(["k".to_owned()]))])
}

#[test]
fn a_workload_write_is_submitted_once_per_value_until_the_target_shows_another() {
    let mut book = WriteBook::default();
    let web = write(TargetKind::Deployment, "web", "sha256:1");
    assert_eq!(
        book.decided(web.clone(), causes("a"), None),
        Some(web.clone())
    );
    assert_eq!(book.len(), 1, "pending until its outcome");
    assert_eq!(
        book.decided(web.clone(), causes("a"), None),
        None,
        "the same value is not submitted twice"
    );
    book.seen(&web.target, Some(&"sha256:0".to_owned()));
    assert_eq!(
        book.decided(web.clone(), causes("a"), None),
        None,
        "still ours"
    );
    book.seen(&web.target, Some(&"sha256:1".to_owned()));
    assert!(
        book.decided(web.clone(), causes("a"), None).is_some(),
        "it shows our value"
    );
    let outcome = Outcome::Written(web.target.clone(), "sha256:1".into());
    assert_eq!(book.outcome(&outcome), None);
    assert!(book.is_empty());
}

#[test]
fn a_conflict_gives_back_the_causes_and_allows_the_value_again() {
    let mut book = WriteBook::default();
    let web = write(TargetKind::Deployment, "web", "sha256:1");
    book.decided(web.clone(), causes("a"), None);
    let back = book.outcome(&Outcome::Conflict(web.target.clone()));
    assert_eq!(back, Some(causes("a")));
    assert!(book.is_empty());
    assert!(book.decided(web.clone(), Causes::new(), None).is_some());
    assert_eq!(book.outcome(&Outcome::Gone(web.target.clone())), None);
    assert!(book.is_empty());
    assert!(
        book.decided(web, Causes::new(), None).is_some(),
        "forgotten"
    );
}

#[tokio::test(start_paused = true)]
async fn pod_refreshes_go_in_their_workloads_waves() {
    let mut book = WriteBook::default();
    let owner = target(TargetKind::Deployment, "web");
    for i in 0..4 {
        let pod = write(TargetKind::Pod, &format!("web-{i}"), "sha256:1");
        assert_eq!(
            book.decided(pod, causes("a"), Some(owner.clone())),
            None,
            "queued"
        );
    }
    assert_eq!(book.len(), 4);
    let start = Instant::now();
    let (submit, stopped) = book.step(start, |_, _| 2, |_| Some(true));
    assert_eq!(submit.len(), 2, "a wave of two");
    assert!(stopped.is_empty());
    assert_eq!(book.wake(), Some(start + waves::SETTLE));
    assert_eq!(
        book.decided(submit[0].clone(), causes("a"), None),
        None,
        "submitted in a wave: not again"
    );
    tokio::time::advance(waves::SETTLE).await;
    let unready = submit[0].target.clone();
    let (submit, stopped) = book.step(Instant::now(), |_, _| 2, |_| Some(true));
    assert_eq!(submit.len(), 2, "settled Ready: the next wave");
    tokio::time::advance(Duration::from_millis(1)).await;
    let (none, stopped_now) = book.step(Instant::now(), |_, _| 2, |p| Some(*p != submit[0].target));
    assert!(none.is_empty() && stopped.is_empty());
    assert_eq!(stopped_now.len(), 1, "a Pod went unready");
    assert_ne!(stopped_now[0].pod, unready);
    let note = stopped_note(&stopped_now[0], "wuid".into());
    assert_eq!(note.target, owner);
    assert_eq!(note.uid, "wuid");
    let message = note.event.unwrap();
    assert!(message.starts_with("reload-injector: refresh of mounted config stopped: pod "));
    assert!(
        message.contains("; 0 pods keep their current config"),
        "{message}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_stopped_refresh_lets_go_of_the_writes_it_held_back() {
    let mut book = WriteBook::default();
    let owner = target(TargetKind::Deployment, "web");
    for i in 0..3 {
        let pod = write(TargetKind::Pod, &format!("web-{i}"), "sha256:1");
        book.decided(pod, causes("a"), Some(owner.clone()));
    }
    let (submit, _) = book.step(Instant::now(), |_, _| 1, |_| Some(true));
    let first = submit[0].target.clone();
    let (_, stopped) = book.step(Instant::now(), |_, _| 1, |p| Some(*p != first));
    assert_eq!(stopped[0].left.len(), 2);
    assert_eq!(book.len(), 1, "only the submitted write awaits its outcome");
    let held_back = stopped[0].left[0].clone();
    assert_eq!(held_back.desired, "sha256:1");
    assert_eq!(
        book.decided(held_back, Causes::new(), Some(owner.clone())),
        None
    );
    assert_eq!(book.len(), 1, "the same value is not queued again");
    book.clear();
    assert!(book.is_empty() && book.wake().is_none());
}
