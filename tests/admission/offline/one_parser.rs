//! Admission and the sidecar read annotation values with one parser, so they cannot disagree:
//! fed the same values, every sidecar the webhook would inject starts (its `watch` command line
//! is accepted), and every value `watch` refuses gets no sidecar at admission (a Pod) or a
//! denial with the fix (a workload). A sidecar that refused its flags would exit at start and,
//! as a native sidecar, keep its Pod in Init for ever.

use clap::Parser;
use proptest::prelude::*;
use proptest::sample::select;
use reload_injector::cli::{Cli, Command};
use reload_injector::hash::ConfigData;
use reload_injector::watch::Config;
use reload_injector::workload::{
    Object, Operation, Outcome, PROCESS, RELOAD_URL, Request, SIGNAL, Settings, review,
};
use serde_json::value::to_raw_value;
use serde_json::{Value, json};

fn settings() -> Settings {
    Settings {
        sidecar_image: "reload-injector:test".to_owned(),
        native_sidecars: true,
        own_namespace: "reload-injector".to_owned(),
        version: "0.0.0-test".to_owned(),
        inject_into_templates: false,
        secret_key: None,
        in_place: Default::default(),
        warning_chars: None,
        reloader_retired: true,
    }
}

fn template(key: &str, value: &str) -> Value {
    json!({
        "metadata": {"labels": {"app": "web"}, "annotations": {key: value}},
        "spec": {
            "securityContext": {"runAsUser": 101},
            "containers": [{"name": "web", "image": "nginx:1.27",
                "volumeMounts": [{"name": "conf", "mountPath": "/etc/nginx/conf.d"}]}],
            "volumes": [{"name": "conf", "configMap": {"name": "web-conf"}}],
        },
    })
}

fn decide(kind: &str, group: &str, object: &Value) -> Outcome {
    let raw = to_raw_value(object).unwrap();
    let req = Request {
        group,
        kind,
        operation: Operation::Create,
        namespace: "shop",
        object: Object::Raw(&raw),
        old_object: None,
        namespace_labelled: true,
        dry_run: false,
    };
    review(&req, &settings(), &ConfigData::new()).expect("a readable object")
}

/// The `args` of the sidecar the patch adds, if it adds one.
fn sidecar_args(outcome: &Outcome) -> Option<Vec<String>> {
    let Outcome::Allowed { patch, .. } = outcome else {
        return None;
    };
    let patch = serde_json::to_value(patch).unwrap();
    patch.as_array()?.iter().find_map(|op| {
        let value = &op["value"];
        let containers = value
            .as_array()
            .cloned()
            .unwrap_or_else(|| vec![value.clone()]);
        containers.iter().find_map(|c| {
            (c["name"] == "config-reloader").then(|| {
                c["args"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|a| a.as_str().unwrap().to_owned())
                    .collect()
            })
        })
    })
}

/// Whether `reload-injector watch ARGS` gets past its command line (as the sidecar would).
fn watch_accepts(args: &[String]) -> Result<(), String> {
    let cli = Cli::try_parse_from(
        ["reload-injector"]
            .into_iter()
            .chain(args.iter().map(String::as_str)),
    )
    .map_err(|e| e.to_string())?;
    let Command::Watch(watch) = cli.command else {
        return Err("not watch".to_owned());
    };
    Config::from_args(watch)
        .map(drop)
        .map_err(|e| format!("{e:#}"))
}

/// The `watch` command line the webhook would give for `--FLAG value`, alone.
fn watch_alone(flag: &str, value: &str) -> Result<(), String> {
    let args: Vec<String> = ["watch", "--dir", "/tmp", flag, value]
        .into_iter()
        .map(str::to_owned)
        .collect();
    watch_accepts(&args)
}

fn values() -> impl Strategy<Value = String> {
    prop_oneof![
        select(vec![
            "SIGHUP",
            "hup",
            "HUP",
            "1",
            "10",
            "12",
            "USR1",
            "usr2",
            "SIGTERM",
            "TERM",
            "9",
            "15",
            "31",
            "32",
            "34",
            "40",
            "64",
            "65",
            "0",
            "-1",
            "SIGKILL",
            "STOP",
            "SIGRTMIN",
            "WINCH",
            "SIGCONT",
            "",
            " ",
            "nginx",
            "/usr/sbin/nginx",
            "a b",
            "http://127.0.0.1:9090/-/reload",
            "https://127.0.0.1:9090/-/reload",
            "HTTPS://x/",
            "http://",
            "ftp://x/",
            "http://user@host/",
            "127.0.0.1/reload",
            // Found by this test: a value the sidecar's command line reads as a flag.
            "-0",
            "--help",
            "-bash",
        ])
        .prop_map(str::to_owned),
        "[ -~]{0,24}",
        "(SIG)?[A-Z0-9+]{1,8}",
        "https?://[a-z0-9.:@/ -]{0,20}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn admission_and_the_sidecar_agree_on_every_value(
        value in values(),
        key in select(vec![SIGNAL, PROCESS, RELOAD_URL]),
    ) {
        let flag = match key {
            k if k == SIGNAL => "--signal",
            k if k == PROCESS => "--process",
            _ => "--url",
        };
        let template = template(key, &value);
        let mut pod = template.clone();
        pod["metadata"]["name"] = json!("web");
        let outcome = decide("Pod", "", &pod);
        match sidecar_args(&outcome) {
            // Whatever the webhook injects, the sidecar accepts.
            Some(args) => prop_assert_eq!(watch_accepts(&args), Ok(()), "{:?}", args),
            // No sidecar: either the value is blank (as if absent) or watch refuses it too.
            None => {
                let blank = value.trim().is_empty() && key == RELOAD_URL;
                prop_assert!(blank || watch_alone(flag, &value).is_err(), "{key}={value:?}");
            }
        }
        // On a workload, a value the sidecar refuses is denied with the fix.
        let deployment = json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": template},
        });
        let refused = !(value.trim().is_empty() && key == RELOAD_URL)
            && watch_alone(flag, &value).is_err();
        let denied = matches!(decide("Deployment", "apps", &deployment), Outcome::Denied { .. });
        prop_assert_eq!(denied, refused, "{}={:?}", key, value);
    }
}
