//! Where the control-plane binaries come from: `KUBEBUILDER_ASSETS` (the envtest convention),
//! else the cache that `scripts/install-kube-test-binaries.sh` fills for the version
//! `RELOAD_INJECTOR_KUBE_VERSION` names ([`CURRENT`] when unset; `scripts/test.sh` runs the
//! end-to-end tests again on [`FLOOR`]). A missing binary fails the test with how to get it;
//! it is never a quiet skip.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The current Kubernetes release, which the tests run by default.
pub const CURRENT: &str = "1.37.2";
/// The oldest release the README claims; `scripts/test.sh` runs the e2e tests on it too.
pub const FLOOR: &str = "1.35.4";

/// The binaries one cluster runs.
#[derive(Debug, Clone)]
pub struct Assets {
    /// `kube-apiserver`.
    pub apiserver: PathBuf,
    /// `etcd`.
    pub etcd: PathBuf,
    /// `kube-controller-manager`, when the directory has one.
    pub controller_manager: Option<PathBuf>,
    /// `kubectl`: from the directory, else from `PATH`.
    pub kubectl: PathBuf,
    /// `kube-scheduler`, when the directory has one.
    pub scheduler: Option<PathBuf>,
    /// `kubelet`, when the directory has one.
    pub kubelet: Option<PathBuf>,
    /// The API server's version (`1.37.2`), from `kube-apiserver --version`.
    pub version: String,
    /// Its minor version (`37`).
    pub minor: u32,
}

const HOW: &str = "run `scripts/install-kube-test-binaries.sh` (it builds Kubernetes from the Go \
    module proxy with Go >= 1.25; `scripts/test.sh` runs it), or set KUBEBUILDER_ASSETS to a \
    directory holding kube-apiserver, etcd and kube-controller-manager (envtest binaries)";

impl Assets {
    /// Finds the binaries, or panics saying how to get them.
    pub fn find() -> Assets {
        let dir = match std::env::var_os("KUBEBUILDER_ASSETS") {
            Some(dir) if !dir.is_empty() => PathBuf::from(dir),
            _ => default_cache(),
        };
        let need = |name: &str| {
            let path = dir.join(name);
            assert!(
                path.is_file(),
                "the end-to-end tests need {} and it is missing: {HOW}",
                path.display()
            );
            path
        };
        let apiserver = need("kube-apiserver");
        let etcd = need("etcd");
        let optional = |name: &str| Some(dir.join(name)).filter(|p| p.is_file());
        let controller_manager = optional("kube-controller-manager");
        let kubectl = Some(dir.join("kubectl"))
            .filter(|p| p.is_file())
            .unwrap_or_else(|| PathBuf::from("kubectl"));
        let version = version_of(&apiserver);
        let from_assets = std::env::var_os("KUBEBUILDER_ASSETS").is_some_and(|d| !d.is_empty());
        assert!(
            from_assets || version == wanted_version(),
            "{} is v{version}, not the v{} the tests asked for: {HOW}",
            apiserver.display(),
            wanted_version()
        );
        let minor = version
            .split('.')
            .nth(1)
            .and_then(|m| m.parse().ok())
            .unwrap_or_else(|| panic!("cannot read the minor version of {version:?}"));
        Assets {
            apiserver,
            etcd,
            controller_manager,
            scheduler: optional("kube-scheduler"),
            kubelet: optional("kubelet"),
            kubectl,
            version,
            minor,
        }
    }

    /// The controller-manager, or a panic saying how to get one.
    pub fn controller_manager(&self) -> &Path {
        self.controller_manager.as_deref().unwrap_or_else(|| {
            panic!("this test needs kube-controller-manager beside kube-apiserver: {HOW}")
        })
    }
}

/// The version the tests run: `$RELOAD_INJECTOR_KUBE_VERSION`, else [`CURRENT`].
pub fn wanted_version() -> String {
    std::env::var("RELOAD_INJECTOR_KUBE_VERSION")
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| CURRENT.to_owned())
}

/// `$RELOAD_INJECTOR_KUBE_CACHE_ROOT/kube-vVERSION`, the root defaulting to
/// `~/.cache/reload-injector` (as the script).
fn default_cache() -> PathBuf {
    let root = std::env::var_os("RELOAD_INJECTOR_KUBE_CACHE_ROOT")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let home = std::env::var_os("HOME").unwrap_or_else(|| "/root".into());
            Path::new(&home).join(".cache/reload-injector")
        });
    root.join(format!("kube-v{}", wanted_version()))
}

/// `kube-apiserver --version` prints `Kubernetes v1.37.2`.
fn version_of(apiserver: &Path) -> String {
    let out = Command::new(apiserver)
        .arg("--version")
        .output()
        .unwrap_or_else(|e| panic!("failed to run {} --version: {e}", apiserver.display()));
    let text = String::from_utf8_lossy(&out.stdout);
    text.split_whitespace()
        .find_map(|w| w.strip_prefix('v').filter(|v| v.starts_with("1.")))
        .map(str::to_owned)
        .unwrap_or_else(|| {
            panic!(
                "cannot read the version of {}: {text:?}",
                apiserver.display()
            )
        })
}
