//! The node's images: built by `scripts/build-test-images.sh` (OCI layout tarballs, cached by
//! content outside the clone). nginx and pause are imported into the node's containerd with
//! `ctr -n k8s.io images import` (Pods run them with `imagePullPolicy: Never`); the product is
//! pushed to the node's registry ([`super::registry`]) under the name users pull, and the
//! kubelet pulls it from there, as on a user's node. No Docker.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The three images, by the reference containerd knows them as.
#[derive(Debug, Clone)]
pub struct Images {
    /// What the Dockerfile ships (`reload-injector.test/product:<content>`); pushed to the
    /// registry under the name the shipped manifests use ([`super::Node::product`]).
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

    /// Imports every image but the product into the containerd at `socket`.
    pub fn import(&self, socket: &Path) {
        for (image, tar) in &self.tarballs {
            if *image != self.product {
                ctr(socket, &["images", "import", &tar.display().to_string()]);
            }
        }
    }

    /// The product's tarball.
    pub fn product_tarball(&self) -> &Path {
        self.tarballs
            .iter()
            .find(|(image, _)| *image == self.product)
            .map(|(_, tar)| tar.as_path())
            .expect("build-test-images.sh printed the product's tarball")
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
