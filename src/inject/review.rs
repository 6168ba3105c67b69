//! One review from start to end: [`Plan::new`] reads the request and says which
//! ConfigMaps/Secrets to fetch; [`Plan::decide`] takes their contents and returns the outcome.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::pod::PodSpec;

use super::analysis::{PodAnalysis, analyse};
use super::consumption::{self, Consumption};
use super::in_place::{self, EnvPlan};
use super::insertion::{PodView, insert_once, mark_sidecar_pod};
use super::messages::{Warnings, quoted};
use super::object::{self, Workload};
use super::parts::{self, Entries, MapField, Meta, ObjectParts, PodParts};
use super::rollout::Unstamped;
use super::rules::{self, How, SubPathPolicy, Use, describe};
use super::sidecar;
use super::strategy;
use super::{
    ALLOW_SUBPATH, CONFIG_HASH, ENV_CHANGE, MANAGED_LABEL, ON_CHANGE, Object, Operation, Outcome,
    PROCESS, RELOAD_URL, Request, ReviewError, SIGNAL, Settings,
};
use crate::hash::{self, ConfigData, ConfigId, ConfigKind};
use crate::kinds::Kind;
use crate::policy;

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

/// Why a request gives no pod (template) to look at, other than having nothing to do.
#[derive(Debug)]
enum NoTarget {
    /// An object the core cannot understand.
    Review(ReviewError),
    /// A Rollout admitted unchanged, with a warning.
    Unstamped(Unstamped),
}

impl From<ReviewError> for NoTarget {
    fn from(err: ReviewError) -> Self {
        NoTarget::Review(err)
    }
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
    /// The workload's own `metadata`, as far as it is edited (its labels).
    own: Meta,
    /// A Job's or CronJob's template (never restarted in place).
    job: bool,
}

impl Target<'_> {
    /// The pod (template) as the edits read it.
    fn view(&self) -> PodView<'_> {
        PodView {
            spec: &self.spec,
            annotations: &self.annotations,
            labels: &self.labels,
            template: self.workload.is_template(),
        }
    }
}

impl<'a> Plan<'a> {
    /// Reads the request. Objects the product does not handle give a plan that admits them
    /// untouched; an object of a handled kind that does not parse is an error, except a
    /// Rollout, which is admitted unchanged with a warning (as one without a template is).
    pub fn new(req: &Request<'a>, settings: &'a Settings) -> Result<Self, ReviewError> {
        let subject = match read_target(req, settings) {
            Ok(Some(target)) => Subject::Target(target),
            Ok(None) => Subject::Nothing,
            Err(NoTarget::Unstamped(unstamped)) => Subject::Unstamped(unstamped),
            // A Rollout the core cannot read is Argo's to judge: admitted, never denied.
            Err(NoTarget::Review(ReviewError::UnreadableObject { source, .. }))
                if Workload::classify(req.group, req.kind) == Some(Workload::Rollout) =>
            {
                Subject::Unstamped(Unstamped::Unreadable(source.to_string()))
            }
            Err(NoTarget::Review(err)) => return Err(err),
        };
        Ok(Self { settings, subject })
    }

    /// The ConfigMaps/Secrets whose contents [`Plan::decide`] needs (Secrets only with a key).
    pub fn config_refs(&self) -> BTreeSet<ConfigId> {
        match &self.subject {
            Subject::Target(target) => target.refs.clone(),
            Subject::Nothing | Subject::Unstamped(_) => BTreeSet::new(),
        }
    }

    /// Decides, given the lookups of [`Plan::config_refs`].
    pub fn decide(&self, configs: &ConfigData) -> Outcome {
        match &self.subject {
            Subject::Target(target) => decide(self.settings, target, configs),
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

/// The pod (template) of `req` to look at, or `None` when the request is none of the product's
/// business: a kind, operation or namespace it does not handle, an opted-out template, or a
/// workload a controller made.
fn read_target<'a>(req: &Request<'a>, settings: &Settings) -> Result<Option<Target<'a>>, NoTarget> {
    let Some(workload) = handled(req, settings) else {
        return Ok(None);
    };
    let object = read_object(req, workload)?;
    // When the request names no namespace, the object's own says where it lives.
    let namespace = object.namespace.as_deref().unwrap_or("");
    if req.namespace.is_empty() && policy::excluded(namespace, &settings.own_namespace) {
        return Ok(None);
    }
    let (controlled, own) = (object.controlled, object.own.clone());
    let pod = pod_of(req, workload, object)?;
    let annotations = pod.meta.string_map(MapField::Annotations);
    let labels = pod.meta.string_map(MapField::Labels);
    if policy::opted_out(&labels, &annotations).is_some() {
        return Ok(None);
    }
    // A workload made by a controller (a Deployment's ReplicaSet, a CronJob's Job) is left as
    // its owner wrote it: the owner was already checked and hashed, and a template that differs
    // from the owner's would make the Deployment controller create ReplicaSets in a loop.
    if workload.is_template() && controlled {
        return Ok(None);
    }
    if workload == Workload::Rollout
        && let Some(what) = unreadable_metadata(&pod.meta)
    {
        return Err(NoTarget::Unstamped(Unstamped::Unreadable(format!(
            "{what} is not an object"
        ))));
    }
    let spec = match &pod {
        Cow::Borrowed(pod) => pod.spec(),
        Cow::Owned(pod) => pod.spec().map(|spec| Cow::Owned(spec.into_owned())),
    }
    .map_err(|source| unreadable(req, source))?;
    let policy = subpath_policy(req, workload, &pod, &annotations);
    let refs = config_refs(workload, &spec, &annotations, &policy, settings);
    Ok(Some(Target {
        workload,
        pod,
        annotations,
        labels,
        spec,
        policy,
        refs,
        old_annotations: old_template_annotations(req, workload),
        own,
        job: matches!(
            Kind::of(req.group, req.kind),
            Some(Kind::Job | Kind::CronJob)
        ),
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
) -> Result<Cow<'a, ObjectParts<'a>>, NoTarget> {
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
                )
                .into());
            }
            Ok(Cow::Borrowed(parts))
        }
        _ => Err(ReviewError::MissingObject {
            kind: req.kind.to_owned(),
        }
        .into()),
    }
}

/// The pod (template) of `object`; a workload without one is an error, a Rollout without one
/// is admitted unchanged (it may run a Deployment's template).
fn pod_of<'a>(
    req: &Request<'a>,
    workload: Workload,
    object: Cow<'a, ObjectParts<'a>>,
) -> Result<Cow<'a, PodParts<'a>>, NoTarget> {
    let pod = match object {
        Cow::Owned(object) => object.pod.map(Cow::Owned),
        Cow::Borrowed(object) => object.pod.as_ref().map(Cow::Borrowed),
    };
    pod.ok_or_else(|| match (workload, req.object) {
        (Workload::Rollout, Object::Raw(raw)) => {
            NoTarget::Unstamped(Unstamped::without_template(Some(raw)))
        }
        (Workload::Rollout, Object::Read { .. }) => {
            NoTarget::Unstamped(Unstamped::without_template(None))
        }
        _ => unreadable(
            req,
            serde::de::Error::custom(format!(
                "{} is missing or not an object",
                workload.pointer()
            )),
        )
        .into(),
    })
}

/// What the config a pod (template) reads that the decision needs looked up: what is hashed,
/// and, for a Pod, the directory mounts its sidecar will watch (their contents give its
/// `mounted-config-hash`). Secrets only with a key to hash them.
fn config_refs(
    workload: Workload,
    spec: &PodSpec,
    annotations: &BTreeMap<String, String>,
    policy: &SubPathPolicy,
    settings: &Settings,
) -> BTreeSet<ConfigId> {
    let analysis = analyse(spec);
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
        .filter(|id| id.kind == ConfigKind::ConfigMap || settings.secret_key.is_some())
        .cloned()
        .collect()
}

/// On a workload UPDATE, the annotations of `oldObject`'s pod template, when readable.
fn old_template_annotations(
    req: &Request<'_>,
    workload: Workload,
) -> Option<BTreeMap<String, String>> {
    match (workload, req.operation, req.old_object) {
        (Workload::Template(_) | Workload::Rollout, Operation::Update, Some(old)) => {
            parts::read(old, workload.pointer())
                .ok()
                .and_then(|old| old.pod)
                .map(|old| old.meta.string_map(MapField::Annotations))
        }
        _ => None,
    }
}

/// The part of a template's `metadata` that is neither an object nor `null`, if one is: the core
/// would replace it to stamp the hash, which a Rollout (whose schema the API server may not
/// check) must not have done to it.
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

/// Where denial happens: only where a person is at the terminal and nothing running can break.
fn subpath_policy(
    req: &Request,
    workload: Workload,
    pod: &PodParts,
    annotations: &BTreeMap<String, String>,
) -> SubPathPolicy {
    if annotations
        .get(ALLOW_SUBPATH)
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
    {
        return SubPathPolicy::Allow;
    }
    match (workload, req.operation) {
        (Workload::Pod, _) if pod.meta.controlled() => SubPathPolicy::Allow,
        (Workload::Pod, _) | (_, Operation::Create) => SubPathPolicy::DenyAll,
        (Workload::Template(_) | Workload::Rollout, _) => {
            let old_keys = req
                .old_object
                .and_then(|old| parts::read(old, workload.pointer()).ok()?.pod)
                .and_then(|old_pod| {
                    let spec = old_pod.spec().ok()?;
                    Some(rules::subpath_keys(&analyse(&spec)))
                });
            match old_keys {
                Some(keys) => SubPathPolicy::DenyNew(keys),
                // Without a readable oldObject nothing can be shown to be new: never deny.
                None => SubPathPolicy::Allow,
            }
        }
    }
}

/// What the rules, the reload strategy and restart in place make of a pod (template): the
/// strategy's choice, the restart-only config, and whether env changes restart in place; or the
/// denial. A bad annotation value is a warning where it is not denied.
fn choose(
    settings: &Settings,
    target: &Target,
    analysis: &PodAnalysis<'_>,
    warnings: &mut Warnings,
) -> Result<(strategy::Choice, Vec<Use>, in_place::Decision), String> {
    let outcome = rules::apply(analysis, &target.policy);
    let on_template = target.workload.is_template();
    if !outcome.denied.is_empty() {
        return Err(rules::denial_message(
            analysis,
            &outcome.denied,
            on_template,
        ));
    }
    let (choice, bad) = strategy::choose(&target.annotations, &target.spec, analysis);
    let mut uses = outcome.uses;
    uses.extend(choice.restart_uses(analysis));
    let subject = in_place::Subject {
        template: on_template,
        controlled: target.pod.meta.controlled(),
        job: target.job,
    };
    let annotations = &target.annotations;
    let (env, env_bad) = in_place::decide(
        annotations,
        &target.spec,
        analysis,
        subject,
        &uses,
        settings,
    );
    let refused = bad.iter().map(|bad| (bad, SIDECAR_REFUSES));
    for (bad, why) in refused.chain(env_bad.iter().map(|bad| (bad, ""))) {
        // A person is at the terminal: deny, unless an UPDATE keeps the value the workload
        // already had (so that `kubectl rollout restart` of it keeps working).
        if on_template && !kept_from_old(target) {
            return Err(format!(
                "reload-injector: {bad}{why}; fix the annotation on the pod template."
            ));
        }
        warnings.push(format_args!("{bad}"));
    }
    Ok((choice, uses, env))
}

/// Why a value of the annotations the sidecar reads is denied, in the denial.
const SIDECAR_REFUSES: &str = ". The config-reloader sidecar would refuse this value";

fn decide(settings: &Settings, target: &Target, configs: &ConfigData) -> Outcome {
    let analysis = analyse(&target.spec);
    let mut warnings = Warnings::default();
    let on_template = target.workload.is_template();
    let (choice, mut uses, env) = match choose(settings, target, &analysis, &mut warnings) {
        Ok(chosen) => chosen,
        Err(message) => {
            return Outcome::Denied {
                message,
                warnings: warnings.into_list(settings.warning_chars),
            };
        }
    };
    let rolls = on_template || target.pod.meta.controlled();
    in_place::warn(&env, &uses, on_template, &mut warnings);
    uses.retain(|u| !env.covers(u));
    strategy::warn(&choice, rolls, &mut warnings);
    warn_uses(&uses, rolls, settings, &mut warnings);
    let report = consumption::of_uses(&uses).hash(configs, settings.secret_key.as_ref());
    warn_hash(&uses, &report, &mut warnings);
    let plan = sidecar::plan(
        &target.annotations,
        &target.spec,
        &analysis,
        &choice,
        settings.native_sidecars,
        &mut warnings,
    );

    // Edit a copy of only what may change, and diff it against the same unedited view.
    let pointer = target.workload.pointer();
    let mut original = parts::at_pointer(target.pod.editable(&target.spec), pointer);
    if on_template {
        original = parts::with_own_meta(original, &target.own);
    }
    let mut edited = original.clone();
    let Some(pod) = edited.pointer_mut(pointer) else {
        return Outcome::untouched();
    };
    stamp_hash(pod, &target.annotations, &uses, report.hash.as_deref());
    let inject_here = !on_template || settings.inject_into_templates;
    let env_plan = EnvPlan::new(&env, &target.spec).filter(|_| inject_here);
    let view = target.view();
    let parts = (plan.as_ref(), env_plan.as_ref());
    let inserted =
        inject_here && insert_once(pod, parts, &view, &analysis, settings, &mut warnings);
    let restarts = env_plan.filter(|_| inserted || analysis.has_sidecar);
    in_place::stamp(
        pod,
        (&target.annotations, on_template),
        &env,
        restarts.as_ref(),
        configs,
    );
    let sidecar = (inserted, plan.as_ref().filter(|_| inserted));
    mark_sidecar_pod(pod, &view, &analysis, sidecar, configs, settings);
    if on_template {
        let stamped = super::string_map(pod, "annotations").contains_key(CONFIG_HASH);
        let hot_reloads = plan.is_some() || analysis.has_sidecar;
        let managed = stamped || hot_reloads || env.applies();
        mark_managed(&mut edited, &target.own, managed);
    }
    let patch = json_patch::diff(&original, &edited);
    Outcome::Allowed {
        patch,
        warnings: warnings.into_list(settings.warning_chars),
    }
}

/// Labels a workload [`MANAGED_LABEL`] when its template reads config the product acts on
/// (`managed`), and unlabels it when not. Labels or a `metadata` that are not objects are left
/// as they are: the workload stays unlabelled rather than have them replaced.
fn mark_managed(object: &mut Value, own: &Meta, managed: bool) {
    let current = own.string_map(MapField::Labels);
    let labelled = current.get(MANAGED_LABEL).map(String::as_str);
    if managed && labelled != Some("true") && own.labels_editable() {
        object::set_label(object, MANAGED_LABEL, "true");
    } else if !managed && labelled.is_some() {
        object::remove_label(object, MANAGED_LABEL);
    }
}

/// One warning per container and object: what happens when it changes.
fn warn_uses(uses: &[Use], rolls: bool, settings: &Settings, warnings: &mut Warnings) {
    let consequence = if rolls {
        "pods roll when it changes"
    } else {
        "a change needs a new pod"
    };
    for u in uses {
        let id = u.consumed.id();
        let (verb, via) = match u.how {
            How::InitSubPath => continue,
            How::Env => ("reads", "via env"),
            How::EnvFrom => ("reads", "via envFrom"),
            How::SubPath => ("mounts", "via subPath (never updated)"),
            How::Mount => ("mounts", "as a directory, no hot reload"),
        };
        let (container, what) = (quoted(&u.container), describe(id));
        if id.kind == ConfigKind::Secret && settings.secret_key.is_none() {
            warnings.push(format_args!(
                "container {container} {verb} {what} {via}; no secret hash key, so no restart on change"
            ));
        } else {
            warnings.notice(format_args!(
                "container {container} {verb} {what} {via}; {consequence}"
            ));
        }
    }
}

/// Whether an UPDATE keeps the choosing annotations of `oldObject` as they were.
fn kept_from_old(target: &Target) -> bool {
    let Some(old) = &target.old_annotations else {
        return false;
    };
    [ON_CHANGE, RELOAD_URL, SIGNAL, PROCESS, ENV_CHANGE]
        .iter()
        .all(|key| old.get(*key) == target.annotations.get(*key))
}

fn warn_hash(uses: &[Use], report: &hash::HashReport, warnings: &mut Warnings) {
    if report.missing.is_empty() && report.failed.is_empty() {
        return;
    }
    // The first container that uses each config, found once: a Pod may have 20,000 of them.
    let mut first_user: BTreeMap<&ConfigId, &str> = BTreeMap::new();
    for u in uses {
        first_user
            .entry(u.consumed.id())
            .or_insert(u.container.as_str());
    }
    let container_of = |id: &ConfigId| quoted(first_user.get(id).copied().unwrap_or_default());
    for id in &report.missing {
        warnings.push(format_args!(
            "container {} needs {}, which does not exist: the pod cannot start until it does",
            container_of(id),
            describe(id)
        ));
    }
    for (id, reason) in &report.failed {
        warnings.push(format_args!(
            "container {}: could not read {} ({reason}); hash unchanged",
            container_of(id),
            describe(id)
        ));
    }
}

/// Writes the hash, removes a stale one when nothing restart-only is left, and leaves the
/// annotation alone when the hash could not be computed.
fn stamp_hash(
    pod: &mut Value,
    annotations: &BTreeMap<String, String>,
    uses: &[Use],
    hash: Option<&str>,
) {
    let current = annotations.get(CONFIG_HASH).map(String::as_str);
    match hash {
        Some(hash) if current != Some(hash) => object::set_annotation(pod, CONFIG_HASH, hash),
        None if uses.is_empty() && current.is_some() => object::remove_annotation(pod, CONFIG_HASH),
        _ => {}
    }
}

#[cfg(test)]
mod tests;
