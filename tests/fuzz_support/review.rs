//! The properties of the webhook's review path, checked on one request body sent through the
//! real router (`oneshot`): no panic, a well-formed answer or a documented HTTP error, patches
//! that apply, idempotence, and no patch on a denial.

use std::convert::Infallible;
use std::time::Duration;

use axum::body::{Body, to_bytes};
use base64::Engine;
use http::{Request, Response, StatusCode, header};
use reload_injector::hash::SecretKey;
use reload_injector::webhook::lookup::{CacheConfig, Lookups};
use reload_injector::webhook::webhook_metrics::Metrics;
use reload_injector::webhook::{AppState, app};
use reload_injector::workload::{
    CONFIG_HASH, MANAGED_LABEL, MAX_WARNING_CHARS, NO_TOKEN_VOLUME, SIDECAR_NAME, Settings,
    TOKEN_MOUNT_PATH, WARNING_PREFIX,
};
use serde_json::{Value, json};
use tower::ServiceExt;

/// The HTTP statuses the webhook documents for bodies it cannot review.
pub const DOCUMENTED_ERRORS: [u16; 3] = [400, 413, 415];

/// The webhook as `serve` runs it, in the variants the fuzzer alternates between.
pub struct Webhooks {
    states: Vec<AppState>,
    runtime: tokio::runtime::Runtime,
    /// How the first answers ended: HTTP error, refused, denied, patched, untouched.
    pub outcomes: super::Tally,
}

impl Webhooks {
    /// Three set-ups: regular sidecars without a Secret key, native sidecars with a key
    /// (both reading ConfigMaps/Secrets from a mock API), and `--no-kube`.
    pub fn new() -> Webhooks {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a tokio runtime");
        let states = runtime.block_on(async {
            vec![
                state(Some(mock_client()), false, None),
                state(Some(mock_client()), true, SecretKey::new(b"fuzz-key")),
                state(None, false, None),
            ]
        });
        Webhooks {
            states,
            runtime,
            outcomes: super::Tally::default(),
        }
    }

    /// Sends `body` as `POST /mutate` to set-up `which` (modulo the number of set-ups).
    pub fn post(&self, which: usize, body: &[u8]) -> (StatusCode, Vec<u8>) {
        let state = self.states[which % self.states.len()].clone();
        let request = Request::post("/mutate")
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(body.to_vec()))
            .expect("a request");
        self.runtime.block_on(async {
            let response = app(state)
                .oneshot(request)
                .await
                .expect("infallible router");
            let status = response.status();
            let bytes = to_bytes(response.into_body(), usize::MAX)
                .await
                .expect("the answer's body");
            (status, bytes.to_vec())
        })
    }

    /// Checks every property on `body`, sent to set-up `which`.
    pub fn check(&self, which: usize, body: &[u8]) -> Result<(), String> {
        let (status, answer) = self.post(which, body);
        let stray = stray_requests();
        ensure(stray.is_empty(), || {
            format!("the webhook asked the API for something else than one object: {stray:?}")
        })?;
        let text = String::from_utf8_lossy(&answer);
        if status != StatusCode::OK {
            self.outcomes.add("http-error");
            ensure(DOCUMENTED_ERRORS.contains(&status.as_u16()), || {
                format!("HTTP {status} is not a documented answer: {text}")
            })?;
            return ensure(text.starts_with("failed to"), || {
                format!("HTTP {status} without a \"failed to\" message: {text:?}")
            });
        }
        // The webhook skips metadata.managedFields unread, so bytes that are not UTF-8 there
        // do not stop a review; read them as the replacement character here.
        let sent: Value = match serde_json::from_slice(body)
            .or_else(|_| serde_json::from_str(&String::from_utf8_lossy(body)))
        {
            Ok(sent) => sent,
            Err(e) => return answered_past_a_huge_number(body, &answer, &e, &text),
        };
        let request = &sent["request"];
        let uid = request["uid"]
            .as_str()
            .ok_or("HTTP 200 without a request uid")?;
        let response = well_formed(&answer, uid)?;
        never_refuses_a_rollout(request, &response)?;
        let patch = patch_of(&response)?;
        self.outcomes
            .add(match (&patch, response["status"]["code"].as_u64()) {
                (Some(_), _) => "patched",
                (None, Some(403)) => "denied",
                (None, Some(_)) => "refused",
                (None, None) => "untouched",
            });
        let Some(patch) = patch else {
            return Ok(());
        };
        let object = &request["object"];
        let patched = apply(&patch, object)?;
        sidecars_once(object, &patched)?;
        only_hash_on_templates(&request["kind"]["kind"], object, &patched)?;
        // Reviewing the patched object again changes nothing.
        let mut again = sent.clone();
        again["request"]["object"] = patched;
        let body = serde_json::to_vec(&again).expect("JSON");
        let (status, answer) = self.post(which, &body);
        ensure(status == StatusCode::OK, || {
            format!("re-review answered HTTP {status}")
        })?;
        let response = well_formed(&answer, uid)?;
        ensure(response["allowed"] == true, || {
            format!("re-review of the patched object was refused: {response}")
        })?;
        match patch_of(&response)? {
            None => Ok(()),
            Some(patch) => Err(format!(
                "not idempotent: re-review of the patched object patched again: {}",
                serde_json::to_string(&patch).unwrap_or_default()
            )),
        }
    }
}

fn ensure(condition: bool, message: impl FnOnce() -> String) -> Result<(), String> {
    if condition { Ok(()) } else { Err(message()) }
}

/// A number too large for a float (`1e999`) is JSON syntax that serde_json does not read into a
/// value. The webhook scans the fields it never reads without reading their numbers, so such a
/// number there is no reason to refuse the review: the answer must still be well formed (its
/// patch cannot be applied here, for want of the object as a value).
fn answered_past_a_huge_number(
    body: &[u8],
    answer: &[u8],
    error: &serde_json::Error,
    text: &str,
) -> Result<(), String> {
    #[derive(serde::Deserialize)]
    struct Sent {
        request: SentRequest,
    }
    #[derive(serde::Deserialize)]
    struct SentRequest {
        uid: String,
    }
    let not_json = || format!("HTTP 200 for a body that is not JSON ({error}): {text}");
    ensure(
        error.to_string().starts_with("number out of range"),
        not_json,
    )?;
    let sent: Sent = serde_json::from_slice(body).map_err(|_| not_json())?;
    well_formed(answer, &sent.request.uid).map(drop)
}

/// Envelope, uid echo, patch and patchType together, warnings' form, denials without a patch.
fn well_formed(answer: &[u8], uid: &str) -> Result<Value, String> {
    let answer: Value = serde_json::from_slice(answer)
        .map_err(|e| format!("HTTP 200 with a body that is not JSON: {e}"))?;
    ensure(answer["apiVersion"] == "admission.k8s.io/v1", || {
        format!("apiVersion in {answer}")
    })?;
    ensure(answer["kind"] == "AdmissionReview", || {
        format!("kind in {answer}")
    })?;
    let response = answer["response"].clone();
    ensure(response["uid"] == uid, || {
        format!("uid not echoed: {answer}")
    })?;
    let allowed = response["allowed"]
        .as_bool()
        .ok_or_else(|| format!("allowed is not a boolean: {answer}"))?;
    ensure(
        response.get("patch").is_some() == response.get("patchType").is_some(),
        || format!("patch and patchType must go together: {answer}"),
    )?;
    if !allowed {
        ensure(response.get("patch").is_none(), || {
            format!("a denial carries a patch: {answer}")
        })?;
        let code = response["status"]["code"].as_u64();
        ensure(matches!(code, Some(400 | 403)), || {
            format!("denial status code: {answer}")
        })?;
        ensure(
            response["status"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty()),
            || format!("denial without a message: {answer}"),
        )?;
    }
    for warning in response["warnings"].as_array().into_iter().flatten() {
        let w = warning.as_str().ok_or("a warning that is not a string")?;
        ensure(w.starts_with(WARNING_PREFIX), || {
            format!("warning prefix: {w:?}")
        })?;
        ensure(w.chars().count() <= MAX_WARNING_CHARS, || {
            format!("warning too long: {w:?}")
        })?;
        ensure(!w.chars().any(char::is_control), || {
            format!("control character in {w:?}")
        })?;
    }
    Ok(response)
}

/// The decoded patch, if the answer has one (never an empty one).
fn patch_of(response: &Value) -> Result<Option<json_patch::Patch>, String> {
    let Some(encoded) = response.get("patch") else {
        return Ok(None);
    };
    ensure(response["patchType"] == "JSONPatch", || {
        format!("patchType: {response}")
    })?;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(encoded.as_str().ok_or("patch is not a string")?)
        .map_err(|e| format!("patch is not base64: {e}"))?;
    let patch: json_patch::Patch =
        serde_json::from_slice(&bytes).map_err(|e| format!("patch is not a JSON patch: {e}"))?;
    ensure(!patch.0.is_empty(), || "an empty patch was sent".to_owned())?;
    Ok(Some(patch))
}

/// Applies `patch` to the object as the API server holds it (with managedFields).
pub fn apply(patch: &json_patch::Patch, object: &Value) -> Result<Value, String> {
    let mut out = object.clone();
    json_patch::patch(&mut out, patch).map_err(|e| {
        format!(
            "the patch does not apply: {e}; patch {}",
            serde_json::to_string(patch).unwrap_or_default()
        )
    })?;
    Ok(out)
}

fn sidecar_count(object: &Value) -> usize {
    let pods = [
        object.pointer("/spec"),
        object.pointer("/spec/template/spec"),
        object.pointer("/spec/jobTemplate/spec/template/spec"),
    ];
    pods.into_iter()
        .flatten()
        .flat_map(|spec| ["containers", "initContainers"].map(|list| spec.get(list)))
        .flatten()
        .filter_map(Value::as_array)
        .flatten()
        .filter(|c| c["name"] == SIDECAR_NAME)
        .count()
}

/// Never a second sidecar, never a duplicated mount in the one injected, at most one mount of
/// it at the token path, and its volume added only where no volume had that name.
fn sidecars_once(before: &Value, after: &Value) -> Result<(), String> {
    let (was, is) = (sidecar_count(before), sidecar_count(after));
    ensure(is <= was.max(1), || {
        format!("{is} sidecars after the patch, {was} before")
    })?;
    if was == 0 && is == 1 {
        let containers = ["/spec/containers", "/spec/initContainers"]
            .iter()
            .filter_map(|p| after.pointer(p)?.as_array())
            .flatten();
        for sidecar in containers.filter(|c| c["name"] == SIDECAR_NAME) {
            let mut names: Vec<&str> = sidecar["volumeMounts"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|m| m["name"].as_str())
                .collect();
            let count = names.len();
            names.sort_unstable();
            names.dedup();
            ensure(names.len() == count, || {
                format!("duplicated mounts in {sidecar}")
            })?;
            let at_token_path = sidecar["volumeMounts"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|m| m["mountPath"] == TOKEN_MOUNT_PATH)
                .count();
            ensure(at_token_path <= 1, || {
                format!("{at_token_path} mounts at the token path in {sidecar}")
            })?;
        }
        let (had, has) = (volumes_named_ours(before), volumes_named_ours(after));
        ensure(has == had || (had == 0 && has == 1), || {
            format!("{had} volumes named {NO_TOKEN_VOLUME} before the patch, {has} after")
        })?;
    }
    Ok(())
}

/// Volumes of a Pod named as the sidecar's own.
fn volumes_named_ours(object: &Value) -> usize {
    let volumes = object.pointer("/spec/volumes").and_then(Value::as_array);
    volumes
        .into_iter()
        .flatten()
        .filter(|v| v["name"] == NO_TOKEN_VOLUME)
        .count()
}

/// A Rollout the webhook cannot understand is admitted with a warning, never refused: Argo's
/// own validation judges it. Only a request without an object is refused, or one whose
/// envelope is unreadable whatever its kind (a field of `request` besides the objects of the
/// wrong type, or missing: `request.operation`, say).
fn never_refuses_a_rollout(request: &Value, response: &Value) -> Result<(), String> {
    let rollout = request["kind"]["group"] == "argoproj.io" && request["kind"]["kind"] == "Rollout";
    let message = response["status"]["message"].as_str().unwrap_or("");
    let bad_envelope = message.starts_with("failed to read the admission request: request.")
        && !message.contains("request.object")
        && !message.contains("request.oldObject");
    ensure(
        !rollout
            || request["object"].is_null()
            || bad_envelope
            || response["status"]["code"] != 400,
        || format!("a Rollout was refused: {response}"),
    )
}

/// The webhook stamps only the hash into workload templates, and only the managed label onto the
/// workload's own labels: with those taken out (and an absent or `null` metadata read as empty,
/// absent labels as empty ones), the patched object is the original.
fn only_hash_on_templates(kind: &Value, before: &Value, after: &Value) -> Result<(), String> {
    if kind == "Pod" {
        return Ok(());
    }
    ensure(without_hash(before) == without_hash(after), || {
        format!("a workload patch changed more than the hash annotation and managed label: {after}")
    })
}

fn without_hash(object: &Value) -> Value {
    let mut object = object.clone();
    if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        if let Some(Value::Object(labels)) = metadata.get_mut("labels") {
            labels.remove(MANAGED_LABEL);
            if labels.is_empty() {
                metadata.remove("labels");
            }
        }
        if metadata.is_empty() {
            object.as_object_mut().map(|o| o.remove("metadata"));
        }
    }
    for pointer in ["/spec/template", "/spec/jobTemplate/spec/template"] {
        let Some(pod) = object.pointer_mut(pointer).and_then(Value::as_object_mut) else {
            continue;
        };
        let mut metadata = match pod.remove("metadata") {
            Some(Value::Object(m)) => m,
            _ => serde_json::Map::new(),
        };
        let mut annotations = match metadata.remove("annotations") {
            Some(Value::Object(a)) => a,
            _ => serde_json::Map::new(),
        };
        annotations.remove(CONFIG_HASH);
        if !annotations.is_empty() {
            metadata.insert("annotations".into(), annotations.into());
        }
        if !metadata.is_empty() {
            pod.insert("metadata".into(), metadata.into());
        }
    }
    object
}

fn state(client: Option<kube::Client>, native: bool, secret_key: Option<SecretKey>) -> AppState {
    let metrics = Metrics::new();
    let config = CacheConfig {
        ttl: Duration::from_secs(3600),
        timeout: Duration::from_secs(5),
        max_entries: 1000,
        request_timeout: Duration::from_secs(5),
    };
    let settings = Settings {
        sidecar_image: "example.test/reload-injector:fuzz".into(),
        native_sidecars: native,
        own_namespace: "reload-injector".into(),
        version: reload_injector::VERSION.into(),
        inject_into_templates: false,
        secret_key: secret_key.clone(),
        in_place: Default::default(),
        warning_chars: Some(reload_injector::workload::API_SERVER_WARNING_CHARS),
        reloader_retired: true,
    };
    AppState::new(
        settings,
        Lookups::new(client, secret_key, config, metrics.clone()),
        metrics,
    )
}

/// API requests the webhook made that are not a GET of one ConfigMap or Secret by a valid
/// name (a name from the object under review must never reach another path).
static STRAY_REQUESTS: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// Takes the stray requests recorded so far.
fn stray_requests() -> Vec<String> {
    std::mem::take(&mut *STRAY_REQUESTS.lock().expect("stray requests"))
}

/// One path segment that names one object: not `.` or `..`, no percent-escape (an API
/// server decodes `%2F` to `/`).
fn is_object_name(name: &str) -> bool {
    !name.is_empty() && name != "." && name != ".." && !name.contains('%')
}

/// A kube client answered in-process: ConfigMaps `cm-a`, `cm-b` and Secret `sec-a` exist in
/// every namespace, everything else is 404.
fn mock_client() -> kube::Client {
    let service = tower::service_fn(|req: Request<kube::client::Body>| async move {
        let path = req.uri().path().to_owned();
        let name = path.rsplit('/').next().unwrap_or_default();
        let segments: Vec<&str> = path.split('/').collect();
        let shape_ok = req.method() == http::Method::GET
            && req.uri().query().is_none()
            && matches!(
                segments.as_slice(),
                ["", "api", "v1", "namespaces", ns, "configmaps" | "secrets", name]
                    if is_object_name(ns) && is_object_name(name)
            );
        if !shape_ok {
            STRAY_REQUESTS.lock().expect("stray requests").push(format!(
                "{} {}",
                req.method(),
                req.uri()
            ));
        }
        let (code, body) = if path.contains("/configmaps/") && (name == "cm-a" || name == "cm-b") {
            (
                200,
                json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": name}, "data": {"app.conf": format!("{name} v1"), "url": "http://x"}}),
            )
        } else if path.contains("/secrets/") && name == "sec-a" {
            (
                200,
                json!({"apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": name}, "data": {"k": "aHVudGVyMg=="}}),
            )
        } else {
            (
                404,
                json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": "not found", "reason": "NotFound", "code": 404}),
            )
        };
        let response = Response::builder()
            .status(code)
            .header("content-type", "application/json")
            .body(kube::client::Body::from(
                serde_json::to_vec(&body).expect("JSON"),
            ))
            .expect("a response");
        Ok::<_, Infallible>(response)
    });
    kube::Client::new(service, "default")
}
