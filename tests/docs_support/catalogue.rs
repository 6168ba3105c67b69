//! The reload catalogue as the docs show it, rendered from its entries
//! (`reload_injector::workload::catalogue`): the whole table for `docs/catalogue.md`, a short one
//! for the README.

use std::fmt::Write as _;

use reload_injector::workload::catalogue::{
    Needs, PROGRAMS, Program, RELOADER_FLAGS, RELOADERS, Takes,
};

/// The catalogue as one markdown table (program | how it reloads | condition | source), with
/// the reloaders it recognises.
pub fn markdown() -> String {
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

/// The short table of the README: each program linked to its source, what a change does, and
/// the condition on its command line; the reloaders in one row.
pub fn short_markdown() -> String {
    let mut out = String::from("| program | on change | when |\n|---|---|---|\n");
    for p in &PROGRAMS {
        let how = match p.takes {
            Takes::Signal(signal) => format!("`{signal}`"),
            Takes::Itself => "reloads by itself".to_owned(),
            Takes::AtStart if p.watches.is_empty() && p.polls.is_empty() => "roll".to_owned(),
            Takes::AtStart => "roll; some files reload by themselves".to_owned(),
        };
        let when = match p.needs {
            Needs::Nothing => String::new(),
            Needs::Flag(flags) => format!("with {}", code_list(flags, " or ")),
            Needs::Subcommand(sub) => format!("`{sub}`"),
        };
        let _ = writeln!(out, "| [{}]({}) | {how} | {when} |", p.title, p.source);
    }
    let reloaders: Vec<String> = RELOADERS
        .iter()
        .map(|r| format!("[{}]({})", r.title, r.source))
        .collect();
    let _ = writeln!(
        out,
        "| {} | already reloaded: never rolled, no second sidecar | |",
        reloaders.join(", ")
    );
    out
}
