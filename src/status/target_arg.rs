//! `TARGET` as kubectl spells it: `deploy/web`, `deployments.apps/web`, `cm/app`, … (pure).

use crate::object_names::is_object_name;

pub use crate::kinds::Kind;

/// The workload kinds `status` reports on, in the order a summary lists them.
pub const WORKLOADS: [Kind; 6] = [
    Kind::Deployment,
    Kind::StatefulSet,
    Kind::DaemonSet,
    Kind::CronJob,
    Kind::Job,
    Kind::Rollout,
];

/// One object to report on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub kind: Kind,
    pub name: String,
}

/// A `TARGET` that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TargetError {
    #[error(
        "failed to read TARGET {0:?}: expected KIND/NAME, e.g. deploy/web, cm/app or pod/web-0"
    )]
    Malformed(String),
    #[error(
        "failed to read TARGET {target:?}: unknown kind {kind:?} (use deploy, sts, ds, cronjob, job, rollout, pod, cm or secret)"
    )]
    UnknownKind { target: String, kind: String },
}

impl Target {
    /// Reads `KIND/NAME`.
    pub fn parse(text: &str) -> Result<Target, TargetError> {
        let malformed = || TargetError::Malformed(text.to_owned());
        let (kind, name) = text.split_once('/').ok_or_else(malformed)?;
        if kind.is_empty() || !is_object_name(name) {
            return Err(malformed());
        }
        let reported = |k: &Kind| {
            WORKLOADS.contains(k) || matches!(k, Kind::Pod | Kind::ConfigMap | Kind::Secret)
        };
        let kind = Kind::parse(kind)
            .filter(reported)
            .ok_or_else(|| TargetError::UnknownKind {
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
        for text in ["web", "deploy/", "deploy/Web_1"] {
            let result = Target::parse(text);
            assert!(matches!(result, Err(TargetError::Malformed(_))), "{text}");
        }
        let err = Target::parse("service/web").unwrap_err();
        assert!(
            err.to_string().contains("unknown kind \"service\""),
            "{err}"
        );
        assert!(Target::parse("deployments.batch/web").is_err());
        // The table knows ReplicaSets; status reports on their Deployment, not on them.
        assert!(matches!(
            Target::parse("rs/web-5d8f"),
            Err(TargetError::UnknownKind { .. })
        ));
    }
}
