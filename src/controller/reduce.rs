//! Reduces watched objects to the little the controller keeps (pure): a stamped workload's hash
//! and what its template reads restart-only; a sidecar Pod's mounted hash and what its sidecar
//! watches (and for a restart in place, its env hash, reads and restart counts); for both, what
//! they say about opting in.

use std::collections::{BTreeMap, BTreeSet};

use crate::workload::pod::PodSpec;
use serde::Deserialize;
use serde_json::Value;

use super::restart_waves::Restarts;
use super::waves;
use super::write_target::{Target, TargetKind};
use crate::hash::{ConfigData, ConfigId, Consumed, HashReport, SecretKey};
use crate::policy::{Counts, OptIns, Selection};
use crate::workload::consumption::{self, Consumption};
use crate::workload::in_place;
use crate::workload::{CONFIG_HASH, SIDECAR_NAME, string_map};

/// An object the controller may write to, reduced.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Consumer {
    pub uid: String,
    /// Its kind's hash annotation, as it is now.
    pub hash: Option<String>,
    /// What the hash is over.
    pub consumption: Reads,
    /// What a workload's hash was over before the directory mounts of containers whose
    /// strategy is restart counted in it, when that differs. A stamped hash equal to the hash of
    /// these reads was stamped by an earlier version over config that has not changed since: it
    /// is left alone until the config changes, so upgrading starts no rollout.
    pub earlier: Option<Reads>,
    /// A Pod's owning workload, whose waves its refresh goes in (`None`: refreshed at once).
    pub owner: Option<Target>,
    pub ready: Option<bool>,
    pub opt_ins: OptIns,
    /// What it reads that counts only while it carries Reloader's `match` (its `search`).
    pub if_matched: Box<[ConfigId]>,
    /// A Pod that restarts in place: its containers' restart counts.
    pub restarts: Option<Restarts>,
    /// A Pod's value a stopped run held back: not written while the config stays as it is.
    pub held_back: Option<Box<str>>,
}

/// A [`Consumption`]'s two sets as boxed slices (a `BTreeSet`'s first node takes about 630 bytes:
/// 13 MB over the 20,000 Pods of the scale bench).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reads {
    consumed: Box<[Consumed]>,
    optional: Box<[ConfigId]>,
}

impl From<Consumption> for Reads {
    fn from(consumption: Consumption) -> Self {
        Self {
            consumed: consumption.consumed.into_iter().collect(),
            optional: consumption.optional.into_iter().collect(),
        }
    }
}

impl Reads {
    pub fn consumed(&self) -> &[Consumed] {
        &self.consumed
    }

    pub fn ids(&self) -> BTreeSet<&ConfigId> {
        self.consumed.iter().map(Consumed::id).collect()
    }

    pub fn to_consumption(&self) -> Consumption {
        Consumption {
            consumed: self.consumed.iter().cloned().collect(),
            optional: self.optional.iter().cloned().collect(),
        }
    }

    /// The hash the webhook computes for the same reads over `data` (its own function).
    pub fn hash(&self, data: &ConfigData, key: Option<&SecretKey>) -> HashReport {
        self.to_consumption().hash(data, key)
    }
}

/// An object whose pod (template) cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum ReduceError {
    #[error("failed to find the pod template at {0}")]
    NoTemplate(&'static str),
    #[error("failed to read the pod spec: {0}")]
    BadSpec(#[source] serde_json::Error),
}

/// A workload as the controller keeps it, or `None` when it must never be written to: no stamped
/// hash (never adopted), opted out (or Reloader's annotations selecting nothing), or a Rollout
/// without a template of its own. `object` is the whole object (`spec` inside).
pub fn workload(
    kind: TargetKind,
    uid: &str,
    object: &Value,
) -> Result<Option<Consumer>, ReduceError> {
    let pointer = kind.pod_pointer();
    let template = object.pointer(pointer).filter(|t| t.is_object());
    let template = match (template, kind) {
        (Some(template), _) => template,
        // A Rollout may run a Deployment's template (`workloadRef`): that Deployment is the
        // workload stamped, and the Rollout is never written to.
        (None, TargetKind::Rollout) => return Ok(None),
        (None, _) => return Err(ReduceError::NoTemplate(pointer)),
    };
    let annotations = string_map(template, "annotations");
    let labels = string_map(template, "labels");
    let (opt_ins, selection) = OptIns::read(&labels, &annotations);
    let never = opt_ins.opted_out.is_some() || opt_ins.reloader == Some(false);
    let Some(hash) = annotations.get(CONFIG_HASH).filter(|_| !never) else {
        return Ok(None);
    };
    let spec = pod_spec(template)?;
    let now = consumption::restart_only(&spec, &annotations);
    let before = consumption::restart_only_earlier(&spec, &annotations);
    Ok(Some(Consumer {
        uid: uid.to_owned(),
        hash: Some(hash.clone()),
        earlier: (before != now).then(|| before.into()),
        if_matched: if_matched(&now, selection.as_ref()),
        consumption: now.into(),
        opt_ins,
        ..Consumer::default()
    }))
}

/// A Pod carrying the sidecar: its `mounted-config-hash` (if stamped), what the sidecar watches,
/// its owning workload and its readiness (`object` holds its `spec` and `status`).
pub fn pod(
    uid: &str,
    meta: (&BTreeMap<String, String>, &BTreeMap<String, String>),
    object: &Value,
    owner: Option<Target>,
) -> Result<Consumer, ReduceError> {
    let mounted = consumption::mounted(&pod_spec(object)?);
    Ok(pod_consumer(
        TargetKind::Pod,
        uid,
        meta,
        object,
        owner,
        mounted,
    ))
}

/// A sidecar Pod as its env hash, when its sidecar restarts it in place (`None` otherwise): its
/// `env-hash` (if stamped), the ConfigMap keys and objects its sidecar restarts it for (what the
/// env hash is over, as the sidecar's own arguments say), its owning workload, its readiness and
/// its containers' restart counts.
pub fn pod_env(
    uid: &str,
    meta: (&BTreeMap<String, String>, &BTreeMap<String, String>),
    object: &Value,
    owner: Option<Target>,
) -> Option<Consumer> {
    let spec = pod_spec(object).ok()?;
    let reads = in_place::existing_sidecar(&spec).and_then(in_place::sidecar_reads)?;
    let consumption = Consumption {
        consumed: reads,
        optional: Default::default(),
    };
    Some(pod_consumer(
        TargetKind::PodEnv,
        uid,
        meta,
        object,
        owner,
        consumption,
    ))
}

/// A Pod as the target of `kind` (its mounted config, or its env), reading `consumption`.
fn pod_consumer(
    kind: TargetKind,
    uid: &str,
    (labels, annotations): (&BTreeMap<String, String>, &BTreeMap<String, String>),
    object: &Value,
    owner: Option<Target>,
    consumption: Consumption,
) -> Consumer {
    let (opt_ins, selection) = OptIns::read(labels, annotations);
    let held_back = kind.held_back_annotation().and_then(|a| annotations.get(a));
    Consumer {
        uid: uid.to_owned(),
        hash: annotations.get(kind.annotation()).cloned(),
        if_matched: if_matched(&consumption, selection.as_ref()),
        consumption: consumption.into(),
        owner,
        ready: waves::ready_of(object),
        opt_ins,
        restarts: (kind == TargetKind::PodEnv).then(|| restarts_of(object)),
        held_back: held_back.map(|v| v.as_str().into()),
        ..Consumer::default()
    }
}

/// The objects of `consumption` that count only while they carry Reloader's `match`.
fn if_matched(consumption: &Consumption, selection: Option<&Selection>) -> Box<[ConfigId]> {
    let Some(selection) = selection else {
        return Box::default();
    };
    let ids = consumption.ids().into_iter();
    ids.filter(|id| selection.counts(id) == Counts::IfMatched)
        .cloned()
        .collect()
}

/// The restart counts in a Pod's `status`: its `config-reloader`'s, and the highest of the
/// other containers' (init containers included).
pub fn restarts_of(object: &Value) -> Restarts {
    let mut restarts = Restarts::default();
    let lists = ["initContainerStatuses", "containerStatuses"];
    let statuses = lists
        .iter()
        .filter_map(|list| object.pointer(&format!("/status/{list}"))?.as_array())
        .flatten();
    for status in statuses {
        let count = status.get("restartCount").and_then(Value::as_u64);
        let count = u32::try_from(count.unwrap_or(0)).unwrap_or(u32::MAX);
        if status.get("name").and_then(Value::as_str) == Some(SIDECAR_NAME) {
            restarts.sidecar = count;
        } else {
            restarts.others = restarts.others.max(count);
        }
    }
    restarts
}

fn pod_spec(pod: &Value) -> Result<PodSpec, ReduceError> {
    PodSpec::deserialize(pod.get("spec").unwrap_or(&Value::Null)).map_err(ReduceError::BadSpec)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::hash::{ConfigId, Consumed};
    use crate::policy::{INJECT, WORKLOAD_OPT_IN};
    use crate::workload::ENV_HASH;

    fn deployment(annotations: Value, labels: Value) -> Value {
        json!({"spec": {"template": {
            "metadata": {"annotations": annotations, "labels": labels},
            "spec": {"containers": [{"name": "app", "env": [
                {"name": "A", "valueFrom": {"configMapKeyRef": {"name": "env", "key": "a"}}}
            ]}]}
        }}})
    }

    #[test]
    fn a_stamped_workload_keeps_its_hash_and_what_it_reads() {
        let object = deployment(json!({CONFIG_HASH: "sha256:1"}), json!({}));
        let got = workload(TargetKind::Deployment, "u1", &object)
            .unwrap()
            .unwrap();
        assert_eq!(got.hash.as_deref(), Some("sha256:1"));
        assert_eq!(
            got.consumption.consumed(),
            [Consumed::Key(ConfigId::config_map("env"), "a".into())]
        );
    }

    #[test]
    fn unstamped_or_opted_out_workloads_are_never_kept() {
        let unstamped = deployment(json!({}), json!({}));
        let by_label = deployment(json!({CONFIG_HASH: "sha256:1"}), json!({INJECT: "false"}));
        let annotations = json!({CONFIG_HASH: "sha256:1", INJECT: " False "});
        let by_annotation = deployment(annotations, json!({}));
        for (case, object) in [
            ("unstamped", unstamped),
            ("opted out by label", by_label),
            ("opted out by annotation", by_annotation),
        ] {
            let kept = workload(TargetKind::Deployment, "u", &object).unwrap();
            assert_eq!(kept, None, "{case}");
        }
    }

    #[test]
    fn what_a_workload_says_about_opting_in_is_kept() {
        let stamp = r#"{"reloader.stakater.com/search":"true"}"#;
        let annotations = json!({CONFIG_HASH: "sha256:1", WORKLOAD_OPT_IN: stamp});
        let object = deployment(annotations, json!({}));
        let got = workload(TargetKind::Deployment, "u", &object)
            .unwrap()
            .unwrap();
        assert_eq!(got.opt_ins.reloader, Some(true));
        assert!(
            got.opt_ins.acted_on(false, true),
            "opted in by Reloader's search"
        );
        assert!(
            !got.opt_ins.acted_on(true, false),
            "left to Reloader while it may run"
        );
        assert_eq!(&*got.if_matched, [ConfigId::config_map("env")]);

        let nothing = r#"{"reloader.stakater.com/auto":"false"}"#;
        let annotations = json!({CONFIG_HASH: "sha256:1", WORKLOAD_OPT_IN: nothing});
        let object = deployment(annotations, json!({}));
        let kept = workload(TargetKind::Deployment, "u", &object).unwrap();
        assert_eq!(
            kept, None,
            "Reloader's annotations select nothing: never written"
        );

        let plain = deployment(json!({CONFIG_HASH: "sha256:1"}), json!({}));
        let got = workload(TargetKind::Deployment, "u", &plain)
            .unwrap()
            .unwrap();
        assert!(got.opt_ins.acted_on(true, false) && !got.opt_ins.acted_on(false, true));
        assert!(got.if_matched.is_empty());
    }

    #[test]
    fn a_cronjobs_template_is_under_its_job_template() {
        let template =
            deployment(json!({CONFIG_HASH: "sha256:2"}), json!({}))["spec"]["template"].clone();
        let cronjob = json!({"spec": {"jobTemplate": {"spec": {"template": template}}}});
        let got = workload(TargetKind::CronJob, "u", &cronjob)
            .unwrap()
            .unwrap();
        assert_eq!(got.hash.as_deref(), Some("sha256:2"));
        assert!(workload(TargetKind::Deployment, "u", &cronjob).is_err());
    }

    #[test]
    fn a_rollouts_template_is_at_spec_template_and_a_workload_ref_is_never_kept() {
        let mut rollout = deployment(json!({CONFIG_HASH: "sha256:3"}), json!({}));
        rollout["spec"]["strategy"] = json!({"canary": {"steps": [{"setWeight": 20}]}});
        let got = workload(TargetKind::Rollout, "u", &rollout)
            .unwrap()
            .unwrap();
        assert_eq!(got.hash.as_deref(), Some("sha256:3"));
        assert_eq!(
            got.consumption.consumed(),
            [Consumed::Key(ConfigId::config_map("env"), "a".into())]
        );
        let by_ref = json!({"spec": {"workloadRef":
            {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}}});
        assert_eq!(workload(TargetKind::Rollout, "u", &by_ref).unwrap(), None);
        // A Deployment without a template is still an error: it cannot be a good one.
        assert!(workload(TargetKind::Deployment, "u", &by_ref).is_err());
        let bad = json!({"spec": {"template": {"metadata": {"annotations": {CONFIG_HASH: "x"}},
            "spec": {"containers": 7}}}});
        assert!(workload(TargetKind::Rollout, "u", &bad).is_err());
    }

    #[test]
    fn compact_reads_keep_the_sets_and_the_hash() {
        let consumption = Consumption {
            consumed: BTreeSet::from([
                Consumed::Whole(ConfigId::secret("tls")),
                Consumed::Key(ConfigId::config_map("env"), "b".into()),
                Consumed::Key(ConfigId::config_map("env"), "a".into()),
            ]),
            optional: BTreeSet::from([ConfigId::secret("tls")]),
        };
        let reads = Reads::from(consumption.clone());
        assert_eq!(reads.to_consumption(), consumption);
        assert_eq!(reads.ids().len(), 2);
        let id = ConfigId::config_map("env");
        let object = crate::hash::ConfigObject::from_values(&id, [("a", b"1")], None).unwrap();
        let mut data = ConfigData::new();
        data.insert(id, crate::hash::Lookup::Found(object));
        assert_eq!(reads.hash(&data, None), consumption.hash(&data, None));
        assert!(reads.hash(&data, None).hash.is_some());
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        let bad = json!({"spec": {"template": {"metadata": {"annotations": {CONFIG_HASH: "x"}}, "spec": {"containers": "nope"}}}});
        let err = workload(TargetKind::Deployment, "u", &bad).unwrap_err();
        assert!(
            err.to_string().starts_with("failed to read the pod spec"),
            "{err}"
        );
        let none = BTreeMap::new();
        assert!(pod("u", (&none, &none), &json!({"spec": 7}), None).is_err());
        assert_eq!(
            pod_env("u", (&none, &none), &json!({"spec": 7}), None),
            None
        );
    }

    #[test]
    fn a_pod_that_restarts_in_place_keeps_its_env_hash_reads_and_restart_counts() {
        let object = json!({
            "spec": {
                "initContainers": [{"name": SIDECAR_NAME, "restartPolicy": "Always",
                    "args": ["watch", "--env-hash-file", "/f", "--env-state-dir", "/s",
                        "--env-key", "env/a", "--env-object", "all"]}],
                "containers": [{"name": "app"}, {"name": "log"}],
            },
            "status": {
                "initContainerStatuses": [{"name": SIDECAR_NAME, "restartCount": 2}],
                "containerStatuses": [{"name": "app", "restartCount": 3}, {"name": "log", "restartCount": 1}],
            },
        });
        let annotations = BTreeMap::from([(ENV_HASH.to_owned(), "sha256:e".to_owned())]);
        let got = pod_env("u", (&BTreeMap::new(), &annotations), &object, None)
            .expect("it restarts in place");
        assert_eq!(got.hash.as_deref(), Some("sha256:e"));
        assert_eq!(
            got.consumption.consumed(),
            [
                Consumed::Key(ConfigId::config_map("env"), "a".into()),
                Consumed::Whole(ConfigId::config_map("all")),
            ]
        );
        assert_eq!(
            got.restarts,
            Some(Restarts {
                sidecar: 2,
                others: 3
            })
        );
        // A sidecar that only hot-reloads: no env twin.
        let hot = json!({"spec": {"initContainers": [{"name": SIDECAR_NAME, "args": ["watch", "--dir", "/d"]}],
            "containers": [{"name": "app"}]}});
        assert_eq!(
            pod_env("u", (&BTreeMap::new(), &annotations), &hot, None),
            None
        );
    }
}
