use std::collections::BTreeSet;

use super::*;
use crate::controller::config_store::{Fetched, Meta};
use crate::controller::reduce::Consumer;
use crate::controller::test_fixtures;
use crate::controller::write_target::TargetKind;
use crate::hash::{ConfigId, ConfigObject, Consumed, Lookup};
use crate::workload::consumption::Consumption;

const NS: &str = "shop";

fn key(name: &str) -> ConfigKey {
    ConfigKey {
        namespace: NS.into(),
        id: ConfigId::config_map(name),
    }
}

fn target(kind: TargetKind, name: &str) -> Target {
    Target {
        kind,
        namespace: NS.into(),
        name: name.into(),
    }
}

fn deployment() -> Target {
    target(TargetKind::Deployment, "web")
}

fn pod() -> Target {
    target(TargetKind::Pod, "web-1")
}

fn reads(names: &[&str]) -> Consumption {
    Consumption {
        consumed: names
            .iter()
            .map(|n| Consumed::Key(ConfigId::config_map(*n), "a".into()))
            .collect(),
        optional: BTreeSet::new(),
    }
}

/// The hash a consumer of `names` (key `a`) gets when each holds `a = value`.
fn hash_of(names: &[&str], value: &str) -> String {
    let values: Vec<_> = names.iter().map(|name| (*name, value)).collect();
    hash_over(&values)
}

/// The hash a consumer gets of each named object's key `a` holding its value.
fn hash_over(values: &[(&str, &str)]) -> String {
    let mut data = ConfigData::new();
    for (name, value) in values {
        let id = ConfigId::config_map(*name);
        let object = ConfigObject::from_values(&id, [("a", value.as_bytes())], None).unwrap();
        data.insert(id, Lookup::Found(object));
    }
    let names: Vec<&str> = values.iter().map(|(name, _)| *name).collect();
    reads(&names).hash(&data, None).hash.unwrap()
}

fn consumer(hash: Option<&str>, names: &[&str]) -> Consumer {
    test_fixtures::consumer("uid-1", hash, reads(names))
}

fn meta(rv: &str, ignore: bool) -> Meta {
    Meta {
        resource_version: rv.into(),
        ignore,
        matched: false,
    }
}

/// The write `verdict` says to make.
fn write_of(verdict: Verdict) -> Write {
    match verdict {
        Verdict::Write(write) => write,
        other => panic!("expected a write, got {other:?}"),
    }
}

struct World {
    view: View,
    store: ConfigStore,
}

impl World {
    fn new() -> Self {
        let mut view = View::new("reload-injector", true);
        view.set_namespace(NS, true);
        World {
            view,
            store: ConfigStore::default(),
        }
    }

    fn consumer(&mut self, target: &Target, hash: Option<&str>, names: &[&str]) {
        self.view.set_consumer(target, Some(consumer(hash, names)));
    }

    /// The watch saw `name` at `rv`, and its digests (`a = value`) were fetched after everything
    /// the view has seen so far.
    fn config(&mut self, name: &str, rv: &str, value: &str) {
        self.store.set_meta(key(name), meta(rv, false));
        let id = ConfigId::config_map(name);
        let object =
            ConfigObject::from_values(&id, [("a", value.as_bytes())], None).map(Into::into);
        let sent = self.view.tick();
        let fetched = Fetched {
            resource_version: Some(rv.into()),
            object,
            sent,
        };
        self.store.set_fetched(key(name), fetched);
    }

    fn evaluate(&self, target: &Target, causes: &Causes) -> Verdict {
        evaluate(&self.view, &self.store, target, causes, None)
    }

    /// The verdict on `target` with no change behind it (start-up, a new leader, its update).
    fn check(&self, target: &Target) -> Verdict {
        self.evaluate(target, &Causes::new())
    }
}

fn changed(name: &str, keys: &[&str]) -> Causes {
    Causes::from([(key(name), keys.iter().map(|k| (*k).to_owned()).collect())])
}

#[test]
fn a_hash_that_matches_the_data_is_left_alone() {
    let mut world = World::new();
    world.consumer(&deployment(), Some(&hash_of(&["env"], "1")), &["env"]);
    world.config("env", "10", "1");
    assert_eq!(world.check(&deployment()), Verdict::Nothing);
}

#[test]
fn digests_not_fetched_yet_are_fetched_first() {
    let mut world = World::new();
    world.consumer(&deployment(), Some("sha256:old"), &["env", "more"]);
    world.config("env", "10", "1");
    assert_eq!(
        world.check(&deployment()),
        Verdict::Fetch(vec![key("more")])
    );
}

#[test]
fn a_data_change_rewrites_the_hash_with_an_event_naming_object_and_key() {
    let mut world = World::new();
    world.consumer(&deployment(), Some(&hash_of(&["env"], "1")), &["env"]);
    world.config("env", "11", "2");
    let write = write_of(world.evaluate(&deployment(), &changed("env", &["a"])));
    assert_eq!(write.desired, hash_of(&["env"], "2"));
    assert_eq!(write.expected, Some(hash_of(&["env"], "1")));
    assert_eq!(write.uid, "uid-1");
    assert_eq!(
        write.event.as_deref(),
        Some(
            r#"reload-injector: ConfigMap "env" changed (key "a"); rolling out the new config hash"#
        )
    );
}

#[test]
fn a_rollout_is_rewritten_with_an_event_as_a_deployment_is() {
    let rollout = target(TargetKind::Rollout, "web");
    let mut world = World::new();
    world.consumer(&rollout, Some(&hash_of(&["env"], "1")), &["env"]);
    world.config("env", "11", "2");
    let write = write_of(world.evaluate(&rollout, &changed("env", &["a"])));
    assert_eq!(write.target, rollout);
    assert_eq!(write.desired, hash_of(&["env"], "2"));
    assert_eq!(write.expected, Some(hash_of(&["env"], "1")));
    assert!(
        write
            .event
            .is_some_and(|e| e.contains(r#"ConfigMap "env" changed"#))
    );
}

#[test]
fn data_older_than_the_hash_seen_is_fetched_again_before_any_write() {
    let mut world = World::new();
    world.config("env", "11", "1");
    // Another replica's webhook stamped a hash from newer data than this view holds.
    world.consumer(&deployment(), Some(&hash_of(&["env"], "2")), &["env"]);
    assert_eq!(
        world.check(&deployment()),
        Verdict::Fetch(vec![key("env")]),
        "the view's older data must not undo the newer hash"
    );
    world.config("env", "12", "2");
    assert_eq!(world.check(&deployment()), Verdict::Nothing);
}

#[test]
fn a_pod_without_a_mounted_hash_waits_for_a_change_and_gets_no_event() {
    let mut world = World::new();
    world.consumer(&pod(), None, &["conf"]);
    world.config("conf", "5", "1");
    assert_eq!(world.check(&pod()), Verdict::Nothing);
    let write = write_of(world.evaluate(&pod(), &changed("conf", &["a"])));
    assert_eq!(write.expected, None);
    assert_eq!(
        write.event, None,
        "a refresh rolls nothing and records no Event"
    );
}

#[test]
fn ignored_objects_and_namespaces_not_opted_in_cause_nothing() {
    let mut world = World::new();
    world.consumer(&deployment(), Some("sha256:stale"), &["env"]);
    world.config("env", "10", "1");
    world.store.set_meta(key("env"), meta("10", true));
    assert_eq!(world.check(&deployment()), Verdict::Nothing);
    world.store.set_meta(key("env"), meta("10", false));
    assert!(matches!(world.check(&deployment()), Verdict::Write(_)));
    world.view.set_namespace(NS, false);
    assert_eq!(world.check(&deployment()), Verdict::Nothing);
}

#[test]
fn event_messages_stay_short_and_name_creations() {
    let many: BTreeSet<String> = (0..500).map(|i| format!("key-{i}")).collect();
    let causes = Causes::from([(key("big"), many), (key("new"), BTreeSet::new())]);
    let message = event_message(&causes, &BTreeSet::new());
    assert!(message.starts_with("reload-injector: "));
    assert!(message.len() <= MAX_MESSAGE, "{}", message.len());
    let created = event_message(&changed("new", &[]), &BTreeSet::new());
    assert!(
        created.contains(r#"ConfigMap "new" was created or deleted"#),
        "{created}"
    );
}

#[test]
fn a_hash_stamped_before_restart_mounts_counted_starts_no_rollout_at_upgrade() {
    // Stamped by an earlier version over `env` alone; the template also mounts `conf` for a
    // container whose strategy is now restart, so the hash is now over both.
    let mut world = World::new();
    let consumer = Consumer {
        earlier: Some(reads(&["env"]).into()),
        ..consumer(Some(&hash_of(&["env"], "1")), &["env", "conf"])
    };
    world.view.set_consumer(&deployment(), Some(consumer));
    world.config("env", "10", "1");
    world.config("conf", "10", "1");
    assert_eq!(
        world.check(&deployment()),
        Verdict::Nothing,
        "start-up, config unchanged"
    );
    // A change of the mounted config rolls, with the hash over both.
    world.config("conf", "11", "2");
    let write = write_of(world.evaluate(&deployment(), &changed("conf", &["a"])));
    assert_eq!(write.desired, hash_over(&[("env", "1"), ("conf", "2")]));
    // And a change while no controller ran is still found at start.
    world.config("env", "12", "3");
    assert!(matches!(world.check(&deployment()), Verdict::Write(_)));
}

#[test]
fn a_value_a_stopped_run_held_back_waits_for_the_config_to_change_again() {
    // A refresh stopped before this Pod (under an earlier leader): the Pod still has the old
    // hash, and the value it was to get is in its held-back annotation.
    let mut world = World::new();
    let held = hash_of(&["conf"], "2");
    let consumer = Consumer {
        held_back: Some(held.as_str().into()),
        ..consumer(Some(&hash_of(&["conf"], "1")), &["conf"])
    };
    world.view.set_consumer(&pod(), Some(consumer));
    world.config("conf", "6", "2");
    assert_eq!(
        world.check(&pod()),
        Verdict::Nothing,
        "a new leader's start-up"
    );
    // The same value again by a change (it was put back after a fix): written.
    let write = write_of(world.evaluate(&pod(), &changed("conf", &["a"])));
    assert_eq!(write.desired, held);
    // Another value: written at start-up too.
    world.config("conf", "7", "3");
    assert_eq!(
        write_of(world.check(&pod())).desired,
        hash_of(&["conf"], "3")
    );
}
