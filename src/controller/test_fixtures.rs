//! What the controller's unit tests share: the workload `shop/web`, its Pods, writes to them,
//! and consumers.

use super::reduce::Consumer;
use super::write_target::{Target, TargetKind, Write};
use crate::workload::consumption::Consumption;

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

/// A consumer with `uid` whose hash is `hash` and that reads `consumption`.
pub fn consumer(uid: &str, hash: Option<&str>, consumption: Consumption) -> Consumer {
    Consumer {
        uid: uid.into(),
        hash: hash.map(str::to_owned),
        consumption: consumption.into(),
        earlier: None,
        owner: None,
        ready: None,
        opt_ins: Default::default(),
        if_matched: Box::default(),
        restarts: None,
        held_back: None,
    }
}
