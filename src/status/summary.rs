//! The one-line-per-workload summary (no TARGET, or `-A`): each workload's report cut to its
//! finding codes (pure).

use std::collections::BTreeMap;

use serde::Serialize;

use super::config_objects::Configs;
use super::findings::Code;
use super::hash_check::key_unreadable;
use super::meta_str;
use super::read_lines::OnChange;
use super::snapshot::Snapshot;
use super::target_arg::Kind;
use super::workload_report::{self, Report};
use crate::policy::RETIRED_FLAG;

/// Every workload, problems first.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    pub workloads: Vec<Line>,
    pub notes: Vec<String>,
}

/// One workload.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Line {
    pub namespace: String,
    pub kind: Kind,
    pub kind_short: &'static str,
    pub name: String,
    /// The codes of its findings (empty: all current).
    pub findings: Vec<Code>,
    pub opted_in_by: Option<&'static str>,
    pub reloader: Vec<String>,
    /// What it will get, in a few words, when it carries Reloader's annotations.
    pub will: Option<String>,
}

/// The summary of every workload in `snapshot` (in `namespace`, or everywhere).
pub fn summary(snapshot: &Snapshot, namespace: Option<&str>) -> Summary {
    let mut configs: BTreeMap<&str, Configs> = BTreeMap::new();
    let mut workloads: Vec<Line> = (snapshot.workload_objects(namespace))
        .map(|(kind, object)| {
            let ns = meta_str(object, "namespace").unwrap_or_default();
            let configs = configs
                .entry(ns)
                .or_insert_with(|| Configs::of(snapshot, ns));
            let report = workload_report::report_with(snapshot, kind, object, configs);
            let mut seen = std::collections::BTreeSet::new();
            let codes = report.findings.iter().map(|f| f.code);
            let findings: Vec<Code> = codes.filter(|code| seen.insert(*code)).collect();
            let will = (!report.opt_in.reloader.is_empty()).then(|| will(&report));
            Line {
                namespace: report.namespace,
                kind,
                kind_short: kind.short(),
                name: report.name,
                findings,
                opted_in_by: report.opt_in.opted_in_by,
                reloader: report.opt_in.reloader,
                will,
            }
        })
        .collect();
    workloads.sort_by(|a, b| order(a).cmp(&order(b)));
    let failed = super::target_arg::WORKLOADS.iter().filter_map(|kind| {
        let reason = snapshot.workloads.get(kind)?.failure()?;
        Some(format!("could not read {}: {reason}", kind.plural()))
    });
    let mut notes: Vec<String> = failed.collect();
    notes.extend(reloader_running(snapshot, namespace));
    notes.extend(snapshot.hash_key.failure().map(key_unreadable));
    notes.extend(snapshot.failed_reads());
    Summary { workloads, notes }
}

/// The Reloader controllers among the workloads read: while one runs, `--reloader-retired`
/// would let a change roll a workload twice.
fn reloader_running(snapshot: &Snapshot, namespace: Option<&str>) -> Vec<String> {
    let retired = super::install::reloader_retired(snapshot);
    snapshot
        .workload_objects(namespace)
        .filter(|(_, object)| {
            let pointer = "/spec/template/spec/containers";
            let containers = object.pointer(pointer).and_then(|c| c.as_array());
            containers.into_iter().flatten().any(|c| {
                c["image"]
                    .as_str()
                    .is_some_and(|image| image.contains("stakater/reloader"))
            })
        })
        .map(|(kind, object)| {
            let ns = meta_str(object, "namespace").unwrap_or_default();
            let name = meta_str(object, "name").unwrap_or_default();
            let what = format!("Reloader runs: {ns}/{}/{name}", kind.short());
            match retired {
                Some(true) => format!(
                    "{what}, while serve runs with {RETIRED_FLAG}: a change may roll a workload twice; remove Reloader or the flag"
                ),
                _ => format!("{what}; the workloads its annotations select are left to it"),
            }
        })
        .collect()
}

/// What a workload will get from reload-injector, in a few words.
fn will(report: &Report) -> String {
    if report.opt_in.left_to_reloader {
        return format!("left to Reloader until serve runs with {RETIRED_FLAG}, then rolled once");
    }
    let objects = |want: OnChange| -> Vec<String> {
        let mut names: Vec<String> = report
            .reads
            .iter()
            .filter(|r| r.effect.on_change == want)
            .map(|r| format!("{} {:?}", r.object_kind, r.object))
            .collect();
        names.dedup();
        names
    };
    let (rolls, reloads) = (objects(OnChange::Rollout), objects(OnChange::HotReload));
    let mut parts = Vec::new();
    if !rolls.is_empty() {
        parts.push(format!("rolls when {} changes", rolls.join(" or ")));
    }
    if !reloads.is_empty() {
        parts.push(format!("hot-reloads {} in place", reloads.join(" and ")));
    }
    if parts.is_empty() {
        "nothing: no ConfigMap or Secret it reads counts".to_owned()
    } else {
        parts.join("; ")
    }
}

/// Problems first, then by namespace, kind and name.
fn order(line: &Line) -> (bool, &str, Kind, &str) {
    let ok = line.findings.is_empty();
    (ok, &line.namespace, line.kind, &line.name)
}

impl Summary {
    /// Whether any workload has a finding.
    pub fn has_findings(&self) -> bool {
        self.workloads.iter().any(|w| !w.findings.is_empty())
    }
}
