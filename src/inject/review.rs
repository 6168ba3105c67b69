//! One review from start to end: [`Plan::new`] reads the request and says which
//! ConfigMaps/Secrets to fetch; [`Plan::decide`] takes their contents and returns the outcome.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::pod::PodSpec;

use super::analysis::{PodAnalysis, analyse};
use super::consumption::{self, Consumption};
use super::messages::{Warnings, quoted};
use super::object::{self, Workload};
use super::parts::{self, Entries, MapField, Meta, ObjectParts, PodParts};
use super::rollout::Unstamped;
use super::rules::{self, How, SubPathPolicy, Use, describe};
use super::selected;
use super::sidecar;
use super::strategy;
use super::{
    ALLOW_SUBPATH, CONFIG_HASH, INJECTED, MANAGED_LABEL, MOUNTED_CONFIG_HASH, ON_CHANGE, Object,
    Operation, Outcome, PROCESS, RELOAD_URL, Request, ReviewError, SIDECAR_LABEL, SIGNAL, Settings,
};
use crate::hash::{self, ConfigData, ConfigId, ConfigKind};
use crate::policy::{self, Selection, Verdict, WORKLOAD_OPT_IN};
use opt_ins::{carry_opt_ins, release, reloader_notes, warn_unlike_reloader, warn_unreferenced};

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
    /// The workload's own `metadata`, as far as it is read and edited (its opt-ins, its labels).
    own: Meta,
    /// Whether and why the product acts on it.
    verdict: Verdict,
    /// What counts of what it reads ([`Verdict::selection`]).
    selection: Selection,
    /// On a template whose [`WORKLOAD_OPT_IN`] must change, its new value (`None`: removed).
    stamp: Option<Option<String>>,
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
    let mut annotations = pod.meta.string_map(MapField::Annotations);
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
    let selection = verdict.selection();
    let refs = match verdict {
        Verdict::Managed { .. } => {
            config_refs(workload, &spec, &annotations, &policy, &selection, settings)
        }
        _ => BTreeSet::new(),
    };
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

fn decide(settings: &Settings, target: &Target, configs: &ConfigData) -> Outcome {
    if !target.verdict.managed() {
        return release(settings, target);
    }
    let analysis = selected::analysed(&target.spec, &target.selection);
    let outcome = rules::apply(&analysis, &target.policy);
    let mut warnings = Warnings::default();
    reloader_notes(target, &mut warnings);
    let on_template = target.workload.is_template();
    if !outcome.denied.is_empty() {
        let message = rules::denial_message(&analysis, &outcome.denied, on_template);
        return Outcome::Denied {
            message,
            warnings: warnings.into_list(settings.warning_chars),
        };
    }
    let (choice, bad) = strategy::choose(&target.annotations, &target.spec, &analysis);
    if let Some(denied) = bad.and_then(|bad| bad_value(settings, target, &bad, &mut warnings)) {
        return denied;
    }
    let rolls = on_template || target.pod.meta.controlled();
    let mut uses = outcome.uses;
    uses.extend(choice.restart_uses(&analysis));
    strategy::warn(&choice, rolls, &mut warnings);
    let (restart_only, report) = hashed(target, &analysis, &uses, settings, configs, &mut warnings);
    let plan = sidecar::plan(
        &target.annotations,
        &target.spec,
        &analysis,
        &choice,
        settings.native_sidecars,
        &mut warnings,
    );
    warn_unlike_reloader(&target.verdict, plan.as_ref(), &analysis, &mut warnings);

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
    write_stamp(pod, target);
    stamp_hash(
        pod,
        &target.annotations,
        restart_only.is_empty(),
        report.hash.as_deref(),
    );
    let inject_here = !on_template || settings.inject_into_templates;
    let inserted = match (&plan, inject_here, analysis.has_sidecar) {
        (Some(plan), true, false) => {
            insert_sidecar(pod, plan, &target.spec, &target.annotations, settings);
            Some(plan)
        }
        _ => None,
    };
    label_sidecar_pod(pod, target, inserted, &analysis, configs, settings);
    if on_template {
        let stamped = super::string_map(pod, "annotations").contains_key(CONFIG_HASH);
        let hot_reloads = plan.is_some() || analysis.has_sidecar;
        mark_managed(&mut edited, &target.own, stamped || hot_reloads);
    }
    let patch = json_patch::diff(&original, &edited);
    Outcome::Allowed {
        patch,
        warnings: warnings.into_list(settings.warning_chars),
    }
}

/// The restart-only consumption (with the objects a `reload` list names but the pod does not
/// read) and its hash, with the warnings about them.
fn hashed(
    target: &Target,
    analysis: &PodAnalysis<'_>,
    uses: &[Use],
    settings: &Settings,
    configs: &ConfigData,
    warnings: &mut Warnings,
) -> (Consumption, hash::HashReport) {
    let rolls = target.workload.is_template() || target.pod.meta.controlled();
    warn_uses(uses, rolls, settings, warnings);
    let unreferenced = selected::unreferenced(&target.selection, analysis);
    warn_unreferenced(&unreferenced, rolls, settings, warnings);
    let mut restart_only = consumption::of_uses(uses);
    selected::add_unreferenced(&mut restart_only, &unreferenced);
    let report = restart_only.hash(configs, settings.secret_key.as_ref());
    warn_hash(uses, &report, warnings);
    (restart_only, report)
}

/// A template the webhook reviews stays as written apart from the hash; a Pod (or a template
/// the offline `inject` puts the sidecar into) carries the label the controller watches by,
/// and a Pod the hash of what its sidecar watches.
fn label_sidecar_pod(
    pod: &mut Value,
    target: &Target,
    inserted: Option<&sidecar::SidecarPlan>,
    analysis: &PodAnalysis<'_>,
    configs: &ConfigData,
    settings: &Settings,
) {
    let on_template = target.workload.is_template();
    let labels_here = !on_template || inserted.is_some();
    if !labels_here || (inserted.is_none() && !analysis.has_sidecar) {
        return;
    }
    if target.labels.get(SIDECAR_LABEL).map(String::as_str) != Some("true") {
        object::set_label(pod, SIDECAR_LABEL, "true");
    }
    if !on_template {
        let mounted = match inserted {
            Some(plan) => {
                let volumes = plan.volumes.iter().map(String::as_str);
                consumption::of_volumes(volumes, &analysis.config_volumes)
            }
            None => consumption::mounted(&target.spec),
        };
        stamp_mounted_hash(pod, &target.annotations, &mounted, configs, settings);
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

/// Writes the `mounted-config-hash` of a Pod's sidecar volumes when it can be computed and
/// differs; a failed lookup leaves it as it is (the rollout controller fills it in later).
fn stamp_mounted_hash(
    pod: &mut Value,
    annotations: &BTreeMap<String, String>,
    mounted: &Consumption,
    configs: &ConfigData,
    settings: &Settings,
) {
    let report = mounted.hash(configs, settings.secret_key.as_ref());
    if let Some(hash) = report.hash
        && annotations.get(MOUNTED_CONFIG_HASH) != Some(&hash)
    {
        object::set_annotation(pod, MOUNTED_CONFIG_HASH, &hash);
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

/// A value the sidecar would refuse: a person is at the terminal, so a template is denied, unless
/// an UPDATE keeps the value the workload already had (so that `kubectl rollout restart` of it
/// keeps working); otherwise it is a warning.
fn bad_value(
    settings: &Settings,
    target: &Target,
    bad: &impl std::fmt::Display,
    warnings: &mut Warnings,
) -> Option<Outcome> {
    if target.workload.is_template() && !kept_from_old(target) {
        return Some(Outcome::Denied {
            message: format!(
                "reload-injector: {bad}. The config-reloader sidecar would refuse this value; fix the \
                 annotation on the pod template."
            ),
            warnings: std::mem::take(warnings).into_list(settings.warning_chars),
        });
    }
    warnings.push(format_args!("{bad}"));
    None
}

/// Whether an UPDATE keeps the choosing annotations of `oldObject` as they were.
fn kept_from_old(target: &Target) -> bool {
    let Some(old) = &target.old_annotations else {
        return false;
    };
    [ON_CHANGE, RELOAD_URL, SIGNAL, PROCESS]
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
    nothing_restart_only: bool,
    hash: Option<&str>,
) {
    let current = annotations.get(CONFIG_HASH).map(String::as_str);
    match hash {
        Some(hash) if current != Some(hash) => object::set_annotation(pod, CONFIG_HASH, hash),
        None if nothing_restart_only && current.is_some() => {
            object::remove_annotation(pod, CONFIG_HASH)
        }
        _ => {}
    }
}

/// Writes a template's new [`WORKLOAD_OPT_IN`], when it changed.
fn write_stamp(pod: &mut Value, target: &Target) {
    match &target.stamp {
        Some(Some(value)) => object::set_annotation(pod, WORKLOAD_OPT_IN, value),
        Some(None) => object::remove_annotation(pod, WORKLOAD_OPT_IN),
        None => {}
    }
}

fn insert_sidecar(
    pod: &mut Value,
    plan: &sidecar::SidecarPlan,
    spec: &PodSpec,
    annotations: &BTreeMap<String, String>,
    settings: &Settings,
) {
    let list = if settings.native_sidecars {
        "initContainers"
    } else {
        "containers"
    };
    let container = plan.container(&settings.sidecar_image, settings.native_sidecars);
    object::push_to_spec(pod, list, container);
    if plan.hides_token {
        object::push_to_spec(pod, "volumes", sidecar::no_token_volume());
    }
    if plan.needs_shared_pid() && spec.share_process_namespace != Some(true) {
        object::share_process_namespace(pod);
    }
    if !annotations.contains_key(INJECTED) {
        object::set_annotation(pod, INJECTED, &settings.version);
    }
}

mod opt_ins;
#[cfg(test)]
mod tests;
