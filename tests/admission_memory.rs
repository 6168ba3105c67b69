//! What one review may make the server allocate, measured by a counting global allocator
//! around the real router: a body of a few MiB shaped to expand (huge lists of tiny entries, a
//! huge value where an object belongs) must stay within the in-flight budget, which counts
//! what a review reads as well as its body. The server runs under a 128Mi memory limit; before
//! these bounds, one 5 MiB `[0,0,…]` body took it to 235 MB, and a 3.5 MiB review of bare
//! containers added 96 MiB.

#[path = "webhook_support/mod.rs"]
mod webhook_support;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

use axum::body::{Body, to_bytes};
use http::{Request, StatusCode, header};
use reload_injector::webhook::app;
use reload_injector::webhook::handler::{HandleError, handle};
use reload_injector::webhook::limits::BodyBudget;
use reload_injector::webhook::router::{BODY_TIMEOUT, HttpLimits, app_with};
use reload_injector::workload::meter::{Allowance, Meter, Refusal};
use serde_json::{Value, json};
use tower::ServiceExt;
use webhook_support::{pod_review, state};

/// Counts the bytes live now and the most live since the last [`Counting::reset_peak`].
struct Counting {
    live: AtomicUsize,
    peak: AtomicUsize,
}

#[global_allocator]
static ALLOC: Counting = Counting {
    live: AtomicUsize::new(0),
    peak: AtomicUsize::new(0),
};

// SAFETY: every call is forwarded to `System` unchanged; only counters are added.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            self.grew(layout.size());
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        self.live.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let new = unsafe { System.realloc(ptr, layout, new_size) };
        if !new.is_null() {
            // Counted as if both blocks were live for a moment, as they may be.
            self.grew(new_size);
            self.live.fetch_sub(layout.size(), Ordering::Relaxed);
        }
        new
    }
}

impl Counting {
    fn grew(&self, size: usize) {
        let live = self.live.fetch_add(size, Ordering::Relaxed) + size;
        self.peak.fetch_max(live, Ordering::Relaxed);
    }

    fn reset_peak(&self) -> usize {
        let live = self.live.load(Ordering::Relaxed);
        self.peak.store(live, Ordering::Relaxed);
        live
    }
}

const MIB: usize = 1024 * 1024;

/// The counters are the whole process's: every test here holds this while it runs, so no other
/// test's allocations land in its peak (the harness runs tests on parallel threads).
fn alone() -> MutexGuard<'static, ()> {
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

/// `request.uid` of every review here.
const UID: &str = "7d0c5e1a-9f3b-4c2d-8e6a-1b2c3d4e5f60";

/// The realistic Pod review with `edit` applied to its object.
fn review_with(edit: impl FnOnce(&mut Value)) -> Vec<u8> {
    let mut review = pod_review(UID);
    edit(&mut review["request"]["object"]);
    serde_json::to_vec(&review).unwrap()
}

/// The realistic Pod review with `request.<field>` set to `value`.
fn review_field(field: &str, value: Value) -> Vec<u8> {
    let mut review = pod_review(UID);
    review["request"][field] = value;
    serde_json::to_vec(&review).unwrap()
}

/// `n` copies of `item`.
fn many(item: Value, n: usize) -> Value {
    Value::Array(vec![item; n])
}

/// `n` containers named `c0`, `c1`, … with `fill` added to each.
fn containers(n: usize, fill: Value) -> Value {
    (0..n)
        .map(|i| {
            let mut c = fill.clone();
            c["name"] = json!(format!("c{i}"));
            c
        })
        .collect()
}

/// Bodies of about 2.5–5 MiB, each shaped to expand when read.
fn shapes() -> Vec<(&'static str, Vec<u8>)> {
    let zeros = format!("[{}0]", "0,".repeat(5 * MIB / 2));
    vec![
        ("a body that is an array of zeros", zeros.into_bytes()),
        (
            "metadata that is an array",
            review_with(|o| o["metadata"] = many(json!(0), 1_500_000)),
        ),
        (
            "a prefixed annotation holding an array",
            review_with(|o| {
                o["metadata"]["annotations"]["reload-injector.io/signal"] =
                    many(json!(0), 1_500_000)
            }),
        ),
        (
            "ownerReferences of empty objects",
            review_with(|o| o["metadata"]["ownerReferences"] = many(json!({}), 1_000_000)),
        ),
        (
            "a spec that is an array",
            review_with(|o| o["spec"] = many(json!(0), 1_500_000)),
        ),
        (
            "request.uid that is a list",
            review_field("uid", many(json!(0), 1_500_000)),
        ),
        (
            "request.kind with 250,000 keys",
            review_field(
                "kind",
                (0..250_000)
                    .map(|i| (format!("k{i}"), json!(0)))
                    .collect::<serde_json::Map<_, _>>()
                    .into(),
            ),
        ),
        (
            "bare containers",
            review_with(|o| o["spec"]["containers"] = containers(200_000, json!({}))),
        ),
        (
            "one-letter env entries",
            review_with(|o| {
                o["spec"]["containers"][0]["env"] = many(json!({"name": "A"}), 250_000)
            }),
        ),
        (
            "emptyDir volumes",
            review_with(|o| {
                o["spec"]["volumes"] = many(json!({"name": "v", "emptyDir": {}}), 120_000)
            }),
        ),
        (
            "volume mounts",
            review_with(|o| {
                o["spec"]["containers"][0]["volumeMounts"] =
                    many(json!({"name": "v", "mountPath": "/v"}), 100_000)
            }),
        ),
        (
            "one-letter args",
            review_with(|o| o["spec"]["containers"][0]["command"] = many(json!("a"), 800_000)),
        ),
        (
            "prefixed annotations",
            review_with(|o| {
                let map = &mut o["metadata"]["annotations"];
                for i in 0..100_000 {
                    map[format!("reload-injector.io/k{i}")] = json!("");
                }
            }),
        ),
        (
            "a spec refused by the lean read, with many keys",
            review_with(|o| {
                o["spec"]["volumes"] = json!("not a list");
                for i in 0..200_000 {
                    o["spec"][format!("k{i}")] = json!(0);
                }
            }),
        ),
    ]
}

async fn post(app: axum::Router, body: Vec<u8>) -> (StatusCode, String) {
    let len = body.len();
    post_body(app, Body::from(body), len).await
}

/// POSTs `body`, declared `len` bytes long, to `/mutate`; returns the status and the answer.
async fn post_body(app: axum::Router, body: Body, len: usize) -> (StatusCode, String) {
    let request = Request::post("/mutate")
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::CONTENT_LENGTH, len)
        .body(body)
        .unwrap();
    let response = app.oneshot(request).await.unwrap();
    let status = response.status();
    let bytes = to_bytes(response.into_body(), usize::MAX).await.unwrap();
    (status, String::from_utf8_lossy(&bytes).into_owned())
}

/// Under a 16 MiB budget (12 MiB for bodies over 1 MiB), no review may make the server hold
/// more than that part of the budget (the body, handed over whole here, is the test's own).
#[test]
fn a_review_holds_no_more_than_its_part_of_the_budget() {
    let _alone = alone();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let budget = 16 * MIB;
    let large_part = budget - budget / 4;
    let mut failures = Vec::new();
    for (name, body) in shapes() {
        let app = app_with(
            state(),
            HttpLimits {
                body_timeout: BODY_TIMEOUT,
                budget: BodyBudget::new(budget),
            },
        );
        let len = body.len();
        let before = ALLOC.reset_peak();
        let (status, text) = runtime.block_on(post(app, body));
        let peak = ALLOC.peak.load(Ordering::Relaxed) - before;
        let bound = large_part;
        println!(
            "{name}: body {:.1} MiB, peak {:.1} MiB (bound {:.1} MiB): {status} {}",
            len as f64 / MIB as f64,
            peak as f64 / MIB as f64,
            bound as f64 / MIB as f64,
            &text[..text.len().min(300)],
        );
        if peak > bound {
            failures.push(format!("{name}: peak {:.1} MiB", peak as f64 / MIB as f64));
        }
        // An AdmissionReview answered, or a body that is not one refused.
        match status {
            StatusCode::OK => assert!(text.contains(UID), "{name}: {text}"),
            StatusCode::BAD_REQUEST => assert!(text.starts_with("failed to"), "{name}: {text}"),
            other => panic!("{name}: {other} {text}"),
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// A body that arrives in pieces, as a large one does from a socket, is joined as it comes:
/// the pieces and the joined body are never held at once, so it costs the memory the budget
/// counts for it. (Joining the pieces at the end held it twice.)
#[test]
fn a_body_that_arrives_in_pieces_is_held_once() {
    let _alone = alone();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    // A review the server reads without building anything big: a long `managedFields`.
    let body =
        review_with(|o| o["metadata"]["managedFields"] = many(json!("x".repeat(1000)), 5_000));
    let len = body.len();
    assert!(len > 4 * MIB, "{len}");
    let app = app_with(
        state(),
        HttpLimits {
            body_timeout: BODY_TIMEOUT,
            budget: BodyBudget::new(16 * MIB),
        },
    );
    let body = std::sync::Arc::new(body);
    let source = body.clone();
    let before = ALLOC.reset_peak();
    // Each 64 KiB piece is allocated as it arrives, as hyper's reads are.
    let pieces = futures_util::StreamExt::map(
        futures_util::stream::iter((0..len).step_by(64 * 1024)),
        move |at| {
            let end = (at + 64 * 1024).min(len);
            Ok::<_, std::io::Error>(bytes::Bytes::copy_from_slice(&source[at..end]))
        },
    );
    let (status, text) = runtime.block_on(post_body(app, Body::from_stream(pieces), len));
    let peak = ALLOC.peak.load(Ordering::Relaxed) - before;
    assert_eq!(status, StatusCode::OK, "{text}");
    assert!(text.contains(UID), "{text}");
    let summary = format!(
        "peak {:.1} MiB for a body of {:.1} MiB",
        peak as f64 / MIB as f64,
        len as f64 / MIB as f64
    );
    println!("in 64 KiB pieces: {summary}");
    assert!(peak < len + MIB, "{summary}");
}

/// A review whose object would take more than its part of the budget to read is denied, as
/// an object that cannot be understood is: HTTP 200 with its uid and `status.code` 413 (an
/// HTTP error would leave the decision to the webhook's failure policy).
#[test]
fn an_object_too_large_to_read_is_denied_with_its_uid() {
    let _alone = alone();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let limits = HttpLimits {
        body_timeout: BODY_TIMEOUT,
        budget: BodyBudget::new(16 * MIB),
    };
    let body = review_with(|o| o["spec"]["containers"] = containers(200_000, json!({})));
    let (status, text) = runtime.block_on(post(app_with(state(), limits), body));
    assert_eq!(status, StatusCode::OK, "{text}");
    let answer: Value = serde_json::from_str(&text).unwrap();
    let response = &answer["response"];
    assert_eq!(response["uid"], UID);
    assert_eq!(response["allowed"], false);
    assert_eq!(response["status"]["code"], 413);
    let message = response["status"]["message"].as_str().unwrap();
    assert_eq!(
        message,
        "failed to review the object: reading the object would keep more than 12 MiB in memory"
    );
    assert!(response.get("patch").is_none(), "{response}");
}

/// Large but real Pods still get their patch under the default budget: 20 containers of
/// 1,000 env entries with 100-byte values and 100 mounts each, and 100 volumes.
#[test]
fn large_real_pods_are_still_reviewed() {
    let _alone = alone();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let body = review_with(|o| {
        let env: Value = (0..1_000)
            .map(|i| json!({"name": format!("SETTING_{i}"), "value": "v".repeat(100)}))
            .collect();
        let mounts: Value = (0..100)
            .map(|i| json!({"name": format!("v{i}"), "mountPath": format!("/data/{i}")}))
            .collect();
        let volumes = (0..100).map(|i| json!({"name": format!("v{i}"), "emptyDir": {}}));
        let extra = containers(
            20,
            json!({"image": "busybox", "env": env, "volumeMounts": mounts}),
        );
        let spec = &mut o["spec"];
        let list = spec["containers"].as_array_mut().unwrap();
        list.extend(extra.as_array().unwrap().iter().cloned());
        spec["volumes"].as_array_mut().unwrap().extend(volumes);
    });
    assert!(body.len() > 2 * MIB, "{} bytes", body.len());
    let (status, text) = runtime.block_on(post(app(state()), body));
    assert_eq!(status, StatusCode::OK, "{text}");
    assert!(text.contains("\"patch\""), "{text}");
}

/// Grants nothing because other reviews hold the memory now.
struct HeldByOthers;

impl Allowance for HeldByOthers {
    fn grant(&mut self, _: usize) -> Result<(), Refusal> {
        Err(Refusal::Busy)
    }
}

/// A review whose read the budget cannot grant now (but could later) is not denied: it gets
/// the error the router answers with HTTP 503, so that kube-apiserver retries.
#[test]
fn an_object_that_can_be_read_later_is_not_denied() {
    let _alone = alone();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let body = review_with(|o| o["spec"]["containers"] = containers(20_000, json!({})));
    let mut meter = Meter::new(64 * 1024, HeldByOthers);
    let answer = runtime.block_on(handle(&state(), &body, &mut meter, true));
    let err = answer.expect_err("the read needs more than 64 KiB");
    assert!(matches!(err, HandleError::Busy), "{err:?}");
    assert_eq!(
        err.to_string(),
        "failed to review the object: the memory for reading the object is held by other reviews; retry"
    );
}
