//! Applying PATCH bodies: JSON merge patch (RFC 7386), JSON patch (RFC 6902, via the
//! json-patch crate), and strategic merge patch treated as a merge patch — maps merge,
//! lists are replaced, `$patch` directives are not understood (enough for annotation and
//! label patches, which is all the controller sends). Server-side apply is refused (415).

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
}

impl PatchKind {
    /// The kind for a `Content-Type` header value.
    pub fn from_content_type(content_type: &str) -> Result<Self, ApiError> {
        let media = content_type.split(';').next().unwrap_or("").trim();
        match media {
            "application/merge-patch+json" => Ok(PatchKind::Merge),
            "application/json-patch+json" => Ok(PatchKind::Json),
            "application/strategic-merge-patch+json" => Ok(PatchKind::Strategic),
            _ => Err(ApiError::unsupported_media_type(content_type)),
        }
    }
}

/// Applies `body` to `current`, returning the patched object.
pub fn apply(current: &Value, kind: PatchKind, body: &[u8]) -> Result<Value, ApiError> {
    let mut document = current.clone();
    match kind {
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
