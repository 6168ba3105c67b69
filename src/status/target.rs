//! `TARGET` as kubectl spells it: `deploy/web`, `deployment/web`, `deployments.apps/web`,
//! `cm/app`, `secret/tls`, `pod/web-0`, … (pure).

use std::fmt;

use crate::names::is_object_name;

/// A kind's `kind`, API group, version, plural and kubectl short name.
type Facts = (
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    &'static str,
);

/// The kinds `status` reports on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub enum Kind {
    /// `apps/v1` Deployment.
    Deployment,
    /// `apps/v1` StatefulSet.
    StatefulSet,
    /// `apps/v1` DaemonSet.
    DaemonSet,
    /// `batch/v1` CronJob.
    CronJob,
    /// `batch/v1` Job.
    Job,
    /// `argoproj.io/v1alpha1` Rollout.
    Rollout,
    /// `v1` Pod.
    Pod,
    /// `v1` ConfigMap.
    ConfigMap,
    /// `v1` Secret.
    Secret,
}

impl Kind {
    /// The workload kinds, in the order a summary lists them.
    pub const WORKLOADS: [Kind; 6] = [
        Kind::Deployment,
        Kind::StatefulSet,
        Kind::DaemonSet,
        Kind::CronJob,
        Kind::Job,
        Kind::Rollout,
    ];

    /// Its `kind`, API group, version and plural, and the short name kubectl prints.
    fn facts(self) -> Facts {
        match self {
            Kind::Deployment => ("Deployment", "apps", "v1", "deployments", "deploy"),
            Kind::StatefulSet => ("StatefulSet", "apps", "v1", "statefulsets", "sts"),
            Kind::DaemonSet => ("DaemonSet", "apps", "v1", "daemonsets", "ds"),
            Kind::CronJob => ("CronJob", "batch", "v1", "cronjobs", "cronjob"),
            Kind::Job => ("Job", "batch", "v1", "jobs", "job"),
            Kind::Rollout => ("Rollout", "argoproj.io", "v1alpha1", "rollouts", "rollout"),
            Kind::Pod => ("Pod", "", "v1", "pods", "pod"),
            Kind::ConfigMap => ("ConfigMap", "", "v1", "configmaps", "cm"),
            Kind::Secret => ("Secret", "", "v1", "secrets", "secret"),
        }
    }

    /// `kind`, as in the API.
    pub fn name(self) -> &'static str {
        self.facts().0
    }

    /// API group, version and plural.
    pub fn resource(self) -> (&'static str, &'static str, &'static str) {
        let (_, group, version, plural, _) = self.facts();
        (group, version, plural)
    }

    /// The short name kubectl prints (`deploy`), for `KIND/NAME`.
    pub fn short(self) -> &'static str {
        self.facts().4
    }

    /// Whether this kind has a pod template.
    pub fn is_workload(self) -> bool {
        Kind::WORKLOADS.contains(&self)
    }

    /// Where the pod template is (a Pod is its own: the whole object).
    pub fn template_pointer(self) -> &'static str {
        match self {
            Kind::CronJob => "/spec/jobTemplate/spec/template",
            Kind::Pod => "",
            _ => "/spec/template",
        }
    }

    /// Whether the rollout controller re-stamps this kind's template when its config changes.
    pub fn restamped(self) -> bool {
        matches!(
            self,
            Kind::Deployment | Kind::StatefulSet | Kind::DaemonSet | Kind::CronJob | Kind::Rollout
        )
    }

    /// The kind a kubectl spelling names (`deploy`, `deployment`, `deployments`,
    /// `deployments.apps`, case-insensitive).
    pub fn parse(text: &str) -> Option<Kind> {
        let lower = text.to_ascii_lowercase();
        let (word, group) = match lower.split_once('.') {
            Some((word, group)) => (word, Some(group)),
            None => (lower.as_str(), None),
        };
        let kind = match word {
            "deploy" | "deployment" | "deployments" => Kind::Deployment,
            "sts" | "statefulset" | "statefulsets" => Kind::StatefulSet,
            "ds" | "daemonset" | "daemonsets" => Kind::DaemonSet,
            "cj" | "cronjob" | "cronjobs" => Kind::CronJob,
            "job" | "jobs" => Kind::Job,
            "ro" | "rollout" | "rollouts" => Kind::Rollout,
            "po" | "pod" | "pods" => Kind::Pod,
            "cm" | "configmap" | "configmaps" => Kind::ConfigMap,
            "secret" | "secrets" => Kind::Secret,
            _ => return None,
        };
        let (want, _, _) = kind.resource();
        match group {
            None => Some(kind),
            Some(group) if group == want || (want.is_empty() && group == "v1") => Some(kind),
            Some(_) => None,
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One object to report on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// Its kind.
    pub kind: Kind,
    /// `metadata.name`.
    pub name: String,
}

/// A `TARGET` that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TargetError {
    /// Not `KIND/NAME`.
    #[error(
        "failed to read TARGET {0:?}: expected KIND/NAME, e.g. deploy/web, cm/app or pod/web-0"
    )]
    Malformed(String),
    /// A kind `status` does not know.
    #[error(
        "failed to read TARGET {target:?}: unknown kind {kind:?} (use deploy, sts, ds, cronjob, job, rollout, pod, cm or secret)"
    )]
    UnknownKind {
        /// The whole TARGET.
        target: String,
        /// The kind as given.
        kind: String,
    },
}

impl Target {
    /// Reads `KIND/NAME`.
    pub fn parse(text: &str) -> Result<Target, TargetError> {
        let malformed = || TargetError::Malformed(text.to_owned());
        let (kind, name) = text.split_once('/').ok_or_else(malformed)?;
        if kind.is_empty() || !is_object_name(name) {
            return Err(malformed());
        }
        let kind = Kind::parse(kind).ok_or_else(|| TargetError::UnknownKind {
            target: text.to_owned(),
            kind: kind.to_owned(),
        })?;
        Ok(Target {
            kind,
            name: name.to_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubectl_spellings_are_understood() {
        for (text, kind) in [
            ("deploy/web", Kind::Deployment),
            ("Deployment/web", Kind::Deployment),
            ("deployments.apps/web", Kind::Deployment),
            ("sts/db", Kind::StatefulSet),
            ("daemonsets/db", Kind::DaemonSet),
            ("cronjob/db", Kind::CronJob),
            ("jobs.batch/db", Kind::Job),
            ("rollout/db", Kind::Rollout),
            ("po/db", Kind::Pod),
            ("configmap/db", Kind::ConfigMap),
            ("secrets/db", Kind::Secret),
        ] {
            assert_eq!(Target::parse(text).unwrap().kind, kind, "{text}");
        }
    }

    #[test]
    fn bad_targets_say_which() {
        assert!(matches!(
            Target::parse("web"),
            Err(TargetError::Malformed(_))
        ));
        assert!(matches!(
            Target::parse("deploy/"),
            Err(TargetError::Malformed(_))
        ));
        assert!(matches!(
            Target::parse("deploy/Web_1"),
            Err(TargetError::Malformed(_))
        ));
        let err = Target::parse("service/web").unwrap_err();
        assert!(
            err.to_string().contains("unknown kind \"service\""),
            "{err}"
        );
        assert!(Target::parse("deployments.batch/web").is_err());
    }
}
