//! What a review says and does about who opted an object in: the objects the product leaves
//! alone (taking off what it wrote on a template), and the notes on Reloader's annotations.

use std::collections::BTreeMap;

use json_patch::Patch;
use serde_json::Value;

use super::super::analysis::PodAnalysis;
use super::super::messages::{Warnings, quoted};
use super::super::object;
use super::super::parts::{MapField, Meta};
use super::super::rules::describe;
use super::super::sidecar::SidecarPlan;
use super::super::{CONFIG_HASH, Outcome, Settings};
use super::Target;
use super::decision::mark_managed;
use crate::hash::{ConfigId, ConfigKind};
use crate::policy::reloader::{self, reload_key};
use crate::policy::{
    self, INJECT, OPT_IN_VALUE, RETIRED_FLAG, Unmanaged, Verdict, WORKLOAD_OPT_IN,
};
use crate::workload::strategy::Consequence;

/// Puts the opt-ins of a workload's own `metadata` into its template's `annotations` under
/// [`WORKLOAD_OPT_IN`] (as the webhook will leave them: its Pods carry them), and returns the
/// new value when it differs from the one there.
pub(super) fn carry_opt_ins(
    own: &Meta,
    annotations: &mut BTreeMap<String, String>,
) -> Option<Option<String>> {
    let own_labels = own.string_map(MapField::Labels);
    let stamp = policy::workload_opt_in(&own_labels, &own.string_map(MapField::Annotations));
    let changed = annotations.get(WORKLOAD_OPT_IN) != stamp.as_ref();
    match &stamp {
        Some(value) => annotations.insert(WORKLOAD_OPT_IN.to_owned(), value.clone()),
        None => annotations.remove(WORKLOAD_OPT_IN),
    };
    changed.then_some(stamp)
}

/// The outcome for an object the product does not act on: a template keeps its workload's
/// opt-ins current and loses the hash and label the product put on it; a Pod is left as it is.
pub(super) fn release(settings: &Settings, target: &Target) -> Outcome {
    let mut warnings = Warnings::default();
    let patch = if target.workload.is_template() {
        let original = target.view();
        let mut edited = original.clone();
        if let Some(pod) = edited.pointer_mut(target.workload.pointer()) {
            write_stamp(pod, target);
            if target.annotations.contains_key(CONFIG_HASH) {
                object::remove_entry(pod, "annotations", CONFIG_HASH);
            }
        }
        mark_managed(&mut edited, &target.own, false);
        json_patch::diff(&original, &edited)
    } else {
        Patch(Vec::new())
    };
    match target.verdict {
        Verdict::LeftToReloader => warnings.push(format_args!(
            "left to Reloader, which acts on its annotations; once Reloader is gone: serve {RETIRED_FLAG}"
        )),
        Verdict::Unmanaged(Unmanaged::ReloaderSelectsNothing) => warnings.push(
            "Reloader's annotations on it select no ConfigMap or Secret: left alone",
        ),
        Verdict::Unmanaged(Unmanaged::NotOptedIn) => {
            warnings.notice(format_args!(
                "not managed: neither its namespace nor the object opts in ({INJECT}: {OPT_IN_VALUE})"
            ));
            if !patch.0.is_empty() {
                warnings.push("what reload-injector wrote on it (config hash, labels) is removed");
            }
        }
        Verdict::Unmanaged(Unmanaged::OptedOut(_)) | Verdict::Managed { .. } => {}
    }
    Outcome::Allowed {
        patch,
        warnings: warnings.into_list(settings.warning_chars),
    }
}

/// Notes on Reloader's annotations of a managed object: entries of a `reload` list that select
/// nothing, and the annotations that are not honoured.
pub(super) fn reloader_notes(target: &Target, warnings: &mut Warnings) {
    for (key, name) in target.selection.bad_names() {
        warnings.push(format_args!(
            "{key}: {} is not a valid pattern; it selects nothing",
            quoted(name)
        ));
    }
    let own: BTreeMap<String, String> = target.own.string_map(MapField::Annotations);
    for key in reloader::unhonoured(&own, &target.annotations) {
        warnings.push(format_args!("{key} is not honoured by reload-injector"));
    }
}

/// Writes a template's new [`WORKLOAD_OPT_IN`], when it changed.
pub(super) fn write_stamp(pod: &mut Value, target: &Target) {
    match &target.stamp {
        Some(Some(value)) => object::set_entry(pod, "annotations", WORKLOAD_OPT_IN, value),
        Some(None) => object::remove_entry(pod, "annotations", WORKLOAD_OPT_IN),
        None => {}
    }
}

/// One line per object a `reload` list names that the pod does not read: it counts whole.
pub(super) fn warn_unreferenced(
    objects: &[ConfigId],
    consequence: Consequence,
    settings: &Settings,
    warnings: &mut Warnings,
) {
    let consequence = consequence.when_it_changes();
    for id in objects {
        let (what, key) = (describe(id), reload_key(id.kind));
        if id.kind == ConfigKind::Secret && settings.secret_key.is_none() {
            warnings.push(format_args!(
                "{what}, named by {key}: no secret hash key, so no restart on change"
            ));
        } else {
            warnings.notice(format_args!("{what}, named by {key}: {consequence}"));
        }
    }
}

/// Says once where the product differs from Reloader: what the sidecar of an object opted in by
/// Reloader's annotations hot-reloads is never rolled, where Reloader would roll the pods.
pub(super) fn warn_unlike_reloader(
    verdict: &Verdict,
    plan: Option<&SidecarPlan>,
    analysis: &PodAnalysis<'_>,
    warnings: &mut Warnings,
) {
    let (
        Verdict::Managed {
            reloader: Some(_), ..
        },
        Some(plan),
    ) = (verdict, plan)
    else {
        return;
    };
    let mut objects = plan
        .volumes
        .iter()
        .filter_map(|v| analysis.config_volumes.get(v))
        .flat_map(|v| v.sources.iter().map(|s| &s.id));
    let Some(first) = objects.next() else {
        return;
    };
    let more = objects.count();
    let others = (more > 0).then(|| format!(" (and {more} more)"));
    let others = others.unwrap_or_default();
    warnings.notice(format_args!(
        "unlike Reloader, a change of {}{others} is hot-reloaded, not rolled",
        describe(first)
    ));
}
