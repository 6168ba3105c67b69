//! ConfigMap/Secret lookups through kube-rs against a mock API server (tower-test): found,
//! not found, API erroring, API hanging (answered within the bound), and the cache.

use crate::webhook_support;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::body::{Body as AxumBody, to_bytes};
use http::{Request, Response, StatusCode};
use kube::client::Body;
use reload_injector::controller::config_store::{
    ConfigKey, ConfigStore, Fetched, Meta, StoreReader, StoreWriter,
};
use reload_injector::hash::{
    ConfigData, ConfigId, ConfigObject, Consumed, Lookup, SecretKey, config_hash,
};
use reload_injector::webhook::lookup::{CacheConfig, Lookups};
use reload_injector::webhook::webhook_metrics::Metrics;
use reload_injector::webhook::{AppState, app};
use serde_json::{Value, json};
use tokio::sync::Mutex;
use tower::ServiceExt;
use webhook_support::{apply_patch, check_answer, pod_review, settings};

/// How the mock API answers a GET.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Api {
    /// 200 with the object for known names, 404 otherwise.
    Serve,
    /// 500 Internal Server Error.
    Fail,
    /// Never answers.
    Hang,
}

struct MockApi {
    calls: Arc<AtomicUsize>,
    mode: Arc<Mutex<Api>>,
    /// Value of ConfigMap `web-settings` key `upstream`.
    upstream: Arc<Mutex<String>>,
}

fn status(code: u16, reason: &str, message: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": reason, "code": code
    }))
    .unwrap()
}

/// A kube client whose requests are answered by a task following `MockApi`.
fn mock_client() -> (kube::Client, MockApi) {
    let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let api = MockApi {
        calls: Arc::new(AtomicUsize::new(0)),
        mode: Arc::new(Mutex::new(Api::Serve)),
        upstream: Arc::new(Mutex::new("http://backend:8080".into())),
    };
    let (calls, mode, upstream) = (api.calls.clone(), api.mode.clone(), api.upstream.clone());
    tokio::spawn(async move {
        let mut hanging = Vec::new();
        while let Some((req, send)) = handle.next_request().await {
            calls.fetch_add(1, Ordering::SeqCst);
            let path = req.uri().path().to_owned();
            let (code, body) = match *mode.lock().await {
                Api::Hang => {
                    hanging.push(send);
                    continue;
                }
                Api::Fail => (
                    500,
                    status(500, "InternalError", "etcdserver: request timed out"),
                ),
                Api::Serve => match path.as_str() {
                    "/api/v1/namespaces/shop/configmaps/web-settings" => (
                        200,
                        serde_json::to_vec(&json!({
                            "apiVersion": "v1", "kind": "ConfigMap",
                            "metadata": {"name": "web-settings", "namespace": "shop"},
                            "data": {"upstream": *upstream.lock().await, "unused": "x"}
                        }))
                        .unwrap(),
                    ),
                    "/api/v1/namespaces/shop/secrets/db" => (
                        200,
                        serde_json::to_vec(&json!({
                            "apiVersion": "v1", "kind": "Secret",
                            "metadata": {"name": "db", "namespace": "shop"},
                            "data": {"password": "aHVudGVyMg=="}
                        }))
                        .unwrap(),
                    ),
                    _ => (404, status(404, "NotFound", "not found")),
                },
            };
            let resp = Response::builder()
                .status(code)
                .header("content-type", "application/json")
                .body(Body::from(body))
                .unwrap();
            send.send_response(resp);
        }
    });
    (kube::Client::new(service, "default"), api)
}

fn lookups(client: kube::Client, ttl: Duration, timeout: Duration) -> (Lookups, Metrics) {
    let metrics = Metrics::new();
    let config = CacheConfig {
        ttl,
        timeout,
        max_entries: 100,
        request_timeout: Duration::from_secs(1),
    };
    let lookups = Lookups::new(Some(client), Some(test_key()), config, metrics.clone());
    (lookups, metrics)
}

fn refs(ids: &[ConfigId]) -> BTreeSet<ConfigId> {
    ids.iter().cloned().collect()
}

fn one(id: &ConfigId) -> BTreeSet<ConfigId> {
    BTreeSet::from([id.clone()])
}

fn test_key() -> SecretKey {
    SecretKey::new(b"lookup-test-key").expect("non-empty key")
}

/// Whether the lookup of `id` holds `value` at `key` (as its digest: values are never kept).
fn holds(data: &ConfigData, id: &ConfigId, key: &str, value: &[u8]) -> bool {
    let want = ConfigObject::from_values(id, [(key, value)], Some(&test_key())).expect("reduced");
    match data.get(id) {
        Some(Lookup::Found(object)) => object.digests.get(key) == want.digests.get(key),
        other => panic!("{id}: expected found, got {other:?}"),
    }
}

#[tokio::test]
async fn found_config_map_and_secret_and_not_found() {
    let (client, api) = mock_client();
    let (lookups, _) = lookups(client, Duration::from_secs(30), Duration::from_secs(5));
    let (cm, secret, absent) = (
        ConfigId::config_map("web-settings"),
        ConfigId::secret("db"),
        ConfigId::config_map("absent"),
    );
    let data = lookups
        .fetch("shop", &refs(&[cm.clone(), secret.clone(), absent.clone()]))
        .await;
    assert!(holds(&data, &cm, "upstream", b"http://backend:8080"));
    assert!(holds(&data, &secret, "password", b"hunter2"));
    assert_eq!(data.get(&absent), Some(&Lookup::NotFound));
    assert_eq!(api.calls.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn cache_hit_makes_no_api_call_and_stale_entries_refresh_in_the_background() {
    let (client, api) = mock_client();
    let (fresh, _) = lookups(
        client.clone(),
        Duration::from_secs(30),
        Duration::from_secs(5),
    );
    let id = ConfigId::config_map("web-settings");
    fresh.fetch("shop", &one(&id)).await;
    fresh.fetch("shop", &one(&id)).await;
    assert_eq!(
        api.calls.load(Ordering::SeqCst),
        1,
        "second fetch went to the API"
    );
    // Another namespace is another object.
    fresh.fetch("other", &one(&id)).await;
    assert_eq!(api.calls.load(Ordering::SeqCst), 2);

    // TTL zero: every hit is stale; it is served at once and refreshed behind the scenes.
    let (stale, _) = lookups(client, Duration::ZERO, Duration::from_secs(5));
    let first = stale.fetch("shop", &one(&id)).await;
    assert!(holds(&first, &id, "upstream", b"http://backend:8080"));
    *api.upstream.lock().await = "http://backend-v2:8080".into();
    *api.mode.lock().await = Api::Hang;
    let started = Instant::now();
    let second = stale.fetch("shop", &one(&id)).await;
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "a stale hit waited on the API"
    );
    assert!(holds(&second, &id, "upstream", b"http://backend:8080"));
    // The refresh reached the API, which hangs; it gives up after the request timeout (1 s)
    // and a later stale hit asks again.
    let deadline = Instant::now() + Duration::from_secs(10);
    while api.calls.load(Ordering::SeqCst) < 4 {
        assert!(Instant::now() < deadline, "no background refresh");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    *api.mode.lock().await = Api::Serve;
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let data = stale.fetch("shop", &one(&id)).await;
        if holds(&data, &id, "upstream", b"http://backend-v2:8080") {
            break;
        }
        assert!(Instant::now() < deadline, "never refreshed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn api_errors_become_failed_lookups_and_are_not_cached() {
    let (client, api) = mock_client();
    *api.mode.lock().await = Api::Fail;
    let (lookups, metrics) = lookups(client, Duration::from_secs(30), Duration::from_secs(5));
    let id = ConfigId::config_map("web-settings");
    let data = lookups.fetch("shop", &one(&id)).await;
    match data.get(&id) {
        Some(Lookup::Failed(reason)) => assert_eq!(reason, "API error 500 InternalError"),
        other => panic!("expected failed, got {other:?}"),
    }
    assert!(
        metrics
            .render()
            .contains("reload_injector_hash_lookup_failures_total 1")
    );
    assert_eq!(lookups.cached(), 0);
    *api.mode.lock().await = Api::Serve;
    let data = lookups.fetch("shop", &one(&id)).await;
    assert!(matches!(data.get(&id), Some(Lookup::Found(_))));
}

#[tokio::test]
async fn hanging_api_is_cut_off_at_the_lookup_timeout() {
    let (client, api) = mock_client();
    *api.mode.lock().await = Api::Hang;
    let (lookups, _) = lookups(client, Duration::from_secs(30), Duration::from_millis(300));
    let ids = [ConfigId::config_map("web-settings"), ConfigId::secret("db")];
    let started = Instant::now();
    let data = lookups.fetch("shop", &refs(&ids)).await;
    // Both were asked in parallel and the whole fetch was bounded by one timeout.
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    for id in &ids {
        match data.get(id) {
            Some(Lookup::Failed(reason)) => {
                assert_eq!(reason, "API timed out after 300ms")
            }
            other => panic!("expected failed, got {other:?}"),
        }
    }
    assert_eq!(api.calls.load(Ordering::SeqCst), 2);
}

async fn review_through(state: AppState, review: &Value) -> Value {
    let req = Request::post("/mutate")
        .header("content-type", "application/json")
        .body(AxumBody::from(serde_json::to_vec(review).unwrap()))
        .unwrap();
    let resp = app(state).oneshot(req).await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    serde_json::from_slice(&to_bytes(resp.into_body(), 1 << 20).await.unwrap()).unwrap()
}

#[tokio::test]
async fn review_stamps_the_hash_when_the_api_answers_and_warns_when_it_hangs() {
    let (client, api) = mock_client();
    let (ok_lookups, metrics) = lookups(
        client.clone(),
        Duration::from_secs(30),
        Duration::from_secs(5),
    );
    let state = AppState::new(settings(), ok_lookups, metrics);
    let review = pod_review("uid-hashed");
    let answer = review_through(state, &review).await;
    let response = check_answer(&answer, "uid-hashed");
    let patched = apply_patch(&response, &review["request"]["object"]);
    let hash = patched["metadata"]["annotations"]["reload-injector.io/config-hash"]
        .as_str()
        .unwrap_or_else(|| panic!("no hash in {patched}"));
    assert!(hash.starts_with("sha256:"), "{hash}");
    assert!(!response.to_string().contains("could not"), "{response}");

    *api.mode.lock().await = Api::Hang;
    let (slow_lookups, metrics) =
        lookups(client, Duration::from_secs(30), Duration::from_millis(300));
    let state = AppState::new(settings(), slow_lookups, metrics);
    let started = Instant::now();
    let answer = review_through(state, &pod_review("uid-slow")).await;
    assert!(started.elapsed() < Duration::from_secs(5));
    let response = check_answer(&answer, "uid-slow");
    assert_eq!(response["allowed"], true);
    let warnings = response["warnings"].to_string();
    assert!(
        warnings.contains(r#"container \"nginx\": could not read ConfigMap \"web-settings\" (API timed out after 300ms); hash unchanged"#),
        "{warnings}"
    );
    let patched = apply_patch(&response, &review["request"]["object"]);
    assert!(
        patched["metadata"]["annotations"]
            .get("reload-injector.io/config-hash")
            .is_none(),
        "a hash was stamped without the data: {patched}"
    );
}

#[tokio::test]
async fn unreachable_api_becomes_a_failed_lookup() {
    // A real client pointed at a loopback port nobody listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let config = kube::Config::new(format!("http://127.0.0.1:{port}").parse().unwrap());
    let client = kube::Client::try_from(config).unwrap();
    let (lookups, metrics) = lookups(client, Duration::from_secs(30), Duration::from_secs(5));
    let id = ConfigId::config_map("web-settings");
    let data = lookups.fetch("shop", &one(&id)).await;
    assert_eq!(
        data.get(&id),
        Some(&Lookup::Failed("API unreachable".to_owned()))
    );
    assert!(
        metrics
            .render()
            .contains("reload_injector_hash_lookup_failures_total 1")
    );
}

#[tokio::test]
async fn optional_absent_config_hashes_as_absent_and_required_absent_warns() {
    let (client, _api) = mock_client();
    for (optional, warns) in [(true, false), (false, true)] {
        let (lookups, metrics) = lookups(
            client.clone(),
            Duration::from_secs(30),
            Duration::from_secs(5),
        );
        let state = AppState::new(settings(), lookups, metrics);
        let mut review = pod_review("uid-absent");
        review["request"]["object"]["spec"]["containers"][0]["env"][0]["valueFrom"] =
            json!({"configMapKeyRef": {"name": "absent", "key": "k", "optional": optional}});
        let answer = review_through(state, &review).await;
        let response = check_answer(&answer, "uid-absent");
        let patched = apply_patch(&response, &review["request"]["object"]);
        let hash = &patched["metadata"]["annotations"]["reload-injector.io/config-hash"];
        assert!(
            hash.as_str().is_some_and(|h| h.starts_with("sha256:")),
            "{patched}"
        );
        let warnings = response["warnings"].to_string();
        assert_eq!(
            warnings.contains("does not exist"),
            warns,
            "optional={optional}: {warnings}"
        );
    }
}

#[tokio::test]
async fn concurrent_reviews_share_one_api_request_per_object() {
    let (client, api) = mock_client();
    *api.mode.lock().await = Api::Hang;
    let (lookups, _) = lookups(client, Duration::from_secs(30), Duration::from_millis(300));
    let id = ConfigId::config_map("web-settings");
    let fetches: Vec<_> = (0..8)
        .map(|_| {
            let (lookups, id) = (lookups.clone(), id.clone());
            tokio::spawn(async move { lookups.fetch("shop", &one(&id)).await })
        })
        .collect();
    for fetch in fetches {
        let data = fetch.await.unwrap();
        assert!(matches!(data.get(&id), Some(Lookup::Failed(_))));
    }
    assert_eq!(api.calls.load(Ordering::SeqCst), 1);
}

/// A Deployment UPDATE in `shop` whose template reads `web-settings`/`upstream` through env and
/// carries `hash` (the controller's own PATCH, as the API server sends it for review; the
/// controller writes only to workloads the webhook labelled managed).
fn update_review(uid: &str, old_hash: &str, hash: &str) -> Value {
    let deployment = |hash: &str| {
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "shop",
                "labels": {"reload-injector.io/managed": "true"}},
            "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": {
                "metadata": {"labels": {"app": "web"}, "annotations": {"reload-injector.io/config-hash": hash}},
                "spec": {"containers": [{"name": "app", "image": "x", "env": [
                    {"name": "UPSTREAM", "valueFrom": {"configMapKeyRef": {"name": "web-settings", "key": "upstream"}}}
                ]}]}
            }}
        })
    };
    json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": uid, "kind": {"group": "apps", "version": "v1", "kind": "Deployment"},
            "resource": {"group": "apps", "version": "v1", "resource": "deployments"},
            "namespace": "shop", "operation": "UPDATE",
            "object": deployment(hash), "oldObject": deployment(old_hash)
        }
    })
}

/// The `config-hash` of a template reading `web-settings`/`upstream` = `upstream`.
fn hash_for(upstream: &str) -> String {
    let id = ConfigId::config_map("web-settings");
    let values = [("upstream", upstream.as_bytes()), ("unused", b"x")];
    let mut data = ConfigData::new();
    data.insert(
        id.clone(),
        Lookup::Found(ConfigObject::from_values(&id, values, None).unwrap()),
    );
    let consumed = BTreeSet::from([Consumed::Key(id, "upstream".into())]);
    config_hash(&consumed, &BTreeSet::new(), &data, None)
        .hash
        .unwrap()
}

/// A synced view holding `web-settings` with `upstream` = `upstream`, as the watch last saw it.
fn view_with(upstream: &str) -> StoreReader {
    let key = ConfigKey {
        namespace: "shop".into(),
        id: ConfigId::config_map("web-settings"),
    };
    let values = [("upstream", upstream.as_bytes()), ("unused", b"x")];
    let mut store = ConfigStore::default();
    let meta = Meta {
        resource_version: "1".into(),
        ignore: false,
        matched: false,
    };
    store.set_meta(key.clone(), meta);
    let fetched = Fetched {
        resource_version: Some("1".into()),
        object: ConfigObject::from_values(&key.id, values, None).map(Into::into),
        sent: 1,
    };
    store.set_fetched(key, fetched);
    store.set_synced(true);
    StoreWriter::new(store).reader()
}

#[tokio::test]
async fn a_replica_whose_view_lags_never_undoes_the_controllers_newer_hash() {
    let (client, api) = mock_client();
    *api.upstream.lock().await = "http://backend-v2:8080".into();
    let (old, new) = (
        hash_for("http://backend:8080"),
        hash_for("http://backend-v2:8080"),
    );
    // This replica's view still holds the old data; the API (and the controller) the new.
    let (lagging, metrics) = lookups(client, Duration::from_secs(30), Duration::from_secs(5));
    lagging.set_view(view_with("http://backend:8080"));
    let state = AppState::new(settings(), lagging, metrics);
    let answer = review_through(state, &update_review("uid-race", &old, &new)).await;
    let response = check_answer(&answer, "uid-race");
    assert_eq!(response["allowed"], true);
    assert!(
        response.get("patch").is_none(),
        "the newer hash was undone: {response}"
    );
    assert_eq!(
        api.calls.load(Ordering::SeqCst),
        1,
        "the disagreement was settled by one fresh read"
    );

    // A view that agrees with the hash answers alone: no API call.
    let (client, api) = mock_client();
    let (current, metrics) = lookups(client, Duration::from_secs(30), Duration::from_secs(5));
    current.set_view(view_with("http://backend-v2:8080"));
    let state = AppState::new(settings(), current, metrics);
    let answer = review_through(state, &update_review("uid-agree", &old, &new)).await;
    assert!(check_answer(&answer, "uid-agree").get("patch").is_none());
    assert_eq!(
        api.calls.load(Ordering::SeqCst),
        0,
        "answered from the view"
    );
}
