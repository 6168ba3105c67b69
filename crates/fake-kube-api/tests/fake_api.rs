//! Tests of the fake API server itself, driven by the real kube client over HTTP.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use futures_util::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Event, Pod, Secret};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::core::PartialObjectMeta;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event as WEvent};
use serde_json::{Value, json};

use fake_kube_api::kubelet::{ConfigKind, FakeKubelet, Trigger};
use fake_kube_api::{FakeApi, Grant, Matcher, Rbac};

const PATIENCE: Duration = Duration::from_secs(10);

fn config_map(name: &str, value: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "app", "labels": {"tier": "web"}},
        "data": {"key": value},
    })
}

fn api_error(err: kube::Error) -> (u16, String) {
    match err {
        kube::Error::Api(status) => (status.code, status.reason),
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// Waits (bounded) for the next item of a stream.
async fn next<S: futures_util::Stream + Unpin>(stream: &mut S) -> S::Item {
    tokio::time::timeout(PATIENCE, stream.next())
        .await
        .expect("stream item within the patience")
        .expect("stream not ended")
}

#[test]
fn the_server_and_the_kubelet_can_be_shared_across_threads() {
    fn shareable<T: Send + Sync>() {}
    shareable::<FakeApi>();
    shareable::<FakeKubelet>();
}

#[tokio::test]
async fn try_default_reads_the_kubeconfig_over_plain_http() {
    let api = FakeApi::start();
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("fake-api-kc-{}", std::process::id()));
    let path = api.write_kubeconfig(&dir);
    // SAFETY: no other test in this binary reads or writes KUBECONFIG.
    unsafe { std::env::set_var("KUBECONFIG", &path) };
    let client = kube::Client::try_default()
        .await
        .expect("client from KUBECONFIG");
    let version = client.apiserver_version().await.expect("GET /version");
    assert_eq!(
        (version.major.as_str(), version.minor.as_str()),
        ("1", "33")
    );
    let request = api
        .wait_for_request(|r| r.path == "/version", PATIENCE)
        .expect("recorded");
    assert_eq!(request.status, 200);
}

#[tokio::test]
async fn paginated_list_reads_one_snapshot() {
    let api = FakeApi::start();
    for i in 0..25 {
        api.apply(config_map(&format!("cm-{i:02}"), "v1"));
    }
    let cms: Api<ConfigMap> = Api::namespaced(api.client().await, "app");
    let first = cms.list(&ListParams::default().limit(10)).await.unwrap();
    assert_eq!(first.items.len(), 10);
    let snapshot = first.metadata.resource_version.clone().unwrap();
    // Changes after the first page must not show in the next ones.
    api.apply(config_map("cm-99", "late"));
    api.apply(config_map("cm-15", "changed"));
    api.delete("configmaps", "app", "cm-20");
    let mut names: Vec<String> = first
        .items
        .iter()
        .map(|c| c.metadata.name.clone().unwrap())
        .collect();
    let mut token = first.metadata.continue_;
    let mut pages = 1;
    while let Some(next_token) = token.filter(|t| !t.is_empty()) {
        let page = cms
            .list(&ListParams::default().limit(10).continue_token(&next_token))
            .await
            .unwrap();
        assert_eq!(
            page.metadata.resource_version.as_deref(),
            Some(snapshot.as_str())
        );
        for cm in &page.items {
            if cm.metadata.name.as_deref() == Some("cm-15") {
                assert_eq!(cm.data.as_ref().unwrap()["key"], "v1", "snapshot value");
            }
        }
        names.extend(page.items.iter().map(|c| c.metadata.name.clone().unwrap()));
        token = page.metadata.continue_;
        pages += 1;
    }
    assert_eq!(pages, 3);
    let expected: Vec<String> = (0..25).map(|i| format!("cm-{i:02}")).collect();
    assert_eq!(names, expected);
    // A fresh list sees the new state; selectors filter.
    let now = cms
        .list(&ListParams::default().labels("tier=web,!missing"))
        .await
        .unwrap();
    assert_eq!(now.items.len(), 25, "cm-99 added, cm-20 deleted");
    let none = cms
        .list(&ListParams::default().labels("tier!=web"))
        .await
        .unwrap();
    assert!(none.items.is_empty());
    let one = cms
        .list(&ListParams::default().fields("metadata.name=cm-03"))
        .await
        .unwrap();
    assert_eq!(one.items.len(), 1);
    // A continue token from before a compaction is expired.
    let page = cms.list(&ListParams::default().limit(5)).await.unwrap();
    api.apply(config_map("cm-00", "bump"));
    api.compact();
    let err = cms
        .list(
            &ListParams::default()
                .limit(5)
                .continue_token(page.metadata.continue_.as_deref().unwrap()),
        )
        .await
        .unwrap_err();
    assert_eq!(api_error(err), (410, "Expired".to_owned()));
}

#[tokio::test]
async fn watch_resumes_after_a_version_and_sends_bookmarks() {
    let api = FakeApi::start();
    api.set_bookmark_interval(Duration::from_millis(100));
    api.apply(config_map("a", "1"));
    let from = api.revision().to_string();
    api.apply(config_map("a", "2"));
    api.apply(config_map("b", "1"));
    api.delete("configmaps", "app", "a");
    let cms: Api<ConfigMap> = Api::namespaced(api.client().await, "app");
    let mut stream = cms
        .watch(&WatchParams::default(), &from)
        .await
        .unwrap()
        .boxed();
    let mut seen = Vec::new();
    let mut last_rv = 0u64;
    while seen.len() < 3 {
        match next(&mut stream).await.unwrap() {
            WatchEvent::Added(cm) => seen.push(("ADDED", cm.metadata.name.unwrap())),
            WatchEvent::Modified(cm) => seen.push(("MODIFIED", cm.metadata.name.unwrap())),
            WatchEvent::Deleted(cm) => {
                last_rv = cm.metadata.resource_version.unwrap().parse().unwrap();
                seen.push(("DELETED", cm.metadata.name.unwrap()));
            }
            WatchEvent::Bookmark(_) => {}
            WatchEvent::Error(e) => panic!("unexpected error {e:?}"),
        }
    }
    assert_eq!(
        seen,
        [
            ("MODIFIED", "a".to_owned()),
            ("ADDED", "b".to_owned()),
            ("DELETED", "a".to_owned())
        ]
    );
    assert_eq!(
        last_rv,
        api.revision(),
        "a DELETED event carries the deletion's revision"
    );
    let started = Instant::now();
    loop {
        if let WatchEvent::Bookmark(bm) = next(&mut stream).await.unwrap() {
            assert_eq!(bm.metadata.resource_version, api.revision().to_string());
            break;
        }
    }
    assert!(started.elapsed() < Duration::from_secs(2));
}

#[tokio::test]
async fn a_too_old_version_gets_410_and_the_watcher_relists_without_missing_a_change() {
    let api = FakeApi::start();
    api.apply(config_map("a", "1"));
    let cms: Api<ConfigMap> = Api::namespaced(api.client().await, "app");
    // The raw watch: one ERROR event with a 410 Expired Status.
    let old = api.revision().to_string();
    api.apply(config_map("a", "2"));
    api.compact();
    let mut raw = cms
        .watch(&WatchParams::default(), &old)
        .await
        .unwrap()
        .boxed();
    match next(&mut raw).await.unwrap() {
        WatchEvent::Error(status) => {
            assert_eq!((status.code, status.reason.as_str()), (410, "Expired"));
            assert!(
                status.message.starts_with("too old resource version"),
                "{}",
                status.message
            );
        }
        other => panic!("expected ERROR, got {other:?}"),
    }
    // kube-runtime's watcher: cut its watch, change and compact while it is away, and it
    // must relist and see the change.
    let mut events = watcher::watcher(cms.clone(), watcher::Config::default().page_size(2))
        .default_backoff()
        .boxed();
    let mut initial = BTreeSet::new();
    loop {
        match next(&mut events).await.unwrap() {
            WEvent::InitApply(cm) => {
                initial.insert(cm.metadata.name.unwrap());
            }
            WEvent::InitDone => break,
            _ => {}
        }
    }
    assert_eq!(initial, BTreeSet::from(["a".to_owned()]));
    api.wait_for_request(
        |r| r.is_watch() && r.resource() == Some("configmaps"),
        PATIENCE,
    )
    .expect("the watcher watches");
    api.set_unreachable(Duration::from_millis(300));
    api.apply(config_map("a", "3"));
    api.apply(config_map("b", "1"));
    api.compact();
    let mut latest = std::collections::BTreeMap::new();
    let deadline = Instant::now() + PATIENCE;
    while latest.len() < 2 || latest.get("a") != Some(&"3".to_owned()) {
        assert!(
            Instant::now() < deadline,
            "the watcher never caught up: {latest:?}"
        );
        match next(&mut events).await {
            Ok(WEvent::InitApply(cm) | WEvent::Apply(cm)) => {
                let value = cm.data.unwrap()["key"].clone();
                latest.insert(cm.metadata.name.unwrap(), value);
            }
            Ok(_) => {}
            Err(_) => {} // the outage and the 410 show up as errors; the watcher goes on
        }
    }
    assert_eq!(
        api.expired_watches(),
        2,
        "the raw watch and the watcher's resumed watch got 410"
    );
    let lists = api
        .requests()
        .iter()
        .filter(|r| r.method == "GET" && !r.is_watch() && r.resource() == Some("configmaps"))
        .count();
    assert!(lists >= 2, "the watcher relisted ({lists} lists)");
}

#[tokio::test]
async fn metadata_only_lists_and_watches() {
    let api = FakeApi::start();
    api.apply(config_map("big", &"x".repeat(10_000)));
    let cms: Api<ConfigMap> = Api::namespaced(api.client().await, "app");
    let list = cms.list_metadata(&ListParams::default()).await.unwrap();
    assert_eq!(list.items.len(), 1);
    assert_eq!(
        list.items[0].types.as_ref().unwrap().kind,
        "PartialObjectMetadata"
    );
    assert_eq!(
        list.items[0].metadata.labels.as_ref().unwrap()["tier"],
        "web"
    );
    let request = api
        .wait_for_request(
            |r| {
                r.accept
                    .as_deref()
                    .is_some_and(|a| a.contains("PartialObjectMetadataList"))
            },
            PATIENCE,
        )
        .unwrap();
    assert_eq!(request.status, 200);
    let meta: PartialObjectMeta<ConfigMap> = cms.get_metadata("big").await.unwrap();
    assert_eq!(meta.metadata.name.as_deref(), Some("big"));

    let metas: Api<PartialObjectMeta<ConfigMap>> = Api::namespaced(api.client().await, "app");
    let mut events = watcher::watcher(metas, watcher::Config::default())
        .applied_objects()
        .boxed();
    let first = next(&mut events).await.unwrap();
    assert_eq!(first.metadata.name.as_deref(), Some("big"));
    api.apply(config_map("big", "small"));
    let second = next(&mut events).await.unwrap();
    assert_eq!(
        second.metadata.resource_version,
        Some(api.revision().to_string())
    );
    // No data travelled: every metadata response was small.
    let raw = reqwest_like_get(
        &api,
        "/api/v1/namespaces/app/configmaps/big",
        "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
    );
    assert!(!raw.contains("\"data\""), "{raw}");
    assert!(raw.contains("\"kind\":\"PartialObjectMetadata\""), "{raw}");
    let raw = reqwest_like_get(
        &api,
        "/api/v1/namespaces/app/configmaps?watch=1&timeoutSeconds=1",
        "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
    );
    assert!(raw.contains("\"type\":\"ADDED\""), "{raw}");
    assert!(
        raw.contains("PartialObjectMetadata") && !raw.contains("small"),
        "{raw}"
    );
}

/// A plain HTTP GET with an Accept header, returning the body.
fn reqwest_like_get(api: &FakeApi, path: &str, accept: &str) -> String {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(api.addr()).unwrap();
    stream.set_read_timeout(Some(PATIENCE)).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: x\r\nAccept: {accept}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    response.split_once("\r\n\r\n").unwrap().1.to_owned()
}

#[tokio::test]
async fn patches_preconditions_and_errors_match_the_api_server() {
    let api = FakeApi::start();
    api.apply(config_map("a", "1"));
    let cms: Api<ConfigMap> = Api::namespaced(api.client().await, "app");
    let pp = PatchParams {
        field_manager: Some("reload-injector".into()),
        ..PatchParams::default()
    };
    // JSON patch whose `test` fails: 422 Invalid, nothing written.
    let before = api.revision();
    let patch: json_patch::Patch = serde_json::from_value(json!([
        {"op": "test", "path": "/data/key", "value": "nope"},
        {"op": "replace", "path": "/data/key", "value": "2"},
    ]))
    .unwrap();
    let err = cms
        .patch("a", &pp, &Patch::Json::<()>(patch))
        .await
        .unwrap_err();
    assert_eq!(api_error(err), (422, "Invalid".to_owned()));
    assert_eq!(api.revision(), before);
    // JSON patch that applies.
    let patch: json_patch::Patch = serde_json::from_value(json!([
        {"op": "test", "path": "/data/key", "value": "1"},
        {"op": "add", "path": "/metadata/annotations", "value": {"x": "y"}},
    ]))
    .unwrap();
    let patched = cms
        .patch("a", &pp, &Patch::Json::<()>(patch))
        .await
        .unwrap();
    assert_eq!(patched.metadata.annotations.unwrap()["x"], "y");
    let managers: Vec<_> = patched
        .metadata
        .managed_fields
        .unwrap()
        .into_iter()
        .filter_map(|f| f.manager)
        .collect();
    assert_eq!(managers, ["reload-injector"]);
    // Merge patch with a stale resourceVersion: 409 Conflict.
    let stale = json!({"metadata": {"resourceVersion": before.to_string()}, "data": {"key": "3"}});
    let err = cms
        .patch("a", &pp, &Patch::Merge(&stale))
        .await
        .unwrap_err();
    assert_eq!(api_error(err), (409, "Conflict".to_owned()));
    let current = patched.metadata.resource_version.unwrap();
    let fresh = json!({"metadata": {"resourceVersion": current}, "data": {"key": "3"}});
    let merged = cms.patch("a", &pp, &Patch::Merge(&fresh)).await.unwrap();
    assert_eq!(merged.data.unwrap()["key"], "3");
    // The same merge again writes nothing, like the API server.
    let same = json!({"data": {"key": "3"}});
    let unchanged = cms.patch("a", &pp, &Patch::Merge(&same)).await.unwrap();
    assert_eq!(
        unchanged.metadata.resource_version,
        merged.metadata.resource_version
    );
    // 404 with a proper Status.
    let err = cms.get("missing").await.unwrap_err();
    assert_eq!(api_error(err), (404, "NotFound".to_owned()));
    // Create twice: 409 AlreadyExists.
    let cm: ConfigMap = serde_json::from_value(config_map("new", "v")).unwrap();
    cms.create(&PostParams::default(), &cm).await.unwrap();
    let err = cms.create(&PostParams::default(), &cm).await.unwrap_err();
    assert_eq!(api_error(err), (409, "AlreadyExists".to_owned()));
}

#[tokio::test]
async fn leases_conflict_events_are_created_and_secrets_fold_string_data() {
    let api = FakeApi::start();
    let client = api.client().await;
    let leases: Api<Lease> = Api::namespaced(client.clone(), "reload-injector");
    let lease: Lease = serde_json::from_value(json!({
        "metadata": {"name": "reload-injector"},
        "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15},
    }))
    .unwrap();
    let created = leases.create(&PostParams::default(), &lease).await.unwrap();
    let mut mine = created.clone();
    mine.spec.as_mut().unwrap().holder_identity = Some("b".into());
    let replaced = leases
        .replace("reload-injector", &PostParams::default(), &mine)
        .await
        .unwrap();
    assert_eq!(replaced.spec.unwrap().holder_identity.as_deref(), Some("b"));
    // The other replica still holds the old version: 409.
    let mut theirs = created;
    theirs.spec.as_mut().unwrap().holder_identity = Some("c".into());
    let err = leases
        .replace("reload-injector", &PostParams::default(), &theirs)
        .await
        .unwrap_err();
    assert_eq!(api_error(err), (409, "Conflict".to_owned()));

    let events: Api<Event> = Api::namespaced(client.clone(), "app");
    let event: Event = serde_json::from_value(json!({
        "metadata": {"generateName": "web."},
        "involvedObject": {"kind": "Deployment", "name": "web", "namespace": "app"},
        "reason": "ConfigChanged", "message": "reload-injector: x", "type": "Normal",
    }))
    .unwrap();
    let created = events.create(&PostParams::default(), &event).await.unwrap();
    assert!(created.metadata.name.unwrap().starts_with("web."));
    assert_eq!(api.list("events").len(), 1);

    api.apply(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "s", "namespace": "app"},
        "stringData": {"password": "hunter2"},
    }));
    let secrets: Api<Secret> = Api::namespaced(client, "app");
    let secret = secrets.get("s").await.unwrap();
    assert_eq!(secret.data.unwrap()["password"].0, b"hunter2");
    assert!(
        api.get("secrets", "app", "s")
            .unwrap()
            .get("stringData")
            .is_none()
    );
}

#[tokio::test]
async fn rollouts_are_served_at_argos_group_and_patched_like_deployments() {
    use kube::api::DynamicObject;
    use kube::discovery::ApiResource;

    let api = FakeApi::start();
    let hash = "reload-injector.io/config-hash";
    api.apply(json!({
        "apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout",
        "metadata": {"name": "web", "namespace": "app"},
        "spec": {"strategy": {"canary": {"steps": [{"setWeight": 20}]}}, "template": {
            "metadata": {"annotations": {hash: "sha256:old"}},
            "spec": {"containers": [{"name": "c", "image": "nginx"}]}}},
    }));
    let resource = ApiResource {
        group: "argoproj.io".into(),
        version: "v1alpha1".into(),
        api_version: "argoproj.io/v1alpha1".into(),
        kind: "Rollout".into(),
        plural: "rollouts".into(),
    };
    let rollouts: Api<DynamicObject> = Api::namespaced_with(api.client().await, "app", &resource);
    let listed = rollouts.list(&ListParams::default()).await.unwrap();
    assert_eq!(listed.items.len(), 1);
    let pointer = "/spec/template/metadata/annotations/reload-injector.io~1config-hash";
    let patch: json_patch::Patch = serde_json::from_value(json!([
        {"op": "test", "path": pointer, "value": "sha256:old"},
        {"op": "replace", "path": pointer, "value": "sha256:new"},
    ]))
    .unwrap();
    let patched = rollouts
        .patch("web", &PatchParams::default(), &Patch::Json::<()>(patch))
        .await
        .unwrap();
    assert_eq!(
        patched.data["spec"]["template"]["metadata"]["annotations"][hash],
        "sha256:new"
    );
    assert_eq!(patched.metadata.generation, Some(2));
    assert_eq!(
        patched.data["spec"]["strategy"]["canary"]["steps"][0]["setWeight"],
        20
    );
}

#[tokio::test]
async fn generation_counts_spec_changes_only() {
    let api = FakeApi::start();
    let deployment = |image: &str, label: &str| {
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "app", "labels": {"l": label}},
            "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "c", "image": image}]}}},
        })
    };
    assert_eq!(api.apply(deployment("a", "1"))["metadata"]["generation"], 1);
    assert_eq!(api.apply(deployment("a", "2"))["metadata"]["generation"], 1);
    assert_eq!(api.apply(deployment("b", "2"))["metadata"]["generation"], 2);
    let deployments: Api<Deployment> = Api::namespaced(api.client().await, "app");
    let patch = json!({"spec": {"template": {"metadata": {"annotations": {"h": "1"}}}}});
    let patched = deployments
        .patch("web", &PatchParams::default(), &Patch::Strategic(&patch))
        .await
        .unwrap();
    assert_eq!(patched.metadata.generation, Some(3));
}

#[tokio::test]
async fn faults_fail_delay_and_cut_the_server() {
    let api = FakeApi::start();
    api.apply(config_map("a", "1"));
    let cms: Api<ConfigMap> = Api::namespaced(api.client().await, "app");
    let patch = json!({"metadata": {"annotations": {"n": "1"}}});
    let pp = PatchParams::default();
    api.fail_next(Matcher::new("PATCH", "configmaps"), 500, 1);
    api.fail_next(Matcher::new("PATCH", "configmaps").name("a"), 409, 1);
    let err = cms
        .patch("a", &pp, &Patch::Merge(&patch))
        .await
        .unwrap_err();
    assert_eq!(api_error(err), (500, "InternalError".to_owned()));
    let err = cms
        .patch("a", &pp, &Patch::Merge(&patch))
        .await
        .unwrap_err();
    assert_eq!(api_error(err), (409, "Conflict".to_owned()));
    cms.patch("a", &pp, &Patch::Merge(&patch))
        .await
        .expect("faults used up");
    // GETs are not PATCHes.
    api.fail_next(Matcher::new("PATCH", "configmaps"), 500, 1);
    cms.get("a").await.expect("a GET does not match");
    api.clear_faults();

    api.delay(
        Matcher::new("GET", "configmaps"),
        Duration::from_millis(300),
    );
    let started = Instant::now();
    cms.get("a").await.unwrap();
    assert!(started.elapsed() >= Duration::from_millis(300));
    api.clear_faults();

    // An outage: open watches are cut, connections refused, then the same port answers.
    let rv = api.revision().to_string();
    let mut watch = cms
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();
    api.set_unreachable(Duration::from_millis(200));
    // A second outage while down extends it.
    api.set_unreachable(Duration::from_millis(500));
    let cut = tokio::time::timeout(PATIENCE, watch.next())
        .await
        .expect("the watch ends");
    assert!(cut.is_none_or(|item| item.is_err()), "the watch was cut");
    assert!(
        std::net::TcpStream::connect(api.addr()).is_err(),
        "connections are refused"
    );
    let deadline = Instant::now() + PATIENCE;
    loop {
        match cms.get("a").await {
            Ok(_) => break,
            Err(_) => assert!(Instant::now() < deadline, "the server came back"),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[test]
fn outages_asked_for_back_to_back_are_each_acknowledged() {
    // Each call returns only once the server has seen it (or panics after 5 s); one asked for
    // right after the previous one's acknowledgement must not be taken in unseen.
    let api = FakeApi::start();
    for _ in 0..300 {
        api.set_unreachable(Duration::from_secs(30));
    }
    assert!(
        std::net::TcpStream::connect(api.addr()).is_err(),
        "connections are refused"
    );
}

#[tokio::test]
async fn requests_are_recorded_with_the_rbac_they_need() {
    let api = FakeApi::start();
    api.apply(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "namespace": "app", "labels": {"reload-injector.io/sidecar": "true"}},
        "spec": {"containers": []},
    }));
    let client = api.client().await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "app");
    let all_cms: Api<ConfigMap> = Api::all(client.clone());
    api.clear_requests();
    pods.get("p").await.unwrap();
    let body = json!({"metadata": {"annotations": {"reload-injector.io/mounted-config-hash": "sha256:1"}}});
    pods.patch("p", &PatchParams::default(), &Patch::Merge(&body))
        .await
        .unwrap();
    all_cms.list_metadata(&ListParams::default()).await.unwrap();
    let mut watch = all_cms
        .watch_metadata(&WatchParams::default().timeout(1), "0")
        .await
        .unwrap()
        .boxed();
    while watch.try_next().await.unwrap().is_some() {}
    let leases: Api<Lease> = Api::namespaced(client, "reload-injector");
    let _ = leases.get("reload-injector").await;

    let needs: Vec<_> = api.requests().iter().filter_map(|r| r.rbac()).collect();
    let tuple = |g: &str, r: &str, v: &str, ns: Option<&str>| {
        (
            g.to_owned(),
            r.to_owned(),
            v.to_owned(),
            ns.map(str::to_owned),
        )
    };
    assert_eq!(
        needs,
        [
            tuple("", "pods", "get", Some("app")),
            tuple("", "pods", "patch", Some("app")),
            tuple("", "configmaps", "list", None),
            tuple("", "configmaps", "watch", None),
            tuple(
                "coordination.k8s.io",
                "leases",
                "get",
                Some("reload-injector")
            ),
        ]
    );
    let patch = api
        .requests()
        .into_iter()
        .find(|r| r.method == "PATCH")
        .unwrap();
    assert_eq!(
        patch.content_type.as_deref(),
        Some("application/merge-patch+json")
    );
    assert_eq!(patch.body_json().unwrap(), body);
    assert!(patch.answered >= patch.received);
    let missing = api
        .requests()
        .into_iter()
        .find(|r| r.resource() == Some("leases"))
        .unwrap();
    assert_eq!(missing.status, 404);
}

#[tokio::test]
async fn the_fake_kubelet_rewrites_on_a_pod_update_only() {
    let api = FakeApi::start();
    api.apply(config_map("conf", "one"));
    api.apply(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "namespace": "app"},
        "spec": {"containers": []},
    }));
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("fake-kubelet-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let volume = dir.join("conf");
    let kubelet = FakeKubelet::start(
        &api,
        "app",
        "p",
        vec![("conf".into(), ConfigKind::ConfigMap, volume.clone())],
    );
    assert_eq!(
        fake_kube_api::kubelet::read(&volume, "key").as_deref(),
        Some("one")
    );
    assert!(
        std::fs::read_link(volume.join("..data")).is_ok(),
        "AtomicWriter layout"
    );

    api.apply(config_map("conf", "two"));
    std::thread::sleep(Duration::from_millis(400));
    assert_eq!(
        fake_kube_api::kubelet::read(&volume, "key").as_deref(),
        Some("one"),
        "no resync without a pod update"
    );
    assert_eq!(kubelet.rewrites().len(), 1);

    let pods: Api<Pod> = Api::namespaced(api.client().await, "app");
    let body = json!({"metadata": {"annotations": {"reload-injector.io/mounted-config-hash": "sha256:2"}}});
    pods.patch("p", &PatchParams::default(), &Patch::Merge(&body))
        .await
        .unwrap();
    let rewrite = kubelet
        .wait_for_rewrite(1, PATIENCE)
        .expect("rewritten after the pod update");
    assert_eq!(rewrite.trigger, Trigger::PodUpdate);
    assert_eq!(
        fake_kube_api::kubelet::read(&volume, "key").as_deref(),
        Some("two")
    );

    // The same data on another pod update: nothing to rewrite.
    let body = json!({"metadata": {"annotations": {"other": "x"}}});
    pods.patch("p", &PatchParams::default(), &Patch::Merge(&body))
        .await
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(kubelet.rewrites().len(), 2);

    // With a periodic sync, a change arrives without a pod update.
    let kubelet = kubelet.with_periodic_sync(Duration::from_millis(100));
    api.apply(config_map("conf", "three"));
    let rewrite = kubelet
        .wait_for_rewrite(2, PATIENCE)
        .expect("periodic rewrite");
    assert_eq!(rewrite.trigger, Trigger::Periodic);
    assert_eq!(
        fake_kube_api::kubelet::read(&volume, "key").as_deref(),
        Some("three")
    );
    drop(kubelet);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn recorded_needs_are_held_against_the_rbac_manifest() {
    let api = FakeApi::start();
    api.apply(config_map("a", "1"));
    let client = api.client().await;
    let cms: Api<ConfigMap> = Api::all(client.clone());
    cms.list_metadata(&ListParams::default()).await.unwrap();
    Api::<ConfigMap>::namespaced(client.clone(), "app")
        .get("a")
        .await
        .unwrap();
    // The fixture's role never deletes a Deployment.
    let deployments: Api<Deployment> = Api::namespaced(client, "app");
    let _ = deployments.delete("web", &Default::default()).await;
    let needs: Vec<_> = api.requests().iter().filter_map(|r| r.rbac()).collect();

    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/rbac.yaml");
    let rbac = Rbac::from_yaml_file(&path, "ops");
    assert!(rbac.allows(&(
        "".into(),
        "configmaps".into(),
        "watch".into(),
        Some("x".into())
    )));
    let missing = rbac.missing(&needs);
    assert!(
        missing.contains(&(
            "apps".into(),
            "deployments".into(),
            "delete".into(),
            Some("app".into())
        )),
        "{missing:?}"
    );
    assert!(
        !missing.iter().any(|(_, r, _, _)| r == "configmaps"),
        "{missing:?}"
    );
    let unused = rbac.unused(&needs);
    assert!(unused.contains(&Grant {
        api_group: "".into(),
        resource: "secrets".into(),
        verb: "get".into(),
        namespace: None,
    }));
    assert!(
        !unused
            .iter()
            .any(|g| g.resource == "configmaps" && g.verb != "watch"),
        "{unused:?}"
    );

    // A Role grants only in its namespace.
    let role: Vec<Value> = serde_saphyr::from_multiple(
        "kind: Role\nmetadata: {name: r}\nrules:\n- apiGroups: [coordination.k8s.io]\n  resources: [leases]\n  verbs: [get]\n",
    )
    .unwrap();
    let rbac = Rbac::from_documents(&role, "reload-injector");
    let need = |ns: &str| {
        (
            "coordination.k8s.io".to_owned(),
            "leases".to_owned(),
            "get".to_owned(),
            Some(ns.to_owned()),
        )
    };
    assert!(rbac.allows(&need("reload-injector")));
    assert!(!rbac.allows(&need("other")));
}

#[tokio::test]
async fn streaming_lists_and_label_selector_transitions() {
    let api = FakeApi::start();
    let pod = |name: &str, sidecar: Option<&str>| {
        let labels = sidecar.map_or(json!({}), |v| json!({"reload-injector.io/sidecar": v}));
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "app", "labels": labels},
            "spec": {"containers": []}})
    };
    api.apply(pod("with", Some("true")));
    api.apply(pod("without", None));
    let pods: Api<Pod> = Api::all(api.client().await);
    let config = watcher::Config::default()
        .labels("reload-injector.io/sidecar=true")
        .streaming_lists();
    let mut events = watcher::watcher(pods, config).boxed();
    let mut initial = Vec::new();
    loop {
        match next(&mut events).await.unwrap() {
            WEvent::InitApply(p) => initial.push(p.metadata.name.unwrap()),
            WEvent::InitDone => break,
            _ => {}
        }
    }
    assert_eq!(initial, ["with"]);
    let watch = api
        .wait_for_request(|r| r.is_watch(), PATIENCE)
        .expect("one watch");
    assert_eq!(
        watch.query_param("sendInitialEvents").as_deref(),
        Some("true")
    );
    assert!(
        !api.requests()
            .iter()
            .any(|r| r.method == "GET" && !r.is_watch()),
        "a streaming list needs no LIST"
    );
    // Losing the label is a DELETED for this watch; gaining it an ADDED.
    api.apply(pod("with", Some("false")));
    match next(&mut events).await.unwrap() {
        WEvent::Delete(p) => assert_eq!(p.metadata.name.as_deref(), Some("with")),
        other => panic!("expected a delete, got {other:?}"),
    }
    api.apply(pod("without", Some("true")));
    match next(&mut events).await.unwrap() {
        WEvent::Apply(p) => assert_eq!(p.metadata.name.as_deref(), Some("without")),
        other => panic!("expected an apply, got {other:?}"),
    }
}

#[tokio::test]
async fn kube_runtime_event_recorder_creates_then_patches_a_series() {
    use k8s_openapi::api::core::v1::ObjectReference;
    use kube::runtime::events::{Event as Note, EventType, Recorder, Reporter};
    let api = FakeApi::start();
    let reporter = Reporter {
        controller: "reload-injector".into(),
        instance: Some("pod-0".into()),
    };
    let recorder = Recorder::new(api.client().await, reporter);
    let reference = ObjectReference {
        api_version: Some("apps/v1".into()),
        kind: Some("Deployment".into()),
        name: Some("web".into()),
        namespace: Some("app".into()),
        uid: Some("u".into()),
        ..ObjectReference::default()
    };
    let note = Note {
        type_: EventType::Normal,
        reason: "ConfigChanged".into(),
        note: Some("reload-injector: ConfigMap app/conf key changed".into()),
        action: "Rollout".into(),
        secondary: None,
    };
    recorder.publish(&note, &reference).await.expect("create");
    recorder
        .publish(&note, &reference)
        .await
        .expect("patch the series");
    let events = api.list("events.events.k8s.io");
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["reason"], "ConfigChanged");
    let needs: BTreeSet<_> = api.requests().iter().filter_map(|r| r.rbac()).collect();
    let need = |verb: &str| {
        (
            "events.k8s.io".to_owned(),
            "events".to_owned(),
            verb.to_owned(),
            Some("app".to_owned()),
        )
    };
    assert_eq!(needs, BTreeSet::from([need("create"), need("patch")]));
}

#[test]
fn the_store_keeps_snapshots_until_compacted_and_trims_its_history() {
    use fake_kube_api::resources;
    use fake_kube_api::store::Store;
    let configmaps = resources::by_name("configmaps").unwrap();
    let object = |value: &str| {
        json!({"metadata": {"name": "a", "namespace": "app"}, "data": {"k": value}})
            .as_object()
            .unwrap()
            .clone()
    };
    let mut store = Store::new(3);
    let first = store
        .put(configmaps, "app", "a", object("1"), Instant::now())
        .rv;
    let second = store
        .put(configmaps, "app", "a", object("2"), Instant::now())
        .rv;
    let read = |store: &Store, at: u64| {
        store
            .list(configmaps, Some("app"), at, None, None, &|_| true)
            .map(|(items, _)| {
                items
                    .iter()
                    .map(|s| s.value()["data"]["k"].clone())
                    .collect::<Vec<_>>()
            })
    };
    assert_eq!(read(&store, first).unwrap(), [json!("1")]);
    assert_eq!(read(&store, second).unwrap(), [json!("2")]);
    store
        .delete(configmaps, "app", "a", Instant::now())
        .unwrap();
    assert!(read(&store, store.revision()).unwrap().is_empty());
    assert_eq!(
        read(&store, second).unwrap(),
        [json!("2")],
        "a deleted object stays in old snapshots"
    );
    assert_eq!(store.changes_after(first, 10).unwrap().len(), 2);
    // Past the history limit, the oldest changes go and reading them is Expired.
    for i in 0..5 {
        store.put(
            configmaps,
            "app",
            &format!("n{i}"),
            object("x"),
            Instant::now(),
        );
    }
    assert!(store.changes_after(first, 10).is_err());
    assert!(read(&store, first).is_err());
    let latest = store.revision();
    assert!(store.changes_after(latest - 3, 10).unwrap().len() == 3);
    store.compact();
    assert!(store.changes_after(latest - 1, 10).is_err());
    assert_eq!(store.changes_after(latest, 10).unwrap().len(), 0);
    assert_eq!(read(&store, latest).unwrap().len(), 5);
}

#[tokio::test]
async fn server_side_apply_creates_then_merges() {
    let api = FakeApi::start();
    let leases: Api<Lease> = Api::namespaced(api.client().await, "reload-injector");
    let apply = |holder: &str| {
        json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "reload-injector"},
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15}})
    };
    let pp = PatchParams::apply("reload-injector").force();
    let created = leases
        .patch("reload-injector", &pp, &Patch::Apply(apply("a")))
        .await
        .unwrap();
    assert_eq!(created.spec.unwrap().holder_identity.as_deref(), Some("a"));
    let updated = leases
        .patch("reload-injector", &pp, &Patch::Apply(apply("b")))
        .await
        .unwrap();
    assert_eq!(updated.spec.unwrap().holder_identity.as_deref(), Some("b"));
    assert_eq!(
        api.requests().iter().map(|r| r.status).collect::<Vec<_>>(),
        [201, 200]
    );
}

#[test]
fn selectors_label_forms() {
    let meta = json!({"labels": {"a": "1", "b": "2"}});
    for (text, expected) in [
        ("a=1", true),
        ("a==1", true),
        ("a!=1", false),
        ("a", true),
        ("!a", false),
        ("!c", true),
        ("a=1,b=2", true),
        ("a=1,b=3", false),
        ("a in (1,3)", true),
        ("a notin (1,3)", false),
        ("c notin (1)", true),
        ("", true),
    ] {
        assert_eq!(
            fake_kube_api::selectors::LabelSelector::parse(text)
                .unwrap()
                .matches(&meta),
            expected,
            "{text}"
        );
    }
    assert!(fake_kube_api::selectors::LabelSelector::parse("a in 1").is_err());
}

#[test]
fn selectors_field_forms() {
    let s = fake_kube_api::selectors::FieldSelector::parse("metadata.name=x,metadata.namespace!=y")
        .unwrap();
    assert!(s.matches("z", "x"));
    assert!(!s.matches("y", "x"));
    assert_eq!(
        fake_kube_api::selectors::FieldSelector::parse("spec.nodeName=n"),
        Err(fake_kube_api::selectors::SelectorError::UnsupportedField(
            "spec.nodeName".into()
        ))
    );
}

#[tokio::test]
async fn pod_logs_are_served_like_the_api_server_and_recorded_as_pods_log() {
    let api = FakeApi::start();
    api.apply(json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web", "namespace": "app"},
        "spec": {"containers": [{"name": "app"}, {"name": "proxy"}],
                 "initContainers": [{"name": "config-reloader", "restartPolicy": "Always"}]}}));
    api.apply(json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "solo", "namespace": "app"},
        "spec": {"containers": [{"name": "only"}]}}));
    api.set_log("app", "web", "config-reloader", "one\ntwo\nthree\n");
    api.set_log("app", "solo", "only", "alone\n");
    let client = api.client().await;
    let pods: Api<Pod> = Api::namespaced(client, "app");
    let params = |container: Option<&str>, tail: Option<i64>| kube::api::LogParams {
        container: container.map(str::to_owned),
        tail_lines: tail,
        ..kube::api::LogParams::default()
    };
    let all = pods
        .logs("web", &params(Some("config-reloader"), None))
        .await
        .unwrap();
    assert_eq!(all, "one\ntwo\nthree\n");
    let tail = pods
        .logs("web", &params(Some("config-reloader"), Some(2)))
        .await
        .unwrap();
    assert_eq!(tail, "two\nthree\n");
    assert_eq!(
        pods.logs("solo", &params(None, None)).await.unwrap(),
        "alone\n"
    );
    assert_eq!(
        pods.logs("web", &params(Some("app"), None)).await.unwrap(),
        ""
    );
    let (code, _) = api_error(pods.logs("web", &params(None, None)).await.unwrap_err());
    assert_eq!(code, 400, "several containers and none named");
    let (code, _) = api_error(
        pods.logs("web", &params(Some("nope"), None))
            .await
            .unwrap_err(),
    );
    assert_eq!(code, 400, "a container the pod does not have");
    let (code, _) = api_error(
        pods.logs("gone", &params(Some("x"), None))
            .await
            .unwrap_err(),
    );
    assert_eq!(code, 404);
    let needs: BTreeSet<_> = api.requests().iter().filter_map(|r| r.rbac()).collect();
    assert!(needs.contains(&(
        String::new(),
        "pods/log".to_owned(),
        "get".to_owned(),
        Some("app".to_owned())
    )));
    assert_eq!(needs.len(), 1, "{needs:?}");
}

#[tokio::test]
async fn mutating_webhook_configurations_are_cluster_scoped() {
    use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
    let api = FakeApi::start();
    api.apply(json!({"apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration", "metadata": {"name": "reload-injector"},
        "webhooks": []}));
    let configs: Api<MutatingWebhookConfiguration> = Api::all(api.client().await);
    let got = configs.get("reload-injector").await.unwrap();
    assert_eq!(got.metadata.name.as_deref(), Some("reload-injector"));
    assert_eq!(
        configs
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len(),
        1
    );
    assert_eq!(api_error(configs.get("other").await.unwrap_err()).0, 404);
}
