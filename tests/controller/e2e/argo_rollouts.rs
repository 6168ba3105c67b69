//! End to end through a real kube-apiserver: Argo Rollouts, from a cluster without the CRD to
//! one where it is installed while `serve` runs. Its own cluster, because the CRD changes what
//! the API server serves for every test. One test, in order: the order is the point.

use crate::cluster_support;

use std::time::Duration;

use cluster_support::install::Install;
use cluster_support::objects::{config_map, container, env_from_config_map};
use cluster_support::{Cluster, PATIENCE};
use serde_json::{Value, json};

const CONFIG_HASH: &str = "reload-injector.io/config-hash";
/// Discovery is asked again every 15 s; the CRD must be picked up within that and a little.
const PICKUP: Duration = Duration::from_secs(40);

fn rollout(name: &str, strategy: Value) -> Value {
    json!({
        "apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout",
        "metadata": {"name": name},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "strategy": strategy,
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "containers": [container(
                        json!([env_from_config_map("UPSTREAM", "web-env", "UPSTREAM")]),
                        json!([{"name": "site", "mountPath": "/etc/nginx/conf.d"}]),
                    )],
                    "volumes": [{"name": "site", "configMap": {"name": "site"}}],
                },
            },
        },
    })
}

fn canary() -> Value {
    json!({"canary": {"steps": [{"setWeight": 20}, {"pause": {}}]}})
}

fn hash_of(cluster: &Cluster, ns: &str, name: &str) -> Option<String> {
    cluster.get(ns, "rollout", name)["spec"]["template"]["metadata"]["annotations"][CONFIG_HASH]
        .as_str()
        .map(str::to_owned)
}

fn messages(install: &Install, needle: &str) -> Vec<String> {
    install
        .serve
        .log_lines()
        .iter()
        .filter_map(|l| l["message"].as_str().map(str::to_owned))
        .filter(|m| m.contains(needle))
        .collect()
}

#[test]
fn rollouts_are_picked_up_when_the_crd_appears_and_roll_through_their_own_strategy() {
    let install = Install::shared();
    let cluster = install.cluster;

    // Without the CRD: ready, the webhook's rule for rollouts accepted, one line names the kind.
    assert_eq!(install.serve.get("/readyz").0, 200);
    let stored = cluster
        .kubectl(&[
            "get",
            "mutatingwebhookconfiguration",
            "reload-injector",
            "-o",
            "json",
        ])
        .run()
        .json();
    assert!(
        stored.to_string().contains("\"rollouts\""),
        "the shipped rules name rollouts, and the API server took them without the CRD"
    );
    assert_eq!(
        messages(install, "Rollout"),
        vec![
            "Rollout is not served by this API server (it needs argoproj.io/v1alpha1 rollouts); \
             not watched until it is"
        ]
    );
    let ns = cluster.namespace("argo", true);
    cluster.apply(&ns, &config_map("web-env", &[("UPSTREAM", "a:80")]));
    cluster.apply(&ns, &config_map("site", &[("site.conf", "server {}")]));

    // The CRD, installed while serve runs.
    let crd = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/e2e/rollout-crd.yaml"
    );
    cluster.kubectl(&["apply", "-f", crd]).run();
    cluster.wait_for("the Rollout CRD to be established", PATIENCE, || {
        cluster
            .kubectl(&["get", "rollouts", "-n", &ns])
            .try_run()
            .ok
            .then_some(())
    });
    cluster.wait_for("serve to watch Rollouts, without a restart", PICKUP, || {
        (!messages(install, "Rollout is now served").is_empty()).then_some(())
    });

    // Admission: a canary Rollout is stamped and warned about; a subPath mount is denied.
    let applied = cluster.apply(&ns, &rollout("web", canary()));
    assert!(applied.ok, "{}", applied.stderr);
    assert!(
        applied
            .stderr
            .contains("reload-injector: container \"app\" reads ConfigMap \"web-env\" via env"),
        "kubectl's stderr: {}",
        applied.stderr
    );
    let first = hash_of(cluster, &ns, "web").expect("the Rollout's template is stamped");
    let mut subpath = rollout("sub", canary());
    subpath["spec"]["template"]["spec"]["containers"][0]["volumeMounts"][0]["subPath"] =
        json!("site.conf");
    let denied = cluster.apply(&ns, &subpath);
    assert!(
        !denied.ok && denied.stderr.contains("subPath"),
        "{}",
        denied.stderr
    );

    // A namespace that did not opt in: its Rollout is never touched.
    let plain = cluster.namespace("argo-plain", false);
    cluster.apply(&plain, &config_map("web-env", &[("UPSTREAM", "a:80")]));
    cluster.apply(&plain, &config_map("site", &[("site.conf", "server {}")]));
    assert!(cluster.apply(&plain, &rollout("web", canary())).ok);
    assert_eq!(hash_of(cluster, &plain, "web"), None);

    // A config change re-stamps the Rollout (a new revision through its canary steps), with
    // its Event; the one in the other namespace stays as it was.
    cluster.apply(&ns, &config_map("web-env", &[("UPSTREAM", "b:80")]));
    cluster.apply(&plain, &config_map("web-env", &[("UPSTREAM", "b:80")]));
    cluster.wait_for("the controller to re-stamp the Rollout", PATIENCE, || {
        hash_of(cluster, &ns, "web").filter(|h| *h != first)
    });
    let events = cluster.wait_for("the Rollout's ConfigChanged Event", PATIENCE, || {
        let items = cluster.config_changed_events(&ns);
        (!items.is_empty()).then_some(items)
    });
    assert_eq!(events[0]["involvedObject"]["kind"], "Rollout");
    assert_eq!(events[0]["involvedObject"]["name"], "web");
    let listed = cluster.kubectl(&["get", "events", "-n", &ns]).run().stdout;
    eprintln!("kubectl get events -n {ns}:\n{listed}");
    assert!(
        listed
            .lines()
            .any(|l| l.contains("ConfigChanged") && l.contains("rollout/web")),
        "{listed}"
    );
    // The namespace that did not opt in has its config edited too, but is not watched: once
    // serve has nothing pending, it wrote all it was going to.
    install.serve.wait_caught_up(cluster);
    assert_eq!(hash_of(cluster, &plain, "web"), None);
}
