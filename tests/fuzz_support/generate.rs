//! Structure-aware generators: Pods and workload templates with the shapes the core reads
//! (containers, init containers and native sidecars, config volumes, mounts, env), the
//! product's annotations with odd values, odd users and names, fields from the future, and
//! now and then a field of the wrong JSON type anywhere in the object.

use proptest::prelude::*;
use proptest::sample::select;
use serde_json::{Map, Value, json};

/// A strategy for JSON values, boxed to keep the types short.
pub type Gen = BoxedStrategy<Value>;

/// ConfigMap names: the mock API and `--configs` know `cm-a` and `cm-b`.
const CONFIG_MAPS: &[&str] = &["cm-a", "cm-b", "cm-missing", ""];
/// Secret names: `sec-a` exists.
const SECRETS: &[&str] = &["sec-a", "sec-missing", ""];
/// Volume names, shared by volumes, mounts and the `watch` annotation (the last is the name
/// of the sidecar's own volume, taken by the user's).
const VOLUMES: &[&str] = &[
    "config",
    "settings",
    "creds",
    "scratch",
    "kube-api-access-x1",
    reload_injector::workload::NO_TOKEN_VOLUME,
];
/// Container names (`config-reloader`, the product's own sidecar, is added in [`container`]).
const CONTAINERS: &[&str] = &["app", "web", "cache", "init", "proxy"];

/// A name from `pool`, or now and then a huge, non-ASCII or control-character one.
fn name(pool: &'static [&'static str]) -> BoxedStrategy<String> {
    prop_oneof![
        24 => select(pool).prop_map(str::to_owned),
        1 => (1usize..400).prop_map(|n| "n".repeat(n)),
        1 => select(vec![
            "é-ü", "a\nb", "a\"b", "a b", "x\u{1b}[31m", "\u{202e}rtl", "ключ", "../secrets/sec-a",
            "cm-a?watch=1", "a#b", "..", "a%2Fb", "UPPER"
        ])
            .prop_map(str::to_owned),
    ]
    .boxed()
}

fn optional_bool() -> BoxedStrategy<Option<bool>> {
    prop::option::of(any::<bool>()).boxed()
}

/// Puts `value` at `key` unless it is `None`.
fn put<T: Into<Value>>(map: &mut Map<String, Value>, key: &str, value: Option<T>) {
    if let Some(v) = value {
        map.insert(key.to_owned(), v.into());
    }
}

fn items() -> BoxedStrategy<Option<Vec<Value>>> {
    let item = (
        select(vec!["app.conf", "k", "a/b", "", "nginx.conf"]),
        select(vec!["app.conf", "f", "a/b", "dir/f", "", "x"]),
    )
        .prop_map(|(key, path)| json!({"key": key, "path": path}));
    prop::option::of(prop::collection::vec(item, 0..3)).boxed()
}

fn config_map_source() -> Gen {
    (name(CONFIG_MAPS), optional_bool(), items())
        .prop_map(|(name, optional, items)| {
            let mut m = Map::new();
            m.insert("name".into(), name.into());
            put(&mut m, "optional", optional);
            put(&mut m, "items", items);
            Value::Object(m)
        })
        .boxed()
}

fn secret_projection() -> Gen {
    (name(SECRETS), optional_bool(), items())
        .prop_map(|(name, optional, items)| {
            let mut m = Map::new();
            m.insert("name".into(), name.into());
            put(&mut m, "optional", optional);
            put(&mut m, "items", items);
            Value::Object(m)
        })
        .boxed()
}

fn projection() -> Gen {
    prop_oneof![
        config_map_source().prop_map(|s| json!({"configMap": s})),
        secret_projection().prop_map(|s| json!({"secret": s})),
        Just(json!({"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}})),
        Just(json!({"downwardAPI": {"items": [{"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}]}})),
        Just(json!({"clusterTrustBundle": {"path": "ca.pem", "signerName": "x"}})),
    ]
    .boxed()
}

/// One volume: configMap, secret, projected (with and without a token), emptyDir, or a
/// source a newer Kubernetes might add.
fn volume() -> Gen {
    let source = prop_oneof![
        3 => config_map_source().prop_map(|s| json!({"configMap": s})),
        2 => (name(SECRETS), optional_bool(), items()).prop_map(|(n, optional, items)| {
            let mut m = Map::new();
            if !n.is_empty() {
                m.insert("secretName".into(), n.into());
            }
            put(&mut m, "optional", optional);
            put(&mut m, "items", items);
            json!({"secret": m})
        }),
        2 => prop::collection::vec(projection(), 0..4)
            .prop_map(|sources| json!({"projected": {"sources": sources, "defaultMode": 420}})),
        1 => Just(json!({"emptyDir": {}})),
        1 => Just(json!({"futureVolume": {"driver": "x", "nested": [1, {"a": null}]}})),
    ];
    (name(VOLUMES), source)
        .prop_map(|(name, mut source)| {
            source["name"] = name.into();
            source
        })
        .boxed()
}

fn mount() -> Gen {
    let sub_path = prop_oneof![
        4 => Just(None),
        2 => select(vec!["app.conf", "f", "a/b", "dir", ""]).prop_map(Some),
    ];
    let expr = prop_oneof![4 => Just(None), 1 => select(vec!["$(POD)", ""]).prop_map(Some)];
    (
        name(VOLUMES),
        select(vec![
            "/etc/app",
            "/etc/app/app.conf",
            "/x",
            "",
            reload_injector::workload::TOKEN_MOUNT_PATH,
        ]),
        sub_path,
        expr,
        optional_bool(),
    )
        .prop_map(|(name, path, sub_path, expr, read_only)| {
            let mut m = Map::new();
            m.insert("name".into(), name.into());
            m.insert("mountPath".into(), path.into());
            put(&mut m, "subPath", sub_path);
            put(&mut m, "subPathExpr", expr);
            put(&mut m, "readOnly", read_only);
            Value::Object(m)
        })
        .boxed()
}

fn env_var() -> Gen {
    let key_ref = |names: &'static [&'static str]| {
        (
            name(names),
            select(vec!["app.conf", "url", "k", ""]),
            optional_bool(),
        )
            .prop_map(|(name, key, optional)| {
                let mut m = Map::new();
                m.insert("name".into(), name.into());
                m.insert("key".into(), key.into());
                put(&mut m, "optional", optional);
                Value::Object(m)
            })
    };
    let value_from = prop_oneof![
        key_ref(CONFIG_MAPS).prop_map(|r| json!({"valueFrom": {"configMapKeyRef": r}})),
        key_ref(SECRETS).prop_map(|r| json!({"valueFrom": {"secretKeyRef": r}})),
        Just(json!({"valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}})),
        Just(json!({"value": "plain"})),
    ];
    (select(vec!["URL", "PASSWORD", "X"]), value_from)
        .prop_map(|(name, mut var)| {
            var["name"] = name.into();
            var
        })
        .boxed()
}

fn env_from() -> Gen {
    let reference = |names: &'static [&'static str]| {
        (name(names), optional_bool()).prop_map(|(name, optional)| {
            let mut m = Map::new();
            m.insert("name".into(), name.into());
            put(&mut m, "optional", optional);
            Value::Object(m)
        })
    };
    prop_oneof![
        reference(CONFIG_MAPS).prop_map(|r| json!({"configMapRef": r})),
        reference(SECRETS).prop_map(|r| json!({"secretRef": r, "prefix": "S_"})),
    ]
    .boxed()
}

/// `runAsUser`-style numbers: root, the usual, and the edges of the type.
fn user_id() -> BoxedStrategy<Option<i64>> {
    prop::option::of(select(vec![
        0i64,
        1000,
        65532,
        -1,
        i64::from(u32::MAX),
        i64::MAX,
        i64::MIN,
    ]))
    .boxed()
}

fn security_context() -> Gen {
    (user_id(), user_id(), optional_bool())
        .prop_map(|(user, group, non_root)| {
            let mut m = Map::new();
            put(&mut m, "runAsUser", user);
            put(&mut m, "runAsGroup", group);
            put(&mut m, "runAsNonRoot", non_root);
            Value::Object(m)
        })
        .boxed()
}

fn command() -> BoxedStrategy<Option<Vec<String>>> {
    prop::option::of(select(vec![
        vec!["nginx", "-g", "daemon off;"],
        vec!["/usr/sbin/nginx"],
        vec!["/bin/sh", "-c", "exec app"],
        vec![""],
        vec!["a b"],
        vec![],
    ]))
    .prop_map(|c| c.map(|c| c.into_iter().map(str::to_owned).collect()))
    .boxed()
}

/// A container; `restart_policy` matters only for init containers (native sidecars).
fn container() -> Gen {
    let restart =
        prop_oneof![3 => Just(None), 2 => Just(Some("Always")), 1 => Just(Some("OnFailure"))];
    let container_name = prop_oneof![
        12 => name(CONTAINERS),
        1 => Just(reload_injector::workload::SIDECAR_NAME.to_owned()),
    ];
    (
        container_name,
        command(),
        prop::collection::vec(mount(), 0..4),
        prop::collection::vec(env_var(), 0..3),
        prop::collection::vec(env_from(), 0..2),
        prop::option::of(security_context()),
        restart,
        any::<bool>(),
    )
        .prop_map(
            |(name, command, mounts, env, env_from, sc, restart, future)| {
                let mut m = Map::new();
                m.insert("name".into(), name.into());
                m.insert("image".into(), "example.test/app:1".into());
                put(&mut m, "command", command);
                if !mounts.is_empty() {
                    m.insert("volumeMounts".into(), mounts.into());
                }
                if !env.is_empty() {
                    m.insert("env".into(), env.into());
                }
                if !env_from.is_empty() {
                    m.insert("envFrom".into(), env_from.into());
                }
                put(&mut m, "securityContext", sc);
                put(&mut m, "restartPolicy", restart);
                if future {
                    m.insert("futureContainerField".into(), json!({"keep": ["me", 1]}));
                }
                Value::Object(m)
            },
        )
        .boxed()
}

fn spec() -> Gen {
    (
        prop::collection::vec(container(), 1..4),
        prop::collection::vec(container(), 0..3),
        prop::collection::vec(volume(), 0..5),
        (optional_bool(), optional_bool()),
        prop::option::of(select(vec!["Always", "Never", "OnFailure"])),
        prop::option::of(security_context()),
        any::<bool>(),
    )
        .prop_map(
            |(containers, inits, volumes, (share, host_pid), restart, sc, future)| {
                let mut m = Map::new();
                m.insert("containers".into(), containers.into());
                if !inits.is_empty() {
                    m.insert("initContainers".into(), inits.into());
                }
                if !volumes.is_empty() {
                    m.insert("volumes".into(), volumes.into());
                }
                put(&mut m, "shareProcessNamespace", share);
                put(&mut m, "hostPID", host_pid);
                put(&mut m, "restartPolicy", restart);
                put(&mut m, "securityContext", sc);
                if future {
                    m.insert("futurePodField".into(), json!({"mode": "x", "list": [{}]}));
                }
                Value::Object(m)
            },
        )
        .boxed()
}

/// The product's annotations with ordinary and odd values (see the README's table).
fn annotations() -> Gen {
    let entry = prop_oneof![
        1 => select(vec!["false", "FALSE", " false ", "true", "", "no"])
            .prop_map(|v| ("reload-injector.io/inject", v.to_owned())),
        2 => select(vec![
            "http://127.0.0.1:9090/-/reload",
            "https://localhost/r",
            "ftp://x",
            "http://",
            "http:///p",
            "http://a b",
            "http://a\n",
            ""
        ])
        .prop_map(|v| ("reload-injector.io/reload-url", v.to_owned())),
        2 => select(vec![
            "SIGHUP",
            "hup",
            " usr1 ",
            "10",
            "0",
            "65",
            "-1",
            "SIGBOGUS",
            "",
            "SIGHUP; rm -rf /"
        ])
        .prop_map(|v| ("reload-injector.io/signal", v.to_owned())),
        2 => prop_oneof![
            select(vec!["nginx", "", "a b", "/usr/bin/x", "x\u{7}"]).prop_map(str::to_owned),
            (200usize..300).prop_map(|n| "p".repeat(n)),
        ]
        .prop_map(|v| ("reload-injector.io/process", v)),
        2 => select(vec![
            "config",
            "config,settings",
            ",,",
            "nope",
            " config , creds ",
            "scratch",
            ""
        ])
        .prop_map(|v| ("reload-injector.io/watch", v.to_owned())),
        2 => select(vec!["true", "TRUE", " true", "yes", ""])
            .prop_map(|v| ("reload-injector.io/allow-subpath", v.to_owned())),
        2 => select(vec!["sha256:stale", "", "sha256:0000"])
            .prop_map(|v| ("reload-injector.io/config-hash", v.to_owned())),
        2 => select(vec!["0.0.1", ""]).prop_map(|v| ("reload-injector.io/injected", v.to_owned())),
        2 => select(vec!["x", "a\u{0}b"]).prop_map(|v| ("example.com/other", v.to_owned())),
    ];
    prop::collection::vec(entry, 0..5)
        .prop_map(|entries| {
            let map: Map<String, Value> = entries
                .into_iter()
                .map(|(k, v)| (k.to_owned(), Value::String(v)))
                .collect();
            Value::Object(map)
        })
        .boxed()
}

/// `metadata` of a pod (template): name or generateName, annotations, opt-out label,
/// controller owner.
fn metadata() -> Gen {
    (
        prop::option::of(name(CONTAINERS)),
        any::<bool>(),
        prop::option::of(annotations()),
        prop::option::weighted(0.1, select(vec!["false", "true", "FALSE"])),
        prop::option::of(any::<bool>()),
    )
        .prop_map(|(name, generate, annotations, inject_label, controller)| {
            let mut m = Map::new();
            if let Some(name) = name {
                let key = if generate { "generateName" } else { "name" };
                m.insert(key.into(), name.into());
            }
            put(&mut m, "annotations", annotations);
            if let Some(label) = inject_label {
                m.insert("labels".into(), json!({"reload-injector.io/inject": label}));
            }
            if let Some(controller) = controller {
                m.insert(
                    "ownerReferences".into(),
                    json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs",
                            "uid": "u", "controller": controller}]),
                );
            }
            m.insert(
                "managedFields".into(),
                json!([{"manager": "kubectl", "fieldsV1": {"f:x": {}}}]),
            );
            Value::Object(m)
        })
        .boxed()
}

/// A pod (template): metadata and spec.
pub fn pod() -> Gen {
    (metadata(), spec())
        .prop_map(|(metadata, spec)| json!({"metadata": metadata, "spec": spec}))
        .boxed()
}

/// The kinds of object reviewed: (group, apiVersion, kind).
pub const KINDS: &[(&str, &str, &str)] = &[
    ("", "v1", "Pod"),
    ("apps", "apps/v1", "Deployment"),
    ("apps", "apps/v1", "StatefulSet"),
    ("apps", "apps/v1", "DaemonSet"),
    ("apps", "apps/v1", "ReplicaSet"),
    ("batch", "batch/v1", "Job"),
    ("batch", "batch/v1", "CronJob"),
    ("argoproj.io", "argoproj.io/v1alpha1", "Rollout"),
    ("", "v1", "Service"),
    ("apps", "apps/v1beta1", "Pod"),
];

/// A whole object of `kind` around `pod`, with a controller owner or not.
pub fn wrap(kind: (&str, &str, &str), pod: Value, owned: bool) -> Value {
    let (_, api_version, kind) = kind;
    let mut object = match kind {
        "Pod" => {
            let mut pod = pod;
            pod["apiVersion"] = api_version.into();
            pod["kind"] = kind.into();
            pod
        }
        "CronJob" => json!({
            "apiVersion": api_version, "kind": kind, "metadata": {"name": "cj"},
            "spec": {"schedule": "* * * * *", "jobTemplate": {"spec": {"template": pod}}}
        }),
        _ => json!({
            "apiVersion": api_version, "kind": kind, "metadata": {"name": "w"},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"a": "b"}}, "template": pod}
        }),
    };
    if owned && kind != "Pod" {
        object["metadata"]["ownerReferences"] = json!([{"apiVersion": "apps/v1", "kind": "Deployment", "name": "d", "uid": "u", "controller": true}]);
    }
    object
}

/// Replaces the value at a random place of `value` with `replacement` (wrong-type fields).
pub fn corrupt(value: &mut Value, mut choice: usize, replacement: Value) {
    let mut here = value;
    loop {
        let children = match here {
            Value::Object(map) => map.len(),
            Value::Array(items) => items.len(),
            _ => 0,
        };
        if children == 0 || choice.is_multiple_of(4) {
            *here = replacement;
            return;
        }
        let index = (choice / 4) % children;
        choice /= 3;
        here = match here {
            Value::Object(map) => map.values_mut().nth(index).expect("index in range"),
            Value::Array(items) => &mut items[index],
            _ => unreachable!("has children"),
        };
        if choice == 0 {
            *here = replacement;
            return;
        }
    }
}

/// Any small JSON value, for [`corrupt`].
pub fn any_json() -> Gen {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        Just(json!(1.5e300)),
        ".{0,8}".prop_map(Value::from),
        Just(json!([])),
        Just(json!({})),
        Just(json!([{"name": 1}])),
    ]
    .boxed()
}

/// A generated object of one of [`KINDS`], with a wrong-typed field one time in eight.
pub fn object() -> BoxedStrategy<(usize, Value)> {
    // Pods most often (the sidecar goes there), each workload kind, now and then a kind or
    // version the webhook does not handle.
    let kind = prop_oneof![4 => Just(0usize), 7 => 1..8usize, 1 => 8..KINDS.len()];
    (
        kind,
        pod(),
        prop_oneof![7 => Just(false), 1 => Just(true)],
        prop::option::weighted(0.12, (any::<usize>(), any_json())),
    )
        .prop_map(|(kind, pod, owned, corruption)| {
            let mut object = wrap(KINDS[kind], pod, owned);
            if let Some((choice, replacement)) = corruption {
                corrupt(&mut object, choice, replacement);
            }
            (kind, object)
        })
        .boxed()
}

/// uids as the API server sends them, and odd ones.
fn uid() -> BoxedStrategy<String> {
    prop_oneof![
        4 => Just("5f2d8a8e-3c1b-4a1e-9d7e-0b6f4c2a9e11".to_owned()),
        1 => Just(String::new()),
        1 => select(vec!["a\"b\\c", "\u{0}\u{1f}", "ü💥", "</script>"]).prop_map(str::to_owned),
        1 => (1000usize..5000).prop_map(|n| "u".repeat(n)),
    ]
    .boxed()
}

/// A whole AdmissionReview body.
pub fn review() -> Gen {
    (
        object(),
        prop::option::of(pod()),
        uid(),
        prop_oneof![
            6 => Just("CREATE"),
            3 => Just("UPDATE"),
            1 => select(vec!["DELETE", "CONNECT", "create"]),
        ],
        prop_oneof![
            6 => Just("shop"),
            1 => select(vec!["kube-system", "reload-injector", "", "n"]),
        ],
        optional_bool(),
        any::<bool>(),
    )
        .prop_map(|((kind, object), old_pod, uid, operation, namespace, dry_run, same_old)| {
            let (group, version, kind_name) = KINDS[kind];
            let version = version.rsplit('/').next().unwrap_or(version);
            let mut request = json!({
                "uid": uid,
                "kind": {"group": group, "version": version, "kind": kind_name},
                "resource": {"group": group, "version": version, "resource": "x"},
                "namespace": namespace,
                "operation": operation,
                "userInfo": {"username": "fuzz"},
                "object": object,
            });
            if operation == "UPDATE" {
                request["oldObject"] = match old_pod {
                    _ if same_old => request["object"].clone(),
                    Some(pod) => wrap(KINDS[kind], pod, false),
                    None => Value::Null,
                };
            }
            if let Some(dry_run) = dry_run {
                request["dryRun"] = dry_run.into();
            }
            json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request})
        })
        .boxed()
}

/// Edits bytes of `seed`: each `(position, op, byte)` flips, inserts, deletes or truncates.
pub fn mutate(seed: &[u8], edits: &[(usize, u8, u8)]) -> Vec<u8> {
    let mut out = seed.to_vec();
    for &(position, op, byte) in edits {
        let at = if out.is_empty() {
            0
        } else {
            position % (out.len() + 1)
        };
        match op % 5 {
            0 if at < out.len() => out[at] ^= byte | 1,
            1 => out.insert(at, byte),
            2 if at < out.len() => {
                out.remove(at);
            }
            3 => out.truncate(at),
            _ => {
                // Splice in a JSON/YAML token, which random bytes rarely produce.
                let tokens: [&[u8]; 8] = [
                    b"{}", b"[]", b"null", b"\"x\"", b"-1", b": ", b"\n- ", b"1e999",
                ];
                let token = tokens[usize::from(byte) % tokens.len()];
                out.splice(at..at, token.iter().copied());
            }
        }
    }
    out
}

/// Byte edits for [`mutate`].
pub fn edits() -> BoxedStrategy<Vec<(usize, u8, u8)>> {
    prop::collection::vec((any::<usize>(), any::<u8>(), any::<u8>()), 1..8).boxed()
}
