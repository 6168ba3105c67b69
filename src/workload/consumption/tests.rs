use crate::workload::pod::PodSpec;
use serde_json::json;

use super::*;

fn spec(value: serde_json::Value) -> PodSpec {
    serde_json::from_value(value).expect("a pod spec")
}

fn key(kind: &str, name: &str, key: &str) -> Consumed {
    let id = match kind {
        "cm" => ConfigId::config_map(name),
        _ => ConfigId::secret(name),
    };
    Consumed::Key(id, key.to_owned())
}

#[test]
fn restart_only_counts_env_envfrom_and_every_subpath_mount() {
    let spec = spec(json!({
        "containers": [{
            "name": "app",
            "image": "nginx:1.27",
            "env": [
                {"name": "A", "valueFrom": {"configMapKeyRef": {"name": "env", "key": "a"}}},
                {"name": "P", "valueFrom": {"secretKeyRef": {"name": "db", "key": "pw", "optional": true}}}
            ],
            "envFrom": [{"configMapRef": {"name": "all"}}],
            "volumeMounts": [
                {"name": "conf", "mountPath": "/etc/app/app.conf", "subPath": "app.conf"},
                {"name": "dir", "mountPath": "/etc/dir"}
            ]
        }],
        "volumes": [
            {"name": "conf", "configMap": {"name": "files"}},
            {"name": "dir", "configMap": {"name": "mounted"}}
        ]
    }));
    let got = restart_only(&spec, &BTreeMap::new());
    let want: BTreeSet<Consumed> = [
        key("cm", "env", "a"),
        key("secret", "db", "pw"),
        Consumed::Whole(ConfigId::config_map("all")),
        key("cm", "files", "app.conf"),
    ]
    .into_iter()
    .collect();
    assert_eq!(
        got.consumed, want,
        "a hot-reloaded directory mount is not restart-only"
    );
    assert_eq!(got.optional, BTreeSet::from([ConfigId::secret("db")]));

    // The same mount in a container with no known reload signal counts like env...
    let mut unknown = spec.clone();
    unknown.containers[0].image = Some("example.com/api:1".into());
    let got = restart_only(&unknown, &BTreeMap::new());
    assert!(
        got.consumed
            .contains(&Consumed::Whole(ConfigId::config_map("mounted")))
    );
    // ...and so it does for nginx when the pod chooses restart.
    let chosen = BTreeMap::from([(crate::workload::ON_CHANGE.to_owned(), "restart".to_owned())]);
    let got = restart_only(&spec, &chosen);
    assert!(
        got.consumed
            .contains(&Consumed::Whole(ConfigId::config_map("mounted")))
    );
}

#[test]
fn mounted_reads_the_sidecars_volumes_with_their_items() {
    let spec = spec(json!({
        "containers": [
            {"name": "app", "volumeMounts": [
                {"name": "conf", "mountPath": "/etc/app"},
                {"name": "picked", "mountPath": "/etc/picked"},
                {"name": "unwatched", "mountPath": "/etc/other"}
            ]}
        ],
        "initContainers": [
            {"name": "config-reloader", "restartPolicy": "Always", "args": ["watch"], "volumeMounts": [
                {"name": "conf", "mountPath": "/etc/reload-injector/watch/conf"},
                {"name": "picked", "mountPath": "/etc/reload-injector/watch/picked"}
            ]}
        ],
        "volumes": [
            {"name": "conf", "configMap": {"name": "web", "optional": true}},
            {"name": "picked", "secret": {"secretName": "tls", "items": [{"key": "tls.crt", "path": "c"}]}},
            {"name": "unwatched", "configMap": {"name": "other"}}
        ]
    }));
    let got = mounted(&spec);
    let want: BTreeSet<Consumed> = [
        Consumed::Whole(ConfigId::config_map("web")),
        key("secret", "tls", "tls.crt"),
    ]
    .into_iter()
    .collect();
    assert_eq!(got.consumed, want);
    assert_eq!(got.optional, BTreeSet::from([ConfigId::config_map("web")]));
}

#[test]
fn no_sidecar_mounts_nothing_and_optional_needs_every_reference() {
    let spec = spec(json!({
        "containers": [{"name": "app",
            "env": [
                {"name": "A", "valueFrom": {"configMapKeyRef": {"name": "env", "key": "a", "optional": true}}},
                {"name": "B", "valueFrom": {"configMapKeyRef": {"name": "env", "key": "b"}}}
            ],
            "volumeMounts": [{"name": "conf", "mountPath": "/etc/app"}]}],
        "volumes": [{"name": "conf", "configMap": {"name": "web"}}]
    }));
    assert!(mounted(&spec).is_empty());
    assert!(
        restart_only(&spec, &BTreeMap::new()).optional.is_empty(),
        "one non-optional reference makes the object required"
    );
}

#[test]
fn an_init_containers_directory_read_is_restart_only_for_the_controller_too() {
    let spec = spec(json!({
        "initContainers": [{"name": "render", "image": "example/envsubst:1",
            "volumeMounts": [{"name": "tmpl", "mountPath": "/tmpl"}]}],
        "containers": [{"name": "app", "image": "example/app:1"}],
        "volumes": [{"name": "tmpl", "configMap": {"name": "templates"}}]
    }));
    let got = restart_only(&spec, &BTreeMap::new());
    assert_eq!(
        got.consumed,
        BTreeSet::from([Consumed::Whole(ConfigId::config_map("templates"))])
    );
}

#[test]
fn the_earlier_reads_are_those_of_the_version_before_the_catalogue() {
    // An OpenTelemetry Collector reloads on SIGHUP now; the version before the catalogue hashed
    // its mount, so a hash it stamped is over env + that mount.
    let otel = spec(json!({
        "containers": [{"name": "otel", "image": "otel/opentelemetry-collector-contrib:0.120.0",
            "env": [{"name": "A", "valueFrom": {"configMapKeyRef": {"name": "env", "key": "a"}}}],
            "volumeMounts": [{"name": "conf", "mountPath": "/conf"}]}],
        "volumes": [{"name": "conf", "configMap": {"name": "otel"}}]
    }));
    let none = BTreeMap::new();
    let now = restart_only(&otel, &none);
    assert_eq!(now.consumed, BTreeSet::from([key("cm", "env", "a")]));
    let earlier = restart_only_earlier(&otel, &none);
    assert_eq!(
        earlier.consumed,
        BTreeSet::from([
            key("cm", "env", "a"),
            Consumed::Whole(ConfigId::config_map("otel"))
        ])
    );
    // Where the catalogue changes nothing, the earlier reads are the pre-strategy ones.
    let nginx = spec(json!({
        "containers": [{"name": "web", "image": "nginx:1.27",
            "env": [{"name": "A", "valueFrom": {"configMapKeyRef": {"name": "env", "key": "a"}}}],
            "volumeMounts": [{"name": "conf", "mountPath": "/conf"}]}],
        "volumes": [{"name": "conf", "configMap": {"name": "site"}}]
    }));
    assert_eq!(
        restart_only_earlier(&nginx, &none),
        restart_only(&nginx, &none)
    );
}
