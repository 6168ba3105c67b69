//! End to end through a real kube-apiserver, with faults: the API server killed and started
//! again under a running `serve`, and two `serve` replicas whose Lease holder is killed. Each
//! change afterwards must land exactly once. The tests take turns (one lock): each fault would
//! disturb the other.

use crate::cluster_support;

use std::sync::Mutex;
use std::time::{Duration, Instant};

use cluster_support::install::{Install, OWN, Serve};
use cluster_support::objects::{config_map, container, deployment, env_from_config_map};
use cluster_support::{Cluster, PATIENCE};
use serde_json::{Value, json};

const CONFIG_HASH: &str = "reload-injector.io/config-hash";

static TURNS: Mutex<()> = Mutex::new(());

fn web() -> Value {
    deployment(
        "web",
        1,
        container(
            json!([env_from_config_map("UPSTREAM", "web-env", "UPSTREAM")]),
            json!([]),
        ),
        json!([]),
    )
}

fn hash_of(cluster: &Cluster, ns: &str) -> Option<String> {
    cluster.get(ns, "deployment", "web")["spec"]["template"]["metadata"]["annotations"][CONFIG_HASH]
        .as_str()
        .map(str::to_owned)
}

fn generation(cluster: &Cluster, ns: &str) -> u64 {
    cluster.get(ns, "deployment", "web")["metadata"]["generation"]
        .as_u64()
        .unwrap_or(0)
}

/// The ConfigChanged Events of `ns`, with their counts added up.
fn rollouts_recorded(cluster: &Cluster, ns: &str) -> u64 {
    let events = cluster.config_changed_events(ns);
    events
        .iter()
        .map(|e| e["count"].as_u64().unwrap_or(1))
        .sum()
}

/// Edits the env key and checks the change lands once: one new template generation, one
/// re-stamp, one Event. Once the replicas that run have nothing pending, no second write can
/// come.
fn change_lands_once(cluster: &Cluster, ns: &str, value: &str, replicas: &[&Serve]) {
    let (hash, template, recorded) = (
        hash_of(cluster, ns),
        generation(cluster, ns),
        rollouts_recorded(cluster, ns),
    );
    let edit = cluster.apply(ns, &config_map("web-env", &[("UPSTREAM", value)]));
    assert!(edit.ok, "{}", edit.stderr);
    cluster.wait_for("the change to be re-stamped", PATIENCE, || {
        (hash_of(cluster, ns) != hash).then_some(())
    });
    cluster.wait_for("its ConfigChanged Event", PATIENCE, || {
        (rollouts_recorded(cluster, ns) > recorded).then_some(())
    });
    for serve in replicas {
        serve.wait_caught_up(cluster);
    }
    assert_eq!(
        generation(cluster, ns),
        template + 1,
        "exactly one write to the template"
    );
    assert_eq!(
        rollouts_recorded(cluster, ns),
        recorded + 1,
        "exactly one Event"
    );
}

fn stamped_namespace(cluster: &Cluster, tag: &str) -> String {
    let ns = cluster.namespace(tag, true);
    cluster.apply(&ns, &config_map("web-env", &[("UPSTREAM", "a:80")]));
    let applied = cluster.apply(&ns, &web());
    assert!(applied.ok, "{}", applied.stderr);
    assert!(hash_of(cluster, &ns).is_some(), "the webhook stamped web");
    ns
}

#[test]
fn watches_recover_after_the_api_server_restarts_and_a_change_lands_once() {
    let _turn = TURNS.lock().unwrap_or_else(|e| e.into_inner());
    let install = Install::own();
    let cluster = install.cluster;
    let ns = stamped_namespace(cluster, "restart");
    change_lands_once(cluster, &ns, "b:80", &[&install.serve]);

    cluster.kill_apiserver();
    // The outage itself (a fault's length, not a wait for an event): serve's watches fail and
    // retry meanwhile.
    std::thread::sleep(Duration::from_secs(3));
    cluster.start_apiserver();
    install.serve.wait_ready(cluster);
    change_lands_once(cluster, &ns, "c:80", &[&install.serve]);
    // And a change made while the API server was away from serve's watches lands too.
    change_lands_once(cluster, &ns, "d:80", &[&install.serve]);
}

fn is_leader(serve: &Serve) -> bool {
    serve.metric("reload_injector_leader") == 1.0
}

fn holder(cluster: &Cluster) -> String {
    cluster.get(OWN, "lease", "reload-injector")["spec"]["holderIdentity"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn with_two_replicas_one_holds_the_lease_and_the_other_takes_over() {
    let _turn = TURNS.lock().unwrap_or_else(|e| e.into_inner());
    let install = Install::own();
    let cluster = install.cluster;
    let ns = stamped_namespace(cluster, "replicas");
    let second = install.start_serve("serve-1");
    second.wait_ready(cluster);
    let replicas = [&install.serve, &second];
    let leader = cluster.wait_for("exactly one leader", PATIENCE, || {
        let leaders: Vec<&&Serve> = replicas.iter().filter(|s| is_leader(s)).collect();
        (leaders.len() == 1).then(|| leaders[0].name.clone())
    });
    assert!(
        holder(cluster).starts_with(&format!("{leader}-")),
        "the Lease names {leader}: {}",
        holder(cluster)
    );
    change_lands_once(cluster, &ns, "b:80", &replicas);

    let (gone, survivor) = if leader == install.serve.name {
        (&install.serve, &second)
    } else {
        (&second, &install.serve)
    };
    gone.kill();
    // kube-apiserver reaches the webhook through a Service, which stops sending to a dead Pod.
    install.point_webhook_at(survivor);
    let killed = Instant::now();
    cluster.wait_for("the other replica to take the Lease", PATIENCE, || {
        is_leader(survivor).then_some(())
    });
    let took = killed.elapsed();
    eprintln!("take-over after the leader was killed: {took:?} (lease duration 6s)");
    assert!(
        took <= Duration::from_secs(6 + 5),
        "take-over took {took:?}: more than the lease duration plus 5 s"
    );
    assert!(holder(cluster).starts_with(&format!("{}-", survivor.name)));
    change_lands_once(cluster, &ns, "c:80", &[survivor]);
    // The next test (in any order) finds the first serve running and the webhook calling it.
    drop(second);
    install.revive_serve();
}

#[test]
fn a_missing_permission_is_one_clear_log_line_and_the_write_lands_once_granted() {
    let _turn = TURNS.lock().unwrap_or_else(|e| e.into_inner());
    let install = Install::own();
    let cluster = install.cluster;
    let ns = stamped_namespace(cluster, "forbidden");
    let shipped = install
        .applied
        .shipped("ClusterRole")
        .cloned()
        .expect("the manifests ship a ClusterRole");
    let mut narrowed = shipped.clone();
    for rule in narrowed["rules"].as_array_mut().unwrap() {
        if rule["apiGroups"] == json!(["apps"]) {
            rule["verbs"] = json!(["list", "watch"]);
        }
    }
    assert_ne!(
        narrowed, shipped,
        "the ClusterRole grants patch on apps workloads"
    );
    cluster.apply(OWN, &narrowed);
    let hash = hash_of(cluster, &ns);
    cluster.apply(&ns, &config_map("web-env", &[("UPSTREAM", "forbidden:80")]));
    let line = cluster.wait_for("serve to log the refused write", PATIENCE, || {
        install.serve.log_lines().into_iter().find(|l| {
            l["level"] == "ERROR"
                && l["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("forbidden") && m.contains(&ns))
        })
    });
    let message = line["message"].as_str().unwrap();
    assert!(
        message.contains("cannot patch resource \"deployments\" in API group \"apps\"")
            && message.ends_with("(HTTP 403 Forbidden)"),
        "the line names what is missing, as the API server says it: {message}"
    );
    assert!(
        !message.contains('\n') && !message.contains("Status {"),
        "one line, no dump of the answer: {message}"
    );
    assert_eq!(
        hash_of(cluster, &ns),
        hash,
        "nothing written without the permission"
    );
    assert_eq!(install.serve.get("/healthz").0, 200, "serve keeps running");

    let recorded = rollouts_recorded(cluster, &ns);
    cluster.apply(OWN, &shipped);
    cluster.wait_for(
        "the write to land once the permission is back",
        PATIENCE,
        || (hash_of(cluster, &ns) != hash).then_some(()),
    );
    install.serve.wait_caught_up(cluster);
    assert_eq!(rollouts_recorded(cluster, &ns), recorded + 1, "one Event");
}
