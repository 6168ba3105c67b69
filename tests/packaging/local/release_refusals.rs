//! `scripts/release.sh` refuses bad input with one line on stderr, before building or pushing
//! anything: a version that is not semver, one the tree does not state, a tree with
//! uncommitted changes, a registry it cannot reach, and a version already in the registry. The
//! registry is the tests' own (go-containerregistry's, HTTPS on loopback); after every refusal
//! it holds exactly what it held before.

use crate::cluster_support;
use crate::release_support;

use std::path::{Path, PathBuf};
use std::process::Command;

use cluster_support::node::registry::{Registry, go_tools};
use release_support::{Checkout, VERSION, checkout, release};

fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("release-refusals/{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn helm() -> PathBuf {
    let out = Command::new(release_support::repo().join("scripts/install-helm.sh"))
        .output()
        .unwrap();
    assert!(out.status.success(), "scripts/install-helm.sh failed");
    PathBuf::from(
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .last()
            .unwrap()
            .trim(),
    )
}

/// Runs the release of `version` from `checkout` into `registry` (`HOST/ORG`); asserts it
/// refused with exactly one line containing `why` and printed nothing on stdout.
fn refused(checkout: &Checkout, version: &str, registry: &str, trust: &Path, why: &str) {
    let [crane, syft] = <[PathBuf; 2]>::try_from(go_tools(&["crane", "syft"])).unwrap();
    let registry = PathBuf::from(registry);
    let out_dir = checkout.dir.join("dist-refused");
    let helm = helm();
    let run = release(
        checkout,
        version,
        &[
            ("REGISTRY", &registry),
            ("RELEASE_DIR", &out_dir),
            ("CRANE", &crane),
            ("SYFT", &syft),
            ("HELM", &helm),
            ("SSL_CERT_FILE", trust),
        ],
    );
    let stderr = run.stderr();
    eprintln!(
        "release.sh {version} (REGISTRY={}): {}",
        registry.display(),
        stderr.trim()
    );
    assert_eq!(run.output.status.code(), Some(1), "{stderr}");
    assert!(run.output.stdout.is_empty(), "{:?}", run.output.stdout);
    assert_eq!(stderr.lines().count(), 1, "not one line:\n{stderr}");
    assert!(
        stderr.starts_with("release.sh: ") && stderr.contains(why),
        "{stderr}"
    );
    assert!(!out_dir.exists(), "it wrote {}", out_dir.display());
}

#[test]
fn bad_input_stops_with_one_line_and_pushes_nothing() {
    let dir = scratch("registry");
    let registry = Registry::start(&dir);
    let org = format!("{}/acme", registry.host);
    // A version already there: an image under the tag the release would push.
    let pause = Command::new(release_support::repo().join("scripts/build-test-images.sh"))
        .arg("pause")
        .output()
        .unwrap();
    assert!(
        pause.status.success(),
        "{}",
        String::from_utf8_lossy(&pause.stderr)
    );
    let tarball = String::from_utf8_lossy(&pause.stdout)
        .split_whitespace()
        .nth(2)
        .unwrap()
        .to_owned();
    let existing = registry.push_tarball(
        Path::new(&tarball),
        &format!("acme/reload-injector:{VERSION}"),
    );
    let held = || registry.crane(&["catalog", &registry.host]);
    let before = held();
    assert_eq!(before, "acme/reload-injector");

    let clean = checkout(&scratch("checkout"));
    let ca = registry.ca.clone();
    for (version, why) in [
        ("v0.2.0", "is not a semver version"),
        ("0.2", "is not a semver version"),
        ("0.2.0-rc.01", "is not a semver version"),
        ("99.0.0", "is not the version this tree states"),
    ] {
        refused(&clean, version, &org, &ca, why);
    }
    refused(&clean, VERSION, &org, &ca, "is already in the registry");
    refused(
        &clean,
        VERSION,
        "127.0.0.1:1/acme",
        &ca,
        "cannot ask the registry",
    );
    // Trusting another CA, the registry is there but cannot be asked either.
    refused(
        &clean,
        VERSION,
        &org,
        Path::new("/dev/null"),
        "cannot ask the registry",
    );

    let dirty = checkout(&scratch("dirty"));
    std::fs::write(dirty.dir.join("notes.txt"), "work in progress\n").unwrap();
    refused(
        &dirty,
        VERSION,
        &org,
        &ca,
        "uncommitted or untracked changes",
    );
    std::fs::remove_file(dirty.dir.join("notes.txt")).unwrap();
    std::fs::write(dirty.dir.join("README.md"), "edited\n").unwrap();
    refused(
        &dirty,
        VERSION,
        &org,
        &ca,
        "uncommitted or untracked changes",
    );

    assert_eq!(held(), before, "the registry changed");
    assert_eq!(
        registry.crane(&["digest", &format!("{org}/reload-injector:{VERSION}")]),
        existing
    );
}
