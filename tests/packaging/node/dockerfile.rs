//! The Dockerfile's build, run outside Docker (there is no Docker engine here): its RUN step
//! is `scripts/build-static.sh`; this test checks the Dockerfile says so, runs that same
//! script, and checks the result is a static executable that starts with no libc files at all
//! (in an empty chroot, as on distroless/static).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::copies;
use crate::dockerfile;

use copies::{copy_program, run_copy};

const SCRIPT: &str = "scripts/build-static.sh";

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The Dockerfile's instructions, continuation lines joined, comments dropped.
fn instructions() -> Vec<String> {
    dockerfile::instructions()
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn dockerfile_builds_with_the_script_onto_a_minimal_non_root_image() {
    let lines = instructions();
    let froms: Vec<&String> = lines.iter().filter(|l| l.starts_with("FROM ")).collect();
    assert_eq!(froms.len(), 2, "multi-stage: {froms:?}");
    assert!(
        froms[0].starts_with("FROM rust:1.95-bookworm "),
        "{}",
        froms[0]
    );
    assert!(
        froms[1] == "FROM gcr.io/distroless/static-debian12:nonroot" || froms[1] == "FROM scratch",
        "{}",
        froms[1]
    );
    assert!(
        lines.iter().any(|l| l == &format!("RUN {SCRIPT}")),
        "no RUN {SCRIPT}"
    );
    let runtime = lines
        .iter()
        .skip_while(|l| *l != froms[1])
        .collect::<Vec<_>>();
    assert!(
        runtime.iter().all(|l| !l.starts_with("RUN ")),
        "the runtime stage has no shell"
    );
    assert!(
        runtime.contains(&&"USER 65532:65532".to_owned()),
        "{runtime:?}"
    );
    assert_eq!(lines.last().unwrap(), r#"ENTRYPOINT ["/reload-injector"]"#);
    assert!(runtime.contains(&&"COPY --from=build /reload-injector /reload-injector".to_owned()));
}

#[test]
fn dockerfile_and_script_build_for_every_platform() {
    let lines = instructions();
    let build_stage: Vec<&String> = lines
        .iter()
        .skip_while(|l| !l.starts_with("FROM "))
        .skip(1)
        .take_while(|l| !l.starts_with("FROM "))
        .collect();
    // BuildKit sets TARGETARCH only for stages that declare it.
    assert!(
        build_stage.iter().any(|l| *l == "ARG TARGETARCH"),
        "{build_stage:?}"
    );
    for file in ["Dockerfile", SCRIPT] {
        let text = fs::read_to_string(repo().join(file)).unwrap();
        let code: Vec<&str> = text
            .lines()
            .filter(|l| !l.trim_start().starts_with('#'))
            .collect();
        assert!(
            !code.iter().any(|l| l.contains("x86_64-unknown-linux-gnu")),
            "{file} hard-codes an x86_64 target"
        );
    }
    let script = fs::read_to_string(repo().join(SCRIPT)).unwrap();
    assert!(
        script.contains("amd64)") && script.contains("arm64)"),
        "{script}"
    );
}

#[test]
fn the_script_refuses_an_architecture_it_cannot_build() {
    let host = std::env::consts::ARCH;
    let other = if host == "aarch64" { "amd64" } else { "arm64" };
    for (arch, says) in [(other, "build host"), ("riscv64", "is not supported")] {
        let out = Command::new(repo().join(SCRIPT))
            .current_dir(repo())
            .env("TARGETARCH", arch)
            .output()
            .expect("run the build script");
        assert!(
            !out.status.success(),
            "TARGETARCH={arch} built:\n{}",
            text(&out)
        );
        assert!(
            text(&out).contains(says),
            "TARGETARCH={arch}: {}",
            text(&out)
        );
    }
}

/// The machine (`e_machine`) of an ELF file, as Rust names the architecture.
fn elf_arch(bytes: &[u8]) -> &'static str {
    match u16::from_le_bytes([bytes[18], bytes[19]]) {
        62 => "x86_64",
        183 => "aarch64",
        _ => "other",
    }
}

/// Runs the Dockerfile's build script; returns the binary it built.
fn build() -> PathBuf {
    // As BuildKit runs it for this machine's platform.
    let arch = match std::env::consts::ARCH {
        "aarch64" => "arm64",
        _ => "amd64",
    };
    let out = Command::new(repo().join(SCRIPT))
        .current_dir(repo())
        .env("TARGETARCH", arch)
        .output()
        .expect("run the build script");
    assert!(out.status.success(), "{SCRIPT} failed:\n{}", text(&out));
    let printed = String::from_utf8(out.stdout).unwrap();
    let relative = printed
        .lines()
        .last()
        .expect("script prints the binary path")
        .trim();
    // The Dockerfile copies exactly this path out of the build stage.
    let dockerfile = fs::read_to_string(repo().join("Dockerfile")).unwrap();
    if !Path::new(relative).is_absolute() {
        assert!(
            dockerfile.contains(&format!("cp {relative} /reload-injector")),
            "{relative}"
        );
    }
    repo().join(relative)
}

/// (has PT_INTERP, number of DT_NEEDED entries) of a 64-bit little-endian ELF file.
fn elf_linking(bytes: &[u8]) -> (bool, usize) {
    assert_eq!(&bytes[..4], b"\x7fELF", "not an ELF file");
    assert_eq!((bytes[4], bytes[5]), (2, 1), "not 64-bit little-endian");
    let u16_at = |o: usize| u16::from_le_bytes(bytes[o..o + 2].try_into().unwrap()) as usize;
    let u64_at = |o: usize| u64::from_le_bytes(bytes[o..o + 8].try_into().unwrap()) as usize;
    assert!(
        matches!(u16_at(16), 2 | 3),
        "not an executable (ET_EXEC or ET_DYN)"
    );
    let (phoff, phentsize, phnum) = (u64_at(32), u16_at(54), u16_at(56));
    let mut interp = false;
    let mut needed = 0;
    for i in 0..phnum {
        let ph = phoff + i * phentsize;
        let p_type = u32::from_le_bytes(bytes[ph..ph + 4].try_into().unwrap());
        match p_type {
            3 => interp = true, // PT_INTERP: asks for a dynamic loader
            2 => {
                // PT_DYNAMIC: count DT_NEEDED (tag 1) entries, i.e. shared libraries.
                let (offset, size) = (u64_at(ph + 8), u64_at(ph + 32));
                needed += (offset..offset + size)
                    .step_by(16)
                    .filter(|&e| u64_at(e) == 1)
                    .count();
            }
            _ => {}
        }
    }
    (interp, needed)
}

#[test]
fn the_dockerfile_build_makes_a_static_executable_that_starts_without_libc() {
    let binary = build();
    let bytes = fs::read(&binary).unwrap();
    assert_eq!(
        elf_arch(&bytes),
        std::env::consts::ARCH,
        "built for the host"
    );
    assert_eq!(
        elf_linking(&bytes),
        (false, 0),
        "dynamically linked: {}",
        binary.display()
    );
    if let Ok(ldd) = Command::new("ldd").arg(&binary).output() {
        let said = text(&ldd);
        assert!(!said.contains("=>"), "ldd lists libraries: {said}");
    }

    let version = Command::new(&binary).arg("--version").output().unwrap();
    assert!(version.status.success());
    // The commit it was built from: build-static.sh asks git (RELOAD_INJECTOR_COMMIT unset).
    let head = Command::new("git")
        .args(["-C", env!("CARGO_MANIFEST_DIR"), "rev-parse", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map_or_else(|| "unknown".to_owned(), |o| text(&o).trim().to_owned());
    assert_eq!(
        String::from_utf8(version.stdout).unwrap().trim(),
        format!(
            "reload-injector {} (commit {head})",
            env!("CARGO_PKG_VERSION")
        )
    );

    // An empty root with nothing but the binary, like distroless/static: it still runs,
    // including the crypto and file writing of `certs`.
    let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join("static-root");
    let _ = fs::remove_dir_all(&root);
    fs::create_dir_all(&root).unwrap();
    // Copied and run as `copies` says (ETXTBSY).
    copy_program(&binary, &root.join("reload-injector"));
    let chrooted = |args: &[&str]| -> Output {
        let mut cmd = Command::new("chroot");
        cmd.arg(&root).arg("/reload-injector").args(args);
        let direct = run_copy(|| cmd.output()).expect("run chroot");
        if direct.status.success() {
            return direct;
        }
        // Not root: try a user namespace where we are.
        let mut cmd = Command::new("unshare");
        cmd.args(["--map-root-user", "chroot"])
            .arg(&root)
            .arg("/reload-injector")
            .args(args);
        let userns = run_copy(|| cmd.output()).expect("run unshare");
        assert!(
            userns.status.success(),
            "could not run the binary in an empty chroot (needs root or user namespaces):\n\
             chroot: {}\nunshare: {}",
            text(&direct),
            text(&userns)
        );
        userns
    };
    let out = chrooted(&["--version"]);
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("reload-injector "));
    chrooted(&["certs", "--out", "/out"]);
    for name in [
        "ca.crt",
        "tls.crt",
        "tls.key",
        "ca-bundle.b64",
        "secret-hash.key",
    ] {
        assert!(root.join("out").join(name).is_file(), "{name} not written");
    }
}

#[test]
fn elf_check_tells_dynamic_from_static() {
    // The test binary itself is an ordinary dynamically linked executable.
    let me = fs::read(std::env::current_exe().unwrap()).unwrap();
    let (interp, needed) = elf_linking(&me);
    assert!(interp && needed > 0, "({interp}, {needed})");
}
