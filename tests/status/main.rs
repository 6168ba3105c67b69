//! `reload-injector status`: why a pod did or did not reload. Levels:
//! - `offline`: reports rendered from fixture files (goldens);
//! - `fake_api`: against the fake API server (scale, missing RBAC, faults);
//! - `e2e`: through a real kube-apiserver.

#[path = "../cluster_support/mod.rs"]
mod cluster_support;
#[allow(dead_code)]
#[path = "../status_support/mod.rs"]
mod status_support;
mod offline {
    mod golden;
}
mod fake_api {
    mod reports;
}
mod e2e {
    mod status_command;
}
