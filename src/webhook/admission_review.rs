//! AdmissionReview `admission.k8s.io/v1` on the wire (pure). The body is read once (see
//! `envelope`), borrowing the objects. The answer is written by hand-shaped structs: kube-core's
//! response type would serialise the patch as an array of numbers instead of base64.

use base64::Engine;
use serde::Serialize;
use serde_json::Value;
use serde_json::value::RawValue;

use envelope::{ObjectField, RequestFields};

use crate::workload::{JsonType, Object, Operation, Request, Skim, Workload};

/// The only AdmissionReview version the webhook speaks.
pub const API_VERSION: &str = "admission.k8s.io/v1";
/// `kind` of the envelope.
pub const KIND: &str = "AdmissionReview";

/// A body that is not an AdmissionReview at all (answered with HTTP 400).
#[derive(Debug, thiserror::Error)]
pub enum EnvelopeError {
    #[error("failed to read an AdmissionReview: the request body is empty")]
    Empty,
    /// The bytes are not JSON (or nest deeper than the parser allows).
    #[error("failed to parse the request body as JSON: {0}")]
    NotJson(#[source] serde_json::Error),
    #[error("failed to read an AdmissionReview: the body is a JSON {0}, not an object")]
    NotAnObject(&'static str),
    #[error(
        "failed to read an AdmissionReview: apiVersion is {0}, expected \"admission.k8s.io/v1\""
    )]
    WrongApiVersion(String),
    #[error("failed to read an AdmissionReview: kind is {0}, expected \"AdmissionReview\"")]
    WrongKind(String),
    #[error("failed to read an AdmissionReview: it has no request object")]
    MissingRequest,
    #[error("failed to read an AdmissionReview: request.uid is missing or not a string")]
    MissingUid,
}

/// A field of `request` with the wrong shape (answered with HTTP 200, `allowed: false`).
#[derive(Debug, thiserror::Error)]
#[error("failed to read the admission request: {field} must be {expected}")]
pub struct RequestFieldError {
    /// JSON path of the field, e.g. `request.kind.kind`.
    pub field: &'static str,
    /// What it should have been.
    pub expected: &'static str,
}

/// A parsed AdmissionReview whose envelope and uid are good, borrowing from the body.
#[derive(Debug)]
pub struct Review<'a> {
    request: RequestFields<'a>,
}

impl<'a> Review<'a> {
    /// Parses a request body in one pass (see `envelope`).
    pub fn parse(body: &'a [u8]) -> Result<Self, EnvelopeError> {
        Self::checked(body, envelope::from_slice)
    }

    /// [`Review::parse`], keeping `request.object` as raw JSON whatever its kind (for a review
    /// whose object was too large to read).
    pub fn parse_unread(body: &'a [u8]) -> Result<Self, EnvelopeError> {
        Self::checked(body, envelope::from_slice_unread)
    }

    fn checked(
        body: &'a [u8],
        read: fn(&'a [u8]) -> serde_json::Result<envelope::Envelope<'a>>,
    ) -> Result<Self, EnvelopeError> {
        if body.iter().all(u8::is_ascii_whitespace) {
            return Err(EnvelopeError::Empty);
        }
        let envelope = read(body).map_err(|err| not_an_envelope(body, err))?;
        let api_version = envelope.api_version.as_ref();
        if api_version.and_then(Value::as_str) != Some(API_VERSION) {
            return Err(EnvelopeError::WrongApiVersion(describe(api_version)));
        }
        let kind = envelope.kind.as_ref();
        if kind.and_then(Value::as_str) != Some(KIND) {
            return Err(EnvelopeError::WrongKind(describe(kind)));
        }
        let Some(request) = envelope.request else {
            return Err(EnvelopeError::MissingRequest);
        };
        if !request.uid.as_ref().is_some_and(Value::is_string) {
            return Err(EnvelopeError::MissingUid);
        }
        Ok(Self { request })
    }

    /// `request.uid`, echoed in the answer.
    pub fn uid(&self) -> &str {
        field(&self.request.uid).as_str().unwrap_or_default()
    }

    /// `request.kind.kind` as sent (`""` when absent), for logs and metrics.
    pub fn kind(&self) -> &str {
        field(&self.request.kind)
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or_default()
    }

    /// `request.operation` as sent (`""` when absent), for logs and metrics.
    pub fn operation(&self) -> &str {
        field(&self.request.operation).as_str().unwrap_or_default()
    }

    /// The request as the core sees it, borrowing from the body.
    pub fn request(&self) -> Result<Request<'_>, RequestFieldError> {
        let r = &self.request;
        let kind = field(&r.kind);
        if !kind.is_object() {
            return Err(bad("request.kind", "an object"));
        }
        let group = optional_str(kind.get("group"), "request.kind.group")?;
        let kind_name = kind
            .get("kind")
            .and_then(Value::as_str)
            .ok_or_else(|| bad("request.kind.kind", "a string"))?;
        let operation = field(&r.operation)
            .as_str()
            .ok_or_else(|| bad("request.operation", "a string"))?;
        let namespace = optional_str(r.namespace.as_ref(), "request.namespace")?;
        let dry_run = match &r.dry_run {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(_) => return Err(bad("request.dryRun", "a boolean")),
        };
        let old_object = r.old_object.filter(|raw| raw.get() != "null");
        let object = match &r.object {
            None => Object::Raw(RawValue::NULL),
            Some(ObjectField::Raw(raw)) => Object::Raw(raw),
            Some(ObjectField::Read { pointer, parts }) => {
                // Read for the kind seen before it; a second `kind` after it may not change it.
                let now = Workload::classify(group, kind_name)
                    .filter(|w| w.read_for_pod_alone())
                    .map(Workload::pointer);
                if now != Some(*pointer) {
                    return Err(bad("request.kind", "given once, before request.object"));
                }
                Object::Read { pointer, parts }
            }
        };
        Ok(Request {
            group,
            kind: kind_name,
            operation: Operation::parse(operation),
            namespace,
            // The webhooks of labelled namespaces call `/mutate`; the handler says otherwise.
            namespace_labelled: true,
            object,
            old_object,
            dry_run,
        })
    }
}

fn field(value: &Option<Value>) -> &Value {
    value.as_ref().unwrap_or(&Value::Null)
}

fn optional_str<'a>(
    value: Option<&'a Value>,
    field: &'static str,
) -> Result<&'a str, RequestFieldError> {
    match value {
        None | Some(Value::Null) => Ok(""),
        Some(Value::String(s)) => Ok(s),
        Some(_) => Err(bad(field, "a string")),
    }
}

fn bad(field: &'static str, expected: &'static str) -> RequestFieldError {
    RequestFieldError { field, expected }
}

/// What is wrong with a body the envelope parser refused, found by reading it in full, keeping
/// nothing: not JSON (or nested too deep), or JSON that is not an object.
fn not_an_envelope(body: &[u8], err: serde_json::Error) -> EnvelopeError {
    match serde_json::from_slice::<Skim>(body) {
        Err(full) => EnvelopeError::NotJson(full),
        Ok(Skim(JsonType::Object)) => EnvelopeError::NotJson(err),
        Ok(Skim(other)) => EnvelopeError::NotAnObject(other.name()),
    }
}

/// A short description of a field's value for an error message (never the whole value).
fn describe(v: Option<&Value>) -> String {
    match v {
        None => "missing".to_owned(),
        Some(Value::String(s)) => {
            let short: String = s.chars().take(64).collect();
            format!("{short:?}")
        }
        Some(other) => format!("a {}", JsonType::of(other).name()),
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Envelope<'a> {
    api_version: &'static str,
    kind: &'static str,
    response: Response<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Response<'a> {
    uid: &'a str,
    allowed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    patch: Option<Box<RawValue>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    patch_type: Option<&'static str>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    warnings: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<Status<'a>>,
}

#[derive(Serialize)]
struct Status<'a> {
    code: u16,
    message: &'a str,
}

/// The answer admitting the object: `patch` (base64 of the JSON patch) and
/// `patchType: JSONPatch` together, or neither when the patch is empty.
pub fn allowed(uid: &str, patch: &json_patch::Patch, warnings: &[String]) -> Vec<u8> {
    let patch = (!patch.0.is_empty()).then(|| base64_string(patch));
    let patch_type = patch.as_ref().map(|_| "JSONPatch");
    encode(Response {
        uid,
        allowed: true,
        patch,
        patch_type,
        warnings,
        status: None,
    })
}

/// The JSON string of the base64 of `patch` (base64 needs no escaping: no scan byte by byte).
fn base64_string(patch: &json_patch::Patch) -> Box<RawValue> {
    let mut json = Vec::with_capacity(1024);
    // A Patch is plain data: serialising it cannot fail.
    serde_json::to_writer(&mut json, patch).unwrap_or_default();
    let engine = base64::engine::general_purpose::STANDARD;
    let mut quoted = vec![b'"'; json.len().div_ceil(3) * 4 + 2];
    let end = quoted.len() - 1;
    let written = engine.encode_slice(&json, &mut quoted[1..end]).unwrap_or(0);
    quoted.truncate(written + 1);
    quoted.push(b'"');
    // A quoted base64 text is a JSON string.
    String::from_utf8(quoted)
        .ok()
        .and_then(|text| RawValue::from_string(text).ok())
        .unwrap_or_else(|| RawValue::NULL.to_owned())
}

/// The answer refusing the object with `status.code` and `status.message`.
pub fn denied(uid: &str, code: u16, message: &str, warnings: &[String]) -> Vec<u8> {
    encode(Response {
        uid,
        allowed: false,
        patch: None,
        patch_type: None,
        warnings,
        status: Some(Status { code, message }),
    })
}

/// About how long the large parts of an answer are, to size its buffer once.
fn response_len(response: &Response<'_>) -> usize {
    let patch = response.patch.as_ref().map_or(0, |p| p.get().len());
    let warnings: usize = response.warnings.iter().map(|w| w.len() + 3).sum();
    patch + warnings + response.status.as_ref().map_or(0, |s| s.message.len())
}

fn encode(response: Response<'_>) -> Vec<u8> {
    let envelope = Envelope {
        api_version: API_VERSION,
        kind: KIND,
        response,
    };
    // Strings, booleans and numbers only: serialising cannot fail.
    let mut out = Vec::with_capacity(256 + response_len(&envelope.response));
    serde_json::to_writer(&mut out, &envelope).unwrap_or_default();
    out
}

mod envelope;

#[cfg(test)]
mod tests;
