//! Relative links of a markdown file: the file they name exists, and a `#heading` they name is
//! a heading of that file (GitHub's anchors).

use std::collections::BTreeSet;
use std::path::Path;

use super::repo;

/// One line per link of `file` (relative to the repository) that does not resolve.
pub fn broken_links(file: &str) -> Vec<String> {
    let text = std::fs::read_to_string(repo().join(file)).unwrap_or_default();
    let dir = Path::new(file).parent().unwrap_or(Path::new(""));
    let mut broken = Vec::new();
    for (n, target) in links(&text) {
        if target.contains("://") || target.starts_with("mailto:") {
            continue;
        }
        let (path, anchor) = target.split_once('#').unwrap_or((&target, ""));
        let resolved = if path.is_empty() {
            Path::new(file).to_path_buf()
        } else {
            normalize(&dir.join(path))
        };
        let full = repo().join(&resolved);
        if !full.exists() {
            broken.push(format!(
                "{file}:{n}: {target} ({} does not exist)",
                resolved.display()
            ));
            continue;
        }
        if !anchor.is_empty() && resolved.extension().is_some_and(|e| e == "md") {
            let target_text = std::fs::read_to_string(&full).unwrap_or_default();
            if !anchors(&target_text).contains(anchor) {
                broken.push(format!("{file}:{n}: {target} (no such heading)"));
            }
        }
    }
    broken
}

/// `(line number, target)` of every `[text](target)` outside code blocks.
fn links(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut in_code = false;
    for (n, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
            continue;
        }
        if in_code {
            continue;
        }
        let mut rest = line;
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let Some(end) = after.find(')') else { break };
            let target = after[..end].trim();
            if !target.is_empty() && !target.contains(' ') {
                out.push((n + 1, target.to_owned()));
            }
            rest = &after[end..];
        }
    }
    out
}

/// `a/./b/../c` → `a/c`.
fn normalize(path: &Path) -> std::path::PathBuf {
    let mut out = std::path::PathBuf::new();
    for part in path.components() {
        match part {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// The anchors GitHub gives the headings of a markdown text.
pub fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut in_code = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
            continue;
        }
        if in_code || !line.starts_with('#') {
            continue;
        }
        let title = line.trim_start_matches('#').trim();
        let slug: String = title
            .to_lowercase()
            .chars()
            .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
            .map(|c| if c == ' ' { '-' } else { c })
            .collect();
        let mut unique = slug.clone();
        let mut i = 1;
        while seen.contains(&unique) {
            unique = format!("{slug}-{i}");
            i += 1;
        }
        seen.insert(unique);
    }
    seen
}

#[test]
fn anchors_are_githubs() {
    let a = anchors("# A b\n## `serve` — the webhook\n## A b\n```\n# not\n```\n");
    let want: BTreeSet<String> = ["a-b", "serve--the-webhook", "a-b-1"]
        .map(String::from)
        .into();
    assert_eq!(a, want);
}
