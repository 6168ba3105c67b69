//! The reference's table of warnings and denials against what the code says: every warning and
//! denial the golden tests produce matches a row, and every row matches one of them (or is in
//! [`NOT_IN_GOLDENS`], with where it is tested instead). In a row, `…` stands for any text and a
//! quoted name (`"c"`) for any quoted name.

use super::{doc, repo};

/// Rows no golden case produces, and the test that covers each instead.
const NOT_IN_GOLDENS: &[(&str, &str)] = &[(
    "… more warnings not shown (the API server passes on 4 KiB); …",
    "only past 4 KiB of warnings at admission: src/workload/messages.rs's unit tests",
)];

/// The patterns of the table: the code spans of each row's first cell.
pub fn documented() -> Vec<String> {
    let text = doc("docs/reference.md");
    let section = &text[text
        .find("## Warnings and denials")
        .expect("docs/reference.md has no Warnings and denials section")..];
    let mut patterns = Vec::new();
    for row in section.lines().filter(|l| l.starts_with("| `")) {
        let first = row[2..].split(" | ").next().unwrap_or_default();
        patterns.extend(first.split('`').skip(1).step_by(2).map(str::to_owned));
    }
    patterns
}

/// Every warning and denial of the golden cases, without the `reload-injector: ` prefix.
pub fn produced() -> Vec<String> {
    let mut out = Vec::new();
    let inject = repo().join("tests/fixtures/inject");
    let cli = repo().join("tests/fixtures/inject-cli");
    for dir in [inject, cli] {
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("failed to list {}: {e}", dir.display()))
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.to_string_lossy().contains(".golden."))
            .collect();
        files.sort();
        for file in files {
            out.extend(from_golden(
                &std::fs::read_to_string(&file).unwrap_or_default(),
            ));
        }
    }
    out
}

/// The lines of a golden that carry a warning or a denial.
fn from_golden(text: &str) -> Vec<String> {
    const PREFIX: &str = "reload-injector: ";
    let mut out = Vec::new();
    for line in text.lines() {
        // A YAML golden quotes each warning; a CLI golden has them as stderr lines.
        let unquoted = line
            .trim_start_matches(['-', ' '])
            .trim_start_matches("message: ")
            .trim_matches('"')
            .replace("\\\"", "\"");
        if let Some(at) = unquoted.find(PREFIX) {
            out.push(unquoted[at + PREFIX.len()..].to_owned());
        }
    }
    out
}

/// One piece of a pattern.
#[derive(Debug, PartialEq)]
enum Piece {
    Text(String),
    Any,
}

fn pieces(pattern: &str) -> Vec<Piece> {
    let mut out = Vec::new();
    let mut text = String::new();
    let mut chars = pattern.chars().peekable();
    let flush = |text: &mut String, out: &mut Vec<Piece>| {
        if !text.is_empty() {
            out.push(Piece::Text(std::mem::take(text)));
        }
    };
    while let Some(c) = chars.next() {
        match c {
            '…' => {
                flush(&mut text, &mut out);
                out.push(Piece::Any);
            }
            '"' => {
                text.push('"');
                flush(&mut text, &mut out);
                out.push(Piece::Any);
                for inner in chars.by_ref() {
                    if inner == '"' {
                        break;
                    }
                }
                text.push('"');
            }
            c => text.push(c),
        }
    }
    flush(&mut text, &mut out);
    out
}

/// Whether `text` matches `pattern` whole.
pub fn matches(pattern: &str, text: &str) -> bool {
    fn from(pieces: &[Piece], text: &str) -> bool {
        match pieces.split_first() {
            None => text.is_empty(),
            Some((Piece::Text(t), rest)) => text
                .strip_prefix(t.as_str())
                .is_some_and(|after| from(rest, after)),
            Some((Piece::Any, rest)) => text
                .char_indices()
                .map(|(i, _)| i)
                .chain([text.len()])
                .any(|i| from(rest, &text[i..])),
        }
    }
    from(&pieces(pattern), text)
}

/// One line per produced warning no row matches, and per row nothing produced matches.
pub fn mismatches() -> Vec<String> {
    let (rows, said) = (documented(), produced());
    assert!(
        rows.len() > 20 && said.len() > 100,
        "{} rows, {} warnings",
        rows.len(),
        said.len()
    );
    let mut out = Vec::new();
    for warning in &said {
        if !rows.iter().any(|r| matches(r, warning)) {
            out.push(format!("no row of docs/reference.md matches: {warning}"));
        }
    }
    for row in &rows {
        let exempt = NOT_IN_GOLDENS.iter().any(|(r, _)| r == row);
        if !exempt && !said.iter().any(|w| matches(row, w)) {
            out.push(format!("no golden produces the row: {row}"));
        }
    }
    out.sort();
    out.dedup();
    out
}

#[test]
fn patterns_match_whole_texts_with_names_and_ellipses_free() {
    assert!(matches(
        r#"container "c" reads … via env; …"#,
        r#"container "web" reads ConfigMap "a" via env; pods roll when it changes"#
    ));
    assert!(matches(r#"a "x"…: b"#, r#"a "y" ("z"): b"#));
    assert!(!matches(
        r#"container "c" reads"#,
        r#"container "web" reads more"#
    ));
    assert!(!matches("Rollout …", "a Rollout"));
    assert_eq!(pieces("a …"), [Piece::Text("a ".into()), Piece::Any]);
}
