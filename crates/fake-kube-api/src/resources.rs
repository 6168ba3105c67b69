//! The resources the fake API server knows, with their URL and type names.

/// One API resource: how it is addressed and what its objects are called.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Resource {
    /// Plural name in URLs and RBAC rules (`configmaps`).
    pub plural: &'static str,
    /// API group, empty for core.
    pub group: &'static str,
    /// API version (`v1`).
    pub version: &'static str,
    /// Object kind (`ConfigMap`).
    pub kind: &'static str,
    /// Whether objects live in a namespace.
    pub namespaced: bool,
    /// Whether `metadata.generation` is kept (bumped when `spec` changes).
    pub has_generation: bool,
}

impl Resource {
    /// `apiVersion` of the objects (`v1`, `apps/v1`).
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_owned()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The group-qualified name used in error messages (`deployments.apps`).
    pub fn qualified(&self) -> String {
        if self.group.is_empty() {
            self.plural.to_owned()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }
}

const fn resource(
    plural: &'static str,
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    namespaced: bool,
    has_generation: bool,
) -> Resource {
    Resource {
        plural,
        group,
        version,
        kind,
        namespaced,
        has_generation,
    }
}

/// Every resource served.
pub const RESOURCES: &[Resource] = &[
    resource("namespaces", "", "v1", "Namespace", false, false),
    resource("configmaps", "", "v1", "ConfigMap", true, false),
    resource("secrets", "", "v1", "Secret", true, false),
    resource("pods", "", "v1", "Pod", true, false),
    resource("events", "", "v1", "Event", true, false),
    resource("events", "events.k8s.io", "v1", "Event", true, false),
    resource("deployments", "apps", "v1", "Deployment", true, true),
    resource("statefulsets", "apps", "v1", "StatefulSet", true, true),
    resource("daemonsets", "apps", "v1", "DaemonSet", true, true),
    resource("replicasets", "apps", "v1", "ReplicaSet", true, true),
    resource("cronjobs", "batch", "v1", "CronJob", true, true),
    resource("jobs", "batch", "v1", "Job", true, true),
    resource("leases", "coordination.k8s.io", "v1", "Lease", true, false),
    // Argo Rollouts' CRD: served here as if it were installed.
    resource("rollouts", "argoproj.io", "v1alpha1", "Rollout", true, true),
    resource(
        "mutatingwebhookconfigurations",
        "admissionregistration.k8s.io",
        "v1",
        "MutatingWebhookConfiguration",
        false,
        true,
    ),
];

/// The resource addressed by `group`/`version`/`plural` in a URL.
pub fn by_path(group: &str, version: &str, plural: &str) -> Option<&'static Resource> {
    RESOURCES
        .iter()
        .find(|r| r.group == group && r.version == version && r.plural == plural)
}

/// The resource whose objects have this `apiVersion` and `kind`.
pub fn by_kind(api_version: &str, kind: &str) -> Option<&'static Resource> {
    RESOURCES
        .iter()
        .find(|r| r.kind == kind && r.api_version() == api_version)
}

/// The resource named by its plural, optionally group-qualified (`deployments.apps`).
/// A bare `events` is the core one.
pub fn by_name(name: &str) -> Option<&'static Resource> {
    RESOURCES
        .iter()
        .find(|r| r.plural == name || r.qualified() == name)
}

/// The discovery document of one group version (`APIResourceList`), as the API server answers
/// `GET /apis/GROUP/VERSION`: every resource it serves there, with the verbs the fake handles.
pub fn discovery(group: &str, version: &str) -> serde_json::Value {
    let group_version = if group.is_empty() {
        version.to_owned()
    } else {
        format!("{group}/{version}")
    };
    let resources: Vec<serde_json::Value> = RESOURCES
        .iter()
        .filter(|r| r.group == group && r.version == version)
        .map(|r| {
            serde_json::json!({
                "name": r.plural, "singularName": "", "namespaced": r.namespaced, "kind": r.kind,
                "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"],
            })
        })
        .collect();
    serde_json::json!({
        "kind": "APIResourceList", "apiVersion": "v1",
        "groupVersion": group_version, "resources": resources,
    })
}
