//! Prometheus metrics with upstream's names (namespace `karpenter`), so existing dashboards and
//! alerts keep working.

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// Label pairs, in the order given.
pub type Labels = Vec<(String, String)>;

/// Builds a label set.
pub fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.005, 2.0, 16))
}

type Histograms = Family<Labels, Histogram, fn() -> Histogram>;

/// Every metric the controller exports.
pub struct Metrics {
    registry: Registry,
    /// `karpenter_nodeclaims_created_total{reason,nodepool,min_values_relaxed}`
    pub nodeclaims_created: Family<Labels, Counter>,
    /// `karpenter_nodeclaims_terminated_total{nodepool,capacity_type}`
    pub nodeclaims_terminated: Family<Labels, Counter>,
    /// `karpenter_nodeclaims_disrupted_total{reason,nodepool,capacity_type}`
    pub nodeclaims_disrupted: Family<Labels, Counter>,
    /// `karpenter_nodeclaims_drifted_total{type,nodepool}`
    pub nodeclaims_drifted: Family<Labels, Counter>,
    /// `karpenter_nodes_created_total{nodepool}`
    pub nodes_created: Family<Labels, Counter>,
    /// `karpenter_nodes_terminated_total{nodepool}`
    pub nodes_terminated: Family<Labels, Counter>,
    /// `karpenter_nodes_drained_total{nodepool}`
    pub nodes_drained: Family<Labels, Counter>,
    /// `karpenter_pods_eviction_requests_total{code}`
    pub pods_eviction_requests: Family<Labels, Counter>,
    /// `karpenter_pods_drained_total{reason}`
    pub pods_drained: Family<Labels, Counter>,
    /// `karpenter_scheduler_scheduling_duration_seconds{controller}`
    pub scheduling_duration: Histograms,
    /// `karpenter_scheduler_unschedulable_pods_count{controller}`
    pub unschedulable_pods: Family<Labels, Gauge>,
    /// `karpenter_scheduler_ignored_pods_count`
    pub ignored_pods: Gauge,
    /// `karpenter_voluntary_disruption_decisions_total{decision,reason,consolidation_type}`
    pub disruption_decisions: Family<Labels, Counter>,
    /// `karpenter_voluntary_disruption_eligible_nodes`
    pub disruption_eligible_nodes: Gauge,
    /// `karpenter_voluntary_disruption_failed_validations_total`
    pub disruption_failed_validations: Counter,
    /// `karpenter_cluster_state_node_count`
    pub cluster_state_node_count: Gauge,
    /// `karpenter_cluster_state_synced`
    pub cluster_state_synced: Gauge,
    /// `karpenter_cloudprovider_duration_seconds{controller,method,provider}`
    pub cloudprovider_duration: Histograms,
    /// `karpenter_cloudprovider_errors_total{controller,method,provider,error}`
    pub cloudprovider_errors: Family<Labels, Counter>,
    /// `controller_runtime_reconcile_total{controller,result}`: every reconcile (or pass) of
    /// each loop, `success` or `error`, under controller-runtime's name.
    pub reconcile_total: Family<Labels, Counter>,
    /// `karpenter_interruption_received_messages_total{message_type}`
    pub interruption_received_messages: Family<Labels, Counter>,
    /// `karpenter_interruption_deleted_messages_total`
    pub interruption_deleted_messages: Counter,
    /// `karpenter_interruption_message_queue_duration_seconds`: from AWS sending a message to
    /// its handling.
    pub interruption_message_queue_duration: Histogram,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// A registry with every metric registered.
    pub fn new() -> Self {
        let mut root = Registry::default();
        let registry = root.sub_registry_with_prefix("karpenter");
        let build_info = Family::<Labels, Gauge>::default();
        build_info
            .get_or_create(&labels(&[("version", env!("CARGO_PKG_VERSION"))]))
            .set(1);
        registry.register("build_info", "Build information.", build_info);
        let m = Self {
            nodeclaims_created: Family::default(),
            nodeclaims_terminated: Family::default(),
            nodeclaims_disrupted: Family::default(),
            nodeclaims_drifted: Family::default(),
            nodes_created: Family::default(),
            nodes_terminated: Family::default(),
            nodes_drained: Family::default(),
            pods_eviction_requests: Family::default(),
            pods_drained: Family::default(),
            scheduling_duration: Family::new_with_constructor(histogram),
            unschedulable_pods: Family::default(),
            ignored_pods: Gauge::default(),
            disruption_decisions: Family::default(),
            disruption_eligible_nodes: Gauge::default(),
            disruption_failed_validations: Counter::default(),
            cluster_state_node_count: Gauge::default(),
            cluster_state_synced: Gauge::default(),
            cloudprovider_duration: Family::new_with_constructor(histogram),
            cloudprovider_errors: Family::default(),
            interruption_received_messages: Family::default(),
            interruption_deleted_messages: Counter::default(),
            interruption_message_queue_duration: histogram(),
            reconcile_total: Family::default(),
            registry: Registry::default(),
        };
        let r = registry;
        r.register(
            "nodeclaims_created",
            "NodeClaims created.",
            m.nodeclaims_created.clone(),
        );
        r.register(
            "nodeclaims_drifted",
            "NodeClaims found drifted, by drift type.",
            m.nodeclaims_drifted.clone(),
        );
        r.register(
            "nodeclaims_terminated",
            "NodeClaims terminated.",
            m.nodeclaims_terminated.clone(),
        );
        r.register(
            "nodeclaims_disrupted",
            "NodeClaims disrupted, by reason.",
            m.nodeclaims_disrupted.clone(),
        );
        r.register(
            "nodes_created",
            "Nodes registered.",
            m.nodes_created.clone(),
        );
        r.register(
            "nodes_terminated",
            "Nodes terminated.",
            m.nodes_terminated.clone(),
        );
        r.register("nodes_drained", "Nodes drained.", m.nodes_drained.clone());
        r.register(
            "pods_eviction_requests",
            "Eviction requests, by response code.",
            m.pods_eviction_requests.clone(),
        );
        r.register(
            "pods_drained",
            "Pods drained from nodes, by reason.",
            m.pods_drained.clone(),
        );
        r.register(
            "scheduler_scheduling_duration_seconds",
            "Duration of one scheduling simulation.",
            m.scheduling_duration.clone(),
        );
        r.register(
            "scheduler_unschedulable_pods_count",
            "Pods the last simulation could not place.",
            m.unschedulable_pods.clone(),
        );
        r.register(
            "scheduler_ignored_pods_count",
            "Pending pods provisioning ignores (node selection it cannot meet, volumes not ready).",
            m.ignored_pods.clone(),
        );
        r.register(
            "voluntary_disruption_decisions",
            "Disruption decisions carried out.",
            m.disruption_decisions.clone(),
        );
        r.register(
            "voluntary_disruption_eligible_nodes",
            "Nodes disruption could act on in the last pass.",
            m.disruption_eligible_nodes.clone(),
        );
        r.register(
            "voluntary_disruption_failed_validations",
            "Consolidations dropped because re-validation disagreed.",
            m.disruption_failed_validations.clone(),
        );
        r.register(
            "cluster_state_node_count",
            "Nodes in cluster state.",
            m.cluster_state_node_count.clone(),
        );
        r.register(
            "cluster_state_synced",
            "1 when cluster state has every object the API server has.",
            m.cluster_state_synced.clone(),
        );
        r.register(
            "cloudprovider_duration_seconds",
            "Duration of cloud provider calls.",
            m.cloudprovider_duration.clone(),
        );
        r.register(
            "cloudprovider_errors",
            "Failed cloud provider calls.",
            m.cloudprovider_errors.clone(),
        );
        r.register(
            "interruption_received_messages",
            "Interruption messages received, by type.",
            m.interruption_received_messages.clone(),
        );
        r.register(
            "interruption_deleted_messages",
            "Interruption messages handled and deleted from the queue.",
            m.interruption_deleted_messages.clone(),
        );
        r.register(
            "interruption_message_queue_duration_seconds",
            "Time from an interruption message being sent to its handling.",
            m.interruption_message_queue_duration.clone(),
        );
        root.register(
            "controller_runtime_reconcile",
            "Reconciles (or passes) of each controller, by result.",
            m.reconcile_total.clone(),
        );
        Self {
            registry: root,
            ..m
        }
    }

    /// Counts one reconcile of `controller`.
    pub fn reconciled(&self, controller: &str, ok: bool) {
        self.reconcile_total
            .get_or_create(&labels(&[
                ("controller", controller),
                ("result", if ok { "success" } else { "error" }),
            ]))
            .inc();
    }

    /// How many reconciles of `controller` have finished, whatever their result.
    pub fn reconciles(&self, controller: &str) -> u64 {
        ["success", "error"]
            .iter()
            .map(|result| {
                self.reconcile_total
                    .get_or_create(&labels(&[("controller", controller), ("result", result)]))
                    .get()
            })
            .sum()
    }

    /// The OpenMetrics text exposition.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = encode(&mut out, &self.registry);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_upstream() {
        let m = Metrics::new();
        m.nodeclaims_created
            .get_or_create(&labels(&[
                ("reason", "provisioned"),
                ("nodepool", "default"),
                ("min_values_relaxed", "false"),
            ]))
            .inc();
        m.scheduling_duration
            .get_or_create(&labels(&[("controller", "provisioner")]))
            .observe(0.2);
        m.reconciled("nodeclaim.lifecycle", true);
        m.reconciled("nodeclaim.lifecycle", false);
        assert_eq!(m.reconciles("nodeclaim.lifecycle"), 2);
        let text = m.encode();
        for name in [
            "karpenter_nodeclaims_created_total{reason=\"provisioned\",nodepool=\"default\",min_values_relaxed=\"false\"} 1",
            "karpenter_scheduler_scheduling_duration_seconds_count{controller=\"provisioner\"} 1",
            "karpenter_build_info{version=",
            "karpenter_cluster_state_synced 0",
            "controller_runtime_reconcile_total{controller=\"nodeclaim.lifecycle\",result=\"error\"} 1",
        ] {
            assert!(text.contains(name), "{name} missing from\n{text}");
        }
    }
}
