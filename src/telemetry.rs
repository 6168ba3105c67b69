//! Logging set-up: `tracing` to stderr, as text or JSON.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

use crate::cli::LogFormat;

/// Installs the global subscriber; a bad filter falls back to `info` with a note on stderr.
/// Text is coloured only on a terminal (and never with `NO_COLOR` set): container logs are not
/// one, and escape codes there only clutter `kubectl logs`.
pub fn init(format: LogFormat, filter: &str) {
    let filter = EnvFilter::try_new(filter).unwrap_or_else(|err| {
        eprintln!("warning: ignoring log filter {filter:?}: {err}; using \"info\"");
        EnvFilter::new("info")
    });
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none());
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
}
