//! Admission: what the webhook answers. Levels:
//! - `offline`: the pure core on fixture files (goldens, `inject`, the one annotation parser,
//!   generated reviews);
//! - `local`: the real `serve` and its router on this machine (TLS, bad input, lookups against a
//!   mock API, certificate rotation, the soak, commands on bad input);
//! - `e2e`: through a real kube-apiserver (`cluster_support`).
//!
//! What one review may allocate is measured apart (`tests/admission_memory.rs`): its counting
//! allocator must be the only one in its process.

#[path = "../cluster_support/mod.rs"]
mod cluster_support;
#[path = "../fuzz_support/mod.rs"]
mod fuzz_support;
#[path = "../soak_support/mod.rs"]
mod soak_support;
#[path = "../watch_support/mod.rs"]
mod watch_support;
#[path = "../webhook_support/mod.rs"]
mod webhook_support;
mod offline {
    mod fuzz;
    mod golden;
    mod inject_command;
    mod inject_command_golden;
    mod one_parser;
}
mod local {
    mod abuse;
    mod cert_rotation;
    mod certs_command;
    mod command_errors;
    mod lookup;
    mod router;
    mod secret_values;
    mod soak;
    mod tls;
    mod tls_refusals;
}
mod e2e {
    mod basics;
    mod current_api;
    mod opt_in;
    mod pod_reviews;
    mod real_world;
}
