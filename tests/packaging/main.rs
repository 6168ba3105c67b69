//! What a user installs: the manifests, the chart, the docs, the image and the release. Levels:
//! - `offline`: rendered and checked without a cluster;
//! - `local`: scripts run as a person runs them (the release's refusals, the dev cluster);
//! - `e2e`: the chart installed with Helm on a real kube-apiserver;
//! - `node`: the images built and the release pushed to the node's registry and installed from
//!   it (the suite runs this level in its node lane; the release test builds before it waits
//!   for the machine's one node).

#[path = "../cluster_support/mod.rs"]
mod cluster_support;
#[allow(dead_code)]
#[path = "../watch_support/copies.rs"]
mod copies;
#[path = "../image_support/dockerfile.rs"]
mod dockerfile;
#[allow(dead_code)]
#[path = "../docs_support/mod.rs"]
mod docs_support;
#[allow(dead_code)]
#[path = "../helm_chart/helm.rs"]
mod helm;
#[path = "../release_support/mod.rs"]
mod release_support;
#[allow(dead_code)]
#[path = "../manifests/tools.rs"]
mod tools;
#[allow(dead_code)]
#[path = "../manifests/webhook_safety.rs"]
mod webhook_safety;
mod offline {
    mod docs;
    mod helm_chart;
    mod install_doc;
    mod manifests;
    mod release_version;
    mod release_workflow;
}
mod local {
    mod dev_cluster_script;
    mod release_refusals;
}
mod e2e {
    mod helm;
}
mod node {
    mod dockerfile;
    mod node_images;
    mod release;
}
