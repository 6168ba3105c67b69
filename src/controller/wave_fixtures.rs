//! What the tests of both waves share: the workload `shop/web`, its Pods, writes to them.

use super::write_target::{Target, TargetKind, Write};

/// The Deployment whose Pods the waves refresh or restart.
pub fn web() -> Target {
    Target {
        kind: TargetKind::Deployment,
        namespace: "shop".into(),
        name: "web".into(),
    }
}

/// Pod `name` of `shop` as a target of `kind` (`Pod` or `PodEnv`).
pub fn pod(kind: TargetKind, name: &str) -> Target {
    Target {
        kind,
        namespace: "shop".into(),
        name: name.into(),
    }
}

/// A write of `desired` over `sha256:old` to Pod `name` as a target of `kind`.
pub fn write(kind: TargetKind, name: &str, desired: &str) -> Write {
    Write::hash(
        pod(kind, name),
        format!("uid-{name}"),
        Some("sha256:old".into()),
        desired.into(),
        None,
    )
}

/// The names of the Pods written to, in order.
pub fn names(writes: &[Write]) -> Vec<String> {
    writes.iter().map(|w| w.target.name.to_string()).collect()
}
