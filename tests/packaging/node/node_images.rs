//! The product's image on the test node is what the Dockerfile ships: `scripts/build-test-images.sh`
//! builds it without Docker, and this test reads the OCI tarball back and checks it against the
//! Dockerfile's runtime stage (user, entrypoint, labels, the one file it copies) and against
//! the binary `scripts/build-static.sh` builds, so the two cannot drift.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::dockerfile;
use dockerfile::runtime_stage;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Runs a script of ours; its stdout.
fn script(name: &str, args: &[&str]) -> String {
    let out = Command::new(repo().join("scripts").join(name))
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("failed to run scripts/{name}: {e}"));
    assert!(
        out.status.success(),
        "scripts/{name} failed (scripts/install-node-deps.sh installs what it needs):\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// One member of a tar file.
fn member(tar: &Path, name: &str) -> Vec<u8> {
    let out = Command::new("tar")
        .arg("-xOf")
        .arg(tar)
        .arg(name)
        .output()
        .unwrap();
    assert!(out.status.success(), "{} has no {name}", tar.display());
    out.stdout
}

fn blob(tar: &Path, digest: &str) -> Vec<u8> {
    member(
        tar,
        &format!("blobs/sha256/{}", digest.trim_start_matches("sha256:")),
    )
}

fn instruction<'a>(stage: &'a [String], word: &str) -> Vec<&'a str> {
    stage
        .iter()
        .filter_map(|l| l.strip_prefix(word))
        .map(str::trim)
        .collect()
}

#[test]
fn the_product_image_is_what_the_dockerfile_ships() {
    let line = script("build-test-images.sh", &["product"]);
    let tar = PathBuf::from(line.split_whitespace().nth(2).expect("no tarball printed"));
    let index: Value = serde_json::from_slice(&member(&tar, "index.json")).unwrap();
    let manifest: Value = serde_json::from_slice(&blob(
        &tar,
        index["manifests"][0]["digest"].as_str().unwrap(),
    ))
    .unwrap();
    let config: Value =
        serde_json::from_slice(&blob(&tar, manifest["config"]["digest"].as_str().unwrap()))
            .unwrap();
    let stage = runtime_stage();

    // USER and ENTRYPOINT, exactly.
    assert_eq!(
        instruction(&stage, "USER "),
        [config["config"]["User"].as_str().unwrap()]
    );
    let entrypoint: Value = serde_json::from_str(instruction(&stage, "ENTRYPOINT ")[0]).unwrap();
    assert_eq!(config["config"]["Entrypoint"], entrypoint);
    // Every LABEL key="value".
    for label in instruction(&stage, "LABEL ") {
        for pair in label.split("\" ").map(|p| p.trim().trim_end_matches('"')) {
            let (key, value) = pair
                .split_once("=\"")
                .unwrap_or_else(|| panic!("LABEL {pair}"));
            assert_eq!(config["config"]["Labels"][key], value, "label {key}");
        }
    }
    // The one COPY, and the file it copies is the static build's binary, byte for byte.
    assert_eq!(
        instruction(&stage, "COPY "),
        ["--from=build /reload-injector /reload-injector"]
    );
    let built = script("build-static.sh", &[]);
    let built = repo().join(built.lines().last().unwrap().trim());
    let layers = manifest["layers"].as_array().unwrap();
    assert_eq!(layers.len(), 1);
    let layer = std::env::temp_dir().join(format!("ri-product-layer-{}.tar", std::process::id()));
    std::fs::write(&layer, blob(&tar, layers[0]["digest"].as_str().unwrap())).unwrap();
    let shipped = member(&layer, "reload-injector");
    let passwd = String::from_utf8_lossy(&member(&layer, "etc/passwd")).into_owned();
    let listing = Command::new("tar")
        .arg("-tvf")
        .arg(&layer)
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&layer);
    assert!(
        shipped == std::fs::read(&built).unwrap(),
        "/reload-injector differs from {}",
        built.display()
    );
    let listing = String::from_utf8_lossy(&listing.stdout);
    let entry = listing
        .lines()
        .find(|l| l.ends_with(" reload-injector"))
        .unwrap();
    assert!(entry.starts_with("-rwxr-xr-x 0/0 "), "{entry}");
    // What distroless/static:nonroot also has: the nonroot user, and a world-writable /tmp.
    assert!(passwd.contains("nonroot:x:65532:65532:"), "{passwd}");
    assert!(
        listing
            .lines()
            .any(|l| l.starts_with("drwxrwxrwt 0/0 ") && l.ends_with(" tmp/")),
        "{listing}"
    );
}
