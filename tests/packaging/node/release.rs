//! A release as a user gets it, on the real node (`cluster_support::node`): `scripts/release.sh`
//! pushes the working tree's release (and, for the upgrade, the next version) to the node's
//! registry, a real OCI registry on loopback that the node's containerd has as its mirror of
//! ghcr.io and docker.io. Then:
//!
//! - the same commit released twice gives the same image and chart digests;
//! - the index holds linux/amd64 and linux/arm64, and the arm64 image's binary runs under
//!   qemu-user and prints the release's version and commit;
//! - the install commands of docs/install.md (and of README.md, when it holds the same block)
//!   run as written, `ghcr.io` replaced by the registry's address where helm reaches it
//!   (`oci://ghcr.io/`) and nothing else (image names stay: the node resolves ghcr.io through
//!   its mirror): `helm install` from the OCI chart brings both `serve` Pods up (the kubelet
//!   pulled the image from the registry, by digest), and a ConfigMap edit reaches nginx in the
//!   same Pod;
//! - `helm upgrade` to the next version rolls `serve` while Deployments are created in an
//!   opted-in namespace all along, and none is refused;
//! - the kustomize equivalent, after `helm uninstall`, installs the image pinned to its digest;
//! - a Pod naming the image by tag runs it (pulled by tag).
//!
//! The binaries are built first (`scripts/release-binaries.sh`, into the release cache), before
//! the test takes the node: a node is one per machine, and another test binary's node tests run
//! meanwhile. The commands and their output go to `<cluster dir>/release-transcript.txt`.

use crate::cluster_support;
use crate::helm;
use crate::release_support;
use crate::tools;

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use nix::fcntl::{Flock, FlockArg};
use serde_json::{Value, json};

use cluster_support::install::OWN;
use cluster_support::node::Node;
use cluster_support::node::pods::{http_get, site};
use cluster_support::node::registry::go_tools;
use release_support::{Checkout, Release, bump, cache, checkout, git, release};

/// The next version, for the upgrade: the patch after the crate's, as a pre-release.
fn next_version(version: &str) -> String {
    let mut parts = version.split('-').next().unwrap().split('.');
    let (major, minor, patch) = (
        parts.next().unwrap(),
        parts.next().unwrap(),
        parts.next().unwrap(),
    );
    format!("{major}.{minor}.{}-rc.1", patch.parse::<u32>().unwrap() + 1)
}

/// Both architectures, as a published release has them.
const BOTH: &str = "amd64 arm64";

/// The commands and what they printed.
struct Transcript(PathBuf);

impl Transcript {
    fn add(&self, text: &str) {
        use std::io::Write;
        let mut file = File::options()
            .create(true)
            .append(true)
            .open(&self.0)
            .unwrap();
        writeln!(file, "{text}").unwrap();
    }
}

/// Where the release builds go: the cache of binaries by commit, and cargo's target directory
/// (both shared by every checkout of the release tests).
fn build_env() -> [(&'static str, PathBuf); 2] {
    [
        ("RELEASE_CACHE", cache().join("bin")),
        ("CARGO_TARGET_DIR", cache().join("target")),
    ]
}

/// The release tests' turn on the cache: one at a time on a machine, since the checkout and
/// target directories are shared.
fn cache_turn() -> Flock<File> {
    std::fs::create_dir_all(cache()).unwrap();
    let lock = File::create(cache().join("lock")).unwrap();
    Flock::lock(lock, FlockArg::LockExclusive)
        .map_err(|(_, e)| e)
        .unwrap()
}

/// `scripts/release-binaries.sh ARCHES` in `checkout`, at a lower priority: the builds need no
/// node, so they run before the test takes one, beside other test binaries' node tests, which
/// time things. release.sh then finds the binaries in the cache.
fn build_binaries(checkout: &Checkout, arches: &str) {
    let start = Instant::now();
    let out = Command::new("nice")
        .args(["-n", "10"])
        .arg(checkout.dir.join("scripts/release-binaries.sh"))
        .args(arches.split(' '))
        .current_dir(&checkout.dir)
        .envs(build_env())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "release-binaries.sh {arches} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!(
        "release-binaries.sh {arches} (version {}, commit {}): {:.1} s",
        checkout.version,
        checkout.commit,
        start.elapsed().as_secs_f64()
    );
}

/// The node, its registry, the tools, and the turn on the release cache, held for the whole test.
struct World {
    node: &'static Node,
    tools: Vec<(&'static str, PathBuf)>,
    bin: PathBuf,
    transcript: Transcript,
    _lock: Flock<File>,
}

impl World {
    /// Takes the node (waiting for another test binary's, [`Node::shared`]) once `turn` holds
    /// the release cache.
    fn new(turn: Flock<File>) -> World {
        let node = Node::shared();
        let [crane, syft] = <[PathBuf; 2]>::try_from(go_tools(&["crane", "syft"])).unwrap();
        let tools = vec![
            ("CRANE", crane),
            ("SYFT", syft),
            ("HELM", helm::binary()),
            ("SSL_CERT_FILE", node.registry.ca.clone()),
        ];
        let bin = node.dir.join("release-bin");
        std::fs::create_dir_all(&bin).unwrap();
        let transcript = Transcript(node.cluster.dir.join("release-transcript.txt"));
        World {
            node,
            tools,
            bin,
            transcript,
            _lock: turn,
        }
    }

    /// scripts/release.sh VERSION in `checkout` for `arches`, pushing to REGISTRY/`org`.
    fn release(&self, checkout: &Checkout, org: &str, arches: &str) -> (Release, PathBuf) {
        let dist = self
            .node
            .dir
            .join(format!("dist-{org}-{}", checkout.version));
        let registry = PathBuf::from(format!("{}/{org}", self.node.registry.host));
        let builds = build_env();
        let mut env: Vec<(&str, &Path)> = self
            .tools
            .iter()
            .chain(&builds)
            .map(|(k, v)| (*k, v.as_path()))
            .collect();
        env.push(("REGISTRY", registry.as_path()));
        env.push(("RELEASE_DIR", dist.as_path()));
        env.push(("RELEASE_ARCHES", Path::new(arches)));
        let run = release(checkout, &checkout.version, &env);
        let line = format!(
            "release.sh {} (commit {}) to {}: {:.1} s, exit {:?}\n{}",
            checkout.version,
            checkout.commit,
            registry.display(),
            run.took.as_secs_f64(),
            run.output.status.code(),
            String::from_utf8_lossy(&run.output.stdout)
        );
        eprintln!("{line}");
        self.transcript.add(&line);
        assert!(
            run.output.status.success(),
            "release.sh failed:\n{}",
            run.stderr()
        );
        (run, dist)
    }

    fn crane(&self, args: &[&str]) -> String {
        self.node.registry.crane(args)
    }
}

#[test]
fn a_release_from_the_registry_installs_reloads_and_upgrades_without_a_refusal() {
    let turn = cache_turn();
    let first = checkout(&cache().join("src"));
    // Both commits' binaries first, without the node; the upgrade needs the node's
    // architecture only (one build less).
    let next = bump(&first, &next_version(&first.version));
    build_binaries(&next, "amd64");
    git(&first.dir, &["checkout", "-q", &first.commit]);
    build_binaries(&first, BOTH);
    let world = World::new(turn);
    let (a, dist) = world.release(&first, "reload-injector", BOTH);
    let (again, _) = world.release(&first, "again", BOTH);
    assert_eq!(
        again.image_digest(),
        a.image_digest(),
        "the same commit gave another image"
    );
    assert_eq!(
        again.chart_digest(),
        a.chart_digest(),
        "the same commit gave another chart"
    );
    the_index_holds_both_architectures_and_arm64_runs(&world, &first, &a);
    git(&first.dir, &["checkout", "-q", &next.commit]);
    let (b, _) = world.release(&next, "reload-injector", "amd64");
    git(&first.dir, &["checkout", "-q", &first.commit]);

    // The docs' commands: the example nginx image comes from docker.io, which the node mirrors.
    let nginx = world
        .node
        .images
        .tarballs
        .iter()
        .find(|(r, _)| *r == world.node.images.nginx)
        .unwrap();
    world
        .node
        .registry
        .push_tarball(&nginx.1, "library/nginx:1.27");
    std::os::unix::fs::symlink(
        dist.join("reload-injector-linux-amd64"),
        world.bin.join("reload-injector"),
    )
    .unwrap();
    std::os::unix::fs::symlink(tools::kustomize(), world.bin.join("kustomize")).unwrap();
    let blocks = install_blocks();
    run_block(&world, &blocks[0], &first.dir, "the install commands");
    serve_runs_the_release(&world, a.image_digest());
    a_config_map_edit_reaches_nginx_without_a_rollout(&world);
    upgrade_refuses_nothing(&world, &next, &b);
    pulled_by_tag(&world, &next);
    let out = helm_cmd(
        &world,
        &["uninstall", "reload-injector", "-n", OWN, "--wait"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    run_block(&world, &blocks[1], &first.dir, "the kustomize equivalent");
    serve_runs_the_release(&world, a.image_digest());
}

/// The index in the registry: linux/amd64 and linux/arm64, each one layer, run as 65532; the
/// arm64 image's binary runs under qemu-user and says the release's version and commit.
fn the_index_holds_both_architectures_and_arm64_runs(
    world: &World,
    checkout: &Checkout,
    run: &Release,
) {
    let image = run.image.as_deref().unwrap();
    let index: Value = serde_json::from_str(&world.crane(&["manifest", image])).unwrap();
    let platforms: Vec<String> = index["manifests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            format!(
                "{}/{}",
                m["platform"]["os"].as_str().unwrap(),
                m["platform"]["architecture"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(platforms, ["linux/amd64", "linux/arm64"], "{index}");
    assert_eq!(
        index["annotations"]["org.opencontainers.image.revision"],
        checkout.commit.as_str()
    );
    for arch in ["amd64", "arm64"] {
        let platform = format!("linux/{arch}");
        let config: Value =
            serde_json::from_str(&world.crane(&["config", "--platform", &platform, image]))
                .unwrap();
        assert_eq!(config["architecture"], arch);
        assert_eq!(config["config"]["User"], "65532:65532");
        let manifest: Value =
            serde_json::from_str(&world.crane(&["manifest", "--platform", &platform, image]))
                .unwrap();
        let layers = manifest["layers"].as_array().unwrap();
        assert_eq!(layers.len(), 1);
        let line = format!(
            "image {platform}: one layer of {} bytes (gzip)",
            layers[0]["size"]
        );
        eprintln!("{line}");
        world.transcript.add(&line);
    }
    let export = world.node.dir.join("arm64-export.tar");
    world.crane(&[
        "export",
        "--platform",
        "linux/arm64",
        image,
        export.to_str().unwrap(),
    ]);
    let unpacked = world.node.dir.join("arm64-root");
    std::fs::create_dir_all(&unpacked).unwrap();
    let status = Command::new("tar")
        .arg("-xf")
        .arg(&export)
        .arg("-C")
        .arg(&unpacked)
        .arg("reload-injector")
        .status()
        .unwrap();
    assert!(status.success());
    let binary = std::fs::read(unpacked.join("reload-injector")).unwrap();
    assert_eq!(
        u16::from_le_bytes([binary[18], binary[19]]),
        183,
        "not an aarch64 ELF (e_machine)"
    );
    let out = Command::new("qemu-aarch64-static")
        .arg(unpacked.join("reload-injector"))
        .arg("--version")
        .output()
        .expect("qemu-aarch64-static is missing: apt-get install qemu-user-static (scripts/install-test-deps.sh does)");
    let said = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    world.transcript.add(&format!(
        "$ qemu-aarch64-static reload-injector --version   # the linux/arm64 image's binary\n{said}"
    ));
    assert_eq!(
        said,
        format!(
            "reload-injector {} (commit {})",
            checkout.version, checkout.commit
        )
    );
}

/// The fenced `sh` blocks between `<!-- install:start -->` and `<!-- install:end -->` in
/// docs/install.md; README.md, when it has the markers, must hold the same.
fn install_blocks() -> Vec<String> {
    let blocks = |path: &str| -> Option<Vec<String>> {
        let text = std::fs::read_to_string(release_support::repo().join(path)).unwrap();
        let start = text.find("<!-- install:start -->")?;
        let end = start
            + text[start..]
                .find("<!-- install:end -->")
                .expect("install:end");
        let region = &text[start..end];
        Some(
            region
                .split("```sh\n")
                .skip(1)
                .map(|b| b.split("\n```").next().unwrap().to_owned() + "\n")
                .collect(),
        )
    };
    let guide =
        blocks("docs/install.md").expect("docs/install.md has no <!-- install:start --> block");
    assert_eq!(
        guide.len(),
        2,
        "the install block holds the Helm commands, then the kustomize ones"
    );
    if let Some(readme) = blocks("README.md") {
        assert_eq!(
            readme, guide,
            "README.md's install commands differ from docs/install.md's"
        );
    }
    guide
}

/// helm with the cluster's kubeconfig, trusting the registry.
fn helm_cmd(world: &World, args: &[&str]) -> std::process::Output {
    let out = helm::command(args)
        .env("KUBECONFIG", &world.node.cluster.kubeconfig)
        .envs(world.node.registry.trust())
        .output()
        .unwrap();
    world.transcript.add(&format!(
        "$ helm {}\n{}{}",
        args.join(" "),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    ));
    out
}

/// Runs `block` with bash (`-e -v`: each line shown as it runs) in `cwd`, with `oci://ghcr.io/`
/// pointed at the registry, the cluster's kubeconfig, and kubectl, helm, kustomize and the
/// release's binary on PATH.
fn run_block(world: &World, block: &str, cwd: &Path, what: &str) {
    let script = block.replace(
        "oci://ghcr.io/",
        &format!("oci://{}/", world.node.registry.host),
    );
    let file = world
        .node
        .dir
        .join(format!("{}.sh", what.replace(' ', "-")));
    std::fs::write(&file, &script).unwrap();
    let dirs = [
        world.bin.clone(),
        world
            .node
            .cluster
            .assets
            .kubectl
            .parent()
            .unwrap()
            .to_owned(),
        helm::binary().parent().unwrap().to_owned(),
    ];
    let path = std::env::join_paths(dirs.iter().cloned().chain(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    )))
    .unwrap();
    let home = world.node.dir.join("helm-home");
    let start = Instant::now();
    let out = Command::new("bash")
        .arg("-c")
        .arg("exec bash -e -v -o pipefail \"$0\" 2>&1")
        .arg(&file)
        .current_dir(cwd)
        .env("PATH", path)
        .env("KUBECONFIG", &world.node.cluster.kubeconfig)
        .envs(world.node.registry.trust())
        .env("HELM_CONFIG_HOME", home.join("config"))
        .env("HELM_CACHE_HOME", home.join("cache"))
        .env("HELM_DATA_HOME", home.join("data"))
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    world.transcript.add(&format!(
        "### {what} (docs/install.md), {:.1} s, exit {:?}\n{said}",
        start.elapsed().as_secs_f64(),
        out.status.code()
    ));
    assert!(out.status.success(), "{what} failed:\n{said}");
}

/// Both `serve` Pods Ready, running the image of `digest` pulled from the registry.
fn serve_runs_the_release(world: &World, digest: &str) {
    let cluster = world.node.cluster;
    cluster
        .kubectl(&[
            "rollout",
            "status",
            "deployment/reload-injector",
            "-n",
            OWN,
            "--timeout=180s",
        ])
        .run();
    let pods = cluster.list_selected(OWN, "pods", "app.kubernetes.io/name=reload-injector");
    let ready: Vec<&Value> = pods
        .iter()
        .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
        .filter(|p| p["status"]["containerStatuses"][0]["ready"] == true)
        .collect();
    assert_eq!(
        ready.len(),
        2,
        "{}",
        serde_json::to_string_pretty(&pods).unwrap()
    );
    for pod in ready {
        let status = &pod["status"]["containerStatuses"][0];
        let image_id = status["imageID"].as_str().unwrap_or_default();
        assert!(
            image_id.starts_with("ghcr.io/reload-injector/reload-injector@")
                && image_id.ends_with(digest),
            "{} runs {image_id}, not the release's {digest}",
            pod["metadata"]["name"]
        );
    }
    world.transcript.add(&format!(
        "both serve Pods Ready, running ghcr.io/reload-injector/reload-injector@{digest}"
    ));
}

/// The example's nginx answers `v1`; after an edit of its ConfigMap it answers `v2` from the
/// same Pod (same uid, no restart, one ReplicaSet): reloaded by the sidecar, not rolled.
fn a_config_map_edit_reaches_nginx_without_a_rollout(world: &World) {
    let node = world.node;
    let pod = node.running_pods("demo", "web", 1).remove(0);
    let sidecar = pod["spec"]["initContainers"]
        .as_array()
        .into_iter()
        .flatten()
        .chain(pod["spec"]["containers"].as_array().into_iter().flatten())
        .any(|c| c["name"] == "config-reloader");
    assert!(sidecar, "the example's Pod has no config-reloader: {pod}");
    let ip = pod["status"]["podIP"].as_str().unwrap().to_owned();
    node.cluster
        .wait_for("nginx to answer v1", Duration::from_secs(60), || {
            (http_get(&ip, 8080).as_deref() == Some("v1\n")).then_some(())
        });
    let patch = json!({"data": {"default.conf": site("v2")}}).to_string();
    let edited = Instant::now();
    node.cluster
        .kubectl(&[
            "-n",
            "demo",
            "patch",
            "configmap",
            "web-config",
            "--type=merge",
            "-p",
            &patch,
        ])
        .run();
    let took = Node::await_body(&ip, "v2\n", edited, Duration::from_secs(120))
        .unwrap_or_else(|| panic!("nginx never answered v2 (logs in {})", node.dir.display()));
    let after = node.running_pods("demo", "web", 1).remove(0);
    assert_eq!(
        after["metadata"]["uid"], pod["metadata"]["uid"],
        "the Pod was replaced"
    );
    let nginx = after["status"]["containerStatuses"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "nginx")
        .unwrap();
    assert_eq!(nginx["restartCount"], 0, "nginx restarted");
    let sets = node.cluster.list_selected("demo", "replicasets", "app=web");
    assert_eq!(sets.len(), 1, "the Deployment rolled");
    let line = format!(
        "ConfigMap web-config edited: nginx answered v2 after {:.2} s, same Pod, no restart, one ReplicaSet",
        took.as_secs_f64()
    );
    eprintln!("{line}");
    world.transcript.add(&line);
}

/// What the probe saw while `serve` was upgraded.
#[derive(Default)]
struct Probed {
    created: usize,
    refused: Vec<String>,
}

/// Creates Deployments (through the workload webhook, `failurePolicy: Fail`) in an opted-in
/// namespace until `stop`, one after another; counts the refused ones.
fn probe(world: &World, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<Probed> {
    let cluster = world.node.cluster;
    let ns = cluster.namespace("upgrade-probe", true);
    let config = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "probe"}, "data": {"k": "v"}});
    assert!(cluster.apply(&ns, &config).ok);
    std::thread::spawn(move || {
        let mut probed = Probed::default();
        for n in 0.. {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            let deployment = json!({
                "apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": format!("probe-{n}")},
                "spec": {
                    "replicas": 0,
                    "selector": {"matchLabels": {"app": "probe"}},
                    "template": {
                        "metadata": {"labels": {"app": "probe"}},
                        "spec": {"containers": [{
                            "name": "app", "image": "nginx:1.27",
                            "envFrom": [{"configMapRef": {"name": "probe"}}],
                        }]},
                    },
                },
            });
            let out = cluster
                .kubectl(&["create", "-n", &ns, "-f", "-"])
                .stdin(&deployment.to_string())
                .try_run();
            if out.ok {
                probed.created += 1;
            } else {
                probed.refused.push(out.stderr.trim().to_owned());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        probed
    })
}

/// `helm upgrade` to the next version from the registry while the probe runs: `serve` rolls to
/// the next image and no Deployment is refused in between.
fn upgrade_refuses_nothing(world: &World, next: &Checkout, run: &Release) {
    let stop = Arc::new(AtomicBool::new(false));
    let probing = probe(world, stop.clone());
    std::thread::sleep(Duration::from_secs(3));
    let chart = format!(
        "oci://{}/reload-injector/charts/reload-injector",
        world.node.registry.host
    );
    let start = Instant::now();
    let out = helm_cmd(
        world,
        &[
            "upgrade",
            "reload-injector",
            &chart,
            "--version",
            &next.version,
            "-n",
            OWN,
            "--reset-then-reuse-values",
            "--wait",
            "--timeout=5m",
        ],
    );
    assert!(
        out.status.success(),
        "helm upgrade failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serve_runs_the_release(world, run.image_digest());
    let rolled = start.elapsed();
    std::thread::sleep(Duration::from_secs(3));
    stop.store(true, Ordering::Relaxed);
    let probed = probing.join().unwrap();
    let line = format!(
        "helm upgrade to {}: serve rolled in {:.1} s; Deployments created meanwhile: {}, refused: {}",
        next.version,
        rolled.as_secs_f64(),
        probed.created,
        probed.refused.len()
    );
    eprintln!("{line}");
    world.transcript.add(&line);
    assert!(
        probed.refused.is_empty(),
        "refused during the upgrade:\n{}",
        probed.refused.join("\n")
    );
    assert!(
        probed.created >= 10,
        "the probe created only {} Deployments",
        probed.created
    );
}

/// A Pod naming the next version's image by tag runs it: the kubelet pulled it by tag.
fn pulled_by_tag(world: &World, next: &Checkout) {
    let cluster = world.node.cluster;
    let ns = cluster.namespace("by-tag", false);
    let image = format!("ghcr.io/reload-injector/reload-injector:{}", next.version);
    cluster
        .kubectl(&[
            "run",
            "version",
            "-n",
            &ns,
            "--image",
            &image,
            "--restart=Never",
            "--",
            "--version",
        ])
        .run();
    cluster.wait_for(
        "the Pod naming the image by tag to succeed",
        Duration::from_secs(120),
        || {
            let pod = cluster.get(&ns, "pod", "version");
            assert_ne!(pod["status"]["phase"], "Failed", "{pod}");
            (pod["status"]["phase"] == "Succeeded").then_some(())
        },
    );
    let said = cluster
        .kubectl(&["logs", "-n", &ns, "version"])
        .run()
        .stdout;
    assert_eq!(
        said.trim(),
        format!("reload-injector {} (commit {})", next.version, next.commit)
    );
    world.transcript.add(&format!(
        "$ kubectl run version --image {image} -- --version\n{}",
        said.trim()
    ));
}
