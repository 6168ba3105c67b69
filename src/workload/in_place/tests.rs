use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::*;
use crate::hash::{self, ConfigData, ConfigObject, Lookup};
use crate::workload::analysis::analyse;
use crate::workload::rules::{self, SubPathPolicy};
use crate::workload::{ENV_HASH, SIDECAR_NAME, Settings, test_settings};

fn settings(default: EnvChange, support: Support) -> Settings {
    Settings {
        in_place: InPlaceSettings { default, support },
        reloader_retired: false,
        ..test_settings::settings()
    }
}

/// A pod spec whose `app` reads key `a` of ConfigMap `env` and, through envFrom, ConfigMap
/// `all` and Secret `db`; `extra` is merged into the spec.
fn spec(extra: Value) -> PodSpec {
    let mut spec = json!({"containers": [{"name": "app",
        "env": [{"name": "A", "valueFrom": {"configMapKeyRef": {"name": "env", "key": "a"}}}],
        "envFrom": [{"configMapRef": {"name": "all"}}, {"secretRef": {"name": "db"}}]}]});
    for (k, v) in extra.as_object().unwrap() {
        spec[k] = v.clone();
    }
    serde_json::from_value(spec).unwrap()
}

fn annotations(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

const BARE_POD: Subject = Subject {
    template: false,
    controlled: false,
    job: false,
};
const TEMPLATE: Subject = Subject {
    template: true,
    controlled: false,
    job: false,
};

fn decided(
    spec: &PodSpec,
    pairs: &[(&str, &str)],
    subject: Subject,
    settings: &Settings,
) -> (Decision, Option<ValueError>) {
    let analysis = analyse(spec);
    let uses = rules::apply(&analysis, &SubPathPolicy::Allow).uses;
    choose_env_restart(
        &annotations(pairs),
        spec,
        &analysis,
        subject,
        &uses,
        settings,
    )
}

fn consumed_names(decision: &Decision) -> Vec<String> {
    decision
        .consumed()
        .iter()
        .map(|c| match c {
            Consumed::Key(id, key) => format!("{}/{key}", id.name),
            Consumed::Whole(id) => id.name.clone(),
        })
        .collect()
}

#[test]
fn asked_by_annotation_it_covers_the_configmaps_read_through_env_and_no_secret() {
    let roll_by_default = settings(EnvChange::Roll, Support::Yes);
    let asked = [(ENV_CHANGE, "restart-in-place")];
    let (decision, bad) = decided(&spec(json!({})), &asked, TEMPLATE, &roll_by_default);
    assert_eq!(bad, None);
    assert_eq!(consumed_names(&decision), ["env/a", "all"]);
    let (off, _) = decided(&spec(json!({})), &[], TEMPLATE, &roll_by_default);
    assert_eq!(off, Decision::Off);
}

#[test]
fn the_installation_default_applies_unless_the_pod_says_roll() {
    let in_place = settings(EnvChange::RestartInPlace, Support::Yes);
    let (decision, _) = decided(&spec(json!({})), &[], BARE_POD, &in_place);
    assert!(decision.applies());
    let roll = [(ENV_CHANGE, "roll")];
    let (decision, _) = decided(&spec(json!({})), &roll, BARE_POD, &in_place);
    assert_eq!(decision, Decision::Off);
}

#[test]
fn a_bad_value_rolls_and_is_returned() {
    let in_place = settings(EnvChange::RestartInPlace, Support::Yes);
    let bad = [(ENV_CHANGE, "in-place")];
    let (decision, err) = decided(&spec(json!({})), &bad, TEMPLATE, &in_place);
    assert_eq!(decision, Decision::Off);
    assert_eq!(err, Some(ValueError::BadEnvChange("in-place".into())));
}

#[test]
fn a_pod_from_a_template_follows_what_was_recorded_on_the_template() {
    let in_place = settings(EnvChange::RestartInPlace, Support::Yes);
    let controlled = Subject {
        controlled: true,
        ..BARE_POD
    };
    // Its template rolls (admitted before, or chose roll): so does the Pod, whatever the default.
    let (decision, _) = decided(&spec(json!({})), &[], controlled, &in_place);
    assert_eq!(decision, Decision::Off);
    let recorded = [(ENV_RESTART, IN_PLACE), (ENV_CHANGE, "roll")];
    let (decision, _) = decided(&spec(json!({})), &recorded, controlled, &in_place);
    assert!(decision.applies());
}

#[test]
fn each_reason_to_roll_is_named() {
    let asked = [(ENV_CHANGE, "restart-in-place")];
    let yes = settings(EnvChange::Roll, Support::Yes);
    let old = settings(EnvChange::Roll, support_of_version("1", "35"));
    let no_native = Settings {
        native_sidecars: false,
        ..yes.clone()
    };
    let job = Subject {
        job: true,
        ..TEMPLATE
    };
    let own_rules = json!({"initContainers": [{"name": "fix", "restartPolicy": "Always",
        "restartPolicyRules": [{"action": "Restart", "exitCodes": {"operator": "In", "values": [3]}}]}]});
    let old_sidecar = json!({"initContainers": [{"name": SIDECAR_NAME, "restartPolicy": "Always",
        "args": ["watch", "--dir", "/x"]}]});
    let cases = [
        (
            spec(json!({})),
            TEMPLATE,
            &old,
            Blocked::Cluster("API server v1.35, needs >= 1.36".into()),
        ),
        (
            spec(json!({})),
            TEMPLATE,
            &no_native,
            Blocked::NoNativeSidecar,
        ),
        (
            spec(json!({"restartPolicy": "OnFailure"})),
            job,
            &yes,
            Blocked::Job,
        ),
        (
            spec(json!({"restartPolicy": "Never"})),
            BARE_POD,
            &yes,
            Blocked::RunsToCompletion("Never".into()),
        ),
        (
            spec(own_rules),
            BARE_POD,
            &yes,
            Blocked::OwnRules("fix".into()),
        ),
        (spec(old_sidecar), BARE_POD, &yes, Blocked::OldSidecar),
    ];
    for (spec, subject, settings, want) in cases {
        let (decision, _) = decided(&spec, &asked, subject, settings);
        assert_eq!(decision, Decision::Rolls(want.clone()), "{want:?}");
        let mut warnings = Warnings::default();
        let consequence = if subject.template {
            Consequence::Rolls
        } else {
            Consequence::NewPod
        };
        warn(&decision, &[], consequence, &mut warnings);
        let lines = warnings.into_list(None);
        assert!(lines[0].contains("no restart in place"), "{lines:?}");
    }
    // An empty list of rules is none.
    let no_rules = json!({"initContainers": [{"name": "fix", "restartPolicy": "Always", "restartPolicyRules": []}]});
    assert!(decided(&spec(no_rules), &asked, BARE_POD, &yes).0.applies());
}

#[test]
fn a_configmap_also_read_through_a_subpath_rolls_instead() {
    let asked = [(ENV_CHANGE, "restart-in-place")];
    let spec = spec(json!({
        "volumes": [{"name": "one", "configMap": {"name": "env"}}],
        "containers": [{"name": "app",
            "env": [{"name": "A", "valueFrom": {"configMapKeyRef": {"name": "env", "key": "a"}}}],
            "envFrom": [{"configMapRef": {"name": "all"}}],
            "volumeMounts": [{"name": "one", "mountPath": "/one", "subPath": "a"}]}]
    }));
    let (decision, _) = decided(
        &spec,
        &asked,
        TEMPLATE,
        &settings(EnvChange::Roll, Support::Yes),
    );
    assert_eq!(consumed_names(&decision), ["all"]);
}

#[test]
fn recorded_templates_leave_their_in_place_reads_out_of_the_config_hash() {
    let spec = spec(json!({}));
    let analysis = analyse(&spec);
    let uses = rules::apply(&analysis, &SubPathPolicy::Allow).uses;
    let kept = without_recorded(&annotations(&[(ENV_RESTART, IN_PLACE)]), uses.clone());
    let ids: Vec<String> = kept.iter().map(|u| u.consumed.id().to_string()).collect();
    assert_eq!(ids, ["Secret \"db\""]);
    assert_eq!(without_recorded(&annotations(&[]), uses.clone()), uses);
}

#[test]
fn versions_from_1_36_restart_in_place() {
    assert_eq!(support_of_version("1", "36"), Support::Yes);
    assert_eq!(support_of_version("1", "37+"), Support::Yes);
    assert!(matches!(support_of_version("1", "35"), Support::No(_)));
    assert!(matches!(support_of_version("", "x"), Support::No(_)));
}

#[test]
fn the_plan_mounts_each_configmap_and_names_free_volumes() {
    let asked = [(ENV_CHANGE, "restart-in-place")];
    let spec = spec(
        json!({"volumes": [{"name": "reload-injector-env", "emptyDir": {}},
        {"name": "reload-injector-state", "emptyDir": {}}]}),
    );
    let (decision, _) = decided(
        &spec,
        &asked,
        BARE_POD,
        &settings(EnvChange::Roll, Support::Yes),
    );
    let plan = EnvPlan::new(&decision, &spec).unwrap();
    let mut container = json!({"name": SIDECAR_NAME, "args": ["watch"], "volumeMounts": []});
    plan.extend(&mut container);
    assert_eq!(
        container["args"],
        json!([
            "watch",
            "--env-hash-file",
            "/etc/reload-injector/pod/env-hash",
            "--env-state-dir",
            "/etc/reload-injector/state",
            "--env-key",
            "env/a",
            "--env-object",
            "all"
        ])
    );
    assert_eq!(
        container["restartPolicyRules"],
        json!([{"action": "RestartAllContainers", "exitCodes": {"operator": "In", "values": [42]}}])
    );
    let volumes = plan.volumes();
    let names: Vec<&str> = volumes
        .iter()
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "reload-injector-env-1",
            "reload-injector-env-2",
            "reload-injector-pod",
            "reload-injector-state-1"
        ]
    );
    assert_eq!(
        volumes[0]["configMap"],
        json!({"name": "all", "optional": true})
    );
    assert_eq!(
        volumes[2]["downwardAPI"]["items"][0]["fieldRef"]["fieldPath"],
        format!("metadata.annotations['{ENV_HASH}']")
    );
    let mounts = &container["volumeMounts"];
    assert_eq!(mounts[0]["mountPath"], "/etc/reload-injector/env/all");
    assert_eq!(mounts[3]["name"], "reload-injector-state-1");
    assert_eq!(mounts[3].get("readOnly"), None);
}

#[test]
fn the_plans_hash_is_the_env_hash_of_what_it_covers() {
    let asked = [(ENV_CHANGE, "restart-in-place")];
    let spec = spec(json!({}));
    let (decision, _) = decided(
        &spec,
        &asked,
        BARE_POD,
        &settings(EnvChange::Roll, Support::Yes),
    );
    let plan = EnvPlan::new(&decision, &spec).unwrap();
    let env = ConfigId::config_map("env");
    let object = ConfigObject::from_values(&env, [("a", b"1")], None).unwrap();
    let configs = ConfigData::from([(env, Lookup::Found(object))]);
    assert_eq!(
        plan.hash(&configs),
        hash::env_hash(&decision.consumed(), &configs)
    );
    assert!(plan.hash(&configs).unwrap().starts_with("sha256:"));
    assert_eq!(EnvPlan::new(&Decision::Off, &spec), None);
}
