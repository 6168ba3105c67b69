use serde_json::json;

use super::*;

fn body(v: Value) -> Vec<u8> {
    serde_json::to_vec(&v).unwrap()
}

fn review(request: Value) -> Vec<u8> {
    body(json!({"apiVersion": API_VERSION, "kind": KIND, "request": request}))
}

#[test]
fn reads_every_field_the_core_needs() {
    let bytes = review(json!({
        "uid": "u-1",
        "kind": {"group": "apps", "version": "v1", "kind": "Deployment"},
        "operation": "UPDATE",
        "namespace": "shop",
        "object": {"metadata": {"name": "web"}},
        "oldObject": {"metadata": {"name": "web", "generation": 1}},
        "dryRun": true
    }));
    let r = Review::parse(&bytes).unwrap();
    assert_eq!(r.uid(), "u-1");
    let req = r.request().unwrap();
    assert_eq!(req.group, "apps");
    assert_eq!(req.kind, "Deployment");
    assert_eq!(req.operation, Operation::Update);
    assert_eq!(req.namespace, "shop");
    let Object::Read { pointer, parts } = req.object else {
        panic!("not read with the envelope: {:?}", req.object);
    };
    assert_eq!(pointer, "/spec/template");
    assert!(!parts.is_null && parts.pod.is_none());
    assert_eq!(
        req.old_object.unwrap().get(),
        r#"{"metadata":{"generation":1,"name":"web"}}"#
    );
    assert!(req.dry_run);
}

#[test]
fn core_group_null_old_object_and_absent_dry_run() {
    let bytes = review(json!({
        "uid": "u-2",
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "operation": "CREATE",
        "namespace": "shop",
        "object": {},
        "oldObject": null
    }));
    let r = Review::parse(&bytes).unwrap();
    let req = r.request().unwrap();
    assert_eq!(req.group, "");
    assert!(req.old_object.is_none());
    assert!(!req.dry_run);
}

#[test]
fn uid_survives_a_request_with_wrong_field_types() {
    let bytes = review(json!({"uid": "u-3", "kind": "Pod", "operation": 7}));
    let r = Review::parse(&bytes).unwrap();
    assert_eq!(r.uid(), "u-3");
    let err = r.request().unwrap_err();
    assert_eq!(err.field, "request.kind");
    assert!(err.to_string().starts_with("failed to read"), "{err}");
}

#[test]
fn envelope_errors_are_specific() {
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (b"".to_vec(), "empty"),
        (b"  \n".to_vec(), "empty"),
        (b"not json".to_vec(), "as JSON"),
        (b"[1,2]".to_vec(), "JSON array"),
        (
            body(
                json!({"apiVersion": "admission.k8s.io/v1beta1", "kind": KIND, "request": {"uid": "x"}}),
            ),
            "\"admission.k8s.io/v1beta1\"",
        ),
        (
            body(json!({"apiVersion": API_VERSION, "kind": "Pod", "request": {"uid": "x"}})),
            "kind is \"Pod\"",
        ),
        (
            body(json!({"apiVersion": API_VERSION, "kind": KIND})),
            "no request",
        ),
        (
            body(json!({"apiVersion": API_VERSION, "kind": KIND, "request": {"uid": 5}})),
            "request.uid",
        ),
    ];
    for (bytes, expected) in cases {
        let err = Review::parse(&bytes).unwrap_err().to_string();
        assert!(
            err.contains(expected),
            "{:?}: {err:?} lacks {expected:?}",
            String::from_utf8_lossy(&bytes)
        );
    }
}

#[test]
fn deep_nesting_is_an_error_not_a_stack_overflow() {
    let deep = |n| format!("{}{}", "[".repeat(n), "]".repeat(n));
    for bytes in ["[".repeat(100_000), deep(100_000)] {
        let err = Review::parse(bytes.as_bytes()).unwrap_err();
        assert!(matches!(err, EnvelopeError::NotJson(_)), "{err}");
        assert!(err.to_string().contains("recursion limit"), "{err}");
    }
    // Deep inside the object: the envelope keeps it raw, the core's read of it refuses it.
    let text = format!(
        r#"{{"apiVersion":"{API_VERSION}","kind":"{KIND}","request":{{"uid":"u",
            "kind":{{"group":"","version":"v1","kind":"Pod"}},"operation":"CREATE",
            "namespace":"shop","object":{{"spec":{{"containers":{}}}}}}}}}"#,
        deep(100_000)
    );
    let review = Review::parse(text.as_bytes()).unwrap();
    let req = review.request().unwrap();
    let settings = settings();
    let err = crate::workload::Plan::new(&req, &settings).unwrap_err();
    assert!(err.to_string().contains("recursion limit"), "{err}");
}

#[test]
fn allowed_with_patch_is_base64_json_patch() {
    let patch: json_patch::Patch = serde_json::from_value(
        json!([{"op": "add", "path": "/metadata/labels", "value": {"a": "b"}}]),
    )
    .unwrap();
    let out: Value = serde_json::from_slice(&allowed("u", &patch, &["w".into()])).unwrap();
    assert_eq!(out["apiVersion"], API_VERSION);
    assert_eq!(out["kind"], KIND);
    let resp = &out["response"];
    assert_eq!(resp["uid"], "u");
    assert_eq!(resp["allowed"], true);
    assert_eq!(resp["patchType"], "JSONPatch");
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(resp["patch"].as_str().unwrap())
        .unwrap();
    let back: json_patch::Patch = serde_json::from_slice(&decoded).unwrap();
    assert_eq!(back, patch);
    assert_eq!(resp["warnings"], json!(["w"]));
    assert!(resp.get("status").is_none());
}

#[test]
fn allowed_without_patch_has_neither_patch_nor_type() {
    let out: Value =
        serde_json::from_slice(&allowed("u", &json_patch::Patch(vec![]), &[])).unwrap();
    let resp = out["response"].as_object().unwrap();
    assert!(!resp.contains_key("patch"));
    assert!(!resp.contains_key("patchType"));
    assert!(!resp.contains_key("warnings"));
}

#[test]
fn denied_carries_code_and_message() {
    let out: Value = serde_json::from_slice(&denied("u", 403, "no subPath", &[])).unwrap();
    assert_eq!(out["response"]["allowed"], false);
    assert_eq!(
        out["response"]["status"],
        json!({"code": 403, "message": "no subPath"})
    );
}

fn settings() -> crate::workload::Settings {
    crate::workload::Settings {
        sidecar_image: "example/reloader:1".to_owned(),
        native_sidecars: true,
        own_namespace: "reload-injector".to_owned(),
        version: "test".to_owned(),
        inject_into_templates: false,
        secret_key: None,
        in_place: Default::default(),
        warning_chars: Some(crate::workload::API_SERVER_WARNING_CHARS),
        reloader_retired: true,
    }
}

/// `fixture`'s review written out with `request.object` first (so the envelope keeps it raw
/// and the core reads it later) or last (read while the envelope is parsed).
fn reordered(fixture: &str, object_first: bool) -> String {
    let path = format!(
        "{}/tests/fixtures/reviews/{fixture}",
        env!("CARGO_MANIFEST_DIR")
    );
    let doc: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let request = doc["request"].as_object().unwrap();
    let mut fields: Vec<String> = request
        .iter()
        .filter(|(k, _)| k.as_str() != "object")
        .map(|(k, v)| format!("{}:{v}", Value::from(k.as_str())))
        .collect();
    let object = format!("\"object\":{}", request["object"]);
    if object_first {
        fields.insert(0, object);
    } else {
        fields.push(object);
    }
    format!(
        r#"{{"apiVersion":"{API_VERSION}","kind":"{KIND}","request":{{{}}}}}"#,
        fields.join(",")
    )
}

#[test]
fn the_object_read_with_the_envelope_or_later_gives_the_same_answer() {
    let settings = settings();
    for fixture in ["realistic-pod.json", "deployment-subpath.json"] {
        let outcomes: Vec<_> = [true, false]
            .into_iter()
            .map(|object_first| {
                let text = reordered(fixture, object_first);
                let review = Review::parse(text.as_bytes()).unwrap();
                let req = review.request().unwrap();
                let kept_raw = matches!(req.object, Object::Raw(_));
                assert_eq!(kept_raw, object_first, "{fixture}");
                let plan = crate::workload::Plan::new(&req, &settings).unwrap();
                (
                    plan.config_refs(),
                    plan.outcome(&crate::hash::ConfigData::new()),
                )
            })
            .collect();
        assert_eq!(outcomes[0], outcomes[1], "{fixture}");
        // Each fixture gets an answer with something in it: a patch, or a denial.
        let nothing = crate::workload::Outcome::Allowed {
            patch: json_patch::Patch(Vec::new()),
            warnings: Vec::new(),
        };
        assert_ne!(outcomes[0].1, nothing, "{fixture}");
    }
}

#[test]
fn a_kind_that_changes_after_the_object_was_read_is_refused() {
    let text = format!(
        r#"{{"apiVersion":"{API_VERSION}","kind":"{KIND}","request":{{"uid":"u",
            "kind":{{"group":"","version":"v1","kind":"Pod"}},"operation":"CREATE",
            "object":{{"spec":{{"containers":[]}}}},
            "kind":{{"group":"apps","version":"v1","kind":"Deployment"}}}}}}"#
    );
    let review = Review::parse(text.as_bytes()).unwrap();
    let err = review.request().unwrap_err();
    assert_eq!(err.field, "request.kind");
}
