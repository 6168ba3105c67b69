//! Who opts in and who is left alone (pure): the one home of the rules the webhook, the rollout
//! controller and `status` all ask. It knows label and annotation maps, not Kubernetes.

use std::collections::BTreeMap;

/// On a namespace, `enabled` opts it in; on a Pod or pod template (label or annotation),
/// `"false"` opts it out.
pub const INJECT: &str = "reload-injector.io/inject";
/// The value of [`INJECT`] that opts a namespace in (the webhooks' namespaceSelector matches it
/// exactly).
pub const OPT_IN_VALUE: &str = "enabled";
/// `"true"` on a ConfigMap or Secret: its changes never cause a write.
pub const IGNORE: &str = "reload-injector.io/ignore";
/// Namespaces that are never acted on, whatever their labels say (plus the webhook's own).
pub const EXCLUDED_NAMESPACES: [&str; 3] = ["kube-system", "kube-public", "kube-node-lease"];

/// Labels or annotations, as Kubernetes objects carry them.
pub type Map = BTreeMap<String, String>;

/// Whether `namespace` is never acted on: a system namespace or the webhook's own.
pub fn excluded(namespace: &str, own_namespace: &str) -> bool {
    EXCLUDED_NAMESPACES.contains(&namespace) || namespace == own_namespace
}

/// Whether a namespace with these labels asks to be acted on (it is, unless [`excluded`]).
pub fn labelled_in(labels: Option<&Map>) -> bool {
    labels.and_then(|l| l.get(INJECT)).map(String::as_str) == Some(OPT_IN_VALUE)
}

/// How a Pod or pod template opts out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OptOut {
    /// By the label `reload-injector.io/inject: "false"` (the API server then skips the call).
    Label,
    /// By the annotation of the same name.
    Annotation,
}

impl OptOut {
    /// `label` or `annotation`, for messages.
    pub fn as_str(self) -> &'static str {
        match self {
            OptOut::Label => "label",
            OptOut::Annotation => "annotation",
        }
    }
}

/// Whether a Pod or pod template with these labels and annotations opts out, and by which
/// (`"false"`, any case, spaces around allowed).
pub fn opted_out(labels: &Map, annotations: &Map) -> Option<OptOut> {
    [(labels, OptOut::Label), (annotations, OptOut::Annotation)]
        .into_iter()
        .find_map(|(map, by)| is_false(map.get(INJECT)).then_some(by))
}

/// Whether a ConfigMap or Secret with these annotations is ignored (`"true"`, any case).
pub fn ignored(annotations: Option<&Map>) -> bool {
    annotations
        .and_then(|a| a.get(IGNORE))
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
}

fn is_false(value: Option<&String>) -> bool {
    value.is_some_and(|v| v.trim().eq_ignore_ascii_case("false"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> Map {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// A map holding `inject: value` alone.
    fn inject(value: &str) -> Map {
        map(&[(INJECT, value)])
    }

    #[test]
    fn namespaces() {
        let own = "reload-injector";
        let cases: [(&str, Option<Map>, bool); 8] = [
            ("shop", Some(inject("enabled")), true),
            ("shop", Some(inject("Enabled")), false),
            ("shop", Some(inject("true")), false),
            ("shop", Some(map(&[])), false),
            ("shop", None, false),
            ("kube-system", Some(inject("enabled")), false),
            ("kube-node-lease", Some(inject("enabled")), false),
            (own, Some(inject("enabled")), false),
        ];
        for (namespace, labels, want) in cases {
            assert_eq!(
                labelled_in(labels.as_ref()) && !excluded(namespace, own),
                want,
                "{namespace} {labels:?}"
            );
        }
        assert!(excluded("kube-public", own) && excluded(own, own) && !excluded("shop", own));
    }

    #[test]
    fn templates_and_objects() {
        let none = map(&[]);
        let cases: [(Map, Map, Option<OptOut>); 6] = [
            (inject("false"), none.clone(), Some(OptOut::Label)),
            (none.clone(), inject(" False "), Some(OptOut::Annotation)),
            (inject("FALSE"), inject("false"), Some(OptOut::Label)),
            (inject("true"), none.clone(), None),
            (none.clone(), inject("no"), None),
            (none.clone(), none.clone(), None),
        ];
        for (labels, annotations, want) in cases {
            assert_eq!(
                opted_out(&labels, &annotations),
                want,
                "{labels:?} {annotations:?}"
            );
        }
        assert!(ignored(Some(&map(&[(IGNORE, " TRUE")]))));
        assert!(!ignored(Some(&map(&[(IGNORE, "yes")]))) && !ignored(None));
    }
}
