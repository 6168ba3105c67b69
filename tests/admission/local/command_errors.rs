//! Every command on bad input: a non-zero exit, and an error message that says each cause
//! once, in words that fit the command (no "under review" for an offline file).

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn scratch(name: &str) -> PathBuf {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("ri-errors-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs the binary with `args`; returns (exit code, stderr). Fails if it keeps running.
fn run(args: &[&str]) -> (i32, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_reload-injector"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let mut stderr = String::new();
            std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut stderr).unwrap();
            return (status.code().unwrap_or(-1), stderr);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("{args:?} kept running instead of failing");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The checks: non-zero exit, one `error:` line, no line said twice, no cause (`: `-separated
/// part of a line) said twice, and every expected phrase present.
fn check(args: &[&str], expect: &[&str]) -> String {
    let (code, stderr) = run(args);
    assert_ne!(code, 0, "{args:?} succeeded:\n{stderr}");
    let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(
        errors.len(),
        1,
        "{args:?}: one error line expected:\n{stderr}"
    );
    let mut lines: Vec<&str> = stderr
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let all = lines.len();
    lines.sort();
    lines.dedup();
    assert_eq!(lines.len(), all, "{args:?}: a line repeats:\n{stderr}");
    let message = errors[0].trim_start_matches("error:").trim();
    let causes: Vec<&str> = message.split(": ").map(str::trim).collect();
    for (i, cause) in causes.iter().enumerate() {
        for other in &causes[i + 1..] {
            // Equal, or a long cause repeated inside another.
            let (short, long) = if cause.len() <= other.len() {
                (cause, other)
            } else {
                (other, cause)
            };
            assert!(
                !(short == long || (short.len() >= 16 && long.contains(short))),
                "{args:?}: {cause:?} is said twice:\n{stderr}"
            );
        }
    }
    assert_eq!(
        stderr.matches("os error").count().min(1),
        stderr.matches("os error").count(),
        "{args:?}: the system's message is said twice:\n{stderr}"
    );
    for phrase in expect {
        assert!(
            stderr.contains(phrase),
            "{args:?}: no {phrase:?} in:\n{stderr}"
        );
    }
    stderr
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_owned()
}

#[test]
fn inject_says_each_cause_once_in_offline_words() {
    let dir = scratch("inject");
    let subpath_y = write(
        &dir,
        "subpath-y.yaml",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  template:\n    spec:\n      containers:\n        - name: a\n          image: x\n          volumeMounts: [{name: c, mountPath: /x, subPath: y}]\n      volumes: [{name: c, configMap: {name: z}}]\n",
    );
    let stderr = check(
        &["inject", "-f", &subpath_y],
        &["Deployment/web", "subpath-y.yaml", "quote the value"],
    );
    assert!(!stderr.contains("under review"), "{stderr}");
    check(
        &["inject", "-f", "/nonexistent/in.yaml"],
        &["/nonexistent/in.yaml"],
    );
    let bad_yaml = write(&dir, "bad.yaml", "a: [\n");
    check(&["inject", "-f", &bad_yaml], &["as YAML", "bad.yaml"]);
    let bad_config = write(
        &dir,
        "bad-configs.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: [1]\n",
    );
    check(
        &["inject", "-f", &subpath_y, "--configs", &bad_config],
        &["--configs", "ConfigMap \"x\""],
    );
    let empty = write(&dir, "empty.key", "");
    check(
        &["inject", "-f", &subpath_y, "--secret-hash-key-file", &empty],
        &["empty"],
    );
}

#[test]
fn serve_says_each_cause_once() {
    let dir = scratch("serve");
    let certs = dir.join("certs");
    let out = certs.to_str().unwrap();
    assert_eq!(run(&["certs", "--out", out]).0, 0);
    let (cert, key, ca) = (
        format!("{out}/tls.crt"),
        format!("{out}/tls.key"),
        format!("{out}/ca.crt"),
    );
    let base = [
        "serve",
        "--no-kube",
        "--listen",
        "127.0.0.1:0",
        "--metrics-listen",
        "127.0.0.1:0",
    ];
    let serve = |extra: &[&str], expect: &[&str]| {
        let mut args = base.to_vec();
        args.extend_from_slice(extra);
        check(&args, expect)
    };
    serve(
        &["--tls-cert", "/nope", "--tls-key", &key],
        &["/nope", "--tls-cert", "No such file"],
    );
    serve(
        &["--tls-cert", &cert, "--tls-key", "/nope"],
        &["/nope", "--tls-key", "No such file"],
    );
    serve(&["--tls-cert", &key, "--tls-key", &key], &["--tls-cert"]);
    serve(&["--tls-cert", &cert, "--tls-key", &cert], &["--tls-key"]);
    serve(
        &["--tls-cert", &ca, "--tls-key", &key],
        &["failed to match", "--tls-key"],
    );
    serve(
        &[
            "--tls-cert",
            &cert,
            "--tls-key",
            &key,
            "--secret-hash-key-file",
            "/nope",
        ],
        &["--secret-hash-key-file", "No such file"],
    );
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let mut args = vec!["serve", "--no-kube", "--metrics-listen", "127.0.0.1:0"];
    args.extend_from_slice(&["--listen", &addr, "--tls-cert", &cert, "--tls-key", &key]);
    check(&args, &["--listen", "in use"]);
}

#[test]
fn watch_says_each_cause_once() {
    check(
        &["watch", "--dir", "/tmp", "--signal", "BOGUS"],
        &["--signal", "BOGUS"],
    );
    check(
        &["watch", "--dir", "/tmp", "--url", "https://x.test/"],
        &["--url", "http://"],
    );
    check(
        &["watch", "--dir", "/tmp", "--url", "not a url"],
        &["--url"],
    );
}

#[test]
fn certs_says_each_cause_once() {
    let root = scratch("certs");
    let dir = root.join("out");
    let out = dir.to_str().unwrap();
    assert_eq!(run(&["certs", "--out", out]).0, 0);
    check(&["certs", "--out", out], &["--force"]);
    check(
        &["certs", "--out", &format!("{out}/ca.crt/sub")],
        &["Not a directory"],
    );
    check(
        &["certs", "--out", &format!("{out}/x"), "--dns", "bad name!"],
        &["bad name!"],
    );
    check(
        &["certs", "--out", &format!("{out}/y"), "--validity", "0s"],
        &["validity"],
    );
}
