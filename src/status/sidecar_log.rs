//! The reload lines of a `config-reloader` log (pure): the watcher logs one line per reload
//! attempt (`reloaded`, `reload failed: …`, `…; not retried until the content changes again`),
//! as text or JSON.

/// The last `max` reload lines of `log`, oldest first, each trimmed.
pub fn reload_lines(log: &str, max: usize) -> Vec<String> {
    let mut lines: Vec<String> = log
        .lines()
        .filter(|line| is_reload(line))
        .map(|line| line.trim().to_owned())
        .collect();
    let skip = lines.len().saturating_sub(max);
    lines.drain(..skip);
    lines
}

fn is_reload(line: &str) -> bool {
    line.contains("reloaded") || line.contains("reload failed") || line.contains("not retried")
}

/// Whether a reload line reports success.
pub fn succeeded(line: &str) -> bool {
    line.contains("reloaded") && result(line) == Some("success")
}

/// A reload line's `result` field: `result=success` or `result="success"` in text (tracing
/// quotes string values), `"result":"success"` in JSON.
fn result(line: &str) -> Option<&str> {
    let (_, rest) = line
        .split_once("\"result\":")
        .or_else(|| line.split_once(" result="))?;
    let rest = rest.trim_start();
    match rest.strip_prefix('"') {
        Some(quoted) => quoted.split('"').next(),
        None => rest.split([' ', ',', '}']).next(),
    }
}

/// Whether a reload line reports that the signalled process exited right after the signal: it
/// died of it instead of reloading.
pub fn target_exited(line: &str) -> bool {
    line.contains("target_exited")
}

/// Whether a reload line reports that the signal was refused (`EPERM`).
pub fn permission_denied(line: &str) -> bool {
    line.contains("permission denied")
        || line.contains("permission_denied")
        || line.contains("EPERM")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_reload_lines_are_kept_newest_last() {
        let log = "a INFO watching dir=/x\n\
                   b INFO reloaded dir=/x result=success\n\
                   c ERROR failed to send SIGHUP to nginx[7]: permission denied; not retried until the content changes again result=permission_denied\n\
                   d INFO reloaded dir=/x result=success\n";
        let lines = reload_lines(log, 2);
        assert_eq!(lines.len(), 2);
        assert!(lines[0].starts_with('c') && permission_denied(&lines[0]));
        assert!(!succeeded(&lines[0]) && succeeded(&lines[1]));
        assert_eq!(reload_lines("", 3), Vec::<String>::new());
    }

    #[test]
    fn the_result_field_reads_the_same_quoted_bare_or_as_json() {
        // The sidecar's own text format quotes string values.
        let text = r#"2026-11-26T05:37:58.407065Z  INFO reload_injector::watch::runner: reloaded dir=/etc/reload-injector/watch/conf hash=b04aea0a96e1 targets=nginx[13] result="success" duration_ms=1.056"#;
        assert!(succeeded(text));
        assert!(succeeded(
            "INFO reloaded dir=/x result=success duration_ms=1"
        ));
        assert!(succeeded(
            r#"{"fields":{"message":"reloaded","result":"success"}}"#
        ));
        assert!(!succeeded(r#"INFO reloaded dir=/x result="target_exited""#));
        assert!(!succeeded(
            r#"INFO reloaded dir=/x result="successful_lie""#
        ));
        assert!(!succeeded("INFO reloaded dir=/x"));
    }

    #[test]
    fn a_target_that_died_of_the_signal_is_a_failed_reload() {
        let log = r#"{"level":"ERROR","fields":{"message":"reload failed: java[12] exited with status 129 within 2s after SIGHUP: it does not reload on SIGHUP; fix: ...; not retried until the content changes again","result":"target_exited"}}"#;
        let lines = reload_lines(log, 3);
        assert_eq!(lines.len(), 1);
        assert!(target_exited(&lines[0]));
        assert!(!succeeded(&lines[0]));
    }
}
