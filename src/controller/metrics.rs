//! The controller's metrics, registered with the webhook's on the same `/metrics` page.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::target::TargetKind;
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
    config_changes: Family<KindLabel, Counter>,
    leader: Gauge,
    watched: Family<KindLabel, Gauge>,
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
        metrics
    }

    /// Counts one written hash.
    pub fn written(&self, kind: TargetKind) {
        match kind {
            TargetKind::Pod => {
                self.pod_refreshes.inc();
            }
            _ => {
                self.rollouts
                    .get_or_create(&KindLabel { kind: kind.kind() })
                    .inc();
            }
        }
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
