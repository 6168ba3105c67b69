//! The plain-HTTP side port: `/healthz` (the process serves), `/readyz` (TLS material loaded,
//! HTTPS listener bound, the rollout controller's view synced once when it runs, not shutting
//! down) and `/metrics` (Prometheus text); [`SidePort`] serves them until told to stop.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use http::StatusCode;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::webhook_metrics::Metrics;

/// Whether the webhook should receive traffic; shared between the server and `/readyz`.
#[derive(Debug, Clone, Default)]
pub struct Readiness(Arc<AtomicBool>);

impl Readiness {
    /// Marks the server ready, or not.
    pub fn set(&self, ready: bool) {
        self.0.store(ready, Ordering::SeqCst);
    }

    /// Whether it is ready.
    pub fn get(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// Routes of the side port.
pub fn app(ready: Readiness, metrics: Metrics) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route(
            "/readyz",
            get(move || {
                let answer = if ready.get() {
                    (StatusCode::OK, "ready\n")
                } else {
                    (StatusCode::SERVICE_UNAVAILABLE, "not ready\n")
                };
                std::future::ready(answer)
            }),
        )
        .route(
            "/metrics",
            get(move || std::future::ready(crate::telemetry::metrics_page(metrics.render()))),
        )
}

/// The side port being served on its own task.
pub struct SidePort {
    /// The address it serves on.
    pub addr: SocketAddr,
    stop: CancellationToken,
    task: JoinHandle<std::io::Result<()>>,
}

impl SidePort {
    /// Serves [`app`] on `listener` until [`SidePort::stop`].
    pub fn start(
        listener: TcpListener,
        ready: Readiness,
        metrics: Metrics,
    ) -> std::io::Result<SidePort> {
        let stop = CancellationToken::new();
        let addr = listener.local_addr()?;
        let serve = axum::serve(listener, app(ready, metrics));
        let task = tokio::spawn(
            serve
                .with_graceful_shutdown(stop.clone().cancelled_owned())
                .into_future(),
        );
        Ok(SidePort { addr, stop, task })
    }

    /// Stops serving, giving open requests a second to finish.
    pub async fn stop(self) {
        self.stop.cancel();
        let _ = tokio::time::timeout(Duration::from_secs(1), self.task).await;
    }
}

#[cfg(test)]
mod tests {
    use axum::body::{Body, to_bytes};
    use http::Request;
    use tower::ServiceExt;

    use super::*;

    async fn get_path(app: Router, path: &str) -> (StatusCode, String) {
        let resp = app
            .oneshot(Request::get(path).body(Body::empty()).unwrap())
            .await
            .unwrap();
        let status = resp.status();
        let body = to_bytes(resp.into_body(), 1 << 20).await.unwrap();
        (status, String::from_utf8(body.to_vec()).unwrap())
    }

    #[tokio::test]
    async fn readyz_follows_the_flag_and_metrics_render() {
        let ready = Readiness::default();
        let app = app(ready.clone(), Metrics::new());
        assert_eq!(get_path(app.clone(), "/healthz").await.0, StatusCode::OK);
        assert_eq!(
            get_path(app.clone(), "/readyz").await.0,
            StatusCode::SERVICE_UNAVAILABLE
        );
        ready.set(true);
        assert_eq!(get_path(app.clone(), "/readyz").await.0, StatusCode::OK);
        let (status, text) = get_path(app, "/metrics").await;
        assert_eq!(status, StatusCode::OK);
        assert!(
            text.contains("reload_injector_review_duration_seconds_bucket"),
            "{text}"
        );
        assert!(text.contains("# EOF"), "{text}");
    }
}
