//! The node's images: built by `scripts/build-test-images.sh` (OCI layout tarballs, cached by
//! content outside the clone) and imported into the node's containerd with
//! `ctr -n k8s.io images import`. No registry and no Docker: Pods run them with
//! `imagePullPolicy: Never` or `IfNotPresent`.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The three images, by the reference containerd knows them as.
#[derive(Debug, Clone)]
pub struct Images {
    /// What the Dockerfile ships (`reload-injector.test/product:<content>`), also tagged with
    /// the name the shipped manifests use (see [`Images::shipped`]).
    pub product: String,
    /// Real nginx from Debian (`reload-injector.test/nginx:<content>`).
    pub nginx: String,
    /// The same with a non-root `USER 101:101` in the image.
    pub nginx_nonroot: String,
    /// The sandboxes' pause image.
    pub pause: String,
    /// The tarballs, for the image test.
    pub tarballs: Vec<(String, PathBuf)>,
}

impl Images {
    /// Builds (or finds in the cache) the images; panics with the script's output
    /// when it fails.
    pub fn build(logs: &Path) -> Images {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/build-test-images.sh");
        let out = Command::new(&script)
            .output()
            .unwrap_or_else(|e| panic!("failed to run {}: {e}", script.display()));
        let stderr = String::from_utf8_lossy(&out.stderr);
        std::fs::write(logs.join("build-test-images.log"), stderr.as_bytes()).unwrap();
        assert!(
            out.status.success(),
            "{} failed (run scripts/install-node-deps.sh first):\n{stderr}",
            script.display()
        );
        let mut refs = std::collections::HashMap::new();
        let mut tarballs = Vec::new();
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let mut words = line.split_whitespace();
            if let (Some(name), Some(image), Some(tar)) = (words.next(), words.next(), words.next())
            {
                refs.insert(name.to_owned(), image.to_owned());
                tarballs.push((image.to_owned(), PathBuf::from(tar)));
            }
        }
        let get = |name: &str| {
            refs.get(name)
                .cloned()
                .unwrap_or_else(|| panic!("build-test-images.sh printed no {name} image"))
        };
        Images {
            product: get("product"),
            nginx: get("nginx"),
            nginx_nonroot: get("nginx-nonroot"),
            pause: get("pause"),
            tarballs,
        }
    }

    /// Imports every image into the containerd at `socket`, and tags the product image as
    /// `shipped` (the image the shipped manifests name), as a user who built the Dockerfile
    /// under that name has it.
    pub fn import(&self, socket: &Path, shipped: &str) {
        for (_, tar) in &self.tarballs {
            ctr(socket, &["images", "import", &tar.display().to_string()]);
        }
        ctr(
            socket,
            &["images", "tag", "--force", &self.product, shipped],
        );
    }
}

/// `ctr -a SOCKET -n k8s.io ARGS…`, which must succeed.
pub fn ctr(socket: &Path, args: &[&str]) -> String {
    let out = Command::new("ctr")
        .arg("-a")
        .arg(socket)
        .args(["-n", "k8s.io"])
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("failed to run ctr (run scripts/install-node-deps.sh): {e}"));
    assert!(
        out.status.success(),
        "ctr {} failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}
