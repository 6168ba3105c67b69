//! The mapping, case by case from `tests/fixtures/reloader/mapping.yaml` (each case cites the
//! Reloader documentation it follows).

use std::collections::BTreeMap;

use serde::Deserialize;

use super::*;
use crate::policy::{self, OptedInBy, Unmanaged, Verdict, WORKLOAD_OPT_IN};

const FIXTURE: &str = include_str!("../../../tests/fixtures/reloader/mapping.yaml");

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Fixture {
    cases: Vec<Case>,
    configs: Vec<ConfigCase>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Case {
    name: String,
    #[serde(default)]
    workload: Map,
    #[serde(default)]
    workload_labels: Map,
    #[serde(default)]
    pod: Map,
    #[serde(default)]
    pod_labels: Map,
    #[serde(default)]
    namespace_labelled: bool,
    #[serde(default = "yes")]
    retired: bool,
    verdict: String,
    #[serde(default)]
    counts: BTreeMap<String, String>,
    named: Option<Vec<String>>,
    #[serde(default)]
    bad_names: Vec<String>,
    #[serde(default)]
    unhonoured: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigCase {
    annotations: Map,
    ignored: bool,
    matched: bool,
}

fn yes() -> bool {
    true
}

fn verdict_name(verdict: &Verdict) -> &'static str {
    match verdict {
        Verdict::Managed { by, .. } => match by {
            OptedInBy::Namespace => "managed-by-namespace",
            OptedInBy::Annotation => "managed-by-annotation",
            OptedInBy::Reloader => "managed-by-reloader",
        },
        Verdict::LeftToReloader => "left-to-reloader",
        Verdict::Unmanaged(Unmanaged::OptedOut(_)) => "opted-out",
        Verdict::Unmanaged(Unmanaged::ReloaderSelectsNothing) => "selects-nothing",
        Verdict::Unmanaged(Unmanaged::NotOptedIn) => "not-opted-in",
    }
}

fn id(text: &str) -> ConfigId {
    match text.split_once('/') {
        Some(("ConfigMap", name)) => ConfigId::config_map(name),
        Some(("Secret", name)) => ConfigId::secret(name),
        _ => panic!("{text:?} is not Kind/name"),
    }
}

fn counts_name(counts: Counts) -> &'static str {
    match counts {
        Counts::Yes => "yes",
        Counts::IfMatched => "if-matched",
        Counts::No => "no",
    }
}

/// The pod template's annotations as the webhook leaves them: its own, and the workload's
/// opt-ins carried under `workload-opt-in`.
fn stamped(case: &Case) -> Map {
    let mut pod = case.pod.clone();
    if let Some(stamp) = policy::workload_opt_in(&case.workload_labels, &case.workload) {
        pod.insert(WORKLOAD_OPT_IN.to_owned(), stamp);
    }
    pod
}

#[test]
fn every_documented_case_maps_as_reloader_describes() {
    let fixture: Fixture = serde_saphyr::from_str(FIXTURE).expect("the fixture parses");
    assert!(fixture.cases.len() >= 30, "{} cases", fixture.cases.len());
    let mut failures = Vec::new();
    for case in &fixture.cases {
        let pod = stamped(case);
        let verdict = policy::verdict(
            case.namespace_labelled,
            &case.pod_labels,
            &pod,
            case.retired,
        );
        let mut check = |what: &str, got: String, want: String| {
            if got != want {
                failures.push(format!("{}: {what}: got {got}, want {want}", case.name));
            }
        };
        check(
            "verdict",
            verdict_name(&verdict).into(),
            case.verdict.clone(),
        );
        // What the controller keeps of it says the same.
        let (opt_ins, _) = policy::OptIns::read(&case.pod_labels, &pod);
        let acted_on = opt_ins.acted_on(case.namespace_labelled, case.retired);
        check(
            "acted on",
            acted_on.to_string(),
            verdict.managed().to_string(),
        );
        // What counts is the same whoever opted the pod in: the webhook and the controller
        // read it from the pod (template)'s annotations alone.
        let selection = policy::selection_of(&pod);
        if verdict.managed() {
            check(
                "selection",
                format!("{:?}", verdict.selection()),
                format!("{selection:?}"),
            );
        }
        for (object, want) in &case.counts {
            let got = counts_name(selection.counts(&id(object)));
            check(&format!("counts {object}"), got.into(), want.clone());
        }
        if let Some(named) = &case.named {
            let got: Vec<String> = selection
                .named()
                .iter()
                .map(|i| format!("{}/{}", i.kind, i.name))
                .collect();
            check("named", format!("{got:?}"), format!("{named:?}"));
        }
        let bad: Vec<&str> = selection.bad_names().into_iter().map(|(_, n)| n).collect();
        check(
            "bad names",
            format!("{bad:?}"),
            format!("{:?}", case.bad_names),
        );
        let unhonoured = super::unhonoured(&case.workload, &case.pod);
        check(
            "unhonoured",
            format!("{unhonoured:?}"),
            format!("{:?}", case.unhonoured),
        );
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn ignore_and_match_on_configs() {
    let fixture: Fixture = serde_saphyr::from_str(FIXTURE).expect("the fixture parses");
    for case in fixture.configs {
        let annotations = Some(&case.annotations);
        assert_eq!(policy::ignored(annotations), case.ignored, "{case:?}");
        assert_eq!(matched(annotations), case.matched, "{case:?}");
    }
}

#[test]
fn the_workload_stamp_holds_only_opt_ins_and_reads_back() {
    let labels = Map::from([("reload-injector.io/inject".into(), "enabled".into())]);
    let annotations = Map::from([
        (AUTO.into(), "true".into()),
        (
            "deployment.reloader.stakater.com/pause-period".into(),
            "5m".into(),
        ),
        ("team".into(), "shop".into()),
    ]);
    let stamp = policy::workload_opt_in(&labels, &annotations).expect("a stamp");
    assert_eq!(
        stamp,
        r#"{"reload-injector.io/inject":"enabled","reloader.stakater.com/auto":"true"}"#
    );
    let carried = policy::carried_opt_ins(&Map::from([(WORKLOAD_OPT_IN.into(), stamp)]));
    assert_eq!(carried.len(), 2);
    assert_eq!(policy::workload_opt_in(&Map::new(), &Map::new()), None);
    let garbage = Map::from([(WORKLOAD_OPT_IN.into(), "not json".into())]);
    assert!(policy::carried_opt_ins(&garbage).is_empty());
}

#[test]
fn keys_the_product_reads() {
    for key in [
        AUTO,
        SECRET_RELOAD,
        "deployment.reloader.stakater.com/pause-period",
    ] {
        assert!(is_key(key) && policy::reads_key(key), "{key}");
    }
    for key in ["reloader.example.com/auto", "stakater.com/auto", "app"] {
        assert!(!is_key(key) && !policy::reads_key(key), "{key}");
    }
    assert!(policy::reads_key(policy::INJECT));
}

#[test]
fn a_huge_pattern_selects_nothing_rather_than_taking_memory() {
    let list = format!("{}{{1000}}{{1000}}", "a".repeat(10));
    let workload = Map::from([(CONFIGMAP_RELOAD.into(), list)]);
    let selection = Selection::read(&workload, &Map::new()).expect("a selection");
    assert_eq!(selection.counts(&ConfigId::config_map("a")), Counts::No);
    assert_eq!(selection.bad_names().len(), 1);
}
