use serde_json::{Value, json};

use super::*;
use crate::workload::values;

/// Whether every entry is usable: a signal the sidecar sends, a process name it accepts, a source.
fn check(programs: &[Program]) -> Result<(), String> {
    for p in programs {
        if let Takes::Signal(signal) = p.takes {
            values::parse_signal(signal).map_err(|e| format!("{}: {e}", p.title))?;
        }
        values::parse_process(p.process).map_err(|e| format!("{}: {e}", p.title))?;
        if !p.source.starts_with("https://") {
            return Err(format!("{}: no source", p.title));
        }
    }
    Ok(())
}

fn container(value: Value) -> Container {
    serde_json::from_value(value).expect("a container")
}

#[test]
fn every_entry_is_sourced_and_signals_what_the_sidecar_sends() {
    check(&PROGRAMS).unwrap();
    for legacy in &LEGACY_PROGRAMS {
        let Takes::Signal(signal) = legacy.takes else {
            panic!("{legacy:?}: the table before the catalogue only signalled");
        };
        values::parse_signal(signal).unwrap();
    }
    for reloader in &RELOADERS {
        assert!(reloader.source.starts_with("https://"), "{reloader:?}");
    }
}

#[test]
fn entries_sharing_a_name_end_with_the_one_that_always_applies() {
    for (i, program) in PROGRAMS.iter().enumerate() {
        for name in program.names {
            let later = PROGRAMS[i + 1..].iter().any(|p| p.names.contains(name));
            assert!(
                !later || program.needs != Needs::Nothing,
                "{name}: {} hides the entries after it",
                program.title
            );
        }
    }
}

#[test]
fn image_names_lose_registry_path_tag_and_digest() {
    for (image, name) in [
        ("nginx", "nginx"),
        ("nginx:1.27-alpine", "nginx"),
        ("registry:5000/team/nginx:1.27@sha256:abc", "nginx"),
        ("quay.io/prometheus/prometheus:v3.1.0", "prometheus"),
        (
            "otel/opentelemetry-collector-contrib:0.120.0",
            "opentelemetry-collector-contrib",
        ),
        ("docker.io/bitnami/postgresql:17", "postgresql"),
        ("nginxinc/nginx-unprivileged:1.27", "nginx-unprivileged"),
    ] {
        assert_eq!(image_name(image), Some(name), "{image}");
    }
    assert_eq!(image_name(""), None);
}

/// The words HAProxy runs with, for a container with `command` and `args` as given.
fn haproxy_words(fields: Value) -> Vec<String> {
    let mut c = json!({"name": "lb", "image": "haproxy:3.0"});
    for (k, v) in fields.as_object().unwrap() {
        c[k] = v.clone();
    }
    let c = container(c);
    let line = CommandLine::of(&c).unwrap();
    let haproxy = PROGRAMS.iter().find(|p| p.title == "HAProxy").unwrap();
    let words = line.for_program(haproxy);
    words.into_iter().map(str::to_owned).collect()
}

#[test]
fn the_haproxy_image_adds_master_worker_only_when_its_entrypoint_runs() {
    let cfg = "/usr/local/etc/haproxy/haproxy.cfg";
    assert_eq!(haproxy_words(json!({})), ["-W", "-db", "-f", cfg]);
    assert_eq!(
        haproxy_words(json!({"args": ["-f", "/c/h.cfg"]})),
        ["-W", "-db", "-f", "/c/h.cfg"]
    );
    assert_eq!(
        haproxy_words(json!({"args": ["haproxy", "-f", "/c/h.cfg"]})),
        ["-W", "-db", "-f", "/c/h.cfg"]
    );
    // `command` replaces the entrypoint: what it says is all that runs.
    assert_eq!(
        haproxy_words(json!({"command": ["haproxy", "-f", "/c/h.cfg"]})),
        ["-f", "/c/h.cfg"]
    );
    assert_eq!(
        haproxy_words(json!({"command": ["haproxy"], "args": ["-W", "-f /c/h.cfg"]})),
        ["-W", "-f", "/c/h.cfg"]
    );
}

#[test]
fn conditions_are_checked_on_the_command_line_that_runs() {
    let known = |value: Value| {
        let c = container(value);
        match identify(&PROGRAMS, &c) {
            Known::Program(p, _) => format!("program {}", p.title),
            Known::Unmet(p) => format!("unmet {}", p.title),
            Known::Unknown(name) => format!("unknown {name:?}"),
        }
    };
    let cases = [
        (json!({"name": "a", "image": "haproxy"}), "program HAProxy"),
        (
            json!({"name": "a", "image": "haproxy", "command": ["haproxy", "-f", "/x"]}),
            "unmet HAProxy",
        ),
        (
            json!({"name": "a", "image": "haproxy", "command": ["haproxy", "-Ws", "-f", "/x"]}),
            "program HAProxy",
        ),
        (
            json!({"name": "a", "image": "quay.io/thanos/thanos:v0.37", "args": ["rule", "--rule-file=/r/*.yaml"]}),
            "program Thanos ruler",
        ),
        (
            json!({"name": "a", "command": ["/bin/thanos", "receive"]}),
            "program Thanos receive",
        ),
        (
            json!({"name": "a", "image": "thanos", "args": ["store"]}),
            "program Thanos (other components)",
        ),
        (json!({"name": "a", "image": "caddy:2"}), "unmet Caddy"),
        (
            json!({"name": "a", "command": ["caddy", "run", "--watch"]}),
            "program Caddy",
        ),
        (
            json!({"name": "a", "image": "eclipse-mosquitto:2"}),
            "program Mosquitto",
        ),
        (
            json!({"name": "a", "image": "eclipse-mosquitto:2", "args": ["mosquitto"]}),
            "unmet Mosquitto",
        ),
        (
            json!({"name": "a", "image": "fluent/fluent-bit:3", "args": ["-Y"]}),
            "program Fluent Bit",
        ),
        (
            json!({"name": "a", "command": ["sh", "-c", "nginx"]}),
            "unknown None",
        ),
        (
            json!({"name": "a", "command": ["java", "-jar", "x"]}),
            "unknown Some(\"java\")",
        ),
    ];
    for (value, want) in cases {
        assert_eq!(known(value.clone()), want, "{value}");
    }
}

#[test]
fn flag_values_take_both_spellings_and_comma_lists() {
    let words = [
        "-runtime-config.file=/a/r.yaml,/b/r.yaml",
        "--store.sd-files",
        "/sd/*.json",
        "--other=/x",
    ];
    assert_eq!(
        flag_values(&words, &["--runtime-config.file", "--store.sd-files"]),
        ["/a/r.yaml", "/b/r.yaml", "/sd/*.json"]
    );
    assert!(flag_values(&words, &["--missing"]).is_empty());
}

#[test]
fn reloaders_are_known_by_image_by_name_and_by_their_flags() {
    let helper = |value: Value| reloader(&container(value));
    let listed = |title: &str| {
        Some(Helper::Listed(
            RELOADERS
                .iter()
                .find(|r| r.title.starts_with(title))
                .unwrap(),
        ))
    };
    assert_eq!(
        helper(json!({"name": "r", "image": "ghcr.io/jimmidyson/configmap-reload:v0.14.0"})),
        listed("configmap-reload")
    );
    assert_eq!(
        helper(
            json!({"name": "r", "image": "quay.io/prometheus-operator/prometheus-config-reloader:v0.80.0"})
        ),
        listed("prometheus-config-reloader")
    );
    assert_eq!(
        helper(json!({"name": "r", "image": "quay.io/kiwigrid/k8s-sidecar:1.30.0"})),
        listed("k8s-sidecar")
    );
    assert_eq!(
        helper(
            json!({"name": "r", "image": "thanos", "args": ["sidecar", "--reloader.config-file=/c/p.yaml"]})
        ),
        listed("Thanos sidecar")
    );
    assert_eq!(
        helper(json!({"name": "r", "image": "thanos", "args": ["query"]})),
        None
    );
    assert_eq!(
        helper(
            json!({"name": "r", "image": "mirror.example/tools/reloader:1", "args": ["--webhook-url=http://127.0.0.1:9090/-/reload"]})
        ),
        Some(Helper::Kin)
    );
    assert_eq!(helper(json!({"name": "r", "image": "nginx"})), None);
}

#[test]
fn watched_paths_come_from_flags_and_documented_directories() {
    let traefik = PROGRAMS.iter().find(|p| p.title == "Traefik").unwrap();
    assert_eq!(
        traefik.watched(&[
            "--configFile=/etc/traefik/traefik.yml",
            "--providers.file.directory=/dyn"
        ]),
        ["/dyn"]
    );
    assert!(
        traefik
            .watched(&[
                "--providers.file.directory=/dyn",
                "--providers.file.watch=false"
            ])
            .is_empty()
    );
    let grafana = PROGRAMS.iter().find(|p| p.title == "Grafana").unwrap();
    assert_eq!(grafana.watched(&[]), ["/var/lib/grafana/dashboards"]);
}
