//! The whole product on a real node (kubelet, containerd, runc; `cluster_support::node`): Pods
//! that really run, reload and restart. One node for the binary; a test that disturbs it runs
//! alone (`Node::alone`). Level:
//! - `node`: every test here (the suite runs it in its node lane; a node is one per machine,
//!   `Node::start` waits for another process's).

#[path = "../cluster_support/mod.rs"]
mod cluster_support;
mod node {
    mod basics;
    mod faults;
    mod in_place;
    mod scenarios;
}
