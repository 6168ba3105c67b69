//! Shared helpers for the webhook tests: certificates, AdmissionReview fixtures, a client
//! that talks like kube-apiserver, and the real `reload-injector serve` process.

#![allow(dead_code)]

pub mod client;
pub mod load;
pub mod process;

use std::path::{Path, PathBuf};
use std::time::Duration;

use reload_injector::certs::{Bundle, CertRequest, generate};
use reload_injector::webhook::AppState;
use reload_injector::webhook::lookup::{CacheConfig, Lookups};
use reload_injector::webhook::webhook_metrics::Metrics;
use reload_injector::workload::Settings;
use serde_json::{Value, json};

/// The Service name kube-apiserver dials (and the SNI it sends).
pub const SERVER_NAME: &str = "reload-injector.reload-injector.svc";

/// A fresh CA and serving certificate for the webhook Service.
pub fn bundle() -> Bundle {
    reload_injector::install_crypto_provider();
    generate(&CertRequest {
        service: "reload-injector".into(),
        namespace: "reload-injector".into(),
        dns: vec![],
        ips: vec!["127.0.0.1".parse().unwrap()],
        validity: Duration::from_secs(24 * 3600),
    })
    .expect("certs::generate")
}

/// A scratch directory unique to this test, emptied first and removed when dropped.
pub fn scratch(name: &str) -> Scratch {
    let dir = std::env::temp_dir().join(format!("ri-test-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    Scratch(dir)
}

/// A test's scratch directory (a path), removed with everything in it on drop.
#[derive(Debug)]
pub struct Scratch(PathBuf);

impl std::ops::Deref for Scratch {
    type Target = Path;

    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for Scratch {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<std::ffi::OsStr> for Scratch {
    fn as_ref(&self) -> &std::ffi::OsStr {
        self.0.as_os_str()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Writes the pair kubelet-style: `dir/..<stamp>/tls.{crt,key}`, `..data -> ..<stamp>`,
/// `tls.crt -> ..data/tls.crt`. Call again to rotate (atomic `..data_tmp` rename).
pub fn kubelet_write(dir: &Path, stamp: &str, cert_pem: &str, key_pem: &str) {
    let versioned = dir.join(format!("..{stamp}"));
    std::fs::create_dir_all(&versioned).unwrap();
    std::fs::write(versioned.join("tls.crt"), cert_pem).unwrap();
    std::fs::write(versioned.join("tls.key"), key_pem).unwrap();
    let tmp = dir.join("..data_tmp");
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(format!("..{stamp}"), &tmp).unwrap();
    std::fs::rename(&tmp, dir.join("..data")).unwrap();
    for name in ["tls.crt", "tls.key"] {
        let link = dir.join(name);
        if std::fs::symlink_metadata(&link).is_err() {
            std::os::unix::fs::symlink(format!("..data/{name}"), &link).unwrap();
        }
    }
}

/// Core settings as `serve` builds them (regular sidecar container, no Secret key).
pub fn settings() -> Settings {
    Settings {
        sidecar_image: "example.test/reload-injector:test".into(),
        native_sidecars: false,
        own_namespace: "reload-injector".into(),
        version: reload_injector::VERSION.into(),
        inject_into_templates: false,
        secret_key: None,
        in_place: Default::default(),
        warning_chars: Some(reload_injector::workload::API_SERVER_WARNING_CHARS),
        reloader_retired: true,
    }
}

/// An application state like `serve --no-kube`.
pub fn state() -> AppState {
    let metrics = Metrics::new();
    let lookups = Lookups::new(
        None,
        None,
        cache_config(Duration::from_secs(1)),
        metrics.clone(),
    );
    AppState::new(settings(), lookups, metrics)
}

/// Cache settings with the given lookup timeout.
pub fn cache_config(timeout: Duration) -> CacheConfig {
    CacheConfig {
        ttl: Duration::from_secs(30),
        timeout,
        max_entries: 100,
        request_timeout: Duration::from_secs(10),
    }
}

/// A fixture under `tests/fixtures/reviews/`.
pub fn fixture(name: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/reviews")
        .join(name);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("failed to read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

/// The realistic replicaset-controller Pod review with `uid`.
pub fn pod_review(uid: &str) -> Value {
    let mut review = fixture("realistic-pod.json");
    review["request"]["uid"] = json!(uid);
    review
}

/// The realistic Pod review as compact bytes (~5 KB), as kube-apiserver sends it.
pub fn pod_review_bytes(uid: &str) -> Vec<u8> {
    serde_json::to_vec(&pod_review(uid)).unwrap()
}

/// A Deployment CREATE (by a person with kubectl) that mounts a ConfigMap with subPath.
pub fn subpath_deployment_review(uid: &str) -> Value {
    let mut review = fixture("deployment-subpath.json");
    review["request"]["uid"] = json!(uid);
    review
}

/// Checks the invariants of every answer: envelope, uid echo, patch/patchType together,
/// warnings format. Returns the `response` object.
pub fn check_answer(answer: &Value, uid: &str) -> Value {
    assert_eq!(answer["apiVersion"], "admission.k8s.io/v1", "{answer}");
    assert_eq!(answer["kind"], "AdmissionReview", "{answer}");
    let response = answer["response"].clone();
    assert_eq!(response["uid"], uid, "{answer}");
    assert!(response["allowed"].is_boolean(), "{answer}");
    assert_eq!(
        response.get("patch").is_some(),
        response.get("patchType").is_some(),
        "patch and patchType go together: {answer}"
    );
    if let Some(kind) = response.get("patchType") {
        assert_eq!(kind, "JSONPatch");
        assert!(
            response["patch"].is_string(),
            "patch must be a base64 string"
        );
    }
    let mut chars = 0;
    for warning in response["warnings"].as_array().into_iter().flatten() {
        let w = warning.as_str().unwrap();
        assert!(w.starts_with("reload-injector:"), "{w:?}");
        assert!(w.chars().count() <= 256, "{w:?} is longer than 256");
        assert!(!w.chars().any(char::is_control), "{w:?}");
        chars += w.chars().count();
    }
    // Past 4 Ki characters in all, kube-apiserver cuts every warning to 256.
    assert!(chars <= 4096, "{chars} characters of warnings");
    response
}

/// Decodes `response.patch` and applies it to `object`; returns the result.
pub fn apply_patch(response: &Value, object: &Value) -> Value {
    use base64::Engine;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(response["patch"].as_str().expect("a patch"))
        .expect("patch is base64");
    let patch: json_patch::Patch = serde_json::from_slice(&bytes).expect("patch is a JSON patch");
    let mut out = object.clone();
    json_patch::patch(&mut out, &patch).expect("patch applies");
    out
}

/// The AdmissionReview kube-apiserver would send for a golden-test case.
pub fn review_of_case(case: &Value) -> Value {
    let object = &case["object"];
    let api_version = object["apiVersion"].as_str().unwrap_or("v1");
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let kind = object["kind"].as_str().unwrap_or_default();
    let namespace = case["namespace"]
        .as_str()
        .or_else(|| object["metadata"]["namespace"].as_str())
        .unwrap_or("default");
    let mut request = json!({
        "uid": "",
        "kind": {"group": group, "version": version, "kind": kind},
        "resource": {"group": group, "version": version, "resource": format!("{}s", kind.to_lowercase())},
        "namespace": namespace,
        "operation": case["operation"].as_str().unwrap_or("CREATE"),
        "userInfo": {"username": "soak"},
        "object": object,
        "dryRun": false,
    });
    if !case["oldObject"].is_null() {
        request["oldObject"] = case["oldObject"].clone();
    }
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request})
}
