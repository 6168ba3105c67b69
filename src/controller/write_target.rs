//! What the controller writes to: a workload's pod template (`config-hash`) or a sidecar Pod
//! (`mounted-config-hash`, and on a Pod that restarts in place `env-hash`), and the one
//! annotation it may change on each.

use std::fmt;
use std::sync::Arc;

use kube::api::{ApiResource, GroupVersionKind};

use crate::kinds::Kind;
use crate::workload::{
    CONFIG_HASH, ENV_HASH, ENV_HASH_HELD_BACK, ENV_HASH_REFRESHED, MOUNTED_CONFIG_HASH,
    MOUNTED_CONFIG_HELD_BACK, MOUNTED_CONFIG_REFRESHED,
};

/// The kinds the controller writes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TargetKind {
    Deployment,
    StatefulSet,
    DaemonSet,
    /// Its next Job starts with the new config.
    CronJob,
    /// Argo's, with a template of its own (a re-stamp follows its canary or blue-green steps).
    /// A CRD: the server may not serve it.
    Rollout,
    /// A Pod carrying the sidecar.
    Pod,
    /// The same Pod as its env hash, when its sidecar restarts it in place: written in its
    /// workload's restart waves.
    PodEnv,
}

impl TargetKind {
    /// The workload kinds, in a fixed order (discovery decides which are watched).
    pub const WORKLOADS: [TargetKind; 5] = [
        TargetKind::Deployment,
        TargetKind::StatefulSet,
        TargetKind::DaemonSet,
        TargetKind::CronJob,
        TargetKind::Rollout,
    ];

    pub fn table(self) -> Kind {
        match self {
            TargetKind::Deployment => Kind::Deployment,
            TargetKind::StatefulSet => Kind::StatefulSet,
            TargetKind::DaemonSet => Kind::DaemonSet,
            TargetKind::CronJob => Kind::CronJob,
            TargetKind::Rollout => Kind::Rollout,
            TargetKind::Pod | TargetKind::PodEnv => Kind::Pod,
        }
    }

    pub fn kind(self) -> &'static str {
        self.table().name()
    }

    pub fn api_resource(self) -> ApiResource {
        api_resource(self.table())
    }

    /// JSON pointer of the pod template (`""` for a Pod), whose `metadata` holds the annotation.
    pub fn pod_pointer(self) -> &'static str {
        self.table()
            .pod_pointer()
            .expect("every kind the controller writes to has a pod (template)")
    }

    /// The hash annotation the controller keeps up to date on this kind.
    pub fn annotation(self) -> &'static str {
        match self {
            TargetKind::Pod => MOUNTED_CONFIG_HASH,
            TargetKind::PodEnv => ENV_HASH,
            _ => CONFIG_HASH,
        }
    }

    /// The annotation that says which value a stopped run held back from this kind (Pods only).
    pub fn held_back_annotation(self) -> Option<&'static str> {
        match self {
            TargetKind::Pod => Some(MOUNTED_CONFIG_HELD_BACK),
            TargetKind::PodEnv => Some(ENV_HASH_HELD_BACK),
            _ => None,
        }
    }

    pub fn is_workload(self) -> bool {
        !self.is_pod()
    }

    /// A Pod (its mounted config, or its env).
    pub fn is_pod(self) -> bool {
        matches!(self, TargetKind::Pod | TargetKind::PodEnv)
    }
}

/// How the API addresses `kind` (a Rollout has no k8s-openapi type to take it from).
pub fn api_resource(kind: Kind) -> ApiResource {
    let gvk = GroupVersionKind::gvk(kind.group(), kind.version(), kind.name());
    ApiResource::from_gvk_with_plural(&gvk, kind.plural())
}

/// One object the controller may write to.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Target {
    pub kind: TargetKind,
    /// Shared by every record of the namespace.
    pub namespace: Arc<str>,
    pub name: Arc<str>,
}

impl Target {
    /// The same Pod as its env hash (the target restart in place writes).
    pub fn env_twin(&self) -> Target {
        Target {
            kind: TargetKind::PodEnv,
            ..self.clone()
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}/{}", self.kind.kind(), self.namespace, self.name)
    }
}

/// A write the reconciler decided on: set `target`'s `annotation` from `expected` (what the
/// view shows now; the write applies only while it is still this) to `desired`, and for
/// workloads record an Event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Write {
    pub target: Target,
    /// For the Event's `involvedObject`.
    pub uid: String,
    pub expected: Option<String>,
    pub desired: String,
    /// The Event message (workloads only), starting with `reload-injector:`; never a value.
    pub event: Option<String>,
    /// `target.kind.annotation()`, or one beside it ([`Write::again`], [`Write::held_back`]).
    pub annotation: &'static str,
}

impl Write {
    /// The write of `target`'s own hash annotation.
    pub fn hash(
        target: Target,
        uid: String,
        expected: Option<String>,
        desired: String,
        event: Option<String>,
    ) -> Write {
        let annotation = target.kind.annotation();
        Write {
            target,
            uid,
            expected,
            desired,
            event,
            annotation,
        }
    }

    /// The second nudge that follows this write once it landed: a Pod's changed
    /// `mounted-config-hash` (or `env-hash`) is copied to `mounted-config-refreshed` (or
    /// `env-hash-refreshed`). The first update can reach the kubelet before its own watch of the
    /// ConfigMap or Secret has the new data; it then remounts the old data and would not look
    /// again before its periodic sync (60–90 s). The value is new there, so the kubelet gets a
    /// real UPDATE. A merge patch without a `test`: it never conflicts.
    pub fn again(&self) -> Option<Write> {
        let refreshed = match (self.target.kind, self.annotation) {
            (TargetKind::Pod, MOUNTED_CONFIG_HASH) => MOUNTED_CONFIG_REFRESHED,
            (TargetKind::PodEnv, ENV_HASH) => ENV_HASH_REFRESHED,
            _ => return None,
        };
        Some(self.beside(refreshed))
    }

    /// The record, on the Pod, that a stopped run held this write back (its value in the kind's
    /// held-back annotation), so that a later leader does not write it either.
    pub fn held_back(&self) -> Option<Write> {
        Some(self.beside(self.target.kind.held_back_annotation()?))
    }

    /// The same value in another annotation, without a test and without an Event.
    fn beside(&self, annotation: &'static str) -> Write {
        Write {
            expected: None,
            event: None,
            annotation,
            ..self.clone()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_pods_hash_write_is_followed_by_a_second_distinct_nudge() {
        let pod = Target {
            kind: TargetKind::Pod,
            namespace: "shop".into(),
            name: "web-1".into(),
        };
        let first = Write::hash(
            pod.clone(),
            "uid".into(),
            Some("sha256:old".into()),
            "sha256:new".into(),
            None,
        );
        assert_eq!(first.annotation, MOUNTED_CONFIG_HASH);
        let again = first.again().expect("a Pod's refresh is nudged twice");
        assert_eq!(again.target, pod);
        assert_eq!(again.annotation, MOUNTED_CONFIG_REFRESHED);
        assert_ne!(again.annotation, first.annotation);
        assert_eq!(again.desired, "sha256:new");
        assert_eq!(again.expected, None);
        assert_eq!(again.event, None);
        // The second nudge is not followed by a third, and workloads roll instead.
        assert_eq!(again.again(), None);
        let deployment = Write::hash(
            Target {
                kind: TargetKind::Deployment,
                ..pod.clone()
            },
            "uid".into(),
            None,
            "sha256:new".into(),
            Some("reload-injector: changed".into()),
        );
        assert_eq!(deployment.again(), None);
        // The env hash of a Pod that restarts in place is nudged the same way.
        let twin = pod.env_twin();
        let env = Write::hash(twin.clone(), "uid".into(), None, "sha256:e".into(), None);
        assert_eq!(env.annotation, ENV_HASH);
        let again = env.again().expect("a restart in place is nudged twice");
        assert_eq!((again.target, again.annotation), (twin, ENV_HASH_REFRESHED));
        assert!(TargetKind::PodEnv.is_pod() && !TargetKind::PodEnv.is_workload());
    }

    #[test]
    fn a_held_back_value_is_recorded_on_pods_only_without_a_test_or_an_event() {
        let pod = Target {
            kind: TargetKind::Pod,
            namespace: "shop".into(),
            name: "web-1".into(),
        };
        let refresh = Write::hash(
            pod.clone(),
            "u".into(),
            Some("sha256:old".into()),
            "sha256:new".into(),
            None,
        );
        let held = refresh
            .held_back()
            .expect("a Pod records what it was not given");
        assert_eq!(
            (
                held.annotation,
                held.desired.as_str(),
                held.expected.as_deref(),
                held.event.as_deref()
            ),
            (MOUNTED_CONFIG_HELD_BACK, "sha256:new", None, None)
        );
        assert_eq!(held.again(), None, "no second nudge for a record");
        let env = Write::hash(pod.env_twin(), "u".into(), None, "sha256:e".into(), None);
        assert_eq!(env.held_back().unwrap().annotation, ENV_HASH_HELD_BACK);
        let deployment = Write::hash(
            Target {
                kind: TargetKind::Deployment,
                ..pod
            },
            "u".into(),
            None,
            "sha256:d".into(),
            Some("reload-injector: changed".into()),
        );
        assert_eq!(deployment.held_back(), None);
    }

    #[test]
    fn a_rollout_is_addressed_as_argo_serves_it() {
        let resource = TargetKind::Rollout.api_resource();
        assert_eq!(resource.group, "argoproj.io");
        assert_eq!(resource.version, "v1alpha1");
        assert_eq!(resource.api_version, "argoproj.io/v1alpha1");
        assert_eq!(resource.kind, "Rollout");
        assert_eq!(resource.plural, "rollouts");
        assert_eq!(
            TargetKind::Rollout.pod_pointer(),
            TargetKind::Deployment.pod_pointer()
        );
        assert!(TargetKind::Rollout.is_workload());
        assert_eq!(TargetKind::Rollout.annotation(), CONFIG_HASH);
        assert!(TargetKind::WORKLOADS.contains(&TargetKind::Rollout));
    }

    #[test]
    fn built_in_kinds_are_addressed_as_their_k8s_openapi_types() {
        use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, StatefulSet};
        use k8s_openapi::api::batch::v1::CronJob;
        use k8s_openapi::api::core::v1::Pod;
        for (kind, typed) in [
            (
                TargetKind::Deployment,
                ApiResource::erase::<Deployment>(&()),
            ),
            (
                TargetKind::StatefulSet,
                ApiResource::erase::<StatefulSet>(&()),
            ),
            (TargetKind::DaemonSet, ApiResource::erase::<DaemonSet>(&())),
            (TargetKind::CronJob, ApiResource::erase::<CronJob>(&())),
            (TargetKind::Pod, ApiResource::erase::<Pod>(&())),
        ] {
            assert_eq!(kind.api_resource(), typed, "{kind:?}");
        }
    }
}
