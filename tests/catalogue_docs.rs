//! The reload catalogue as the docs show it is the catalogue in the code: the table between
//! `<!-- catalogue:start -->` and `<!-- catalogue:end -->` is rendered here from its entries
//! (`reload_injector::inject::catalogue`). `docs/catalogue.md` must hold it; any other file
//! listed here holds it too when it has the markers (the README, once it embeds the table).
//!
//! Rewrite the blocks on purpose with `UPDATE_DOCS=1 cargo test --test catalogue_docs`, then read
//! the diff.

use std::fmt::Write as _;
use std::path::Path;

use reload_injector::inject::catalogue::{
    Needs, PROGRAMS, Program, RELOADER_FLAGS, RELOADERS, Takes,
};

const START: &str = "<!-- catalogue:start -->";
const END: &str = "<!-- catalogue:end -->";

/// Files that show the catalogue, and whether each must.
const FILES: [(&str, bool); 2] = [("docs/catalogue.md", true), ("README.md", false)];

/// The text between the markers, and where it lies; `None` without markers.
fn block(text: &str) -> Option<std::ops::Range<usize>> {
    let start = text.find(START)? + START.len();
    let end = start + text[start..].find(END)?;
    Some(start..end)
}

#[test]
fn the_docs_show_the_catalogue_of_the_code() {
    let want = format!("\n{}", markdown());
    let update = std::env::var_os("UPDATE_DOCS").is_some();
    let mut failures = Vec::new();
    for (file, required) in FILES {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(file);
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {file}: {e}"));
        let Some(range) = block(&text) else {
            if required {
                failures.push(format!("{file}: no {START} … {END} block"));
            }
            continue;
        };
        if text[range.clone()] == want {
            continue;
        }
        if update {
            let mut rewritten = text.clone();
            rewritten.replace_range(range, &want);
            std::fs::write(&path, rewritten).unwrap_or_else(|e| panic!("write {file}: {e}"));
        } else {
            failures.push(format!(
                "{file}: the catalogue differs from the code's; run UPDATE_DOCS=1 cargo test --test catalogue_docs\n--- want\n{want}--- found\n{}",
                &text[range]
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn the_block_is_found_between_its_markers_only() {
    let text = format!("intro\n{START}\n| a |\n{END}\nafter");
    assert_eq!(&text[block(&text).unwrap()], "\n| a |\n");
    assert_eq!(block("no markers here"), None);
    assert_eq!(block(&format!("{START} but no end")), None);
}

#[test]
fn the_table_has_a_row_per_program_and_reloader() {
    let table = markdown();
    let rows = table.lines().count();
    assert_eq!(rows, 2 + PROGRAMS.len() + RELOADERS.len() + 1, "{table}");
    assert!(
        table.contains(
            "| HAProxy (`haproxy`) | signal SIGUSR2 to `haproxy` | only with `-W` or `-Ws`; its image's \
             entrypoint adds `-W` `-db` when no `command` is set |"
        ),
        "{table}"
    );
    assert!(table.contains("| Redis ("), "{table}");
    for p in &PROGRAMS {
        assert!(table.contains(p.source), "{}", p.title);
    }
}

/// The catalogue as one markdown table (program | how it reloads | condition | source), with
/// the reloaders it recognises.
fn markdown() -> String {
    let mut out =
        String::from("| program | how it reloads | condition | source |\n|---|---|---|---|\n");
    for p in &PROGRAMS {
        let names = code_list(p.names, ", ");
        let (title, source) = (p.title, p.source);
        let (how, condition) = (how(p), condition(p));
        let _ = writeln!(
            out,
            "| {title} ({names}) | {how} | {condition} | <{source}> |"
        );
    }
    for r in &RELOADERS {
        let watches = if r.watch_flags.is_empty() {
            "every config volume it mounts".to_owned()
        } else {
            format!("what {} name", code_list(r.watch_flags, ", "))
        };
        let when = match r.needs {
            Needs::Subcommand(sub) => format!("subcommand `{sub}`; "),
            _ => String::new(),
        };
        let _ = writeln!(
            out,
            "| {} ({}) | already reloads the program beside it | {when}{watches} is never hashed and \
             gets no second sidecar | <{}> |",
            r.title,
            code_list(r.names, ", "),
            r.source
        );
    }
    let _ = writeln!(
        out,
        "| any container with {} | already reloads the program beside it | every config volume it \
         mounts is never hashed and gets no second sidecar | (the flags of configmap-reload and \
         prometheus-config-reloader) |",
        code_list(&RELOADER_FLAGS, " or ")
    );
    out
}

/// How a program reloads, in a few words.
fn how(p: &Program) -> String {
    match p.takes {
        Takes::Signal(signal) => format!("signal {signal} to `{}`", p.process),
        Takes::Itself => "reloads by itself".to_owned(),
        Takes::AtStart if p.watches.is_empty() && p.polls.is_empty() => {
            "roll (reads its config at start)".to_owned()
        }
        Takes::AtStart => "roll, except what it re-reads by itself".to_owned(),
    }
}

/// When it reloads that way, in a few words.
fn condition(p: &Program) -> String {
    let mut parts = Vec::new();
    match p.needs {
        Needs::Nothing if p.takes == Takes::AtStart => {}
        Needs::Nothing => parts.push("always".to_owned()),
        Needs::Flag(flags) => parts.push(format!("only with {}", code_list(flags, " or "))),
        Needs::Subcommand(sub) => parts.push(format!("subcommand `{sub}`")),
    }
    if let Some(image) = p.image.filter(|i| !i.adds.is_empty()) {
        parts.push(format!(
            "its image's entrypoint adds {} when no `command` is set",
            code_list(image.adds, " ")
        ));
    }
    let mut itself: Vec<String> = p
        .watches
        .iter()
        .map(|f| format!("files named by `{f}`"))
        .collect();
    itself.extend(p.polls.iter().map(|d| format!("files under `{d}`")));
    if !itself.is_empty() {
        let off = p
            .watch_off
            .map(|o| format!(" (not with `{o}`)"))
            .unwrap_or_default();
        parts.push(format!("{} reload by themselves{off}", itself.join(", ")));
    }
    if parts.is_empty() {
        "—".to_owned()
    } else {
        parts.join("; ")
    }
}

/// `a`, `b` joined by `sep`, each in backticks.
fn code_list(words: &[&str], sep: &str) -> String {
    let quoted: Vec<String> = words.iter().map(|w| format!("`{w}`")).collect();
    quoted.join(sep)
}
