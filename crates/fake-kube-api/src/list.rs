//! LIST: one consistent snapshot per paginated list (the continue token carries the
//! snapshot's revision and the last key), `resourceVersion`/`resourceVersionMatch`,
//! selectors, and metadata-only answers.

use base64::Engine;
use hyper::Response;
use serde_json::{Value, json};

use super::http::{Body, METADATA_LIST, Req, bytes_response};
use super::resources::Resource;
use super::selectors::{FieldSelector, LabelSelector};
use super::state::State;
use super::status::ApiError;
use super::store::Stored;

/// Answers a LIST of `resource` (in `namespace`, or everywhere).
pub(super) fn list(
    state: &State,
    resource: &'static Resource,
    namespace: Option<&str>,
    request: &Req,
) -> Result<Response<Body>, ApiError> {
    let labels = LabelSelector::parse(&request.param("labelSelector").unwrap_or_default())
        .map_err(|e| ApiError::bad_request(e.to_string()))?;
    let fields = FieldSelector::parse(&request.param("fieldSelector").unwrap_or_default())
        .map_err(|e| ApiError::bad_request(e.to_string()))?;
    let limit = match request.param("limit") {
        Some(text) => Some(
            text.parse::<usize>()
                .map_err(|_| ApiError::bad_request(format!("invalid limit {text:?}")))?,
        )
        .filter(|l| *l > 0),
        None => None,
    };
    let requested_rv = request.param("resourceVersion");
    let store = state.store();
    let (at, start_after) = match request.param("continue") {
        Some(token) => {
            if requested_rv.as_deref().is_some_and(|rv| rv != "0") {
                return Err(ApiError::bad_request(
                    "specifying resource version is not allowed when using continue",
                ));
            }
            let (rv, start) = decode_continue(&token)?;
            (rv, Some(start))
        }
        None => {
            let current = store.revision();
            let exact = request.param("resourceVersionMatch").as_deref() == Some("Exact");
            match requested_rv.as_deref().map(str::parse::<u64>) {
                None | Some(Ok(0)) => (current, None),
                Some(Ok(rv)) if rv > current => {
                    return Err(ApiError::with_code(
                        504,
                        format!("Too large resource version: {rv}, current: {current}"),
                    ));
                }
                Some(Ok(rv)) if exact => (rv, None),
                Some(Ok(_)) => (current, None),
                Some(Err(_)) => {
                    return Err(ApiError::bad_request("invalid resourceVersion"));
                }
            }
        }
    };
    let keep = |o: &Stored| labels.matches(&o.metadata) && fields.matches(&o.namespace, &o.name);
    let (items, more) = store
        .list(resource, namespace, at, start_after.as_deref(), limit, &keep)
        .map_err(|e| {
            if request.param("continue").is_some() {
                ApiError::expired(
                    "The provided continue parameter is too old to display a consistent list result. \
                     You can start a new list without the continue parameter.",
                )
            } else {
                ApiError::expired(format!(
                    "too old resource version: {} ({})",
                    e.requested,
                    e.compacted + 1
                ))
            }
        })?;
    drop(store);
    let mut metadata = json!({"resourceVersion": at.to_string()});
    if more && let Some(last) = items.last() {
        metadata["continue"] = json!(encode_continue(at, &last.key()));
    }
    let metadata_only = request.metadata_only();
    let (api_version, kind, content_type) = if metadata_only {
        (
            "meta.k8s.io/v1".to_owned(),
            "PartialObjectMetadataList".to_owned(),
            METADATA_LIST,
        )
    } else {
        (
            resource.api_version(),
            format!("{}List", resource.kind),
            "application/json",
        )
    };
    let total: usize = items.iter().map(|i| i.body.len() + 64).sum();
    let mut out = Vec::with_capacity(total + 256);
    out.extend_from_slice(
        format!(
            "{{\"kind\":\"{kind}\",\"apiVersion\":\"{api_version}\",\"metadata\":{metadata},\"items\":["
        )
        .as_bytes(),
    );
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        if metadata_only {
            out.extend_from_slice(&item.metadata_json());
        } else {
            out.extend_from_slice(&item.body);
        }
    }
    out.extend_from_slice(b"]}");
    Ok(bytes_response(200, content_type, out))
}

fn encode_continue(rv: u64, last_key: &str) -> String {
    let token = json!({"v": "meta.k8s.io/v1", "rv": rv, "start": format!("{last_key}\u{0}")});
    base64::engine::general_purpose::STANDARD.encode(token.to_string())
}

fn decode_continue(token: &str) -> Result<(u64, String), ApiError> {
    let bad = || ApiError::bad_request(format!("invalid continue token {token:?}"));
    let raw = base64::engine::general_purpose::STANDARD
        .decode(token)
        .map_err(|_| bad())?;
    let value: Value = serde_json::from_slice(&raw).map_err(|_| bad())?;
    let rv = value.get("rv").and_then(Value::as_u64).ok_or_else(bad)?;
    let start = value.get("start").and_then(Value::as_str).ok_or_else(bad)?;
    let last = start.strip_suffix('\u{0}').ok_or_else(bad)?;
    Ok((rv, last.to_owned()))
}
