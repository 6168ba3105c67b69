//! The JSON side: where the pod template lives in each kind, reading string maps, and the
//! few edits the core makes (annotations, containers, `shareProcessNamespace`). Everything
//! else in the object is left exactly as it came.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

/// What kind of object is under review.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workload {
    /// A Pod: handled on CREATE; the sidecar goes here.
    Pod,
    /// A workload with a pod template at this JSON pointer: handled on CREATE and UPDATE.
    Template(&'static str),
}

impl Workload {
    /// The kinds the product handles; anything else is admitted untouched.
    pub fn classify(group: &str, kind: &str) -> Option<Self> {
        match (group, kind) {
            ("", "Pod") => Some(Workload::Pod),
            ("apps", "Deployment" | "StatefulSet" | "DaemonSet" | "ReplicaSet")
            | ("batch", "Job") => Some(Workload::Template("/spec/template")),
            ("batch", "CronJob") => Some(Workload::Template("/spec/jobTemplate/spec/template")),
            _ => None,
        }
    }

    /// JSON pointer of the pod (template) holding `metadata` and `spec`.
    pub fn pointer(self) -> &'static str {
        match self {
            Workload::Pod => "",
            Workload::Template(pointer) => pointer,
        }
    }
}

/// `metadata.<field>` of a pod (template) as a string map; non-string values are skipped.
pub fn string_map(pod: &Value, field: &str) -> BTreeMap<String, String> {
    pod.get("metadata")
        .and_then(|m| m.get(field))
        .and_then(Value::as_object)
        .map(|map| {
            map.iter()
                .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_owned())))
                .collect()
        })
        .unwrap_or_default()
}

/// Whether a Pod has a controlling owner (a ReplicaSet, Job, …) rather than a person.
pub fn has_controller(pod: &Value) -> bool {
    pod.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .is_some_and(|refs| {
            refs.iter()
                .any(|r| r.get("controller").and_then(Value::as_bool) == Some(true))
        })
}

/// `metadata.namespace` of an object, if set.
pub fn namespace(object: &Value) -> Option<&str> {
    object
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
}

/// Sets `metadata.annotations[key]`, creating the maps when absent.
pub fn set_annotation(pod: &mut Value, key: &str, value: &str) {
    set_metadata_entry(pod, "annotations", key, value);
}

/// Sets `metadata.labels[key]`, creating the maps when absent.
pub fn set_label(pod: &mut Value, key: &str, value: &str) {
    set_metadata_entry(pod, "labels", key, value);
}

fn set_metadata_entry(pod: &mut Value, map: &str, key: &str, value: &str) {
    let entries = child(child(as_object(pod), "metadata"), map);
    entries.insert(key.to_owned(), Value::String(value.to_owned()));
}

/// Removes `metadata.annotations[key]` if present.
pub fn remove_annotation(pod: &mut Value, key: &str) {
    if let Some(annotations) = pod
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)
    {
        annotations.remove(key);
    }
}

/// Appends `container` to `spec.<list>` (`containers` or `initContainers`).
pub fn push_container(pod: &mut Value, list: &str, container: Value) {
    let spec = child(as_object(pod), "spec");
    let entry = spec.entry(list).or_insert_with(|| Value::Array(Vec::new()));
    if !entry.is_array() {
        *entry = Value::Array(Vec::new());
    }
    if let Value::Array(items) = entry {
        items.push(container);
    }
}

/// Sets `spec.shareProcessNamespace: true`.
pub fn share_process_namespace(pod: &mut Value) {
    child(as_object(pod), "spec").insert("shareProcessNamespace".to_owned(), Value::Bool(true));
}

/// The fields of the pod (template) that the core may edit, relative to the pod.
pub const EDITABLE_FIELDS: [&[&str]; 5] = [
    &["metadata", "annotations"],
    &["metadata", "labels"],
    &["spec", "containers"],
    &["spec", "initContainers"],
    &["spec", "shareProcessNamespace"],
];

/// The editable fields that are lists the core only appends to ([`push_container`]).
const APPEND_ONLY: [&str; 2] = ["containers", "initContainers"];

/// A copy of `object` holding only what the core may edit: the objects down to the pod at
/// `pod_pointer`, and below it the [`EDITABLE_FIELDS`] that exist (what is absent stays absent).
/// The elements already in an append-only list are copied as `null` placeholders: the core
/// never edits them, so only their number matters to the diff.
///
/// Editing this copy and diffing it against an unedited one gives exactly the patch that
/// editing and diffing the whole object would, without copying and walking `managedFields`,
/// existing containers, volumes and everything else the core never touches.
pub fn editable_view(object: &Value, pod_pointer: &str) -> Value {
    let mut view = Value::Object(Map::new());
    let mut src = object;
    let mut dst = &mut view;
    for key in pod_pointer.split('/').skip(1) {
        let Some(next) = src.get(key) else {
            return view;
        };
        src = next;
        dst = as_object(dst)
            .entry(key)
            .or_insert(Value::Object(Map::new()));
    }
    for field in EDITABLE_FIELDS {
        copy_path(src, dst, field);
    }
    view
}

/// Copies `src` at `path` into `dst`, creating the objects on the way only where `src` has them.
fn copy_path(src: &Value, dst: &mut Value, path: &[&str]) {
    let Some((key, rest)) = path.split_first() else {
        return;
    };
    let Some(child) = src.get(*key) else { return };
    let dst = as_object(dst);
    if rest.is_empty() || !child.is_object() {
        let copy = match child {
            Value::Array(items) if rest.is_empty() && APPEND_ONLY.contains(key) => {
                Value::Array(vec![Value::Null; items.len()])
            }
            other => other.clone(),
        };
        dst.insert((*key).to_owned(), copy);
    } else {
        copy_path(
            child,
            dst.entry(*key).or_insert(Value::Object(Map::new())),
            rest,
        );
    }
}

/// `value` as an object, replaced by an empty one if it is anything else (`null`).
fn as_object(value: &mut Value) -> &mut Map<String, Value> {
    if !value.is_object() {
        *value = Value::Object(Map::new());
    }
    match value {
        Value::Object(map) => map,
        _ => unreachable!("made an object above"),
    }
}

/// `map[key]` as an object, created (or replacing `null`) when needed.
fn child<'v>(map: &'v mut Map<String, Value>, key: &str) -> &'v mut Map<String, Value> {
    as_object(map.entry(key).or_insert(Value::Null))
}
