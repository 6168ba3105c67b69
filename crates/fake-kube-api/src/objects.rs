//! What the API server does to an object on create and update: name, namespace, `uid`,
//! `creationTimestamp`, `generation` (bumped when `spec` changes), Secrets' `stringData`
//! folded into `data`, and `resourceVersion` preconditions. Pure, apart from the clock and
//! the random `uid`.

use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine;
use serde_json::{Map, Value, json};

use super::resources::Resource;
use super::status::ApiError;
use super::store::Stored;

/// A new object ready for the store: its name and its JSON.
pub struct Prepared {
    /// Object name.
    pub name: String,
    /// The full object.
    pub object: Map<String, Value>,
}

fn as_object(value: Value) -> Result<Map<String, Value>, ApiError> {
    match value {
        Value::Object(map) => Ok(map),
        _ => Err(ApiError::bad_request("the body must be a JSON object")),
    }
}

fn metadata(object: &mut Map<String, Value>) -> &mut Map<String, Value> {
    let entry = object.entry("metadata").or_insert_with(|| json!({}));
    if !entry.is_object() {
        *entry = json!({});
    }
    entry.as_object_mut().expect("metadata is an object")
}

/// Checks `apiVersion`/`kind` (when present) against the resource, and sets them.
fn check_type(resource: &Resource, object: &mut Map<String, Value>) -> Result<(), ApiError> {
    let expected = resource.api_version();
    for (field, want) in [("apiVersion", expected.as_str()), ("kind", resource.kind)] {
        match object.get(field).and_then(Value::as_str) {
            Some(got) if got != want => {
                return Err(ApiError::bad_request(format!(
                    "the API version in the data ({got}) does not match the expected {field} ({want})"
                )));
            }
            _ => {
                object.insert(field.into(), json!(want));
            }
        }
    }
    Ok(())
}

/// Folds a Secret's `stringData` into `data` (base64), as the API server does.
fn fold_string_data(resource: &Resource, object: &mut Map<String, Value>) {
    if resource.kind != "Secret" || !resource.group.is_empty() {
        return;
    }
    let Some(Value::Object(strings)) = object.remove("stringData") else {
        return;
    };
    let data = object.entry("data").or_insert_with(|| json!({}));
    if !data.is_object() {
        *data = json!({});
    }
    let data = data.as_object_mut().expect("data is an object");
    for (key, value) in strings {
        let text = value.as_str().unwrap_or_default();
        data.insert(
            key,
            json!(base64::engine::general_purpose::STANDARD.encode(text)),
        );
    }
}

/// Prepares an object for creation in `namespace` (`""` for cluster-scoped resources).
pub fn prepare_create(
    resource: &Resource,
    namespace: &str,
    value: Value,
) -> Result<Prepared, ApiError> {
    let mut object = as_object(value)?;
    check_type(resource, &mut object)?;
    fold_string_data(resource, &mut object);
    let has_spec = object.contains_key("spec");
    let meta = metadata(&mut object);
    let name = match meta.get("name").and_then(Value::as_str) {
        Some(name) if !name.is_empty() => name.to_owned(),
        _ => match meta.get("generateName").and_then(Value::as_str) {
            Some(prefix) if !prefix.is_empty() => format!("{prefix}{}", random_suffix()),
            _ => {
                return Err(ApiError::with_code(
                    422,
                    format!(
                        "{} \"\" is invalid: metadata.name: Required value: name or generateName is required",
                        resource.kind
                    ),
                ));
            }
        },
    };
    meta.insert("name".into(), json!(name));
    if resource.namespaced {
        match meta.get("namespace").and_then(Value::as_str) {
            Some(ns) if !ns.is_empty() && ns != namespace => {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
            _ => {
                meta.insert("namespace".into(), json!(namespace));
            }
        }
    } else {
        meta.remove("namespace");
    }
    meta.insert("uid".into(), json!(random_uid()));
    meta.insert("creationTimestamp".into(), json!(now_rfc3339()));
    meta.remove("resourceVersion");
    meta.remove("deletionTimestamp");
    if resource.has_generation && has_spec {
        meta.insert("generation".into(), json!(1));
    } else {
        meta.remove("generation");
    }
    Ok(Prepared { name, object })
}

/// Prepares `value` as the next version of `current`. A `metadata.resourceVersion` in
/// `value` is a precondition: 409 if it is not the current one.
pub fn prepare_update(
    resource: &Resource,
    current: &Stored,
    value: Value,
) -> Result<Map<String, Value>, ApiError> {
    let mut object = as_object(value)?;
    check_type(resource, &mut object)?;
    fold_string_data(resource, &mut object);
    let current_value = current.value();
    let spec_changed = object.get("spec") != current_value.get("spec");
    let meta = metadata(&mut object);
    if let Some(rv) = meta.get("resourceVersion").and_then(Value::as_str)
        && !rv.is_empty()
        && rv != current.rv.to_string()
    {
        return Err(ApiError::conflict(resource, &current.name));
    }
    if let Some(name) = meta.get("name").and_then(Value::as_str)
        && name != current.name
    {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({name}) does not match the name on the URL ({})",
            current.name
        )));
    }
    meta.insert("name".into(), json!(current.name));
    if resource.namespaced {
        meta.insert("namespace".into(), json!(current.namespace));
    }
    for field in ["uid", "creationTimestamp"] {
        match current.metadata.get(field) {
            Some(v) => meta.insert(field.into(), v.clone()),
            None => meta.remove(field),
        };
    }
    let generation = current.metadata.get("generation").and_then(Value::as_i64);
    match generation {
        Some(g) if resource.has_generation => {
            meta.insert(
                "generation".into(),
                json!(if spec_changed { g + 1 } else { g }),
            );
        }
        _ => {
            meta.remove("generation");
        }
    }
    Ok(object)
}

/// Records `manager` in `metadata.managedFields` (one entry per manager, like the API
/// server keeps for an `Update` operation; the field set itself is not tracked).
pub fn record_manager(object: &mut Map<String, Value>, resource: &Resource, manager: &str) {
    let meta = metadata(object);
    let fields = meta.entry("managedFields").or_insert_with(|| json!([]));
    if !fields.is_array() {
        *fields = json!([]);
    }
    let fields = fields.as_array_mut().expect("managedFields is an array");
    fields.retain(|f| f.get("manager").and_then(Value::as_str) != Some(manager));
    fields.push(json!({
        "manager": manager,
        "operation": "Update",
        "apiVersion": resource.api_version(),
        "time": now_rfc3339(),
        "fieldsType": "FieldsV1",
        "fieldsV1": {},
    }));
}

fn random_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    (0..5)
        .map(|_| ALPHABET[rand::random_range(0..ALPHABET.len())] as char)
        .collect()
}

fn random_uid() -> String {
    let hex = hex::encode(rand::random::<[u8; 16]>());
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

/// The current time as the API server writes timestamps (`2026-01-02T03:04:05Z`).
pub fn now_rfc3339() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default();
    let (days, rest) = (secs / 86_400, secs % 86_400);
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    )
}
