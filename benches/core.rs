//! The pure core on the realistic 5 KB Pod review: `config_refs` + `review`, and for scale the
//! whole synchronous path (parse bytes, core, encode the answer) and the JSON parse alone.
//!
//! `cargo bench --bench core` measures; without `--bench` (as `cargo test --all-targets`
//! runs it) it checks each path once, quickly.

use std::hint::black_box;
use std::time::{Duration, Instant};

use reload_injector::hash::{ConfigData, ConfigId, ConfigObject, Lookup};
use reload_injector::webhook::admission_review::{self, Review};
use reload_injector::workload::{self, Outcome, Settings};
use serde_json::value::{RawValue, to_raw_value};

/// The allocator the shipped binary uses (`src/main.rs`), so the numbers match production.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn settings() -> Settings {
    Settings {
        sidecar_image: "ghcr.io/reload-injector/reload-injector:bench".into(),
        native_sidecars: true,
        own_namespace: "reload-injector".into(),
        version: reload_injector::VERSION.into(),
        inject_into_templates: false,
        secret_key: None,
        in_place: Default::default(),
        warning_chars: Some(reload_injector::workload::API_SERVER_WARNING_CHARS),
        reloader_retired: true,
    }
}

fn body() -> Vec<u8> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/reviews/realistic-pod.json"
    );
    let value: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    serde_json::to_vec(&value).unwrap()
}

fn configs() -> ConfigData {
    let mut data = ConfigData::new();
    let id = ConfigId::config_map("web-settings");
    let object = ConfigObject::from_values(&id, [("upstream", b"http://backend:8080")], None)
        .expect("a ConfigMap needs no key");
    data.insert(id, Lookup::Found(object));
    data
}

/// The core's view of a review parsed in full, its object handed over as raw JSON.
fn full_request<'a>(doc: &'a serde_json::Value, object: &'a RawValue) -> workload::Request<'a> {
    let r = &doc["request"];
    workload::Request {
        group: r["kind"]["group"].as_str().unwrap(),
        kind: r["kind"]["kind"].as_str().unwrap(),
        operation: workload::Operation::parse(r["operation"].as_str().unwrap()),
        namespace: r["namespace"].as_str().unwrap(),
        object: workload::Object::Raw(object),
        old_object: None,
        namespace_labelled: true,
        dry_run: false,
    }
}

/// The realistic review with `keys` more `reload-injector.io/` annotations on the Pod: the
/// entries the webhook keeps, so a body full of them must still cost in proportion.
fn with_prefixed_annotations(bytes: &[u8], keys: usize) -> Vec<u8> {
    let mut review: serde_json::Value = serde_json::from_slice(bytes).unwrap();
    let annotations = review["request"]["object"]["metadata"]["annotations"]
        .as_object_mut()
        .expect("the realistic Pod has annotations");
    for i in 0..keys {
        annotations.insert(format!("reload-injector.io/x{i}"), "".into());
    }
    serde_json::to_vec(&review).unwrap()
}

/// A Pod review with `containers` containers, each reading its own ConfigMap via `envFrom`:
/// two warnings per container (the use, and the ConfigMap missing).
fn many_containers(containers: usize) -> serde_json::Value {
    let list: Vec<serde_json::Value> = (0..containers)
        .map(|i| {
            serde_json::json!({"name": format!("c{i}"), "image": "app",
                "envFrom": [{"configMapRef": {"name": format!("cm{i}")}}]})
        })
        .collect();
    serde_json::json!({"request": {"kind": {"group": "", "kind": "Pod"}, "operation": "CREATE",
        "namespace": "app", "object": {"metadata": {"name": "p"}, "spec": {"containers": list}}}})
}

/// Runs `f` `n` times per round for `rounds` rounds; returns the median time per call.
fn measure(rounds: usize, n: usize, mut f: impl FnMut()) -> Duration {
    for _ in 0..n.min(1000) {
        f();
    }
    let mut per_call: Vec<Duration> = (0..rounds)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..n {
                f();
            }
            start.elapsed() / n as u32
        })
        .collect();
    per_call.sort();
    per_call[rounds / 2]
}

fn main() {
    let bench = std::env::args().any(|a| a == "--bench");
    let (rounds, n) = if bench { (9, 20_000) } else { (1, 3) };
    let bytes = body();
    let settings = settings();
    let configs = configs();

    // The core on the object exactly as sent (managedFields included).
    let full: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    let full_envelope = serde_json::to_vec(&full).unwrap();
    assert_eq!(full_envelope.len(), bytes.len());
    let object = to_raw_value(&full["request"]["object"]).unwrap();
    let req = full_request(&full, &object);
    let refs = workload::config_refs(&req, &settings).unwrap();
    assert!(
        refs.contains(&ConfigId::config_map("web-settings")),
        "{refs:?}"
    );
    match workload::review(&req, &settings, &configs).unwrap() {
        Outcome::Allowed { patch, .. } => assert!(!patch.0.is_empty(), "no patch"),
        other => panic!("unexpected outcome {other:?}"),
    }

    let core = measure(rounds, n, || {
        let refs = workload::config_refs(black_box(&req), &settings).unwrap();
        black_box(refs);
        black_box(workload::review(black_box(&req), &settings, &configs).unwrap());
    });
    let plan = measure(rounds, n, || {
        let plan = workload::Plan::new(black_box(&req), &settings).unwrap();
        black_box(plan.config_refs());
        black_box(plan.outcome(&configs));
    });
    let read_only = measure(rounds, n, || {
        black_box(workload::Plan::new(black_box(&req), &settings).unwrap());
    });
    let parse = measure(rounds, n, || {
        black_box(serde_json::from_slice::<serde_json::Value>(black_box(&bytes)).unwrap());
    });
    let lean = measure(rounds, n, || {
        black_box(Review::parse(black_box(&bytes)).unwrap());
    });
    let whole = measure(rounds, n, || {
        let parsed = Review::parse(black_box(&bytes)).unwrap();
        let req = parsed.request().unwrap();
        let plan = workload::Plan::new(&req, &settings).unwrap();
        black_box(plan.config_refs());
        let answer = match plan.outcome(&configs) {
            Outcome::Allowed { patch, warnings } => {
                admission_review::allowed(parsed.uid(), &patch, &warnings)
            }
            Outcome::Denied { message, warnings } => {
                admission_review::denied(parsed.uid(), 403, &message, &warnings)
            }
        };
        black_box(answer);
    });
    // Cost must grow in proportion to the number of kept keys (a list searched per key was
    // quadratic: 40,000 keys took 1.65 s). Compared within this run: 4x the keys, not 10x the time.
    let (small, large) = (10_000, 40_000);
    let parse_keys = |keys: usize| {
        let body = with_prefixed_annotations(&bytes, keys);
        measure(rounds.min(3), 3, || {
            black_box(Review::parse(black_box(&body)).unwrap());
        })
    };
    let (small_took, large_took) = (parse_keys(small), parse_keys(large));
    let growth = large_took.as_secs_f64() / small_took.as_secs_f64();
    assert!(
        growth < 10.0,
        "{large} prefixed annotations took {growth:.1}x as long as {small}"
    );
    // Likewise for warnings: 4x the containers, not 10x the time (finding each missing
    // ConfigMap's container by a search of every use was quadratic: 20,000 containers, 1.4 s).
    // Every warning is kept (as offline), so that all of them are made and counted.
    let every_warning = Settings {
        in_place: Default::default(),
        warning_chars: None,
        reloader_retired: true,
        ..settings.clone()
    };
    let (few, many) = (2_000, 8_000);
    let review_containers = |containers: usize| {
        let doc = many_containers(containers);
        let object = to_raw_value(&doc["request"]["object"]).unwrap();
        let req = full_request(&doc, &object);
        let none = ConfigData::new();
        match workload::review(&req, &every_warning, &none).unwrap() {
            Outcome::Allowed { warnings, .. } => assert_eq!(warnings.len(), 2 * containers),
            other => panic!("unexpected outcome {other:?}"),
        }
        measure(rounds.min(3), 3, || {
            black_box(workload::review(black_box(&req), &every_warning, &none).unwrap());
        })
    };
    let (few_took, many_took) = (review_containers(few), review_containers(many));
    let warned_growth = many_took.as_secs_f64() / few_took.as_secs_f64();
    assert!(
        warned_growth < 10.0,
        "{many} warned containers took {warned_growth:.1}x as long as {few}"
    );
    println!("realistic Pod review: {} bytes", bytes.len());
    println!(
        "core (config_refs + review):        {:>8.2} µs/review",
        core.as_secs_f64() * 1e6
    );
    println!(
        "one Plan (new + config_refs + outcome): {:>6.2} µs/review",
        plan.as_secs_f64() * 1e6
    );
    println!(
        "  of which Plan::new (reads object): {:>8.2} µs/review",
        read_only.as_secs_f64() * 1e6
    );
    println!(
        "JSON parse of the body alone:       {:>8.2} µs/review",
        parse.as_secs_f64() * 1e6
    );
    println!(
        "Review::parse (object kept raw):    {:>8.2} µs/review",
        lean.as_secs_f64() * 1e6
    );
    println!(
        "parse + Plan + encode the answer:   {:>8.2} µs/review",
        whole.as_secs_f64() * 1e6
    );
    println!(
        "Review::parse, {small} / {large} prefixed annotations: {:.2} / {:.2} ms ({growth:.1}x)",
        small_took.as_secs_f64() * 1e3,
        large_took.as_secs_f64() * 1e3,
    );
    println!(
        "workload::review, {few} / {many} containers with warnings: {:.2} / {:.2} ms ({warned_growth:.1}x)",
        few_took.as_secs_f64() * 1e3,
        many_took.as_secs_f64() * 1e3,
    );
    if !bench {
        println!("(quick check only; run `cargo bench --bench core` to measure)");
    }
}
