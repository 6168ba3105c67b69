//! The loop with no process and no socket: watch events fed by hand, a paused clock, and a
//! tower-test mock API that records what the writer sends (the config watches it starts are
//! left unanswered: their events are the test's to feed).

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use super::*;
use crate::controller::config_store::{ConfigStore, Digests, Meta, StoreReader};
use crate::controller::{mock_api, reduce, writer};
use crate::hash::{ConfigData, ConfigId, ConfigObject, Lookup};
use crate::workload::{
    CONFIG_HASH, ENV_HASH, ENV_HASH_HELD_BACK, ENV_HASH_REFRESHED, SIDECAR_NAME, in_place,
};

const DELAY: Duration = Duration::from_secs(10);

/// A running loop and the handles the test drives it with.
struct Harness {
    watched: mpsc::Sender<Watched>,
    leader: watch::Sender<bool>,
    synced: watch::Receiver<bool>,
    store: StoreReader,
    /// `(method, path, body)` of every request the API answered.
    requests: Arc<Mutex<Vec<(String, String, Value)>>>,
    /// The paths of the GETs left unanswered (the config watches' lists).
    gets: Arc<Mutex<Vec<String>>>,
}

fn start() -> Harness {
    let requests = Arc::new(Mutex::new(Vec::new()));
    let gets = Arc::new(Mutex::new(Vec::new()));
    let (seen, got) = (requests.clone(), gets.clone());
    let client = mock_api::client(move |parts, body| {
        let method = parts.method.to_string();
        if method == "GET" {
            got.lock().unwrap().push(parts.uri.path().to_owned());
            return None; // the config watches' lists: the test feeds their events
        }
        let reply = if method == "PATCH" {
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}})
        } else {
            body.clone()
        };
        seen.lock()
            .unwrap()
            .push((method, parts.uri.path().to_owned(), body));
        Some((200, reply))
    });
    let (watched_tx, watched) = mpsc::channel(64);
    let (fetched_tx, fetched) = mpsc::unbounded_channel();
    let (outcomes_tx, outcomes) = mpsc::unbounded_channel();
    let (leader_tx, leader) = watch::channel(false);
    let (synced_tx, synced) = watch::channel(false);
    let metrics = ControllerMetrics::default();
    let counters = writer::Counters {
        written: Arc::new(|_| {}),
        held: Arc::new(|_| {}),
    };
    let config = writer::WriterConfig {
        max_writes_per_second: 100.0,
        request_timeout: Duration::from_secs(10),
    };
    let out = Outputs {
        fetcher: Fetcher::spawn(client.clone(), None, fetched_tx),
        config_watches: ConfigWatches::new(client.clone(), watched_tx.clone(), None),
        writer: Writer::spawn(client, config, leader.clone(), outcomes_tx, counters),
        synced: synced_tx,
        metrics,
    };
    let store = StoreWriter::new(ConfigStore::default());
    let reader = store.reader();
    let view = View::new("reload-injector", true);
    let controller = Loop::new(view, store, None, DELAY, out);
    let inputs = Inputs {
        watched,
        fetched,
        outcomes,
        leader,
    };
    tokio::spawn(controller.run(inputs));
    Harness {
        watched: watched_tx,
        leader: leader_tx,
        synced,
        store: reader,
        requests,
        gets,
    }
}

fn digests(value: &str) -> Digests {
    let id = ConfigId::config_map("env");
    ConfigObject::from_values(&id, [("a", value.as_bytes())], None)
        .unwrap()
        .into()
}

fn config(rv: &str, value: &str) -> Item {
    Item::Config {
        key: ConfigKey {
            namespace: "shop".into(),
            id: ConfigId::config_map("env"),
        },
        meta: Meta {
            resource_version: rv.into(),
            ignore: false,
            matched: false,
        },
        digests: Some(digests(value)),
    }
}

/// The hash `inject` stamps on a Deployment reading key `a` of ConfigMap `env` holding `value`.
fn stamped(value: &str) -> String {
    let consumer = deployment("sha256:unused");
    let Item::Target {
        reduced: Ok(Some(consumer)),
        ..
    } = consumer
    else {
        unreachable!()
    };
    let mut data = ConfigData::new();
    let object = digests(value).to_object();
    data.insert(ConfigId::config_map("env"), Lookup::Found(object));
    consumer.consumption.hash(&data, None).hash.unwrap()
}

fn deployment(hash: &str) -> Item {
    let object = json!({"spec": {"template": {
        "metadata": {"annotations": {CONFIG_HASH: hash}},
        "spec": {"containers": [{"name": "app", "env": [
            {"name": "A", "valueFrom": {"configMapKeyRef": {"name": "env", "key": "a"}}}
        ]}]}
    }}});
    Item::Target {
        target: Target {
            kind: TargetKind::Deployment,
            namespace: "shop".into(),
            name: "web".into(),
        },
        reduced: reduce::workload(TargetKind::Deployment, "uid-web", &object),
        budget: None,
        in_place: None,
    }
}

/// Lists `source` with `items`.
async fn list(harness: &Harness, source: Source, items: Vec<Item>) {
    let send = |w| harness.watched.send(w);
    send(Watched::Init(source.clone())).await.unwrap();
    for item in items {
        send(Watched::Apply(item)).await.unwrap();
    }
    send(Watched::InitDone(source)).await.unwrap();
}

/// Syncs a view of namespace `shop` with Deployment `web` stamped for `env` holding `1`.
async fn synced_view(harness: &mut Harness) {
    let deployments = Stream::Targets(TargetKind::Deployment);
    let served = HashSet::from([Stream::Namespaces, deployments]);
    harness.watched.send(Watched::Served(served)).await.unwrap();
    let shop = Item::Namespace {
        name: "shop".into(),
        labelled: true,
    };
    list(harness, Source::Cluster(Stream::Namespaces), vec![shop]).await;
    let web = deployment(&stamped("1"));
    list(harness, Source::Cluster(deployments), vec![web]).await;
    let maps = Source::Config(Scope::new(ConfigKind::ConfigMap, "shop"));
    list(harness, maps, vec![config("1", "1")]).await;
    assert!(!*harness.synced.borrow(), "Secrets of shop have not listed");
    let secrets = Source::Config(Scope::new(ConfigKind::Secret, "shop"));
    list(harness, secrets, vec![]).await;
    harness.synced.wait_for(|s| *s).await.unwrap();
}

fn patches(harness: &Harness) -> Vec<Value> {
    let requests = harness.requests.lock().unwrap();
    let patches = requests.iter().filter(|(method, _, _)| method == "PATCH");
    patches.map(|(_, _, body)| body.clone()).collect()
}

#[tokio::test(start_paused = true)]
async fn a_change_the_leader_sees_rolls_the_workload_once_after_the_rollout_delay() {
    let mut harness = start();
    synced_view(&mut harness).await;
    let id = ConfigId::config_map("env");
    let answer = harness.store.read(|store| store.lookup("shop", &id));
    assert!(
        matches!(answer, Some(Lookup::Found(_))),
        "the webhook reads the digests"
    );
    harness.leader.send(true).unwrap();
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert!(patches(&harness).is_empty(), "the stamped hash is right");

    // Two changes 5 s apart: one patch, `--rollout-delay` after the last.
    harness
        .watched
        .send(Watched::Apply(config("2", "2")))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(5)).await;
    let changed = config("3", "3");
    harness.watched.send(Watched::Apply(changed)).await.unwrap();
    tokio::time::sleep(DELAY - Duration::from_secs(1)).await;
    assert!(patches(&harness).is_empty(), "merged, and not due yet");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let sent = patches(&harness);
    assert_eq!(sent.len(), 1, "{sent:?}");
    let ops = sent[0].as_array().expect("a JSON patch");
    assert_eq!(ops[0]["op"], "test");
    assert_eq!(ops[0]["value"], stamped("1"));
    assert_eq!(ops[1]["value"], stamped("3"));
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(patches(&harness).len(), 1, "once");
}

#[tokio::test(start_paused = true)]
async fn a_follower_keeps_the_view_and_writes_nothing_and_a_relist_forgets_what_it_missed() {
    let mut harness = start();
    synced_view(&mut harness).await;
    let watched = &harness.watched;
    watched
        .send(Watched::Apply(config("2", "2")))
        .await
        .unwrap();
    tokio::time::sleep(DELAY * 2).await;
    assert!(patches(&harness).is_empty(), "not the leader");

    // A relist of shop's ConfigMaps that no longer lists `env`: it is gone for the webhook,
    // which meanwhile is not answered from the view.
    let maps = Source::Config(Scope::new(ConfigKind::ConfigMap, "shop"));
    let id = ConfigId::config_map("env");
    watched.send(Watched::Init(maps.clone())).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1)).await;
    assert_eq!(harness.store.read(|s| s.lookup("shop", &id)), None);
    watched.send(Watched::InitDone(maps)).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1)).await;
    let answer = harness.store.read(|s| s.lookup("shop", &id));
    assert_eq!(answer, Some(Lookup::NotFound), "swept by the relist");
    assert!(
        harness.requests.lock().unwrap().is_empty(),
        "nothing written"
    );
}

/// A Deployment named `name` in `namespace` reading key `a` of ConfigMap `env`, stamped `hash`,
/// its template carrying `annotations` besides.
fn deployment_in(namespace: &str, name: &str, hash: &str, annotations: Value) -> Item {
    let mut template_annotations = annotations;
    template_annotations[CONFIG_HASH] = json!(hash);
    let object = json!({"spec": {"template": {
        "metadata": {"annotations": template_annotations},
        "spec": {"containers": [{"name": "app", "env": [
            {"name": "A", "valueFrom": {"configMapKeyRef": {"name": "env", "key": "a"}}}
        ]}]}
    }}});
    Item::Target {
        target: Target {
            kind: TargetKind::Deployment,
            namespace: namespace.into(),
            name: name.into(),
        },
        reduced: reduce::workload(TargetKind::Deployment, name, &object),
        budget: None,
        in_place: None,
    }
}

#[tokio::test(start_paused = true)]
async fn in_a_namespace_without_the_label_only_a_workload_that_opts_in_is_acted_on() {
    let mut harness = start();
    let deployments = Stream::Targets(TargetKind::Deployment);
    let served = HashSet::from([Stream::Namespaces, deployments]);
    harness.watched.send(Watched::Served(served)).await.unwrap();
    let plain = Item::Namespace {
        name: "plain".into(),
        labelled: false,
    };
    list(&harness, Source::Cluster(Stream::Namespaces), vec![plain]).await;
    let opt_in =
        json!({"reload-injector.io/workload-opt-in": r#"{"reload-injector.io/inject":"enabled"}"#});
    let opted = deployment_in("plain", "opted", &stamped("1"), opt_in);
    // Stamped, but no longer opted in (what the webhook wrote is taken off at its next UPDATE).
    let left = deployment_in("plain", "left", &stamped("1"), json!({}));
    list(&harness, Source::Cluster(deployments), vec![opted, left]).await;

    // The namespace holds a workload that opts in: its config is watched, and synced.
    let config_in = |rv: &str, value: &str| match config(rv, value) {
        Item::Config { key, meta, digests } => Item::Config {
            key: ConfigKey {
                namespace: "plain".into(),
                ..key
            },
            meta,
            digests,
        },
        other => other,
    };
    let maps = Source::Config(Scope::new(ConfigKind::ConfigMap, "plain"));
    list(&harness, maps, vec![config_in("1", "1")]).await;
    let secrets = Source::Config(Scope::new(ConfigKind::Secret, "plain"));
    list(&harness, secrets, vec![]).await;
    harness.synced.wait_for(|s| *s).await.unwrap();
    let gets = harness.gets.lock().unwrap().clone();
    assert!(
        gets.iter()
            .any(|p| p.ends_with("/namespaces/plain/configmaps")),
        "the config watch of plain started: {gets:?}"
    );

    // A change rolls the one that opts in, once; the other is never written.
    harness.leader.send(true).unwrap();
    let watched = &harness.watched;
    watched
        .send(Watched::Apply(config_in("2", "2")))
        .await
        .unwrap();
    tokio::time::sleep(DELAY * 2).await;
    let requests = harness.requests.lock().unwrap().clone();
    let written: Vec<&str> = requests
        .iter()
        .filter(|(method, _, _)| method == "PATCH")
        .map(|(_, path, _)| path.as_str())
        .collect();
    assert_eq!(
        written,
        ["/apis/apps/v1/namespaces/plain/deployments/opted"],
        "{requests:?}"
    );
}

/// A Pod of Deployment `web` whose sidecar restarts it in place for key `a` of ConfigMap `env`,
/// its `env-hash` at `env_hash`, Ready, its containers restarted `restarts` times.
fn in_place_pod(name: &str, env_hash: &str, restarts: u32) -> Item {
    in_place_pod_as(name, [(ENV_HASH, env_hash)].into(), restarts, true)
}

/// [`in_place_pod`] with these `annotations`, Ready or not.
fn in_place_pod_as(
    name: &str,
    annotations: std::collections::BTreeMap<&str, &str>,
    restarts: u32,
    ready: bool,
) -> Item {
    let status = if ready { "True" } else { "False" };
    let object = json!({
        "metadata": {"annotations": annotations},
        "spec": {
            "initContainers": [{"name": SIDECAR_NAME, "restartPolicy": "Always",
                "args": ["watch", in_place::HASH_FILE_FLAG, "/etc/reload-injector/pod/env-hash",
                    "--env-state-dir", "/s", "--env-key", "env/a"]}],
            "containers": [{"name": "app", "env": [
                {"name": "A", "valueFrom": {"configMapKeyRef": {"name": "env", "key": "a"}}}]}],
        },
        "status": {
            "conditions": [{"type": "Ready", "status": status}],
            "initContainerStatuses": [{"name": SIDECAR_NAME, "restartCount": restarts}],
            "containerStatuses": [{"name": "app", "restartCount": restarts}],
        },
    });
    let target = Target {
        kind: TargetKind::Pod,
        namespace: "shop".into(),
        name: name.into(),
    };
    let owner = Some(Target {
        kind: TargetKind::Deployment,
        namespace: "shop".into(),
        name: "web".into(),
    });
    let annotations = annotations
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    let meta = (&std::collections::BTreeMap::new(), &annotations);
    Item::Target {
        target,
        reduced: reduce::pod("uid", meta, &object, owner.clone()).map(Some),
        budget: None,
        in_place: reduce::pod_env("uid", meta, &object, owner).map(Box::new),
    }
}

/// The env hash of key `a` of ConfigMap `env` holding `value`.
fn env_hash_of(value: &str) -> String {
    let id = ConfigId::config_map("env");
    let data = ConfigData::from([(id.clone(), Lookup::Found(digests(value).to_object()))]);
    let consumed = [crate::hash::Consumed::Key(id, "a".into())].into();
    crate::hash::env_hash(&consumed, &data).unwrap()
}

/// The Pods patched so far, with the annotation each patch writes.
fn pod_patches(harness: &Harness) -> Vec<(String, String)> {
    let requests = harness.requests.lock().unwrap();
    let pods = requests
        .iter()
        .filter(|(method, path, _)| method == "PATCH" && path.contains("/pods/"));
    pods.map(|(_, path, body)| {
        let name = path.rsplit('/').next().unwrap_or_default().to_owned();
        let annotation = match body {
            Value::Array(ops) => ops[1]["path"].as_str().unwrap_or_default().to_owned(),
            other => other["metadata"]["annotations"].to_string(),
        };
        (name, annotation)
    })
    .collect()
}

/// A leading loop that has listed Pods `web-1` and `web-2` of Deployment `web` in the labelled
/// namespace `shop`, each restarting in place for ConfigMap `env` (`a = 1`, their env hash),
/// and has had 30 s to act.
async fn two_pods_that_restart_in_place() -> Harness {
    let harness = start();
    let (deployments, pods) = (
        Stream::Targets(TargetKind::Deployment),
        Stream::Targets(TargetKind::Pod),
    );
    let served = HashSet::from([Stream::Namespaces, deployments, pods]);
    harness.watched.send(Watched::Served(served)).await.unwrap();
    let shop = Item::Namespace {
        name: "shop".into(),
        labelled: true,
    };
    list(&harness, Source::Cluster(Stream::Namespaces), vec![shop]).await;
    list(&harness, Source::Cluster(deployments), vec![]).await;
    let old = env_hash_of("1");
    let both = vec![
        in_place_pod("web-1", &old, 0),
        in_place_pod("web-2", &old, 0),
    ];
    list(&harness, Source::Cluster(pods), both).await;
    let maps = Source::Config(Scope::new(ConfigKind::ConfigMap, "shop"));
    list(&harness, maps, vec![config("1", "1")]).await;
    let secrets = Source::Config(Scope::new(ConfigKind::Secret, "shop"));
    list(&harness, secrets, vec![]).await;
    harness.leader.send(true).unwrap();
    tokio::time::sleep(Duration::from_secs(30)).await;
    harness
}

#[tokio::test(start_paused = true)]
async fn an_env_change_restarts_the_pods_in_place_a_wave_at_a_time_and_never_the_workload() {
    let harness = two_pods_that_restart_in_place().await;
    assert!(
        pod_patches(&harness).is_empty(),
        "the stamped env hashes are right"
    );

    let watched = &harness.watched;
    watched
        .send(Watched::Apply(config("2", "2")))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(5)).await;
    let env = format!("/metadata/annotations/{}", ENV_HASH.replace('/', "~1"));
    let first = pod_patches(&harness);
    let written: Vec<&(String, String)> = first.iter().filter(|(_, a)| *a == env).collect();
    assert_eq!(
        written.len(),
        1,
        "one Pod per wave (25% of 2, at least one): {first:?}"
    );
    assert!(
        first.iter().any(|(_, a)| a.contains(ENV_HASH_REFRESHED)),
        "the second nudge follows: {first:?}"
    );
    // Until that Pod restarted and is Ready again, the next wave waits.
    tokio::time::sleep(Duration::from_secs(30)).await;
    let written_now = pod_patches(&harness)
        .iter()
        .filter(|(_, a)| *a == env)
        .count();
    assert_eq!(written_now, 1);
    let restarted = &written[0].0;
    let new = env_hash_of("2");
    let item = in_place_pod(restarted, &new, 1);
    watched.send(Watched::Apply(item)).await.unwrap();
    tokio::time::sleep(Duration::from_secs(5)).await;
    let all = pod_patches(&harness);
    let names: HashSet<&str> = all
        .iter()
        .filter(|(_, a)| *a == env)
        .map(|(n, _)| n.as_str())
        .collect();
    assert_eq!(names, HashSet::from(["web-1", "web-2"]), "{all:?}");
    let requests = harness.requests.lock().unwrap();
    assert!(
        !requests
            .iter()
            .any(|(_, path, _)| path.contains("/deployments/")),
        "the workload is never written"
    );
}

/// The Pods patched so far with `annotation`, and the value each got.
fn patched_with(harness: &Harness, annotation: &str) -> Vec<(String, Value)> {
    let requests = harness.requests.lock().unwrap();
    let pods = requests
        .iter()
        .filter(|(method, path, _)| method == "PATCH" && path.contains("/pods/"));
    let pointer = format!("/metadata/annotations/{}", annotation.replace('/', "~1"));
    pods.filter_map(|(_, path, body)| {
        let value = match body {
            // A `test` of the old value, then the new one.
            Value::Array(ops) => {
                ops.iter().rfind(|op| op["path"] == pointer.as_str())?["value"].clone()
            }
            other => other["metadata"]["annotations"].get(annotation)?.clone(),
        };
        Some((
            path.rsplit('/').next().unwrap_or_default().to_owned(),
            value,
        ))
    })
    .collect()
}

#[tokio::test(start_paused = true)]
async fn a_crash_holds_the_value_back_on_the_pods_left_and_a_new_leader_keeps_it_back() {
    let harness = two_pods_that_restart_in_place().await;
    let old = env_hash_of("1");
    let watched = &harness.watched;
    watched
        .send(Watched::Apply(config("2", "crash")))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(5)).await;
    let new = env_hash_of("crash");
    let first = patched_with(&harness, ENV_HASH);
    let [(crashed, _)] = first.as_slice() else {
        panic!("one Pod per wave: {first:?}");
    };
    let left = if crashed == "web-1" { "web-2" } else { "web-1" };
    // Its app exits with the new env: restarted in place, then twice more, not Ready.
    let item = in_place_pod_as(crashed, [(ENV_HASH, new.as_str())].into(), 3, false);
    watched.send(Watched::Apply(item)).await.unwrap();
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(
        patched_with(&harness, ENV_HASH_HELD_BACK),
        [(left.to_owned(), Value::from(new.as_str()))],
        "the Pod left records the value held back"
    );

    // The crashed Pod came up after all (nothing else would keep a new leader's waves from
    // starting), and another replica leads, with the Pod left as the API now has it.
    let item = in_place_pod_as(crashed, [(ENV_HASH, new.as_str())].into(), 4, true);
    watched.send(Watched::Apply(item)).await.unwrap();
    harness.leader.send(false).unwrap();
    tokio::time::sleep(Duration::from_secs(5)).await;
    let annotations = [(ENV_HASH, old.as_str()), (ENV_HASH_HELD_BACK, new.as_str())];
    let item = in_place_pod_as(left, annotations.into(), 0, true);
    watched.send(Watched::Apply(item)).await.unwrap();
    tokio::time::sleep(Duration::from_secs(5)).await;
    harness.leader.send(true).unwrap();
    tokio::time::sleep(Duration::from_secs(60)).await;
    let env = patched_with(&harness, ENV_HASH);
    assert!(
        env.iter().all(|(pod, _)| pod == crashed),
        "the Pod left keeps the env it runs with: {env:?}"
    );
}
