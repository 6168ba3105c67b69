//! What the docs tests read and render: generated blocks between `<!-- NAME:start -->` and
//! `<!-- NAME:end -->`, the tables rendered from the code, links, and the claims list.

pub mod catalogue;
pub mod claims;
pub mod links;
pub mod warnings;

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::Command;

use clap::CommandFactory;

/// The repository's root.
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A file of the repository, read whole (`path` relative to the root).
pub fn doc(path: &str) -> String {
    let full = repo().join(path);
    std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("failed to read {path}: {e}"))
}

/// The markdown files a user reads: the README, `docs/`, and the READMEs beside the chart,
/// the manifests and the certificate script.
pub fn docs_files() -> Vec<String> {
    let mut files = vec!["README.md".to_owned()];
    let mut docs: Vec<String> = std::fs::read_dir(repo().join("docs"))
        .expect("failed to list docs/")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".md"))
        .map(|name| format!("docs/{name}"))
        .collect();
    docs.sort();
    files.extend(docs);
    for extra in ["charts/reload-injector/README.md", "certs/README.md"] {
        if repo().join(extra).exists() {
            files.push(extra.to_owned());
        }
    }
    files
}

/// A generated block of a file.
pub struct Block {
    file: &'static str,
    name: &'static str,
}

impl Block {
    pub fn new(file: &'static str, name: &'static str) -> Self {
        Block { file, name }
    }

    /// Fails unless the block holds exactly `want` (with `UPDATE_DOCS=1`, writes it).
    pub fn check(&self, want: &str) {
        let text = doc(self.file);
        let (start, end) = (
            format!("<!-- {}:start -->\n", self.name),
            format!("<!-- {}:end -->", self.name),
        );
        let from = text
            .find(&start)
            .unwrap_or_else(|| panic!("{} has no `{}` line", self.file, start.trim_end()))
            + start.len();
        let to = from
            + text[from..]
                .find(&end)
                .unwrap_or_else(|| panic!("{} has no `{end}` line", self.file));
        let have = &text[from..to];
        if have == want {
            return;
        }
        if std::env::var_os("UPDATE_DOCS").is_some() {
            let updated = format!("{}{want}{}", &text[..from], &text[to..]);
            std::fs::write(repo().join(self.file), updated).expect("failed to write the doc");
            return;
        }
        panic!(
            "the `{}` block of {} differs from the code; run `UPDATE_DOCS=1 cargo test --test \
             docs` and read the diff.\n--- in the file:\n{have}\n--- from the code:\n{want}",
            self.name, self.file
        );
    }
}

/// The text of every Rust file under `src/`.
fn source_texts() -> Vec<String> {
    let mut texts = Vec::new();
    let mut stack = vec![repo().join("src")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir)
            .expect("failed to list src/")
            .flatten()
        {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                texts.push(std::fs::read_to_string(&path).unwrap_or_default());
            }
        }
    }
    texts
}

/// The UID the sidecar runs as when it need not match the app (`NONROOT_UID` in `src/`).
pub fn sidecar_uid() -> String {
    let texts = source_texts();
    let line = texts
        .iter()
        .flat_map(|text| text.lines())
        .find(|l| l.contains("const NONROOT_UID: i64 = "))
        .expect("src/ defines no NONROOT_UID");
    line.rsplit("= ")
        .next()
        .unwrap_or_default()
        .trim_end_matches(';')
        .to_owned()
}

/// `|` would end a table cell; newlines would end the row.
fn cell(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('|', "\\|")
}

/// One table per command: each flag, its environment variable, default and help.
pub fn flags_tables() -> String {
    let cli = reload_injector::cli::Cli::command();
    let mut out = String::new();
    let global: Vec<&clap::Arg> = cli.get_arguments().filter(|a| a.is_global_set()).collect();
    write_flags(&mut out, "every command", &global);
    for sub in cli.get_subcommands() {
        let args: Vec<&clap::Arg> = sub
            .get_arguments()
            .filter(|a| !a.is_global_set() && !matches!(a.get_id().as_str(), "help" | "version"))
            .collect();
        write_flags(
            &mut out,
            &format!("`reload-injector {}`", sub.get_name()),
            &args,
        );
    }
    out
}

fn write_flags(out: &mut String, title: &str, args: &[&clap::Arg]) {
    let _ = writeln!(out, "\n**{title}**\n");
    out.push_str("| flag | environment | default | meaning |\n|---|---|---|---|\n");
    for arg in args {
        let name = match (arg.get_long(), arg.get_short()) {
            (Some(long), Some(short)) => format!("`-{short}`, `--{long}`"),
            (Some(long), None) => format!("`--{long}`"),
            _ => format!("`{}`", arg.get_id().as_str().to_uppercase()),
        };
        let env = arg
            .get_env()
            .map(|e| format!("`{}`", e.to_string_lossy()))
            .unwrap_or_else(|| "—".to_owned());
        let defaults: Vec<String> = arg
            .get_default_values()
            .iter()
            .map(|v| v.to_string_lossy().into_owned())
            .collect();
        let default = match defaults.as_slice() {
            [] if matches!(arg.get_action(), clap::ArgAction::SetTrue) => "off".to_owned(),
            [] => "—".to_owned(),
            values => format!("`{}`", values.join(",")),
        };
        let help = arg
            .get_long_help()
            .or(arg.get_help())
            .map(|h| h.to_string())
            .unwrap_or_default();
        let _ = writeln!(out, "| {name} | {env} | {default} | {} |", cell(&help));
    }
}

/// The metrics of `serve` and of `watch`, as their registries describe them. A labelled family
/// is shown only once it has a series, so each gets one first; [`registered_names`] then checks
/// that no metric was left out.
pub fn metrics_tables() -> String {
    use reload_injector::controller::write_target::TargetKind;
    use reload_injector::hash::ConfigKind;
    let serve = reload_injector::webhook::webhook_metrics::Metrics::new();
    serve.review("Pod", "CREATE", "allowed", std::time::Duration::ZERO);
    serve.rejected(400);
    serve.controller().written(TargetKind::Deployment);
    serve.controller().config_change(ConfigKind::ConfigMap);
    serve.controller().watched("ConfigMap", 0);
    let watch = reload_injector::watch::watch_metrics::Metrics::default();
    watch.count_reload("success");
    watch.set_config("/etc/app", None, "sha256:0");
    let mut watch_text = String::new();
    prometheus_client::encoding::text::encode(&mut watch_text, &watch.registry())
        .expect("failed to encode the watch metrics");
    let mut out = String::new();
    let mut shown = BTreeSet::new();
    for (title, text) in [("`serve`", serve.render()), ("`watch`", watch_text)] {
        let _ = writeln!(out, "\n**{title}**\n");
        out.push_str("| metric | type | meaning |\n|---|---|---|\n");
        for (name, kind, help) in described(&text) {
            let _ = writeln!(out, "| `{name}` | {kind} | {} |", cell(&help));
            shown.insert(base_name(&name));
        }
    }
    let registered = registered_names();
    let missing: Vec<&String> = registered.difference(&shown).collect();
    assert!(
        missing.is_empty(),
        "metrics registered in src/ but not shown (give each labelled family a series in \
         tests/docs_support): {missing:?}"
    );
    out
}

/// A metric's name without the `reload_injector_` prefix and the counters' `_total`.
fn base_name(name: &str) -> String {
    let name = name.strip_prefix("reload_injector_").unwrap_or(name);
    name.strip_suffix("_total").unwrap_or(name).to_owned()
}

/// The names `src/` registers: the first string literal after each `.register(`.
fn registered_names() -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for text in source_texts() {
        for (at, _) in text.match_indices("registry.register(") {
            if let Some(name) = text[at..].split('"').nth(1) {
                names.insert(name.to_owned());
            }
        }
    }
    names
}

/// `(name, type, help)` of each metric of an OpenMetrics text page.
fn described(text: &str) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    let mut help = std::collections::HashMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, text) = rest.split_once(' ').unwrap_or((rest, ""));
            help.insert(name.to_owned(), text.trim_end_matches('.').to_owned());
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, ""));
            let shown = if kind == "counter" {
                format!("{name}_total")
            } else {
                name.to_owned()
            };
            out.push((
                shown,
                kind.to_owned(),
                help.remove(name).unwrap_or_default(),
            ));
        }
    }
    out
}

/// `(current, floor)`: the Kubernetes versions the test suite builds and runs.
pub fn kube_versions() -> (String, String) {
    let script = doc("scripts/install-kube-test-binaries.sh");
    let read = |key: &str| {
        script
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{key}=")))
            .unwrap_or_else(|| panic!("scripts/install-kube-test-binaries.sh sets no {key}="))
            .trim_matches('"')
            .to_owned()
    };
    (read("current"), read("floor"))
}

/// The supported-versions table.
pub fn versions_table() -> String {
    let (current, floor) = kube_versions();
    let minor = |v: &str| {
        v.rsplit_once('.')
            .map_or(v.to_owned(), |(m, _)| m.to_owned())
    };
    let (cur, flo) = (minor(&current), minor(&floor));
    let mut out = String::from("| version | status |\n|---|---|\n");
    let _ = writeln!(
        out,
        "| {cur} (v{current}) | **tested**: the whole suite, with a real API server, \
         controller-manager, kubectl and a real node (kubelet, containerd, runc) |"
    );
    let first: u32 = flo
        .rsplit('.')
        .next()
        .and_then(|m| m.parse().ok())
        .unwrap_or(0);
    let last: u32 = cur
        .rsplit('.')
        .next()
        .and_then(|m| m.parse().ok())
        .unwrap_or(0);
    for between in (first + 1..last).rev() {
        let _ = writeln!(
            out,
            "| 1.{between} | expected to work: between two tested versions |"
        );
    }
    let _ = writeln!(
        out,
        "| {flo} (v{floor}) | **tested**: the end-to-end tests again, with its API server, \
         controller-manager and kubectl (the node runs {cur} only) |"
    );
    let _ = writeln!(out, "| older than {flo} | not supported |");
    out
}

/// The `reload-injector.io/…` annotation and label names `src/` defines as public constants.
pub fn defined_names() -> BTreeSet<String> {
    source_texts()
        .iter()
        .flat_map(|t| constants_in(t))
        .collect()
}

fn constants_in(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| l.trim_start().starts_with("pub const") && l.contains(": &str"))
        .filter_map(|l| {
            let value = l.split('"').nth(1)?;
            let name = value.strip_prefix("reload-injector.io/")?;
            (!name.is_empty()).then(|| value.to_owned())
        })
        .collect()
}

/// The names in the first column of the tables of a markdown text: `` `reload-injector.io/x` ``.
pub fn table_names(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter(|l| l.starts_with("| `reload-injector.io/"))
        .filter_map(|l| l.split('`').nth(1))
        .map(|name| name.split(':').next().unwrap_or(name).trim().to_owned())
        .collect()
}

/// Words of `line` made of digits that start with `prefix`, five digits long (user IDs).
pub fn numbers_like<'a>(line: &'a str, prefix: &str) -> Vec<&'a str> {
    line.split(|c: char| !c.is_ascii_digit())
        .filter(|w| w.len() == 5 && w.starts_with(prefix))
        .collect()
}

/// `1.NN.P` of every `v1.NN.P` in `line`.
pub fn kube_patch_versions(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (at, _) in line.match_indices("v1.") {
        let before = line[..at].chars().last();
        if before.is_some_and(|c| c.is_ascii_alphanumeric()) {
            continue;
        }
        let rest = &line[at + 1..];
        let version: String = rest
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == '.')
            .collect();
        let version = version.trim_end_matches('.');
        let parts: Vec<&str> = version.split('.').collect();
        if parts.len() == 3 && parts[1].len() == 2 {
            out.push(version.to_owned());
        }
    }
    out
}

/// The fenced `sh` blocks between `<!-- install:start -->` and `<!-- install:end -->`.
pub fn install_blocks(file: &str) -> Vec<String> {
    let text = doc(file);
    let Some(start) = text.find("<!-- install:start -->") else {
        return Vec::new();
    };
    let end = text[start..]
        .find("<!-- install:end -->")
        .map_or(text.len(), |e| start + e);
    text[start..end]
        .split("```sh\n")
        .skip(1)
        .filter_map(|b| b.split("```").next())
        .map(str::to_owned)
        .collect()
}

/// Runs the README's offline example; what it writes on stderr is the README's
/// `example-stderr` block.
pub fn check_readme_example() {
    let readme = doc("README.md");
    let command = readme
        .lines()
        .find(|l| l.starts_with("cargo run --release -- inject "))
        .expect("README.md has no `cargo run --release -- inject` line");
    let args: Vec<&str> = command
        .trim_start_matches("cargo run --release -- ")
        .split_whitespace()
        .collect();
    let output = Command::new(env!("CARGO_BIN_EXE_reload-injector"))
        .args(&args)
        .current_dir(repo())
        .output()
        .expect("failed to run reload-injector");
    assert!(output.status.success(), "{command}: {output:?}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("name: config-reloader"), "{stdout}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    Block::new("README.md", "example-stderr").check(&format!("```\n{stderr}```\n"));
}

pub use claims::contradictions;
pub use links::broken_links;
