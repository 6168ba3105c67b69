//! Golden tests of `reload-injector status`'s pure report: every `tests/fixtures/status/*.yaml`
//! case (the objects a run would read, and the reads that failed) is reported and rendered,
//! and the text and JSON compared with `*.golden.txt` and `*.golden.json` beside it.
//!
//! Refresh the goldens on purpose with `UPDATE_GOLDEN=1 cargo test --test status offline::golden`, then
//! read the diff. A golden without a case, or a case without its goldens, fails. Every finding
//! code must be shown by some case.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::status_support;
use k8s_openapi::jiff::Timestamp;

use reload_injector::status::findings::Code;
use reload_injector::status::target_arg::{Kind, Target};
use reload_injector::status::{config_report, render, summary, workload_report};
use serde::Deserialize;
use serde_json::Value;
use status_support::assemble;

const DIR: &str = "tests/fixtures/status";

/// One case file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Case {
    /// What the case shows (for people).
    #[allow(dead_code)]
    description: String,
    /// When the reads were made.
    now: String,
    /// `deploy/web`, or none for the summary.
    target: Option<String>,
    /// The namespace looked at (`None` with no target: every namespace).
    namespace: Option<String>,
    /// Reads that failed, with the reason (see `assemble`).
    #[serde(default)]
    failed: BTreeMap<String, String>,
    /// `config-reloader` logs by `namespace/pod`.
    #[serde(default)]
    logs: BTreeMap<String, String>,
    /// The objects in the cluster.
    objects: Vec<Value>,
}

/// The text and JSON of a case, its finding codes and its exit code.
fn run(case: &Case) -> (String, String, Vec<String>) {
    let now: Timestamp = case.now.parse().expect("now is RFC 3339");
    let snapshot = assemble(now, &case.objects, &case.failed, &case.logs).expect("objects read");
    match &case.target {
        Some(target) => {
            let target = Target::parse(target).expect("target parses");
            let ns = case.namespace.as_deref().unwrap_or("default");
            if matches!(target.kind, Kind::ConfigMap | Kind::Secret) {
                let report = config_report::config(&snapshot, target.kind, ns, &target.name)
                    .expect("the target is among the objects");
                let code = u8::from(!report.findings.is_empty());
                let codes = report.findings.iter().map(|f| f.code.to_string()).collect();
                return (
                    render::config_text(&report),
                    render::json(&report, code),
                    codes,
                );
            }
            let report = workload_report::workload(&snapshot, target.kind, ns, &target.name)
                .expect("the target is among the objects");
            let code = u8::from(!report.findings.is_empty());
            let codes = report.findings.iter().map(|f| f.code.to_string()).collect();
            (render::text(&report), render::json(&report, code), codes)
        }
        None => {
            let summary = summary::summary(&snapshot, case.namespace.as_deref());
            let code = u8::from(summary.has_findings());
            let codes = summary
                .workloads
                .iter()
                .flat_map(|w| w.findings.iter().map(|c| c.to_string()))
                .collect();
            (
                render::summary_text(&summary),
                render::json(&summary, code),
                codes,
            )
        }
    }
}

fn cases() -> Vec<PathBuf> {
    let mut cases: Vec<PathBuf> = std::fs::read_dir(DIR)
        .expect("fixture dir")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| {
            p.extension().is_some_and(|e| e == "yaml") && !p.to_string_lossy().contains(".golden.")
        })
        .collect();
    cases.sort();
    cases
}

fn golden(case: &Path, ext: &str) -> PathBuf {
    case.with_extension(format!("golden.{ext}"))
}

#[test]
fn every_case_matches_its_goldens() {
    let update = std::env::var_os("UPDATE_GOLDEN").is_some();
    let mut failures = Vec::new();
    let mut shown = BTreeSet::new();
    let cases = cases();
    assert!(cases.len() >= 10, "only {} cases", cases.len());
    for path in &cases {
        let text = std::fs::read_to_string(path).expect("read case");
        let case: Case =
            serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let (text, json, codes) = run(&case);
        shown.extend(codes);
        for (ext, got) in [("txt", &text), ("json", &json)] {
            let file = golden(path, ext);
            if update {
                std::fs::write(&file, got).expect("write golden");
                continue;
            }
            match std::fs::read_to_string(&file) {
                Ok(want) if want == *got => {}
                Ok(want) => failures.push(format!(
                    "{}: differs from {}\n--- want\n{want}\n--- got\n{got}",
                    path.display(),
                    file.display()
                )),
                Err(_) => failures.push(format!("{}: no {}", path.display(), file.display())),
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    // No case shows refresh-stopped yet (it needs a ConfigChanged Event from a stopped wave).
    let unshown: Vec<_> = (Code::ALL.iter())
        .filter(|c| **c != Code::RefreshStopped && !shown.contains(c.as_str()))
        .collect();
    assert!(unshown.is_empty(), "no case shows {unshown:?}");
}

#[test]
fn every_golden_has_its_case() {
    for entry in std::fs::read_dir(DIR).expect("fixture dir") {
        let path = entry.expect("dir entry").path();
        let name = path.to_string_lossy().into_owned();
        if let Some(stem) = name
            .strip_suffix(".golden.txt")
            .or_else(|| name.strip_suffix(".golden.json"))
        {
            assert!(
                Path::new(&format!("{stem}.yaml")).exists(),
                "{name} has no case"
            );
        }
    }
}

/// No value of a ConfigMap or Secret ever appears in a report.
#[test]
fn no_value_appears_in_any_report() {
    for path in cases() {
        let text = std::fs::read_to_string(&path).expect("read case");
        let case: Case = serde_saphyr::from_str(&text).expect("case parses");
        let (text, json, _) = run(&case);
        for object in &case.objects {
            if !matches!(object["kind"].as_str(), Some("ConfigMap" | "Secret")) {
                continue;
            }
            for field in ["data", "stringData"] {
                for value in object[field]
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(_, v)| v)
                {
                    let value = value.as_str().unwrap_or_default();
                    if value.len() >= 6 {
                        assert!(
                            !text.contains(value) && !json.contains(value),
                            "{}: a value appears in the report",
                            path.display()
                        );
                    }
                }
            }
        }
    }
}

/// Objects the core cannot read are reported as far as they can be; nothing panics.
#[test]
fn odd_objects_are_reported_never_panicked_on() {
    let now: Timestamp = "2026-11-24T12:00:00Z".parse().unwrap();
    let odd_templates = [
        serde_json::json!(null),
        serde_json::json!("a string"),
        serde_json::json!({"spec": null}),
        serde_json::json!({"spec": {"containers": null, "volumes": [{}]}}),
        serde_json::json!({"metadata": {"annotations": {"reload-injector.io/config-hash": 7}},
            "spec": {"containers": [{"env": [{"valueFrom": {"configMapKeyRef": {}}}],
                                     "volumeMounts": [{"subPath": "x"}]}],
                     "volumes": [{"name": "", "projected": {"sources": null}}]}}),
        serde_json::json!({"spec": {"containers": [{"name": "a", "envFrom": [{}, {"secretRef": null}]}]}}),
    ];
    for kind in ["Deployment", "CronJob", "StatefulSet"] {
        for template in &odd_templates {
            let objects = vec![
                serde_json::json!({"kind": "Namespace", "metadata": {"name": "shop"}}),
                serde_json::json!({"kind": kind, "metadata": {"name": "odd", "namespace": "shop"},
                    "spec": {"selector": "all", "template": template,
                             "jobTemplate": {"spec": {"template": template}}}}),
                serde_json::json!({"kind": "Pod", "metadata": {"name": "p", "namespace": "shop",
                    "labels": {"app": 1}, "ownerReferences": "x"}, "spec": 7, "status": []}),
            ];
            let snapshot =
                assemble(now, &objects, &BTreeMap::new(), &BTreeMap::new()).expect("assembled");
            let kind = reload_injector::status::target_arg::Kind::parse(kind).unwrap();
            let report = workload_report::workload(&snapshot, kind, "shop", "odd").expect("found");
            render::text(&report);
            render::json(&report, 1);
            let summary = summary::summary(&snapshot, None);
            assert_eq!(summary.workloads.len(), 1);
        }
    }
}

/// The examples in docs/status.md are what the goldens hold: every line of its text blocks
/// (but the command lines) is a line of some golden report.
#[test]
fn the_docs_examples_are_golden_lines() {
    let docs = std::fs::read_to_string("docs/status.md").expect("docs/status.md");
    let mut golden_lines = BTreeSet::new();
    for entry in std::fs::read_dir(DIR).expect("fixture dir") {
        let path = entry.expect("dir entry").path();
        if path.to_string_lossy().ends_with(".golden.txt") {
            let text = std::fs::read_to_string(&path).expect("golden");
            golden_lines.extend(text.lines().map(str::to_owned));
        }
    }
    let mut checked = 0;
    for block in docs.split("```text\n").skip(1) {
        let block = block.split("```").next().unwrap_or_default();
        for line in block
            .lines()
            .filter(|l| !l.starts_with("$ ") && !l.is_empty())
        {
            assert!(
                golden_lines.contains(line),
                "docs/status.md: not in any golden: {line}"
            );
            checked += 1;
        }
    }
    assert!(checked > 40, "only {checked} lines checked");
}
