//! Text and JSON forms of a report or summary (pure); JSON fields are in docs/status.md.

use std::fmt::Write as _;

use serde::Serialize;

use super::age;
use super::config_objects::Written;
use super::config_report::ConfigReport;
use super::findings::Finding;
use super::hash_check::{HashCheck, HashState};
use super::install::{Installation, OptIn, WebhookState};
use super::pods::{PodLine, Pods};
use super::read_lines::{OnChange, ReadLine};
use super::snapshot::INSTALL_NAME;
use super::summary::{Line, Summary};
use super::workload_report::{EventLine, Report};
use crate::policy::{INJECT, OPT_IN_VALUE, RETIRED_FLAG};

/// The report as JSON (pretty, with `exitCode`).
pub fn json<T: Serialize>(value: &T, exit_code: u8) -> String {
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct WithCode<'a, T> {
        #[serde(flatten)]
        value: &'a T,
        exit_code: u8,
    }
    let mut text = serde_json::to_string_pretty(&WithCode { value, exit_code })
        .unwrap_or_else(|e| format!("{{\"error\": \"failed to write JSON: {e}\"}}"));
    text.push('\n');
    text
}

/// The report as text, for a person: its five sections, then the findings.
pub fn text(report: &Report) -> String {
    let mut out = format!("{} {}/{}\n", report.kind, report.namespace, report.name);
    let (opt_in, installation) = (&report.opt_in, &report.installation);
    opt_in_text(&mut out, &report.namespace, opt_in);
    reloader_text(&mut out, opt_in, installation.reloader_retired);
    installation_text(&mut out, installation);
    reads_text(&mut out, &report.reads, report.reload.as_deref());
    out.push_str("\n4. Is it current?\n");
    hash_text(&mut out, &report.hash);
    events_text(&mut out, &report.events);
    pods_text(&mut out, &report.pods);
    findings_text(&mut out, &report.findings, &report.notes);
    out
}

fn opt_in_text(out: &mut String, namespace: &str, opt: &OptIn) {
    out.push_str("\n1. Opt-in\n");
    let label = match (&opt.namespace_label, opt.namespace_read) {
        (_, false) => "could not be read".to_owned(),
        (Some(v), true) => format!("label reload-injector.io/inject={v}"),
        (None, true) => "no reload-injector.io/inject label".to_owned(),
    };
    let labelled = opt.namespace_label.as_deref() == Some(OPT_IN_VALUE) || !opt.namespace_read;
    let verdict = if opt.excluded {
        "never mutated"
    } else if labelled {
        "opted in"
    } else {
        "NOT opted in"
    };
    let _ = writeln!(out, "   namespace {namespace:?}: {verdict} ({label})");
    let template = opt.opted_out_by.map_or("not opted out".to_owned(), |by| {
        format!("opted OUT by {by} reload-injector.io/inject: \"false\"")
    });
    let _ = writeln!(out, "   pod template: {template}");
}

fn installation_text(out: &mut String, inst: &Installation) {
    out.push_str("\n2. Installation\n");
    let webhook = match (inst.webhook, inst.ca_bundle) {
        (WebhookState::Present, Some(true)) => "present, CA bundle set",
        (WebhookState::Present, _) => "present, CA bundle MISSING",
        (WebhookState::Missing, _) => "MISSING",
        (WebhookState::Unreadable, _) => "could not be read",
    };
    let _ = writeln!(
        out,
        "   MutatingWebhookConfiguration {INSTALL_NAME:?}: {webhook}"
    );
    let running = if inst.controller_running {
        "running"
    } else {
        "EXPIRED: no controller is running"
    };
    let lease = match (&inst.lease_holder, inst.renewed_seconds_ago) {
        _ if !inst.lease_read => "could not be read".to_owned(),
        (Some(holder), Some(ago)) => {
            format!("held by {holder:?}, renewed {} ago ({running})", age(ago))
        }
        _ => "no holder: no controller is running".to_owned(),
    };
    let _ = writeln!(
        out,
        "   controller Lease {}/{INSTALL_NAME}: {lease}",
        inst.namespace
    );
}

fn reads_text(out: &mut String, reads: &[ReadLine], reload: Option<&str>) {
    out.push_str("\n3. What it reads, and what a change does\n");
    if reads.is_empty() {
        out.push_str("   no ConfigMap or Secret\n");
    }
    for read in reads {
        let key = (read.key.as_ref()).map_or("(every key)".to_owned(), |k| format!("key {k:?}"));
        let what = format!("{} {:?} {key}", read.object_kind, read.object);
        let volume = read.volume.as_ref().map(|v| format!(" (volume {v:?})"));
        let via = format!("{}{}", read.via, volume.unwrap_or_default());
        let optional = if read.optional { ", optional" } else { "" };
        let exists = match read.exists {
            Some(false) => ", MISSING",
            None => ", existence unknown",
            Some(true) => "",
        };
        let _ = writeln!(
            out,
            "   container {:?}: {what} via {via}{optional}{exists} -> {}: {}",
            read.container,
            change_text(read.effect.on_change),
            read.effect.detail
        );
    }
    if let Some(reload) = reload {
        let _ = writeln!(out, "   the sidecar reloads with {reload}");
    }
}

fn change_text(on_change: OnChange) -> &'static str {
    match on_change {
        OnChange::Rollout => "rollout",
        OnChange::HotReload => "hot reload",
        OnChange::RestartInPlace => "restart in place",
        OnChange::ReloadsItself => "reloads by itself",
        OnChange::AlreadyReloaded => "already reloaded",
        OnChange::NextJob => "next Job",
        OnChange::Nothing => "nothing",
    }
}

fn hash_text(out: &mut String, hash: &HashCheck) {
    let stamped = hash.stamped.as_deref().unwrap_or("none");
    let live = hash.live.as_deref().unwrap_or("none");
    let line = match hash.state {
        HashState::Current if hash.earlier => format!(
            "current ({stamped}, over what an earlier version counted: the next change re-stamps it)"
        ),
        HashState::Current => format!("current ({stamped})"),
        HashState::Stale => format!("STALE (stamped {stamped}, live data {live})"),
        HashState::NotStamped => "not stamped".to_owned(),
        HashState::NothingToHash => "nothing read through env or subPath".to_owned(),
        HashState::Unknown if !hash.secrets_checked => {
            "not checked (Secrets cannot be checked)".to_owned()
        }
        HashState::Unknown => "could not be computed".to_owned(),
    };
    let _ = writeln!(out, "   config-hash: {line}");
    for w in &hash.written {
        let _ = writeln!(
            out,
            "   {} {:?}: {}",
            w.object_kind,
            w.object,
            written_text(w)
        );
    }
}

fn written_text(written: &Written) -> String {
    let ago = age(written.seconds_ago);
    format!("data last written {ago} ago ({})", written.at)
}

fn events_text(out: &mut String, events: &[EventLine]) {
    if events.is_empty() {
        out.push_str("   ConfigChanged events: none\n");
        return;
    }
    out.push_str("   ConfigChanged events, newest first:\n");
    for event in events {
        let when = (event.seconds_ago).map_or("at an unknown time".to_owned(), |s| age(s) + " ago");
        let _ = writeln!(out, "     {when}: {}", event.message);
    }
}

fn pods_text(out: &mut String, pods: &Pods) {
    out.push_str("\n5. Pods\n");
    let plural = if pods.total == 1 { "" } else { "s" };
    let _ = write!(out, "   {} pod{plural}", pods.total);
    if let Some(current) = pods.current_hash {
        let _ = write!(out, ", {current} with the current config-hash");
    }
    if let Some((updated, wanted)) = pods.updated {
        let _ = write!(out, ", {updated} of {wanted} replicas updated");
    }
    let _ = writeln!(out, ", {} with the sidecar", pods.with_sidecar);
    for pod in &pods.items {
        pod_text(out, pod);
    }
}

/// A hash's state in a pod line.
fn state_word(state: HashState) -> &'static str {
    match state {
        HashState::Current => "current",
        HashState::Stale => "STALE",
        HashState::NotStamped => "not stamped",
        HashState::Unknown | HashState::NothingToHash => "unknown",
    }
}

fn pod_text(out: &mut String, pod: &PodLine) {
    let _ = write!(out, "   pod {}", pod.name);
    if let Some(phase) = &pod.phase {
        let _ = write!(out, " ({phase})");
    }
    if pod.sidecar {
        out.push_str(": sidecar");
        let held = |yes: bool| if yes { " (held back)" } else { "" };
        if let Some(mounted) = pod.mounted_state {
            let (word, held) = (state_word(mounted), held(pod.mounted_held_back));
            let _ = write!(out, ", mounted-config-hash {word}{held}");
        }
        if let Some(env) = pod.env_state {
            let (word, held) = (state_word(env), held(pod.env_held_back));
            let _ = write!(out, ", env-hash {word}{held}");
        }
        if let Some(restarts) = pod.sidecar_restarts {
            let _ = write!(out, ", {restarts} restarts");
        }
    } else {
        out.push_str(": no sidecar");
    }
    out.push('\n');
    for reload in &pod.reloads {
        let _ = writeln!(out, "     {reload}");
    }
    if let Some(reason) = &pod.log_failed {
        let _ = writeln!(out, "     log not read: {reason}");
    }
}

/// The findings and what could not be checked, for a workload's or a config object's report.
fn findings_text(out: &mut String, findings: &[Finding], notes: &[String]) {
    if findings.is_empty() {
        out.push_str("\nAll current: nothing to fix.\n");
    } else {
        let _ = writeln!(out, "\nFindings ({}):", findings.len());
        for finding in findings {
            let _ = writeln!(out, "   [{}] {}", finding.code, finding.message);
            let _ = writeln!(out, "      fix: {}", finding.fix);
        }
    }
    notes_text(out, notes);
}

/// What could not be checked, if anything.
fn notes_text(out: &mut String, notes: &[String]) {
    if !notes.is_empty() {
        out.push_str("\nNot checked:\n");
        for note in notes {
            let _ = writeln!(out, "   {note}");
        }
    }
}

/// How the object itself opts in, and what its Reloader annotations do.
fn reloader_text(out: &mut String, opt: &OptIn, retired: Option<bool>) {
    let annotations = opt.reloader.join(", ");
    let object = match opt.opted_in_by {
        _ if opt.left_to_reloader => format!(
            "LEFT TO RELOADER: Reloader's annotations ({annotations}) select it and serve runs without {RETIRED_FLAG}"
        ),
        Some("reloader") => format!("opted in by Reloader's annotations ({annotations})"),
        Some("annotation") => format!("opted in by its own {INJECT}: {OPT_IN_VALUE}"),
        _ if opt.reloader.is_empty() => return,
        Some(_) => format!("Reloader's annotations ({annotations}) say what counts"),
        None => format!("Reloader's annotations: {annotations}"),
    };
    let _ = writeln!(out, "   the object: {object}");
    if !opt.reloader.is_empty() {
        let serve = match retired {
            Some(true) => format!("gone (serve runs with {RETIRED_FLAG})"),
            Some(false) => format!("may still run (serve runs without {RETIRED_FLAG})"),
            None => "unknown (the webhook's Deployment could not be read)".to_owned(),
        };
        let _ = writeln!(out, "   Reloader: {serve}");
    }
}

/// A summary as text: one line per workload, then those with Reloader's annotations.
pub fn summary_text(summary: &Summary) -> String {
    let mut out = String::new();
    if summary.workloads.is_empty() {
        out.push_str("no workloads found\n");
    }
    let target = |line: &Line| format!("{}/{}/{}", line.namespace, line.kind_short, line.name);
    let width = summary.workloads.iter().map(|w| target(w).len()).max();
    let width = width.unwrap_or(0);
    for line in &summary.workloads {
        let codes: Vec<&str> = line.findings.iter().map(|c| c.as_str()).collect();
        let state = if codes.is_empty() {
            "ok".to_owned()
        } else {
            codes.join(", ")
        };
        let _ = writeln!(out, "{:<width$}  {state}", target(line));
    }
    let reloader: Vec<_> = (summary.workloads.iter())
        .filter(|w| !w.reloader.is_empty())
        .collect();
    if !reloader.is_empty() {
        let _ = writeln!(out, "\nWith Reloader's annotations ({}):", reloader.len());
        for line in reloader {
            let (annotations, will) = (line.reloader.join(", "), line.will.as_deref());
            let will = will.unwrap_or("nothing");
            let _ = writeln!(out, "   {}: {annotations}\n      -> {will}", target(line));
        }
    }
    if summary.has_findings() {
        out.push_str("\nThe report and fixes of one: status KIND/NAME -n NAMESPACE\n");
    }
    notes_text(&mut out, &summary.notes);
    out
}

/// A ConfigMap or Secret report as text.
pub fn config_text(report: &ConfigReport) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{} {}/{}", report.kind, report.namespace, report.name);
    if let Some(written) = &report.written {
        let _ = writeln!(out, "   {}", written_text(written));
    }
    if report.ignored {
        out.push_str(
            "   annotated reload-injector.io/ignore: its changes never cause a rollout or a refresh\n",
        );
    }
    out.push_str("\nWhat a change of each key does:\n");
    if report.keys.is_empty() {
        out.push_str("   it has no keys, and nothing reads it\n");
    }
    for line in &report.keys {
        let missing = if line.exists { "" } else { " (MISSING)" };
        if line.readers.is_empty() {
            let _ = writeln!(out, "   key {:?}{missing}: nothing reads it", line.key);
            continue;
        }
        let _ = writeln!(out, "   key {:?}{missing}:", line.key);
        for reader in &line.readers {
            let _ = writeln!(
                out,
                "     {} container {:?} via {} -> {}: {}",
                reader.workload,
                reader.container,
                reader.via,
                change_text(reader.effect.on_change),
                reader.effect.detail
            );
        }
    }
    findings_text(&mut out, &report.findings, &report.notes);
    out
}
