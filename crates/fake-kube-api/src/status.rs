//! API errors as the API server reports them: a `meta/v1` `Status` with code and reason.

use serde_json::{Value, json};

use super::resources::Resource;

/// An error answer: HTTP status code, `reason`, `message`, optional `details`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("failed with {code} {reason}: {message}")]
pub struct ApiError {
    /// HTTP status code.
    pub code: u16,
    /// `Status.reason` (`NotFound`, `Conflict`, ...).
    pub reason: String,
    /// `Status.message`.
    pub message: String,
    /// `Status.details`, if any.
    pub details: Option<Value>,
}

impl ApiError {
    fn new(code: u16, reason: &str, message: String, details: Option<Value>) -> Self {
        ApiError {
            code,
            reason: reason.to_owned(),
            message,
            details,
        }
    }

    fn details(resource: &Resource, name: &str) -> Value {
        let mut details = json!({"name": name, "kind": resource.plural});
        if !resource.group.is_empty() {
            details["group"] = json!(resource.group);
        }
        details
    }

    /// 404 `NotFound` for a named object.
    pub fn not_found(resource: &Resource, name: &str) -> Self {
        let message = format!("{} \"{name}\" not found", resource.qualified());
        Self::new(
            404,
            "NotFound",
            message,
            Some(Self::details(resource, name)),
        )
    }

    /// 409 `AlreadyExists` on create.
    pub fn already_exists(resource: &Resource, name: &str) -> Self {
        let message = format!("{} \"{name}\" already exists", resource.qualified());
        Self::new(
            409,
            "AlreadyExists",
            message,
            Some(Self::details(resource, name)),
        )
    }

    /// 409 `Conflict` on a stale `resourceVersion`.
    pub fn conflict(resource: &Resource, name: &str) -> Self {
        let message = format!(
            "Operation cannot be fulfilled on {} \"{name}\": the object has been modified; \
             please apply your changes to the latest version and try again",
            resource.qualified()
        );
        Self::new(
            409,
            "Conflict",
            message,
            Some(Self::details(resource, name)),
        )
    }

    /// 400 `BadRequest`.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message.into(), None)
    }

    /// 422 as the API server answers a JSON patch that cannot be applied (a failed `test`,
    /// a missing path): `NewGenericServerResponse(422, ...)` gives reason `Invalid` and
    /// carries the patch library's error as an `UnexpectedServerResponse` cause.
    pub fn patch_not_applicable(error: &str) -> Self {
        Self::new(
            422,
            "Invalid",
            "the server rejected our request due to an error in our request".into(),
            Some(json!({"causes": [{"reason": "UnexpectedServerResponse", "message": error}]})),
        )
    }

    /// 410 `Expired` for a revision older than the history held.
    pub fn expired(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message.into(), None)
    }

    /// 415 `UnsupportedMediaType`.
    pub fn unsupported_media_type(content_type: &str) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml; got {content_type:?}"
            ),
            None,
        )
    }

    /// 405 `MethodNotAllowed`.
    pub fn method_not_allowed() -> Self {
        Self::new(
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource".into(),
            None,
        )
    }

    /// 404 for a path the server does not serve.
    pub fn no_route(path: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("the server could not find the requested resource ({path})"),
            None,
        )
    }

    /// A `Status` answer with `code` (used by injected faults); the reason is the API
    /// server's for that code.
    pub fn with_code(code: u16, message: impl Into<String>) -> Self {
        let reason = match code {
            400 => "BadRequest",
            401 => "Unauthorized",
            403 => "Forbidden",
            404 => "NotFound",
            405 => "MethodNotAllowed",
            409 => "Conflict",
            410 => "Expired",
            422 => "Invalid",
            429 => "TooManyRequests",
            500 => "InternalError",
            503 => "ServiceUnavailable",
            504 => "Timeout",
            _ => "",
        };
        Self::new(code, reason, message.into(), None)
    }

    /// The `Status` object.
    pub fn status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let Some(details) = &self.details {
            status["details"] = details.clone();
        }
        status
    }
}
