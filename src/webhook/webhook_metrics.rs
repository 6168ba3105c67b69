//! Prometheus metrics of the webhook, rendered as text on `/metrics`.

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::controller::controller_metrics::ControllerMetrics;
use crate::kinds::Kind;

/// Upper bounds of the latency histogram, in seconds: 50 µs … 1 s.
const DURATION_BUCKETS: [f64; 14] = [
    0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
    1.0,
];

/// Labels of `reload_injector_reviews_total`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReviewLabels {
    /// `request.kind.kind`, or `other`.
    pub kind: &'static str,
    /// `CREATE`, `UPDATE` or `other`.
    pub operation: &'static str,
    /// `allowed`, `patched`, `denied` or `error` (object not understood).
    pub outcome: &'static str,
}

/// Labels of `reload_injector_rejected_requests_total`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RejectionLabels {
    /// The HTTP status: `400`, `404`, `405`, `408`, `413`, `415`, `500`, `503`, or `other`.
    pub code: &'static str,
}

/// Labels of `reload_injector_cert_reloads_total`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReloadLabels {
    /// `success` or `error`.
    pub result: &'static str,
}

/// Every metric the webhook exports; cheap to clone (shared counters).
#[derive(Clone)]
pub struct Metrics {
    registry: Arc<Registry>,
    reviews: Family<ReviewLabels, Counter>,
    duration: Histogram,
    denials: Counter,
    warnings: Counter,
    lookup_failures: Counter,
    cert_reloads: Family<ReloadLabels, Counter>,
    rejections: Family<RejectionLabels, Counter>,
    controller: ControllerMetrics,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Metrics")
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// A fresh registry with every metric registered at zero.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("reload_injector");
        let reviews = Family::<ReviewLabels, Counter>::default();
        registry.register(
            "reviews",
            "Admission reviews answered, by kind, operation and outcome",
            reviews.clone(),
        );
        let duration = Histogram::new(DURATION_BUCKETS);
        registry.register(
            "review_duration_seconds",
            "Time from a parsed request to its encoded answer, lookups included",
            duration.clone(),
        );
        let denials = Counter::default();
        registry.register("denials", "Admission reviews denied", denials.clone());
        let warnings = Counter::default();
        registry.register(
            "warnings",
            "Warnings returned to the API server",
            warnings.clone(),
        );
        let lookup_failures = Counter::default();
        registry.register(
            "hash_lookup_failures",
            "ConfigMap/Secret lookups that failed or timed out (objects admitted unhashed)",
            lookup_failures.clone(),
        );
        let cert_reloads = Family::<ReloadLabels, Counter>::default();
        registry.register(
            "cert_reloads",
            "Reloads of the serving certificate after its files changed, by result",
            cert_reloads.clone(),
        );
        for result in ["success", "error"] {
            let _ = cert_reloads.get_or_create(&ReloadLabels { result });
        }
        let rejections = Family::<RejectionLabels, Counter>::default();
        registry.register(
            "rejected_requests",
            "Requests answered with an HTTP error instead of an AdmissionReview, by status",
            rejections.clone(),
        );
        let controller = ControllerMetrics::register(&mut registry);
        Self {
            registry: Arc::new(registry),
            reviews,
            duration,
            denials,
            warnings,
            lookup_failures,
            cert_reloads,
            rejections,
            controller,
        }
    }

    /// The rollout controller's metrics (on the same page).
    pub fn controller(&self) -> &ControllerMetrics {
        &self.controller
    }

    /// Records one answered review.
    pub fn review(&self, kind: &str, operation: &str, outcome: &'static str, took: Duration) {
        // Kinds the webhook handles by name; anything else is `other`, so a client cannot grow
        // the label set without bound.
        let kind = Kind::ALL
            .into_iter()
            .find(|k| k.name() == kind && k.pod_pointer().is_some())
            .map_or("other", Kind::name);
        let operation = match operation {
            "CREATE" => "CREATE",
            "UPDATE" => "UPDATE",
            _ => "other",
        };
        self.reviews
            .get_or_create(&ReviewLabels {
                kind,
                operation,
                outcome,
            })
            .inc();
        self.duration.observe(took.as_secs_f64());
        if outcome == "denied" {
            self.denials.inc();
        }
    }

    /// Adds `n` returned warnings.
    pub fn warnings(&self, n: usize) {
        self.warnings.inc_by(n as u64);
    }

    /// Counts one failed ConfigMap/Secret lookup.
    pub fn lookup_failed(&self) {
        self.lookup_failures.inc();
    }

    /// Counts one certificate reload attempt.
    pub fn cert_reload(&self, ok: bool) {
        let result = if ok { "success" } else { "error" };
        self.cert_reloads
            .get_or_create(&ReloadLabels { result })
            .inc();
    }

    /// Counts one request answered with HTTP status `code` instead of an AdmissionReview.
    pub fn rejected(&self, code: u16) {
        // The statuses the routes answer with; any other shares one label.
        const CODES: [&str; 8] = ["400", "404", "405", "408", "413", "415", "500", "503"];
        let code = code.to_string();
        let code = CODES.into_iter().find(|c| *c == code).unwrap_or("other");
        self.rejections
            .get_or_create(&RejectionLabels { code })
            .inc();
    }

    /// The Prometheus text exposition of every metric.
    pub fn render(&self) -> String {
        crate::telemetry::metrics_text(&self.registry)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejections_are_counted_by_status_and_odd_ones_share_one_label() {
        let m = Metrics::new();
        m.rejected(503);
        m.rejected(503);
        m.rejected(413);
        m.rejected(418);
        let text = m.render();
        for line in [
            r#"reload_injector_rejected_requests_total{code="503"} 2"#,
            r#"reload_injector_rejected_requests_total{code="413"} 1"#,
            r#"reload_injector_rejected_requests_total{code="other"} 1"#,
        ] {
            assert!(text.contains(line), "{line} in {text}");
        }
    }

    #[test]
    fn unknown_kinds_and_operations_share_one_label() {
        let m = Metrics::new();
        m.review("Foo", "CONNECT", "allowed", Duration::from_micros(80));
        m.review("Bar", "DELETE", "allowed", Duration::from_micros(80));
        let text = m.render();
        let line =
            r#"reload_injector_reviews_total{kind="other",operation="other",outcome="allowed"} 2"#;
        assert!(text.contains(line), "{text}");
    }

    #[test]
    fn denials_and_histogram_are_exported() {
        let m = Metrics::new();
        m.review("Deployment", "CREATE", "denied", Duration::from_micros(70));
        m.warnings(2);
        m.lookup_failed();
        m.cert_reload(false);
        let text = m.render();
        for line in [
            "reload_injector_denials_total 1",
            "reload_injector_warnings_total 2",
            "reload_injector_hash_lookup_failures_total 1",
            r#"reload_injector_cert_reloads_total{result="error"} 1"#,
            r#"reload_injector_review_duration_seconds_bucket{le="0.0001"} 1"#,
        ] {
            assert!(text.contains(line), "missing {line:?} in\n{text}");
        }
    }
}
