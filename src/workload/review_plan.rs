//! One review from start to end: [`Plan::new`] reads the request and says which
//! ConfigMaps/Secrets to fetch; [`Plan::outcome`] takes their contents and returns the outcome
//! (see [`decision`]).

mod decision;
mod opt_ins;

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::pod::PodSpec;

use super::analysis::{PodAnalysis, analyse};
use super::consumption::{self, Consumption};
use super::messages::Warnings;
use super::object::Workload;
use super::parts::{self, Entries, MapField, Meta, ObjectParts, PodParts};
use super::rollout::Unstamped;
use super::rules::{self, SubPathPolicy};
use super::selected;
use super::strategy::{self, Consequence};
use super::{ALLOW_SUBPATH, Object, Operation, Outcome, Request, ReviewError, Settings};
use crate::hash::{ConfigData, ConfigId, ConfigKind};
use crate::policy::{self, Selection, Verdict};
use opt_ins::carry_opt_ins;

/// A request read and understood, waiting for its config data.
#[derive(Debug)]
pub struct Plan<'a> {
    settings: &'a Settings,
    subject: Subject<'a>,
}

/// What a plan decides on.
// One per review, on the stack: boxing the target would add an allocation to every review.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
enum Subject<'a> {
    /// Nothing to do: admitted untouched.
    Nothing,
    /// A pod (template) to check, hash and inject.
    Target(Target<'a>),
    /// A Rollout admitted unchanged, and why (the warning it gets).
    Unstamped(Unstamped),
}

/// The pod (template) of a request that will be looked at.
#[derive(Debug)]
struct Target<'a> {
    workload: Workload,
    pod: Cow<'a, PodParts<'a>>,
    annotations: BTreeMap<String, String>,
    labels: BTreeMap<String, String>,
    spec: Cow<'a, PodSpec>,
    policy: SubPathPolicy,
    refs: BTreeSet<ConfigId>,
    /// On a workload UPDATE, the annotations of `oldObject`'s pod template, when readable.
    old_annotations: Option<BTreeMap<String, String>>,
    /// The workload's own `metadata`, as far as it is read and edited (its opt-ins, its labels).
    own: Meta,
    /// What a change of its restart-only config does.
    consequence: Consequence,
    /// Whether and why the product acts on it.
    verdict: Verdict,
    /// What counts of what it reads ([`Verdict::selection`]).
    selection: Selection,
    /// On a template whose `reload-injector.io/workload-opt-in` must change, its new value
    /// (`None`: removed).
    stamp: Option<Option<String>>,
}

impl Target<'_> {
    /// The object's editable view (see [`PodParts::editable`]): the pod at its pointer and, on a
    /// template, the workload's own `metadata`. A patch is the diff of an edited copy of it.
    fn view(&self) -> Value {
        let view = parts::at_pointer(self.pod.editable(&self.spec), self.workload.pointer());
        if self.workload.is_template() {
            parts::with_own_meta(view, &self.own)
        } else {
            view
        }
    }
}

impl<'a> Plan<'a> {
    /// Reads the request. An object of a handled kind that does not parse is an error, except a
    /// Rollout, which is admitted unchanged with a warning; anything else unhandled, untouched.
    pub fn new(req: &Request<'a>, settings: &'a Settings) -> Result<Self, ReviewError> {
        let subject = match read_target(req, settings) {
            // A Rollout the core cannot read is Argo's to judge: admitted, never denied.
            Err(ReviewError::UnreadableObject { source, .. })
                if Workload::classify(req.group, req.kind) == Some(Workload::Rollout) =>
            {
                Subject::Unstamped(Unstamped::Unreadable(source.to_string()))
            }
            other => other?,
        };
        Ok(Self { settings, subject })
    }

    /// The ConfigMaps/Secrets whose contents [`Plan::outcome`] needs (Secrets only with a key).
    pub fn config_refs(&self) -> BTreeSet<ConfigId> {
        match &self.subject {
            Subject::Target(target) => target.refs.clone(),
            Subject::Nothing | Subject::Unstamped(_) => BTreeSet::new(),
        }
    }

    /// Decides, given the lookups of [`Plan::config_refs`].
    pub fn outcome(&self, configs: &ConfigData) -> Outcome {
        match &self.subject {
            Subject::Target(target) => decision::target_outcome(self.settings, target, configs),
            Subject::Unstamped(unstamped) => {
                let mut warnings = Warnings::default();
                unstamped.warn(&mut warnings);
                Outcome::Allowed {
                    patch: json_patch::Patch(Vec::new()),
                    warnings: warnings.into_list(self.settings.warning_chars),
                }
            }
            Subject::Nothing => Outcome::untouched(),
        }
    }
}

/// The pod (template) of `req` to look at, or [`Subject::Nothing`] when the request is none of
/// the product's business: a kind, operation or namespace it does not handle, an opted-out
/// template, or a ReplicaSet or Job a controller made.
fn read_target<'a>(req: &Request<'a>, settings: &Settings) -> Result<Subject<'a>, ReviewError> {
    let Some(workload) = handled(req, settings) else {
        return Ok(Subject::Nothing);
    };
    let object = read_object(req, workload)?;
    // When the request names no namespace, the object's own says where it lives.
    let namespace = object.own.namespace().unwrap_or_default();
    if req.namespace.is_empty() && policy::excluded(&namespace, &settings.own_namespace) {
        return Ok(Subject::Nothing);
    }
    let (controlled, own) = (object.own.controlled(), object.own.clone());
    let pod = match object {
        Cow::Owned(object) => object.pod.map(Cow::Owned),
        Cow::Borrowed(object) => object.pod.as_ref().map(Cow::Borrowed),
    };
    let Some(pod) = pod else {
        return without_pod(req, workload);
    };
    let mut annotations = pod.meta.string_map(MapField::Annotations);
    let labels = pod.meta.string_map(MapField::Labels);
    if policy::opted_out(&labels, &annotations).is_some() {
        return Ok(Subject::Nothing);
    }
    // A ReplicaSet or Job a controller made is left as its owner (already checked) wrote it: a
    // template that differs would make the Deployment controller create ReplicaSets in a loop.
    // Any other workload with a controller (an operator's) is reviewed, and never denied.
    if workload.is_template() && controlled && matches!(req.kind, "ReplicaSet" | "Job") {
        return Ok(Subject::Nothing);
    }
    let stamp = workload
        .is_template()
        .then(|| carry_opt_ins(&own, &mut annotations))
        .flatten();
    let verdict = policy::verdict(
        req.namespace_labelled,
        &labels,
        &annotations,
        settings.reloader_retired,
    );
    if workload == Workload::Rollout
        && let Some(what) = unreadable_metadata(&pod.meta)
    {
        let reason = format!("{what} is not an object");
        return Ok(Subject::Unstamped(Unstamped::Unreadable(reason)));
    }
    let spec = match &pod {
        Cow::Borrowed(pod) => pod.spec(),
        Cow::Owned(pod) => pod.spec().map(|spec| Cow::Owned(spec.into_owned())),
    }
    .map_err(|source| unreadable(req, source))?;
    let old = old_pod(req, workload);
    let policy = subpath_policy(req, workload, controlled, &annotations, old.as_ref());
    let selection = verdict.selection();
    let refs = match verdict {
        Verdict::Managed { .. } => {
            config_refs(workload, &spec, &annotations, &policy, &selection, settings)
        }
        _ => BTreeSet::new(),
    };
    let consequence = Consequence::of(req.kind, workload, controlled, &spec);
    Ok(Subject::Target(Target {
        workload,
        pod,
        annotations,
        labels,
        spec,
        policy,
        refs,
        old_annotations: old.map(|old| old.meta.string_map(MapField::Annotations)),
        own,
        consequence,
        verdict,
        selection,
        stamp,
    }))
}

/// The kind under review, when the product handles it in this operation and namespace.
fn handled(req: &Request<'_>, settings: &Settings) -> Option<Workload> {
    let workload = Workload::classify(req.group, req.kind)?;
    let handled_op = match workload {
        Workload::Pod => req.operation == Operation::Create,
        Workload::Template(_) | Workload::Rollout => {
            matches!(req.operation, Operation::Create | Operation::Update)
        }
    };
    (handled_op && !policy::excluded(req.namespace, &settings.own_namespace)).then_some(workload)
}

fn unreadable(req: &Request<'_>, source: serde_json::Error) -> ReviewError {
    ReviewError::UnreadableObject {
        kind: req.kind.to_owned(),
        source,
    }
}

/// The object as read for its pod (template): read now from the raw JSON, or as the envelope
/// already read it in the same pass.
fn read_object<'a>(
    req: &Request<'a>,
    workload: Workload,
) -> Result<Cow<'a, ObjectParts<'a>>, ReviewError> {
    match req.object {
        Object::Raw(raw) if raw.get() != "null" => Ok(Cow::Owned(
            parts::read(raw, workload.pointer()).map_err(|source| unreadable(req, source))?,
        )),
        Object::Read { pointer, parts } if !parts.is_null => {
            if pointer != workload.pointer() {
                return Err(unreadable(
                    req,
                    serde::de::Error::custom(format!(
                        "it was read for the pod at {pointer:?}, not at {:?}",
                        workload.pointer()
                    )),
                ));
            }
            Ok(Cow::Borrowed(parts))
        }
        _ => Err(ReviewError::MissingObject {
            kind: req.kind.to_owned(),
        }),
    }
}

/// A workload without a pod (template) is an error; a Rollout without one is admitted unchanged
/// (it may run a Deployment's template).
fn without_pod<'a>(req: &Request<'a>, workload: Workload) -> Result<Subject<'a>, ReviewError> {
    match (workload, req.object) {
        (Workload::Rollout, Object::Raw(raw)) => {
            Ok(Subject::Unstamped(Unstamped::without_template(Some(raw))))
        }
        (Workload::Rollout, Object::Read { .. }) => {
            Ok(Subject::Unstamped(Unstamped::without_template(None)))
        }
        _ => Err(unreadable(
            req,
            serde::de::Error::custom(format!(
                "{} is missing or not an object",
                workload.pointer()
            )),
        )),
    }
}

/// The config the decision needs looked up: what is hashed, and a Pod's directory mounts its
/// sidecar will watch. Secrets only with a key to hash them.
fn config_refs(
    workload: Workload,
    spec: &PodSpec,
    annotations: &BTreeMap<String, String>,
    policy: &SubPathPolicy,
    selection: &Selection,
    settings: &Settings,
) -> BTreeSet<ConfigId> {
    let analysis = selected::analysed(spec, selection);
    let unreferenced = selected::unreferenced(selection, &analysis);
    let outcome = rules::apply(&analysis, policy);
    let (choice, _) = strategy::choose(annotations, spec, &analysis);
    let restart = choice.restart_uses(&analysis);
    let watchable = match workload {
        Workload::Pod => watchable_mounts(spec, &analysis),
        Workload::Template(_) | Workload::Rollout => Consumption::default(),
    };
    outcome
        .uses
        .iter()
        .chain(&restart)
        .map(|u| u.consumed.id())
        .chain(watchable.ids())
        .chain(&unreferenced)
        .filter(|id| id.kind == ConfigKind::ConfigMap || settings.secret_key.is_some())
        .cloned()
        .collect()
}

/// On a workload UPDATE, `oldObject`'s pod template, when readable.
fn old_pod<'a>(req: &Request<'a>, workload: Workload) -> Option<PodParts<'a>> {
    match (workload, req.operation, req.old_object) {
        (Workload::Template(_) | Workload::Rollout, Operation::Update, Some(old)) => {
            parts::read(old, workload.pointer()).ok()?.pod
        }
        _ => None,
    }
}

/// The part of a template's `metadata` that is neither an object nor `null`, if one is: stamping
/// would replace it, which a Rollout (whose schema may go unchecked) must not have done to it.
fn unreadable_metadata(meta: &Meta) -> Option<&'static str> {
    let other = |value: &Value| !value.is_null();
    match meta {
        Meta::Other(value) if other(value) => Some("metadata"),
        Meta::Object {
            annotations,
            labels,
            ..
        } => [
            (annotations, "metadata.annotations"),
            (labels, "metadata.labels"),
        ]
        .into_iter()
        .find_map(|(entries, what)| {
            matches!(entries, Entries::Other(value) if other(value)).then_some(what)
        }),
        _ => None,
    }
}

/// Every config volume an app mounts as a directory, and whatever an existing sidecar mounts.
fn watchable_mounts(spec: &PodSpec, analysis: &PodAnalysis<'_>) -> Consumption {
    let dirs = analysis.dir_mounts.iter().map(|m| m.volume.as_str());
    let mut all = consumption::of_volumes(dirs, &analysis.config_volumes);
    let existing = consumption::mounted(spec);
    all.consumed.extend(existing.consumed);
    all.optional.extend(existing.optional);
    all
}

/// Where denial happens: only where a person is at the terminal. An object a controller made
/// (`controlled`) is never denied: nobody reads the message, and it would break the owner's loop.
fn subpath_policy(
    req: &Request,
    workload: Workload,
    controlled: bool,
    annotations: &BTreeMap<String, String>,
    old: Option<&PodParts<'_>>,
) -> SubPathPolicy {
    if annotations
        .get(ALLOW_SUBPATH)
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
        || controlled
    {
        return SubPathPolicy::Allow;
    }
    match (workload, req.operation) {
        (Workload::Pod, _) | (_, Operation::Create) => SubPathPolicy::DenyAll,
        (Workload::Template(_) | Workload::Rollout, _) => {
            match old.and_then(|old| old.spec().ok()) {
                Some(spec) => SubPathPolicy::DenyNew(rules::subpath_keys(&analyse(&spec))),
                // Without a readable oldObject nothing can be shown to be new: never deny.
                None => SubPathPolicy::Allow,
            }
        }
    }
}

#[cfg(test)]
mod tests;
