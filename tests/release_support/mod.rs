//! What the release tests share. A release is built from a commit, and the tree under test may
//! hold uncommitted work, so each test releases from a checkout of its own: the working tree's
//! files (tracked and untracked, not ignored) committed once, with a fixed author, message and
//! date (HEAD's), so the same files give the same commit ([`checkout`]). [`bump`] makes the
//! next version's commit; [`release`] runs `scripts/release.sh` in a checkout.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// The repository under test.
pub fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The crate's version: what a checkout of the working tree releases.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// `git ARGS…` in `dir` with a fixed identity and date; its stdout, or a panic.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let date = head_date();
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_AUTHOR_NAME", "release test")
        .env("GIT_AUTHOR_EMAIL", "release-test@reload-injector.invalid")
        .env("GIT_COMMITTER_NAME", "release test")
        .env(
            "GIT_COMMITTER_EMAIL",
            "release-test@reload-injector.invalid",
        )
        .env("GIT_AUTHOR_DATE", &date)
        .env("GIT_COMMITTER_DATE", &date)
        .output()
        .unwrap_or_else(|e| panic!("failed to run git: {e}"));
    assert!(
        out.status.success(),
        "git {} in {} failed: {}",
        args.join(" "),
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// The committer date of the repository's HEAD (the checkouts' commit date), or a fixed one
/// outside a git checkout.
fn head_date() -> String {
    Command::new("git")
        .arg("-C")
        .arg(repo())
        .args(["log", "-1", "--format=%cI"])
        .output()
        .ok()
        .filter(|o| o.status.success() && !o.stdout.is_empty())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_else(|| "2026-01-01T00:00:00Z".to_owned())
}

/// A checkout to release from.
pub struct Checkout {
    pub dir: PathBuf,
    pub commit: String,
    pub version: String,
}

/// Copies the working tree into `dir` (emptied first) and commits it; see the module doc.
pub fn checkout(dir: &Path) -> Checkout {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).unwrap();
    let listed = git(repo(), &["ls-files", "-co", "--exclude-standard", "-z"]);
    for name in listed.split('\0').filter(|n| !n.is_empty()) {
        let from = repo().join(name);
        if !from.is_file() {
            continue; // deleted in the working tree, not yet in the index
        }
        let to = dir.join(name);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(&from, &to)
            .unwrap_or_else(|e| panic!("failed to copy {}: {e}", from.display()));
    }
    git(dir, &["init", "-q", "-b", "release"]);
    commit(dir, "the working tree under test");
    Checkout {
        dir: dir.to_owned(),
        commit: git(dir, &["rev-parse", "HEAD"]),
        version: VERSION.to_owned(),
    }
}

fn commit(dir: &Path, message: &str) {
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "--no-gpg-sign", "-m", message]);
}

/// Edits `path` in `dir`, replacing `from` by `to` once; panics when `from` is not there.
fn replace(dir: &Path, path: &str, from: &str, to: &str) {
    let file = dir.join(path);
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains(from), "{path} has no {from:?}");
    std::fs::write(&file, text.replacen(from, to, 1)).unwrap();
}

/// Commits version `to` on top of `checkout`: every file tests/packaging/offline/release_version.rs holds to the
/// version, and a CHANGELOG entry, as a maintainer bumps it.
pub fn bump(checkout: &Checkout, to: &str) -> Checkout {
    let (dir, from) = (&checkout.dir, checkout.version.as_str());
    replace(
        dir,
        "Cargo.toml",
        &format!("version = \"{from}\""),
        &format!("version = \"{to}\""),
    );
    replace(
        dir,
        "Cargo.lock",
        &format!("name = \"reload-injector\"\nversion = \"{from}\""),
        &format!("name = \"reload-injector\"\nversion = \"{to}\""),
    );
    let chart = "charts/reload-injector/Chart.yaml";
    replace(
        dir,
        chart,
        &format!("version: {from}"),
        &format!("version: {to}"),
    );
    replace(
        dir,
        chart,
        &format!("appVersion: \"{from}\""),
        &format!("appVersion: \"{to}\""),
    );
    replace(
        dir,
        "manifests/base/kustomization.yaml",
        &format!("newTag: \"{from}\""),
        &format!("newTag: \"{to}\""),
    );
    replace(
        dir,
        "CHANGELOG.md",
        &format!("## [{from}]"),
        &format!(
            "## [{to}]\n\nA release of the test suite: {from} with its version bumped.\n\n## [{from}]"
        ),
    );
    commit(dir, &format!("version {to}"));
    Checkout {
        dir: dir.clone(),
        commit: git(dir, &["rev-parse", "HEAD"]),
        version: to.to_owned(),
    }
}

/// What one run of scripts/release.sh did.
pub struct Release {
    pub output: Output,
    pub took: Duration,
    /// `image REF@DIGEST` and `chart REF@DIGEST`, when it pushed.
    pub image: Option<String>,
    pub chart: Option<String>,
}

impl Release {
    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.output.stderr).into_owned()
    }

    /// The image's digest (panics with the script's output when it did not push).
    pub fn image_digest(&self) -> &str {
        let image = self
            .image
            .as_deref()
            .unwrap_or_else(|| panic!("release.sh pushed no image:\n{}", self.stderr()));
        image.rsplit_once('@').unwrap().1
    }

    pub fn chart_digest(&self) -> &str {
        let chart = self
            .chart
            .as_deref()
            .unwrap_or_else(|| panic!("release.sh pushed no chart:\n{}", self.stderr()));
        chart.rsplit_once('@').unwrap().1
    }
}

/// Runs `scripts/release.sh VERSION` in `checkout`, with `env` (REGISTRY, RELEASE_DIR, the
/// tools, SSL_CERT_FILE, …).
pub fn release(checkout: &Checkout, version: &str, env: &[(&str, &Path)]) -> Release {
    let start = Instant::now();
    let output = Command::new(checkout.dir.join("scripts/release.sh"))
        .arg(version)
        .current_dir(&checkout.dir)
        .envs(env.iter().map(|(k, v)| (*k, *v)))
        .output()
        .unwrap_or_else(|e| panic!("failed to run scripts/release.sh: {e}"));
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let field = |word: &str| {
        stdout
            .lines()
            .find_map(|l| l.strip_prefix(word))
            .map(str::to_owned)
    };
    Release {
        image: field("image "),
        chart: field("chart "),
        took: start.elapsed(),
        output,
    }
}

/// The cache of the release tests: `$RELOAD_INJECTOR_KUBE_CACHE_ROOT` (default
/// ~/.cache/reload-injector)/release.
pub fn cache() -> PathBuf {
    let root = std::env::var_os("RELOAD_INJECTOR_KUBE_CACHE_ROOT")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let home = std::env::var_os("HOME").unwrap_or_else(|| "/root".into());
            Path::new(&home).join(".cache/reload-injector")
        });
    root.join("release")
}
