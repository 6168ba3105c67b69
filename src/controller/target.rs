//! What the controller writes to: a workload's pod template (`config-hash`) or a sidecar Pod
//! (`mounted-config-hash`), and the one annotation it may change on each.

use std::fmt;
use std::sync::Arc;

use crate::inject::{CONFIG_HASH, MOUNTED_CONFIG_HASH};

/// The kinds the controller writes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TargetKind {
    /// `apps/v1` Deployment.
    Deployment,
    /// `apps/v1` StatefulSet.
    StatefulSet,
    /// `apps/v1` DaemonSet.
    DaemonSet,
    /// `batch/v1` CronJob (its next Job starts with the new config).
    CronJob,
    /// `v1` Pod carrying the sidecar.
    Pod,
}

impl TargetKind {
    /// The workload kinds (restart-only consumers), in a fixed order.
    pub const WORKLOADS: [TargetKind; 4] = [
        TargetKind::Deployment,
        TargetKind::StatefulSet,
        TargetKind::DaemonSet,
        TargetKind::CronJob,
    ];

    /// `kind`, as in the API.
    pub fn kind(self) -> &'static str {
        match self {
            TargetKind::Deployment => "Deployment",
            TargetKind::StatefulSet => "StatefulSet",
            TargetKind::DaemonSet => "DaemonSet",
            TargetKind::CronJob => "CronJob",
            TargetKind::Pod => "Pod",
        }
    }

    /// `apiVersion`, as in the API.
    pub fn api_version(self) -> &'static str {
        match self {
            TargetKind::Deployment | TargetKind::StatefulSet | TargetKind::DaemonSet => "apps/v1",
            TargetKind::CronJob => "batch/v1",
            TargetKind::Pod => "v1",
        }
    }

    /// The plural resource name, as in the API's paths.
    pub fn plural(self) -> &'static str {
        match self {
            TargetKind::Deployment => "deployments",
            TargetKind::StatefulSet => "statefulsets",
            TargetKind::DaemonSet => "daemonsets",
            TargetKind::CronJob => "cronjobs",
            TargetKind::Pod => "pods",
        }
    }

    /// Path (object keys) from the object to the metadata holding the annotation.
    pub fn metadata_path(self) -> &'static [&'static str] {
        match self {
            TargetKind::Deployment | TargetKind::StatefulSet | TargetKind::DaemonSet => {
                &["spec", "template", "metadata"]
            }
            TargetKind::CronJob => &["spec", "jobTemplate", "spec", "template", "metadata"],
            TargetKind::Pod => &["metadata"],
        }
    }

    /// The annotation the controller keeps up to date on this kind.
    pub fn annotation(self) -> &'static str {
        match self {
            TargetKind::Pod => MOUNTED_CONFIG_HASH,
            _ => CONFIG_HASH,
        }
    }

    /// Whether a changed hash starts a rolling update (workloads) or a kubelet refresh (Pods).
    pub fn is_workload(self) -> bool {
        self != TargetKind::Pod
    }
}

/// One object the controller may write to.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Target {
    /// Its kind.
    pub kind: TargetKind,
    /// `metadata.namespace` (shared by every record of the namespace).
    pub namespace: Arc<str>,
    /// `metadata.name` (clones of a target share it).
    pub name: Arc<str>,
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}/{}", self.kind.kind(), self.namespace, self.name)
    }
}

/// A write the reconciler decided on: set `target`'s annotation from `expected` (what the view
/// shows now; `None` when absent) to `desired`, and for workloads record an Event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Write {
    /// Where.
    pub target: Target,
    /// `metadata.uid` of the object (for the Event's `involvedObject`).
    pub uid: String,
    /// The annotation's value in the view; the write only applies while it is still this.
    pub expected: Option<String>,
    /// The new value.
    pub desired: String,
    /// The Event message (workloads only), starting with `reload-injector:`; never a value.
    pub event: Option<String>,
}
