//! The report on a ConfigMap or Secret (pure): who reads it, how, and what a change of each key
//! would do, from the reports of every workload in its namespace.

use std::collections::BTreeMap;

use serde::Serialize;

use super::common::meta_str;
use super::config_objects::{Configs, Written, data_written};
use super::findings::Finding;
use super::read_lines::OnChange;
use super::snapshot::{Fetched, Snapshot};
use super::target::Kind;
use super::workload_report;

/// The report on one ConfigMap or Secret. Field names are the stable `-o json` form.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ConfigReport {
    /// `ConfigMap` or `Secret`.
    pub kind: Kind,
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Annotated `reload-injector.io/ignore: "true"`: its changes never cause a write.
    pub ignored: bool,
    /// When its data was last written.
    pub written: Option<Written>,
    /// One entry per key it has or that something reads, sorted.
    pub keys: Vec<KeyLine>,
    /// The findings of the workloads that read it, each naming the workload.
    pub findings: Vec<Finding>,
    /// What could not be read.
    pub notes: Vec<String>,
}

/// One key and what a change of it does.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct KeyLine {
    /// The key.
    pub key: String,
    /// Whether the object has it.
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
    /// Container name.
    pub container: String,
    /// `env`, `envFrom`, `subPath`, `initSubPath` or `directory`.
    pub via: &'static str,
    /// What a change of it does.
    pub on_change: OnChange,
    /// Why.
    pub detail: String,
}

/// The report on `kind` (ConfigMap or Secret) `name` in `namespace`, or `None` when it does
/// not exist.
pub fn config(
    snapshot: &Snapshot,
    kind: Kind,
    namespace: &str,
    name: &str,
) -> Option<ConfigReport> {
    let in_namespace = |meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| {
        meta.namespace.as_deref() == Some(namespace) && meta.name.as_deref() == Some(name)
    };
    let (meta, keys): (_, Vec<String>) = match kind {
        Kind::ConfigMap => {
            let cm = snapshot
                .config_maps
                .ok()?
                .iter()
                .find(|c| in_namespace(&c.metadata))?;
            let keys = cm
                .data
                .iter()
                .flat_map(|d| d.keys())
                .chain(cm.binary_data.iter().flat_map(|d| d.keys()))
                .cloned()
                .collect();
            (cm.metadata.clone(), keys)
        }
        Kind::Secret => {
            let secret = snapshot
                .secrets
                .ok()?
                .iter()
                .find(|s| in_namespace(&s.metadata))?;
            (secret.metadata.clone(), secret.keys.clone())
        }
        _ => return None,
    };
    let object_kind = kind.name();
    let configs = Configs::of(snapshot, namespace);
    let mut lines: BTreeMap<String, KeyLine> = keys
        .iter()
        .map(|k| {
            let line = KeyLine {
                key: k.clone(),
                exists: true,
                readers: Vec::new(),
            };
            (k.clone(), line)
        })
        .collect();
    let mut findings = Vec::new();
    let mut notes = Vec::new();
    for workload_kind in Kind::WORKLOADS {
        let Some(Fetched::Read(list)) = snapshot.workloads.get(&workload_kind) else {
            continue;
        };
        for object in list
            .iter()
            .filter(|o| meta_str(o, "namespace") == Some(namespace))
        {
            let report = workload_report::report_with(snapshot, workload_kind, object, &configs);
            let workload = format!("{}/{}", workload_kind.short(), report.name);
            let mut reads_it = false;
            for read in report
                .reads
                .iter()
                .filter(|r| r.object_kind == object_kind && r.object == name)
            {
                reads_it = true;
                let reader = ReaderLine {
                    workload: workload.clone(),
                    container: read.container.clone(),
                    via: read.via,
                    on_change: read.on_change,
                    detail: read.detail.clone(),
                };
                let read_keys: Vec<String> = match &read.key {
                    Some(key) => vec![key.clone()],
                    None => keys.clone(),
                };
                for key in read_keys {
                    lines
                        .entry(key.clone())
                        .or_insert_with(|| KeyLine {
                            key,
                            exists: false,
                            readers: Vec::new(),
                        })
                        .readers
                        .push(reader.clone());
                }
            }
            if reads_it {
                for finding in report.findings {
                    findings.push(Finding::new(
                        finding.code,
                        format!("{workload}: {}", finding.message),
                        finding.fix,
                    ));
                }
            }
        }
    }
    notes.extend(snapshot.failed_reads());
    let written = data_written(&meta)
        .map(|at| Written::new(object_kind.to_owned(), name.to_owned(), at, snapshot.now));
    let ignored = configs
        .get(&match kind {
            Kind::Secret => crate::hash::ConfigId::secret(name),
            _ => crate::hash::ConfigId::config_map(name),
        })
        .is_some_and(|s| s.ignored);
    Some(ConfigReport {
        kind,
        namespace: namespace.to_owned(),
        name: name.to_owned(),
        ignored,
        written,
        keys: lines.into_values().collect(),
        findings,
        notes,
    })
}
