//! The `/mutate` router without a socket (`oneshot`): every kind of bad input gets the right
//! status and message, and every real AdmissionReview gets HTTP 200 with its uid echoed.

use crate::webhook_support;

use axum::Router;
use axum::body::{Body, to_bytes};
use http::{Request, StatusCode, header};
use k8s_openapi::api::core::v1::Pod;
use reload_injector::webhook::app;
use reload_injector::webhook::limits::BodyBudget;
use reload_injector::webhook::router::{HttpLimits, app_with};
use reload_injector::workload::{NO_TOKEN_VOLUME, SIDECAR_NAME, TOKEN_MOUNT_PATH};
use serde_json::{Value, json};
use std::time::Duration;
use tower::ServiceExt;
use webhook_support::{apply_patch, check_answer, pod_review, state, subpath_deployment_review};

async fn post(app: Router, content_type: Option<&str>, body: Vec<u8>) -> (StatusCode, String) {
    post_to("/mutate", app, content_type, body).await
}

async fn post_to(
    path: &str,
    app: Router,
    content_type: Option<&str>,
    body: Vec<u8>,
) -> (StatusCode, String) {
    let mut req = Request::post(path);
    if let Some(ct) = content_type {
        req = req.header(header::CONTENT_TYPE, ct);
    }
    let resp = app
        .oneshot(req.body(Body::from(body)).unwrap())
        .await
        .unwrap();
    let status = resp.status();
    let body = to_bytes(resp.into_body(), 1 << 24).await.unwrap();
    (status, String::from_utf8(body.to_vec()).unwrap())
}

async fn post_json(app: Router, body: Vec<u8>) -> (StatusCode, String) {
    post(app, Some("application/json"), body).await
}

async fn review(app: Router, review: &Value) -> Value {
    let (status, body) = post_json(app, serde_json::to_vec(review).unwrap()).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    serde_json::from_str(&body).unwrap()
}

fn envelope(request: Value) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request
    }))
    .unwrap()
}

#[tokio::test]
async fn realistic_pod_is_patched_with_a_sidecar_and_a_hash_warning() {
    let review_in = pod_review("uid-realistic");
    let answer = review(app(state()), &review_in).await;
    let response = check_answer(&answer, "uid-realistic");
    assert_eq!(response["allowed"], true);
    let object = &review_in["request"]["object"];
    let patched = apply_patch(&response, object);
    let pod: Pod = serde_json::from_value(patched.clone()).expect("patched Pod parses");
    let spec = pod.spec.unwrap();
    assert!(
        spec.containers.iter().any(|c| c.name == "config-reloader"),
        "no sidecar in {patched}"
    );
    // What kube-apiserver's ServiceAccount plugin, run again after the webhook, would mount the
    // token into: every container with nothing at the token path. Nothing, so no second review.
    let containers = spec
        .init_containers
        .iter()
        .flatten()
        .chain(&spec.containers);
    let at_token_path = |c: &k8s_openapi::api::core::v1::Container| {
        let mounts = c.volume_mounts.iter().flatten();
        mounts
            .filter(|m| m.mount_path == TOKEN_MOUNT_PATH)
            .map(|m| m.name.clone())
            .collect::<Vec<_>>()
    };
    for container in containers {
        let expected = if container.name == SIDECAR_NAME {
            NO_TOKEN_VOLUME
        } else {
            "kube-api-access-x7k2p"
        };
        assert_eq!(at_token_path(container), [expected], "{}", container.name);
    }
    // --no-kube: the configMapKeyRef could not be hashed, and the answer says so.
    let warnings = response["warnings"].as_array().expect("warnings");
    eprintln!("WARN {warnings:#?}");
    assert!(
        warnings
            .iter()
            .any(|w| w.as_str().unwrap().contains("web-settings")),
        "{warnings:?}"
    );

    // A second pass over the mutated Pod changes nothing.
    let mut again = review_in.clone();
    again["request"]["object"] = patched;
    let answer = review(app(state()), &again).await;
    let response = check_answer(&answer, "uid-realistic");
    assert!(response.get("patch").is_none(), "{answer}");
}

#[tokio::test]
async fn dry_run_gets_the_identical_answer() {
    let mut dry = pod_review("uid-dry");
    dry["request"]["dryRun"] = json!(true);
    let wet = review(app(state()), &pod_review("uid-dry")).await;
    let dry = review(app(state()), &dry).await;
    assert_eq!(wet, dry);
}

#[tokio::test]
async fn subpath_deployment_is_denied_with_403_and_the_fix() {
    let answer = review(app(state()), &subpath_deployment_review("uid-deny")).await;
    let response = check_answer(&answer, "uid-deny");
    assert_eq!(response["allowed"], false);
    assert_eq!(response["status"]["code"], 403);
    let message = response["status"]["message"].as_str().unwrap();
    for part in ["nginx", "web-nginx", "/etc/nginx/nginx.conf"] {
        assert!(message.contains(part), "{message:?} lacks {part:?}");
    }
}

#[tokio::test]
async fn unknown_kinds_and_operations_are_allowed_untouched() {
    let answer = review(
        app(state()),
        &serde_json::from_slice(&envelope(json!({
            "uid": "uid-svc",
            "kind": {"group": "", "version": "v1", "kind": "Service"},
            "operation": "CREATE", "namespace": "shop",
            "object": {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "x"}}
        })))
        .unwrap(),
    )
    .await;
    let response = check_answer(&answer, "uid-svc");
    assert_eq!(response["allowed"], true);
    assert!(response.get("patch").is_none());
}

#[tokio::test]
async fn object_that_cannot_be_understood_is_refused_with_the_uid() {
    let mut bad = pod_review("uid-garbage-spec");
    bad["request"]["object"]["spec"]["containers"] = json!("not a list");
    let answer = review(app(state()), &bad).await;
    let response = check_answer(&answer, "uid-garbage-spec");
    assert_eq!(response["allowed"], false);
    let message = response["status"]["message"].as_str().unwrap();
    assert!(message.starts_with("failed to"), "{message}");
    assert!(
        message.contains("invalid type: string \"not a list\""),
        "{message}"
    );
    // Deep in the spec: the lean read refuses it, and the second read words it.
    let mut bad = pod_review("uid-garbage-env");
    bad["request"]["object"]["spec"]["containers"][0]["env"] = json!([{"valueFrom": 3}]);
    let answer = review(app(state()), &bad).await;
    let response = check_answer(&answer, "uid-garbage-env");
    assert_eq!(response["allowed"], false);
    assert_eq!(response["status"]["code"], 400);
    let message = response["status"]["message"].as_str().unwrap();
    assert!(
        message.starts_with("failed to read the Pod under review: invalid type: integer `3`"),
        "{message}"
    );
}

fn rollout_review(uid: &str, spec: Value) -> Value {
    serde_json::from_slice(&envelope(json!({
        "uid": uid, "kind": {"group": "argoproj.io", "version": "v1alpha1", "kind": "Rollout"},
        "operation": "CREATE", "namespace": "shop",
        "object": {"apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout",
            "metadata": {"name": "web", "namespace": "shop"}, "spec": spec}
    })))
    .unwrap()
}

#[tokio::test]
async fn a_rollout_is_a_workload_and_one_not_understood_is_admitted_with_a_warning() {
    let template = |mount: Value| {
        json!({"metadata": {"labels": {"app": "web"}}, "spec": {
            "containers": [{"name": "nginx", "image": "nginx", "volumeMounts": [mount]}],
            "volumes": [{"name": "conf", "configMap": {"name": "web-nginx"}}]}})
    };
    let subpath =
        json!({"name": "conf", "mountPath": "/etc/nginx/nginx.conf", "subPath": "nginx.conf"});
    let canary = json!({"strategy": {"canary": {"steps": [{"setWeight": 20}]}}});
    let mut denied = canary.clone();
    denied["template"] = template(subpath);
    let answer = review(app(state()), &rollout_review("uid-r1", denied)).await;
    let response = check_answer(&answer, "uid-r1");
    assert_eq!(response["allowed"], false, "{answer}");
    assert_eq!(response["status"]["code"], 403);

    let mut garbage = canary.clone();
    garbage["template"] = json!({"spec": {"containers": "not a list"}});
    let by_ref =
        json!({"workloadRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web-tpl"}});
    for (uid, spec, says) in [
        ("uid-r2", by_ref, r#"Deployment "web-tpl""#),
        ("uid-r3", garbage, "template is unreadable"),
        (
            "uid-r4",
            canary,
            "neither spec.template nor spec.workloadRef",
        ),
        (
            "uid-r5",
            json!("garbage"),
            "neither spec.template nor spec.workloadRef",
        ),
    ] {
        let answer = review(app(state()), &rollout_review(uid, spec)).await;
        let response = check_answer(&answer, uid);
        assert_eq!(response["allowed"], true, "{answer}");
        assert!(response.get("patch").is_none(), "{answer}");
        let warnings = response["warnings"].as_array().expect("a warning");
        assert!(
            warnings.iter().any(|w| w.as_str().unwrap().contains(says)),
            "{uid}: {warnings:?}"
        );
    }
}

#[tokio::test]
async fn uid_is_echoed_even_when_the_object_is_garbage() {
    for (uid, object) in [
        ("uid-string", json!("garbage")),
        ("uid-number", json!(42)),
        ("uid-array", json!([1, 2, 3])),
    ] {
        let body = envelope(json!({
            "uid": uid, "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "operation": "CREATE", "namespace": "shop", "object": object
        }));
        let (status, text) = post_json(app(state()), body).await;
        assert_eq!(status, StatusCode::OK, "{text}");
        let response = check_answer(&serde_json::from_str(&text).unwrap(), uid);
        assert_eq!(response["allowed"], false, "{text}");
    }
    // Fields of the wrong type around the object: still an answer to that uid.
    let body = envelope(json!({"uid": "uid-fields", "kind": 7, "operation": ["CREATE"]}));
    let (status, text) = post_json(app(state()), body).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    let response = check_answer(&serde_json::from_str(&text).unwrap(), "uid-fields");
    assert_eq!(response["allowed"], false);
    assert!(
        response["status"]["message"]
            .as_str()
            .unwrap()
            .contains("request.kind")
    );
}

#[tokio::test]
async fn bodies_that_are_not_admission_reviews_get_400_with_a_message() {
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("not JSON", b"hello, webhook".to_vec(), "JSON"),
        ("empty body", Vec::new(), "empty"),
        ("JSON array", b"[{\"apiVersion\":\"admission.k8s.io/v1\"}]".to_vec(), "array"),
        ("JSON string", b"\"AdmissionReview\"".to_vec(), "string"),
        (
            "wrong apiVersion",
            serde_json::to_vec(&json!({"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview", "request": {"uid": "u"}})).unwrap(),
            "apiVersion",
        ),
        (
            "wrong kind",
            serde_json::to_vec(&json!({"apiVersion": "admission.k8s.io/v1", "kind": "Pod", "request": {"uid": "u"}})).unwrap(),
            "kind",
        ),
        (
            "no request",
            serde_json::to_vec(&json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"})).unwrap(),
            "request",
        ),
        ("no uid", envelope(json!({"kind": {"kind": "Pod"}})), "uid"),
        ("deeply nested", "[".repeat(10_000).into_bytes(), "recursion limit"),
        (
            "deeply nested object",
            format!(
                "{{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{{\"uid\":\"u\",\"object\":{}}}}}",
                "{\"a\":".repeat(10_000)
            )
            .into_bytes(),
            "recursion limit",
        ),
    ];
    for (name, body, expected) in cases {
        let (status, text) = post_json(app(state()), body).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{name}: {text}");
        assert!(
            text.contains(expected),
            "{name}: {text:?} lacks {expected:?}"
        );
        assert!(text.starts_with("failed to"), "{name}: {text:?}");
    }
}

/// A JSON POST to `/mutate` that declares its length.
fn declared_post(body: Vec<u8>) -> Request<Body> {
    Request::post("/mutate")
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::CONTENT_LENGTH, body.len())
        .body(Body::from(body))
        .unwrap()
}

#[tokio::test]
async fn oversized_bodies_get_413() {
    // Declared length far over the limit: refused before reading.
    let req = declared_post(vec![b' '; 30 * 1024 * 1024]);
    let resp = app(state()).oneshot(req).await.unwrap();
    assert_eq!(resp.status(), StatusCode::PAYLOAD_TOO_LARGE);
    let big = vec![b' '; 7 * 1024 * 1024];
    // Declared length over the limit: read, discarded, refused.
    let resp = app(state())
        .oneshot(declared_post(big.clone()))
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::PAYLOAD_TOO_LARGE);
    // No declared length: refused while reading.
    let (status, text) = post_json(app(state()), big).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{text}");
    assert!(text.contains("larger than"), "{text}");
}

#[tokio::test]
async fn a_body_declared_too_large_is_refused_without_waiting_for_the_budget() {
    let budget = BodyBudget::new(8 * 1024 * 1024);
    let limits = HttpLimits {
        body_timeout: Duration::from_millis(500),
        budget: budget.clone(),
    };
    // The part for large bodies is held by reviews in flight (a 7 MiB body would ask for it).
    let _held = budget
        .reserve(budget.total(), Duration::ZERO)
        .await
        .unwrap();
    let held = budget.in_use();
    assert!(held >= 6 * 1024 * 1024, "{held}");
    let req = declared_post(vec![b' '; 7 * 1024 * 1024]);
    let resp = app_with(state(), limits).oneshot(req).await.unwrap();
    // A share of the budget would have been waited for, and a 503 given.
    assert_eq!(resp.status(), StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(budget.in_use(), held);
}

#[tokio::test]
async fn content_type_must_be_json() {
    let body = serde_json::to_vec(&pod_review("uid-ct")).unwrap();
    for ct in [Some("text/plain"), Some("application/yaml"), None] {
        let (status, text) = post(app(state()), ct, body.clone()).await;
        assert_eq!(status, StatusCode::UNSUPPORTED_MEDIA_TYPE, "{ct:?}: {text}");
        assert!(text.contains("application/json"), "{text}");
    }
    for ct in ["application/json; charset=utf-8", "Application/JSON"] {
        let (status, text) = post(app(state()), Some(ct), body.clone()).await;
        assert_eq!(status, StatusCode::OK, "{ct}: {text}");
    }
}

/// Anything but `POST /mutate` gets a plain-text 404 or 405 (with `Allow: POST`) that says
/// where reviews go, counted like the other refusals: a webhook configured with the wrong
/// path shows up in the metrics, not only as Pods admitted unreviewed.
#[tokio::test]
async fn only_post_to_mutate_is_served() {
    let state = state();
    let send = |request: Request<Body>| {
        let app = app(state.clone());
        async move {
            let resp = app.oneshot(request).await.unwrap();
            let status = resp.status();
            let allow = resp.headers().get(header::ALLOW).cloned();
            let body = to_bytes(resp.into_body(), 1 << 16).await.unwrap();
            (status, allow, String::from_utf8(body.to_vec()).unwrap())
        }
    };
    let (status, allow, text) = send(Request::get("/mutate").body(Body::empty()).unwrap()).await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(allow.as_ref().map(|v| v.to_str().unwrap()), Some("POST"));
    assert_eq!(
        text,
        "failed to accept the request: reviews take POST, got GET\n"
    );
    let (status, _, _) = send(
        Request::get("/mutate/opted-in")
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    for path in ["/validate", "/mutate/pods", "/"] {
        let request = Request::post(path)
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(serde_json::to_vec(&pod_review("r")).unwrap()))
            .unwrap();
        let (status, allow, text) = send(request).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{path}");
        assert_eq!(allow, None);
        assert_eq!(
            text,
            "failed to accept the request: no such path; reviews go to POST /mutate\n"
        );
    }
    let metrics = state.metrics().render();
    for line in [
        r#"reload_injector_rejected_requests_total{code="405"} 2"#,
        r#"reload_injector_rejected_requests_total{code="404"} 3"#,
    ] {
        assert!(
            metrics.lines().any(|l| l == line),
            "missing {line:?} in\n{metrics}"
        );
    }
    assert!(
        !metrics.contains("reload_injector_reviews_total{"),
        "{metrics}"
    );
}

#[tokio::test]
async fn reviews_are_counted_in_metrics() {
    let state = state();
    review(app(state.clone()), &pod_review("m1")).await;
    review(app(state.clone()), &subpath_deployment_review("m2")).await;
    let text = state.metrics().render();
    for line in [
        r#"reload_injector_reviews_total{kind="Pod",operation="CREATE",outcome="patched"} 1"#,
        r#"reload_injector_reviews_total{kind="Deployment",operation="CREATE",outcome="denied"} 1"#,
        "reload_injector_denials_total 1",
        // --no-kube: the Pod's env ConfigMap and the one its sidecar watches.
        "reload_injector_hash_lookup_failures_total 2",
        "reload_injector_review_duration_seconds_count 2",
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "missing {line:?} in\n{text}"
        );
    }
}

#[tokio::test]
async fn requests_refused_with_an_http_error_are_counted_by_status() {
    let state = state();
    let body = serde_json::to_vec(&pod_review("r1")).unwrap();
    post(app(state.clone()), Some("text/plain"), body.clone()).await;
    post(app(state.clone()), Some("text/plain"), body.clone()).await;
    post_json(app(state.clone()), b"[1]".to_vec()).await;
    post_json(app(state.clone()), body).await;
    let text = state.metrics().render();
    for line in [
        r#"reload_injector_rejected_requests_total{code="415"} 2"#,
        r#"reload_injector_rejected_requests_total{code="400"} 1"#,
        r#"reload_injector_reviews_total{kind="Pod",operation="CREATE",outcome="patched"} 1"#,
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "missing {line:?} in\n{text}"
        );
    }
    assert_eq!(
        text.lines()
            .filter(|l| l.starts_with("reload_injector_rejected_requests_total{"))
            .count(),
        2,
        "{text}"
    );
}

/// A Deployment CREATE in namespace `plain` that reads a ConfigMap through env, with these
/// annotations on its own metadata.
fn plain_deployment_review(uid: &str, annotations: Value) -> Value {
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": "apps", "version": "v1", "kind": "Deployment"},
            "resource": {"group": "apps", "version": "v1", "resource": "deployments"},
            "namespace": "plain",
            "operation": "CREATE",
            "object": {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": "web", "namespace": "plain", "annotations": annotations},
                "spec": {
                    "selector": {"matchLabels": {"app": "web"}},
                    "template": {
                        "metadata": {"labels": {"app": "web"}},
                        "spec": {"containers": [{
                            "name": "app",
                            "image": "example/app:1",
                            "envFrom": [{"configMapRef": {"name": "web-env"}}]
                        }]}
                    }
                }
            }
        }
    })
}

/// The webhooks of namespaces without the label call /mutate/opted-in: there only an object
/// that opts in itself is changed; /mutate (labelled namespaces) changes every one.
#[tokio::test]
async fn the_opted_in_path_changes_only_objects_that_opt_in() {
    let answer_at = |path: &'static str, review: Value| async move {
        let body = serde_json::to_vec(&review).unwrap();
        let (status, text) = post_to(path, app(state()), Some("application/json"), body).await;
        assert_eq!(status, StatusCode::OK, "{text}");
        let answer: Value = serde_json::from_str(&text).unwrap();
        check_answer(&answer, "u")
    };
    let plain = plain_deployment_review("u", json!({}));
    let opted_in = plain_deployment_review("u", json!({"reload-injector.io/inject": "enabled"}));

    let left = answer_at("/mutate/opted-in", plain.clone()).await;
    assert_eq!(left["allowed"], true);
    assert!(left.get("patch").is_none(), "{left}");
    let warnings = left["warnings"].to_string();
    assert!(warnings.contains("not managed"), "{warnings}");

    // Without a cluster the hash cannot be computed: the warning about web-env says the
    // Deployment was looked at, as in a labelled namespace.
    for (path, review) in [("/mutate/opted-in", opted_in), ("/mutate", plain)] {
        let response = answer_at(path, review.clone()).await;
        let warnings = response["warnings"].to_string();
        assert!(
            warnings.contains("ConfigMap \\\"web-env\\\"") && !warnings.contains("not managed"),
            "{path}: {warnings}"
        );
    }
}
