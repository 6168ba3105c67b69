//! The one-line-per-workload summary (no TARGET, or `-A`), problems first (pure): each line
//! is the full report of that workload, cut to its finding codes.

use std::collections::BTreeMap;

use serde::Serialize;

use super::common::meta_str;
use super::config_objects::Configs;
use super::findings::Code;
use super::hash_check::key_unreadable;
use super::snapshot::Snapshot;
use super::target::Kind;
use super::workload_report;

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
    /// `deploy`, `sts`, …
    pub kind_short: &'static str,
    pub name: String,
    /// The codes of its findings (empty: all current).
    pub findings: Vec<Code>,
}

/// The summary of every workload in `snapshot` (in `namespace`, or everywhere).
pub fn summary(snapshot: &Snapshot, namespace: Option<&str>) -> Summary {
    let mut configs: BTreeMap<&str, Configs> = BTreeMap::new();
    let mut lines: Vec<Line> = (snapshot.workload_objects(namespace))
        .map(|(kind, object)| {
            let ns = meta_str(object, "namespace").unwrap_or_default();
            let configs = configs
                .entry(ns)
                .or_insert_with(|| Configs::of(snapshot, ns));
            let report = workload_report::report_with(snapshot, kind, object, configs);
            let mut findings: Vec<Code> = Vec::new();
            for finding in report.findings {
                if !findings.contains(&finding.code) {
                    findings.push(finding.code);
                }
            }
            Line {
                namespace: report.namespace,
                kind,
                kind_short: kind.short(),
                name: report.name,
                findings,
            }
        })
        .collect();
    lines.sort_by(|a, b| order(a).cmp(&order(b)));
    let failed = super::target::WORKLOADS.iter().filter_map(|kind| {
        let reason = snapshot.workloads.get(kind)?.failure()?;
        Some(format!("could not read {}: {reason}", kind.plural()))
    });
    let mut notes: Vec<String> = failed.collect();
    notes.extend(snapshot.hash_key.failure().map(key_unreadable));
    notes.extend(snapshot.failed_reads());
    Summary {
        workloads: lines,
        notes,
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
