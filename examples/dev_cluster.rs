//! The cluster `scripts/dev-cluster.sh up` runs, to try reload-injector by hand: the end-to-end
//! tests' own control plane (`tests/cluster_support`), with the test node (kubelet, containerd,
//! runc, the CNI bridge) and the product installed on it as docs/install.md says, so `serve`
//! runs as the shipped Deployment's two Pods. With `--no-node`, the control plane only, and
//! `serve` as a local process with the shipped ServiceAccount's identity (Pods stay Pending).
//!
//! ```text
//! dev_cluster --dir DIR [--no-node]
//! ```
//!
//! When everything is up it writes `DIR/admin.kubeconfig`, `DIR/logs` (a link to the
//! cluster's log directory), `DIR/images` (the images on the node) and `DIR/ready`, then waits. SIGTERM or SIGINT ends it; every
//! process it started dies with it (the harness's parent-death signal), and the node's
//! watchdog (`scripts/node-down.sh`) removes the node.

#[path = "../tests/cluster_support/mod.rs"]
mod cluster_support;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use cluster_support::Cluster;
use cluster_support::install::Install;
use cluster_support::node::install::NodeInstall;
use cluster_support::node::{self, Node};

fn main() -> ExitCode {
    let (dir, with_node) = match parse(std::env::args().skip(1)) {
        Ok(parsed) => parsed,
        Err(message) => {
            eprintln!("dev_cluster: {message}\nusage: dev_cluster --dir DIR [--no-node]");
            return ExitCode::from(2);
        }
    };
    let (cluster, images) = if with_node {
        let cluster: &'static Cluster = Box::leak(Box::new(Cluster::start_with(node::extras())));
        let node: &'static Node = Box::leak(Box::new(Node::start(cluster)));
        Box::leak(Box::new(NodeInstall::new(node)));
        let images = &node.images;
        let refs = [
            images.nginx.as_str(),
            &images.nginx_nonroot,
            node::SHIPPED_IMAGE,
        ];
        (cluster, refs.map(|r| format!("{r}\n")).concat())
    } else {
        let cluster: &'static Cluster = Box::leak(Box::new(Cluster::start()));
        Box::leak(Box::new(Install::new(cluster)));
        (cluster, String::new())
    };
    if let Err(e) = publish(&dir, cluster, &images) {
        eprintln!("dev_cluster: cannot write into {}: {e}", dir.display());
        return ExitCode::FAILURE;
    }
    eprintln!("dev_cluster: ready; logs in {}", cluster.dir.display());
    loop {
        std::thread::park();
    }
}

/// `--dir DIR [--no-node]`.
fn parse(args: impl Iterator<Item = String>) -> Result<(PathBuf, bool), String> {
    let (mut dir, mut with_node) = (None, true);
    let mut args = args.peekable();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--dir" => dir = Some(PathBuf::from(args.next().ok_or("--dir needs a value")?)),
            "--no-node" => with_node = false,
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok((dir.ok_or("--dir is required")?, with_node))
}

/// Writes what `scripts/dev-cluster.sh` reads: the admin kubeconfig, the link to the logs, the
/// images the node holds (nginx's with `imagePullPolicy: Never`; the product's the node pulls
/// from its registry, the mirror of ghcr.io), and
/// `ready` last.
fn publish(dir: &Path, cluster: &Cluster, images: &str) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    std::fs::write(dir.join("images"), images)?;
    std::fs::copy(&cluster.kubeconfig, dir.join("admin.kubeconfig"))?;
    let logs = dir.join("logs");
    let _ = std::fs::remove_file(&logs);
    std::os::unix::fs::symlink(&cluster.dir, &logs)?;
    std::fs::write(dir.join("ready"), format!("{}\n", std::process::id()))
}
