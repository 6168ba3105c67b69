//! One version: `Cargo.toml`'s. Every other file that states the product's version (the chart,
//! the kustomize base's image tag, the CHANGELOG's newest entry, the supported versions in
//! SECURITY.md, the install guide) agrees with it, so a release bumps one number and this test
//! names every place it forgot. `--version` prints the version and the commit.

use std::path::Path;
use std::process::Command;

const VERSION: &str = env!("CARGO_PKG_VERSION");

fn read(path: &str) -> String {
    let full = Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("failed to read {path}: {e}"))
}

/// The value of `key: value` on its own line (quotes dropped), the first one.
fn yaml_field(text: &str, key: &str) -> Option<String> {
    text.lines()
        .filter_map(|l| l.trim().strip_prefix(&format!("{key}:")))
        .map(|v| v.trim().trim_matches('"').to_owned())
        .next()
}

/// The semver rules a release version must meet (semver.org's grammar, without build
/// metadata, which an OCI tag cannot carry): the same check as scripts/release.sh's.
fn is_semver(version: &str) -> bool {
    let (core, pre) = match version.split_once('-') {
        Some((core, pre)) => (core, Some(pre)),
        None => (version, None),
    };
    let number = |n: &str| {
        !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) && (n == "0" || !n.starts_with('0'))
    };
    let identifier = |p: &str| {
        !p.is_empty()
            && p.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
            && (!p.bytes().all(|b| b.is_ascii_digit()) || number(p))
    };
    core.split('.').count() == 3
        && core.split('.').all(number)
        && pre.is_none_or(|p| p.split('.').all(identifier))
}

#[test]
fn the_version_is_semver() {
    assert!(
        is_semver(VERSION),
        "Cargo.toml's version {VERSION} is not semver"
    );
    for good in ["0.2.0", "1.10.3", "2.0.0-rc.1", "0.3.0-alpha-2.0"] {
        assert!(is_semver(good), "{good}");
    }
    for bad in [
        "v0.2.0",
        "0.2",
        "01.2.3",
        "0.2.0-",
        "0.2.0-rc.01",
        "0.2.0+build",
        "0.2.0 ",
    ] {
        assert!(!is_semver(bad), "{bad}");
    }
}

#[test]
fn every_file_that_states_the_version_follows_cargo_toml() {
    let chart = read("charts/reload-injector/Chart.yaml");
    assert_eq!(
        yaml_field(&chart, "version").as_deref(),
        Some(VERSION),
        "Chart.yaml version"
    );
    assert_eq!(
        yaml_field(&chart, "appVersion").as_deref(),
        Some(VERSION),
        "Chart.yaml appVersion"
    );
    let kustomization = read("manifests/base/kustomization.yaml");
    assert_eq!(
        yaml_field(&kustomization, "newTag").as_deref(),
        Some(VERSION),
        "manifests/base/kustomization.yaml's image tag"
    );
    let changelog = read("CHANGELOG.md");
    let newest = changelog
        .lines()
        .find_map(|l| l.strip_prefix("## ["))
        .and_then(|l| l.split(']').next());
    assert_eq!(newest, Some(VERSION), "CHANGELOG.md's newest entry");
    let minor = VERSION.rsplit_once('.').unwrap().0;
    assert!(
        read("SECURITY.md").contains(&format!("| {minor}.x | yes |")),
        "SECURITY.md does not list {minor}.x as supported"
    );
    let guide = read("docs/install.md");
    let block = guide
        .split_once("<!-- install:start -->")
        .and_then(|(_, rest)| rest.split_once("<!-- install:end -->"))
        .expect("docs/install.md's install block")
        .0;
    let versions: Vec<&str> = block
        .match_indices("--version ")
        .map(|(at, _)| {
            block[at + "--version ".len()..]
                .split_whitespace()
                .next()
                .unwrap()
        })
        .collect();
    assert!(!versions.is_empty(), "the install block names no --version");
    for said in versions {
        assert_eq!(
            said, VERSION,
            "docs/install.md's install block installs --version {said}"
        );
    }
    for (path, text) in [
        ("docs/install.md", guide.clone()),
        ("Dockerfile", read("Dockerfile")),
    ] {
        let image = "ghcr.io/reload-injector/reload-injector:";
        for (at, _) in text.match_indices(image) {
            let tag: String = text[at + image.len()..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-'))
                .collect();
            assert_eq!(tag, VERSION, "{path} names the image at {tag}");
        }
    }
}

#[test]
fn version_prints_the_version_and_the_commit() {
    let out = Command::new(env!("CARGO_BIN_EXE_reload-injector"))
        .arg("--version")
        .output()
        .unwrap();
    assert!(out.status.success());
    // This test and the binary are built by the same cargo run, with the same environment.
    let commit = option_env!("RELOAD_INJECTOR_COMMIT").unwrap_or("unknown");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("reload-injector {VERSION} (commit {commit})")
    );
}
