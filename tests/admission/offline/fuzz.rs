//! Fuzzing of the review path: AdmissionReview bodies through the real `/mutate` router, and
//! YAML through `inject`. Generated Pods and workload templates, byte-level mutations of
//! real reviews, and every crash ever found (`tests/fixtures/fuzz/`), replayed.
//!
//! `cargo test` runs a bounded pass; `scripts/fuzz.sh DURATION` runs each target that long.

use crate::fuzz_support;

use std::path::Path;

use fuzz_support::generate::{self, edits, mutate};
use fuzz_support::offline::Offline;
use fuzz_support::review::Webhooks;
use fuzz_support::{Budget, fixtures, fuzz};
use proptest::prelude::*;
use proptest::sample::select;
use serde_json::{Value, json};

/// Cases and seconds of each target's bounded pass.
const CI_CASES: u64 = 1500;
const CI_SECONDS: u64 = 20;

fn budget() -> Budget {
    Budget::from_env(CI_CASES, CI_SECONDS)
}

/// The AdmissionReviews of `tests/fixtures/reviews/`, as seeds for byte mutations.
fn review_seeds() -> Vec<Vec<u8>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/reviews");
    let mut seeds: Vec<Vec<u8>> = std::fs::read_dir(dir)
        .expect("tests/fixtures/reviews")
        .filter_map(|e| std::fs::read(e.ok()?.path()).ok())
        .map(|bytes| {
            let value: Value = serde_json::from_slice(&bytes).expect("a JSON fixture");
            serde_json::to_vec(&value).expect("JSON")
        })
        .collect();
    seeds.sort();
    seeds
}

/// The objects of the golden cases `tests/fixtures/inject/*.yaml`, as YAML seeds.
fn yaml_seeds() -> Vec<String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/inject");
    let mut seeds: Vec<String> = std::fs::read_dir(dir)
        .expect("tests/fixtures/inject")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| !p.to_string_lossy().ends_with(".golden.yaml"))
        .filter_map(|p| {
            let case: Value = serde_saphyr::from_str(&std::fs::read_to_string(p).ok()?).ok()?;
            serde_saphyr::to_string(case.get("object")?).ok()
        })
        .collect();
    seeds.sort();
    seeds
}

/// Objects as one YAML text: separate documents, or one `kind: List`.
fn yaml_of(objects: &[Value], as_list: bool) -> String {
    if as_list {
        let list = json!({"apiVersion": "v1", "kind": "List", "items": objects});
        return serde_saphyr::to_string(&list).expect("YAML");
    }
    objects
        .iter()
        .map(|o| format!("---\n{}", serde_saphyr::to_string(o).expect("YAML")))
        .collect()
}

#[test]
fn generated_reviews_through_the_router() {
    let webhooks = Webhooks::new();
    let strategy = (generate::review(), 0usize..3);
    fuzz(
        "review",
        budget(),
        strategy,
        |(review, _)| serde_json::to_vec_pretty(review).expect("JSON"),
        "json",
        |(review, which)| webhooks.check(*which, &serde_json::to_vec(review).expect("JSON")),
    );
    eprintln!("fuzz: generated reviews: {}", webhooks.outcomes.summary());
}

#[test]
fn mutated_and_random_bytes_through_the_router() {
    let webhooks = Webhooks::new();
    let seeds = review_seeds();
    let bytes = prop_oneof![
        3 => (select(seeds), edits()).prop_map(|(seed, edits)| mutate(&seed, &edits)),
        1 => prop::collection::vec(any::<u8>(), 0..256),
        2 => (generate::review(), edits())
            .prop_map(|(review, edits)| mutate(&serde_json::to_vec(&review).expect("JSON"), &edits)),
    ];
    fuzz(
        "review",
        budget(),
        (bytes, 0usize..3),
        |(bytes, _)| bytes.clone(),
        "json",
        |(bytes, which)| webhooks.check(*which, bytes),
    );
    eprintln!("fuzz: mutated bodies: {}", webhooks.outcomes.summary());
}

#[test]
fn generated_yaml_through_inject() {
    let offline = Offline::new();
    let objects = prop::collection::vec(generate::object().prop_map(|(_, o)| o), 1..3);
    let strategy = (objects, prop::bool::weighted(0.2), 0usize..3);
    fuzz(
        "inject",
        budget(),
        strategy,
        |(objects, as_list, _)| yaml_of(objects, *as_list).into_bytes(),
        "yaml",
        |(objects, as_list, which)| {
            // Each object alone (a denial must leave it untouched), then all of them together.
            for object in objects {
                offline.check(*which, &yaml_of(std::slice::from_ref(object), false))?;
            }
            offline.check(*which, &yaml_of(objects, *as_list))
        },
    );
    eprintln!("fuzz: generated YAML: {}", offline.outcomes.summary());
}

#[test]
fn mutated_yaml_through_inject() {
    let offline = Offline::new();
    let seeds = yaml_seeds();
    let text = prop_oneof![
        2 => (select(seeds), edits()).prop_map(|(seed, edits)| mutate(seed.as_bytes(), &edits)),
        1 => (generate::object(), edits()).prop_map(|((_, object), edits)| {
            mutate(yaml_of(&[object], false).as_bytes(), &edits)
        }),
        1 => "[ -~\n\t:{}\\[\\]#&*!|>'\"%@`,-]{0,200}".prop_map(String::into_bytes),
    ];
    fuzz(
        "inject",
        budget(),
        (text, 0usize..3),
        |(bytes, _)| bytes.clone(),
        "yaml",
        |(bytes, which)| offline.check(*which, &String::from_utf8_lossy(bytes)),
    );
    eprintln!("fuzz: mutated YAML: {}", offline.outcomes.summary());
}

#[test]
fn every_crash_fixture_and_seed_still_holds() {
    let webhooks = Webhooks::new();
    let offline = Offline::new();
    let mut checked = 0;
    let reviews = fixtures("review").into_iter().map(|p| {
        (
            p.display().to_string(),
            std::fs::read(p).expect("a fixture"),
        )
    });
    let seeds = review_seeds().into_iter().map(|s| ("seed".to_owned(), s));
    for (name, body) in reviews.chain(seeds) {
        for which in 0..3 {
            if let Err(err) = webhooks.check(which, &body) {
                panic!("{name} (set-up {which}): {err}");
            }
        }
        checked += 1;
    }
    let texts = fixtures("inject").into_iter().map(|p| {
        (
            p.display().to_string(),
            std::fs::read(p).expect("a fixture"),
        )
    });
    let seeds = yaml_seeds()
        .into_iter()
        .map(|s| ("seed".to_owned(), s.into_bytes()));
    for (name, text) in texts.chain(seeds) {
        for which in 0..3 {
            if let Err(err) = offline.check(which, &String::from_utf8_lossy(&text)) {
                panic!("{name} (variant {which}): {err}");
            }
        }
        checked += 1;
    }
    assert!(checked > 50, "only {checked} inputs replayed");
}
