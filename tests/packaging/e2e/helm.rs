//! The Helm chart installed on the real test cluster (`tests/cluster_support`), as the README's
//! "With Helm" section says: the namespace made first, certificates by `reload-injector certs`
//! (mode `generated`), `helm install`; then an opted-in Deployment gets its hash and warnings
//! through kubectl; `helm upgrade` with changed values keeps the serving certificate while the
//! webhook keeps answering; `helm uninstall` removes everything the chart made, the
//! MutatingWebhookConfiguration included.
//!
//! The cluster has no node, so `serve` runs the way the other end-to-end tests run it: a local
//! process with the chart's ServiceAccount's identity (so the chart's RBAC is what the API
//! server enforces) and the chart's TLS Secret and hash key as its files. The one change to
//! what the chart renders is each webhook's `clientConfig`, pointed at that process by a Helm
//! post-renderer (`tests/helm_chart/plugins/local-webhook`), as the kustomize harness does.
//!
//! The commands and their output are written to `<cluster dir>/helm-transcript.txt`.

use crate::cluster_support;
use crate::helm;
use crate::tools;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use base64::Engine;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use cluster_support::objects::{config_map, container, deployment, env_from_config_map};
use cluster_support::procs::Proc;
use cluster_support::{Cluster, PATIENCE, free_port, write_kubeconfig};
use helm::{NAMESPACE, RELEASE};

const CONFIG_HASH: &str = "reload-injector.io/config-hash";

/// Every command run, with what it printed: the transcript the issue asks for.
struct Transcript {
    path: PathBuf,
    text: Mutex<String>,
}

impl Transcript {
    fn record(&self, command: &str, ok: bool, stdout: &str, stderr: &str) {
        let mut text = self.text.lock().unwrap();
        text.push_str(&format!("$ {command}\n"));
        for line in stdout.lines().chain(stderr.lines()) {
            text.push_str(&format!("  {line}\n"));
        }
        if !ok {
            text.push_str("  (failed)\n");
        }
        text.push('\n');
        std::fs::write(&self.path, text.as_bytes()).unwrap();
    }
}

struct Run<'a> {
    cluster: &'static Cluster,
    transcript: &'a Transcript,
    port: u16,
}

impl Run<'_> {
    /// helm with the cluster's admin kubeconfig and the local-webhook post-renderer available.
    /// `shown` is how the transcript spells the command.
    fn helm(&self, args: &[String], shown: &str) -> helm::Output {
        let python = tools::repo().join(".venv/bin/python");
        assert!(
            python.is_file(),
            "{} is missing (the post-renderer runs on it): run scripts/install-test-deps.sh",
            python.display()
        );
        let mut cmd = helm::command(args);
        cmd.env("KUBECONFIG", &self.cluster.kubeconfig)
            .env(
                "HELM_PLUGINS",
                tools::repo().join("tests/helm_chart/plugins"),
            )
            .env(
                "RELOAD_INJECTOR_PYTHON",
                tools::repo().join(".venv/bin/python"),
            );
        let out = helm::output(cmd);
        self.transcript
            .record(shown, out.ok, &out.stdout, &out.stderr);
        out
    }

    fn post_renderer(&self) -> Vec<String> {
        vec![
            "--post-renderer".into(),
            "local-webhook".into(),
            "--post-renderer-args".into(),
            self.port.to_string(),
        ]
    }

    fn kubectl(&self, args: &[&str], stdin: Option<&Value>) -> cluster_support::kubectl::Output {
        let mut cmd = self.cluster.kubectl(args);
        if let Some(object) = stdin {
            cmd = cmd.stdin(&object.to_string());
        }
        let out = cmd.try_run();
        let shown = match stdin {
            Some(o) => format!("kubectl {} <<< {}", args.join(" "), object_summary(o)),
            None => format!("kubectl {}", args.join(" ")),
        };
        // `get -o json` output is long: the transcript keeps its first lines.
        let stdout: String = out.stdout.lines().take(12).collect::<Vec<_>>().join("\n");
        self.transcript.record(&shown, out.ok, &stdout, &out.stderr);
        out
    }
}

fn object_summary(obj: &Value) -> String {
    format!(
        "{}/{}",
        obj["kind"].as_str().unwrap_or("?"),
        obj["metadata"]["name"].as_str().unwrap_or("?")
    )
}

fn chart_args(run: &Run, verb: &str, extra: &[String]) -> Vec<String> {
    let chart = helm::chart().to_string_lossy().into_owned();
    let mut args = vec![
        verb.to_owned(),
        RELEASE.to_owned(),
        chart,
        "-n".into(),
        NAMESPACE.into(),
    ];
    args.extend(extra.iter().cloned());
    args.extend(run.post_renderer());
    args
}

fn set_files(certs: &Path) -> Vec<String> {
    [
        ("certificates.generated.tlsCrt", "tls.crt"),
        ("certificates.generated.tlsKey", "tls.key"),
        ("certificates.generated.caCrt", "ca.crt"),
        ("secretHashKey.value", "secret-hash.key"),
    ]
    .iter()
    .flat_map(|(value, file)| {
        vec![
            "--set-file".to_owned(),
            format!("{value}={}", certs.join(file).display()),
        ]
    })
    .collect()
}

/// The data of a Secret in the release namespace, decoded. The transcript shows its keys and a
/// digest of its data, never the data.
fn secret_data(run: &Run, name: &str) -> Vec<(String, Vec<u8>)> {
    let args = ["get", "secret", name, "-n", NAMESPACE, "-o", "json"];
    let out = run.cluster.kubectl(&args).try_run();
    assert!(out.ok, "Secret {name}: {}", out.stderr);
    let json = out.json();
    let mut data: Vec<(String, Vec<u8>)> = json["data"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(v.as_str().unwrap())
                .unwrap();
            (k.clone(), bytes)
        })
        .collect();
    data.sort();
    let mut digest = Sha256::new();
    for (key, bytes) in &data {
        digest.update(key.as_bytes());
        digest.update(bytes);
    }
    let keys: Vec<&str> = data.iter().map(|(k, _)| k.as_str()).collect();
    run.transcript.record(
        &format!("kubectl {}", args.join(" ")),
        true,
        &format!(
            "data: {} (sha256 of keys and values: {})",
            keys.join(", "),
            &hex::encode(digest.finalize())[..16]
        ),
        "",
    );
    data
}

/// The MutatingWebhookConfiguration, if there is one; the transcript shows each webhook's
/// failurePolicy, timeout, URL and a digest of its caBundle.
fn webhook_configuration(run: &Run) -> Option<Value> {
    let args = [
        "get",
        "mutatingwebhookconfiguration",
        "reload-injector",
        "-o",
        "json",
    ];
    let out = run.cluster.kubectl(&args).try_run();
    let summary = if out.ok {
        let json = out.json();
        let hooks: Vec<String> = json["webhooks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| {
                let bundle = h["clientConfig"]["caBundle"].as_str().unwrap_or("");
                format!(
                    "{} failurePolicy={} timeoutSeconds={} url={} caBundle sha256 {}",
                    h["name"].as_str().unwrap_or("?"),
                    h["failurePolicy"].as_str().unwrap_or("?"),
                    h["timeoutSeconds"],
                    h["clientConfig"]["url"].as_str().unwrap_or("-"),
                    &hex::encode(Sha256::digest(bundle.as_bytes()))[..16]
                )
            })
            .collect();
        hooks.join("\n")
    } else {
        String::new()
    };
    run.transcript.record(
        &format!("kubectl {}", args.join(" ")),
        out.ok,
        &summary,
        &out.stderr,
    );
    out.ok.then(|| out.json())
}

/// `serve` as a local process with the chart's ServiceAccount and the chart's Secrets as files.
fn start_serve(run: &Run, dir: &Path) -> (Proc, u16) {
    let files = dir.join("serve-files");
    std::fs::create_dir_all(&files).unwrap();
    for (key, bytes) in secret_data(run, "reload-injector-tls") {
        std::fs::write(files.join(key), bytes).unwrap();
    }
    for (key, bytes) in secret_data(run, "reload-injector-hash-key") {
        std::fs::write(files.join(key), bytes).unwrap();
    }
    let request = json!({
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {"expirationSeconds": 86400},
    });
    let request_file = dir.join("helm-token-request.json");
    std::fs::write(&request_file, request.to_string()).unwrap();
    let token = run
        .cluster
        .kubectl(&[
            "create",
            &format!("--raw=/api/v1/namespaces/{NAMESPACE}/serviceaccounts/reload-injector/token"),
            "-f",
            request_file.to_str().unwrap(),
        ])
        .run()
        .json()["status"]["token"]
        .as_str()
        .expect("TokenRequest answered without a token")
        .to_owned();
    let kubeconfig = write_kubeconfig(
        &dir.join("helm-serve.kubeconfig"),
        &run.cluster.url,
        &dir.join("ca.crt"),
        &token,
    );
    let metrics = free_port();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_reload-injector"));
    cmd.env("KUBECONFIG", &kubeconfig)
        .env("POD_NAME", "helm-serve-0")
        .env("RELOAD_INJECTOR_NAMESPACE", NAMESPACE)
        .env_remove("RUST_LOG")
        .args(["--log-format=json", "serve"])
        .arg(format!("--listen=127.0.0.1:{}", run.port))
        .arg(format!("--metrics-listen=127.0.0.1:{metrics}"))
        .arg("--tls-cert")
        .arg(files.join("tls.crt"))
        .arg("--tls-key")
        .arg(files.join("tls.key"))
        .arg("--secret-hash-key-file")
        .arg(files.join("secret-hash.key"))
        .arg("--lease-duration=6s");
    let proc = Proc::start("serve-helm", cmd, &dir.join("serve-helm.log"));
    (proc, metrics)
}

fn ready(metrics: u16) -> bool {
    use std::io::{Read, Write};
    let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", metrics)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(std::time::Duration::from_secs(2)));
    if write!(s, "GET /readyz HTTP/1.0\r\n\r\n").is_err() {
        return false;
    }
    let mut text = String::new();
    let _ = s.read_to_string(&mut text);
    text.starts_with("HTTP/1.1 200") || text.starts_with("HTTP/1.0 200")
}

/// Applies a Deployment reading `key` of ConfigMap `web-env` through env; returns kubectl's
/// warnings and the stamped hash.
fn apply_web(run: &Run, namespace: &str, name: &str, key: &str) -> (Vec<String>, Option<String>) {
    let app = container(
        json!([env_from_config_map("UPSTREAM", "web-env", key)]),
        json!([]),
    );
    let object = deployment(name, 1, app, json!([]));
    let out = run.kubectl(&["apply", "-n", namespace, "-f", "-"], Some(&object));
    assert!(out.ok, "kubectl apply {name}: {}", out.stderr);
    let warnings = out.warnings();
    let stored = run.cluster.get(namespace, "deployment", name);
    let hash = stored["spec"]["template"]["metadata"]["annotations"][CONFIG_HASH]
        .as_str()
        .map(str::to_owned);
    run.transcript.record(
        &format!("kubectl get deployment {name} -n {namespace} -o json"),
        true,
        &format!("{CONFIG_HASH}: {}", hash.as_deref().unwrap_or("(none)")),
        "",
    );
    (warnings, hash)
}

#[test]
fn helm_install_upgrade_and_uninstall_on_the_test_cluster() {
    let cluster = Cluster::shared();
    let dir = &cluster.dir;
    let transcript = Transcript {
        path: dir.join("helm-transcript.txt"),
        text: Mutex::new(String::new()),
    };
    let run = Run {
        cluster,
        transcript: &transcript,
        port: free_port(),
    };

    // The namespace first, labelled as the kustomize base labels it (README, "With Helm").
    assert!(run.kubectl(&["create", "namespace", NAMESPACE], None).ok);
    assert!(
        run.kubectl(
            &[
                "label",
                "namespace",
                NAMESPACE,
                "pod-security.kubernetes.io/enforce=restricted",
                "reload-injector.io/inject=disabled",
            ],
            None,
        )
        .ok
    );

    // Certificates by the documented step (with 127.0.0.1: the API server calls the local
    // serve by that address).
    let certs = dir.join("helm-certs");
    let out = Command::new(env!("CARGO_BIN_EXE_reload-injector"))
        .args(["certs", "--out"])
        .arg(&certs)
        .args(["--namespace", NAMESPACE, "--ip", "127.0.0.1"])
        .output()
        .unwrap();
    transcript.record(
        &format!(
            "reload-injector certs --out {} --namespace {NAMESPACE} --ip 127.0.0.1",
            certs.display()
        ),
        out.status.success(),
        &String::from_utf8_lossy(&out.stdout),
        &String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success());

    // helm install, mode generated.
    let example = helm::chart().join("examples/generated.yaml");
    let mut values = vec!["-f".to_owned(), example.to_string_lossy().into_owned()];
    values.extend(set_files(&certs));
    let install = run.helm(
        &chart_args(&run, "install", &values),
        "helm install reload-injector charts/reload-injector -n reload-injector -f charts/reload-injector/examples/generated.yaml --set-file …(the four files) --post-renderer local-webhook --post-renderer-args PORT",
    );
    assert!(
        install.ok,
        "helm install: {}{}",
        install.stdout, install.stderr
    );
    assert!(
        install.stdout.contains("STATUS: deployed"),
        "{}",
        install.stdout
    );
    assert!(
        install.stdout.contains("reload-injector.io/inject=enabled"),
        "NOTES: {}",
        install.stdout
    );

    let mut get_manifest = helm::command(&["get", "manifest", RELEASE, "-n", NAMESPACE]);
    get_manifest.env("KUBECONFIG", &cluster.kubeconfig);
    let manifest = helm::output(get_manifest);
    assert!(manifest.ok, "helm get manifest: {}", manifest.stderr);
    let installed: Vec<Value> = tools::parse_yaml(&manifest.stdout);
    let names: Vec<String> = installed.iter().map(helm::object_name).collect();
    transcript.record(
        "helm get manifest reload-injector -n reload-injector   (its kinds and names)",
        true,
        &names.join("\n"),
        "",
    );
    for want in [
        "MutatingWebhookConfiguration/reload-injector",
        "Deployment/reload-injector",
        "Secret/reload-injector-tls",
        "Secret/reload-injector-hash-key",
        "ClusterRole/reload-injector",
    ] {
        assert!(
            names.iter().any(|n| n == want),
            "{want} not installed: {names:?}"
        );
    }
    // One installation per cluster: a second release, elsewhere, fails on the names taken.
    assert!(
        run.kubectl(&["create", "namespace", "reload-injector-2"], None)
            .ok
    );
    let mut second = vec![
        "install".to_owned(),
        "second".into(),
        helm::chart().to_string_lossy().into_owned(),
        "-n".into(),
        "reload-injector-2".into(),
    ];
    second.extend(values.iter().cloned());
    second.extend(run.post_renderer());
    let second = run.helm(
        &second,
        "helm install second charts/reload-injector -n reload-injector-2 -f charts/reload-injector/examples/generated.yaml --set-file …(the four files) --post-renderer local-webhook --post-renderer-args PORT   (must fail)",
    );
    assert!(!second.ok, "a second release installed: {}", second.stdout);
    assert!(
        second
            .stderr
            .contains("exists and cannot be imported into the current release"),
        "{}",
        second.stderr
    );

    let before =
        webhook_configuration(&run).expect("no MutatingWebhookConfiguration after install");
    let tls_before = secret_data(&run, "reload-injector-tls");

    let (mut serve, metrics) = start_serve(&run, dir);
    cluster.wait_for("serve (helm) to be ready", PATIENCE, || {
        if let Some(how) = serve.exited() {
            panic!("serve exited ({how}):\n{}", serve.tail(30));
        }
        ready(metrics).then_some(())
    });

    // An opted-in Deployment gets its hash and its warning through kubectl.
    let ns = cluster.namespace("helm", true);
    let cm = config_map("web-env", &[("upstream", "10.0.0.1"), ("other", "x")]);
    assert!(run.kubectl(&["apply", "-n", &ns, "-f", "-"], Some(&cm)).ok);
    let (warnings, hash) = apply_web(&run, &ns, "web", "upstream");
    let first_hash = hash.expect("no config-hash stamped after helm install");
    assert!(first_hash.starts_with("sha256:"), "{first_hash}");
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("reload-injector:") && w.contains("\"web-env\"")),
        "no reload-injector warning: {warnings:?}"
    );

    // An upgrade without the certificate files fails and changes nothing.
    let failed = run.helm(
        &chart_args(&run, "upgrade", &["-f".to_owned(), example.to_string_lossy().into_owned()]),
        "helm upgrade reload-injector charts/reload-injector -n reload-injector -f charts/reload-injector/examples/generated.yaml --post-renderer local-webhook --post-renderer-args PORT   (no files: must fail)",
    );
    assert!(!failed.ok, "an upgrade without the files succeeded");
    assert!(
        failed.stderr.contains("certificates.generated."),
        "{}",
        failed.stderr
    );

    // helm upgrade with changed values: same certificate, the webhook keeps answering.
    let changed = [
        "--reuse-values",
        "--set",
        "webhook.timeoutSeconds=3",
        "--set",
        "serve.rolloutDelay=2s",
    ]
    .map(str::to_owned);
    let upgrade = run.helm(
        &chart_args(&run, "upgrade", &changed),
        "helm upgrade reload-injector charts/reload-injector -n reload-injector --reuse-values --set webhook.timeoutSeconds=3 --set serve.rolloutDelay=2s --post-renderer local-webhook --post-renderer-args PORT",
    );
    assert!(
        upgrade.ok,
        "helm upgrade: {}{}",
        upgrade.stdout, upgrade.stderr
    );
    assert!(upgrade.stdout.contains("REVISION: 2"), "{}", upgrade.stdout);
    assert_eq!(
        secret_data(&run, "reload-injector-tls"),
        tls_before,
        "the serving certificate changed"
    );
    let after = webhook_configuration(&run).expect("no MutatingWebhookConfiguration after upgrade");
    for (old, new) in before["webhooks"]
        .as_array()
        .unwrap()
        .iter()
        .zip(after["webhooks"].as_array().unwrap())
    {
        assert_eq!(
            old["clientConfig"]["caBundle"],
            new["clientConfig"]["caBundle"]
        );
        assert_eq!(new["timeoutSeconds"], 3, "{new}");
    }
    let deployed = cluster.get(NAMESPACE, "deployment", "reload-injector");
    let args = &deployed["spec"]["template"]["spec"]["containers"][0]["args"];
    assert!(
        args.as_array()
            .unwrap()
            .iter()
            .any(|a| a == "--rollout-delay=2s"),
        "{args}"
    );
    let (warnings, hash) = apply_web(&run, &ns, "web", "other");
    let second_hash = hash.expect("no config-hash after helm upgrade");
    assert_ne!(
        second_hash, first_hash,
        "the hash did not follow the changed env"
    );
    assert!(!warnings.is_empty(), "no warning after helm upgrade");
    let (_, hash) = apply_web(&run, &ns, "web-2", "upstream");
    assert_eq!(hash.as_deref(), Some(first_hash.as_str()));
    assert!(
        serve.exited().is_none(),
        "serve exited during the upgrade:\n{}",
        serve.tail(30)
    );

    // helm uninstall: everything the chart made is gone, the webhook configuration included.
    let uninstall = run.helm(
        &[
            "uninstall".into(),
            RELEASE.into(),
            "-n".into(),
            NAMESPACE.into(),
            "--wait".into(),
        ],
        "helm uninstall reload-injector -n reload-injector --wait",
    );
    assert!(uninstall.ok, "helm uninstall: {}", uninstall.stderr);
    let mut left = Vec::new();
    for obj in &installed {
        let kind = obj["kind"].as_str().unwrap();
        let name = obj["metadata"]["name"].as_str().unwrap();
        let mut args = vec!["get", kind, name, "-o", "name", "--ignore-not-found"];
        if obj["metadata"].get("namespace").is_some() {
            args.extend(["-n", NAMESPACE]);
        }
        let out = cluster.kubectl(&args).try_run();
        if !out.stdout.trim().is_empty() {
            left.push(out.stdout.trim().to_owned());
        }
    }
    transcript.record(
        "(objects of the release still there after uninstall)",
        left.is_empty(),
        if left.is_empty() { "none" } else { "" },
        &left.join("\n"),
    );
    assert!(left.is_empty(), "left after helm uninstall: {left:?}");
    assert!(webhook_configuration(&run).is_none());
    let list = run.helm(
        &["list".into(), "-n".into(), NAMESPACE.into(), "-q".into()],
        "helm list -n reload-injector -q",
    );
    assert!(list.ok && list.stdout.trim().is_empty(), "{}", list.stdout);

    // Nothing calls a webhook that is gone: a Deployment applies, with no hash and no warning.
    serve.kill();
    let (warnings, hash) = apply_web(&run, &ns, "web-3", "upstream");
    assert!(
        hash.is_none() && warnings.is_empty(),
        "{hash:?} {warnings:?}"
    );
    eprintln!(
        "helm transcript ({}):\n{}",
        transcript.path.display(),
        transcript.text.lock().unwrap()
    );
}
