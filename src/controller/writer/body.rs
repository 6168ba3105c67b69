//! Pure builders for what the writer sends: the PATCH of one annotation and the Event.

use json_patch::{Patch, PatchOperation, TestOperation};
use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use serde_json::{Map, Value, json};

use crate::controller::target::Write;

/// The component name on Events and the field manager on patches.
pub const COMPONENT: &str = "reload-injector";
/// The Event reason for a rollout.
pub const REASON: &str = "ConfigChanged";

/// The PATCH of one annotation.
#[derive(Debug, Clone, PartialEq)]
pub enum AnnotationPatch {
    /// A JSON patch starting with a `test` of the value the view showed, so it applies only
    /// while the annotation is unchanged.
    Guarded(Patch),
    /// A JSON merge patch adding the annotation, for an object that has none yet: there is no
    /// value to `test`, and a merge patch creates a missing annotations map while keeping every
    /// other annotation.
    Add(Value),
    /// Nothing to change.
    Unchanged,
}

/// The PATCH of `write`: its annotation from `expected` to `desired`, made by editing a copy of
/// a skeleton (and, with `expected`, diffing the two).
pub fn write_patch(write: &Write) -> AnnotationPatch {
    let (annotation, expected) = (write.annotation, write.expected.as_deref());
    let pointer = format!("{}/metadata/annotations", write.target.kind.pod_pointer());
    let before = skeleton(&pointer, annotation, expected);
    let mut after = before.clone();
    if let Some(annotations) = after.pointer_mut(&pointer).and_then(Value::as_object_mut) {
        annotations.insert(annotation.to_owned(), Value::from(write.desired.as_str()));
    }
    let Some(expected) = expected else {
        return AnnotationPatch::Add(after);
    };
    let changes = json_patch::diff(&before, &after);
    if changes.0.is_empty() {
        return AnnotationPatch::Unchanged;
    }
    let mut ops = Vec::with_capacity(changes.0.len() + 1);
    if let Some(path) = changes.0.first().map(|op| op.path().to_buf()) {
        ops.push(PatchOperation::Test(TestOperation {
            path,
            value: Value::from(expected),
        }));
    }
    ops.extend(changes.0);
    AnnotationPatch::Guarded(Patch(ops))
}

/// An object holding only the path to the annotations map at `pointer`, with `annotation` set
/// to `expected` in it (empty when `None`).
fn skeleton(pointer: &str, annotation: &str, expected: Option<&str>) -> Value {
    let annotations: Map<String, Value> = expected
        .map(|value| (annotation.to_owned(), Value::from(value)))
        .into_iter()
        .collect();
    let keys = pointer.rsplit('/').filter(|key| !key.is_empty());
    keys.fold(Value::Object(annotations), |node, key| json!({ key: node }))
}

/// The `ConfigChanged` Event recording `write` (with message `message`) at `now`.
pub fn event(write: &Write, message: &str, now: Timestamp) -> Event {
    let target = &write.target;
    let name = format!("{}.{:x}", target.name, now.as_nanosecond());
    Event {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: Some(target.namespace.to_string()),
            ..ObjectMeta::default()
        },
        involved_object: ObjectReference {
            api_version: Some(target.kind.api_version().to_owned()),
            kind: Some(target.kind.kind().to_owned()),
            namespace: Some(target.namespace.to_string()),
            name: Some(target.name.to_string()),
            uid: Some(write.uid.clone()),
            ..ObjectReference::default()
        },
        reason: Some(REASON.to_owned()),
        message: Some(message.to_owned()),
        type_: Some("Normal".to_owned()),
        source: Some(EventSource {
            component: Some(COMPONENT.to_owned()),
            host: None,
        }),
        reporting_component: Some(COMPONENT.to_owned()),
        first_timestamp: Some(Time(now)),
        last_timestamp: Some(Time(now)),
        count: Some(1),
        ..Event::default()
    }
}
