use serde_json::json;
use serde_json::value::to_raw_value;

use crate::hash::{ConfigData, ConfigId, ConfigObject, Lookup};
use crate::workload::{
    CONFIG_HASH, MANAGED_LABEL, Object, Operation, Outcome, Request, SIDECAR_LABEL, review,
};

use super::*;
use crate::workload::test_settings::settings;

/// ConfigMap `env` with `a: 1`.
fn configs() -> ConfigData {
    let id = ConfigId::config_map("env");
    let object = ConfigObject::from_values(&id, [("a", b"1")], None).unwrap();
    ConfigData::from([(id, Lookup::Found(object))])
}

/// A Deployment whose container reads `env` through env (or nothing), with `metadata.labels`
/// set to `labels` when given.
fn deployment(labels: Option<Value>, reads_env: bool) -> Value {
    let env = json!([{"name": "A", "valueFrom": {"configMapKeyRef": {"name": "env", "key": "a"}}}]);
    let mut object = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {"template": {
            "metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "app", "image": "x"}]}
        }}
    });
    if reads_env {
        object["spec"]["template"]["spec"]["containers"][0]["env"] = env;
    }
    if let Some(labels) = labels {
        object["metadata"]["labels"] = labels;
    }
    object
}

/// The review's patch of `object` (a `kind` of `group`) and the object with it applied.
fn admitted(group: &str, kind: &str, object: &Value) -> (json_patch::Patch, Value) {
    let raw = to_raw_value(object).unwrap();
    let request = Request {
        group,
        kind,
        operation: Operation::Create,
        namespace: "shop",
        object: Object::Raw(&raw),
        old_object: None,
        namespace_labelled: true,
        dry_run: false,
    };
    let Outcome::Allowed { patch, .. } = review(&request, &settings(), &configs()).unwrap() else {
        panic!("denied: {object}");
    };
    let mut patched = object.clone();
    json_patch::patch(&mut patched, &patch).unwrap();
    (patch, patched)
}

fn admitted_deployment(object: &Value) -> (json_patch::Patch, Value) {
    admitted("apps", "Deployment", object)
}

#[test]
fn a_stamped_workload_is_labelled_and_keeps_its_own_labels() {
    let object = deployment(Some(json!({"app": "web", "team": "a"})), true);
    let (patch, patched) = admitted_deployment(&object);
    assert_eq!(
        patched["metadata"]["labels"],
        json!({"app": "web", "team": "a", MANAGED_LABEL: "true"})
    );
    assert!(
        patched["spec"]["template"]["metadata"]["annotations"][CONFIG_HASH].is_string(),
        "{patched}"
    );
    // The label is added as one entry, never by replacing the map.
    let label_ops: Vec<_> = patch
        .0
        .iter()
        .map(|op| serde_json::to_value(op).unwrap())
        .filter(|op| op["path"].as_str().unwrap().starts_with("/metadata"))
        .collect();
    assert_eq!(
        label_ops,
        [
            json!({"op": "add", "path": "/metadata/labels/reload-injector.io~1managed", "value": "true"})
        ]
    );
    // Reviewed again, it is left as it is.
    assert!(admitted_deployment(&patched).0.0.is_empty());
}

#[test]
fn a_workload_without_labels_gets_a_map_with_the_label_alone() {
    let object = deployment(None, true);
    let (_, patched) = admitted_deployment(&object);
    assert_eq!(
        patched["metadata"]["labels"],
        json!({MANAGED_LABEL: "true"})
    );
    assert_eq!(patched["metadata"]["name"], "web");
}

#[test]
fn the_label_goes_when_the_template_reads_nothing_any_more() {
    let mut object = deployment(Some(json!({"app": "web", MANAGED_LABEL: "true"})), false);
    object["spec"]["template"]["metadata"]["annotations"] = json!({CONFIG_HASH: "sha256:1"});
    let (_, patched) = admitted_deployment(&object);
    assert_eq!(patched["metadata"]["labels"], json!({"app": "web"}));
    assert_eq!(
        patched["spec"]["template"]["metadata"]["annotations"],
        json!({})
    );
    // Nothing read, nothing labelled.
    let (patch, _) = admitted_deployment(&deployment(Some(json!({"app": "web"})), false));
    assert!(patch.0.is_empty(), "{patch:?}");
}

#[test]
fn labels_that_are_not_an_object_are_never_replaced() {
    for labels in [json!(["app"]), json!("app=web"), Value::Null] {
        let object = deployment(Some(labels.clone()), true);
        let (_, patched) = admitted_deployment(&object);
        assert_eq!(patched["metadata"]["labels"], labels);
        // The template is still stamped.
        assert!(
            patched["spec"]["template"]["metadata"]["annotations"][CONFIG_HASH].is_string(),
            "{patched}"
        );
    }
    let mut object = deployment(None, true);
    object["metadata"] = json!("odd");
    let (_, patched) = admitted_deployment(&object);
    assert_eq!(patched["metadata"], "odd");
}

#[test]
fn a_template_whose_pods_hot_reload_is_labelled_without_a_hash() {
    let mut object = deployment(Some(json!({"app": "web"})), false);
    let template = &mut object["spec"]["template"];
    template["metadata"]["annotations"] = json!({"reload-injector.io/signal": "SIGHUP"});
    template["spec"]["containers"][0]["volumeMounts"] =
        json!([{"name": "conf", "mountPath": "/etc/app"}]);
    template["spec"]["volumes"] = json!([{"name": "conf", "configMap": {"name": "env"}}]);
    let (_, patched) = admitted_deployment(&object);
    assert_eq!(patched["metadata"]["labels"][MANAGED_LABEL], "true");
    assert!(
        patched["spec"]["template"]["metadata"]["annotations"][CONFIG_HASH].is_null(),
        "{patched}"
    );
}

#[test]
fn a_cronjob_is_labelled_on_itself_and_a_pod_never_is() {
    let deployment = deployment(Some(json!({"app": "web"})), true);
    let template = deployment["spec"]["template"].clone();
    let cronjob = json!({
        "apiVersion": "batch/v1", "kind": "CronJob",
        "metadata": {"name": "nightly", "labels": {"app": "web"}},
        "spec": {"schedule": "@daily", "jobTemplate": {"spec": {"template": template}}}
    });
    let (_, patched) = admitted("batch", "CronJob", &cronjob);
    assert_eq!(
        patched["metadata"]["labels"],
        json!({"app": "web", MANAGED_LABEL: "true"})
    );
    let template = &patched["spec"]["jobTemplate"]["spec"]["template"]["metadata"];
    assert_eq!(template["labels"], json!({"app": "web"}));

    let mut pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "labels": {"app": "web"}}});
    pod["spec"] = deployment["spec"]["template"]["spec"].clone();
    pod["spec"]["containers"][0]["volumeMounts"] =
        json!([{"name": "conf", "mountPath": "/etc/app"}]);
    pod["spec"]["volumes"] = json!([{"name": "conf", "configMap": {"name": "env"}}]);
    pod["metadata"]["annotations"] = json!({"reload-injector.io/signal": "SIGHUP"});
    let (_, patched) = admitted("", "Pod", &pod);
    assert_eq!(
        patched["metadata"]["labels"][SIDECAR_LABEL], "true",
        "{patched}"
    );
    assert!(patched["metadata"]["labels"].get(MANAGED_LABEL).is_none());
}
