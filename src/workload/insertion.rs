//! Putting the `config-reloader` sidecar into a pod (the edited copy of a review): the
//! container for its hot-reload plan, its restart-in-place plan or both, the volumes they name,
//! and the label and `mounted-config-hash` a Pod with the sidecar carries.

use std::collections::BTreeMap;

use serde_json::Value;

use super::analysis::PodAnalysis;
use super::consumption;
use super::in_place::EnvPlan;
use super::messages::Warnings;
use super::object;
use super::pod::PodSpec;
use super::sidecar::{self, SidecarPlan};
use super::strategy::Told;
use super::{INJECTED, MOUNTED_CONFIG_HASH, SIDECAR_LABEL, Settings};
use crate::hash::ConfigData;

/// The pod (template) under review, as the edits read it.
pub struct PodView<'a> {
    pub spec: &'a PodSpec,
    /// Its `reload-injector.io/` annotations and labels.
    pub annotations: &'a BTreeMap<String, String>,
    pub labels: &'a BTreeMap<String, String>,
    /// A workload's template, not a Pod.
    pub template: bool,
}

/// Inserts the sidecar for its hot-reload plan, its restart-in-place plan or both, unless the
/// pod has one or there is nothing for it to do; says whether it did.
pub fn insert_once(
    pod: &mut Value,
    (plan, env_plan): (Option<&SidecarPlan>, Option<&EnvPlan>),
    view: &PodView<'_>,
    analysis: &PodAnalysis<'_>,
    settings: &Settings,
    warnings: &mut Warnings,
) -> bool {
    if analysis.has_sidecar || (plan.is_none() && env_plan.is_none()) {
        return false;
    }
    let hides_token = match plan {
        Some(plan) => plan.hides_token,
        None => sidecar::token_volume_free(view.spec, analysis, warnings),
    };
    let list = if settings.native_sidecars {
        "initContainers"
    } else {
        "containers"
    };
    let (image, native) = (&settings.sidecar_image, settings.native_sidecars);
    let mut container = sidecar::container(plan, image, native, hides_token);
    if let Some(env_plan) = env_plan {
        env_plan.extend(&mut container);
    }
    object::push_to_spec(pod, list, container);
    if hides_token {
        object::push_to_spec(pod, "volumes", sidecar::no_token_volume());
    }
    for volume in env_plan.map(EnvPlan::volumes).into_iter().flatten() {
        object::push_to_spec(pod, "volumes", volume);
    }
    // Signal mode needs `shareProcessNamespace: true`.
    let signals = plan.is_some_and(|plan| matches!(plan.mode, Told::Signal { .. }));
    if signals && view.spec.share_process_namespace != Some(true) {
        object::share_process_namespace(pod);
    }
    if !view.annotations.contains_key(INJECTED) {
        object::set_entry(pod, "annotations", INJECTED, &settings.version);
    }
    true
}

/// A Pod with the sidecar, or a template `inject` just put it into (`inserted`, with its
/// hot-reload plan if any), carries the label the controller watches by, and a Pod the
/// `mounted-config-hash` of what it watches; a template the webhook reviews keeps its labels.
pub fn mark_sidecar_pod(
    pod: &mut Value,
    view: &PodView<'_>,
    analysis: &PodAnalysis<'_>,
    (inserted, plan): (bool, Option<&SidecarPlan>),
    configs: &ConfigData,
    settings: &Settings,
) {
    if !(inserted || !view.template && analysis.has_sidecar) {
        return;
    }
    if view.labels.get(SIDECAR_LABEL).map(String::as_str) != Some("true") {
        object::set_entry(pod, "labels", SIDECAR_LABEL, "true");
    }
    if view.template {
        return;
    }
    let mounted = match plan {
        Some(plan) => {
            let volumes = plan.volumes.iter().map(String::as_str);
            consumption::of_volumes(volumes, &analysis.config_volumes)
        }
        None => consumption::mounted(view.spec),
    };
    // Written when it can be computed and differs; a failed lookup leaves it as it is (the
    // rollout controller fills it in later).
    let report = mounted.hash(configs, settings.secret_key.as_ref());
    if let Some(hash) = report.hash
        && view.annotations.get(MOUNTED_CONFIG_HASH) != Some(&hash)
    {
        object::set_entry(pod, "annotations", MOUNTED_CONFIG_HASH, &hash);
    }
}
