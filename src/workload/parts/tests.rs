use serde_json::json;
use serde_json::value::to_raw_value;

use super::*;

const TEMPLATE: &str = "/spec/template";
const CRONJOB: &str = "/spec/jobTemplate/spec/template";

fn raw(text: &str) -> Box<RawValue> {
    RawValue::from_string(text.to_owned()).expect("valid JSON")
}

fn raw_of(value: &Value) -> Box<RawValue> {
    to_raw_value(value).unwrap()
}

/// The spec of `object`, a Pod, as the core reads it.
fn spec_of(object: &RawValue) -> PodSpec {
    read(object, "")
        .unwrap()
        .pod
        .unwrap()
        .spec()
        .unwrap()
        .into_owned()
}

/// The editable view of `object` at `pointer`, as the core diffs it.
fn view(object: &Value, pointer: &str) -> Value {
    let object = raw_of(object);
    let parts = read(&object, pointer).unwrap();
    let pod = parts.pod.expect("a pod");
    let spec = pod.spec().unwrap();
    at_pointer(pod.editable(&spec), pointer)
}

/// Asserts that `edit` made to the editable view of `pod` (a Pod) gives the patch it gives made
/// to the whole object.
fn assert_view_gives_the_whole_patch(pod: &Value, edit: impl Fn(&mut Value)) {
    let mut edited = pod.clone();
    edit(&mut edited);
    let whole = json_patch::diff(pod, &edited);
    let before = view(pod, "");
    let mut after = before.clone();
    edit(&mut after);
    assert_eq!(json_patch::diff(&before, &after), whole, "{pod}");
}

#[test]
fn a_pod_gives_its_namespace_owner_and_only_the_editable_fields() {
    let pod = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "app", "namespace": "shop",
            "annotations": {"reload-injector.io/a": "1", "reload-injector.io/n": 2, "other": "x"},
            "labels": {"app": "web", "reload-injector.io/sidecar": "true"},
            "ownerReferences": [{"kind": "ReplicaSet", "name": "rs", "controller": true}],
            "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}]
        },
        "spec": {
            "containers": [{"name": "a", "image": "x"}, {"name": "b", "image": "y"}],
            "initContainers": [{"name": "init"}],
            "volumes": [{"name": "v", "emptyDir": {}}],
            "shareProcessNamespace": false,
            "tolerations": [{"key": "k"}]
        },
        "status": {"phase": "Pending"}
    });
    let object = raw_of(&pod);
    let parts = read(&object, "").unwrap();
    assert_eq!(parts.own.namespace().as_deref(), Some("shop"));
    assert!(parts.own.controlled());
    let pod_parts = parts.pod.unwrap();
    assert!(pod_parts.meta.controlled());
    let annotations = pod_parts.meta.string_map(MapField::Annotations);
    assert_eq!(
        annotations.len(),
        1,
        "the non-string value and the unprefixed key are skipped"
    );
    assert_eq!(annotations["reload-injector.io/a"], "1");
    let labels = pod_parts.meta.string_map(MapField::Labels);
    assert_eq!(labels.len(), 1, "{labels:?}");
    assert_eq!(labels["reload-injector.io/sidecar"], "true");
    assert_eq!(
        view(&pod, ""),
        json!({
            "metadata": {
                "annotations": {"reload-injector.io/a": "1", "reload-injector.io/n": 2},
                "labels": {"reload-injector.io/sidecar": "true"}
            },
            "spec": {
                "containers": [null, null],
                "initContainers": [null],
                "volumes": [null],
                "shareProcessNamespace": false
            }
        })
    );
}

#[test]
fn a_template_reads_the_namespace_and_owner_of_the_object_not_of_the_template() {
    let deployment = json!({
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {
            "replicas": 2,
            "template": {
                "metadata": {
                    "namespace": "elsewhere",
                    "labels": {"app": "web"},
                    "ownerReferences": [{"controller": true}]
                },
                "spec": {"containers": [{"name": "app"}]}
            }
        }
    });
    let object = raw_of(&deployment);
    let parts = read(&object, TEMPLATE).unwrap();
    assert_eq!(parts.own.namespace().as_deref(), Some("shop"));
    assert!(!parts.own.controlled());
    assert_eq!(
        view(&deployment, TEMPLATE),
        json!({"spec": {"template": {
            "metadata": {"labels": {}},
            "spec": {"containers": [null]}
        }}})
    );
}

#[test]
fn a_cronjob_template_three_levels_down_is_found() {
    let cronjob = json!({
        "metadata": {"namespace": "batch", "ownerReferences": [{"controller": true}]},
        "spec": {"schedule": "* * * * *", "jobTemplate": {"spec": {"template": {
            "spec": {"containers": [{"name": "job"}], "restartPolicy": "Never"}
        }}}}
    });
    let object = raw_of(&cronjob);
    let parts = read(&object, CRONJOB).unwrap();
    assert!(parts.own.controlled());
    assert_eq!(parts.pod.unwrap().spec().unwrap().containers[0].name, "job");
    assert_eq!(
        view(&cronjob, CRONJOB),
        json!({"spec": {"jobTemplate": {"spec": {"template": {"spec": {"containers": [null]}}}}}})
    );
}

#[test]
fn absent_metadata_stays_absent_and_empty_metadata_stays_empty() {
    let bare = json!({"spec": {"containers": []}});
    assert_eq!(view(&bare, ""), json!({"spec": {"containers": []}}));
    let empty = json!({"metadata": {"name": "x"}, "spec": {}});
    assert_eq!(view(&empty, ""), json!({"metadata": {}, "spec": {}}));
}

#[test]
fn metadata_that_is_not_an_object_is_kept_by_type_and_reads_as_empty() {
    for odd in [
        json!(null),
        json!("text"),
        json!([1, 2]),
        json!(7),
        json!(true),
    ] {
        let pod = json!({"metadata": odd.clone(), "spec": {"containers": [{"name": "a"}]}});
        let object = raw_of(&pod);
        let parts = read(&object, "").unwrap();
        assert_eq!(parts.own.namespace(), None, "{odd}");
        assert!(!parts.own.controlled(), "{odd}");
        let meta = &parts.pod.as_ref().unwrap().meta;
        assert!(meta.string_map(MapField::Annotations).is_empty(), "{odd}");
        // A list is kept as `[]`: the core can only replace it, and the diff of a replaced
        // value does not depend on what it held.
        let kept = if odd.is_array() { json!([]) } else { odd };
        assert_eq!(
            view(&pod, ""),
            json!({"metadata": kept, "spec": {"containers": [null]}})
        );
    }
}

#[test]
fn null_lists_stay_null_and_odd_owner_references_name_no_controller() {
    let pod = json!({
        "metadata": {"ownerReferences": {"controller": true}, "annotations": null},
        "spec": {"containers": null, "initContainers": null, "volumes": null}
    });
    let object = raw_of(&pod);
    assert!(!read(&object, "").unwrap().own.controlled());
    assert_eq!(
        view(&pod, ""),
        json!({
            "metadata": {"annotations": null},
            "spec": {"containers": null, "initContainers": null, "volumes": null}
        })
    );
}

#[test]
fn a_repeated_key_keeps_its_last_value_at_every_level() {
    let object = raw(
        r#"{"metadata": {"namespace": "first"}, "metadata": {"namespace": "last"},
            "spec": {"template": {"spec": {"containers": [{"name": "gone"}]}}},
            "spec": {"template": {
                "metadata": {"labels": {"reload-injector.io/a": "1"},
                             "labels": {"reload-injector.io/b": "1", "reload-injector.io/b": "2"}},
                "spec": {"containers": [{"name": "old"}], "containers": [{"name": "x"}, {"name": "y"}],
                         "shareProcessNamespace": true, "shareProcessNamespace": false}
            }}}"#,
    );
    let parts = read(&object, TEMPLATE).unwrap();
    assert_eq!(parts.own.namespace().as_deref(), Some("last"));
    let pod = parts.pod.unwrap();
    assert_eq!(
        pod.meta
            .string_map(MapField::Labels)
            .into_iter()
            .collect::<Vec<_>>(),
        [("reload-injector.io/b".to_owned(), "2".to_owned())]
    );
    let spec = pod.spec().unwrap();
    let names: Vec<_> = spec.containers.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["x", "y"]);
    assert_eq!(spec.share_process_namespace, Some(false));
    assert_eq!(
        pod.editable(&spec),
        json!({
            "metadata": {"labels": {"reload-injector.io/b": "2"}},
            "spec": {"containers": [null, null], "shareProcessNamespace": false}
        })
    );
}

#[test]
fn a_later_key_without_the_pod_removes_the_pod_found_earlier() {
    let object = raw(r#"{"spec": {"template": {"spec": {}}}, "spec": {"replicas": 1}}"#);
    assert!(read(&object, TEMPLATE).unwrap().pod.is_none());
}

#[test]
fn a_repeated_key_deep_in_the_spec_keeps_its_last_value_too() {
    let object = raw(r#"{"spec": {"containers": [{"name": "first", "name": "last"}]}}"#);
    assert_eq!(spec_of(&object).containers[0].name, "last");
}

#[test]
fn escaped_keys_are_read_by_their_text() {
    let object = raw(r#"{"m\u0065tadata": {"n\u0061mespace": "shop"},
            "spec": {"cont\u0061iners": [{"n\u0061me": "app"}]}}"#);
    let parts = read(&object, "").unwrap();
    assert_eq!(parts.own.namespace().as_deref(), Some("shop"));
    let pod = parts.pod.unwrap();
    let spec = pod.spec().unwrap();
    assert_eq!(spec.containers[0].name, "app");
    assert_eq!(
        pod.editable(&spec),
        json!({"metadata": {}, "spec": {"containers": [null]}})
    );
}

#[test]
fn no_pod_where_the_pointer_leads_to_nothing_or_to_a_non_object() {
    for object in [
        json!({"metadata": {"namespace": "shop"}}),
        json!({"spec": {"template": "text"}}),
        json!({"spec": {"template": null}}),
        json!({"spec": [{"template": {}}]}),
        json!({"spec": 3}),
    ] {
        let raw = raw_of(&object);
        let parts = read(&raw, TEMPLATE).unwrap();
        assert!(parts.pod.is_none(), "{object}");
    }
    for top in ["[]", "\"pod\"", "1", "true"] {
        let object = raw(top);
        let parts = read(&object, "").unwrap();
        assert!(
            parts.pod.is_none() && parts.own.namespace().is_none(),
            "{top}"
        );
    }
}

#[test]
fn a_spec_error_is_worded_as_k8s_openapi_words_it() {
    for spec in [
        json!("text"),
        json!(null),
        json!([]),
        json!({"containers": "app"}),
        json!({"containers": [{"name": 7}]}),
        json!({"volumes": [{"name": "v", "configMap": {"items": {}}}]}),
        json!({"hostPID": "yes"}),
    ] {
        let object = raw_of(&json!({"spec": spec.clone()}));
        let lean = read(&object, "").unwrap().pod.unwrap().spec().unwrap_err();
        let full = k8s_openapi::api::core::v1::PodSpec::deserialize(&spec)
            .unwrap_err()
            .to_string();
        assert_eq!(lean.to_string(), full, "{spec}");
    }
}

#[test]
fn fields_the_core_never_reads_are_not_checked() {
    let pod = json!({"spec": {
        "containers": [{"name": "app", "resources": "lots", "ports": 80}],
        "tolerations": "any"
    }});
    assert_eq!(spec_of(&raw_of(&pod)).containers[0].name, "app");
}

#[test]
fn at_pointer_wraps_the_pod_in_the_objects_of_the_pointer() {
    assert_eq!(at_pointer(json!({"a": 1}), ""), json!({"a": 1}));
    assert_eq!(
        at_pointer(json!({"a": 1}), CRONJOB),
        json!({"spec": {"jobTemplate": {"spec": {"template": {"a": 1}}}}})
    );
}

#[test]
fn too_deep_a_nesting_in_the_spec_is_an_error_not_an_empty_field() {
    let deep = format!("{}{}", "[".repeat(1000), "]".repeat(1000));
    let object = raw(&format!(r#"{{"spec": {{"containers": {deep}}}}}"#));
    let err = read(&object, "").unwrap().pod.unwrap().spec().unwrap_err();
    assert!(err.to_string().contains("recursion limit"), "{err}");
}

/// Both reads of `object` (a Pod), the lean one first.
fn both_reads(object: &RawValue) -> [PodParts<'_>; 2] {
    let lean = read_with(object, ObjectSeed::reading("", SpecRead::Lean)).expect("the lean read");
    let raw = read_with(object, ObjectSeed::reading("", SpecRead::KeptRaw)).expect("the raw read");
    let (lean, raw) = (lean.pod.unwrap(), raw.pod.unwrap());
    assert!(matches!(lean.spec, Spec::Read { .. }), "{:?}", lean.spec);
    assert!(matches!(raw.spec, Spec::Fields(_)), "{:?}", raw.spec);
    [lean, raw]
}

#[test]
fn the_lean_read_of_a_spec_equals_the_raw_read_on_every_fixture_and_odd_shape() {
    let mut specs = crate::workload::pod::tests::fixture_specs();
    for (name, spec) in [
        ("absent lists", json!({})),
        (
            "null lists",
            json!({"containers": null, "initContainers": null, "volumes": null, "shareProcessNamespace": null}),
        ),
        (
            "empty lists",
            json!({"containers": [], "initContainers": [], "volumes": []}),
        ),
        (
            "shared",
            json!({"containers": [{"name": "a"}], "shareProcessNamespace": true}),
        ),
    ] {
        specs.push((name.to_owned(), spec));
    }
    for (name, spec) in specs {
        let object = raw_of(&json!({"metadata": {}, "spec": spec}));
        let [lean, raw] = both_reads(&object);
        let (lean_spec, raw_spec) = (lean.spec().unwrap(), raw.spec().unwrap());
        assert_eq!(lean_spec, raw_spec, "{name}");
        assert_eq!(lean.editable(&lean_spec), raw.editable(&raw_spec), "{name}");
    }
    let repeated = raw(
        r#"{"spec": {"containers": [{"name": "a"}], "containers": null,
        "volumes": null, "volumes": [{"name": "v"}, {"name": "w"}],
        "shareProcessNamespace": true, "shareProcessNamespace": null}}"#,
    );
    let [lean, raw] = both_reads(&repeated);
    let (lean_spec, raw_spec) = (lean.spec().unwrap(), raw.spec().unwrap());
    assert_eq!(lean_spec, raw_spec);
    assert_eq!(
        lean.editable(&lean_spec),
        json!({"spec": {"containers": null, "volumes": [null, null], "shareProcessNamespace": null}})
    );
    assert_eq!(lean.editable(&lean_spec), raw.editable(&raw_spec));
}

#[test]
fn a_spec_the_lean_read_refuses_is_read_raw_and_its_error_worded() {
    let object = raw(r#"{"spec": {"containers": [{"name": "a", "env": [{"valueFrom": 3}]}]}}"#);
    assert!(read_with(&object, ObjectSeed::reading("", SpecRead::Lean)).is_err());
    let pod = read(&object, "").unwrap().pod.unwrap();
    assert!(matches!(pod.spec, Spec::Fields(_)));
    let error = pod.spec().unwrap_err().to_string();
    assert!(error.contains("invalid type: integer `3`"), "{error}");
}

#[test]
fn only_a_spec_of_the_wrong_shape_is_worth_a_second_raw_read() {
    let shape = raw(r#"{"spec": {"containers": "not a list"}}"#);
    let error = read_with(&shape, ObjectSeed::reading("", SpecRead::Lean)).unwrap_err();
    assert!(worth_a_raw_read(&error), "{error}");
    assert!(read(&shape, "").is_ok(), "the raw read takes it");
    for text in [
        r#"{"spec": {"containers": [}}"#,
        r#"{"spec": {"containers": ["#,
    ] {
        let mut de = serde_json::Deserializer::from_str(text);
        let error = ObjectSeed::reading("", SpecRead::Lean)
            .deserialize(&mut de)
            .unwrap_err();
        assert!(!worth_a_raw_read(&error), "{text}: {error}");
    }
}

#[test]
fn values_kept_by_type_give_the_patch_of_the_whole_object() {
    use crate::workload::object::{remove_entry, set_entry};
    use crate::workload::{INJECTED, SIGNAL};

    let edit = |pod: &mut Value| {
        set_entry(pod, "annotations", INJECTED, "0.1.0");
        set_entry(pod, "labels", "reload-injector.io/sidecar", "true");
        remove_entry(pod, "annotations", SIGNAL);
    };
    let spec = json!({"containers": [{"name": "a"}]});
    for pod in [
        json!({"metadata": [1, [2, {"x": 3}]], "spec": spec}),
        json!({"metadata": {"annotations": [1, 2]}, "spec": spec}),
        json!({"metadata": {"labels": [{"a": 1}]}, "spec": spec}),
        json!({"metadata": {"annotations": {
            "reload-injector.io/injected": [1, 2],
            "reload-injector.io/signal": {"a": [1]},
            "reload-injector.io/watch": {"b": 2},
        }}, "spec": spec}),
    ] {
        assert_view_gives_the_whole_patch(&pod, edit);
    }
}

#[test]
fn only_an_entry_whose_last_controller_is_true_names_a_controller() {
    for (refs, controlled) in [
        (
            json!([1, [{"controller": true}], {"controller": "true"}]),
            false,
        ),
        (json!([{"a": {"controller": true}}, null]), false),
        (json!([{}, {"controller": true}]), true),
    ] {
        let pod = json!({"metadata": {"ownerReferences": refs}, "spec": {}});
        assert_eq!(
            read(&raw_of(&pod), "").unwrap().own.controlled(),
            controlled,
            "{refs}"
        );
    }
    // json! keeps one of a repeated key: the last `controller` is checked on raw text.
    for (text, controlled) in [
        (r#"[{"controller": true, "controller": false}]"#, false),
        (r#"[{"controller": false, "controller": true}]"#, true),
    ] {
        let pod = format!(r#"{{"metadata": {{"ownerReferences": {text}}}, "spec": {{}}}}"#);
        assert_eq!(
            read(&raw(&pod), "").unwrap().own.controlled(),
            controlled,
            "{text}"
        );
    }
}

#[test]
fn a_large_spec_the_lean_read_refuses_gets_the_lean_words_and_keeps_its_last_keys() {
    // Repeated keys keep their last value and place, as in a full parse.
    let spec = r#"{"volumes": 1, "containers": [], "volumes": "x", "hostPID": true}"#;
    let pod = raw(&format!(r#"{{"spec": {spec}}}"#));
    let parts = read(&pod, "").unwrap();
    let pod_parts = parts.pod.unwrap();
    let Spec::Fields(fields) = &pod_parts.spec else {
        panic!("read lean: {:?}", pod_parts.spec);
    };
    let kept: Vec<(&str, &str)> = fields.iter().map(|(k, v)| (k.as_str(), v.get())).collect();
    assert_eq!(
        kept,
        [
            ("containers", "[]"),
            ("volumes", "\"x\""),
            ("hostPID", "true")
        ]
    );
    // Up to 64 KiB the error is worded as k8s-openapi words it (it meets
    // `activeDeadlineSeconds` first, which the lean read never reads); over 64 KiB it is the
    // lean read's, worded without reading the spec as a value.
    let spec = |fill: usize| {
        let filler = format!("\"{}\"", "f".repeat(fill));
        raw(&format!(
            r#"{{"spec": {{"activeDeadlineSeconds": "bad", "volumes": "x", "nodeSelector": {{"a": {filler}}}}}}}"#
        ))
    };
    for (fill, words) in [(100, "\"bad\""), (70_000, "\"x\"")] {
        let pod = spec(fill);
        let parts = read(&pod, "").unwrap();
        let err = parts.pod.unwrap().spec().unwrap_err().to_string();
        assert!(
            err.contains(&format!("invalid type: string {words}")),
            "{fill}: {err}"
        );
    }
}

#[test]
fn a_volume_appended_to_the_view_gives_the_patch_of_the_whole_object() {
    use crate::workload::object::push_to_spec;

    let volume = json!({"name": "added", "emptyDir": {}});
    let containers = json!([{"name": "a"}]);
    for spec in [
        json!({"containers": containers}),
        json!({"containers": containers, "volumes": null}),
        json!({"containers": containers, "volumes": []}),
        json!({"containers": containers, "volumes": [{"name": "v", "configMap": {"name": "c"}}, {"name": "w", "emptyDir": {}}]}),
    ] {
        let pod = json!({"metadata": {}, "spec": spec});
        assert_view_gives_the_whole_patch(&pod, |pod| push_to_spec(pod, "volumes", volume.clone()));
    }
}
