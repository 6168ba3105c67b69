//! Who opts in and who is left alone (pure): the one home of the rules the webhook, the rollout
//! controller and `status` all ask. It knows label and annotation maps, not Kubernetes.
//!
//! An object is acted on when its namespace carries the label, or when it opts in itself: with
//! `reload-injector.io/inject: enabled` or with Reloader's annotations ([`reloader`]), which
//! also narrow which ConfigMaps and Secrets count. While Reloader may still run beside us
//! (`serve --reloader-retired` not given), an object Reloader's annotations select is left to
//! Reloader, so that no change rolls it twice.
//!
//! Imports: only `hash`.

pub mod reloader;

use std::collections::BTreeMap;

pub use reloader::{Counts, Selection};

/// On a namespace, `enabled` opts it in; on a workload (its metadata or pod template) or a Pod,
/// `enabled` opts that object in and `"false"` (pod template or Pod) opts it out.
pub const INJECT: &str = "reload-injector.io/inject";
/// The value of [`INJECT`] that opts a namespace or an object in (the webhooks' namespaceSelector
/// and matchConditions match it exactly).
pub const OPT_IN_VALUE: &str = "enabled";
/// `"true"` on a ConfigMap or Secret: its changes never cause a write.
pub const IGNORE: &str = "reload-injector.io/ignore";
/// Written on a workload's pod template: the opt-ins of the workload's own `metadata` ([`INJECT`]
/// and Reloader's workload annotations) as a JSON object, so that its Pods carry them too.
pub const WORKLOAD_OPT_IN: &str = "reload-injector.io/workload-opt-in";
/// The `serve` (and `inject`) flag that says Reloader no longer runs beside us (the chart's
/// `serve.reloaderRetired`).
pub const RETIRED_FLAG: &str = "--reloader-retired";
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

/// Whether the product reads a label or annotation with this key: its own, or Reloader's.
pub fn reads_key(key: &str) -> bool {
    key.starts_with("reload-injector.io/") || reloader::is_key(key)
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

/// Whether a ConfigMap or Secret with these annotations is ignored: ours (`"true"`, any case)
/// or Reloader's `reloader.stakater.com/ignore: "true"`.
pub fn ignored(annotations: Option<&Map>) -> bool {
    let ours = annotations
        .and_then(|a| a.get(IGNORE))
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
    ours || reloader::ignored(annotations)
}

fn is_false(value: Option<&String>) -> bool {
    value.is_some_and(|v| v.trim().eq_ignore_ascii_case("false"))
}

/// The value of [`WORKLOAD_OPT_IN`] for a workload whose own `metadata` has these labels and
/// annotations: its opt-ins as a JSON object (keys sorted), or `None` when it has none.
pub fn workload_opt_in(labels: &Map, annotations: &Map) -> Option<String> {
    let mut opt_ins = Map::new();
    for map in [labels, annotations] {
        if map.get(INJECT).map(String::as_str) == Some(OPT_IN_VALUE) {
            opt_ins.insert(INJECT.to_owned(), OPT_IN_VALUE.to_owned());
        }
    }
    for key in reloader::WORKLOAD_KEYS {
        if let Some(value) = annotations.get(key) {
            opt_ins.insert(key.to_owned(), value.clone());
        }
    }
    (!opt_ins.is_empty()).then(|| serde_json::to_string(&opt_ins).unwrap_or_default())
}

/// The workload's opt-ins carried by a Pod or pod template ([`WORKLOAD_OPT_IN`]); a value that
/// is not a JSON object of strings carries none.
pub fn carried_opt_ins(annotations: &Map) -> Map {
    annotations
        .get(WORKLOAD_OPT_IN)
        .and_then(|v| serde_json::from_str(v).ok())
        .unwrap_or_default()
}

/// Who opted an object in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OptedInBy {
    /// Its namespace carries the label.
    Namespace,
    /// `reload-injector.io/inject: enabled` on the object (or its workload).
    Annotation,
    /// Reloader's annotations on the object (or its workload).
    Reloader,
}

/// Why the product does not act on an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unmanaged {
    /// The pod template or Pod opts out.
    OptedOut(OptOut),
    /// Reloader's annotations select nothing (`auto: "false"` alone, an empty list).
    ReloaderSelectsNothing,
    /// Neither its namespace nor the object opts in.
    NotOptedIn,
}

/// Whether and why the product acts on a Pod or pod template.
#[derive(Debug, Clone)]
pub enum Verdict {
    /// Acted on, exactly as in a labelled namespace, for the objects the selection counts.
    Managed {
        /// Who opted it in (the namespace first).
        by: OptedInBy,
        /// What Reloader's annotations select, when it carries any (else everything counts).
        reloader: Option<Selection>,
    },
    /// Reloader's annotations select something and Reloader may still run: left to it.
    LeftToReloader,
    /// Not acted on.
    Unmanaged(Unmanaged),
}

impl Verdict {
    /// Which objects count (everything, unless Reloader's annotations narrow it).
    pub fn selection(&self) -> Selection {
        match self {
            Verdict::Managed {
                reloader: Some(selection),
                ..
            } => selection.clone(),
            _ => Selection::everything(),
        }
    }

    /// Whether the product acts on it.
    pub fn managed(&self) -> bool {
        matches!(self, Verdict::Managed { .. })
    }
}

/// What a Pod or pod template says about itself, whatever its namespace and however `serve`
/// runs: with the namespace's label and `--reloader-retired`, it gives the [`Verdict`] (small and
/// comparable, so the rollout controller keeps it with each object it may write to).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OptIns {
    /// The pod template or Pod opts out.
    pub opted_out: Option<OptOut>,
    /// `reload-injector.io/inject: enabled` on it, or carried from its workload.
    pub ours: bool,
    /// Reloader's annotations, when it carries any: whether they select something.
    pub reloader: Option<bool>,
}

impl OptIns {
    /// Reads them from a Pod's or pod template's `labels` and `annotations` (a template's
    /// carrying its workload's [`WORKLOAD_OPT_IN`]), with what Reloader's annotations select.
    pub fn read(labels: &Map, annotations: &Map) -> (OptIns, Option<Selection>) {
        let workload = carried_opt_ins(annotations);
        let enabled = |map: &Map| map.get(INJECT).map(String::as_str) == Some(OPT_IN_VALUE);
        let selection = Selection::read(&workload, annotations);
        let opt_ins = OptIns {
            opted_out: opted_out(labels, annotations),
            ours: enabled(labels) || enabled(annotations) || enabled(&workload),
            reloader: selection.as_ref().map(|s| !s.is_nothing()),
        };
        (opt_ins, selection)
    }

    /// Whether the product acts on it, in a namespace that carries the label or not.
    pub fn acted_on(self, namespace_labelled: bool, reloader_retired: bool) -> bool {
        matches!(
            self.verdict(namespace_labelled, reloader_retired, None),
            Verdict::Managed { .. }
        )
    }

    /// The verdict, with what Reloader's annotations select (as [`OptIns::read`] gave it).
    fn verdict(
        self,
        namespace_labelled: bool,
        reloader_retired: bool,
        selection: Option<Selection>,
    ) -> Verdict {
        if let Some(by) = self.opted_out {
            return Verdict::Unmanaged(Unmanaged::OptedOut(by));
        }
        let by = |fallback| match (namespace_labelled, self.ours) {
            (true, _) => OptedInBy::Namespace,
            (false, true) => OptedInBy::Annotation,
            (false, false) => fallback,
        };
        match self.reloader {
            Some(false) => Verdict::Unmanaged(Unmanaged::ReloaderSelectsNothing),
            Some(true) if !reloader_retired => Verdict::LeftToReloader,
            Some(true) => Verdict::Managed {
                by: by(OptedInBy::Reloader),
                reloader: selection,
            },
            None if namespace_labelled || self.ours => Verdict::Managed {
                by: by(OptedInBy::Annotation),
                reloader: None,
            },
            None => Verdict::Unmanaged(Unmanaged::NotOptedIn),
        }
    }
}

/// Decides on a Pod or pod template with these `labels` and `annotations` (a template's carrying
/// its workload's [`WORKLOAD_OPT_IN`]), in a namespace that carries the label or not, with
/// Reloader still possibly running beside us unless `reloader_retired`. The namespace is not
/// [`excluded`] (the caller checks).
pub fn verdict(
    namespace_labelled: bool,
    labels: &Map,
    annotations: &Map,
    reloader_retired: bool,
) -> Verdict {
    let (opt_ins, selection) = OptIns::read(labels, annotations);
    opt_ins.verdict(namespace_labelled, reloader_retired, selection)
}

/// What counts for a pod (template) with these annotations (its own and its workload's carried
/// ones), whoever opted it in: what the webhook and the rollout controller hash over.
pub fn selection_of(annotations: &Map) -> Selection {
    Selection::read(&carried_opt_ins(annotations), annotations)
        .unwrap_or_else(Selection::everything)
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
