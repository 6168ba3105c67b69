//! Argo Rollouts the core admits unchanged: one that names a Deployment in `spec.workloadRef`
//! (that Deployment is the object stamped), one with neither a template nor a `workloadRef`,
//! and one whose template cannot be read. Each is admitted with a warning saying why it is not
//! stamped; none is denied, because Argo's own validation is the judge of a Rollout.

use serde::Deserialize;
use serde_json::value::RawValue;

use super::messages::{Warnings, quoted};
use super::skim::{Shallow, Skim};

/// Why a Rollout is admitted without a stamp.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unstamped {
    /// `spec.workloadRef` names this Deployment, whose template the Rollout runs.
    Deployment(String),
    /// `spec.workloadRef` names something else (`kind`, `name`), or nothing readable.
    OtherRef {
        /// Its `kind`, when it is a string.
        kind: Option<String>,
        /// Its `name`, when it is a string.
        name: Option<String>,
    },
    /// Neither `spec.template` nor `spec.workloadRef`.
    Neither,
    /// A template the core cannot read, and why.
    Unreadable(String),
}

impl Unstamped {
    /// What a Rollout without a pod template at `spec.template` is, from its JSON as sent
    /// (`None`: read for its template alone, its `workloadRef` is unknown).
    pub fn without_template(object: Option<&RawValue>) -> Self {
        let top = object.and_then(|object| serde_json::from_str::<Top>(object.get()).ok());
        let Some(spec) = top.and_then(|top| top.spec) else {
            return Unstamped::Neither;
        };
        if let Some(Skim(shape)) = spec.template {
            return Unstamped::Unreadable(format!("it is a {}, not an object", shape.name()));
        }
        let Some(found) = spec.workload_ref else {
            return Unstamped::Neither;
        };
        let Ok(found) = serde_json::from_str::<Ref>(found.get()) else {
            return Unstamped::OtherRef {
                kind: None,
                name: None,
            };
        };
        let text = |field: Option<Shallow>| field.and_then(|f| f.0.as_str().map(str::to_owned));
        let (api_version, kind, name) =
            (text(found.api_version), text(found.kind), text(found.name));
        // Argo finds the referenced kind by its group and kind.
        let apps = api_version.is_some_and(|v| v.split_once('/').is_some_and(|(g, _)| g == "apps"));
        match (kind, name) {
            (Some(kind), Some(name)) if kind == "Deployment" && apps && !name.is_empty() => {
                Unstamped::Deployment(name)
            }
            (kind, name) => Unstamped::OtherRef { kind, name },
        }
    }

    /// The warning that says why the Rollout is admitted unchanged.
    pub fn warn(&self, warnings: &mut Warnings) {
        match self {
            Unstamped::Deployment(name) => warnings.notice(format_args!(
                "Rollout runs the template of Deployment {}: config changes are stamped there",
                quoted(name)
            )),
            Unstamped::OtherRef {
                kind: Some(kind),
                name: Some(name),
            } => warnings.push(format_args!(
                "Rollout's workloadRef names {} {}, not an apps/v1 Deployment: config changes do not roll it",
                quoted(kind),
                quoted(name)
            )),
            Unstamped::OtherRef { .. } => warnings.push(
                "Rollout's workloadRef names no Deployment: admitted unchanged, no config hash",
            ),
            Unstamped::Neither => warnings.push(
                "Rollout has neither spec.template nor spec.workloadRef: admitted unchanged, no config hash",
            ),
            Unstamped::Unreadable(reason) => warnings.push(format_args!(
                "Rollout not stamped, its template is unreadable: {reason}"
            )),
        }
    }
}

/// The parts of a Rollout read for its `workloadRef`; everything else is skipped unread.
#[derive(Deserialize)]
struct Top<'a> {
    #[serde(borrow)]
    spec: Option<Spec<'a>>,
}

#[derive(Deserialize)]
struct Spec<'a> {
    #[serde(rename = "workloadRef", borrow)]
    workload_ref: Option<&'a RawValue>,
    template: Option<Skim>,
}

#[derive(Deserialize)]
struct Ref {
    #[serde(rename = "apiVersion")]
    api_version: Option<Shallow>,
    kind: Option<Shallow>,
    name: Option<Shallow>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(json: &str) -> Unstamped {
        let raw = RawValue::from_string(json.to_owned()).unwrap();
        Unstamped::without_template(Some(&raw))
    }

    #[test]
    fn a_workload_ref_to_a_deployment_names_it() {
        let got = of(
            r#"{"spec":{"replicas":2,"workloadRef":{"apiVersion":"apps/v1","kind":"Deployment","name":"web"}}}"#,
        );
        assert_eq!(got, Unstamped::Deployment("web".into()));
        let no_version = of(r#"{"spec":{"workloadRef":{"kind":"Deployment","name":"web"}}}"#);
        assert!(matches!(no_version, Unstamped::OtherRef { .. }));
    }

    #[test]
    fn other_references_and_shapes_are_told_apart() {
        let other = of(
            r#"{"spec":{"workloadRef":{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"db"}}}"#,
        );
        assert_eq!(
            other,
            Unstamped::OtherRef {
                kind: Some("ReplicaSet".into()),
                name: Some("db".into())
            }
        );
        let nameless = of(r#"{"spec":{"workloadRef":{"kind":"Deployment","name":7}}}"#);
        assert!(matches!(nameless, Unstamped::OtherRef { name: None, .. }));
        let not_an_object = of(r#"{"spec":{"workloadRef":"web"}}"#);
        assert!(matches!(
            not_an_object,
            Unstamped::OtherRef { kind: None, .. }
        ));
        for neither in [
            r#"{"spec":{"replicas":1}}"#,
            r#"{"spec":"web"}"#,
            r#"{"spec":{"workloadRef":null}}"#,
            r#"{}"#,
            r#"[]"#,
        ] {
            assert_eq!(of(neither), Unstamped::Neither, "{neither}");
        }
        assert_eq!(Unstamped::without_template(None), Unstamped::Neither);
        let not_a_template = of(r#"{"spec":{"template":"web","workloadRef":{"name":"web"}}}"#);
        assert_eq!(
            not_a_template,
            Unstamped::Unreadable("it is a string, not an object".into())
        );
        let null_template = of(r#"{"spec":{"template":null,"workloadRef":{"name":"web"}}}"#);
        assert!(matches!(null_template, Unstamped::OtherRef { .. }));
    }

    #[test]
    fn every_warning_fits_and_starts_with_the_prefix() {
        let long = "n".repeat(253);
        for unstamped in [
            Unstamped::Deployment("web".into()),
            Unstamped::Deployment(long.clone()),
            Unstamped::OtherRef {
                kind: Some("StatefulSet".into()),
                name: Some(long),
            },
            Unstamped::OtherRef {
                kind: None,
                name: None,
            },
            Unstamped::Neither,
            Unstamped::Unreadable("invalid type: string \"x\", expected a sequence".into()),
        ] {
            let mut warnings = Warnings::default();
            unstamped.warn(&mut warnings);
            let lines = warnings.into_list(Some(super::super::API_SERVER_WARNING_CHARS));
            assert_eq!(lines.len(), 1);
            assert!(
                lines[0].starts_with(super::super::WARNING_PREFIX),
                "{lines:?}"
            );
            let max = super::super::MAX_WARNING_CHARS;
            assert!(lines[0].chars().count() <= max, "{lines:?}");
        }
    }
}
