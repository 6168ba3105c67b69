//! The report on one workload (pure), part by part in the order it reads, with findings.

use std::collections::BTreeMap;

use k8s_openapi::jiff::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::config_objects::Configs;
use super::findings::{Code, Finding};
use super::hash_check::{HashCheck, HashState, hash_check, hash_key, stale_finding};
use super::install::{self, Installation, OptIn};
use super::pods::{self, Pods};
use super::read_lines::{Judging, ReadLine, mode_text, read_findings, read_lines};
use super::snapshot::Snapshot;
use super::target_arg::Kind;
use super::{meta_str, seconds_between};
use crate::controller::waves::REFRESH_STOPPED;
use crate::policy::{self, WORKLOAD_OPT_IN};
use crate::workload::consumption;
use crate::workload::explain::{self, Explained};
use crate::workload::in_place::RESTARTS_STOPPED;
use crate::workload::pod::PodSpec;
use crate::workload::strategy::Consequence;
use crate::workload::{CONFIG_HASH, MANAGED_LABEL};
use crate::workload::{Workload as Classified, string_map};

/// The whole report on one workload. Field names are the stable `-o json` form.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    pub kind: Kind,
    pub namespace: String,
    pub name: String,
    pub opt_in: OptIn,
    pub installation: Installation,
    pub reads: Vec<ReadLine>,
    /// How the sidecar reloads the app, when one would be injected.
    pub reload: Option<String>,
    pub hash: HashCheck,
    /// The last `ConfigChanged` Events on it, newest first.
    pub events: Vec<EventLine>,
    pub pods: Pods,
    /// What keeps changes from reaching the pods; empty when all is well.
    pub findings: Vec<Finding>,
    /// What could not be checked, and why (reads that failed, Secrets without the key).
    pub notes: Vec<String>,
}

/// One `ConfigChanged` Event.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EventLine {
    /// Last seen, RFC 3339.
    pub at: Option<String>,
    pub seconds_ago: Option<i64>,
    /// Names objects and keys, never a value.
    pub message: String,
}

/// The report on the workload (or Pod, its own template) `kind`/`name` in `namespace`.
pub fn workload(snapshot: &Snapshot, kind: Kind, namespace: &str, name: &str) -> Option<Report> {
    let objects = match kind {
        Kind::Pod => snapshot.pods.ok()?,
        _ => snapshot.workloads.get(&kind)?.ok()?,
    };
    let object = objects.iter().find(|o| {
        meta_str(o, "namespace") == Some(namespace) && meta_str(o, "name") == Some(name)
    })?;
    let configs = Configs::of(snapshot, namespace);
    Some(report_with(snapshot, kind, object, &configs))
}

/// The report on `object`, a `kind` workload, with its namespace's `configs` (a summary lays
/// them out once per namespace).
pub fn report_with(snapshot: &Snapshot, kind: Kind, object: &Value, configs: &Configs) -> Report {
    let workload = Workload::new(snapshot, kind, object, configs);
    let metas = [
        &workload.labels,
        &workload.annotations,
        &workload.own_annotations,
    ];
    let (opt_in, mut findings) = install::opt_in(snapshot, workload.namespace, metas);
    let (installation, install_findings, mut notes) = install::installation(snapshot);
    findings.extend(install_findings);
    let core = workload.explain(&mut notes, &mut findings);
    let stamped = workload.annotations.get(CONFIG_HASH).cloned();
    let explained = core.as_ref().map(|c| &c.explained);
    let (key, key_note) = hash_key(snapshot, explained, configs, stamped.as_deref());
    notes.extend(key_note);
    let active = opt_in.opted_in && opt_in.opted_out_by.is_none();
    let selection = policy::selection_of(&workload.annotations);
    let (reads, reload, hash) = match &core {
        Some(core) => {
            let judging = Judging {
                kind,
                consequence: core.consequence,
                key,
                stamped: stamped.is_some(),
                active,
                selection: &selection,
            };
            workload.consumed(core, &judging, stamped, &mut findings)
        }
        // Nothing known: the template could not be explained.
        None => {
            let secrets_checked = key.checks_secrets();
            let hash = HashCheck {
                stamped,
                secrets_checked,
                ..HashCheck::default()
            };
            (Vec::new(), None, hash)
        }
    };
    if hash.state == HashState::Stale {
        findings.push(stale_finding(kind, &hash, installation.controller_running));
    }
    let events = workload.events();
    findings.extend(workload.refresh_stopped(&events));
    let sidecar = explained.is_some_and(|e| e.watcher.is_some()) && active;
    let stamped = workload.annotations.get(CONFIG_HASH).map(String::as_str);
    let (pods, pod_findings) = pods::pods(snapshot, kind, object, configs, key, stamped, sidecar);
    findings.extend(pod_findings);
    notes.extend(snapshot.failed_reads());
    Report {
        kind,
        namespace: workload.namespace.to_owned(),
        name: workload.name.to_owned(),
        opt_in,
        installation,
        reads,
        reload,
        hash,
        events,
        pods,
        findings,
        notes,
    }
}

/// The workload being judged, with its pod template's labels and annotations.
struct Workload<'a> {
    snapshot: &'a Snapshot,
    kind: Kind,
    object: &'a Value,
    configs: &'a Configs,
    namespace: &'a str,
    name: &'a str,
    template: Option<&'a Value>,
    /// The pod template's, with the workload's own opt-ins carried as the webhook copies them.
    annotations: BTreeMap<String, String>,
    labels: BTreeMap<String, String>,
    /// The workload's own `metadata` annotations (empty for a Pod).
    own_annotations: BTreeMap<String, String>,
}

/// The pod template as the core reads it.
struct Core {
    spec: PodSpec,
    explained: Explained,
    consequence: Consequence,
}

impl<'a> Workload<'a> {
    fn new(snapshot: &'a Snapshot, kind: Kind, object: &'a Value, configs: &'a Configs) -> Self {
        let template = object.pointer(kind.pod_pointer().unwrap_or_default());
        let map = |field| template.map(|t| string_map(t, field)).unwrap_or_default();
        let own = |field| match kind {
            Kind::Pod => BTreeMap::new(),
            _ => string_map(object, field),
        };
        let (own_labels, own_annotations) = (own("labels"), own("annotations"));
        let mut annotations = map("annotations");
        if kind != Kind::Pod {
            // What the webhook copies onto the template at the workload's next admission.
            match policy::workload_opt_in(&own_labels, &own_annotations) {
                Some(stamp) => annotations.insert(WORKLOAD_OPT_IN.to_owned(), stamp),
                None => annotations.remove(WORKLOAD_OPT_IN),
            };
        }
        Workload {
            snapshot,
            kind,
            object,
            configs,
            namespace: meta_str(object, "namespace").unwrap_or_default(),
            name: meta_str(object, "name").unwrap_or_default(),
            template,
            annotations,
            labels: map("labels"),
            own_annotations,
        }
    }

    /// What the pod template reads and what the sidecar would do, by the webhook's own
    /// [`explain::explain`]; else a note (a Rollout's `workloadRef`) or a finding.
    fn explain(&self, notes: &mut Vec<String>, findings: &mut Vec<Finding>) -> Option<Core> {
        let Some(template) = self.template else {
            let workload_ref = self.object.pointer("/spec/workloadRef/name");
            match workload_ref.and_then(Value::as_str).filter(|_| self.kind == Kind::Rollout) {
                Some(deployment) => notes.push(format!(
                    "its pod template is Deployment {deployment:?}'s (workloadRef): reload-injector stamps that one; \
                     run status deploy/{deployment} for it"
                )),
                None => findings.push(Finding::new(
                    Code::UnreadableSpec,
                    format!("no pod template at {}", self.kind.pod_pointer().unwrap_or_default()),
                    "nothing: reload-injector cannot act on it either",
                )),
            }
            return None;
        };
        let spec = match PodSpec::deserialize(template.get("spec").unwrap_or(&Value::Null)) {
            Ok(spec) => spec,
            Err(err) => {
                findings.push(Finding::new(
                    Code::UnreadableSpec,
                    format!("the pod template cannot be read: {err}"),
                    "fix the pod spec; reload-injector cannot act on it either",
                ));
                return None;
            }
        };
        let kind = self.kind.name();
        let consequence = Classified::classify(self.kind.group(), kind)
            .map_or(Consequence::Rolls, |w| {
                Consequence::of(kind, w, self.controlled(), &spec)
            });
        let explained = explain::explain(&self.annotations, &spec, true);
        Some(Core {
            spec,
            explained,
            consequence,
        })
    }

    /// Sections 3 and 4, their findings (but `stale`, which needs the installation) into `findings`.
    fn consumed(
        &self,
        core: &Core,
        judging: &Judging<'_>,
        stamped: Option<String>,
        findings: &mut Vec<Finding>,
    ) -> (Vec<ReadLine>, Option<String>, HashCheck) {
        let explained = &core.explained;
        let earlier = || consumption::restart_only_earlier(&core.spec, &self.annotations);
        let reads = read_lines(explained, self.configs, judging);
        findings.extend(read_findings(&reads));
        // A stamp (and the label the controller watches stamps by) matters only where a change
        // rolls the pods: the next Job, or a new pod, reads the data as it is then.
        if judging.active && judging.consequence == Consequence::Rolls {
            findings.extend(self.stamp_findings(explained, judging.stamped));
        }
        let reload = explained.watcher.as_ref().map(|w| mode_text(&w.mode));
        let (snapshot, configs, key) = (self.snapshot, self.configs, &judging.key);
        let hash = hash_check(snapshot, explained, configs, key, stamped, earlier);
        (reads, reload, hash)
    }

    /// `not-stamped` and `not-watched`, for an active workload.
    fn stamp_findings(&self, explained: &Explained, stamped: bool) -> Vec<Finding> {
        let (kind, name, namespace) = (self.kind, self.name, self.namespace);
        let short = kind.short();
        let mut findings = Vec::new();
        if !stamped && !explained.restart_only.is_empty() {
            findings.push(Finding::new(
                Code::NotStamped,
                format!(
                    "the pod template has no {CONFIG_HASH}: a change of what it reads through env never rolls it"
                ),
                match kind {
                    Kind::Pod => "recreate it (through its workload) in an opted-in namespace".to_owned(),
                    _ => format!(
                        "send it through the webhook once: kubectl rollout restart {short}/{name} -n {namespace}"
                    ),
                },
            ));
        }
        let labels = string_map(self.object, "labels");
        let watched = labels.get(MANAGED_LABEL).map(String::as_str) == Some("true");
        if kind != Kind::Pod && stamped && !watched {
            findings.push(Finding::new(
                Code::NotWatched,
                format!(
                    "it carries a {CONFIG_HASH} but not the label {MANAGED_LABEL}=true (stamped by an \
                     earlier version): the controller does not watch it, so a change of what it reads never rolls it"
                ),
                format!(
                    "label it once (or re-apply it: the webhook labels it): kubectl label {short}/{name} -n {namespace} {MANAGED_LABEL}=true"
                ),
            ));
        }
        findings
    }

    /// Whether a controller made it.
    fn controlled(&self) -> bool {
        let owners = self.object.pointer("/metadata/ownerReferences");
        let mut owners = owners.and_then(Value::as_array).into_iter().flatten();
        owners.any(|owner| owner["controller"] == true)
    }

    /// The last three `ConfigChanged` Events on it, newest first.
    fn events(&self) -> Vec<EventLine> {
        let now = self.snapshot.now;
        let list = self.snapshot.events.ok().into_iter().flatten();
        let mut events: Vec<(Option<Timestamp>, EventLine)> = list
            .filter(|e| {
                e.reason.as_deref() == Some("ConfigChanged")
                    && e.involved_object.kind.as_deref() == Some(self.kind.name())
                    && e.involved_object.name.as_deref() == Some(self.name)
                    && e.metadata.namespace.as_deref() == Some(self.namespace)
            })
            .map(|e| {
                let last = e.last_timestamp.as_ref().map(|t| t.0);
                let at = last.or(e.event_time.as_ref().map(|t| t.0));
                let at = at.or(e.first_timestamp.as_ref().map(|t| t.0));
                let line = EventLine {
                    at: at.map(|t| t.to_string()),
                    seconds_ago: at.map(|t| seconds_between(t, now)),
                    message: e.message.clone().unwrap_or_default(),
                };
                (at, line)
            })
            .collect();
        events.sort_by_key(|e| std::cmp::Reverse(e.0));
        events.into_iter().take(3).map(|(_, line)| line).collect()
    }

    /// `refresh-stopped` when the newest Event says a refresh in waves stopped.
    fn refresh_stopped(&self, events: &[EventLine]) -> Option<Finding> {
        let stop = events.first().filter(|e| {
            e.message.contains(REFRESH_STOPPED) || e.message.contains(RESTARTS_STOPPED)
        })?;
        let namespace = self.namespace;
        Some(Finding::new(
            Code::RefreshStopped,
            format!(
                "{}/{}: the last refresh of its config stopped: {}",
                self.kind.short(),
                self.name,
                stop.message
            ),
            format!(
                "check why the pod went unready (kubectl describe pod -n {namespace}); the next config change refreshes the rest"
            ),
        ))
    }
}
