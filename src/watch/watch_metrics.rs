//! The watcher's metrics, and the optional plain-HTTP endpoint serving `/healthz` and
//! `/metrics` (Prometheus text format).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use axum::Router;
use axum::routing::get;
use http::StatusCode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;

use crate::telemetry::{metrics_page, metrics_text};

type Labels = Vec<(String, String)>;

/// Errors of the metrics endpoint.
#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    /// The listen address could not be bound.
    #[error("failed to listen on {addr} for metrics")]
    BindFailed {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
}

/// The watcher's metrics (cheap to clone: shared handles).
#[derive(Debug, Clone, Default)]
pub struct Metrics {
    /// `reloads_total{result}`: reload attempts by outcome.
    pub reloads: Family<Labels, Counter>,
    /// `last_reload_success_timestamp_seconds`.
    pub last_success: Gauge<f64, AtomicU64>,
    /// `config_info{dir,hash}`: 1 for the content the app was last told about.
    pub config_info: Family<Labels, Gauge>,
    /// `watch_events_total`: inotify events read.
    pub events: Counter,
    /// `watch_errors_total`: watch, read and hashing errors.
    pub errors: Counter,
    /// `reload_failures_total`: signalled processes that exited within the grace window
    /// (they died of the signal instead of reloading).
    pub reload_failures: Counter,
    /// `reload_pending`: 1 while the watcher has work left (events being debounced, a reload
    /// wanted, running, being judged or waiting to be retried), 0 when it is idle.
    pub reload_pending: Gauge,
}

impl Metrics {
    /// Counts one reload attempt with the given result label.
    pub fn count_reload(&self, result: &str) {
        self.reloads
            .get_or_create(&vec![("result".to_owned(), result.to_owned())])
            .inc();
    }

    /// Records that `dir` now runs content `hash` (replacing what it ran before).
    pub fn set_config(&self, dir: &str, old_hash: Option<&str>, hash: &str) {
        if let Some(old) = old_hash {
            self.config_info.remove(&config_labels(dir, old));
        }
        self.config_info
            .get_or_create(&config_labels(dir, hash))
            .set(1);
    }

    /// Builds the registry with every metric under its public name.
    pub fn registry(&self) -> Registry {
        let mut registry = Registry::default();
        registry.register(
            "reloads",
            "Reload attempts by result (success, failure, no_target, permission_denied, target_exited)",
            self.reloads.clone(),
        );
        registry.register(
            "reload_failures",
            "Signalled processes that exited right after the signal instead of reloading",
            self.reload_failures.clone(),
        );
        registry.register(
            "last_reload_success_timestamp_seconds",
            "Unix time of the last successful reload",
            self.last_success.clone(),
        );
        registry.register(
            "config_info",
            "The content hash each watched directory had when the app was last told (value 1)",
            self.config_info.clone(),
        );
        registry.register("watch_events", "inotify events read", self.events.clone());
        registry.register(
            "watch_errors",
            "Errors while watching or reading the watched directories",
            self.errors.clone(),
        );
        // After `watch_events`, which is counted after it is set: a scrape that sees events
        // counted sees the work they caused.
        registry.register(
            "reload_pending",
            "1 while the watcher has work left (events being debounced, a reload wanted, \
             running, judged or waiting to be retried), 0 when it is idle",
            self.reload_pending.clone(),
        );
        registry
    }
}

fn config_labels(dir: &str, hash: &str) -> Labels {
    vec![
        ("dir".to_owned(), dir.to_owned()),
        ("hash".to_owned(), hash.to_owned()),
    ]
}

/// Binds `addr` and serves `/healthz` and `/metrics` on the current runtime; returns the
/// address bound (port 0 picks a free port).
pub async fn serve(addr: SocketAddr, metrics: &Metrics) -> Result<SocketAddr, MetricsError> {
    let failed = |source| MetricsError::BindFailed { addr, source };
    let listener = TcpListener::bind(addr).await.map_err(failed)?;
    let bound = listener.local_addr().map_err(failed)?;
    let registry = Arc::new(metrics.registry());
    let app = Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route(
            "/metrics",
            get(move || std::future::ready(metrics_page(metrics_text(&registry)))),
        )
        .fallback(|| async {
            (
                StatusCode::NOT_FOUND,
                "not found: try /healthz or /metrics\n",
            )
        });
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok(bound)
}

#[cfg(test)]
mod tests {
    use prometheus_client::encoding::text::encode;

    use super::*;

    #[test]
    fn metrics_have_their_public_names() {
        let metrics = Metrics::default();
        metrics.count_reload("success");
        metrics.events.inc();
        metrics.set_config("/etc/nginx", None, "sha256:aa");
        metrics.set_config("/etc/nginx", Some("sha256:aa"), "sha256:bb");
        let mut text = String::new();
        encode(&mut text, &metrics.registry()).unwrap();
        for needle in [
            "reloads_total{result=\"success\"} 1",
            "last_reload_success_timestamp_seconds",
            "config_info{dir=\"/etc/nginx\",hash=\"sha256:bb\"} 1",
            "watch_events_total 1",
            "watch_errors_total 0",
            "reload_pending 0",
        ] {
            assert!(text.contains(needle), "{needle} missing from\n{text}");
        }
        assert!(
            !text.contains("sha256:aa"),
            "old hash still exported:\n{text}"
        );
    }

    /// One HTTP/1.0 GET on a fresh connection; the whole answer.
    async fn get(addr: SocketAddr, path: &str) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let request = format!("GET {path} HTTP/1.0\r\nHost: x\r\n\r\n");
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).await.unwrap();
        answer
    }

    #[tokio::test]
    async fn the_endpoint_serves_health_and_metrics_and_names_its_paths_otherwise() {
        let metrics = Metrics::default();
        metrics.count_reload("success");
        let addr = serve("127.0.0.1:0".parse().unwrap(), &metrics)
            .await
            .unwrap();
        let health = get(addr, "/healthz").await;
        assert!(
            health.starts_with("HTTP/1.0 200") && health.ends_with("ok\n"),
            "{health}"
        );
        let text = get(addr, "/metrics").await;
        assert!(text.contains("application/openmetrics-text"), "{text}");
        assert!(
            text.contains("reloads_total{result=\"success\"} 1"),
            "{text}"
        );
        let other = get(addr, "/other").await;
        assert!(other.starts_with("HTTP/1.0 404"), "{other}");
        assert!(other.ends_with("try /healthz or /metrics\n"), "{other}");
    }

    #[test]
    fn reload_pending_is_exported_after_the_events_it_answers_for() {
        let metrics = Metrics::default();
        metrics.reload_pending.set(1);
        let mut text = String::new();
        encode(&mut text, &metrics.registry()).unwrap();
        assert!(text.contains("reload_pending 1"), "{text}");
        let events = text.find("watch_events_total ").unwrap();
        let pending = text.find("reload_pending ").unwrap();
        assert!(events < pending, "{text}");
    }
}
