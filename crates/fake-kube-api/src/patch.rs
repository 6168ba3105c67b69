//! Applying PATCH bodies: JSON merge patch (RFC 7386), JSON patch (RFC 6902, via the
//! json-patch crate), and strategic merge patch treated as a merge patch — maps merge,
//! lists are replaced, `$patch` directives are not understood (enough for annotation and
//! label patches, which is all the controller sends). Server-side apply
//! (`application/apply-patch+yaml`) is approximated as create-or-merge: no field ownership,
//! no removal of fields the manager stopped sending, no apply conflicts.

use serde_json::Value;

use super::status::ApiError;

/// The patch formats the server accepts, by `Content-Type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchKind {
    /// `application/merge-patch+json`.
    Merge,
    /// `application/json-patch+json`.
    Json,
    /// `application/strategic-merge-patch+json`.
    Strategic,
    /// `application/apply-patch+yaml` (server-side apply, approximated).
    Apply,
}

impl PatchKind {
    /// The kind for a `Content-Type` header value.
    pub fn from_content_type(content_type: &str) -> Result<Self, ApiError> {
        let media = content_type.split(';').next().unwrap_or("").trim();
        match media {
            "application/merge-patch+json" => Ok(PatchKind::Merge),
            "application/json-patch+json" => Ok(PatchKind::Json),
            "application/strategic-merge-patch+json" => Ok(PatchKind::Strategic),
            "application/apply-patch+yaml" => Ok(PatchKind::Apply),
            _ => Err(ApiError::unsupported_media_type(content_type)),
        }
    }
}

/// Applies `body` to `current`, returning the patched object.
pub fn apply(current: &Value, kind: PatchKind, body: &[u8]) -> Result<Value, ApiError> {
    let mut document = current.clone();
    match kind {
        PatchKind::Apply => json_patch::merge(&mut document, &apply_config(body)?),
        PatchKind::Merge | PatchKind::Strategic => {
            let patch: Value = serde_json::from_slice(body)
                .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
            if !patch.is_object() {
                return Err(ApiError::bad_request(
                    "error decoding patch: a merge patch must be a JSON object",
                ));
            }
            json_patch::merge(&mut document, &patch);
        }
        PatchKind::Json => {
            let patch: json_patch::Patch =
                serde_json::from_slice(body).map_err(|e| ApiError::bad_request(e.to_string()))?;
            json_patch::patch(&mut document, &patch)
                .map_err(|e| ApiError::patch_not_applicable(&e.to_string()))?;
        }
    }
    Ok(document)
}

/// The configuration in a server-side apply body (YAML or JSON).
pub fn apply_config(body: &[u8]) -> Result<Value, ApiError> {
    let text = std::str::from_utf8(body)
        .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?;
    let config: Value = serde_saphyr::from_str(text)
        .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?;
    if config.is_object() {
        Ok(config)
    } else {
        Err(ApiError::bad_request("error decoding YAML: not an object"))
    }
}
