//! End to end through a real kube-apiserver and kube-controller-manager: with `serve` stopped,
//! nothing a controller creates or scales waits on the `failurePolicy: Fail` workload webhook.
//! The Deployment controller scales a Deployment by updating its ReplicaSet and starts a rollout
//! by creating one; the CronJob controller creates Jobs. Those objects carry a controller
//! ownerReference, which the shipped webhook's matchCondition keeps away from the webhook.
//!
//! Its own test binary (so its own cluster and `serve`): the test stops `serve` for good.

use crate::cluster_support;

use std::time::Duration;

use cluster_support::install::Install;
use cluster_support::objects::{config_map, container, deployment, env_from_config_map};
use cluster_support::{Cluster, PATIENCE};
use serde_json::{Value, json};

/// A CronJob fires on the minute; the controller may need most of one to see it due.
const A_MINUTE_AND_MORE: Duration = Duration::from_secs(150);

/// `web`, labelled `reload-injector.io/inject=false` on the Deployment object itself: the
/// webhook's objectSelector then skips the Deployment (so the test, standing in for a person,
/// can scale it and start a rollout while `serve` is down), but not its ReplicaSets, whose
/// labels come from the pod template.
fn web() -> Value {
    let mut web = deployment(
        "web",
        1,
        container(
            json!([env_from_config_map("UPSTREAM", "web-env", "UPSTREAM")]),
            json!([]),
        ),
        json!([]),
    );
    web["metadata"]["labels"] = json!({"reload-injector.io/inject": "false"});
    web
}

fn cronjob() -> Value {
    json!({
        "apiVersion": "batch/v1", "kind": "CronJob",
        "metadata": {"name": "tick"},
        "spec": {
            "schedule": "* * * * *",
            "jobTemplate": {"spec": {"template": {"spec": {
                "restartPolicy": "Never",
                "containers": [container(
                    json!([env_from_config_map("UPSTREAM", "web-env", "UPSTREAM")]),
                    json!([]),
                )],
            }}}},
        },
    })
}

fn replica_sets(cluster: &Cluster, ns: &str) -> Vec<Value> {
    cluster.list(ns, "replicasets")
}

#[test]
fn with_serve_down_scaling_rollouts_and_cronjobs_go_on() {
    let cluster = Cluster::own();
    cluster.assets.controller_manager();
    let install = Install::own();
    let ns = cluster.namespace("outage", true);
    let env = cluster.apply(&ns, &config_map("web-env", &[("UPSTREAM", "a")]));
    assert!(env.ok, "{}", env.stderr);
    for object in [web(), cronjob()] {
        let applied = cluster.apply(&ns, &object);
        assert!(applied.ok, "{}", applied.stderr);
    }
    cluster.wait_for("the first ReplicaSet", PATIENCE, || {
        (replica_sets(cluster, &ns).len() == 1).then_some(())
    });

    install.serve.kill();
    // The webhook is down and still matches what a person applies: an opted-in Deployment
    // without the opt-out label is refused (failurePolicy Fail), as designed.
    let other = deployment("other", 1, container(json!([]), json!([])), json!([]));
    let refused = cluster.apply(&ns, &other);
    assert!(
        !refused.ok,
        "the Fail webhook let a workload through while down"
    );
    assert!(
        refused.stderr.contains("workloads.reload-injector.io"),
        "{}",
        refused.stderr
    );

    // Scaling: the Deployment controller updates the ReplicaSet object.
    cluster
        .kubectl(&["scale", "-n", &ns, "deployment/web", "--replicas=3"])
        .run();
    cluster.wait_for("the ReplicaSet to be scaled to 3", PATIENCE, || {
        let sets = replica_sets(cluster, &ns);
        (sets.len() == 1 && sets[0]["spec"]["replicas"] == 3).then_some(())
    });

    // A rollout: the Deployment controller creates a new ReplicaSet.
    cluster
        .kubectl(&["set", "env", "-n", &ns, "deployment/web", "ROLL=1"])
        .run();
    cluster.wait_for("the rollout's new ReplicaSet", PATIENCE, || {
        (replica_sets(cluster, &ns).len() == 2).then_some(())
    });

    // A CronJob run: the CronJob controller creates a Job.
    let job = cluster.wait_for("the CronJob's Job", A_MINUTE_AND_MORE, || {
        cluster.list(&ns, "jobs").into_iter().next()
    });
    assert_eq!(job["metadata"]["ownerReferences"][0]["kind"], "CronJob");
    let failed = cluster
        .list(&ns, "events")
        .into_iter()
        .filter(|e| {
            e["message"]
                .as_str()
                .is_some_and(|m| m.contains("reload-injector.io"))
        })
        .map(|e| e["message"].clone())
        .collect::<Vec<_>>();
    assert!(
        failed.is_empty(),
        "controllers waited on the webhook: {failed:?}"
    );
}
