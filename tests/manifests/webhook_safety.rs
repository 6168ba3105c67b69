//! The safety properties of the MutatingWebhookConfiguration (DESIGN.md, "Deploying"), checked
//! on the kustomize build (`tests/packaging/offline/manifests.rs`) and on every render of the Helm chart
//! (`tests/packaging/offline/helm_chart.rs`).

use serde_json::{Value, json};

/// The webhooks of the one MutatingWebhookConfiguration among `objects`.
pub fn webhooks(objects: &[Value]) -> Vec<Value> {
    let found: Vec<&Value> = objects
        .iter()
        .filter(|o| o["kind"] == "MutatingWebhookConfiguration")
        .collect();
    assert_eq!(found.len(), 1, "expected one MutatingWebhookConfiguration");
    assert_eq!(found[0]["metadata"]["name"], "reload-injector");
    found[0]["webhooks"].as_array().unwrap().clone()
}

/// A JSON array of strings, as `&str`s.
pub fn strings(value: &Value) -> Vec<&str> {
    value
        .as_array()
        .unwrap_or_else(|| panic!("not an array: {value}"))
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect()
}

/// Asserts the safety properties DESIGN.md promises of the MutatingWebhookConfiguration among
/// `objects`, served from `namespace`; `extra_excluded` are namespaces excluded beyond the
/// system ones and the webhook's own. The Pod and workload webhooks of labelled namespaces come
/// first; the same pair for single opted-in objects of the other namespaces may follow.
pub fn assert_safe(objects: &[Value], namespace: &str, extra_excluded: &[&str]) {
    let hooks = webhooks(objects);
    assert!(
        hooks.len() == 2 || hooks.len() == 4,
        "{} webhooks",
        hooks.len()
    );
    for (i, hook) in hooks.iter().enumerate() {
        let labelled = i < 2;
        let name = hook["name"].as_str().unwrap();
        assert_eq!(strings(&hook["admissionReviewVersions"]), ["v1"], "{name}");
        assert_eq!(hook["sideEffects"], "None", "{name}");
        assert_eq!(hook["reinvocationPolicy"], "IfNeeded", "{name}");
        assert_eq!(hook["matchPolicy"], "Equivalent", "{name}");
        let timeout = hook["timeoutSeconds"].as_u64().expect("explicit timeout");
        assert!((1..=10).contains(&timeout), "{name}: timeout {timeout}");

        let service = &hook["clientConfig"]["service"];
        assert_eq!(service["name"], "reload-injector", "{name}");
        assert_eq!(service["namespace"], namespace, "{name}");
        let path = if labelled {
            "/mutate"
        } else {
            "/mutate/opted-in"
        };
        assert_eq!(service["path"], path, "{name}");
        assert!(hook["clientConfig"].get("url").is_none(), "{name}");

        let expressions = hook["namespaceSelector"]["matchExpressions"]
            .as_array()
            .unwrap();
        assert!(hook["namespaceSelector"].get("matchLabels").is_none());
        let operator = if labelled { "In" } else { "NotIn" };
        let opt_in = json!({"key": "reload-injector.io/inject", "operator": operator, "values": ["enabled"]});
        assert!(expressions.contains(&opt_in), "{name}: no opt-in selector");
        let excluded = expressions
            .iter()
            .find(|e| e["key"] == "kubernetes.io/metadata.name")
            .expect("namespace exclusion by name");
        assert_eq!(excluded["operator"], "NotIn");
        let mut names = strings(&excluded["values"]);
        names.sort();
        let mut want = vec!["kube-node-lease", "kube-public", "kube-system", namespace];
        want.extend(extra_excluded);
        want.sort();
        assert_eq!(names, want, "{name}");
        let opt_out = json!({"matchExpressions": [
            {"key": "reload-injector.io/inject", "operator": "NotIn", "values": ["false"]}
        ]});
        assert_eq!(hook["objectSelector"], opt_out, "{name}");
    }

    for pair in hooks.chunks(2) {
        assert_pair(&pair[0], &pair[1]);
    }
    if let [pods, workloads, opted_in_pods, opted_in_workloads] = hooks.as_slice() {
        assert_opted_in_only(pods, opted_in_pods, "opted-in");
        assert_opted_in_only(workloads, opted_in_workloads, "opted-in-or-managed");
    }
}

/// The Pod webhook (Ignore, CREATE) and the workload webhook (Fail, the workload kinds, never
/// what a controller creates) of one kind of namespace.
fn assert_pair(pods: &Value, workloads: &Value) {
    assert_eq!(pods["failurePolicy"], "Ignore");
    let rules = pods["rules"].as_array().unwrap();
    assert_eq!(rules.len(), 1);
    assert_eq!(strings(&rules[0]["operations"]), ["CREATE"]);
    assert_eq!(strings(&rules[0]["apiGroups"]), [""]);
    assert_eq!(strings(&rules[0]["resources"]), ["pods"]);

    assert_eq!(workloads["failurePolicy"], "Fail");
    let mut covered = Vec::new();
    for rule in workloads["rules"].as_array().unwrap() {
        assert_eq!(strings(&rule["operations"]), ["CREATE", "UPDATE"]);
        for group in strings(&rule["apiGroups"]) {
            for resource in strings(&rule["resources"]) {
                assert!(!resource.contains('/'), "subresource {resource} matched");
                covered.push(format!("{group}/{resource}"));
            }
        }
    }
    covered.sort();
    assert_eq!(
        covered,
        [
            "apps/daemonsets",
            "apps/deployments",
            "apps/replicasets",
            "apps/statefulsets",
            "argoproj.io/rollouts",
            "batch/cronjobs",
            "batch/jobs"
        ]
    );
    let argo = workloads["rules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|rule| strings(&rule["apiGroups"]) == ["argoproj.io"])
        .expect("a rule for Argo Rollouts");
    assert_eq!(strings(&argo["apiVersions"]), ["v1alpha1"]);
    assert_controllers_skip(workloads);
}

/// A webhook of single opted-in objects keeps every condition of its labelled-namespace twin,
/// in order, and adds one (`extra`) that sends only opted-in objects. Each optional field it
/// reads is checked with has() first: a failing expression would fall back to Fail.
fn assert_opted_in_only(twin: &Value, hook: &Value, extra: &str) {
    let name = hook["name"].as_str().unwrap();
    let conditions = hook["matchConditions"].as_array().expect("matchConditions");
    let twins = twin["matchConditions"].as_array().expect("matchConditions");
    assert_eq!(conditions.len(), twins.len() + 1, "{name}");
    assert_eq!(conditions[..twins.len()], twins[..], "{name}");
    let last = &conditions[twins.len()];
    assert_eq!(last["name"], extra, "{name}");
    let cel = last["expression"].as_str().unwrap();
    for key in ["reload-injector.io/inject", "reloader.stakater.com/auto"] {
        assert!(cel.contains(key), "{name}: {key} not in {cel}");
    }
    for read in ["metadata.labels", "metadata.annotations"] {
        assert!(
            cel.contains(&format!("has(object.{read})")),
            "{name}: {read}"
        );
    }
}

/// The workload webhook (Fail by default) never gates what a controller creates or scales: its
/// matchCondition skips ReplicaSets and Jobs that have a controller ownerReference.
fn assert_controllers_skip(workloads: &Value) {
    let cel = controller_condition(workloads);
    // Negated: the webhook is called unless the object is a controller's ReplicaSet or Job.
    assert!(cel.starts_with("!("), "{cel}");
    for part in [
        "request.resource.group in ['apps', 'batch']",
        "request.resource.resource in ['replicasets', 'jobs']",
        // `object` is null on DELETE; reading a field of null would be an evaluation
        // error, which falls back to failurePolicy Fail.
        "object != null",
        "has(object.metadata.ownerReferences)",
        "object.metadata.ownerReferences.exists(r, has(r.controller) && r.controller)",
    ] {
        assert!(cel.contains(part), "{part} not in {cel}");
    }
    let null_check = cel.find("object != null").unwrap();
    let first_read = cel.find("object.metadata").unwrap();
    assert!(
        null_check < first_read,
        "null checked before it is read: {cel}"
    );
    // The kinds a person applies are still matched, still under Fail.
    for resource in ["deployments", "statefulsets", "daemonsets", "cronjobs"] {
        assert!(!cel.contains(resource), "{resource} skipped: {cel}");
    }
}

/// The CEL expression of the workload webhook's one matchCondition, squeezed of whitespace.
fn controller_condition(hook: &Value) -> String {
    let conditions = hook["matchConditions"]
        .as_array()
        .expect("the Fail webhook has matchConditions");
    assert_eq!(conditions[0]["name"], "not-created-by-a-controller");
    conditions[0]["expression"]
        .as_str()
        .unwrap()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}
