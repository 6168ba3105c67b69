//! The product installed on the node as docs/install.md tells users (path 1b, without
//! cert-manager): `certs/generate.sh` runs `reload-injector certs` and writes an overlay of
//! `manifests/base` with the certificate, the Secret-hash key and the webhooks' `caBundle`;
//! `kubectl apply -k` installs it. The image is the one the manifests name, which the kubelet
//! pulls from the node's registry, where [`super::Node::product`] pushed the locally built
//! product image under that name. The
//! shipped Deployment then runs `serve` as two Pods on the node, as the shipped
//! ServiceAccount, and the API server calls them through the shipped Service.

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use serde_json::Value;

use super::super::install::OWN;
use super::Node;

/// Bound for "the webhook's two Pods are Ready" (image already on the node).
pub const ROLLOUT_LIMIT: Duration = Duration::from_secs(180);

/// Bound for "a live Pod holds the Lease": the Lease's 15 s, a replica's retry, and slack.
const LEADER_LIMIT: Duration = Duration::from_secs(60);

/// The product as installed on the node.
pub struct NodeInstall {
    /// The node.
    pub node: &'static Node,
    /// The overlay `certs/generate.sh` wrote (it holds the private keys).
    pub overlay: PathBuf,
    /// What `kubectl apply -k` printed.
    pub applied: String,
}

impl NodeInstall {
    /// The test binary's installation on its node, made by the first test that asks.
    pub fn shared() -> &'static NodeInstall {
        static INSTALL: OnceLock<NodeInstall> = OnceLock::new();
        INSTALL.get_or_init(|| NodeInstall::new(Node::shared()))
    }

    /// Runs `certs/generate.sh`, `kubectl apply -k` on its overlay, and waits for the
    /// Deployment's rollout.
    pub fn new(node: &'static Node) -> NodeInstall {
        let cluster = node.cluster;
        node.product();
        let overlay = cluster.dir.join("certs-generated");
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/certs/generate.sh");
        let out = Command::new(script)
            .arg("--out")
            .arg(&overlay)
            .arg("--bin")
            .arg(super::super::product_binary())
            .output()
            .unwrap_or_else(|e| panic!("failed to run {script}: {e}"));
        assert!(
            out.status.success(),
            "certs/generate.sh failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let applied = cluster
            .kubectl(&["apply", "-k", overlay.to_str().unwrap()])
            .run()
            .stdout;
        let install = NodeInstall {
            node,
            overlay,
            applied,
        };
        install.wait_rolled_out();
        install
    }

    /// Waits until the webhook's Deployment has its replicas updated and Ready, and no Pod it
    /// replaced is still terminating (the rollout counts those as gone already): the next test
    /// then finds exactly the replicas.
    pub fn wait_rolled_out(&self) {
        let cluster = self.node.cluster;
        cluster
            .kubectl(&[
                "rollout",
                "status",
                "deployment/reload-injector",
                "-n",
                OWN,
                &format!("--timeout={}s", ROLLOUT_LIMIT.as_secs()),
            ])
            .run();
        cluster.wait_for("the replaced serve Pods to be gone", ROLLOUT_LIMIT, || {
            self.serve_pods()
                .iter()
                .all(|p| p["metadata"]["deletionTimestamp"].is_null())
                .then_some(())
        });
    }

    /// The name of the `serve` Pod that holds the writer's Lease, once the Lease names a Pod that
    /// exists and is not terminating. A `serve` Pod that is force-deleted (its token then
    /// refused) or killed cannot release the Lease: it names that Pod until it runs out (15 s)
    /// and another replica renews it, so a test that starts just after reads a gone holder.
    pub fn leader_pod(&self) -> String {
        let cluster = self.node.cluster;
        let start = std::time::Instant::now();
        let leader = cluster.wait_for("the Lease to name a live serve Pod", LEADER_LIMIT, || {
            let lease = cluster.get(OWN, "lease", "reload-injector");
            let holder = lease["spec"]["holderIdentity"].as_str()?.to_owned();
            self.serve_pods()
                .iter()
                .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
                .filter_map(|p| p["metadata"]["name"].as_str())
                .find(|name| holder.starts_with(&format!("{name}-")))
                .map(str::to_owned)
        });
        // A wait here means an earlier test left the Lease on a gone Pod; the log says so.
        eprintln!("the Lease names {leader} (waited {:.1?})", start.elapsed());
        leader
    }

    /// The webhook's Pods, as `kubectl get pods -o json` lists them.
    pub fn serve_pods(&self) -> Vec<Value> {
        self.node
            .cluster
            .kubectl(&[
                "get",
                "pods",
                "-n",
                OWN,
                "-l",
                "app.kubernetes.io/name=reload-injector",
                "-o",
                "json",
            ])
            .run()
            .json()["items"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }
}
