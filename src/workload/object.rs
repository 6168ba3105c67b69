//! The JSON side: where the pod template lives in each kind, and the few edits the core makes
//! (annotations, labels, containers, volumes, `shareProcessNamespace`). Everything else in the
//! object is left exactly as it came.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::kinds::Kind;

/// What kind of object is under review.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workload {
    /// A Pod: handled on CREATE; the sidecar goes here.
    Pod,
    /// A workload with a pod template at this JSON pointer: handled on CREATE and UPDATE.
    Template(&'static str),
    /// An Argo Rollout (`argoproj.io`): a workload whose template is at `/spec/template`, or
    /// which names a Deployment in `spec.workloadRef` instead. One the core cannot read is
    /// admitted unchanged with a warning, never denied: Argo's own validation judges it.
    Rollout,
}

impl Workload {
    /// The kinds the product handles ([`crate::kinds`]); anything else is admitted untouched.
    pub fn classify(group: &str, kind: &str) -> Option<Self> {
        match Kind::of(group, kind)? {
            Kind::Pod => Some(Workload::Pod),
            Kind::Rollout => Some(Workload::Rollout),
            kind => kind.pod_pointer().map(Workload::Template),
        }
    }

    /// The kinds [`Workload::classify`] knows, Pod first, for messages (their API groups are in
    /// the README).
    pub fn known() -> Vec<&'static str> {
        let mut known = vec![Kind::Pod.name()];
        known.extend(
            Kind::ALL
                .into_iter()
                .filter(|k| *k != Kind::Pod && k.pod_pointer().is_some())
                .map(Kind::name),
        );
        known
    }

    /// JSON pointer of the pod (template) holding `metadata` and `spec`.
    pub fn pointer(self) -> &'static str {
        match self {
            Workload::Pod => "",
            Workload::Template(pointer) => pointer,
            Workload::Rollout => "/spec/template",
        }
    }

    /// Whether the pod is a template (a workload, handled on CREATE and UPDATE), not a Pod.
    pub fn is_template(self) -> bool {
        self != Workload::Pod
    }

    /// Whether a review may read the object for its pod (template) alone; a Rollout is kept as
    /// sent (one without a template is told apart by its `workloadRef`).
    pub fn read_for_pod_alone(self) -> bool {
        self != Workload::Rollout
    }
}

/// `metadata.<field>` (`annotations`, `labels`) of an object as a string map; non-string values
/// are skipped.
pub fn string_map(object: &Value, field: &str) -> BTreeMap<String, String> {
    object
        .get("metadata")
        .and_then(|m| m.get(field))
        .and_then(Value::as_object)
        .map(|map| {
            map.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                .collect()
        })
        .unwrap_or_default()
}

/// Sets `metadata.<map>[key]` (`map`: `annotations` or `labels`), creating the maps when absent.
pub fn set_entry(pod: &mut Value, map: &str, key: &str, value: &str) {
    let entries = child(child(as_object(pod), "metadata"), map);
    entries.insert(key.to_owned(), Value::String(value.to_owned()));
}

/// Removes `metadata.<map>[key]` if present.
pub fn remove_entry(object: &mut Value, map: &str, key: &str) {
    if let Some(entries) = object
        .get_mut("metadata")
        .and_then(|m| m.get_mut(map))
        .and_then(Value::as_object_mut)
    {
        entries.remove(key);
    }
}

/// Appends `item` to the list `spec.<list>` (`containers`, `initContainers`, `volumes`), made
/// when absent (or `null`).
pub fn push_to_spec(pod: &mut Value, list: &str, item: Value) {
    let spec = child(as_object(pod), "spec");
    let entry = spec.entry(list).or_insert(Value::Null);
    if !entry.is_array() {
        *entry = Value::Array(Vec::new());
    }
    entry.as_array_mut().expect("made a list above").push(item);
}

/// Sets `spec.shareProcessNamespace: true`.
pub fn share_process_namespace(pod: &mut Value) {
    child(as_object(pod), "spec").insert("shareProcessNamespace".to_owned(), Value::Bool(true));
}

/// `value` as an object, replaced by an empty one if it is anything else (`null`).
fn as_object(value: &mut Value) -> &mut Map<String, Value> {
    if !value.is_object() {
        *value = Value::Object(Map::new());
    }
    value.as_object_mut().expect("made an object above")
}

/// `map[key]` as an object, created (or replacing `null`) when needed.
fn child<'v>(map: &'v mut Map<String, Value>, key: &str) -> &'v mut Map<String, Value> {
    as_object(map.entry(key).or_insert(Value::Null))
}
