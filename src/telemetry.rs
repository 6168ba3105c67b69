//! Logging set-up (`tracing` to stderr, as text or JSON), and the `/metrics` page every port
//! that serves one answers with.

use std::io::IsTerminal;

use axum::response::IntoResponse;
use http::header;
use prometheus_client::registry::Registry;
use tracing_subscriber::EnvFilter;

use crate::cli::LogFormat;

/// `registry` in the Prometheus text format (writing into a `String` cannot fail).
pub fn metrics_text(registry: &Registry) -> String {
    let mut text = String::new();
    let _ = prometheus_client::encoding::text::encode(&mut text, registry);
    text
}

/// A `/metrics` answer: `text` with the OpenMetrics content type.
pub fn metrics_page(text: String) -> impl IntoResponse {
    let content_type = "application/openmetrics-text; version=1.0.0; charset=utf-8";
    ([(header::CONTENT_TYPE, content_type)], text)
}

/// Installs the global subscriber; a bad filter falls back to `info` with a note on stderr.
/// Text is coloured only on a terminal (and never with `NO_COLOR` set): container logs are not
/// one, and escape codes there only clutter `kubectl logs`.
pub fn init(format: LogFormat, filter: &str) {
    let filter = EnvFilter::try_new(with_quiet_watcher(filter)).unwrap_or_else(|err| {
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

/// The filter with kube-runtime's watcher limited to errors, unless it says otherwise: that
/// watcher warns on every retry of a refused (403) list, and the controller already says each
/// failed watch in its own words (a refused namespace once).
pub fn with_quiet_watcher(filter: &str) -> String {
    if filter.contains("kube_runtime") || filter.trim().is_empty() {
        filter.to_owned()
    } else {
        format!("{filter},kube_runtime::watcher=error")
    }
}

#[cfg(test)]
mod tests {
    use super::with_quiet_watcher;

    #[test]
    fn the_watcher_is_quieted_unless_the_filter_names_it() {
        assert_eq!(
            with_quiet_watcher("info,reload_injector=debug"),
            "info,reload_injector=debug,kube_runtime::watcher=error"
        );
        assert_eq!(
            with_quiet_watcher("kube_runtime=debug"),
            "kube_runtime=debug"
        );
        assert!(tracing_subscriber::EnvFilter::try_new(with_quiet_watcher("warn")).is_ok());
    }
}
