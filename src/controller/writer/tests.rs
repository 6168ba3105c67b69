//! The writer against a tower-test mock API: exact requests, outcomes, retries, rate, dedupe
//! and leadership. Time is paused, so delays are measured on tokio's clock.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use super::*;
use crate::controller::mock_api;

/// One request the mock API received.
#[derive(Debug, Clone)]
struct Seen {
    method: String,
    path: String,
    query: String,
    content_type: String,
    body: Value,
    at: Instant,
}

impl Seen {
    fn is_patch(&self) -> bool {
        self.method == "PATCH"
    }

    /// A Pod's second nudge: a merge patch of `mounted-config-refreshed` alone.
    fn is_second_nudge(&self) -> bool {
        self.is_patch()
            && self
                .body
                .pointer("/metadata/annotations")
                .and_then(Value::as_object)
                .is_some_and(|a| {
                    a.len() == 1 && a.contains_key(crate::workload::MOUNTED_CONFIG_REFRESHED)
                })
    }

    /// The name of the object, last in the path.
    fn name(&self) -> &str {
        self.path.rsplit('/').next().unwrap()
    }

    fn field_manager(&self) -> Option<&str> {
        self.query
            .split('&')
            .find_map(|pair| pair.strip_prefix("fieldManager="))
    }
}

/// Picks the status a request is answered with (`None`: it is never answered).
type Answer = Box<dyn FnMut(&Seen) -> Option<u16> + Send>;

/// A client whose requests are recorded and answered with the status `answer` picks (on 2xx
/// the request body, or for a PATCH a minimal object).
fn mock(mut answer: Answer) -> (kube::Client, Arc<Mutex<Vec<Seen>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    let client = mock_api::client(move |parts, body| {
        let request = Seen {
            method: parts.method.to_string(),
            path: parts.uri.path().to_owned(),
            query: parts.uri.query().unwrap_or_default().to_owned(),
            content_type: parts
                .headers
                .get("content-type")
                .map(|v| v.to_str().unwrap().to_owned())
                .unwrap_or_default(),
            body,
            at: Instant::now(),
        };
        let code = answer(&request);
        let reply = match code {
            Some(code) if code >= 300 => mock_api::status(code, "Test"),
            _ if request.is_patch() => {
                json!({"apiVersion": "v1", "kind": "Object", "metadata": {"name": request.name()}})
            }
            _ => request.body.clone(),
        };
        record.lock().unwrap().push(request);
        code.map(|code| (code, reply))
    });
    (client, seen)
}

fn always(code: u16) -> Answer {
    Box::new(move |_| Some(code))
}

/// PATCHes answered from `codes` in turn (then 200); everything else 201.
fn patches(codes: &[u16]) -> Answer {
    let mut codes: VecDeque<u16> = codes.iter().copied().collect();
    Box::new(move |seen| {
        Some(if seen.is_patch() {
            codes.pop_front().unwrap_or(200)
        } else {
            201
        })
    })
}

struct Harness {
    writer: Writer,
    seen: Arc<Mutex<Vec<Seen>>>,
    outcomes: mpsc::UnboundedReceiver<Outcome>,
    leader: watch::Sender<bool>,
    /// The kinds counted as written.
    counted: Arc<Mutex<Vec<TargetKind>>>,
    /// The writes held, as last said.
    held: Arc<AtomicUsize>,
}

impl Harness {
    /// Submits the write of `name`'s hash from `expected` to `desired`.
    fn submit(&self, kind: TargetKind, name: &str, expected: Option<&str>, desired: &str) {
        self.writer.submit(write(kind, name, expected, desired));
    }

    fn requests(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    fn patches(&self) -> Vec<Seen> {
        self.requests().into_iter().filter(Seen::is_patch).collect()
    }

    /// The PATCHes of the hash annotations (every PATCH but the Pods' second nudges).
    fn hash_patches(&self) -> Vec<Seen> {
        self.patches()
            .into_iter()
            .filter(|p| !p.is_second_nudge())
            .collect()
    }

    /// Waits for the next outcome and checks it is `expected`.
    async fn expect(&mut self, expected: Outcome) {
        assert_eq!(self.outcome().await, expected);
    }

    fn counted(&self) -> Vec<TargetKind> {
        self.counted.lock().unwrap().clone()
    }

    async fn outcome(&mut self) -> Outcome {
        tokio::time::timeout(Duration::from_secs(600), self.outcomes.recv())
            .await
            .expect("an outcome within 600 s")
            .expect("the writer is running")
    }
}

fn start(answer: Answer, rate: f64, leading: bool) -> Harness {
    let (client, seen) = mock(answer);
    let (leader, leader_rx) = watch::channel(leading);
    let (outcomes_tx, outcomes) = mpsc::unbounded_channel();
    let counted = Arc::new(Mutex::new(Vec::new()));
    let (counting, held) = (counted.clone(), Arc::new(AtomicUsize::new(0)));
    let holding = held.clone();
    let counters = Counters {
        written: Arc::new(move |kind| counting.lock().unwrap().push(kind)),
        held: Arc::new(move |count| holding.store(count, Ordering::SeqCst)),
    };
    let config = WriterConfig {
        max_writes_per_second: rate,
        request_timeout: Duration::from_secs(5),
    };
    let writer = Writer::spawn(client, config, leader_rx, outcomes_tx, counters);
    Harness {
        writer,
        seen,
        outcomes,
        leader,
        counted,
        held,
    }
}

fn target(kind: TargetKind, name: &str) -> Target {
    Target {
        kind,
        namespace: "shop".into(),
        name: name.into(),
    }
}

fn write(kind: TargetKind, name: &str, expected: Option<&str>, desired: &str) -> Write {
    let event = kind.is_workload().then(|| {
        format!("reload-injector: ConfigMap shop/settings changed (keys: upstream); new {desired}")
    });
    Write::hash(
        target(kind, name),
        format!("uid-{name}"),
        expected.map(str::to_owned),
        desired.into(),
        event,
    )
}

fn written(kind: TargetKind, name: &str, value: &str) -> Outcome {
    Outcome::Written(target(kind, name), value.into())
}

/// The PATCH of `kind`'s hash annotation from `expected` to `desired`.
fn patch(kind: TargetKind, expected: Option<&str>, desired: &str) -> AnnotationPatch {
    write_patch(&write(kind, "web", expected, desired))
}

/// The JSON patch that tests `path` holds `from`, then replaces it with `to`.
fn test_then_replace(path: &str, from: &str, to: &str) -> Value {
    json!([{"op": "test", "path": path, "value": from},
           {"op": "replace", "path": path, "value": to}])
}

/// Lets the writer run until nothing is left to do within `span` of paused time.
async fn settle(span: Duration) {
    tokio::time::sleep(span).await;
}

const CONFIG_PATH: &str = "/spec/template/metadata/annotations/reload-injector.io~1config-hash";
const MOUNTED_PATH: &str = "/metadata/annotations/reload-injector.io~1mounted-config-hash";

#[test]
fn the_patch_tests_the_expected_value_then_replaces_it() {
    // A workload's template hash, and a Pod's own mounted-config-hash.
    for (kind, path) in [
        (TargetKind::Deployment, CONFIG_PATH),
        (TargetKind::Pod, MOUNTED_PATH),
    ] {
        let patch = guarded(patch(kind, Some("sha256:old"), "sha256:new"));
        assert_eq!(
            serde_json::to_value(&patch).unwrap(),
            test_then_replace(path, "sha256:old", "sha256:new"),
            "{kind:?}"
        );
    }
}

#[test]
fn without_expected_the_patch_merges_in_the_one_annotation() {
    assert_eq!(
        patch(TargetKind::CronJob, None, "sha256:new"),
        AnnotationPatch::Add(
            json!({"spec": {"jobTemplate": {"spec": {"template": {"metadata": {
            "annotations": {"reload-injector.io/config-hash": "sha256:new"}}}}}}})
        )
    );
}

#[test]
fn the_patch_changes_only_its_annotation_and_fails_on_a_changed_value() {
    let object = json!({
        "metadata": {"name": "web", "annotations": {"keep": "me"}},
        "spec": {"replicas": 3, "template": {
            "metadata": {"labels": {"app": "web"}, "annotations": {
                "reload-injector.io/config-hash": "sha256:old", "other": "x"}},
            "spec": {"containers": [{"name": "app", "image": "nginx"}]}}}
    });
    let patch_of = |expected| guarded(patch(TargetKind::Deployment, Some(expected), "sha256:new"));
    let mut patched = object.clone();
    json_patch::patch(&mut patched, &patch_of("sha256:old")).unwrap();
    let mut expected = object.clone();
    expected["spec"]["template"]["metadata"]["annotations"]["reload-injector.io/config-hash"] =
        json!("sha256:new");
    assert_eq!(patched, expected);

    let mut untouched = object.clone();
    assert!(json_patch::patch(&mut untouched, &patch_of("sha256:older")).is_err());
    assert_eq!(untouched, object);

    let AnnotationPatch::Add(added) = patch(TargetKind::Pod, None, "sha256:new") else {
        panic!("a merge patch");
    };
    let mut patched = object.clone();
    json_patch::merge(&mut patched, &added);
    assert_eq!(
        patched["metadata"]["annotations"],
        json!({"keep": "me", "reload-injector.io/mounted-config-hash": "sha256:new"})
    );
    // An object with no annotations at all gets the map (a JSON patch `add` would get 422).
    let mut bare = json!({"metadata": {"name": "web-1", "labels": {"app": "web"}}});
    json_patch::merge(&mut bare, &added);
    assert_eq!(
        bare["metadata"],
        json!({"name": "web-1", "labels": {"app": "web"},
               "annotations": {"reload-injector.io/mounted-config-hash": "sha256:new"}})
    );
}

#[test]
fn an_unchanged_value_makes_an_empty_patch() {
    assert_eq!(
        patch(TargetKind::Pod, Some("sha256:a"), "sha256:a"),
        AnnotationPatch::Unchanged
    );
}

#[test]
fn backoff_doubles_from_200_ms_to_30_s_and_jitter_scales_it() {
    assert_eq!(backoff(1, 1.0), Duration::from_millis(200));
    assert_eq!(backoff(2, 1.0), Duration::from_millis(400));
    assert_eq!(backoff(4, 1.0), Duration::from_millis(1600));
    assert_eq!(backoff(9, 1.0), Duration::from_secs(30));
    assert_eq!(backoff(u32::MAX, 1.0), Duration::from_secs(30));
    assert_eq!(backoff(1, 0.5), Duration::from_millis(100));
    assert_eq!(backoff(1, 0.0), Duration::from_millis(100));
}

/// Writes `web`'s template hash from `sha256:old` to `sha256:new` for `kind`: the requests,
/// after checking there were two and the first is the JSON patch with its `test`.
async fn template_write(kind: TargetKind) -> (Harness, Vec<Seen>) {
    let mut h = start(patches(&[]), 20.0, true);
    h.submit(kind, "web", Some("sha256:old"), "sha256:new");
    h.expect(written(kind, "web", "sha256:new")).await;
    settle(Duration::from_secs(1)).await;
    let requests = h.requests();
    assert_eq!(requests.len(), 2, "{requests:#?}");
    let patch = &requests[0];
    assert_eq!(patch.method, "PATCH");
    assert_eq!(patch.field_manager(), Some("reload-injector"));
    assert_eq!(patch.content_type, "application/json-patch+json");
    assert_eq!(
        patch.body,
        test_then_replace(CONFIG_PATH, "sha256:old", "sha256:new")
    );
    (h, requests)
}

#[tokio::test(start_paused = true)]
async fn a_deployment_write_is_one_json_patch_then_one_event() {
    let (h, requests) = template_write(TargetKind::Deployment).await;
    assert_eq!(
        requests[0].path,
        "/apis/apps/v1/namespaces/shop/deployments/web"
    );

    let event = &requests[1];
    assert_eq!(event.method, "POST");
    assert_eq!(event.path, "/api/v1/namespaces/shop/events");
    let body = &event.body;
    assert_eq!(
        body["involvedObject"],
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "shop",
               "name": "web", "uid": "uid-web"})
    );
    assert_eq!(body["reason"], "ConfigChanged");
    assert_eq!(body["type"], "Normal");
    assert_eq!(
        body["message"],
        "reload-injector: ConfigMap shop/settings changed (keys: upstream); new sha256:new"
    );
    assert_eq!(body["source"], json!({"component": "reload-injector"}));
    assert_eq!(body["reportingComponent"], "reload-injector");
    assert_eq!(body["count"], 1);
    assert_eq!(body["metadata"]["namespace"], "shop");
    let name = body["metadata"]["name"].as_str().unwrap();
    let suffix = name
        .strip_prefix("web.")
        .expect("name is <object>.<hex nanos>");
    assert!(
        !suffix.is_empty() && suffix.chars().all(|c| c.is_ascii_hexdigit()),
        "{name}"
    );
    assert!(body["firstTimestamp"].is_string());
    assert_eq!(body["firstTimestamp"], body["lastTimestamp"]);
    assert_eq!(h.counted(), [TargetKind::Deployment]);
}

#[tokio::test(start_paused = true)]
async fn a_cronjob_write_patches_the_job_template() {
    let mut h = start(patches(&[]), 20.0, true);
    h.submit(TargetKind::CronJob, "nightly", None, "sha256:new");
    assert!(matches!(h.outcome().await, Outcome::Written(..)));
    settle(Duration::from_secs(1)).await;
    let patches = h.patches();
    assert_eq!(patches.len(), 1);
    assert_eq!(
        patches[0].path,
        "/apis/batch/v1/namespaces/shop/cronjobs/nightly"
    );
    assert_eq!(patches[0].content_type, "application/merge-patch+json");
    assert_eq!(patches[0].field_manager(), Some("reload-injector"));
    assert_eq!(
        patches[0].body,
        json!({"spec": {"jobTemplate": {"spec": {"template": {"metadata": {
            "annotations": {"reload-injector.io/config-hash": "sha256:new"}}}}}}})
    );
    let event = &h.requests()[1];
    assert_eq!(event.body["involvedObject"]["apiVersion"], "batch/v1");
    assert_eq!(event.body["involvedObject"]["kind"], "CronJob");
}

#[tokio::test(start_paused = true)]
async fn a_rollout_write_patches_its_template_then_records_the_event_on_it() {
    let (h, requests) = template_write(TargetKind::Rollout).await;
    assert_eq!(
        requests[0].path,
        "/apis/argoproj.io/v1alpha1/namespaces/shop/rollouts/web"
    );
    let event = &requests[1];
    assert_eq!(event.path, "/api/v1/namespaces/shop/events");
    assert_eq!(
        event.body["involvedObject"],
        json!({"apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout", "namespace": "shop",
               "name": "web", "uid": "uid-web"})
    );
    assert_eq!(event.body["reason"], "ConfigChanged");
    assert_eq!(h.counted(), [TargetKind::Rollout]);
}

#[tokio::test(start_paused = true)]
async fn a_pod_write_is_one_patch_and_no_event() {
    let mut h = start(patches(&[]), 20.0, true);
    h.submit(TargetKind::Pod, "web-0", Some("sha256:a"), "sha256:b");
    h.expect(written(TargetKind::Pod, "web-0", "sha256:b"))
        .await;
    settle(Duration::from_secs(1)).await;
    let requests = h.requests();
    assert_eq!(requests.len(), 1, "{requests:#?}");
    assert_eq!(requests[0].path, "/api/v1/namespaces/shop/pods/web-0");
    assert_eq!(requests[0].content_type, "application/json-patch+json");
    assert_eq!(
        requests[0].body,
        test_then_replace(MOUNTED_PATH, "sha256:a", "sha256:b")
    );
    assert_eq!(h.counted(), [TargetKind::Pod]);
}

#[tokio::test(start_paused = true)]
async fn conflict_and_failed_test_are_conflicts_without_retry_or_event() {
    for code in [409, 422] {
        let mut h = start(always(code), 20.0, true);
        h.submit(
            TargetKind::Deployment,
            "web",
            Some("sha256:old"),
            "sha256:new",
        );
        h.expect(Outcome::Conflict(target(TargetKind::Deployment, "web")))
            .await;
        settle(Duration::from_secs(120)).await;
        assert_eq!(h.requests().len(), 1, "status {code}");
        assert!(h.counted().is_empty());
    }
}

#[tokio::test(start_paused = true)]
async fn not_found_is_gone() {
    let mut h = start(always(404), 20.0, true);
    h.submit(TargetKind::Pod, "web-0", Some("sha256:a"), "sha256:b");
    h.expect(Outcome::Gone(target(TargetKind::Pod, "web-0")))
        .await;
    settle(Duration::from_secs(120)).await;
    assert_eq!(h.requests().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_server_error_is_retried_after_a_backoff_and_written_once() {
    let mut h = start(patches(&[500]), 20.0, true);
    h.submit(
        TargetKind::Deployment,
        "web",
        Some("sha256:old"),
        "sha256:new",
    );
    assert!(matches!(h.outcome().await, Outcome::Written(..)));
    settle(Duration::from_secs(120)).await;
    assert!(h.outcomes.try_recv().is_err(), "one outcome only");
    let patches = h.patches();
    assert_eq!(patches.len(), 2);
    assert_eq!(patches[0].body, patches[1].body);
    let gap = patches[1].at - patches[0].at;
    assert!(
        (Duration::from_millis(100)..=Duration::from_millis(200)).contains(&gap),
        "{gap:?}"
    );
    let events = h.requests().iter().filter(|r| r.method == "POST").count();
    assert_eq!(events, 1);
}

#[tokio::test(start_paused = true)]
async fn forbidden_and_throttled_keep_retrying_with_growing_backoff() {
    let mut h = start(patches(&[403, 429, 503, 400]), 20.0, true);
    h.submit(TargetKind::Pod, "web-0", Some("sha256:a"), "sha256:b");
    assert!(matches!(h.outcome().await, Outcome::Written(..)));
    let patches = h.patches();
    assert_eq!(patches.len(), 5);
    for (n, pair) in patches.windows(2).enumerate() {
        let gap = pair[1].at - pair[0].at;
        let full = BACKOFF.first * (1 << n);
        assert!(gap >= full / 2 && gap <= full, "retry {n}: {gap:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_hanging_request_times_out_and_is_retried() {
    let mut hang_first = true;
    let answer: Answer = Box::new(move |_| (!std::mem::take(&mut hang_first)).then_some(200));
    let mut h = start(answer, 20.0, true);
    h.submit(TargetKind::Pod, "web-0", Some("sha256:a"), "sha256:b");
    assert!(matches!(h.outcome().await, Outcome::Written(..)));
    let at: Vec<Instant> = h.requests().iter().map(|r| r.at).collect();
    assert_eq!(at.len(), 2);
    let gap = at[1] - at[0];
    assert!(gap >= Duration::from_millis(5100), "{gap:?}");
}

#[tokio::test(start_paused = true)]
async fn writes_are_spaced_at_the_configured_rate() {
    let mut h = start(patches(&[]), 2.0, true);
    for n in 0..5 {
        h.submit(
            TargetKind::Pod,
            &format!("web-{n}"),
            Some("sha256:a"),
            "sha256:b",
        );
    }
    for _ in 0..5 {
        assert!(matches!(h.outcome().await, Outcome::Written(..)));
    }
    let patches = h.patches();
    let names: Vec<&str> = patches.iter().map(Seen::name).collect();
    assert_eq!(
        names,
        ["web-0", "web-1", "web-2", "web-3", "web-4"],
        "queue order kept"
    );
    let start = patches[0].at;
    let offsets: Vec<Duration> = patches.iter().map(|p| p.at - start).collect();
    // A burst of 2, then one every 500 ms.
    let ms = Duration::from_millis;
    assert!(offsets[1] < ms(5), "{offsets:?}");
    for (n, offset) in offsets.iter().enumerate().skip(2) {
        let due = ms(500) * (n as u32 - 1);
        assert!(*offset >= due && *offset < due + ms(5), "{offsets:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn events_share_the_rate_limit_with_patches() {
    let mut h = start(patches(&[]), 1.0, true);
    h.submit(TargetKind::Deployment, "a", Some("sha256:a"), "sha256:b");
    h.submit(TargetKind::Deployment, "b", Some("sha256:a"), "sha256:b");
    for _ in 0..2 {
        assert!(matches!(h.outcome().await, Outcome::Written(..)));
    }
    settle(Duration::from_secs(10)).await;
    let requests = h.requests();
    assert_eq!(requests.len(), 4, "{requests:#?}");
    for pair in requests.windows(2) {
        assert!(
            pair[1].at - pair[0].at >= Duration::from_millis(999),
            "{requests:#?}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn two_queued_writes_for_one_target_become_one_patch_in_its_place() {
    let mut h = start(patches(&[]), 1.0, true);
    // `a` takes the only token; the rest wait in the queue.
    h.submit(TargetKind::Pod, "a", Some("sha256:0"), "sha256:1");
    tokio::task::yield_now().await;
    h.submit(TargetKind::Pod, "b", Some("sha256:0"), "sha256:1");
    h.submit(TargetKind::Pod, "c", Some("sha256:0"), "sha256:1");
    h.submit(TargetKind::Pod, "b", Some("sha256:0"), "sha256:2");
    let mut outcomes = Vec::new();
    for _ in 0..3 {
        outcomes.push(h.outcome().await);
    }
    settle(Duration::from_secs(10)).await;
    let patches = h.hash_patches();
    let names: Vec<&str> = patches.iter().map(Seen::name).collect();
    assert_eq!(names, ["a", "b", "c"]);
    assert_eq!(patches[1].body[1]["value"], "sha256:2");
    assert!(outcomes.contains(&written(TargetKind::Pod, "b", "sha256:2")));
}

#[tokio::test(start_paused = true)]
async fn a_write_submitted_while_one_is_in_flight_follows_it() {
    let mut h = start(patches(&[]), 20.0, true);
    h.submit(TargetKind::Pod, "a", Some("sha256:0"), "sha256:1");
    tokio::task::yield_now().await;
    h.submit(TargetKind::Pod, "a", Some("sha256:1"), "sha256:2");
    h.expect(written(TargetKind::Pod, "a", "sha256:1")).await;
    h.expect(written(TargetKind::Pod, "a", "sha256:2")).await;
    assert_eq!(h.patches().len(), 2);
}

#[tokio::test(start_paused = true)]
async fn a_newer_write_replaces_the_one_waiting_to_retry() {
    let mut h = start(patches(&[503]), 20.0, true);
    h.submit(TargetKind::Pod, "a", Some("sha256:0"), "sha256:1");
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(h.patches().len(), 1);
    h.submit(TargetKind::Pod, "a", Some("sha256:0"), "sha256:2");
    h.expect(written(TargetKind::Pod, "a", "sha256:2")).await;
    settle(Duration::from_secs(60)).await;
    let patches = h.hash_patches();
    assert_eq!(patches.len(), 2);
    assert_eq!(patches[1].body[1]["value"], "sha256:2");
}

#[tokio::test(start_paused = true)]
async fn a_pods_landed_refresh_is_nudged_again_with_a_distinct_change_retried_until_it_lands() {
    // The hash PATCH lands; the second nudge is refused twice before it lands.
    let mut h = start(patches(&[200, 503, 500]), 20.0, true);
    h.submit(TargetKind::Pod, "a", Some("sha256:0"), "sha256:1");
    h.expect(written(TargetKind::Pod, "a", "sha256:1")).await;
    let first_at = h.patches()[0].at;
    settle(Duration::from_secs(60)).await;
    let patches = h.patches();
    assert_eq!(patches.len(), 4, "{patches:#?}");
    assert!(!patches[0].is_second_nudge());
    for again in &patches[1..] {
        assert!(again.is_second_nudge(), "{again:#?}");
        assert_eq!(again.path, patches[0].path);
        assert_eq!(again.content_type, "application/merge-patch+json");
        assert_eq!(
            again.body["metadata"]["annotations"][crate::workload::MOUNTED_CONFIG_REFRESHED],
            "sha256:1"
        );
    }
    assert!(
        patches[1].at - first_at >= NUDGE_AGAIN_AFTER,
        "{patches:#?}"
    );
    // Nothing more for the reconciler: the second nudge is not a refresh of its own.
    assert!(h.outcomes.try_recv().is_err());
    assert_eq!(h.counted().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_value_already_there_or_a_conflict_or_a_rollout_is_not_nudged_again() {
    let mut h = start(patches(&[409]), 20.0, true);
    h.submit(TargetKind::Pod, "a", Some("sha256:0"), "sha256:1");
    h.expect(Outcome::Conflict(target(TargetKind::Pod, "a")))
        .await;
    h.submit(TargetKind::Pod, "b", Some("sha256:1"), "sha256:1");
    h.submit(TargetKind::Deployment, "web", Some("sha256:0"), "sha256:1");
    for _ in 0..2 {
        assert!(matches!(h.outcome().await, Outcome::Written(..)));
    }
    settle(Duration::from_secs(60)).await;
    assert!(
        h.patches().iter().all(|p| !p.is_second_nudge()),
        "{:#?}",
        h.patches()
    );
    assert_eq!(h.patches().len(), 2);
}

#[tokio::test(start_paused = true)]
async fn a_follower_sends_nothing_and_keeps_nothing() {
    let h = start(patches(&[]), 20.0, false);
    h.submit(TargetKind::Pod, "a", Some("sha256:0"), "sha256:1");
    settle(Duration::from_secs(10)).await;
    h.leader.send(true).unwrap();
    settle(Duration::from_secs(10)).await;
    assert!(h.requests().is_empty(), "{:#?}", h.requests());
}

#[tokio::test(start_paused = true)]
async fn losing_the_lease_drops_the_queue() {
    let mut h = start(patches(&[]), 1.0, true);
    for name in ["a", "b", "c"] {
        h.submit(TargetKind::Pod, name, Some("sha256:0"), "sha256:1");
    }
    assert!(matches!(h.outcome().await, Outcome::Written(..)));
    h.leader.send(false).unwrap();
    settle(Duration::from_secs(10)).await;
    h.leader.send(true).unwrap();
    settle(Duration::from_secs(10)).await;
    let patches = h.patches();
    assert_eq!(patches.len(), 1, "{patches:#?}");
    assert!(h.outcomes.try_recv().is_err());
    // Leading again, new writes go out.
    h.submit(TargetKind::Pod, "d", Some("sha256:0"), "sha256:1");
    h.expect(written(TargetKind::Pod, "d", "sha256:1")).await;
}

#[tokio::test(start_paused = true)]
async fn a_failing_event_is_tried_a_few_times_then_given_up() {
    let answer: Answer = Box::new(|seen| Some(if seen.is_patch() { 200 } else { 500 }));
    let mut h = start(answer, 20.0, true);
    h.submit(TargetKind::StatefulSet, "db", Some("sha256:0"), "sha256:1");
    assert!(matches!(h.outcome().await, Outcome::Written(..)));
    settle(Duration::from_secs(600)).await;
    let posts = h.requests().iter().filter(|r| r.method == "POST").count();
    assert_eq!(posts, EVENT_ATTEMPTS as usize);
    assert_eq!(
        h.patches()[0].path,
        "/apis/apps/v1/namespaces/shop/statefulsets/db"
    );
}

#[tokio::test(start_paused = true)]
async fn a_write_of_the_value_already_there_sends_nothing() {
    let mut h = start(patches(&[]), 20.0, true);
    h.submit(TargetKind::Deployment, "web", Some("sha256:a"), "sha256:a");
    h.expect(written(TargetKind::Deployment, "web", "sha256:a"))
        .await;
    settle(Duration::from_secs(1)).await;
    assert!(h.requests().is_empty(), "{:#?}", h.requests());
    assert!(h.counted().is_empty());
}

/// The JSON patch of a guarded write.
fn guarded(patch: AnnotationPatch) -> json_patch::Patch {
    match patch {
        AnnotationPatch::Guarded(patch) => patch,
        other => panic!("expected a guarded JSON patch, got {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn a_pod_write_is_held_until_its_second_nudge_is_sent() {
    let mut h = start(patches(&[]), 20.0, true);
    h.submit(TargetKind::Pod, "web-0", Some("sha256:a"), "sha256:b");
    h.expect(written(TargetKind::Pod, "web-0", "sha256:b"))
        .await;
    // Said before the outcome: the second nudge is still to come.
    assert_eq!(h.held.load(Ordering::SeqCst), 1);
    settle(NUDGE_AGAIN_AFTER + Duration::from_secs(1)).await;
    assert_eq!(h.patches().len(), 2);
    assert_eq!(h.held.load(Ordering::SeqCst), 0);
}

#[tokio::test(start_paused = true)]
async fn a_workload_write_and_its_event_are_let_go_once_done() {
    let mut h = start(patches(&[]), 20.0, true);
    h.submit(TargetKind::Deployment, "web", Some("sha256:a"), "sha256:b");
    h.outcome().await;
    settle(Duration::from_secs(1)).await;
    assert_eq!(h.requests().len(), 2, "the PATCH and the Event");
    assert_eq!(h.held.load(Ordering::SeqCst), 0);
}
