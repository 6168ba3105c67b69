//! End to end through a real kube-apiserver (v1.20 from the project's own build, or the
//! binaries `KUBEBUILDER_ASSETS` names): the shipped manifests, `serve` as the shipped
//! ServiceAccount, and what a user sees through `kubectl`. See `tests/cluster_support`.

mod cluster_support;

use cluster_support::install::{Install, object_name, shipped_manifests};

#[test]
fn the_shipped_manifests_are_accepted_by_the_real_api_server() {
    let install = Install::shared();
    let refused: Vec<(&String, &str)> = install
        .applied
        .objects
        .iter()
        .filter(|(_, out)| !out.ok)
        .map(|(name, out)| (name, out.stderr.trim()))
        .collect();
    let expected_refusals: Vec<&str> = if install.cluster.assets.minor < 21 {
        // policy/v1 PodDisruptionBudget is served from 1.21 on.
        vec!["PodDisruptionBudget/reload-injector"]
    } else {
        vec![]
    };
    assert_eq!(
        refused.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(),
        expected_refusals,
        "objects the API server refused: {refused:#?}"
    );
    assert_eq!(
        install.applied.objects.len(),
        shipped_manifests().len(),
        "every shipped object was applied"
    );
    for (name, _) in install.applied.objects.iter().filter(|(_, out)| out.ok) {
        let (kind, obj) = name.split_once('/').unwrap();
        let ns_flag = ["-n", cluster_support::install::OWN];
        let mut args = vec!["get", kind, obj, "-o", "name"];
        args.extend(ns_flag);
        install.cluster.kubectl(&args).run();
    }
    let _ = object_name;
}
