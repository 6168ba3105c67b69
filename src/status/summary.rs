//! The one-line-per-workload summary (no TARGET, or `-A`), problems first (pure): each line
//! is the full report of that workload, cut to its finding codes.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::common::meta_str;
use super::config_objects::Configs;
use super::findings::Code;
use super::snapshot::{Fetched, Snapshot};
use super::target::Kind;
use super::workload_report;

/// Every workload, problems first.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    /// One per workload.
    pub workloads: Vec<Line>,
    /// What could not be read.
    pub notes: Vec<String>,
}

/// One workload.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Line {
    /// Its namespace.
    pub namespace: String,
    /// Its kind.
    pub kind: Kind,
    /// `deploy`, `sts`, …
    pub kind_short: &'static str,
    /// Its name.
    pub name: String,
    /// The codes of its findings (empty: all current).
    pub findings: Vec<Code>,
}

/// The summary of every workload in `snapshot` (in `namespaces`, or everywhere).
pub fn summary(snapshot: &Snapshot, namespace: Option<&str>) -> Summary {
    let mut lines = Vec::new();
    let mut configs: BTreeMap<String, Configs> = BTreeMap::new();
    let mut notes = Vec::new();
    for kind in Kind::WORKLOADS {
        match snapshot.workloads.get(&kind) {
            None => {}
            Some(Fetched::Failed(reason)) => {
                notes.push(format!("could not read {}: {reason}", kind.resource().2))
            }
            Some(Fetched::Read(list)) => {
                for object in list {
                    let ns = meta_str(object, "namespace").unwrap_or_default();
                    if namespace.is_some_and(|n| n != ns) {
                        continue;
                    }
                    let configs = configs
                        .entry(ns.to_owned())
                        .or_insert_with(|| Configs::of(snapshot, ns));
                    let report = workload_report::report_with(snapshot, kind, object, configs);
                    let mut codes = Vec::new();
                    for finding in &report.findings {
                        if !codes.contains(&finding.code) {
                            codes.push(finding.code);
                        }
                    }
                    lines.push(Line {
                        namespace: ns.to_owned(),
                        kind,
                        kind_short: kind.short(),
                        name: meta_str(object, "name").unwrap_or_default().to_owned(),
                        findings: codes,
                    });
                }
            }
        }
    }
    lines.sort_by(|a, b| {
        a.findings
            .is_empty()
            .cmp(&b.findings.is_empty())
            .then_with(|| a.namespace.cmp(&b.namespace))
            .then_with(|| a.kind.cmp(&b.kind))
            .then_with(|| a.name.cmp(&b.name))
    });
    if let Some(reason) = snapshot.hash_key.failure() {
        notes.push(format!(
            "Secrets cannot be checked: the webhook's Secret-hash key cannot be read ({reason})"
        ));
    }
    let mut seen = BTreeSet::new();
    notes.extend(
        snapshot
            .failed_reads()
            .into_iter()
            .filter(|n| seen.insert(n.clone())),
    );
    Summary {
        workloads: lines,
        notes,
    }
}

impl Summary {
    /// Whether any workload has a finding.
    pub fn has_findings(&self) -> bool {
        self.workloads.iter().any(|w| !w.findings.is_empty())
    }
}
