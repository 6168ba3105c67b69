//! The controller's metrics, registered with the webhook's on the same `/metrics` page.

use std::sync::atomic::{AtomicI64, Ordering};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::write_target::TargetKind;
use crate::hash::ConfigKind;

/// A `kind` label.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabel {
    /// `Deployment`, `ConfigMap`, …
    pub kind: &'static str,
}

/// Counters and gauges of the rollout controller; cheap to clone (shared).
#[derive(Debug, Clone, Default)]
pub struct ControllerMetrics {
    rollouts: Family<KindLabel, Counter>,
    pod_refreshes: Counter,
    in_place_restarts: Counter,
    config_changes: Family<KindLabel, Counter>,
    leader: Gauge,
    watched: Family<KindLabel, Gauge>,
    config_events: Counter,
    pending_writes: Gauge,
}

impl ControllerMetrics {
    /// Registers every metric in `registry` (prefix `reload_injector`).
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = Self::default();
        registry.register(
            "rollouts",
            "Workload pod templates re-stamped after consumed config changed, by kind",
            metrics.rollouts.clone(),
        );
        registry.register(
            "pod_refreshes",
            "Sidecar Pods whose mounted-config-hash was patched so the kubelet refreshes their files",
            metrics.pod_refreshes.clone(),
        );
        registry.register(
            "in_place_restarts",
            "Pods whose env-hash was written so that they restart every container in place",
            metrics.in_place_restarts.clone(),
        );
        registry.register(
            "config_changes",
            "Data changes of consumed ConfigMaps and Secrets, by kind",
            metrics.config_changes.clone(),
        );
        registry.register(
            "leader",
            "1 while this replica holds the Lease and writes, else 0",
            metrics.leader.clone(),
        );
        registry.register(
            "watched_objects",
            "Objects in the controller's view, by kind",
            metrics.watched.clone(),
        );
        // Registered (so exported) before `pending_writes`, which is set before it: a scrape
        // that sees an event counted sees the writes that event scheduled.
        registry.register(
            "config_events",
            "ConfigMap and Secret watch events the controller's loop has handled",
            metrics.config_events.clone(),
        );
        registry.register(
            "pending_writes",
            "Writes the controller has scheduled and not yet done: changes waiting out \
             --rollout-delay or a fetch, Pod refreshes queued in waves, PATCHes queued, in flight \
             or retrying (0: nothing more will be written until a new event comes)",
            metrics.pending_writes.clone(),
        );
        metrics
    }

    /// Counts `count` ConfigMap/Secret watch events handled.
    pub fn config_events(&self, count: u64) {
        self.config_events.inc_by(count);
    }

    /// A new part of the pending-writes gauge, for one task's own count.
    pub fn pending_share(&self) -> PendingShare {
        PendingShare {
            gauge: self.pending_writes.clone(),
            count: AtomicI64::new(0),
        }
    }

    /// Counts one written hash.
    pub fn written(&self, kind: TargetKind) {
        let counter = match kind {
            TargetKind::Pod => &self.pod_refreshes,
            TargetKind::PodEnv => &self.in_place_restarts,
            _ => &*self
                .rollouts
                .get_or_create(&KindLabel { kind: kind.kind() }),
        };
        counter.inc();
    }

    /// Counts one data change of a consumed object.
    pub fn config_change(&self, kind: ConfigKind) {
        let kind = match kind {
            ConfigKind::ConfigMap => "ConfigMap",
            ConfigKind::Secret => "Secret",
        };
        self.config_changes.get_or_create(&KindLabel { kind }).inc();
    }

    /// Sets the leader gauge.
    pub fn set_leader(&self, leader: bool) {
        self.leader.set(i64::from(leader));
    }

    /// Sets how many objects of `kind` the view holds.
    pub fn watched(&self, kind: &'static str, count: usize) {
        self.watched
            .get_or_create(&KindLabel { kind })
            .set(i64::try_from(count).unwrap_or(i64::MAX));
    }
}

/// One task's part of `pending_writes` (the loop's, the writer's): each sets its own count and
/// the gauge shows their sum. Dropped, its part is taken out.
#[derive(Debug)]
pub struct PendingShare {
    gauge: Gauge,
    count: AtomicI64,
}

impl PendingShare {
    /// Sets this part to `count`.
    pub fn set(&self, count: usize) {
        let count = i64::try_from(count).unwrap_or(i64::MAX);
        let before = self.count.swap(count, Ordering::SeqCst);
        self.gauge.inc_by(count - before);
    }
}

impl Drop for PendingShare {
    fn drop(&mut self) {
        self.set(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::encoding::text::encode;

    fn exported(registry: &Registry) -> String {
        let mut text = String::new();
        encode(&mut text, registry).unwrap();
        text
    }

    fn value(text: &str, series: &str) -> Option<f64> {
        text.lines()
            .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
    }

    #[test]
    fn config_events_count_up_and_are_exported_before_pending_writes() {
        let mut registry = Registry::with_prefix("reload_injector");
        let metrics = ControllerMetrics::register(&mut registry);
        metrics.config_events(2);
        metrics.config_events(1);
        let text = exported(&registry);
        assert_eq!(
            value(&text, "reload_injector_config_events_total"),
            Some(3.0)
        );
        assert_eq!(value(&text, "reload_injector_pending_writes"), Some(0.0));
        let events = text.find("reload_injector_config_events_total ").unwrap();
        let pending = text.find("reload_injector_pending_writes ").unwrap();
        assert!(events < pending, "{text}");
    }

    #[test]
    fn pending_writes_is_the_sum_of_the_shares_and_a_dropped_share_leaves_it() {
        let mut registry = Registry::with_prefix("reload_injector");
        let metrics = ControllerMetrics::register(&mut registry);
        let pending = || value(&exported(&registry), "reload_injector_pending_writes");
        let (loop_share, writer_share) = (metrics.pending_share(), metrics.pending_share());
        loop_share.set(3);
        writer_share.set(2);
        assert_eq!(pending(), Some(5.0));
        loop_share.set(1);
        assert_eq!(pending(), Some(3.0));
        loop_share.set(1);
        assert_eq!(
            pending(),
            Some(3.0),
            "setting the same count again changes nothing"
        );
        drop(writer_share);
        assert_eq!(pending(), Some(1.0));
        loop_share.set(0);
        assert_eq!(pending(), Some(0.0));
    }
}
