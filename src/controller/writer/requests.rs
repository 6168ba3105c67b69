//! What the writer sends: the PATCH of one annotation and the Event (pure builders), and the
//! two requests that send them, each bounded by a timeout.

use std::sync::Arc;
use std::time::Duration;

use json_patch::{PatchOperation, TestOperation};
use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use parking_lot::Mutex;
use serde_json::{Map, Value, json};
use tokio::time::Instant;

use super::{EVENT_ATTEMPTS, jittered, take};
use crate::controller::rate::TokenBucket;
use crate::controller::write_target::{Target, Write};

/// The component name on Events and the field manager on patches.
pub const COMPONENT: &str = "reload-injector";
/// The Event reason for a rollout.
pub const REASON: &str = "ConfigChanged";

/// What a failure says was tried.
const PATCH: &str = "patch";
const RECORD: &str = "record the Event on";

/// Why a request failed (logged; the writer retries or reports an [`super::Outcome`]): the
/// action tried, on which target.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The API refused or failed the request.
    #[error("failed to {0} {1}")]
    Failed(&'static str, Target, #[source] kube::Error),
    /// The request got no answer in time.
    #[error("failed to {0} {1}: no answer within {2:?}")]
    TimedOut(&'static str, Target, Duration),
}

/// What became of one PATCH.
#[derive(Debug)]
pub(super) enum Sent {
    Written,
    /// The annotation already holds the value: nothing was sent.
    Unchanged,
    Conflict(u16),
    Gone,
    /// Retry later; `refused` for a 4xx that no retry of the same request fixes by itself.
    Retry {
        error: Error,
        refused: bool,
    },
}

/// The PATCH of one annotation.
#[derive(Debug, Clone, PartialEq)]
pub enum AnnotationPatch {
    /// A JSON patch starting with a `test` of the value the view showed, so it applies only
    /// while the annotation is unchanged.
    Guarded(json_patch::Patch),
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
    AnnotationPatch::Guarded(json_patch::Patch(ops))
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
            api_version: Some(target.kind.table().api_version().to_owned()),
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

pub(super) async fn send_patch(client: kube::Client, write: &Write, timeout: Duration) -> Sent {
    let target = &write.target;
    let patch = match write_patch(write) {
        AnnotationPatch::Unchanged => return Sent::Unchanged,
        AnnotationPatch::Guarded(patch) => Patch::<Value>::Json(patch),
        AnnotationPatch::Add(body) => Patch::Merge(body),
    };
    let api: Api<DynamicObject> =
        Api::namespaced_with(client, &target.namespace, &target.kind.api_resource());
    let params = PatchParams {
        field_manager: Some(COMPONENT.to_owned()),
        ..PatchParams::default()
    };
    match tokio::time::timeout(timeout, api.patch(&target.name, &params, &patch)).await {
        Ok(Ok(_)) => Sent::Written,
        Ok(Err(kube::Error::Api(status))) if matches!(status.code, 409 | 422) => {
            Sent::Conflict(status.code)
        }
        Ok(Err(kube::Error::Api(status))) if status.code == 404 => Sent::Gone,
        Ok(Err(source)) => {
            let refused = matches!(&source, kube::Error::Api(s) if (400..500).contains(&s.code) && s.code != 429);
            let error = Error::Failed(PATCH, target.clone(), source);
            Sent::Retry { error, refused }
        }
        Err(_) => Sent::Retry {
            error: Error::TimedOut(PATCH, target.clone(), timeout),
            refused: false,
        },
    }
}

pub(super) async fn record_event(
    client: kube::Client,
    bucket: Arc<Mutex<TokenBucket>>,
    timeout: Duration,
    target: Target,
    event: Event,
) {
    let api: Api<Event> = Api::namespaced(client, &target.namespace);
    let mut failures = 0;
    loop {
        while let Err(wait) = take(&bucket, Instant::now()) {
            tokio::time::sleep(wait).await;
        }
        let error =
            match tokio::time::timeout(timeout, api.create(&PostParams::default(), &event)).await {
                // 409: an earlier attempt created it after all.
                Ok(Ok(_)) => return,
                Ok(Err(kube::Error::Api(status))) if status.code == 409 => return,
                Ok(Err(source)) => Error::Failed(RECORD, target.clone(), source),
                Err(_) => Error::TimedOut(RECORD, target.clone(), timeout),
            };
        failures += 1;
        if failures >= EVENT_ATTEMPTS {
            tracing::warn!(object = %target, attempts = failures, "{}; giving up", crate::report::one_line(&error));
            return;
        }
        tokio::time::sleep(jittered(failures)).await;
    }
}
