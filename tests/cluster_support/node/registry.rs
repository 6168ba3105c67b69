//! The node's OCI registry: go-containerregistry's registry (the one behind `crane registry
//! serve`) over HTTPS on a loopback port, built from the Go module proxy by
//! `scripts/install-go-tools.sh`. The node's containerd has it as the mirror of `ghcr.io` and
//! `docker.io` ([`Registry::hosts`]), so a Pod naming `ghcr.io/reload-injector/reload-injector`
//! pulls from here and nothing leaves the machine. Helm and crane trust it through
//! `SSL_CERT_FILE` ([`Registry::trust`]), containerd through `hosts.toml`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use reload_injector::certs::{CertRequest, generate};

use super::super::procs::Proc;
use super::super::{START_LIMIT, wait_until};

/// The registries a node resolves through [`Registry`].
pub const MIRRORED: [&str; 2] = ["ghcr.io", "docker.io"];

/// A running registry.
pub struct Registry {
    /// `127.0.0.1:PORT`: references name it as `127.0.0.1:PORT/REPOSITORY:TAG`.
    pub host: String,
    /// The CA that signed its certificate (PEM file).
    pub ca: PathBuf,
    /// containerd's `config_path`: one `hosts.toml` per name of [`MIRRORED`].
    pub hosts: PathBuf,
    /// crane, which pushes and reads digests.
    pub crane: PathBuf,
    dir: PathBuf,
    proc: Proc,
}

/// Paths of the Go tools `scripts/install-go-tools.sh` has built (it builds what is missing).
pub fn go_tools(names: &[&str]) -> Vec<PathBuf> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/install-go-tools.sh");
    let out = Command::new(&script)
        .args(names)
        .output()
        .unwrap_or_else(|e| panic!("failed to run {}: {e}", script.display()));
    assert!(
        out.status.success(),
        "{} {} failed (scripts/install-test-deps.sh builds them):\n{}",
        script.display(),
        names.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_once(' ').map(|(_, path)| PathBuf::from(path)))
        .collect()
}

impl Registry {
    /// Starts a registry whose blobs, certificate and `hosts.toml` files live under `dir`;
    /// returns once it listens.
    pub fn start(dir: &Path) -> Registry {
        let [registry, crane] = <[PathBuf; 2]>::try_from(go_tools(&["registry", "crane"]))
            .expect("install-go-tools.sh printed two tools");
        std::fs::create_dir_all(dir.join("blobs")).unwrap();
        let bundle = generate(&CertRequest {
            service: "registry".into(),
            namespace: "test".into(),
            dns: vec!["localhost".into()],
            ips: vec!["127.0.0.1".parse().unwrap()],
            validity: Duration::from_secs(24 * 3600),
        })
        .expect("failed to generate the registry's certificate");
        let write = |name: &str, text: &str| {
            let path = dir.join(name);
            std::fs::write(&path, text).unwrap_or_else(|e| panic!("failed to write {name}: {e}"));
            path
        };
        let ca = write("ca.crt", &bundle.ca_cert_pem);
        let mut cmd = Command::new(&registry);
        cmd.arg("--address=127.0.0.1:0")
            .arg("--tls-cert")
            .arg(write("tls.crt", &bundle.cert_pem))
            .arg("--tls-key")
            .arg(write("tls.key", &bundle.key_pem))
            .arg("--disk")
            .arg(dir.join("blobs"));
        let mut proc = Proc::start("registry", cmd, &dir.join("registry.log"));
        let host = wait_until("the registry to listen", START_LIMIT, dir, || {
            if let Some(how) = proc.exited() {
                panic!("the registry exited ({how}):\n{}", proc.tail(20));
            }
            let log = std::fs::read_to_string(&proc.log).unwrap_or_default();
            log.lines()
                .find_map(|l| l.strip_prefix("listening on https://"))
                .map(str::to_owned)
        });
        let hosts = dir.join("certs.d");
        for name in MIRRORED {
            std::fs::create_dir_all(hosts.join(name)).unwrap();
            std::fs::write(hosts.join(name).join("hosts.toml"), hosts_toml(&host, &ca)).unwrap();
        }
        Registry {
            host,
            ca,
            hosts,
            crane,
            dir: dir.to_owned(),
            proc,
        }
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.proc.pid()
    }

    /// The environment that makes Go programs (helm, crane) trust the registry.
    pub fn trust(&self) -> [(&'static str, &Path); 1] {
        [("SSL_CERT_FILE", &self.ca)]
    }

    /// `crane ARGS…` trusting the registry; its stdout, or a panic with its stderr.
    pub fn crane(&self, args: &[&str]) -> String {
        let out = Command::new(&self.crane)
            .args(args)
            .envs(self.trust())
            .output()
            .unwrap_or_else(|e| panic!("failed to run crane: {e}"));
        assert!(
            out.status.success(),
            "crane {} failed: {}\n(registry log {})",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr),
            self.proc.log.display()
        );
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    /// Pushes the OCI layout tarball `tarball` (one image) as `REPOSITORY:TAG` (no host);
    /// returns the digest the registry has it under.
    pub fn push_tarball(&self, tarball: &Path, reference: &str) -> String {
        let layout = self.dir.join("unpacked");
        let _ = std::fs::remove_dir_all(&layout);
        std::fs::create_dir_all(&layout).unwrap();
        let status = Command::new("tar")
            .arg("-xf")
            .arg(tarball)
            .arg("-C")
            .arg(&layout)
            .status()
            .unwrap();
        assert!(status.success(), "failed to unpack {}", tarball.display());
        let pushed = self.crane(&[
            "push",
            layout.to_str().unwrap(),
            &format!("{}/{reference}", self.host),
        ]);
        let _ = std::fs::remove_dir_all(&layout);
        pushed
            .rsplit_once('@')
            .expect("crane push prints REF@DIGEST")
            .1
            .to_owned()
    }
}

/// containerd's `hosts.toml` for a name mirrored to `host`: the registry is both the mirror and
/// the server, so no pull falls back to the real one.
fn hosts_toml(host: &str, ca: &Path) -> String {
    format!(
        "server = \"https://{host}\"\n\n[host.\"https://{host}\"]\n  capabilities = [\"pull\", \"resolve\"]\n  ca = \"{}\"\n",
        ca.display()
    )
}
