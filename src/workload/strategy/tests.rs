use serde_json::{Value, json};

use super::*;
use crate::hash::{ConfigId, Consumed};
use crate::workload::analysis::analyse;

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
        // reload on a program of the catalogue takes its signal and process.
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

/// A pod spec from its whole JSON.
fn pod(value: Value) -> PodSpec {
    serde_json::from_value(value).expect("a pod spec")
}

/// Each entry of the choice as (container, strategy, volumes).
fn entries(spec: &PodSpec) -> Vec<(String, Strategy, Vec<String>)> {
    let analysis = analyse(spec);
    let (choice, bad) = choose(&BTreeMap::new(), spec, &analysis);
    assert_eq!(bad, None);
    let volumes = |v: BTreeSet<String>| v.into_iter().collect();
    choice
        .containers
        .into_iter()
        .map(|(c, s, v)| (c, s, volumes(v)))
        .collect()
}

fn entry(container: &str, strategy: Strategy, volumes: &[&str]) -> (String, Strategy, Vec<String>) {
    let volumes = volumes.iter().map(|v| v.to_string()).collect();
    (container.to_owned(), strategy, volumes)
}

#[test]
fn a_config_reload_helper_never_rolls_the_pod_and_keeps_reloading() {
    // Prometheus with a configmap-reload beside it that calls /-/reload.
    let spec = pod(json!({
        "containers": [
            {"name": "prometheus", "image": "quay.io/prometheus/prometheus:v3.1.0",
             "volumeMounts": [{"name": "config", "mountPath": "/etc/config"}, {"name": "data", "mountPath": "/data"}]},
            {"name": "reload", "image": "ghcr.io/jimmidyson/configmap-reload:v0.14.0",
             "args": ["--volume-dir=/etc/config", "--webhook-url=http://127.0.0.1:9090/-/reload"],
             "volumeMounts": [{"name": "config", "mountPath": "/etc/config", "readOnly": true}]},
        ],
        "volumes": [{"name": "config", "configMap": {"name": "prometheus"}}, {"name": "data", "emptyDir": {}}],
    }));
    let reloaded = Strategy::Reloaded("reload".into());
    assert_eq!(entries(&spec), [entry("prometheus", reloaded, &["config"])]);
    let analysis = analyse(&spec);
    let (choice, _) = choose(&BTreeMap::new(), &spec, &analysis);
    assert!(choice.restart_uses(&analysis).is_empty(), "nothing hashed");
    assert!(choice.reload_volumes().is_empty(), "no second sidecar");
}

#[test]
fn prometheus_operators_config_reloader_is_not_taken_for_ours() {
    // The operator's reloader is named like our sidecar; ours is known by its `watch` command.
    let spec = pod(json!({
        "containers": [
            {"name": "prometheus", "image": "quay.io/prometheus/prometheus:v3.1.0",
             "args": ["--config.file=/etc/prometheus/config_out/prometheus.env.yaml", "--web.config.file=/etc/prometheus/web_config/web-config.yaml"],
             "volumeMounts": [
                {"name": "config-out", "mountPath": "/etc/prometheus/config_out"},
                {"name": "rules", "mountPath": "/etc/prometheus/rules/rules-0"},
                {"name": "web-config", "mountPath": "/etc/prometheus/web_config/web-config.yaml", "subPath": "web-config.yaml"},
                {"name": "tls", "mountPath": "/etc/prometheus/certs"}]},
            {"name": "config-reloader", "image": "quay.io/prometheus-operator/prometheus-config-reloader:v0.80.0",
             "args": ["--reload-url=http://127.0.0.1:9090/-/reload", "--config-file=/etc/prometheus/config/prometheus.yaml.gz"],
             "volumeMounts": [
                {"name": "config", "mountPath": "/etc/prometheus/config"},
                {"name": "config-out", "mountPath": "/etc/prometheus/config_out"},
                {"name": "rules", "mountPath": "/etc/prometheus/rules/rules-0"}]},
        ],
        "volumes": [
            {"name": "config", "secret": {"secretName": "prometheus-k8s"}},
            {"name": "config-out", "emptyDir": {}},
            {"name": "rules", "configMap": {"name": "prometheus-k8s-rulefiles-0"}},
            {"name": "web-config", "secret": {"secretName": "prometheus-k8s-web-config"}},
            {"name": "tls", "projected": {"sources": [{"secret": {"name": "prometheus-k8s-tls-assets-0"}}]}},
        ],
    }));
    let analysis = analyse(&spec);
    assert!(!analysis.has_sidecar && analysis.name_taken);
    assert_eq!(
        entries(&spec),
        [
            entry(
                "prometheus",
                Strategy::Reloaded("config-reloader".into()),
                &["rules"]
            ),
            // A signal was due, but our sidecar cannot be added beside a foreign config-reloader.
            entry("prometheus", Strategy::Restart(Why::NameTaken), &["tls"]),
        ]
    );
}

#[test]
fn haproxy_is_signalled_only_when_master_worker_mode_runs() {
    let with = |extra: Value| spec(json!([mounting("lb", extra)]));
    let usr2 = signal_to("USR2", "haproxy");
    assert_eq!(
        strategies(&with(json!({"image": "haproxy:3.0"})), &[]).0,
        std::slice::from_ref(&usr2)
    );
    let replaced =
        with(json!({"image": "haproxy:3.0", "command": ["haproxy", "-f", "/conf/h.cfg"]}));
    assert!(matches!(
        strategies(&replaced, &[]).0[..],
        [Strategy::Restart(Why::Unmet(p))] if p.title == "HAProxy"
    ));
    let explicit =
        with(json!({"image": "haproxy:3.0", "command": ["haproxy", "-W", "-f", "/conf/h.cfg"]}));
    assert_eq!(strategies(&explicit, &[]).0, [usr2]);
}

#[test]
fn an_init_containers_directory_mount_counts_like_env() {
    let spec = pod(json!({
        "initContainers": [{"name": "render", "image": "example/envsubst:1",
            "volumeMounts": [{"name": "tmpl", "mountPath": "/tmpl"}, {"name": "out", "mountPath": "/out"}]}],
        "containers": [{"name": "app", "image": "example/app:1",
            "volumeMounts": [{"name": "out", "mountPath": "/etc/app"}]}],
        "volumes": [{"name": "tmpl", "configMap": {"name": "app-tmpl"}}, {"name": "out", "emptyDir": {}}],
    }));
    assert_eq!(
        entries(&spec),
        [entry(
            "render",
            Strategy::Restart(Why::InitContainer),
            &["tmpl"]
        )]
    );
    let analysis = analyse(&spec);
    let (choice, _) = choose(&BTreeMap::new(), &spec, &analysis);
    let uses = choice.restart_uses(&analysis);
    assert_eq!(uses.len(), 1);
    assert_eq!(uses[0].how, How::InitMount);
    assert_eq!(
        uses[0].consumed,
        Consumed::Whole(ConfigId::config_map("app-tmpl"))
    );
}

#[test]
fn what_a_program_rereads_by_itself_neither_rolls_nor_is_signalled() {
    let spec = pod(json!({
        "containers": [{"name": "loki", "image": "grafana/loki:3.4.0",
            "args": ["-config.file=/etc/loki/config.yaml", "-runtime-config.file=/etc/loki/runtime/runtime.yaml"],
            "volumeMounts": [
                {"name": "config", "mountPath": "/etc/loki"},
                {"name": "runtime", "mountPath": "/etc/loki/runtime"}]}],
        "volumes": [
            {"name": "config", "configMap": {"name": "loki"}},
            {"name": "runtime", "configMap": {"name": "loki-runtime"}}],
    }));
    let loki = PROGRAMS.iter().find(|p| p.title == "Loki").unwrap();
    assert_eq!(
        entries(&spec),
        [
            entry("loki", Strategy::Restart(Why::AtStart(loki)), &["config"]),
            entry("loki", Strategy::Itself("Loki"), &["runtime"]),
        ]
    );
}

#[test]
fn a_file_watched_in_a_mount_that_also_holds_start_config_rolls() {
    // The runtime file and the main config share one mount: the main config needs a restart.
    assert!(!covers(
        "/etc/loki",
        &["/etc/loki/runtime.yaml"],
        &[
            "-config.file=/etc/loki/config.yaml",
            "-runtime-config.file=/etc/loki/runtime.yaml"
        ]
    ));
    assert!(covers(
        "/etc/loki/rt",
        &["/etc/loki/rt/runtime.yaml"],
        &["-config.file=/etc/loki/config.yaml"]
    ));
    assert!(covers("/dyn/a", &["/dyn"], &[]));
    assert!(covers("/sd", &["/sd/*.json"], &[]));
    // A glob names the files of its one directory: not a parent, nor a directory below.
    assert!(!covers("/etc", &["/etc/sd/*.json"], &[]));
    assert!(!covers("/sd/team", &["/sd/*.json"], &[]));
    assert!(!covers("/dynamic", &["/dyn"], &[]));
    // Several files in one flag value: another one in the mount is read at start.
    assert!(!covers(
        "/etc/rt",
        &["/etc/rt/a.yaml"],
        &[
            "-config.file=/etc/rt/main.yaml,/etc/other.yaml",
            "-runtime-config.file=/etc/rt/a.yaml"
        ]
    ));
}

#[test]
fn the_widely_run_servers_reload_as_their_docs_say() {
    let one = |extra: Value| strategies(&spec(json!([mounting("app", extra)])), &[]).0;
    let cases = [
        (
            json!({"image": "otel/opentelemetry-collector-contrib:0.120.0"}),
            sighup_to("otelcol-contrib"),
        ),
        (
            json!({"image": "coredns/coredns:1.12.0", "args": ["-conf", "/etc/coredns/Corefile"]}),
            signal_to("USR1", "coredns"),
        ),
        (
            json!({"image": "timberio/vector:0.45.0-debian"}),
            sighup_to("vector"),
        ),
        (json!({"image": "telegraf:1.33"}), sighup_to("telegraf")),
        (
            json!({"image": "quay.io/prometheus/blackbox-exporter:v0.25.0"}),
            sighup_to("blackbox_exporter"),
        ),
        (
            json!({"image": "eclipse-mosquitto:2.0"}),
            sighup_to("mosquitto"),
        ),
        (
            json!({"image": "thanos", "args": ["rule", "--rule-file=/conf/*.yaml"]}),
            sighup_to("thanos"),
        ),
        (json!({"image": "httpd:2.4"}), signal_to("USR1", "httpd")),
        (
            json!({"command": ["caddy", "run", "--config", "/conf/Caddyfile", "--watch"]}),
            Strategy::Itself("Caddy"),
        ),
        (
            json!({"image": "traefik:v3.3", "args": ["--providers.file.directory=/conf"]}),
            Strategy::Itself("Traefik"),
        ),
        (
            json!({"image": "grafana/grafana:11.5.0", "volumeMounts": [{"name": "conf", "mountPath": "/var/lib/grafana/dashboards/team"}]}),
            Strategy::Itself("Grafana"),
        ),
    ];
    for (extra, want) in cases {
        assert_eq!(one(extra.clone()), [want], "{extra}");
    }
    for image in [
        "redis:7.4",
        "rabbitmq:4.0",
        "envoyproxy/envoy:v1.33",
        "grafana/grafana:11.5.0",
    ] {
        let got = one(json!({"image": image}));
        assert!(
            matches!(got[..], [Strategy::Restart(Why::AtStart(_))]),
            "{image}: {got:?}"
        );
    }
}

#[test]
fn the_table_before_the_catalogue_counted_what_it_did_not_know() {
    // An OpenTelemetry Collector reloads on SIGHUP now; before the catalogue its mount rolled.
    let spec = spec(json!([mounting(
        "otel",
        json!({"image": "otel/opentelemetry-collector:0.120.0"})
    )]));
    let analysis = analyse(&spec);
    let before = choose_before_catalogue(&BTreeMap::new(), &spec, &analysis);
    assert!(matches!(
        before.containers[0].1,
        Strategy::Restart(Why::Unknown(_))
    ));
    assert_eq!(before.restart_uses(&analysis).len(), 1);
    let (now, _) = choose(&BTreeMap::new(), &spec, &analysis);
    assert!(now.restart_uses(&analysis).is_empty());
}
