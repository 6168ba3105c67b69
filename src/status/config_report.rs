//! The report on a ConfigMap or Secret (pure), from the reports of its namespace's workloads.

use std::collections::BTreeMap;

use serde::Serialize;

use super::config_objects::{Configs, Written};
use super::findings::Finding;
use super::read_lines::Effect;
use super::snapshot::Snapshot;
use super::target_arg::Kind;
use super::workload_report;
use crate::hash::ConfigId;

/// The report on one ConfigMap or Secret. Field names are the stable `-o json` form.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ConfigReport {
    pub kind: Kind,
    pub namespace: String,
    pub name: String,
    /// Annotated `reload-injector.io/ignore: "true"`: its changes never cause a write.
    pub ignored: bool,
    pub written: Option<Written>,
    /// One entry per key it has or that something reads, sorted.
    pub keys: Vec<KeyLine>,
    /// The findings of the workloads that read it, each naming the workload.
    pub findings: Vec<Finding>,
    pub notes: Vec<String>,
}

/// One key and what a change of it does.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct KeyLine {
    pub key: String,
    pub exists: bool,
    /// Who reads it; empty: a change does nothing.
    pub readers: Vec<ReaderLine>,
}

/// One container that reads a key.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReaderLine {
    /// `deploy/web`.
    pub workload: String,
    pub container: String,
    pub via: &'static str,
    #[serde(flatten)]
    pub effect: Effect,
}

/// The report on `kind` (ConfigMap or Secret) `name` in `namespace`, or `None` when not found.
pub fn config(
    snapshot: &Snapshot,
    kind: Kind,
    namespace: &str,
    name: &str,
) -> Option<ConfigReport> {
    let configs = Configs::of(snapshot, namespace);
    let id = match kind {
        Kind::Secret => ConfigId::secret(name),
        _ => ConfigId::config_map(name),
    };
    let seen = configs.get(&id)?;
    let keys = &seen.keys;
    let line = |key: &String, exists| KeyLine {
        key: key.clone(),
        exists,
        readers: Vec::new(),
    };
    let mut lines: BTreeMap<String, KeyLine> = (keys.iter())
        .map(|key| (key.clone(), line(key, true)))
        .collect();
    let mut findings = Vec::new();
    for (workload_kind, object) in snapshot.workload_objects(Some(namespace)) {
        let report = workload_report::report_with(snapshot, workload_kind, object, &configs);
        let workload = format!("{}/{}", workload_kind.short(), report.name);
        let reads = report.reads.iter();
        let mut reads = reads
            .filter(|r| r.object_kind == kind.name() && r.object == name)
            .peekable();
        if reads.peek().is_none() {
            continue;
        }
        for read in reads {
            let reader = ReaderLine {
                workload: workload.clone(),
                container: read.container.clone(),
                via: read.via,
                effect: read.effect.clone(),
            };
            for key in read.key.as_ref().map_or(&keys[..], std::slice::from_ref) {
                let entry = lines.entry(key.clone());
                let entry = entry.or_insert_with(|| line(key, false));
                entry.readers.push(reader.clone());
            }
        }
        for mut finding in report.findings {
            finding.message = format!("{workload}: {}", finding.message);
            findings.push(finding);
        }
    }
    Some(ConfigReport {
        kind,
        namespace: namespace.to_owned(),
        name: name.to_owned(),
        ignored: seen.ignored,
        written: configs.written(&id, snapshot.now),
        keys: lines.into_values().collect(),
        findings,
        notes: snapshot.failed_reads(),
    })
}
