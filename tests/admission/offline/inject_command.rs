//! The `inject` command as a user runs it: the real binary, files and stdin, exit codes.

use std::io::Write;
use std::process::{Command, Output, Stdio};

use reload_injector::workload::{NO_TOKEN_VOLUME, TOKEN_MOUNT_PATH};
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_reload-injector");

fn inject(args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(BIN)
        .arg("inject")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run reload-injector");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin.as_bytes())
        .expect("write stdin");
    child.wait_with_output().expect("wait")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn documents(output: &Output) -> Vec<Value> {
    serde_saphyr::from_multiple(&text(&output.stdout)).expect("stdout is YAML")
}

/// What `container` mounts at the service-account token path.
fn token_mounts(container: &Value) -> Vec<&Value> {
    container["volumeMounts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["mountPath"] == TOKEN_MOUNT_PATH)
        .collect()
}

/// The sidecar mounts its own empty volume at the token path, once, and the pod has that
/// volume once: the API server then mounts no token into it.
fn assert_sidecar_holds_no_token(spec: &Value, sidecar: &Value) {
    let mounts = token_mounts(sidecar);
    assert_eq!(mounts.len(), 1, "{sidecar}");
    assert_eq!(mounts[0]["name"], NO_TOKEN_VOLUME);
    assert_eq!(mounts[0]["readOnly"], true);
    let ours: Vec<&Value> = spec["volumes"]
        .as_array()
        .expect("volumes")
        .iter()
        .filter(|v| v["name"] == NO_TOKEN_VOLUME)
        .collect();
    assert_eq!(ours.len(), 1, "{spec}");
    assert_eq!(ours[0]["emptyDir"]["medium"], "Memory", "{spec}");
}

#[test]
fn the_readme_demo_injects_and_hashes() {
    let out = inject(
        &[
            "-f",
            "examples/nginx.yaml",
            "--configs",
            "examples/nginx-configs.yaml",
        ],
        "",
    );
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    let docs = documents(&out);
    assert_eq!(docs.len(), 1);
    let template = &docs[0]["spec"]["template"];
    let hash = template["metadata"]["annotations"]["reload-injector.io/config-hash"]
        .as_str()
        .expect("hash stamped");
    assert!(hash.starts_with("sha256:"));
    let sidecar = &template["spec"]["initContainers"][0];
    assert_eq!(sidecar["name"], "config-reloader");
    assert_eq!(sidecar["restartPolicy"], "Always");
    assert_eq!(template["spec"]["shareProcessNamespace"], true);
    assert_sidecar_holds_no_token(&template["spec"], sidecar);
    let app = &template["spec"]["containers"][0];
    assert!(
        token_mounts(app).is_empty(),
        "the app is left as written: {app}"
    );
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("reload-injector: container \"nginx\" reads ConfigMap \"web-env\" via env"),
        "{stderr}"
    );
}

#[test]
fn output_can_be_injected_again_without_change() {
    let first = inject(
        &[
            "-f",
            "examples/nginx.yaml",
            "--configs",
            "examples/nginx-configs.yaml",
        ],
        "",
    );
    assert_eq!(first.status.code(), Some(0));
    let second = inject(
        &["-f", "-", "--configs", "examples/nginx-configs.yaml"],
        &text(&first.stdout),
    );
    assert_eq!(
        second.status.code(),
        Some(0),
        "stderr: {}",
        text(&second.stderr)
    );
    assert_eq!(
        documents(&first),
        documents(&second),
        "inject is idempotent"
    );
}

#[test]
fn a_subpath_mount_is_denied_with_exit_1_and_no_output() {
    let out = inject(&["-f", "examples/subpath.yaml"], "");
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty(), "nothing to apply when denied");
    let stderr = text(&out.stderr);
    assert!(stderr.contains("Deployment/legacy"), "{stderr}");
    assert!(stderr.contains("subPath \"nginx.conf\""), "{stderr}");
    assert!(
        stderr.contains("mount the volume as a directory"),
        "{stderr}"
    );
}

#[test]
fn unreadable_yaml_exits_2_with_the_location() {
    let out = inject(&["-f", "-"], "kind: Pod\nmetadata: [unclosed\n");
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("failed to parse - as YAML"), "{stderr}");
    assert!(stderr.contains("line"), "the error says where: {stderr}");
}

#[test]
fn a_missing_file_exits_2() {
    let out = inject(&["-f", "does/not/exist.yaml"], "");
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("failed to read does/not/exist.yaml"));
}

#[test]
fn a_malformed_pod_spec_exits_2_naming_the_object() {
    let pod = "apiVersion: v1\nkind: Pod\nmetadata: {name: broken}\nspec: {containers: 7}\n";
    let out = inject(&["-f", "-"], pod);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("Pod/broken"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn lists_multi_documents_and_unknown_kinds_pass_through() {
    let input = r#"
apiVersion: v1
kind: List
items:
  - apiVersion: v1
    kind: Pod
    metadata: {name: a}
    spec:
      securityContext: {runAsUser: 1}
      containers: [{name: app, image: nginx, volumeMounts: [{name: c, mountPath: /c}]}]
      volumes: [{name: c, configMap: {name: c}}]
---
apiVersion: apps/v1beta1
kind: Deployment
metadata: {name: old-api}
spec: {template: {spec: {containers: [{name: app, image: x, volumeMounts: [{name: c, mountPath: /c, subPath: f}]}], volumes: [{name: c, configMap: {name: c}}]}}}
---
apiVersion: example.com/v1
kind: Widget
metadata: {name: w}
spec: {anything: [1, 2]}
"#;
    let out = inject(&["-f", "-", "-o", "json"], input);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    let docs: Vec<Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON per line"))
        .collect();
    assert_eq!(docs.len(), 3);
    assert_eq!(
        docs[0]["items"][0]["spec"]["initContainers"][0]["name"],
        "config-reloader"
    );
    assert_eq!(
        docs[1]["apiVersion"], "apps/v1beta1",
        "unknown apiVersion untouched"
    );
    // ...but not silently: it carries pods, so the linter says it was not checked.
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(
            r#"Deployment/old-api: reload-injector: "apps/v1beta1" "Deployment" is not a kind"#
        ),
        "{stderr}"
    );
    assert!(!stderr.contains("Widget/w"), "{stderr}");
    assert!(
        docs[1]["spec"]["template"]["spec"]
            .get("initContainers")
            .is_none()
    );
    assert_eq!(docs[2]["spec"]["anything"], serde_json::json!([1, 2]));
}

#[test]
fn native_sidecars_never_puts_the_watcher_in_containers() {
    let out = inject(
        &["-f", "examples/nginx.yaml", "--native-sidecars", "never"],
        "",
    );
    assert_eq!(out.status.code(), Some(0));
    let spec = &documents(&out)[0]["spec"]["template"]["spec"];
    assert_eq!(spec["containers"][1]["name"], "config-reloader");
    assert!(spec.get("initContainers").is_none());
    assert_sidecar_holds_no_token(spec, &spec["containers"][1]);
}

#[test]
fn secret_values_never_reach_the_output() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("ri-inject-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp");
    let configs = dir.join("configs.yaml");
    std::fs::write(
        &configs,
        "apiVersion: v1\nkind: Secret\nmetadata: {name: db}\nstringData: {password: very-secret-value}\n",
    )
    .expect("write");
    let key = dir.join("key");
    std::fs::write(&key, "0123456789abcdef\n").expect("write");
    let pod = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - name: app\n    image: x\n    env: [{name: P, valueFrom: {secretKeyRef: {name: db, key: password}}}]\n";
    let args = [
        "-f",
        "-",
        "--configs",
        configs.to_str().expect("utf-8"),
        "--secret-hash-key-file",
        key.to_str().expect("utf-8"),
    ];
    let out = inject(&args, pod);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(!all.contains("very-secret-value"));
    let hash =
        documents(&out)[0]["metadata"]["annotations"]["reload-injector.io/config-hash"].clone();
    assert!(
        hash.as_str().is_some_and(|h| h.starts_with("sha256:")),
        "{hash}"
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// Offline, every warning is printed: the webhook's cut to kube-apiserver's 4 KiB (with its
/// "more warnings not shown" line pointing here) does not apply.
#[test]
fn offline_every_warning_is_printed() {
    let containers: String = (0..200)
        .map(|i| {
            format!(
                "      - name: app-{i}\n        image: app\n        envFrom:\n        \
                 - configMapRef: {{name: settings-{i}}}\n"
            )
        })
        .collect();
    let manifest = format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: many}}\nspec:\n  \
         selector: {{matchLabels: {{app: many}}}}\n  template:\n    metadata:\n      \
         labels: {{app: many}}\n    spec:\n      containers:\n{containers}"
    );
    let out = inject(&["-f", "-"], &manifest);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    let warnings: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("Warning: Deployment/many: reload-injector: "))
        .collect();
    assert_eq!(warnings.len(), 400, "{stderr}");
    assert!(!stderr.contains("more warnings not shown"), "{stderr}");
}

const ROLLOUTS: &str = r#"
apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata: {name: web}
spec:
  selector: {matchLabels: {app: web}}
  strategy: {canary: {steps: [{setWeight: 20}, {pause: {}}]}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
        - name: nginx
          image: nginx:1.27
          env: [{name: UPSTREAM, valueFrom: {configMapKeyRef: {name: web-env, key: upstream}}}]
          volumeMounts: [{name: conf, mountPath: /etc/nginx/conf.d}]
      volumes: [{name: conf, configMap: {name: web-conf}}]
---
apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata: {name: api}
spec:
  workloadRef: {apiVersion: apps/v1, kind: Deployment, name: api-template}
  strategy: {blueGreen: {activeService: api}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: api-template}
spec:
  replicas: 0
  selector: {matchLabels: {app: api}}
  template:
    metadata: {labels: {app: api}}
    spec:
      containers:
        - name: api
          image: example/api:2
          envFrom: [{configMapRef: {name: web-env}}]
---
apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata: {name: odd}
spec: {template: {spec: {containers: 7}}}
"#;

#[test]
fn rollouts_are_injected_like_deployments_and_never_refused() {
    let args = [
        "-f",
        "-",
        "--namespace",
        "shop",
        "--configs",
        "examples/nginx-configs.yaml",
    ];
    let out = inject(&args, ROLLOUTS);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "stderr: {stderr}");
    let docs = documents(&out);
    assert_eq!(docs.len(), 4);
    let template = &docs[0]["spec"]["template"];
    let hash = &template["metadata"]["annotations"]["reload-injector.io/config-hash"];
    assert!(
        hash.as_str().is_some_and(|h| h.starts_with("sha256:")),
        "{template}"
    );
    assert_eq!(
        template["spec"]["initContainers"][0]["name"],
        "config-reloader"
    );
    assert_eq!(
        docs[0]["spec"]["strategy"]["canary"]["steps"][0]["setWeight"],
        20
    );
    // The workloadRef Rollout is left as written; the Deployment it runs is stamped.
    let input: Vec<Value> = serde_saphyr::from_multiple(ROLLOUTS).unwrap();
    assert_eq!(docs[1], input[1]);
    let deployment = &docs[2]["spec"]["template"]["metadata"]["annotations"];
    assert!(
        deployment["reload-injector.io/config-hash"].is_string(),
        "{deployment}"
    );
    // A Rollout the core cannot read is Argo's to judge: passed through, with a warning.
    assert_eq!(docs[3], input[3]);
    for line in [
        r#"Rollout/web: reload-injector: container "nginx" reads ConfigMap "web-env" via env"#,
        r#"Rollout/api: reload-injector: Rollout runs the template of Deployment "api-template""#,
        "Rollout/odd: reload-injector: Rollout not stamped, its template is unreadable",
    ] {
        assert!(stderr.contains(line), "{line:?} not in {stderr}");
    }
    let again = inject(&args, &text(&out.stdout));
    assert_eq!(documents(&again), docs, "inject is idempotent");
}
