//! The release workflow (`.github/workflows/release.yml`) passes actionlint (built from the Go
//! module proxy by `scripts/install-go-tools.sh`), with shellcheck checking every `run:` script,
//! and does what a release needs: on a `v*` tag it runs `scripts/release.sh` against ghcr.io,
//! signs the image and the chart keyless, and attaches the binaries, sums, SBOMs and krew
//! manifest to the GitHub release.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn actionlint() -> PathBuf {
    let script = repo().join("scripts/install-go-tools.sh");
    let out = Command::new(&script).arg("actionlint").output().unwrap();
    assert!(
        out.status.success(),
        "scripts/install-go-tools.sh actionlint failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    PathBuf::from(line.strip_prefix("actionlint ").expect("NAME PATH"))
}

/// actionlint on `files`, from the repository, with shellcheck required.
fn lint(files: &[&Path]) -> Output {
    let shellcheck = Command::new("shellcheck").arg("--version").output();
    assert!(
        shellcheck.is_ok_and(|o| o.status.success()),
        "shellcheck is missing (actionlint checks run: scripts with it): apt-get install shellcheck (scripts/install-test-deps.sh does)"
    );
    Command::new(actionlint())
        .args(["-no-color", "-shellcheck", "shellcheck"])
        .args(files)
        .current_dir(repo())
        .output()
        .unwrap()
}

fn workflow_path() -> PathBuf {
    repo().join(".github/workflows/release.yml")
}

#[test]
fn the_release_workflow_passes_actionlint() {
    let out = lint(&[&workflow_path()]);
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!(
        "actionlint .github/workflows/release.yml: exit {:?}, output: {said:?}",
        out.status.code()
    );
    assert!(out.status.success() && said.trim().is_empty(), "{said}");
}

#[test]
fn actionlint_finds_what_is_wrong_in_a_broken_copy() {
    // The same workflow with an unknown context and a shell error: actionlint must say both,
    // so the check above can fail.
    let broken = workflow_path()
        .parent()
        .unwrap()
        .join(format!(".broken-{}.yml", std::process::id()));
    let text = std::fs::read_to_string(workflow_path()).unwrap();
    let text = text
        .replacen(
            "${{ github.repository_owner }}",
            "${{ github.repository_ownr }}",
            1,
        )
        .replacen(
            "version=${GITHUB_REF_NAME#v}",
            "version=${GITHUB_REF_NAME#v",
            1,
        );
    std::fs::write(&broken, text).unwrap();
    let out = lint(&[&broken]);
    let _ = std::fs::remove_file(&broken);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{said}");
    assert!(said.contains("repository_ownr"), "{said}");
    assert!(said.contains("shellcheck"), "{said}");
}

#[test]
fn on_a_tag_it_releases_to_ghcr_signs_and_attaches_every_file() {
    let text = std::fs::read_to_string(workflow_path()).unwrap();
    let workflow: Value = serde_saphyr::from_str(&text).unwrap();
    assert_eq!(workflow["on"]["push"]["tags"], serde_json::json!(["v*"]));
    let job = &workflow["jobs"]["release"];
    for (permission, level) in [
        ("contents", "write"),
        ("packages", "write"),
        ("id-token", "write"),
    ] {
        assert_eq!(job["permissions"][permission], level, "{permission}");
    }
    assert_eq!(
        job["env"]["REGISTRY"],
        "ghcr.io/${{ github.repository_owner }}"
    );
    let runs: String = job["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["run"].as_str())
        .collect::<Vec<_>>()
        .join("\n");
    for needed in [
        "scripts/release.sh \"$version\"",
        "cosign sign --yes \"$IMAGE\"",
        "cosign sign --yes \"$CHART\"",
        "cosign attest --yes --type spdxjson",
        "gh release create",
        "\"$dir\"/reload-injector-linux-*",
        "\"$dir/SHA256SUMS\"",
        "\"$dir/reload-injector.yaml\"",
        "\"$dir/reload-injector-$VERSION.tgz\"",
    ] {
        assert!(runs.contains(needed), "no step runs {needed}");
    }
}
