//! The objects the end-to-end tests apply, as a user would write them.

use base64::Engine;
use serde_json::{Value, json};

/// A ConfigMap with `data`.
pub fn config_map(name: &str, data: &[(&str, &str)]) -> Value {
    let data: serde_json::Map<String, Value> = data
        .iter()
        .map(|(k, v)| ((*k).to_owned(), json!(v)))
        .collect();
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data})
}

/// A Secret with `data` (base64, as the API stores it).
pub fn secret(name: &str, data: &[(&str, &str)]) -> Value {
    let data: serde_json::Map<String, Value> = data
        .iter()
        .map(|(k, v)| ((*k).to_owned(), json!(b64(v))))
        .collect();
    json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, "type": "Opaque", "data": data})
}

/// Standard base64.
pub fn b64(text: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(text)
}

/// An nginx-like container; `env` and `mounts` as in a pod spec.
pub fn container(env: Value, mounts: Value) -> Value {
    json!({
        "name": "app", "image": "nginx:1.27", "command": ["nginx", "-g", "daemon off;"],
        "securityContext": {"runAsUser": 101}, "env": env, "volumeMounts": mounts,
    })
}

/// `env[]` entry reading one ConfigMap key.
pub fn env_from_config_map(var: &str, config_map: &str, key: &str) -> Value {
    json!({"name": var, "valueFrom": {"configMapKeyRef": {"name": config_map, "key": key}}})
}

/// `env[]` entry reading one Secret key.
pub fn env_from_secret(var: &str, secret: &str, key: &str) -> Value {
    json!({"name": var, "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}})
}

/// A Deployment of `replicas` Pods labelled `app: NAME` running `container` with `volumes`.
pub fn deployment(name: &str, replicas: u32, container: Value, volumes: Value) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [container], "volumes": volumes},
            },
        },
    })
}

/// The pod template's annotations of a workload.
pub fn template_annotations(workload: &Value) -> &Value {
    &workload["spec"]["template"]["metadata"]["annotations"]
}
