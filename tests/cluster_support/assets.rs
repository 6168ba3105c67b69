//! Where the control-plane binaries come from: `KUBEBUILDER_ASSETS` (the envtest convention),
//! else the cache that `scripts/install-kube-test-binaries.sh` fills. A missing binary fails
//! the test with how to get it; it is never a quiet skip.

use std::path::{Path, PathBuf};
use std::process::Command;

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
    /// The API server's minor version (`20` for v1.20.2): some flags exist only on old servers.
    pub minor: u32,
}

const HOW: &str = "run `scripts/install-kube-test-binaries.sh` (as root on Debian 12; \
    `scripts/test.sh` runs it), or set KUBEBUILDER_ASSETS to a directory holding \
    kube-apiserver, etcd and kube-controller-manager (envtest binaries)";

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
        let controller_manager = Some(dir.join("kube-controller-manager")).filter(|p| p.is_file());
        let kubectl = Some(dir.join("kubectl"))
            .filter(|p| p.is_file())
            .unwrap_or_else(|| PathBuf::from("kubectl"));
        let minor = minor_version(&apiserver);
        Assets {
            apiserver,
            etcd,
            controller_manager,
            kubectl,
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

/// `$RELOAD_INJECTOR_KUBE_CACHE`, else `~/.cache/reload-injector/kube-v1.20.2` (as the script).
fn default_cache() -> PathBuf {
    if let Some(dir) = std::env::var_os("RELOAD_INJECTOR_KUBE_CACHE") {
        return PathBuf::from(dir);
    }
    let home = std::env::var_os("HOME").unwrap_or_else(|| "/root".into());
    Path::new(&home).join(".cache/reload-injector/kube-v1.20.2")
}

/// `kube-apiserver --version` prints `Kubernetes v1.20.2`.
fn minor_version(apiserver: &Path) -> u32 {
    let out = Command::new(apiserver)
        .arg("--version")
        .output()
        .unwrap_or_else(|e| panic!("failed to run {} --version: {e}", apiserver.display()));
    let text = String::from_utf8_lossy(&out.stdout);
    text.split_whitespace()
        .find_map(|w| w.strip_prefix("v1."))
        .and_then(|rest| rest.split('.').next()?.parse().ok())
        .unwrap_or_else(|| {
            panic!(
                "cannot read the version of {}: {text:?}",
                apiserver.display()
            )
        })
}
