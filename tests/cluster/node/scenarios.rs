//! The product's promises, each on the real node (`cluster_support::node`) with the product
//! installed as users install it: a Job completes with the native sidecar, the sidecar holds no
//! token, an env edit really rolls out, a mounted Secret edit reloads the app and leaks no
//! value, a non-root app is reloaded by a sidecar of its own UID, and `status` shows the
//! sidecar's real reload lines.

use crate::cluster_support;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use cluster_support::install::OWN;
use cluster_support::node::Node;
use cluster_support::node::install::NodeInstall;
use cluster_support::node::pods::{Writer, merge, nginx_deployment, site};
use cluster_support::objects::{config_map, secret};
use serde_json::json;

const TOKEN_DIR: &str = "var/run/secrets/kubernetes.io/serviceaccount";

#[test]
fn a_job_with_a_mounted_config_gets_the_native_sidecar_and_completes() {
    let _turn = Node::beside_others();
    let install = NodeInstall::shared();
    let node = install.node;
    let cluster = node.cluster;
    let ns = cluster.namespace("job", true);
    assert!(
        cluster
            .apply(&ns, &config_map("site", &[("default.conf", &site("job"))]))
            .ok
    );
    let job = json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "once"},
        "spec": {
            "backoffLimit": 0,
            "template": {
                "metadata": {"labels": {"app": "once"}, "annotations": {"reload-injector.io/signal": "SIGHUP"}},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{
                        "name": "app", "image": node.images.nginx, "imagePullPolicy": "Never",
                        "command": ["sh", "-c", "cat /etc/nginx/conf.d/default.conf && sleep 2"],
                        "volumeMounts": [{"name": "site", "mountPath": "/etc/nginx/conf.d"}],
                    }],
                    "volumes": [{"name": "site", "configMap": {"name": "site"}}],
                },
            },
        },
    });
    let out = cluster.apply(&ns, &job);
    assert!(out.ok, "{}", out.stderr);
    let done = cluster.wait_for("the Job to complete", Duration::from_secs(180), || {
        let job = cluster.get(&ns, "job", "once");
        let failed = job["status"]["failed"].as_i64().unwrap_or(0);
        assert_eq!(failed, 0, "the Job failed: {job}");
        (job["status"]["succeeded"] == 1).then_some(job)
    });
    assert!(
        done["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["type"] == "Complete")
    );
    let pods = cluster.list(&ns, "pods");
    let pod = &pods[0];
    let sidecar = pod["spec"]["initContainers"]
        .as_array()
        .and_then(|l| l.iter().find(|c| c["name"] == "config-reloader"))
        .unwrap_or_else(|| panic!("no native sidecar: {pod}"));
    assert_eq!(sidecar["restartPolicy"], "Always");
    assert_eq!(pod["status"]["phase"], "Succeeded");
}

#[test]
fn the_sidecar_holds_no_token_and_the_app_keeps_its_own() {
    let _turn = Node::beside_others();
    let install = NodeInstall::shared();
    let node = install.node;
    let (_, pod) = node.deploy_site("token");
    // Each container's own view of its files, from the host: the product's image has no shell.
    let inside = |container: &str| {
        Path::new("/proc")
            .join(node.container_pid(&pod, container).to_string())
            .join("root")
            .join(TOKEN_DIR)
    };
    let sidecar = inside("config-reloader");
    let entries: Vec<_> = std::fs::read_dir(&sidecar)
        .map(|d| d.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(
        entries.is_empty(),
        "config-reloader sees {entries:?} in /{TOKEN_DIR}"
    );
    let app = inside("app");
    let token = std::fs::read_to_string(app.join("token")).unwrap_or_default();
    assert_eq!(
        token.split('.').count(),
        3,
        "the app has no token in /{TOKEN_DIR}"
    );
}

#[test]
fn an_env_edit_rolls_out_and_the_new_pods_see_the_new_value() {
    let _turn = Node::beside_others();
    let install = NodeInstall::shared();
    let node = install.node;
    let cluster = node.cluster;
    let ns = cluster.namespace("env", true);
    assert!(
        cluster
            .apply(&ns, &config_map("site", &[("default.conf", &site("v0"))]))
            .ok
    );
    assert!(
        cluster
            .apply(&ns, &config_map("env", &[("GREETING", "hello")]))
            .ok
    );
    let env = json!({"env": [{"name": "GREETING", "valueFrom": {"configMapKeyRef": {"name": "env", "key": "GREETING"}}}]});
    assert!(
        cluster
            .apply(&ns, &nginx_deployment(node, "web", "site", json!({}), env))
            .ok
    );
    let before = node.running_pods(&ns, "web", 1).remove(0);
    let old = before["metadata"]["name"].as_str().unwrap().to_owned();
    assert_eq!(
        node.exec(&ns, &old, "app", &["sh", "-c", "echo $GREETING"])
            .trim(),
        "hello"
    );

    Writer::new(node).set("configmap", &ns, "env", "GREETING", "bonjour");
    let after = cluster.wait_for(
        "a new Pod to replace the old one",
        Duration::from_secs(180),
        || {
            let pods = node.running_pods(&ns, "web", 1);
            (pods[0]["metadata"]["name"] != old.as_str()).then(|| pods[0].clone())
        },
    );
    let new = after["metadata"]["name"].as_str().unwrap();
    assert_eq!(
        node.exec(&ns, new, "app", &["sh", "-c", "echo $GREETING"])
            .trim(),
        "bonjour"
    );
    assert_eq!(cluster.list(&ns, "replicasets").len(), 2, "one rollout");
    let events = cluster.config_changed_events(&ns);
    assert_eq!(events.len(), 1, "{events:?}");
}

#[test]
fn a_mounted_secret_edit_reloads_the_app_and_no_value_leaks() {
    let _turn = Node::beside_others();
    let install = NodeInstall::shared();
    let node = install.node;
    let cluster = node.cluster;
    let ns = cluster.namespace("secret", true);
    let marker = format!("s3cr3t-{}", std::process::id());
    let first = format!("{marker}-one");
    let second = format!("{marker}-two");
    assert!(
        cluster
            .apply(&ns, &secret("site", &[("default.conf", &site(&first))]))
            .ok
    );
    let mut deployment = nginx_deployment(node, "web", "site", json!({}), json!({}));
    merge(
        &mut deployment["spec"]["template"]["spec"],
        json!({"volumes": [{"name": "site", "secret": {"secretName": "site"}}]}),
    );
    let out = cluster.apply(&ns, &deployment);
    assert!(out.ok, "{}", out.stderr);
    let pod = node.running_pods(&ns, "web", 1).remove(0);
    let name = pod["metadata"]["name"].as_str().unwrap().to_owned();
    let ip = pod["status"]["podIP"].as_str().unwrap().to_owned();
    assert!(
        Node::await_body(
            &ip,
            &format!("{first}\n"),
            Instant::now(),
            Duration::from_secs(30)
        )
        .is_some()
    );

    let since = Writer::new(node).set("secret", &ns, "site", "default.conf", &site(&second));
    let took = Node::await_body(&ip, &format!("{second}\n"), since, Duration::from_secs(120));
    let took = took.expect("the Secret edit did not reach nginx within 120 s");
    eprintln!("a mounted Secret edit reached nginx in {took:.2?}");

    // No value, raw or base64, anywhere a user or an operator can read.
    let mut texts = vec![
        node.logs(&ns, &name, "config-reloader"),
        cluster
            .kubectl(&["get", "events", "-A", "-o", "json"])
            .run()
            .stdout,
        cluster
            .kubectl(&[
                "get",
                "pods,deployments,replicasets",
                "-n",
                &ns,
                "-o",
                "json",
            ])
            .run()
            .stdout,
    ];
    for serve in install.serve_pods() {
        texts.push(node.logs(OWN, serve["metadata"]["name"].as_str().unwrap(), "webhook"));
    }
    let b64 = cluster_support::objects::b64(&marker);
    for text in &texts {
        assert!(!text.contains(&marker), "a Secret value leaked:\n{text}");
        assert!(
            !text.contains(&b64[..b64.len() - 4]),
            "a Secret value leaked in base64:\n{text}"
        );
    }
}

#[test]
fn a_non_root_app_is_reloaded_by_a_sidecar_of_its_own_uid() {
    let _turn = Node::beside_others();
    let install = NodeInstall::shared();
    let node = install.node;
    let cluster = node.cluster;
    let ns = cluster.namespace("uid", true);
    assert!(
        cluster
            .apply(&ns, &config_map("site", &[("default.conf", &site("v0"))]))
            .ok
    );
    let pod_spec = json!({"securityContext": {"runAsUser": 1000, "runAsGroup": 1000}});
    assert!(
        cluster
            .apply(
                &ns,
                &nginx_deployment(node, "web", "site", pod_spec, json!({}))
            )
            .ok
    );
    let pod = node.running_pods(&ns, "web", 1).remove(0);
    let sidecar = pod["spec"]["initContainers"]
        .as_array()
        .into_iter()
        .chain(pod["spec"]["containers"].as_array())
        .flatten()
        .find(|c| c["name"] == "config-reloader")
        .cloned()
        .expect("no sidecar");
    let uid = |name: &str| {
        let status =
            std::fs::read_to_string(format!("/proc/{}/status", node.container_pid(&pod, name)))
                .unwrap();
        status
            .lines()
            .find(|l| l.starts_with("Uid:"))
            .unwrap()
            .split_whitespace()
            .nth(1)
            .unwrap()
            .to_owned()
    };
    assert_eq!(uid("app"), "1000");
    assert_eq!(uid("config-reloader"), "1000", "{sidecar}");
    let ip = pod["status"]["podIP"].as_str().unwrap().to_owned();
    let since = Writer::new(node).set("configmap", &ns, "site", "default.conf", &site("v1"));
    let took = Node::await_body(&ip, "v1\n", since, Duration::from_secs(120));
    assert!(
        took.is_some(),
        "the edit did not reach nginx running as UID 1000"
    );
}

#[test]
fn status_shows_the_sidecars_real_reload_lines() {
    let _turn = Node::beside_others();
    let install = NodeInstall::shared();
    let node = install.node;
    let cluster = node.cluster;
    let (ns, pod) = node.deploy_site("status");
    let ip = pod["status"]["podIP"].as_str().unwrap().to_owned();
    let since = Writer::new(node).set("configmap", &ns, "site", "default.conf", &site("v1"));
    assert!(Node::await_body(&ip, "v1\n", since, Duration::from_secs(120)).is_some());
    let start = Instant::now();
    let (out, code) = loop {
        let out = Command::new(env!("CARGO_BIN_EXE_reload-injector"))
            .args(["status", "deploy/web", "-n", &ns])
            .arg(format!("--kubeconfig={}", cluster.kubeconfig.display()))
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        if text.contains("reloaded") || start.elapsed() > Duration::from_secs(30) {
            break (text, out.status.code());
        }
        std::thread::sleep(Duration::from_secs(1));
    };
    assert!(
        out.contains("reloaded"),
        "status shows no reload line:\n{out}"
    );
    // A successful reload, as the real sidecar logs it, is no finding.
    assert!(
        !out.contains("[reload-failed]"),
        "a successful reload read as failed:\n{out}"
    );
    assert_eq!(code, Some(0), "status found something:\n{out}");
}

#[test]
fn an_app_whose_image_user_the_pod_does_not_state_ends_in_eperm_with_the_readmes_words() {
    let _turn = Node::beside_others();
    let install = NodeInstall::shared();
    let node = install.node;
    let cluster = node.cluster;
    let ns = cluster.namespace("eperm", true);
    assert!(
        cluster
            .apply(&ns, &config_map("site", &[("default.conf", &site("v0"))]))
            .ok
    );
    let pod_spec = json!({"securityContext": {"runAsNonRoot": true}});
    let container = json!({"image": node.images.nginx_nonroot});
    let out = cluster.apply(
        &ns,
        &nginx_deployment(node, "web", "site", pod_spec, container),
    );
    assert!(out.ok, "{}", out.stderr);
    assert!(
        out.stderr.contains("reloads may fail with EPERM"),
        "no README warning at admission: {}",
        out.stderr
    );
    let pod = node.running_pods(&ns, "web", 1).remove(0);
    let name = pod["metadata"]["name"].as_str().unwrap().to_owned();
    Writer::new(node).set("configmap", &ns, "site", "default.conf", &site("v1"));
    let log = cluster.wait_for("the sidecar to log EPERM", Duration::from_secs(120), || {
        let log = node.logs(&ns, &name, "config-reloader");
        log.contains("permission denied").then_some(log)
    });
    // The README's fix, in the sidecar's words.
    assert!(log.contains("runAsUser"), "{log}");
    let status = Command::new(env!("CARGO_BIN_EXE_reload-injector"))
        .args(["status", "deploy/web", "-n", &ns])
        .arg(format!("--kubeconfig={}", cluster.kubeconfig.display()))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(
        text.contains("set `runAsUser`"),
        "status does not give the README's fix:\n{text}"
    );
    assert_eq!(status.status.code(), Some(1), "a finding: {text}");
}
