//! The docs say what the code does. Tables that restate the code are generated from it (flags,
//! metrics, supported versions) or checked against it (annotations); relative links resolve;
//! the README stays short; and each claim that once contradicted the code has a check here.
//!
//! `UPDATE_DOCS=1 cargo test --test packaging offline::docs` rewrites the generated blocks on purpose (read the
//! diff); without it a block that differs from the code fails.

use crate::docs_support;

use std::collections::BTreeSet;

use docs_support::{Block, doc, docs_files, repo};

/// Every flag of every subcommand, rendered from clap: what `--help` says, the environment
/// variable and the default.
#[test]
fn the_flags_tables_are_the_cli() {
    Block::new("docs/reference.md", "flags").check(&docs_support::flags_tables());
}

/// Every metric of `serve` (webhook and controller) and of `watch`, from their registries.
#[test]
fn the_metrics_tables_are_the_registries() {
    Block::new("docs/reference.md", "metrics").check(&docs_support::metrics_tables());
}

/// The reload catalogue: whole in `docs/catalogue.md`, short in the README.
#[test]
fn the_catalogue_tables_are_the_code() {
    use reload_injector::workload::catalogue::{PROGRAMS, RELOADERS};
    let whole = docs_support::catalogue::markdown();
    assert_eq!(
        whole.lines().count(),
        2 + PROGRAMS.len() + RELOADERS.len() + 1,
        "a row per program and reloader, and one for the reloaders' flags:\n{whole}"
    );
    assert!(
        whole.contains(
            "| HAProxy (`haproxy`) | signal SIGUSR2 to `haproxy` | only with `-W` or `-Ws`; its \
             image's entrypoint adds `-W` `-db` when no `command` is set |"
        ),
        "{whole}"
    );
    for p in &PROGRAMS {
        assert!(whole.contains(p.source), "{}", p.title);
    }
    Block::new("docs/catalogue.md", "catalogue").check(&whole);
    Block::new("README.md", "catalogue-short").check(&docs_support::catalogue::short_markdown());
}

/// The supported versions: the current and the floor the test suite builds and runs.
#[test]
fn the_supported_versions_are_the_tested_ones() {
    let table = docs_support::versions_table();
    Block::new("docs/install.md", "versions").check(&table);
}

/// Every `reload-injector.io/…` name the code defines is in the reference's tables, and every
/// name there is one the code defines.
#[test]
fn the_annotation_tables_name_what_the_code_defines() {
    let defined = docs_support::defined_names();
    let reference = doc("docs/reference.md");
    let section = reference
        .split("\n## ")
        .find(|s| s.starts_with("Annotations and labels"))
        .expect("docs/reference.md has an Annotations and labels section");
    let documented: BTreeSet<String> = docs_support::table_names(section);
    let missing: Vec<&String> = defined.difference(&documented).collect();
    let unknown: Vec<&String> = documented.difference(&defined).collect();
    assert!(
        missing.is_empty() && unknown.is_empty(),
        "docs/reference.md's annotation and label tables differ from src/: \
         defined but not documented {missing:?}; documented but not defined {unknown:?}"
    );
    assert!(defined.len() >= 10, "found only {defined:?} in src/");
}

/// Every warning and denial the golden cases produce is explained in the reference's table, and
/// every row of the table is a warning the code gives.
#[test]
fn the_warnings_table_is_what_the_code_says() {
    let wrong = docs_support::warnings::mismatches();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Links to files of the repository and to headings of its markdown files resolve.
#[test]
fn relative_links_resolve() {
    let mut broken = Vec::new();
    for file in docs_files() {
        broken.extend(docs_support::broken_links(&file));
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

/// A newcomer reads the README in five minutes and reaches an install command on its first
/// screen.
#[test]
fn the_readme_is_short_and_installs_early() {
    let readme = doc("README.md");
    let words = readme.split_whitespace().count();
    assert!(words <= 1500, "README.md has {words} words (at most 1,500)");
    let first = readme
        .lines()
        .position(|l| l.trim_start().starts_with("helm install"))
        .expect("README.md has no `helm install` line");
    assert!(
        first < 60,
        "the first install command is on line {}",
        first + 1
    );
    let test_command = readme.lines().any(|l| l.trim() == "scripts/test.sh");
    assert!(test_command, "README.md must say how to run the test suite");
}

/// The README's install commands are the guide's, which the release test runs on a real cluster.
#[test]
fn the_readme_installs_as_the_guide_does() {
    let readme = docs_support::install_blocks("README.md");
    let guide = docs_support::install_blocks("docs/install.md");
    assert!(!guide.is_empty(), "docs/install.md has no install block");
    assert_eq!(
        readme, guide,
        "README.md's install commands differ from docs/install.md's"
    );
}

/// The README's offline example prints what the README says it prints, and writes what it
/// quotes on stderr.
#[test]
fn the_readme_example_prints_what_it_quotes() {
    docs_support::check_readme_example();
}

/// Claims the docs once made that the code contradicted: each is held here, with the reason.
#[test]
fn contradictions_stay_fixed() {
    let mut found = Vec::new();
    let rbac = [
        "manifests/base/rbac.yaml",
        "charts/reload-injector/templates/rbac.yaml",
    ];
    for file in docs_files().iter().map(String::as_str).chain(rbac) {
        found.extend(docs_support::contradictions(file));
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
}

/// The sidecar's user, wherever the docs name it, is the one the code gives it.
#[test]
fn the_sidecar_user_is_the_codes() {
    let uid = docs_support::sidecar_uid();
    let mut wrong = Vec::new();
    for file in docs_files() {
        let text = doc(&file);
        for (n, line) in text.lines().enumerate() {
            for word in docs_support::numbers_like(line, "655") {
                if word != uid {
                    wrong.push(format!(
                        "{file}:{}: {word} (the sidecar runs as {uid})",
                        n + 1
                    ));
                }
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Kubernetes versions given as tested (`vX.Y.Z`) are the ones the suite builds.
#[test]
fn tested_versions_named_in_the_docs_are_built() {
    let (current, floor) = docs_support::kube_versions();
    let mut wrong = Vec::new();
    for file in docs_files() {
        for (n, line) in doc(&file).lines().enumerate() {
            for v in docs_support::kube_patch_versions(line) {
                if v != current && v != floor {
                    wrong.push(format!("{file}:{}: v{v}", n + 1));
                }
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "Kubernetes versions the suite does not build (v{current}, v{floor}):\n{}",
        wrong.join("\n")
    );
    let _ = repo();
}
