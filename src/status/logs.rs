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
    line.contains("reloaded")
        && (line.contains("result=success") || line.contains("\"result\":\"success\""))
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
    fn a_target_that_died_of_the_signal_is_a_failed_reload() {
        let log = r#"{"level":"ERROR","fields":{"message":"reload failed: java[12] exited with status 129 within 2s after SIGHUP: it does not reload on SIGHUP; fix: ...; not retried until the content changes again","result":"target_exited"}}"#;
        let lines = reload_lines(log, 3);
        assert_eq!(lines.len(), 1);
        assert!(target_exited(&lines[0]));
        assert!(!succeeded(&lines[0]));
    }
}
