//! `reload-injector certs` as a user runs it: the real binary writing real files.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use base64::Engine;

const FILES: [&str; 5] = [
    "ca.crt",
    "tls.crt",
    "tls.key",
    "ca-bundle.b64",
    "secret-hash.key",
];

/// A fresh, empty directory under cargo's per-target temp dir.
fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("certs-cli-{name}"));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    dir
}

fn certs(out: &Path, extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_reload-injector"))
        .arg("certs")
        .arg("--out")
        .arg(out)
        .args(extra)
        .env_remove("RELOAD_INJECTOR_FORCE")
        .output()
        .expect("run reload-injector certs")
}

fn mode(path: &Path) -> u32 {
    fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[test]
fn writes_all_files_with_private_modes_into_a_new_directory() {
    let root = scratch("fresh");
    let out = root.join("nested/out");
    let run = certs(&out, &["--namespace", "tools", "--ip", "127.0.0.1"]);
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&run.stderr)
    );
    for name in FILES {
        assert!(out.join(name).is_file(), "{name} missing");
        assert!(
            stdout.contains(name),
            "output does not mention {name}: {stdout}"
        );
    }
    assert!(stdout.contains("reload-injector.tools.svc"), "{stdout}");
    assert!(stdout.contains("next:"), "{stdout}");
    assert_eq!(mode(&out.join("tls.key")), 0o600);
    assert_eq!(mode(&out.join("secret-hash.key")), 0o600);
    assert_eq!(mode(&out.join("tls.crt")), 0o644);

    let ca = fs::read_to_string(out.join("ca.crt")).unwrap();
    let b64 = fs::read_to_string(out.join("ca-bundle.b64")).unwrap();
    assert_eq!(b64.lines().count(), 1, "caBundle must be one line");
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(b64.trim_end())
        .unwrap();
    assert_eq!(decoded, ca.as_bytes());
    let key = fs::read_to_string(out.join("secret-hash.key")).unwrap();
    assert_eq!(hex::decode(key.trim_end()).unwrap().len(), 32);
    assert!(
        fs::read_to_string(out.join("tls.key"))
            .unwrap()
            .contains("PRIVATE KEY")
    );
    // No temporary files are left behind.
    assert_eq!(fs::read_dir(&out).unwrap().count(), FILES.len());
}

#[test]
fn refuses_to_overwrite_anything_without_force_and_overwrites_with_it() {
    let out = scratch("force");
    // Only one of the five files exists: nothing at all may be written.
    fs::write(out.join("tls.key"), "precious").unwrap();
    let run = certs(&out, &[]);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(!run.status.success());
    assert!(
        stderr.contains("tls.key") && stderr.contains("--force"),
        "{stderr}"
    );
    assert_eq!(fs::read_to_string(out.join("tls.key")).unwrap(), "precious");
    assert_eq!(
        fs::read_dir(&out).unwrap().count(),
        1,
        "something was written"
    );

    let run = certs(&out, &["--force"]);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let key = fs::read_to_string(out.join("tls.key")).unwrap();
    assert!(key.contains("PRIVATE KEY"));
    assert_eq!(mode(&out.join("tls.key")), 0o600);

    // A second run without --force refuses and keeps the generated CA.
    let ca = fs::read_to_string(out.join("ca.crt")).unwrap();
    assert!(!certs(&out, &[]).status.success());
    assert_eq!(fs::read_to_string(out.join("ca.crt")).unwrap(), ca);
}

#[test]
fn bad_input_gets_a_clear_error_and_writes_nothing() {
    let out = scratch("bad");
    let run = certs(&out, &["--dns", "Not A Name"]);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(!run.status.success());
    assert!(
        stderr.contains("failed to use \"Not A Name\" as a DNS name"),
        "{stderr}"
    );
    assert_eq!(fs::read_dir(&out).unwrap().count(), 0);
}

/// `certs/generate.sh --help` prints its usage: the script's header comment, without the `#`s
/// and without a line of the script itself.
#[test]
fn the_generate_script_prints_its_usage() {
    let out = Command::new(Path::new(env!("CARGO_MANIFEST_DIR")).join("certs/generate.sh"))
        .arg("--help")
        .output()
        .expect("failed to run certs/generate.sh");
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.starts_with("Certificates for installs without cert-manager.\n"),
        "{text}"
    );
    assert!(
        text.contains("\nUsage: certs/generate.sh [--out DIR]"),
        "{text}"
    );
    let code = ["set -", "repo=", "while ", "case ", "#!", "$("];
    for line in text.lines() {
        assert!(
            !code.iter().any(|c| line.trim_start().starts_with(c)),
            "--help printed a line of the script: {line:?}"
        );
    }
}
