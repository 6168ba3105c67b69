//! docs/install.md's "Try it" example does what the guide says: the subPath Deployment is
//! denied with the quoted message, and the fix it describes is admitted with a sidecar.
//! Checked with `reload-injector inject`, which runs the webhook's admission core offline.

use std::io::Write;
use std::process::{Command, Output, Stdio};

fn guide() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/install.md")).unwrap()
}

/// The YAML between `<<'YAML'` and `YAML` in the guide's "Try it" section.
fn example_deployment(guide: &str) -> String {
    let section = guide.find("## Try it").expect("a \"Try it\" section");
    let guide = &guide[section..];
    let start = guide.find("<<'YAML'\n").expect("heredoc in the guide") + "<<'YAML'\n".len();
    let len = guide[start..].find("\nYAML\n").expect("heredoc end");
    guide[start..start + len].to_owned()
}

fn inject(yaml: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_reload-injector"))
        .args(["inject", "-n", "demo", "-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(yaml.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

#[test]
fn the_guides_subpath_example_is_denied_with_the_quoted_message() {
    let guide = guide();
    let out = inject(&example_deployment(&guide));
    assert_eq!(out.status.code(), Some(1), "not denied");
    let stderr = String::from_utf8(out.stderr).unwrap();
    let message = stderr
        .split_once("Deployment/web: ")
        .map(|(_, m)| m.trim())
        .unwrap_or_else(|| panic!("unexpected output: {stderr}"));
    assert!(
        guide.contains(&format!("denied the request: {message}")),
        "docs/install.md does not quote the current denial:\n{message}"
    );
}

#[test]
fn the_guides_fix_is_admitted_with_a_reload_sidecar() {
    let fixed = example_deployment(&guide()).replace(
        "mountPath: /etc/nginx/conf.d/default.conf, subPath: default.conf",
        "mountPath: /etc/nginx/conf.d",
    );
    assert!(!fixed.contains("subPath"));
    let out = inject(&fixed);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("name: config-reloader"), "{stdout}");
}
