//! `scripts/dev-cluster.sh` as a person runs it: `up --no-node` starts the tests' control plane
//! with reload-injector installed (needing nothing the Kubernetes binaries do not bring: the
//! manifests are rendered by the cluster's own `kubectl kustomize`), `status` says it runs, and
//! `down` stops every process it started.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/dev-cluster.sh")
}

fn run(dir: &Path, args: &[&str]) -> Output {
    Command::new(script())
        .args(args)
        .env("RELOAD_INJECTOR_DEV_DIR", dir)
        .output()
        .expect("failed to run scripts/dev-cluster.sh")
}

/// Stops the cluster however the test ends.
struct Down<'a>(&'a Path);

impl Drop for Down<'_> {
    fn drop(&mut self) {
        let _ = run(self.0, &["down"]);
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn up_without_a_node_installs_the_product_and_down_stops_it() {
    let dir =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("dev-cluster-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let down = Down(&dir);
    let up = run(&dir, &["up", "--no-node"]);
    let (stdout, stderr) = (text(&up.stdout), text(&up.stderr));
    assert!(
        up.status.success(),
        "up failed:\n{stderr}\n{}",
        dev_log(&dir)
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    let export = stdout
        .lines()
        .find(|l| l.starts_with("export KUBECONFIG="))
        .unwrap_or_else(|| panic!("up printed no export line: {stdout}"));
    let kubeconfig = export
        .trim_start_matches("export KUBECONFIG=")
        .split_whitespace()
        .next()
        .unwrap();
    let kubectl_dir = export
        .split("PATH=")
        .nth(1)
        .and_then(|p| p.split(':').next())
        .expect("the export line sets PATH");
    let webhook = Command::new(Path::new(kubectl_dir).join("kubectl"))
        .args([
            "--kubeconfig",
            kubeconfig,
            "get",
            "mutatingwebhookconfiguration",
            "reload-injector",
        ])
        .output()
        .expect("failed to run kubectl");
    assert!(webhook.status.success(), "{}", text(&webhook.stderr));

    let status = run(&dir, &["status"]);
    assert!(
        text(&status.stdout).contains("cluster: running"),
        "{status:?}"
    );
    let pid: u32 = std::fs::read_to_string(dir.join("dev-cluster.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();

    drop(down);
    let gone = (0..50).any(|_| {
        std::thread::sleep(std::time::Duration::from_millis(100));
        !Path::new(&format!("/proc/{pid}")).exists()
    });
    assert!(
        gone,
        "the cluster program (PID {pid}) still runs after down"
    );
    let status = run(&dir, &["status"]);
    assert!(
        text(&status.stdout).contains("cluster: not running"),
        "{status:?}"
    );
}

fn dev_log(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("dev-cluster.log")).unwrap_or_default()
}
