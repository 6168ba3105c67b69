//! The pinned `helm` (built by `scripts/install-helm.sh`), run with a Helm home of its own so
//! that no user configuration or repository cache changes what it does.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use super::tools::{parse_yaml, repo};

/// The release name and namespace of every render: the kustomize base's namespace.
pub const RELEASE: &str = "reload-injector";
/// The namespace the chart is rendered into.
pub const NAMESPACE: &str = "reload-injector";

/// The chart.
pub fn chart() -> PathBuf {
    repo().join("charts/reload-injector")
}

/// The Helm version `scripts/install-helm.sh` builds (its `version=` line).
pub fn pinned_version() -> String {
    let script = std::fs::read_to_string(repo().join("scripts/install-helm.sh"))
        .expect("failed to read scripts/install-helm.sh");
    script
        .lines()
        .find_map(|l| l.strip_prefix("version="))
        .expect("scripts/install-helm.sh has no version= line")
        .trim()
        .to_owned()
}

/// The `helm` binary: `HELM_BIN`, else the one `scripts/install-helm.sh` caches. Missing, the
/// test fails saying how to get it.
pub fn binary() -> PathBuf {
    if let Some(bin) = std::env::var_os("HELM_BIN") {
        return PathBuf::from(bin);
    }
    let version = pinned_version();
    let root = std::env::var_os("RELOAD_INJECTOR_HELM_CACHE_ROOT")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let home = std::env::var_os("HOME").unwrap_or_else(|| "/root".into());
            Path::new(&home).join(".cache/reload-injector")
        });
    let path = root.join(format!("helm-v{version}/helm"));
    assert!(
        path.is_file(),
        "helm v{version} is missing ({} does not exist): run scripts/install-helm.sh (it builds \
         Helm from the Go module proxy; needs Go 1.26 or newer, a few minutes) or \
         scripts/install-test-deps.sh, or point HELM_BIN at a helm v4 binary",
        path.display()
    );
    path
}

/// What one run of helm did.
pub struct Output {
    pub ok: bool,
    pub stdout: String,
    pub stderr: String,
}

/// A helm command with its own (empty) configuration, cache and data directories.
pub fn command<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Command {
    let home = Path::new(env!("CARGO_TARGET_TMPDIR")).join("helm-home");
    let mut cmd = Command::new(binary());
    cmd.args(args)
        .env("HELM_CONFIG_HOME", home.join("config"))
        .env("HELM_CACHE_HOME", home.join("cache"))
        .env("HELM_DATA_HOME", home.join("data"))
        .env_remove("HELM_NAMESPACE")
        .env_remove("HELM_KUBECONTEXT");
    cmd
}

/// Runs helm with `args`.
pub fn run<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Output {
    output(command(args))
}

/// Runs a prepared helm command.
pub fn output(mut cmd: Command) -> Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("failed to run {cmd:?}: {e}"));
    Output {
        ok: out.status.success(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// `helm template` of the chart with `args` (e.g. `--set`, `-f`): the objects, or helm's error.
pub fn template(args: &[String]) -> Result<Vec<Value>, String> {
    let chart = chart();
    let mut all = vec![
        "template".to_owned(),
        RELEASE.to_owned(),
        chart.to_string_lossy().into_owned(),
        "--namespace".to_owned(),
        NAMESPACE.to_owned(),
    ];
    all.extend(args.iter().cloned());
    let out = run(&all);
    if out.ok {
        Ok(parse_yaml(&out.stdout))
    } else {
        Err(out.stderr)
    }
}

/// `Kind/name` of an object.
pub fn object_name(obj: &Value) -> String {
    format!(
        "{}/{}",
        obj["kind"].as_str().unwrap_or("?"),
        obj["metadata"]["name"].as_str().unwrap_or("?")
    )
}
