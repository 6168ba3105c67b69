use serde_json::{Value, json};

use super::*;
use crate::hash::{ConfigId, Consumed};
use crate::inject::analysis::analyse;

fn spec(containers: Value) -> PodSpec {
    serde_json::from_value(json!({
        "containers": containers,
        "volumes": [
            {"name": "conf", "configMap": {"name": "conf"}},
            {"name": "other", "configMap": {"name": "other", "items": [{"key": "a", "path": "a"}]}},
        ],
    }))
    .expect("a pod spec")
}

fn mounting(name: &str, extra: Value) -> Value {
    let mut c = json!({"name": name, "volumeMounts": [{"name": "conf", "mountPath": "/conf"}]});
    for (k, v) in extra.as_object().unwrap() {
        c[k] = v.clone();
    }
    c
}

fn annotations(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn strategies(spec: &PodSpec, pairs: &[(&str, &str)]) -> (Vec<Strategy>, Option<ValueError>) {
    let analysis = analyse(spec);
    let (choice, bad) = choose(&annotations(pairs), spec, &analysis);
    (
        choice.containers.into_iter().map(|(_, s, _)| s).collect(),
        bad,
    )
}

fn signal_to(signal: &str, process: &str) -> Strategy {
    Strategy::Reload(Told::Signal {
        signal: values::parse_signal(signal).unwrap(),
        process: Some(process.to_owned()),
    })
}

fn sighup_to(process: &str) -> Strategy {
    signal_to("SIGHUP", process)
}

#[test]
fn a_process_not_in_the_table_is_never_signalled_its_config_rolls() {
    let spec = spec(json!([mounting(
        "api",
        json!({"command": ["java", "-jar", "/app.jar"]})
    )]));
    let analysis = analyse(&spec);
    let (choice, bad) = choose(&BTreeMap::new(), &spec, &analysis);
    assert_eq!(bad, None);
    assert_eq!(
        choice.containers[0].1,
        Strategy::Restart(Why::Unknown(Some("java".into())))
    );
    assert_eq!(choice.told(), None);
    assert!(choice.reload_volumes().is_empty());
    let uses = choice.restart_uses(&analysis);
    assert_eq!(uses.len(), 1);
    assert_eq!(
        uses[0].consumed,
        Consumed::Whole(ConfigId::config_map("conf"))
    );
    assert_eq!(uses[0].how, How::Mount);
}

#[test]
fn shells_wrappers_and_unknown_images_roll() {
    for extra in [
        json!({"command": ["sh", "-c", "nginx -g 'daemon off;'"]}),
        json!({"command": ["/usr/bin/tini", "--", "nginx"]}),
        json!({"image": "example.com/team/api:1.0"}),
        json!({}),
    ] {
        let spec = spec(json!([mounting("app", extra.clone())]));
        let (got, _) = strategies(&spec, &[]);
        assert!(
            matches!(got[0], Strategy::Restart(Why::Unknown(_))),
            "{extra}: {got:?}"
        );
    }
}

#[test]
fn known_servers_reload_by_command_or_image() {
    for (extra, want) in [
        (
            json!({"command": ["/usr/sbin/nginx", "-g", "daemon off;"]}),
            sighup_to("nginx"),
        ),
        (json!({"image": "nginx:1.27-alpine"}), sighup_to("nginx")),
        (
            json!({"image": "quay.io/prometheus/prometheus:v3.0.0@sha256:abc"}),
            sighup_to("prometheus"),
        ),
        (json!({"image": "postgres:17"}), sighup_to("postgres")),
        (
            json!({"image": "haproxy:3.0"}),
            signal_to("USR2", "haproxy"),
        ),
        (
            json!({"image": "fluent/fluentd:v1.17"}),
            signal_to("USR2", "fluentd"),
        ),
    ] {
        let spec = spec(json!([mounting("app", extra.clone())]));
        assert_eq!(strategies(&spec, &[]).0, [want], "{extra}");
    }
}

#[test]
fn fluent_bit_reloads_only_with_hot_reload_on_its_command_line() {
    let without = spec(json!([mounting(
        "logs",
        json!({"image": "fluent/fluent-bit:3.2"})
    )]));
    assert!(matches!(
        strategies(&without, &[]).0[0],
        Strategy::Restart(Why::Unmet(_))
    ));
    let with = spec(json!([mounting(
        "logs",
        json!({"image": "fluent/fluent-bit:3.2", "args": ["-c", "/conf/fb.yaml", "-Y"]})
    )]));
    assert_eq!(strategies(&with, &[]).0, [sighup_to("fluent-bit")]);
}

#[test]
fn the_pod_chooses_explicitly() {
    let java = spec(json!([mounting("api", json!({"command": ["java"]}))]));
    let nginx = spec(json!([mounting("web", json!({"image": "nginx"}))]));
    let signal = values::parse_signal("USR1").unwrap();
    let usr1 = Strategy::Reload(Told::Signal {
        signal,
        process: None,
    });
    let url = "http://127.0.0.1:8080/reload";
    let http = Strategy::Reload(Told::Http { url: url.into() });
    let chosen = Strategy::Restart(Why::Chosen);
    for (spec, pair, want) in [
        (&java, (SIGNAL, "USR1"), usr1),
        (&java, (RELOAD_URL, url), http),
        (&nginx, (ON_CHANGE, "restart"), chosen),
        (&nginx, (ON_CHANGE, "none"), Strategy::Nothing),
        // reload on a known server takes its table signal and process.
        (&nginx, (ON_CHANGE, "reload"), sighup_to("nginx")),
    ] {
        assert_eq!(strategies(spec, &[pair]).0, [want], "{pair:?}");
    }
}

#[test]
fn a_value_the_sidecar_refuses_gives_no_sidecar_and_rolls() {
    let nginx = spec(json!([mounting("web", json!({"image": "nginx"}))]));
    for pairs in [
        [(RELOAD_URL, "https://127.0.0.1/reload")],
        [(SIGNAL, "40")],
        [(SIGNAL, "SIGTERM")],
        [(PROCESS, "/usr/sbin/nginx")],
        [(ON_CHANGE, "sometimes")],
    ] {
        let (got, bad) = strategies(&nginx, &pairs);
        assert!(bad.is_some(), "{pairs:?}");
        assert_eq!(got, [Strategy::Restart(Why::BadValue)], "{pairs:?}");
    }
}

#[test]
fn no_shared_process_namespace_means_no_signal() {
    let mut nginx = spec(json!([mounting("web", json!({"image": "nginx"}))]));
    nginx.host_pid = Some(true);
    assert_eq!(
        strategies(&nginx, &[]).0,
        [Strategy::Restart(Why::NoSharedPid)]
    );
}

#[test]
fn one_sidecar_signals_one_known_server_the_other_rolls() {
    let spec = spec(json!([
        mounting("web", json!({"image": "nginx"})),
        mounting("metrics", json!({"image": "prom/prometheus"})),
    ]));
    let analysis = analyse(&spec);
    let (choice, _) = choose(&BTreeMap::new(), &spec, &analysis);
    let got: Vec<&Strategy> = choice.containers.iter().map(|(_, s, _)| s).collect();
    assert_eq!(
        got,
        [&sighup_to("nginx"), &Strategy::Restart(Why::OtherTarget)]
    );
}

#[test]
fn restart_uses_read_the_keys_a_volume_picks() {
    let spec = spec(json!([{"name": "api", "command": ["java"],
        "volumeMounts": [{"name": "other", "mountPath": "/o"}]}]));
    let analysis = analyse(&spec);
    let (choice, _) = choose(&BTreeMap::new(), &spec, &analysis);
    let uses = choice.restart_uses(&analysis);
    assert_eq!(
        uses.iter().map(|u| &u.consumed).collect::<Vec<_>>(),
        [&Consumed::Key(ConfigId::config_map("other"), "a".into())]
    );
}
