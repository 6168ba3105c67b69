//! The rollout controller inside `serve`: what it reads and when it rolls, restarts or refreshes.
//! Levels:
//! - `fake_api`: real `serve` processes against the fake API server (faults, 410s, scale);
//! - `e2e`: through a real kube-apiserver (`cluster_support`): Argo Rollouts, faults, restart in
//!   place, an outage of `serve`, Reloader's annotations and the per-workload opt-in.

#[path = "../cluster_support/mod.rs"]
mod cluster_support;
#[allow(dead_code)]
#[path = "../helm_chart/helm.rs"]
mod helm;
#[path = "../rollout_support/mod.rs"]
mod rollout_support;
#[allow(dead_code)]
#[path = "../manifests/tools.rs"]
mod tools;
#[path = "../webhook_support/mod.rs"]
mod webhook_support;
mod fake_api {
    mod reads;
    mod rollouts;
}
mod e2e {
    mod argo_rollouts;
    mod faults;
    mod in_place;
    mod opt_in_calls;
    mod outage;
    mod reloader;
    mod reloader_guard;
}
