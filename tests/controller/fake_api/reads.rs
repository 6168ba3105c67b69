//! How the rollout controller reads the API: ConfigMaps and Secrets only of opted-in
//! namespaces, one list (or streaming list) per namespace and kind, never a GET per object; a
//! namespace that opts in later, a relist after 410 Gone, and a namespace whose list RBAC
//! refuses. Real `serve` processes against the fake API server over HTTP.

use crate::rollout_support;
use crate::webhook_support;

use std::time::Duration;

use fake_kube_api::{Matcher, Recorded};
use rollout_support::{
    Cluster, NS, PATIENCE, env_deployment, template_hash, wait_caught_up, wait_for, wait_ready,
};
use serde_json::{Value, json};
use webhook_support::apply_patch;
use webhook_support::client::{Conn, Proto};
use webhook_support::process::Server;

/// `object` moved to namespace `namespace`.
fn in_namespace(mut object: Value, namespace: &str) -> Value {
    object["metadata"]["namespace"] = namespace.into();
    object
}

/// The ConfigMap `name` with one key `upstream`.
fn config(name: &str, namespace: &str, upstream: &str) -> Value {
    in_namespace(
        Cluster::config_map(name, &[("upstream", upstream)]),
        namespace,
    )
}

/// Puts ConfigMap `NAME-env` and the stamped Deployment `NAME` reading it in `namespace`.
fn workload(cluster: &Cluster, name: &str, namespace: &str) {
    let cm = config(&format!("{name}-env"), namespace, "http://a");
    cluster.put(&cm);
    let deployment = env_deployment(name, &format!("{name}-env"), "upstream");
    let stamped = cluster.inject(&deployment, &[in_namespace(cm, NS)]);
    cluster.put(&in_namespace(stamped, namespace));
}

fn hash(cluster: &Cluster, namespace: &str, name: &str) -> Option<String> {
    template_hash(&cluster.api.get("deployments", namespace, name)?)
}

/// Waits until the controller re-stamps Deployment `name` in `namespace`.
fn wait_restamped(cluster: &Cluster, namespace: &str, name: &str) {
    let before = hash(cluster, namespace, name);
    wait_for(
        &format!("{namespace}/{name} to be re-stamped"),
        PATIENCE,
        || (hash(cluster, namespace, name) != before).then_some(()),
    );
}

/// Requests for ConfigMaps or Secrets.
fn config_requests(cluster: &Cluster) -> Vec<Recorded> {
    cluster
        .api
        .requests()
        .into_iter()
        .filter(|r| matches!(r.resource(), Some("configmaps" | "secrets")))
        .collect()
}

/// A GET of one named object (not a list, not a watch).
fn is_object_get(r: &Recorded) -> bool {
    r.method == "GET" && !r.is_watch() && r.path.split('/').count() > 6
}

#[test]
fn a_sync_lists_only_opted_in_namespaces_and_gets_no_object() {
    let cluster = Cluster::new("reads-sync");
    cluster.namespace("elsewhere", false);
    for i in 0..30 {
        cluster.put(&config(&format!("filler-{i}"), NS, "x"));
        cluster.put(&config(&format!("filler-{i}"), "elsewhere", "x"));
    }
    workload(&cluster, "web", NS);
    let server = cluster.serve(&[]);
    wait_ready(&server, true);
    cluster.put(&config("web-env", NS, "http://b"));
    wait_restamped(&cluster, NS, "web");

    let requests = config_requests(&cluster);
    let gets: Vec<&str> = requests
        .iter()
        .filter(|r| is_object_get(r))
        .map(|r| r.path.as_str())
        .collect();
    assert_eq!(gets, Vec::<&str>::new(), "no GET of a listed object");
    let outside: Vec<&str> = requests
        .iter()
        .filter(|r| !r.path.contains(&format!("/namespaces/{NS}/")))
        .map(|r| r.path.as_str())
        .collect();
    assert_eq!(
        outside,
        Vec::<&str>::new(),
        "no config read outside the opted-in namespace"
    );
    let reads = requests.len();
    assert!(
        reads <= 6,
        "one list and watch per kind, not per object: {reads} requests for 31 ConfigMaps"
    );
}

#[test]
fn a_namespace_that_opts_in_while_serve_runs_is_acted_on_without_a_restart() {
    let cluster = Cluster::new("reads-late");
    cluster.namespace("late", false);
    workload(&cluster, "web", "late");
    let server = cluster.serve(&[]);
    wait_ready(&server, true);
    cluster.put(&config("web-env", "late", "http://b"));
    // Its config is not watched (checked below), so no event can come of the edit: once
    // nothing is pending, nothing will be written.
    wait_caught_up(&server, 0.0);
    assert!(
        cluster
            .patches()
            .iter()
            .all(|p| p.resource() != Some("deployments")),
        "not opted in: never written"
    );
    assert!(
        config_requests(&cluster)
            .iter()
            .all(|r| !r.path.contains("/namespaces/late/")),
        "nothing of a namespace that never opted in is read"
    );

    // Opted in: its list brings `web-env` ("http://b"), which the stamped hash ("http://a")
    // does not match, so `web` is re-stamped at once, from the list alone.
    let stamped = hash(&cluster, "late", "web");
    cluster.namespace("late", true);
    wait_for(
        "late/web to be re-stamped after the opt-in",
        PATIENCE,
        || (hash(&cluster, "late", "web") != stamped).then_some(()),
    );
    let requests = config_requests(&cluster);
    assert!(
        requests
            .iter()
            .any(|r| r.path.contains("/namespaces/late/configmaps")),
        "the new namespace's config is listed"
    );
    assert!(
        !requests.iter().any(is_object_get),
        "its objects came with its list"
    );
    // Its watch goes on. (An edit that the controller sees before the watch event of its own
    // re-stamp may cost one GET, by design: a hash newer than the data it holds is confirmed.)
    cluster.put(&config("web-env", "late", "http://c"));
    wait_restamped(&cluster, "late", "web");
}

#[test]
fn a_relist_after_410_costs_a_list_not_a_get_per_object() {
    let cluster = Cluster::new("reads-410");
    for i in 0..40 {
        cluster.put(&config(&format!("filler-{i}"), NS, "x"));
    }
    workload(&cluster, "web", NS);
    let server = cluster.serve(&[]);
    wait_ready(&server, true);
    cluster.api.wait_for_request(
        |r| r.is_watch() && r.resource() == Some("configmaps"),
        PATIENCE,
    );
    std::thread::sleep(Duration::from_millis(500));
    cluster.api.clear_requests();
    // Cut the watches, change while they are away, and forget the history: the watch resumes
    // at a version that is gone (410) and must relist.
    cluster.api.set_unreachable(Duration::from_millis(500));
    cluster.put(&config("web-env", NS, "http://b"));
    cluster.api.compact();
    wait_restamped(&cluster, NS, "web");
    assert!(cluster.api.expired_watches() >= 1, "a watch got 410");
    let requests = config_requests(&cluster);
    assert!(
        !requests.iter().any(is_object_get),
        "no GET per object after the relist"
    );
    assert!(
        requests.len() <= 12,
        "the relist is a few requests, not one per object: {} for 41 ConfigMaps",
        requests.len()
    );
}

/// The webhook's answer to the CREATE of `workload` in [`NS`], from `server`.
fn admit(cluster: &Cluster, server: &Server, workload: &Value) -> Value {
    let ca = std::fs::read_to_string(cluster.dir().join("ca.crt")).unwrap();
    let review = json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "relist-1",
            "kind": {"group": "apps", "version": "v1", "kind": "Deployment"},
            "resource": {"group": "apps", "version": "v1", "resource": "deployments"},
            "namespace": NS,
            "operation": "CREATE",
            "userInfo": {"username": "test"},
            "object": workload,
        }
    });
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let mut conn = Conn::connect(server.addr, &ca, Proto::H1).await.unwrap();
        conn.review(&review).await
    })
}

#[test]
fn while_a_namespace_lists_again_after_410_the_webhook_reads_the_api_not_the_stale_view() {
    let cluster = Cluster::new("reads-410-view");
    workload(&cluster, "web", NS);
    let server = cluster.serve(&[]);
    wait_ready(&server, true);
    let watching = |cluster: &Cluster| {
        cluster.api.wait_for_request(
            |r| r.is_watch() && r.resource() == Some("configmaps"),
            PATIENCE,
        )
    };
    watching(&cluster);
    // Cut the watches, change `web-env` while they are away, forget the history (the watch
    // resumes at a version that is gone: 410, relist), and hold every ConfigMap watch back:
    // the resuming one (which gets the 410), then the relist (a streaming list).
    cluster.api.delay(
        Matcher::new("GET", "configmaps").collection().watch(true),
        Duration::from_secs(4),
    );
    let expired = cluster.api.expired_watches();
    cluster.api.set_unreachable(Duration::from_millis(300));
    let changed = config("web-env", NS, "http://changed");
    cluster.put(&changed);
    cluster.api.compact();
    // The watch resumes, is held, gets 410, backs off and lists again: kube's watcher backoff
    // grows with each error, so this can take well over PATIENCE on a loaded machine.
    wait_for(
        "the ConfigMap watch's relist to reach the API",
        PATIENCE * 3,
        || (cluster.api.held_requests() >= 2).then_some(()),
    );
    assert!(cluster.api.expired_watches() > expired, "a watch got 410");
    // The relist is held for 4 s: a new workload reading `web-env` is admitted now,
    // and its hash must be over the changed data (the webhook GETs it), not the view's.
    let another = env_deployment("another", "web-env", "upstream");
    let answer = admit(&cluster, &server, &another);
    let admitted = apply_patch(&answer["response"], &another);
    let want = cluster.expected_hash(&another, &[in_namespace(changed, NS)]);
    assert_eq!(
        template_hash(&admitted).as_deref(),
        Some(want.as_str()),
        "the webhook answered from the view while its namespace was listing again: {answer}"
    );
    cluster.api.clear_faults();
}

#[test]
fn a_namespace_whose_list_is_refused_is_said_once_and_the_others_go_on() {
    refused_namespace(false);
}

#[test]
fn a_namespace_whose_paged_list_is_refused_is_said_once_and_the_others_go_on() {
    refused_namespace(true);
}

/// Namespace `locked` opted in, its ConfigMap list refused (403) again and again; with
/// `paged`, the API server does not serve streaming lists either.
fn refused_namespace(paged: bool) {
    let cluster = Cluster::new(if paged {
        "reads-403-paged"
    } else {
        "reads-403"
    });
    cluster.namespace("locked", true);
    workload(&cluster, "web", NS);
    workload(&cluster, "db", "locked");
    let locked = Matcher::new("GET", "configmaps").namespace("locked");
    if paged {
        cluster.api.fail_next(locked.clone().watch(true), 422, 1);
    }
    cluster.api.fail_next(locked, 403, 1_000);
    let server = cluster.serve(&[]);
    wait_ready(&server, true);
    cluster.put(&config("web-env", NS, "http://b"));
    wait_restamped(&cluster, NS, "web");
    // The refused list retried twice: a third request is sent only after the second answer
    // was handled (and would have been said again).
    let locked_requests = || {
        cluster
            .api
            .requests()
            .iter()
            .filter(|r| {
                r.resource() == Some("configmaps") && r.path.contains("/namespaces/locked/")
            })
            .count()
    };
    let refused_lists = wait_for("the refused list to be retried twice", PATIENCE, || {
        Some(locked_requests()).filter(|n| *n >= 3)
    });
    assert!(refused_lists >= 2, "retried ({refused_lists} requests)");
    let said: Vec<String> = server
        .log()
        .into_iter()
        .filter(|l| l.contains("locked"))
        .collect();
    assert_eq!(said.len(), 1, "said once, in one line: {said:#?}");
    assert!(
        said[0].contains("failed to list ConfigMaps in locked"),
        "{}",
        said[0]
    );
}

/// `/readyz` answers 503 until the controller's view has synced once — here, until the fake API
/// lets the opted-in namespace's ConfigMap list through — while `/healthz` already answers 200:
/// the webhook's lookups are answered from that view, so it must not take traffic before.
#[test]
fn readyz_waits_for_the_controllers_first_sync() {
    let cluster = Cluster::new("readyz");
    workload(&cluster, "web", NS);
    let hold = Duration::from_secs(5);
    cluster
        .api
        .delay(Matcher::new("GET", "configmaps").namespace(NS), hold);
    let server = cluster.serve(&[]);
    wait_for("the ConfigMap list to be held", PATIENCE, || {
        (cluster.api.held_requests() > 0).then_some(())
    });
    let held_at = std::time::Instant::now();
    let healthz = wait_for("/healthz", PATIENCE, || server.side_get("/healthz").ok());
    let readyz = server.side_get("/readyz").expect("/readyz answers");
    assert!(
        held_at.elapsed() < hold,
        "too slow to look while the list was held; try again on a quieter machine"
    );
    assert_eq!(healthz.0, 200, "{healthz:?}");
    assert_eq!(readyz.0, 503, "ready before the view synced: {readyz:?}");
    cluster.api.clear_faults();
    wait_ready(&server, false);
}
