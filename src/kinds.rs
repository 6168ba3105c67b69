//! The kinds of object the product handles, in one table (pure): each kind's API group,
//! version and plural, kubectl's names for it, and where its pod (template) is. The webhook,
//! the rollout controller, its discovery and `status` all derive from it.

use std::fmt;

/// A kind the product handles.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub enum Kind {
    /// `apps/v1` Deployment.
    Deployment,
    /// `apps/v1` StatefulSet.
    StatefulSet,
    /// `apps/v1` DaemonSet.
    DaemonSet,
    /// `apps/v1` ReplicaSet.
    ReplicaSet,
    /// `batch/v1` Job.
    Job,
    /// `batch/v1` CronJob.
    CronJob,
    /// `argoproj.io/v1alpha1` Rollout (a CRD: a cluster may not serve it).
    Rollout,
    /// `v1` Pod.
    Pod,
    /// `v1` ConfigMap.
    ConfigMap,
    /// `v1` Secret.
    Secret,
}

/// One row of the table.
#[derive(Debug)]
struct Row {
    name: &'static str,
    /// `group/version` (`version` alone for the core group).
    api_version: &'static str,
    plural: &'static str,
    /// kubectl's short name first, then any other spelling besides the name and plural.
    short: &'static [&'static str],
    /// JSON pointer of the pod (template): `Some("")` for a Pod, `None` without one.
    pod: Option<&'static str>,
}

const TEMPLATE: Option<&str> = Some("/spec/template");

/// One row per kind, in the enum's order (a unit test checks it).
#[rustfmt::skip]
const TABLE: [Row; 10] = [
    row("Deployment", "apps/v1", "deployments", &["deploy"], TEMPLATE),
    row("StatefulSet", "apps/v1", "statefulsets", &["sts"], TEMPLATE),
    row("DaemonSet", "apps/v1", "daemonsets", &["ds"], TEMPLATE),
    row("ReplicaSet", "apps/v1", "replicasets", &["rs"], TEMPLATE),
    row("Job", "batch/v1", "jobs", &["job"], TEMPLATE),
    row("CronJob", "batch/v1", "cronjobs", &["cronjob", "cj"], Some("/spec/jobTemplate/spec/template")),
    row("Rollout", "argoproj.io/v1alpha1", "rollouts", &["rollout", "ro"], TEMPLATE),
    row("Pod", "v1", "pods", &["pod", "po"], Some("")),
    row("ConfigMap", "v1", "configmaps", &["cm"], None),
    row("Secret", "v1", "secrets", &["secret"], None),
];

const fn row(
    name: &'static str,
    api_version: &'static str,
    plural: &'static str,
    short: &'static [&'static str],
    pod: Option<&'static str>,
) -> Row {
    Row {
        name,
        api_version,
        plural,
        short,
        pod,
    }
}

impl Kind {
    /// Every kind, in the table's order.
    pub const ALL: [Kind; 10] = [
        Kind::Deployment,
        Kind::StatefulSet,
        Kind::DaemonSet,
        Kind::ReplicaSet,
        Kind::Job,
        Kind::CronJob,
        Kind::Rollout,
        Kind::Pod,
        Kind::ConfigMap,
        Kind::Secret,
    ];

    fn row(self) -> &'static Row {
        &TABLE[self as usize]
    }

    /// `kind`, as in the API.
    pub fn name(self) -> &'static str {
        self.row().name
    }

    /// API group (`""` for the core group).
    pub fn group(self) -> &'static str {
        self.api_version()
            .rsplit_once('/')
            .map_or("", |(group, _)| group)
    }

    /// API version within the group.
    pub fn version(self) -> &'static str {
        let api_version = self.api_version();
        api_version
            .rsplit_once('/')
            .map_or(api_version, |(_, version)| version)
    }

    /// `apiVersion`, as in the API (`apps/v1`, `v1`).
    pub fn api_version(self) -> &'static str {
        self.row().api_version
    }

    /// Plural name in URLs and RBAC rules.
    pub fn plural(self) -> &'static str {
        self.row().plural
    }

    /// kubectl's short name (`deploy`), for `KIND/NAME`.
    pub fn short(self) -> &'static str {
        self.row().short[0]
    }

    /// JSON pointer of the pod (template) holding `metadata` and `spec` (`""` for a Pod);
    /// `None` for ConfigMaps and Secrets.
    pub fn pod_pointer(self) -> Option<&'static str> {
        self.row().pod
    }

    /// The kind of an object of API group `group` and kind `kind`.
    pub fn of(group: &str, kind: &str) -> Option<Kind> {
        Kind::ALL
            .into_iter()
            .find(|k| k.group() == group && k.name() == kind)
    }

    /// The kind a kubectl spelling names (`deploy`, `deployment`, `deployments`,
    /// `deployments.apps`, any case).
    pub fn parse(text: &str) -> Option<Kind> {
        let lower = text.to_ascii_lowercase();
        let (word, group) = match lower.split_once('.') {
            Some((word, group)) => (word, Some(group)),
            None => (lower.as_str(), None),
        };
        let kind = Kind::ALL.into_iter().find(|k| {
            let row = k.row();
            row.name.eq_ignore_ascii_case(word) || row.plural == word || row.short.contains(&word)
        })?;
        let core = kind.group().is_empty();
        let in_group = group.is_none_or(|g| g == kind.group() || (core && g == "v1"));
        in_group.then_some(kind)
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_in_the_enums_order_and_every_kind_reads_back() {
        for (i, kind) in Kind::ALL.into_iter().enumerate() {
            assert_eq!(
                TABLE[i].name,
                format!("{kind:?}"),
                "the table is in the enum's order"
            );
            assert_eq!(Kind::of(kind.group(), kind.name()), Some(kind));
            assert_eq!(Kind::parse(kind.short()), Some(kind));
            assert_eq!(Kind::parse(kind.plural()), Some(kind));
            let joined = match kind.group() {
                "" => kind.version().to_owned(),
                group => format!("{group}/{}", kind.version()),
            };
            assert_eq!(kind.api_version(), joined);
        }
    }

    #[test]
    fn names_as_the_api_and_kubectl_spell_them() {
        assert_eq!(Kind::Deployment.api_version(), "apps/v1");
        assert_eq!(Kind::Pod.api_version(), "v1");
        assert_eq!(Kind::Rollout.api_version(), "argoproj.io/v1alpha1");
        assert_eq!((Kind::Pod.group(), Kind::Pod.version()), ("", "v1"));
        assert_eq!(
            (Kind::Rollout.group(), Kind::Rollout.version()),
            ("argoproj.io", "v1alpha1")
        );
        assert_eq!(
            Kind::CronJob.pod_pointer(),
            Some("/spec/jobTemplate/spec/template")
        );
        assert_eq!(Kind::ConfigMap.pod_pointer(), None);
        assert_eq!(Kind::of("apps", "Job"), None, "a Job is batch's");
        for (text, kind) in [
            ("Deployment", Kind::Deployment),
            ("deployments.apps", Kind::Deployment),
            ("cj", Kind::CronJob),
            ("jobs.batch", Kind::Job),
            ("pods.v1", Kind::Pod),
            ("ro", Kind::Rollout),
        ] {
            assert_eq!(Kind::parse(text), Some(kind), "{text}");
        }
        assert_eq!(Kind::parse("deployments.batch"), None);
        assert_eq!(Kind::parse("service"), None);
    }
}
