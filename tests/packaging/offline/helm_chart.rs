//! The Helm chart (`charts/reload-injector`), checked as the charts users trust are:
//! - `helm lint --strict` on the default values and on every example values file;
//! - every render (defaults, each example) passes the strict schema validation of
//!   `tests/packaging/offline/manifests.rs` (Kubernetes OpenAPI, cert-manager and Prometheus Operator CRDs) and its
//!   webhook safety checks;
//! - each certificate mode renders exactly what its kustomize counterpart builds, object for
//!   object: the defaults `manifests/cert-manager`, mode `secret` `manifests/` plus the caBundle,
//!   mode `generated` the overlay `certs/generate.sh` writes. What may differ is spelled out in
//!   [`HELM_LABELS`] and [`assert_same_objects`];
//! - each value changes what it should and nothing else (every documented value is exercised);
//! - bad values fail the render with a message naming the value;
//! - the chart README's values table is generated from `values.yaml`.
//!
//! Needs the pinned helm (`scripts/install-helm.sh`) and the manifest tools
//! (`scripts/install-test-deps.sh`); a missing one fails the test saying how to get it.

use crate::helm;
use crate::tools;
#[path = "../../helm_chart/values_table.rs"]
mod values_table;
use crate::webhook_safety;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use serde_json::Value;

use helm::{NAMESPACE, RELEASE, object_name, template};
use tools::{generated_overlay, render, repo, validate};

/// Helm's standard labels: the only fields of an object in which a render may differ from the
/// kustomize build (each with the value it must have).
const HELM_LABELS: [&str; 4] = [
    "helm.sh/chart",
    "app.kubernetes.io/instance",
    "app.kubernetes.io/version",
    "app.kubernetes.io/managed-by",
];

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| (*s).to_owned()).collect()
}

fn rendered(args: &[String]) -> Vec<Value> {
    template(args).unwrap_or_else(|e| panic!("helm template {args:?} failed: {e}"))
}

/// The files of `certs/generate.sh` (run with the freshly built binary), made once:
/// `(overlay dir, files dir)`.
fn generated() -> &'static (PathBuf, PathBuf) {
    static DIRS: OnceLock<(PathBuf, PathBuf)> = OnceLock::new();
    DIRS.get_or_init(|| {
        let out = generated_overlay("helm-generated");
        let files = out.join("files");
        (out, files)
    })
}

fn file_arg(value: &str, file: &Path) -> Vec<String> {
    vec!["--set-file".into(), format!("{value}={}", file.display())]
}

/// `--set-file` arguments for mode `secret`: the caBundle.
fn secret_mode_files() -> Vec<String> {
    file_arg(
        "certificates.caBundle",
        &generated().1.join("ca-bundle.b64"),
    )
}

/// `--set-file` arguments for mode `generated`: the certificate, key, CA and hash key.
fn generated_mode_files() -> Vec<String> {
    let files = &generated().1;
    [
        ("certificates.generated.tlsCrt", "tls.crt"),
        ("certificates.generated.tlsKey", "tls.key"),
        ("certificates.generated.caCrt", "ca.crt"),
        ("secretHashKey.value", "secret-hash.key"),
    ]
    .iter()
    .flat_map(|(value, file)| file_arg(value, &files.join(file)))
    .collect()
}

/// The defaults and every file in `charts/reload-injector/examples/`, each with the arguments
/// its comment tells users to add: `(label, args)`.
fn cases() -> Vec<(String, Vec<String>)> {
    let mut cases = vec![("defaults".to_owned(), Vec::new())];
    let dir = helm::chart().join("examples");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("failed to read the chart's examples/")
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    for file in files {
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        let mut args = vec!["-f".to_owned(), file.to_string_lossy().into_owned()];
        match name.as_str() {
            "secret.yaml" => args.extend(secret_mode_files()),
            "generated.yaml" => args.extend(generated_mode_files()),
            "cert-manager.yaml" | "ha.yaml" | "metrics.yaml" => {}
            other => panic!("examples/{other} is new: say in cases() which files it needs"),
        }
        cases.push((name, args));
    }
    assert!(cases.len() >= 6, "{cases:?}");
    cases
}

#[test]
fn helm_is_the_pinned_version() {
    let out = helm::run(&["version", "--short"]);
    assert!(out.ok, "helm version: {}", out.stderr);
    let want = format!("v{}", helm::pinned_version());
    assert!(
        out.stdout.trim().starts_with(&want),
        "helm says {:?}, scripts/install-helm.sh builds {want}",
        out.stdout.trim()
    );
}

#[test]
fn lint_is_strict_clean_on_the_defaults_and_every_example() {
    let chart = helm::chart().to_string_lossy().into_owned();
    for (label, args) in cases() {
        let mut all = vec!["lint".to_owned(), "--strict".into(), chart.clone()];
        all.extend(["--namespace".to_owned(), NAMESPACE.to_owned()]);
        all.extend(args);
        let out = helm::run(&all);
        let text = format!("{}{}", out.stdout, out.stderr);
        assert!(out.ok, "helm lint --strict ({label}): {text}");
        assert!(
            text.contains("1 chart(s) linted, 0 chart(s) failed"),
            "{label}: {text}"
        );
        assert!(
            !text.contains("[WARNING]") && !text.contains("[ERROR]"),
            "{label}: {text}"
        );
    }
}

#[test]
fn every_render_passes_schema_validation_and_the_webhook_safety_checks() {
    for (label, args) in cases() {
        let objects = rendered(&args);
        assert!(objects.len() >= 9, "{label}: {} objects", objects.len());
        let problems = validate(&objects, &format!("helm-{label}"));
        assert!(problems.is_empty(), "{label}: {problems:#?}");
        webhook_safety::assert_safe(&objects, NAMESPACE, &[]);
        for obj in &objects {
            let name = object_name(obj);
            let annotations = obj["metadata"]["annotations"].as_object();
            assert!(
                !annotations.is_some_and(|a| a.keys().any(|k| k.starts_with("helm.sh/hook"))),
                "{label}: {name} is a Helm hook"
            );
            let cluster_scoped = [
                "ClusterRole",
                "ClusterRoleBinding",
                "MutatingWebhookConfiguration",
            ]
            .contains(&obj["kind"].as_str().unwrap());
            if cluster_scoped {
                assert!(
                    obj["metadata"].get("namespace").is_none(),
                    "{label}: {name}"
                );
            } else {
                assert_eq!(obj["metadata"]["namespace"], NAMESPACE, "{label}: {name}");
            }
        }
    }
}

/// Asserts that the chart rendered exactly the kustomize build's objects. Allowed to differ:
/// - `metadata.labels` of every object has [`HELM_LABELS`] in addition, with exactly the values
///   Helm's conventions give them (and nothing else: pod template labels and selectors equal);
/// - kustomize's `Namespace` is not rendered: Helm keeps the release's record in the release
///   namespace, so that namespace exists before the chart is installed (`--create-namespace`,
///   or `kubectl create namespace` with the labels the README gives);
/// - `webhooks[].matchConditions[].expression` is compared with each run of whitespace made one
///   space: kustomize v4.5.4 re-emits a folded (`>-`) scalar with an extra line break before
///   each more-indented line, which changes the CEL text's whitespace and nothing else.
fn assert_same_objects(label: &str, chart: &[Value], kustomize: &[Value]) {
    assert!(
        chart.iter().all(|o| o["kind"] != "Namespace"),
        "{label}: the chart renders a Namespace"
    );
    let key = |o: &Value| {
        (
            object_name(o),
            o["metadata"]["namespace"].clone().to_string(),
        )
    };
    let ours: BTreeMap<_, &Value> = chart.iter().map(|o| (key(o), o)).collect();
    let theirs: BTreeMap<_, &Value> = kustomize
        .iter()
        .filter(|o| o["kind"] != "Namespace")
        .map(|o| (key(o), o))
        .collect();
    assert_eq!(ours.len(), chart.len(), "{label}: an object rendered twice");
    let names = |m: &BTreeMap<(String, String), &Value>| -> Vec<String> {
        m.keys().map(|(n, _)| n.clone()).collect()
    };
    assert_eq!(names(&ours), names(&theirs), "{label}: different objects");

    let app_version = chart_yaml()["appVersion"].as_str().unwrap().to_owned();
    let chart_label = format!(
        "reload-injector-{}",
        chart_yaml()["version"].as_str().unwrap()
    );
    let values = [chart_label.as_str(), RELEASE, app_version.as_str(), "Helm"];
    let want_labels: Vec<(&str, &str)> = HELM_LABELS.into_iter().zip(values).collect();
    for (key, ours) in &ours {
        let mut ours = (*ours).clone();
        let labels = ours["metadata"]["labels"]
            .as_object_mut()
            .unwrap_or_else(|| panic!("{label}: {} has no labels", key.0));
        for &(name, value) in &want_labels {
            assert_eq!(
                labels.remove(name),
                Some(Value::from(value)),
                "{label}: {} label {name}",
                key.0
            );
        }
        let mut built = theirs[key].clone();
        collapse_cel_whitespace(&mut ours);
        collapse_cel_whitespace(&mut built);
        let differences = diff(&built, &ours);
        assert!(
            differences.is_empty(),
            "{label}: {} differs from the kustomize build at {differences:#?}",
            key.0
        );
    }
}

/// Each run of whitespace in the webhooks' `matchConditions` expressions made one space.
fn collapse_cel_whitespace(obj: &mut Value) {
    let Some(hooks) = obj.get_mut("webhooks").and_then(Value::as_array_mut) else {
        return;
    };
    for hook in hooks {
        let Some(conditions) = hook
            .get_mut("matchConditions")
            .and_then(Value::as_array_mut)
        else {
            continue;
        };
        for condition in conditions {
            if let Some(text) = condition["expression"].as_str() {
                condition["expression"] =
                    Value::from(text.split_whitespace().collect::<Vec<_>>().join(" "));
            }
        }
    }
}

fn chart_yaml() -> Value {
    let text = std::fs::read_to_string(helm::chart().join("Chart.yaml")).unwrap();
    serde_saphyr::from_str(&text).expect("Chart.yaml parses")
}

#[test]
fn the_defaults_render_the_kustomize_base_with_its_cert_manager_overlay() {
    let chart = rendered(&[]);
    let kustomize = render(&repo().join("manifests/cert-manager"));
    assert_same_objects("defaults", &chart, &kustomize);
}

#[test]
fn mode_secret_renders_the_kustomize_base_with_the_ca_bundle() {
    let mut args = strings(&["--set", "certificates.mode=secret"]);
    args.extend(secret_mode_files());
    let chart = rendered(&args);
    let bundle = std::fs::read_to_string(generated().1.join("ca-bundle.b64")).unwrap();
    let mut kustomize = render(&repo().join("manifests"));
    for obj in &mut kustomize {
        if obj["kind"] == "MutatingWebhookConfiguration" {
            for hook in obj["webhooks"].as_array_mut().unwrap() {
                hook["clientConfig"]["caBundle"] = Value::from(bundle.trim());
            }
        }
    }
    assert_same_objects("mode secret", &chart, &kustomize);
}

#[test]
fn mode_generated_renders_what_certs_generate_sh_writes() {
    let mut args = strings(&[
        "--set",
        "certificates.mode=generated",
        "--set",
        "secretHashKey.create=true",
    ]);
    args.extend(generated_mode_files());
    let chart = rendered(&args);
    let kustomize = render(&generated().0);
    assert_same_objects("mode generated", &chart, &kustomize);
}

#[test]
fn nothing_is_generated_at_render_time() {
    // No certificate, key or password is made by a template, and nothing is read from the
    // cluster: a render depends on the values alone, so two renders are the same. The one
    // exception is templates/_made.tpl, used by certificate mode `helm` and a Secret-hash key
    // created without a value, which need a cluster (bad_values_fail_the_render_naming_the_value
    // shows they fail a render without one).
    let dir = helm::chart().join("templates");
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.ends_with("_made.tpl") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        for function in [
            "genCA",
            "genSelfSignedCert",
            "genSignedCert",
            "genPrivateKey",
            "randAlpha",
            "randAscii",
            "randNumeric",
            "randBytes",
            "uuidv4",
            "lookup",
            "now",
        ] {
            assert!(
                !text.contains(&format!("{function} ")) && !text.contains(&format!("({function}")),
                "{} uses {function}",
                path.display()
            );
        }
    }
    let mut args = generated_mode_files();
    args.extend(strings(&[
        "--set",
        "certificates.mode=generated",
        "--set",
        "secretHashKey.create=true",
    ]));
    assert_eq!(rendered(&args), rendered(&args));
}

#[test]
fn versions_follow_the_crate_and_the_kustomize_image() {
    let chart = chart_yaml();
    let cargo = env!("CARGO_PKG_VERSION");
    assert_eq!(chart["appVersion"], cargo, "Chart.yaml appVersion");
    assert_eq!(chart["version"], cargo, "Chart.yaml version");
    assert_eq!(
        chart["apiVersion"], "v2",
        "Helm 3 and 4 both install apiVersion v2 charts"
    );
    let kustomization =
        std::fs::read_to_string(repo().join("manifests/base/kustomization.yaml")).unwrap();
    assert!(
        kustomization.contains(&format!("newTag: \"{cargo}\"")),
        "manifests/base/kustomization.yaml does not pin the image at {cargo}"
    );
}

/// The paths (`/a/b/0/c`) at which `b` differs from `a`: a key added or removed, a scalar
/// changed, a list of another length (its own path).
fn diff(a: &Value, b: &Value) -> Vec<String> {
    fn walk(a: &Value, b: &Value, path: &str, out: &mut Vec<String>) {
        match (a, b) {
            (Value::Object(x), Value::Object(y)) => {
                let keys: BTreeSet<&String> = x.keys().chain(y.keys()).collect();
                for key in keys {
                    let here = format!("{path}/{key}");
                    match (x.get(key), y.get(key)) {
                        (Some(p), Some(q)) => walk(p, q, &here, out),
                        _ => out.push(here),
                    }
                }
            }
            (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
                for (i, (p, q)) in x.iter().zip(y).enumerate() {
                    walk(p, q, &format!("{path}/{i}"), out);
                }
            }
            _ if a != b => out.push(path.to_owned()),
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(a, b, "", &mut out);
    out
}

/// Every change between two renders: `+Kind/name` and `-Kind/name` for objects added and
/// removed, `Kind/name /path` for each difference inside an object.
fn changes(before: &[Value], after: &[Value]) -> BTreeSet<String> {
    let index = |objects: &[Value]| -> BTreeMap<String, Value> {
        objects
            .iter()
            .map(|o| (object_name(o), o.clone()))
            .collect()
    };
    let (before, after) = (index(before), index(after));
    let mut out = BTreeSet::new();
    for (name, obj) in &after {
        match before.get(name) {
            None => {
                out.insert(format!("+{name}"));
            }
            Some(old) => out.extend(diff(old, obj).into_iter().map(|p| format!("{name} {p}"))),
        }
    }
    out.extend(
        before
            .keys()
            .filter(|n| !after.contains_key(*n))
            .map(|n| format!("-{n}")),
    );
    out
}

const DEPLOY: &str = "Deployment/reload-injector";
const POD: &str = "Deployment/reload-injector /spec/template/spec";
const CONTAINER: &str = "Deployment/reload-injector /spec/template/spec/containers/0";
const HOOKS: &str = "MutatingWebhookConfiguration/reload-injector";
const SERVING: &str = "Certificate/reload-injector-serving";

/// One value's test: from the render with `base`, setting `set` changes exactly `changes`
/// (and, if given, `arg` is then one of serve's arguments).
struct Case {
    base: &'static [&'static str],
    set: Vec<String>,
    changes: Vec<String>,
    arg: Option<&'static str>,
}

fn case(set: &[&str], changes: &[&str]) -> Case {
    Case {
        base: &[],
        set: strings(set),
        changes: strings(changes),
        arg: None,
    }
}

fn serve_flag(set: &str, arg: &'static str) -> Case {
    Case {
        arg: Some(arg),
        ..case(&["--set", set], &[&format!("{CONTAINER}/args")])
    }
}

fn value_cases() -> Vec<Case> {
    let c = |s: &str| format!("{CONTAINER}{s}");
    let p = |s: &str| format!("{POD}{s}");
    // Every webhook: those of labelled namespaces and those of single opted-in objects.
    let both = |s: &str| -> Vec<String> {
        (0..4)
            .map(|i| format!("{HOOKS} /webhooks/{i}{s}"))
            .collect()
    };
    let hooks = |at: &[usize], s: &str| -> Vec<String> {
        at.iter()
            .map(|i| format!("{HOOKS} /webhooks/{i}{s}"))
            .collect()
    };
    let cert_manager_objects = [
        "-Certificate/reload-injector-ca",
        "-Certificate/reload-injector-serving",
        "-Issuer/reload-injector-ca",
        "-Issuer/reload-injector-selfsigned",
    ];
    let mut mode_secret = Case {
        set: [
            strings(&["--set", "certificates.mode=secret"]),
            secret_mode_files(),
        ]
        .concat(),
        changes: [
            both("/clientConfig/caBundle"),
            strings(&cert_manager_objects),
            vec![format!("{HOOKS} /metadata/annotations")],
        ]
        .concat(),
        ..case(&[], &[])
    };
    mode_secret.changes.sort();
    let mut files = generated_mode_files();
    let hash_key = files.split_off(6);
    let mode_generated = Case {
        set: [strings(&["--set", "certificates.mode=generated"]), files].concat(),
        changes: [
            both("/clientConfig/caBundle"),
            strings(&cert_manager_objects),
            vec![
                format!("{HOOKS} /metadata/annotations"),
                "+Secret/reload-injector-tls".into(),
            ],
        ]
        .concat(),
        ..case(&[], &[])
    };
    let hash_key_secret = Case {
        set: [strings(&["--set", "secretHashKey.create=true"]), hash_key].concat(),
        changes: strings(&["+Secret/reload-injector-hash-key"]),
        ..case(&[], &[])
    };
    let image = [c("/image"), c("/env/2/value")];
    let image: Vec<&str> = image.iter().map(String::as_str).collect();
    vec![
        case(&["--set", "image.repository=registry.example/ri"], &image),
        case(&["--set", "image.tag=9.9.9"], &image),
        case(
            &[
                "--set",
                "image.digest=sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
            ],
            &image,
        ),
        case(
            &["--set", "image.pullPolicy=Always"],
            &[&c("/imagePullPolicy")],
        ),
        case(
            &["--set", "image.pullSecrets[0].name=regcred"],
            &[&p("/imagePullSecrets")],
        ),
        case(
            &["--set", "replicas=3"],
            &[&format!("{DEPLOY} /spec/replicas")],
        ),
        case(
            &["--set", "replicas=1"],
            &[
                &format!("{DEPLOY} /spec/replicas"),
                "-PodDisruptionBudget/reload-injector",
            ],
        ),
        case(
            &["--set", "podDisruptionBudget.minAvailable=50%"],
            &["PodDisruptionBudget/reload-injector /spec/minAvailable"],
        ),
        case(
            &["--set", "resources.limits.memory=256Mi"],
            &[&c("/resources/limits/memory")],
        ),
        case(&["--set", "nodeSelector.disk=ssd"], &[&p("/nodeSelector")]),
        case(
            &[
                "--set-json",
                r#"tolerations=[{"key":"dedicated","operator":"Exists"}]"#,
            ],
            &[&p("/tolerations")],
        ),
        case(
            &["--set-json", r#"affinity={"nodeAffinity":{}}"#],
            &[&p("/affinity")],
        ),
        case(
            &["--set-json", "topologySpreadConstraints=[]"],
            &[&p("/topologySpreadConstraints")],
        ),
        case(
            &["--set", "priorityClassName=system-cluster-critical"],
            &[&p("/priorityClassName")],
        ),
        case(
            &["--set", "podAnnotations.example\\.com/team=a"],
            &[&format!("{DEPLOY} /spec/template/metadata/annotations")],
        ),
        case(
            &["--set", "podLabels.team=a"],
            &[&format!("{DEPLOY} /spec/template/metadata/labels/team")],
        ),
        case(
            &["--set", "podSecurityContext.runAsUser=1000"],
            &[&p("/securityContext/runAsUser")],
        ),
        case(
            &["--set", "securityContext.readOnlyRootFilesystem=false"],
            &[&c("/securityContext/readOnlyRootFilesystem")],
        ),
        Case {
            set: strings(&["--set", "webhook.pods.failurePolicy=Fail"]),
            changes: hooks(&[0, 2], "/failurePolicy"),
            ..case(&[], &[])
        },
        Case {
            set: strings(&["--set", "webhook.workloads.failurePolicy=Ignore"]),
            changes: hooks(&[1, 3], "/failurePolicy"),
            ..case(&[], &[])
        },
        // Without the webhooks of single opted-in objects, the list is shorter.
        case(
            &["--set", "webhook.optedInObjects=false"],
            &[&format!("{HOOKS} /webhooks")],
        ),
        Case {
            set: strings(&["--set", "webhook.timeoutSeconds=3"]),
            changes: both("/timeoutSeconds"),
            ..case(&[], &[])
        },
        Case {
            set: strings(&["--set", "webhook.reinvocationPolicy=Never"]),
            changes: both("/reinvocationPolicy"),
            ..case(&[], &[])
        },
        Case {
            set: strings(&["--set", "webhook.namespaceSelector.matchLabels.team=a"]),
            changes: both("/namespaceSelector/matchLabels"),
            ..case(&[], &[])
        },
        Case {
            set: strings(&["--set", "webhook.excludedNamespaces={istio-system}"]),
            changes: both("/namespaceSelector/matchExpressions/1/values"),
            ..case(&[], &[])
        },
        mode_secret,
        mode_generated,
        case(
            &["--set", "certificates.secretName=webhook-tls"],
            &[
                &format!("{SERVING} /spec/secretName"),
                &p("/volumes/0/secret/secretName"),
            ],
        ),
        case(
            &[
                "--set-json",
                r#"certificates.certManager.issuerRef={"name":"corp-ca","kind":"ClusterIssuer","group":"cert-manager.io"}"#,
            ],
            &[
                &format!("{SERVING} /spec/issuerRef/kind"),
                &format!("{SERVING} /spec/issuerRef/name"),
                "-Certificate/reload-injector-ca",
                "-Issuer/reload-injector-ca",
                "-Issuer/reload-injector-selfsigned",
            ],
        ),
        case(
            &["--set", "certificates.certManager.duration=2160h"],
            &[&format!("{SERVING} /spec/duration")],
        ),
        case(
            &["--set", "certificates.certManager.renewBefore=360h"],
            &[&format!("{SERVING} /spec/renewBefore")],
        ),
        case(
            &["--set", "certificates.certManager.caDuration=43800h"],
            &["Certificate/reload-injector-ca /spec/duration"],
        ),
        case(
            &["--set", "secretHashKey.secretName=hmac"],
            &[&p("/volumes/1/secret/secretName")],
        ),
        hash_key_secret,
        case(&["--set", "serve.logFormat=text"], &[&c("/args/6")]),
        serve_flag("serve.logLevel=debug", "--log-level=debug"),
        case(
            &["--set", "serve.sidecarImage=registry.example/watch:1"],
            &[&c("/env/2/value")],
        ),
        serve_flag("serve.nativeSidecars=never", "--native-sidecars=never"),
        serve_flag(
            "serve.envChange=restart-in-place",
            "--env-change=restart-in-place",
        ),
        serve_flag("serve.rollouts=false", "--rollouts=false"),
        serve_flag("serve.rolloutDelay=5s", "--rollout-delay=5s"),
        serve_flag("serve.maxWritesPerSecond=5", "--max-writes-per-second=5"),
        serve_flag("serve.leaseDuration=30s", "--lease-duration=30s"),
        serve_flag("serve.lookupTimeout=2s", "--lookup-timeout=2s"),
        serve_flag("serve.drainTimeout=20s", "--drain-timeout=20s"),
        serve_flag("serve.reloaderRetired=true", "--reloader-retired=true"),
        serve_flag("serve.extraArgs={--cache-ttl=1m}", "--cache-ttl=1m"),
        case(
            &["--set", "metrics.port=9100"],
            &[
                &c("/args/2"),
                &c("/ports/1/containerPort"),
                "Service/reload-injector /spec/ports/1/port",
            ],
        ),
        case(
            &["--set", "metrics.serviceMonitor.enabled=true"],
            &["+ServiceMonitor/reload-injector"],
        ),
        Case {
            base: &["--set", "metrics.serviceMonitor.enabled=true"],
            ..case(
                &["--set", "metrics.serviceMonitor.interval=10s"],
                &["ServiceMonitor/reload-injector /spec/endpoints/0/interval"],
            )
        },
        Case {
            base: &["--set", "metrics.serviceMonitor.enabled=true"],
            ..case(
                &["--set", "metrics.serviceMonitor.labels.release=prometheus"],
                &["ServiceMonitor/reload-injector /metadata/labels/release"],
            )
        },
        case(
            &["--set", "metrics.podMonitor.enabled=true"],
            &["+PodMonitor/reload-injector"],
        ),
        Case {
            base: &["--set", "metrics.podMonitor.enabled=true"],
            ..case(
                &["--set", "metrics.podMonitor.interval=10s"],
                &["PodMonitor/reload-injector /spec/podMetricsEndpoints/0/interval"],
            )
        },
        Case {
            base: &["--set", "metrics.podMonitor.enabled=true"],
            ..case(
                &["--set", "metrics.podMonitor.labels.release=prometheus"],
                &["PodMonitor/reload-injector /metadata/labels/release"],
            )
        },
        case(
            &["--set", "networkPolicy.enabled=true"],
            &["+NetworkPolicy/reload-injector"],
        ),
        Case {
            base: &["--set", "networkPolicy.enabled=true"],
            ..case(
                &[
                    "--set-json",
                    r#"networkPolicy.webhookFrom=[{"ipBlock":{"cidr":"10.0.0.0/8"}}]"#,
                ],
                &["NetworkPolicy/reload-injector /spec/ingress/0/from"],
            )
        },
        Case {
            base: &["--set", "networkPolicy.enabled=true"],
            ..case(
                &[
                    "--set-json",
                    r#"networkPolicy.metricsFrom=[{"podSelector":{}}]"#,
                ],
                &["NetworkPolicy/reload-injector /spec/ingress/1/from"],
            )
        },
    ]
}

/// The values a `--set…` argument list sets (`a.b[0].c=x` sets `a.b`'s `[0].c`: `a.b[0].c`).
fn set_keys(args: &[String]) -> Vec<String> {
    args.windows(2)
        .filter(|w| w[0].starts_with("--set"))
        .map(|w| w[1].split_once('=').unwrap().0.replace("\\.", "."))
        .collect()
}

#[test]
fn each_value_changes_what_it_should_and_nothing_else() {
    let mut failures = Vec::new();
    let cases = value_cases();
    for case in &cases {
        let base_args = strings(case.base);
        let before = rendered(&base_args);
        let after = rendered(&[base_args.clone(), case.set.clone()].concat());
        let got = changes(&before, &after);
        let want: BTreeSet<String> = case.changes.iter().cloned().collect();
        if got != want {
            failures.push(format!(
                "{:?}:\n  changed:  {got:?}\n  expected: {want:?}",
                set_keys(&case.set)
            ));
        }
        if let Some(arg) = case.arg {
            let deployment = after.iter().find(|o| o["kind"] == "Deployment").unwrap();
            let args = &deployment["spec"]["template"]["spec"]["containers"][0]["args"];
            if !args.as_array().unwrap().iter().any(|a| a == arg) {
                failures.push(format!("{:?}: no argument {arg} in {args}", case.set));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));

    // Every documented value is exercised by a case above.
    let exercised: Vec<String> = cases.iter().flat_map(|c| set_keys(&c.set)).collect();
    let text = std::fs::read_to_string(helm::chart().join("values.yaml")).unwrap();
    let untested: Vec<String> = values_table::rows(&text)
        .into_iter()
        .map(|r| r.path)
        .filter(|path| {
            !exercised.iter().any(|key| {
                key == path
                    || key.starts_with(&format!("{path}."))
                    || key.starts_with(&format!("{path}["))
            })
        })
        .collect();
    assert!(untested.is_empty(), "values no case sets: {untested:?}");
}

#[test]
fn every_flag_the_chart_can_pass_is_a_serve_flag() {
    let help = Command::new(env!("CARGO_BIN_EXE_reload-injector"))
        .args(["serve", "--help"])
        .output()
        .expect("failed to run reload-injector serve --help");
    let help = String::from_utf8_lossy(&help.stdout);
    let template =
        std::fs::read_to_string(helm::chart().join("templates/deployment.yaml")).unwrap();
    let flags: BTreeSet<&str> = template
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- --"))
        .map(|rest| rest.split(['=', ' ']).next().unwrap())
        .collect();
    assert!(flags.len() >= 14, "{flags:?}");
    for flag in flags {
        assert!(
            help.contains(&format!("--{flag} ")) || help.contains(&format!("--{flag}\n")),
            "the chart passes --{flag}, which `reload-injector serve --help` does not list"
        );
    }
}

#[test]
fn the_serve_defaults_values_yaml_names_are_serves_own() {
    // A `serve` value left empty passes no flag; its description names the default `serve`
    // then uses, which must be the one `serve --help` gives.
    let help = Command::new(env!("CARGO_BIN_EXE_reload-injector"))
        .args(["serve", "--help"])
        .output()
        .expect("failed to run reload-injector serve --help");
    let help = String::from_utf8_lossy(&help.stdout).into_owned();
    let text = std::fs::read_to_string(helm::chart().join("values.yaml")).unwrap();
    let mut checked = 0;
    for row in values_table::rows(&text) {
        let Some(rest) = row.description.split_once("not passed (`").map(|(_, r)| r) else {
            continue;
        };
        let default = rest.split('`').next().unwrap();
        let flag = row
            .description
            .strip_prefix("`--")
            .and_then(|d| d.split('`').next())
            .unwrap_or_else(|| {
                panic!("{}: the description does not start with its flag", row.path)
            });
        let start = help
            .find(&format!("      --{flag} "))
            .unwrap_or_else(|| panic!("serve --help has no --{flag}"));
        let section = help[start + 8..].split("\n      -").next().unwrap();
        assert!(
            section.contains(&format!("[default: {default}]")),
            "{}: values.yaml says --{flag} defaults to {default}; serve --help says:\n{section}",
            row.path
        );
        checked += 1;
    }
    assert!(checked >= 8, "only {checked} serve defaults found");
}

/// Values that would make a broken install: each fails the render, and the message names the
/// value. Returns helm's error for `args`, failing if the render succeeds.
fn render_error(args: &[String]) -> String {
    match template(args) {
        Ok(objects) => panic!(
            "helm template {args:?} rendered {} objects; it should have failed",
            objects.len()
        ),
        Err(e) => e,
    }
}

#[test]
fn bad_values_fail_the_render_naming_the_value() {
    let mut secret_files = secret_mode_files();
    let ca_in_wrong_mode = {
        secret_files.insert(0, "--set".into());
        secret_files.insert(1, "certificates.mode=certManager".into());
        secret_files
    };
    // The certificate and the CA, not the key.
    let files = generated_mode_files();
    let generated_without_key = [
        strings(&["--set", "certificates.mode=generated"]),
        files[0..2].to_vec(),
        files[4..6].to_vec(),
    ]
    .concat();
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            strings(&[
                "--set",
                "webhook.pods.failurePolicy=Fail",
                "--set",
                "replicas=1",
            ]),
            "webhook.pods.failurePolicy is Fail with replicas: 1",
        ),
        (
            strings(&["--set", "webhook.namespaceSelector.matchExpressions=null"]),
            "webhook.namespaceSelector is empty: it would select every namespace",
        ),
        (
            strings(&[
                "--set-json",
                "webhook.namespaceSelector.matchExpressions=[]",
            ]),
            "webhook.namespaceSelector is empty",
        ),
        (
            strings(&[
                "--set-json",
                r#"webhook.namespaceSelector.matchExpressions=[{"key":"team","operator":"Exists"}]"#,
            ]),
            "webhook.namespaceSelector does not require reload-injector.io/inject In [enabled]",
        ),
        (
            strings(&["--set", "certificates.mode=secret"]),
            "certificates.mode is secret but certificates.caBundle is empty",
        ),
        (
            strings(&[
                "--set",
                "certificates.mode=secret",
                "--set",
                "certificates.caBundle=bm90IGEgY2VydA==",
            ]),
            "certificates.caBundle is not a base64-encoded PEM certificate",
        ),
        (
            generated_without_key,
            "certificates.mode is generated but certificates.generated.tlsKey is empty",
        ),
        (
            strings(&["--set", "certificates.mode=generated"]),
            "certificates.mode is generated but certificates.generated.caCrt is empty",
        ),
        (
            ca_in_wrong_mode,
            "certificates.caBundle is set but certificates.mode is certManager",
        ),
        (
            [
                strings(&["--set", "certificates.mode=certManager"]),
                generated_mode_files(),
            ]
            .concat(),
            "certificates.generated.caCrt is set but certificates.mode is certManager",
        ),
        (
            [
                strings(&[
                    "--set",
                    "certificates.mode=secret",
                    "--set",
                    "certificates.certManager.issuerRef.name=corp",
                ]),
                secret_mode_files(),
            ]
            .concat(),
            "certificates.certManager.issuerRef is set but certificates.mode is secret",
        ),
        (
            strings(&["--set", "secretHashKey.create=true"]),
            "secretHashKey.create is true without a value: the chart makes it at helm install",
        ),
        (
            strings(&["--set", "certificates.mode=helm"]),
            "certificates.mode is helm: the chart makes it at helm install and keeps it on upgrade by looking it up in the cluster, and this render has no cluster",
        ),
        (
            strings(&["--set", "secretHashKey.value=abc"]),
            "secretHashKey.value is set but secretHashKey.create is false",
        ),
        (
            strings(&[
                "--set",
                "metrics.serviceMonitor.enabled=true",
                "--set",
                "metrics.podMonitor.enabled=true",
            ]),
            "metrics.serviceMonitor.enabled and metrics.podMonitor.enabled are both true",
        ),
        (
            strings(&["--set", "podDisruptionBudget.minAvailable=2"]),
            "podDisruptionBudget.minAvailable is 2 with replicas: 2",
        ),
        (
            strings(&["--set", "metrics.port=8443"]),
            "metrics.port is 8443",
        ),
        // values.schema.json: unknown keys, wrong types, values out of range.
        (
            strings(&["--set", "replica=3"]),
            "at '': additional properties 'replica' not allowed",
        ),
        (
            strings(&["--set", "webhook.failurePolicy=Fail"]),
            "at '/webhook': additional properties 'failurePolicy' not allowed",
        ),
        (
            strings(&["--set", "replicas=two"]),
            "at '/replicas': got string, want integer",
        ),
        (strings(&["--set", "replicas=0"]), "at '/replicas': minimum"),
        (
            strings(&["--set", "webhook.pods.failurePolicy=fail"]),
            "at '/webhook/pods/failurePolicy': value must be one of 'Ignore', 'Fail'",
        ),
        (
            strings(&["--set", "webhook.timeoutSeconds=60"]),
            "at '/webhook/timeoutSeconds': maximum",
        ),
        (
            strings(&["--set", "certificates.mode=selfSigned"]),
            "at '/certificates/mode': value must be one of 'certManager', 'secret', 'generated', 'helm'",
        ),
        (
            strings(&["--set", "serve.rolloutDelay=1sec"]),
            "at '/serve/rolloutDelay'",
        ),
        (
            strings(&["--set", "serve.rollouts=yes"]),
            "at '/serve/rollouts'",
        ),
        (
            strings(&["--set", "webhook.excludedNamespaces={Kube_System}"]),
            "at '/webhook/excludedNamespaces/0'",
        ),
        (
            strings(&["--set", "image.pullPolicy=Sometimes"]),
            "at '/image/pullPolicy'",
        ),
    ];
    let mut failures = Vec::new();
    for (args, want) in &cases {
        let error = render_error(args);
        if !error.contains(want) {
            failures.push(format!("{args:?}:\n  wanted {want:?}\n  got    {error}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn helm_install_refuses_bad_values_before_touching_a_cluster() {
    // The same checks run at `helm install` (here a client-side dry run: no cluster needed).
    let chart = helm::chart().to_string_lossy().into_owned();
    for (set, want) in [
        ("replicas=two", "at '/replicas': got string, want integer"),
        ("unknown=1", "additional properties 'unknown' not allowed"),
        ("certificates.mode=secret", "certificates.caBundle is empty"),
    ] {
        let out = helm::command(&[
            "install",
            RELEASE,
            &chart,
            "--namespace",
            NAMESPACE,
            "--dry-run=client",
            "--set",
            set,
        ])
        .env("KUBECONFIG", "/dev/null")
        .output()
        .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "helm install --set {set} succeeded");
        assert!(stderr.contains(want), "--set {set}: {stderr}");
    }
}

/// NOTES.txt, as `helm install` prints it (client-side dry run).
fn notes(args: &[&str]) -> String {
    let chart = helm::chart().to_string_lossy().into_owned();
    let mut all = vec![
        "install",
        RELEASE,
        &chart,
        "--namespace",
        NAMESPACE,
        "--dry-run=client",
    ];
    all.extend(args);
    let out = helm::command(&all)
        .env("KUBECONFIG", "/dev/null")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
        .split_once("NOTES:\n")
        .map(|(_, n)| n.to_owned())
        .expect("helm install printed no NOTES")
}

#[test]
fn notes_say_how_to_opt_in_and_how_to_ask_status() {
    let text = notes(&[]);
    for want in [
        "kubectl label namespace NAMESPACE reload-injector.io/inject=enabled",
        "kubectl reload-injector status deploy/NAME -n NAMESPACE",
        "kubectl -n reload-injector create secret generic reload-injector-hash-key",
        "kubectl -n reload-injector get certificate",
    ] {
        assert!(text.contains(want), "NOTES lack {want:?}:\n{text}");
    }
    assert!(!text.contains("WARNING"), "{text}");

    // One replica with a Fail workload webhook is allowed, with a warning.
    let text = notes(&["--set", "replicas=1"]);
    assert!(
        text.contains("WARNING: webhook.workloads.failurePolicy is Fail with replicas: 1"),
        "{text}"
    );
}

const TABLE_BEGIN: &str = "<!-- values-table:begin";
const TABLE_END: &str = "<!-- values-table:end -->";

#[test]
fn the_values_table_is_generated_from_values_yaml() {
    let values = std::fs::read_to_string(helm::chart().join("values.yaml")).unwrap();
    let table = values_table::markdown(&values_table::rows(&values));
    let readme_path = helm::chart().join("README.md");
    let readme = std::fs::read_to_string(&readme_path).unwrap();
    let start = readme
        .find(TABLE_BEGIN)
        .expect("the chart's README.md has no values-table:begin marker");
    let body_start = start + readme[start..].find("-->\n").unwrap() + 4;
    let end = readme
        .find(TABLE_END)
        .expect("the chart's README.md has no values-table:end marker");
    if std::env::var_os("UPDATE_README").is_some() {
        let updated = format!("{}{table}{}", &readme[..body_start], &readme[end..]);
        std::fs::write(&readme_path, updated).unwrap();
        return;
    }
    assert_eq!(
        &readme[body_start..end],
        table,
        "the chart README's values table is not the one values.yaml gives: run \
         UPDATE_README=1 cargo test --test packaging offline::helm_chart::the_values_table"
    );
}
