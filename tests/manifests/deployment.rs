//! The rendered Deployment, PodDisruptionBudget, Service and RBAC of the base.

use std::path::Path;

use serde_json::Value;

use super::tools::find;
use super::{NAMESPACE, assert_mounted_from, base};

fn arg<'a>(container: &'a Value, flag: &str) -> Option<&'a str> {
    container["args"]
        .as_array()?
        .iter()
        .filter_map(Value::as_str)
        .find_map(|a| a.strip_prefix(flag)?.strip_prefix('='))
}

fn env<'a>(container: &'a Value, name: &str) -> &'a Value {
    container["env"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == name)
        .unwrap_or_else(|| panic!("no env {name}"))
}

#[test]
fn deployment_is_highly_available_and_hardened() {
    let objects = base();
    let deployment = find(&objects, "Deployment", "reload-injector");
    assert_eq!(deployment["metadata"]["namespace"], NAMESPACE);
    assert!(deployment["spec"]["replicas"].as_u64().unwrap() >= 2);
    assert_eq!(
        deployment["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"],
        0
    );
    let pod = &deployment["spec"]["template"]["spec"];
    let spread = pod["topologySpreadConstraints"].as_array().unwrap();
    assert!(
        spread
            .iter()
            .any(|c| c["topologyKey"] == "kubernetes.io/hostname"),
        "replicas are not spread across nodes"
    );
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    assert_ne!(pod["securityContext"]["runAsUser"], 0);
    assert_eq!(
        pod["securityContext"]["seccompProfile"]["type"],
        "RuntimeDefault"
    );
    assert_ne!(pod["hostNetwork"], true);
    assert_ne!(pod["hostPID"], true);

    let containers = pod["containers"].as_array().unwrap();
    assert_eq!(containers.len(), 1);
    let c = &containers[0];
    let sc = &c["securityContext"];
    assert_eq!(sc["runAsNonRoot"], true);
    assert_eq!(sc["readOnlyRootFilesystem"], true);
    assert_eq!(sc["allowPrivilegeEscalation"], false);
    assert_eq!(sc["capabilities"]["drop"], serde_json::json!(["ALL"]));
    assert!(sc["capabilities"].get("add").is_none());
    assert_ne!(sc["privileged"], true);

    for probe in ["readinessProbe", "livenessProbe"] {
        let http = &c[probe]["httpGet"];
        let path = if probe == "readinessProbe" {
            "/readyz"
        } else {
            "/healthz"
        };
        assert_eq!(http["path"], path, "{probe}");
        assert_eq!(http["port"], "metrics", "{probe} not on the plain port");
    }
    let ports = c["ports"].as_array().unwrap();
    let port =
        |name: &str| ports.iter().find(|p| p["name"] == name).unwrap()["containerPort"].clone();
    assert_eq!(port("metrics"), 9090);
    assert_eq!(port("https"), 8443);

    for kind in ["requests", "limits"] {
        for resource in ["cpu", "memory"] {
            assert!(
                c["resources"][kind][resource].is_string(),
                "no {kind}.{resource}"
            );
        }
    }

    let pdb = find(&objects, "PodDisruptionBudget", "reload-injector");
    assert_eq!(pdb["spec"]["minAvailable"], 1);
    assert_eq!(
        pdb["spec"]["selector"]["matchLabels"],
        deployment["spec"]["selector"]["matchLabels"]
    );
}

#[test]
fn deployment_wires_the_serve_flags() {
    let objects = base();
    let deployment = find(&objects, "Deployment", "reload-injector");
    let pod = &deployment["spec"]["template"]["spec"];
    let c = &pod["containers"][0];
    assert_eq!(c["args"][0], "serve");
    assert_eq!(arg(c, "--listen"), Some("0.0.0.0:8443"));
    assert_eq!(arg(c, "--metrics-listen"), Some("0.0.0.0:9090"));
    for (flag, secret) in [
        ("--tls-cert", "reload-injector-tls"),
        ("--tls-key", "reload-injector-tls"),
        ("--secret-hash-key-file", "reload-injector-hash-key"),
    ] {
        let file = arg(c, flag).unwrap_or_else(|| panic!("no {flag}"));
        assert_mounted_from(pod, Path::new(file), secret);
    }
    let namespace = &env(c, "RELOAD_INJECTOR_NAMESPACE")["valueFrom"]["fieldRef"];
    assert_eq!(namespace["fieldPath"], "metadata.namespace");

    // One image for the webhook and the sidecar, the one this crate version expects.
    let image = c["image"].as_str().unwrap();
    assert_eq!(env(c, "RELOAD_INJECTOR_SIDECAR_IMAGE")["value"], image);
    assert_eq!(image, reload_injector::DEFAULT_SIDECAR_IMAGE);

    // The Service routes 443 to the HTTPS port and selects these pods.
    let service = find(&objects, "Service", "reload-injector");
    let https = &service["spec"]["ports"][0];
    assert_eq!(
        (https["port"].as_u64(), https["targetPort"].as_str()),
        (Some(443), Some("https"))
    );
    let labels = &deployment["spec"]["template"]["metadata"]["labels"];
    for (key, value) in service["spec"]["selector"].as_object().unwrap() {
        assert_eq!(&labels[key], value, "Service selector {key}");
    }
}

#[test]
fn rbac_writes_only_what_the_controller_patches_and_never_reads_data_it_does_not_hash() {
    let objects = base();
    let role = find(&objects, "ClusterRole", "reload-injector");
    for rule in role["rules"].as_array().unwrap() {
        let verbs: Vec<&str> = rule["verbs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        for resource in rule["resources"].as_array().unwrap() {
            let allowed: &[&str] = match resource.as_str().unwrap() {
                "configmaps" | "secrets" => &["get", "list", "watch"],
                "namespaces" => &["list", "watch"],
                "deployments" | "statefulsets" | "daemonsets" | "cronjobs" | "rollouts"
                | "pods" => &["list", "watch", "patch"],
                "events" => &["create"],
                other => panic!("unexpected resource {other} in the ClusterRole"),
            };
            assert!(
                verbs.iter().all(|v| allowed.contains(v)),
                "{resource}: {verbs:?} exceeds {allowed:?}"
            );
        }
    }
    let lease_role = find(&objects, "Role", "reload-injector-lease");
    assert_eq!(lease_role["metadata"]["namespace"], NAMESPACE);
    assert_eq!(
        lease_role["rules"],
        serde_json::json!([{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "create", "update"]}])
    );
    let binding = find(&objects, "ClusterRoleBinding", "reload-injector");
    assert_eq!(binding["roleRef"]["name"], "reload-injector");
    let subject = &binding["subjects"][0];
    assert_eq!(subject["kind"], "ServiceAccount");
    let deployment = find(&objects, "Deployment", "reload-injector");
    assert_eq!(
        subject["name"],
        deployment["spec"]["template"]["spec"]["serviceAccountName"]
    );
    assert_eq!(subject["namespace"], NAMESPACE);
    // Every namespaced object lives in the webhook's namespace, which the base creates.
    find(&objects, "Namespace", NAMESPACE);
    for obj in &objects {
        if let Some(ns) = obj["metadata"]["namespace"].as_str() {
            assert_eq!(ns, NAMESPACE, "{}", obj["metadata"]["name"]);
        }
    }
}

#[test]
fn deployment_args_and_env_are_flags_serve_knows() {
    use clap::{CommandFactory, Parser};
    use reload_injector::cli::{Cli, Command};

    let objects = base();
    let deployment = find(&objects, "Deployment", "reload-injector");
    let c = &deployment["spec"]["template"]["spec"]["containers"][0];
    let args: Vec<&str> = c["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    let cli = Cli::try_parse_from(std::iter::once("reload-injector").chain(args.iter().copied()))
        .unwrap_or_else(|e| panic!("the Deployment's args do not parse: {e}"));
    let Command::Serve(serve) = cli.command else {
        panic!("not serve")
    };
    assert_eq!(
        serve.injection.secret_hash_key_file.as_deref(),
        Some(Path::new("/etc/reload-injector/hash-key/secret-hash.key"))
    );

    let command = Cli::command();
    let serve_cmd = command.find_subcommand("serve").unwrap();
    let known: Vec<String> = serve_cmd
        .get_arguments()
        .chain(command.get_arguments())
        .filter_map(|a| a.get_env())
        .map(|e| e.to_string_lossy().into_owned())
        .collect();
    // Besides the flags' variables, serve reads POD_NAME (the downward API) for the identity of
    // the rollout controller's Lease.
    let known: Vec<String> = known.into_iter().chain(["POD_NAME".to_owned()]).collect();
    for var in c["env"].as_array().unwrap() {
        let name = var["name"].as_str().unwrap();
        assert!(known.iter().any(|k| k == name), "serve reads no {name}");
    }
    assert_eq!(
        c["env"][0],
        serde_json::json!({"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}})
    );
}
