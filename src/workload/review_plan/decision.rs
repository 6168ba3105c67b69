//! The decision on a request read into a [`Target`]: deny, or admit with the hash stamped, the
//! sidecar planned and inserted, the labels the controller watches by, and the warnings.

use std::collections::BTreeMap;

use serde_json::Value;

use super::Target;
use super::opt_ins::{
    release, reloader_notes, warn_unlike_reloader, warn_unreferenced, write_stamp,
};
use crate::hash::{self, ConfigData, ConfigId, ConfigKind};
use crate::workload::analysis::PodAnalysis;
use crate::workload::consumption::{self, Consumption};
use crate::workload::in_place::{self, EnvPlan};
use crate::workload::insertion::{PodView, insert_once, mark_sidecar_pod};
use crate::workload::messages::{Warnings, quoted};
use crate::workload::object;
use crate::workload::parts::{MapField, Meta};
use crate::workload::rules::{self, How, Use, describe};
use crate::workload::selected;
use crate::workload::sidecar::{self, SidecarPlan};
use crate::workload::strategy::{self, Consequence};
use crate::workload::{
    CONFIG_HASH, ENV_CHANGE, MANAGED_LABEL, ON_CHANGE, Outcome, PROCESS, RELOAD_URL, SIGNAL,
    Settings,
};

/// Decides on a target, given the lookups of its config.
pub(super) fn target_outcome(
    settings: &Settings,
    target: &Target,
    configs: &ConfigData,
) -> Outcome {
    if !target.verdict.managed() {
        return release(settings, target);
    }
    let analysis = selected::analysed(&target.spec, &target.selection);
    let outcome = rules::apply(&analysis, &target.policy);
    let mut warnings = Warnings::default();
    reloader_notes(target, &mut warnings);
    let on_template = target.workload.is_template();
    let denied = |message: String, warnings: Warnings| Outcome::Denied {
        message,
        warnings: warnings.into_list(settings.warning_chars),
    };
    if !outcome.denied.is_empty() {
        let message = rules::denial_message(&analysis, &outcome.denied, on_template);
        return denied(message, warnings);
    }
    let (choice, bad) = strategy::choose(&target.annotations, &target.spec, &analysis);
    let mut uses = outcome.uses;
    uses.extend(choice.restart_uses(&analysis));
    // Whether a change of a ConfigMap read through env restarts the Pods in place.
    let subject = in_place::Subject {
        template: on_template,
        controlled: target.pod.meta.controlled(),
        job: target.consequence == Consequence::NextJob,
    };
    let (annotations, spec) = (&target.annotations, &target.spec);
    let (env, env_bad) =
        in_place::choose_env_restart(annotations, spec, &analysis, subject, &uses, settings);
    let refused = bad.iter().map(|bad| (bad, SIDECAR_REFUSES));
    for (bad, why) in refused.chain(env_bad.iter().map(|bad| (bad, ""))) {
        // A person is at the terminal: deny, unless an UPDATE keeps the value the workload
        // already had (so that `kubectl rollout restart` of it keeps working).
        if on_template && !kept_from_old(target) {
            let message =
                format!("reload-injector: {bad}{why}; fix the annotation on the pod template.");
            return denied(message, warnings);
        }
        warnings.push(format_args!("{bad}"));
    }
    in_place::warn(&env, &uses, target.consequence, &mut warnings);
    uses.retain(|u| !env.covers(u));
    strategy::warn(&choice, target.consequence, &mut warnings);
    warn_uses(&uses, target.consequence, settings, &mut warnings);
    // The objects a `reload` list names that the pod does not read count whole.
    let unreferenced = selected::unreferenced(&target.selection, &analysis);
    warn_unreferenced(&unreferenced, target.consequence, settings, &mut warnings);
    let mut restart_only = consumption::of_uses(&uses);
    selected::add_unreferenced(&mut restart_only, &unreferenced);
    let report = restart_only.hash(configs, settings.secret_key.as_ref());
    warn_hash(&uses, &report, &mut warnings);
    let plan = sidecar::plan(
        &target.annotations,
        &target.spec,
        &analysis,
        &choice,
        settings.native_sidecars,
        &mut warnings,
    );
    warn_unlike_reloader(&target.verdict, plan.as_ref(), &analysis, &mut warnings);
    let stamp = Stamp {
        restart_only: &restart_only,
        hash: report.hash.as_deref(),
        plan: plan.as_ref(),
        env: &env,
        configs,
    };
    let patch = edit(settings, target, &analysis, &stamp, &mut warnings);
    Outcome::Allowed {
        patch,
        warnings: warnings.into_list(settings.warning_chars),
    }
}

/// What the decision writes into the object.
struct Stamp<'a> {
    /// The restart-only config, hashed.
    restart_only: &'a Consumption,
    /// Its hash, when it could be computed.
    hash: Option<&'a str>,
    /// The sidecar, when one is due.
    plan: Option<&'a SidecarPlan>,
    /// Whether env changes restart the Pods in place.
    env: &'a in_place::Decision,
    configs: &'a ConfigData,
}

/// Why a value of the annotations the sidecar reads is denied, in the denial.
const SIDECAR_REFUSES: &str = ". The config-reloader sidecar would refuse this value";

/// The patch: edits a copy of only what may change, and diffs it against the same unedited view.
fn edit(
    settings: &Settings,
    target: &Target,
    analysis: &PodAnalysis<'_>,
    stamp: &Stamp<'_>,
    warnings: &mut Warnings,
) -> json_patch::Patch {
    let on_template = target.workload.is_template();
    let original = target.view();
    let mut edited = original.clone();
    let Some(pod) = edited.pointer_mut(target.workload.pointer()) else {
        return json_patch::Patch(Vec::new());
    };
    write_stamp(pod, target);
    stamp_hash(
        pod,
        &target.annotations,
        stamp.restart_only.is_empty(),
        stamp.hash,
    );
    let inject_here = !on_template || settings.inject_into_templates;
    let env_plan = EnvPlan::new(stamp.env, &target.spec).filter(|_| inject_here);
    let view = PodView {
        spec: &target.spec,
        annotations: &target.annotations,
        labels: &target.labels,
        template: on_template,
    };
    let parts = (stamp.plan, env_plan.as_ref());
    let inserted = inject_here && insert_once(pod, parts, &view, analysis, settings, warnings);
    let restarts = env_plan.filter(|_| inserted || analysis.has_sidecar);
    let on = (&target.annotations, on_template);
    in_place::stamp(pod, on, stamp.env, restarts.as_ref(), stamp.configs);
    let sidecar = (inserted, stamp.plan.filter(|_| inserted));
    mark_sidecar_pod(pod, &view, analysis, sidecar, stamp.configs, settings);
    if on_template {
        let stamped = crate::workload::string_map(pod, "annotations").contains_key(CONFIG_HASH);
        let hot_reloads = stamp.plan.is_some() || analysis.has_sidecar;
        let managed = stamped || hot_reloads || stamp.env.applies();
        mark_managed(&mut edited, &target.own, managed);
    }
    json_patch::diff(&original, &edited)
}

/// Labels a workload [`MANAGED_LABEL`] when its template reads config the product acts on
/// (`managed`), and unlabels it when not. Labels or a `metadata` that are not objects are left
/// as they are: the workload stays unlabelled rather than have them replaced.
pub(super) fn mark_managed(object: &mut Value, own: &Meta, managed: bool) {
    let current = own.string_map(MapField::Labels);
    let labelled = current.get(MANAGED_LABEL).map(String::as_str);
    if managed && labelled != Some("true") && own.labels_editable() {
        object::set_entry(object, "labels", MANAGED_LABEL, "true");
    } else if !managed && labelled.is_some() {
        object::remove_entry(object, "labels", MANAGED_LABEL);
    }
}

/// One warning per container and object: what happens when it changes.
fn warn_uses(uses: &[Use], consequence: Consequence, settings: &Settings, warnings: &mut Warnings) {
    let consequence = consequence.when_it_changes();
    for u in uses {
        let id = u.consumed.id();
        let (who, verb, via) = match u.how {
            How::Env => ("container", "reads", "via env"),
            How::EnvFrom => ("container", "reads", "via envFrom"),
            How::SubPath => ("container", "mounts", "via subPath (never updated)"),
            How::Mount => ("container", "mounts", "as a directory, no hot reload"),
            How::InitSubPath => ("init container", "reads", "via subPath once, at start"),
            How::InitMount => ("init container", "reads", "as a directory once, at start"),
        };
        let (container, what) = (quoted(&u.container), describe(id));
        if id.kind == ConfigKind::Secret && settings.secret_key.is_none() {
            warnings.push(format_args!(
                "{who} {container} {verb} {what} {via}; no secret hash key, so no restart on change"
            ));
        } else {
            warnings.notice(format_args!(
                "{who} {container} {verb} {what} {via}; {consequence}"
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
    nothing_restart_only: bool,
    hash: Option<&str>,
) {
    let current = annotations.get(CONFIG_HASH).map(String::as_str);
    match hash {
        Some(hash) if current != Some(hash) => {
            object::set_entry(pod, "annotations", CONFIG_HASH, hash)
        }
        None if nothing_restart_only && current.is_some() => {
            object::remove_entry(pod, "annotations", CONFIG_HASH)
        }
        _ => {}
    }
}
