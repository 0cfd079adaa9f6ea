//! Prometheus metrics with upstream's names, types, label names and buckets, so existing
//! dashboards and alerts keep working. `tests/testdata/upstream_metrics.json` is upstream's
//! list and `tests/metrics_reference.rs` holds this registry to it.
//!
//! Where the events happen, the loops count and time them; the gauges that describe the
//! cluster (nodes, pods, NodePools, status conditions) are recomputed from cluster state by
//! [`observe::run`], as upstream's metrics controllers do.

pub mod client;
pub mod observe;
pub mod pods;
pub mod registry;
pub mod runtime;
pub mod state_gauges;
pub mod status;

pub use registry::{Counter, Desc, Family, Gauge, Histogram, Kind, Labels, Summary};

use std::sync::Arc;

use karpenter_api::NodeClaim;
use karpenter_api::labels::{CAPACITY_TYPE_LABEL, NODE_POOL_LABEL, WELL_KNOWN_LABELS, ZONE_LABEL};
use karpenter_core::state::pods as pod_predicates;
use registry::Registry;

use crate::state::StoredPod;

tokio::task_local! {
    static CONTROLLER: &'static str;
}

/// Runs `f` as the controller `name`: the provider calls it makes are labelled with it
/// (upstream takes the name from the reconcile's context).
pub async fn in_controller<F: std::future::Future>(name: &'static str, f: F) -> F::Output {
    CONTROLLER.scope(name, f).await
}

/// The controller the current task runs as, empty outside one.
pub fn current_controller() -> &'static str {
    CONTROLLER.try_with(|c| *c).unwrap_or("")
}

/// Upstream's name for a provider method (its Go method name).
pub fn upstream_method(method: &str) -> &str {
    match method {
        "create" => "Create",
        "delete" => "Delete",
        "get" => "Get",
        "list" => "List",
        "get_instance_types" | "instance_types" => "GetInstanceTypes",
        "is_drifted" => "IsDrifted",
        other => other,
    }
}

/// A scheduling simulation in progress, as `karpenter_scheduler_queue_depth` and
/// `karpenter_scheduler_unfinished_work_seconds` show it: the depth starts at the pods to
/// place and stays, at zero, until the controller's next simulation; the unfinished work
/// counts up every second while it runs and goes when it ends.
pub struct Solving {
    controller: &'static str,
    id: String,
    ticker: Option<tokio::task::JoinHandle<()>>,
}

impl Solving {
    /// A simulation of `pods` pods starts for `controller`.
    pub fn start(metrics: &Arc<Metrics>, controller: &'static str, pods: usize) -> Self {
        let id = scheduling_id();
        metrics
            .scheduler_queue_depth
            .remove_matching(&[("controller", controller)]);
        metrics
            .scheduler_queue_depth
            .set(&[controller, &id], pods as f64);
        metrics
            .scheduler_unfinished_work
            .set(&[controller, &id], 0.0);
        // The simulation holds its thread; another worker keeps the gauge moving.
        let ticker = tokio::runtime::Handle::try_current().ok().map(|rt| {
            let (metrics, id) = (metrics.clone(), id.clone());
            rt.spawn(async move {
                let started = tokio::time::Instant::now();
                loop {
                    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                    metrics
                        .scheduler_unfinished_work
                        .set(&[controller, &id], started.elapsed().as_secs_f64());
                }
            })
        });
        Self {
            controller,
            id,
            ticker,
        }
    }

    /// The simulation ended.
    pub fn done(mut self, metrics: &Metrics) {
        if let Some(t) = self.ticker.take() {
            t.abort();
        }
        metrics
            .scheduler_queue_depth
            .set(&[self.controller, &self.id], 0.0);
        metrics
            .scheduler_unfinished_work
            .remove(&[self.controller, &self.id]);
    }
}

impl Drop for Solving {
    fn drop(&mut self) {
        if let Some(t) = self.ticker.take() {
            t.abort();
        }
    }
}

/// A random identifier in a UUID's form, for `scheduling_id`.
fn scheduling_id() -> String {
    use std::hash::{BuildHasher, Hasher};
    let word = || {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos()),
        );
        h.finish()
    };
    let (a, b) = (word(), word());
    format!(
        "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0xfff,
        0x8000 | (b >> 48) & 0x3fff,
        b & 0xffff_ffff_ffff
    )
}

/// `termination_mode` of a disruption that respects PDBs and `do-not-disrupt` to the end.
pub const TERMINATION_MODE_GRACEFUL: &str = "graceful";

/// Upstream's `termination_mode` of a disrupted NodeClaim, from its
/// `terminationGracePeriod`: none is graceful, zero forceful, any other eventual.
pub fn termination_mode(claim: &NodeClaim) -> &'static str {
    match claim.spec.termination_grace_period {
        None => TERMINATION_MODE_GRACEFUL,
        Some(d) if d.0.is_zero() => "forceful",
        Some(_) => "eventual",
    }
}

fn label_of<'a>(claim: &'a NodeClaim, key: &str) -> &'a str {
    claim
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(key))
        .map_or("", String::as_str)
}

/// Builds a label set.
pub fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Upstream's `DurationBuckets`: controller-runtime's reconcile buckets, extended to 10 min.
pub const DURATION_BUCKETS: [f64; 45] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9,
    1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 15.0, 20.0,
    25.0, 30.0, 40.0, 50.0, 60.0, 120.0, 150.0, 300.0, 450.0, 600.0,
];

/// client_golang's `DefBuckets`, for histograms that name none.
pub const DEFAULT_BUCKETS: [f64; 11] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// Upstream's `SummaryObjectives`: the quantiles of every summary.
pub const SUMMARY_QUANTILES: [f64; 5] = [0.0, 0.5, 0.9, 0.99, 1.0];

/// client_golang's `ExponentialBuckets`: `count` bounds from `start`, each `factor` times the
/// last.
pub fn exponential_buckets(start: f64, factor: f64, count: usize) -> Vec<f64> {
    std::iter::successors(Some(start), |b| Some(b * factor))
        .take(count)
        .collect()
}

/// `karpenter_nodes_lifetime_duration_seconds`' buckets: 15 min to 30 days.
fn lifetime_buckets() -> Vec<f64> {
    const H: f64 = 3600.0;
    const D: f64 = 24.0 * H;
    vec![
        0.25 * H,
        0.5 * H,
        0.75 * H,
        H,
        2.0 * H,
        4.0 * H,
        6.0 * H,
        8.0 * H,
        10.0 * H,
        12.0 * H,
        16.0 * H,
        20.0 * H,
        D,
        2.0 * D,
        3.0 * D,
        5.0 * D,
        10.0 * D,
        15.0 * D,
        20.0 * D,
        25.0 * D,
        30.0 * D,
    ]
}

/// What a provider adds to upstream's metric labels.
#[derive(Clone, Debug, Default)]
pub struct ProviderLabels {
    /// The provider's well-known node labels (upstream adds them to `v1.WellKnownLabels`),
    /// which become labels of the node gauges.
    pub well_known: Vec<String>,
    /// The provider's NodeClasses, `(group, kind)`: their label becomes a label of the
    /// NodeClaim and Node status metrics, and each kind gets status metrics of its own.
    pub node_classes: Vec<(String, String)>,
}

/// A metric label name from a Kubernetes label key, as upstream's node metrics derive it: the
/// part after the `/`, lowercase, `-` as `_`.
pub fn node_metric_label(key: &str) -> Option<String> {
    let (_, name) = key.split_once('/')?;
    Some(name.to_lowercase().replace('-', "_"))
}

/// A metric label name from any key, as operatorpkg derives it: `/`, `.` and `-` as `_`.
pub fn prometheus_label(key: &str) -> String {
    key.replace(['/', '.', '-'], "_")
}

/// Creates and registers families.
struct Builder {
    registry: Registry,
}

impl Builder {
    fn desc(name: &str, help: &str, kind: Kind, labels: &[&str]) -> Desc {
        Desc {
            name: name.into(),
            help: help.into(),
            kind,
            labels: labels.iter().map(|s| s.to_string()).collect(),
            buckets: Vec::new(),
            quantiles: Vec::new(),
        }
    }

    fn add<M: registry::Metric>(&mut self, desc: Desc) -> Family<M> {
        let family = Family::new(desc);
        self.registry.register(&family);
        family
    }

    fn counter(&mut self, name: &str, help: &str, labels: &[&str]) -> Family<Counter> {
        self.add(Self::desc(name, help, Kind::Counter, labels))
    }

    fn gauge(&mut self, name: &str, help: &str, labels: &[&str]) -> Family<Gauge> {
        self.add(Self::desc(name, help, Kind::Gauge, labels))
    }

    fn histogram(
        &mut self,
        name: &str,
        help: &str,
        labels: &[&str],
        buckets: &[f64],
    ) -> Family<Histogram> {
        let mut desc = Self::desc(name, help, Kind::Histogram, labels);
        desc.buckets = buckets.to_vec();
        self.add(desc)
    }

    fn summary(&mut self, name: &str, help: &str, labels: &[&str]) -> Family<Summary> {
        let mut desc = Self::desc(name, help, Kind::Summary, labels);
        desc.quantiles = SUMMARY_QUANTILES.to_vec();
        self.add(desc)
    }
}

/// The gauges upstream's node metrics controller keeps per node and resource.
pub struct NodeGauges {
    /// `karpenter_nodes_allocatable`
    pub allocatable: Family<Gauge>,
    /// `karpenter_nodes_total_pod_requests`
    pub total_pod_requests: Family<Gauge>,
    /// `karpenter_nodes_total_pod_limits`
    pub total_pod_limits: Family<Gauge>,
    /// `karpenter_nodes_total_daemon_requests`
    pub total_daemon_requests: Family<Gauge>,
    /// `karpenter_nodes_total_daemon_limits`
    pub total_daemon_limits: Family<Gauge>,
    /// `karpenter_nodes_system_overhead`
    pub system_overhead: Family<Gauge>,
    /// `karpenter_nodes_current_lifetime_seconds`
    pub current_lifetime: Family<Gauge>,
    /// `karpenter_cluster_utilization_percent{resource_type}`
    pub cluster_utilization: Family<Gauge>,
    /// The node labels that become metric labels, `(node label, metric label)`: upstream's
    /// well-known labels and the provider's.
    pub well_known: Vec<(String, String)>,
}

/// Every metric the controller exports.
pub struct Metrics {
    registry: Registry,
    observer: observe::Observer,
    /// `karpenter_build_info{version,goversion,goarch,commit}`
    pub build_info: Family<Gauge>,
    /// `karpenter_nodeclaims_created_total{reason,nodepool,min_values_relaxed}`
    pub nodeclaims_created: Family<Counter>,
    /// `karpenter_nodeclaims_terminated_total{nodepool,capacity_type,zone}`
    pub nodeclaims_terminated: Family<Counter>,
    /// `karpenter_nodeclaims_disrupted_total{reason,nodepool,capacity_type,consolidation_policy,termination_mode}`
    pub nodeclaims_disrupted: Family<Counter>,
    /// `karpenter_pods_disruption_initiated_total`, labelled as `nodeclaims_disrupted`: the
    /// reschedulable pods on each disrupted NodeClaim.
    pub pods_disruption_initiated: Family<Counter>,
    /// `karpenter_nodeclaims_unhealthy_disrupted_total{condition,nodepool,capacity_type,image_id}`:
    /// NodeClaims node repair deleted, by the node condition they failed (snake_case).
    pub nodeclaims_unhealthy_disrupted: Family<Counter>,
    /// `karpenter_nodeclaims_drifted_total{type,nodepool}`: ours, kept for dashboards built
    /// on it (upstream dropped it in v1.0).
    pub nodeclaims_drifted: Family<Counter>,
    /// `karpenter_nodeclaims_termination_duration_seconds{nodepool}`: deletion to finalizer
    /// removal.
    pub nodeclaims_termination_duration: Family<Histogram>,
    /// `karpenter_nodeclaims_instance_termination_duration_seconds{nodepool}`: first
    /// instance deletion to the provider saying it is gone.
    pub nodeclaims_instance_termination_duration: Family<Histogram>,
    /// `karpenter_nodes_created_total{nodepool,zone}`
    pub nodes_created: Family<Counter>,
    /// `karpenter_nodes_terminated_total{nodepool,zone}`
    pub nodes_terminated: Family<Counter>,
    /// `karpenter_nodes_drained_total{nodepool}`
    pub nodes_drained: Family<Counter>,
    /// `karpenter_nodes_termination_duration_seconds{nodepool}`: deletion to finalizer removal.
    pub nodes_termination_duration: Family<Summary>,
    /// `karpenter_nodes_lifetime_duration_seconds{nodepool}`: creation to finalizer removal.
    pub nodes_lifetime_duration: Family<Histogram>,
    /// The node gauges.
    pub nodes: NodeGauges,
    /// `karpenter_nodepools_limit{resource_type,nodepool}`
    pub nodepools_limit: Family<Gauge>,
    /// `karpenter_nodepools_usage{resource_type,nodepool}`
    pub nodepools_usage: Family<Gauge>,
    /// `karpenter_nodepools_allowed_disruptions{nodepool,reason}`
    pub nodepools_allowed_disruptions: Family<Gauge>,
    /// `karpenter_nodepools_nodes_consuming_budgets{nodepool,reason}`
    pub nodepools_nodes_consuming_budgets: Family<Gauge>,
    /// The pod metrics.
    pub pods: pods::PodMetrics,
    /// `karpenter_pods_eviction_requests_total{code}`
    pub pods_eviction_requests: Family<Counter>,
    /// `karpenter_pods_drained_total{reason}`
    pub pods_drained: Family<Counter>,
    /// `karpenter_scheduler_scheduling_duration_seconds{controller}`
    pub scheduling_duration: Family<Histogram>,
    /// `karpenter_scheduler_unschedulable_pods_count{controller}`
    pub unschedulable_pods: Family<Gauge>,
    /// `karpenter_scheduler_ignored_pods_count`
    pub ignored_pods: Family<Gauge>,
    /// `karpenter_scheduler_pending_pods_by_effective_zone_count{controller,zone}`
    pub pending_pods_by_zone: Family<Gauge>,
    /// `karpenter_scheduler_queue_depth{controller,scheduling_id}`: pods a simulation in
    /// progress has still to place.
    pub scheduler_queue_depth: Family<Gauge>,
    /// `karpenter_scheduler_unfinished_work_seconds{controller,scheduling_id}`: how long the
    /// simulation in progress has run.
    pub scheduler_unfinished_work: Family<Gauge>,
    /// `karpenter_voluntary_disruption_decision_evaluation_duration_seconds{reason,consolidation_type}`
    pub disruption_evaluation_duration: Family<Histogram>,
    /// `karpenter_voluntary_disruption_decisions_total{decision,reason,consolidation_type}`
    pub disruption_decisions: Family<Counter>,
    /// `karpenter_voluntary_disruption_decisions_by_nodepool_total{nodepool,decision,reason,consolidation_type}`
    pub disruption_decisions_by_nodepool: Family<Counter>,
    /// `karpenter_voluntary_disruption_eligible_nodes{reason}`
    pub disruption_eligible_nodes: Family<Gauge>,
    /// `karpenter_voluntary_disruption_consolidation_timeouts_total{consolidation_type}`
    pub consolidation_timeouts: Family<Counter>,
    /// `karpenter_voluntary_disruption_failed_validations_total{consolidation_type}`
    pub disruption_failed_validations: Family<Counter>,
    /// `karpenter_voluntary_disruption_queue_failures_total{decision,reason,consolidation_type}`
    pub disruption_queue_failures: Family<Counter>,
    /// `karpenter_cluster_state_node_count`
    pub cluster_state_node_count: Family<Gauge>,
    /// `karpenter_cluster_state_synced`
    pub cluster_state_synced: Family<Gauge>,
    /// `karpenter_cluster_state_unsynced_time_seconds`
    pub cluster_state_unsynced_time: Family<Gauge>,
    /// `karpenter_cloudprovider_duration_seconds{controller,method,provider}`
    pub cloudprovider_duration: Family<Histogram>,
    /// `karpenter_cloudprovider_errors_total{controller,method,provider,error}`
    pub cloudprovider_errors: Family<Counter>,
    /// operatorpkg's `operator_*_status_condition_*` and `operator_*_termination_*`.
    pub status: status::StatusMetrics,
    /// `controller_runtime_reconcile_total{controller,result}`: every reconcile (or pass) of
    /// each loop, `success` or `error`, under controller-runtime's name.
    pub reconcile_total: Family<Counter>,
    /// `controller_runtime_reconcile_errors_total{controller}`
    pub reconcile_errors: Family<Counter>,
    /// `controller_runtime_reconcile_time_seconds{controller}`
    pub reconcile_time: Family<Histogram>,
    /// `leader_election_master_status{name}`: 1 while this replica leads.
    pub leader_election_master_status: Family<Gauge>,
    /// `leader_election_slowpath_total{name}`: renewals of a held lease that could not write
    /// it as last written and had to read it again (client-go's slow path).
    pub leader_election_slowpath: Family<Counter>,
    /// controller-runtime's other controller metrics and the work queues'.
    pub runtime: runtime::RuntimeMetrics,
    /// The API client's (shared by every registry, see [`client::ClientMetrics::global`]).
    pub client: client::ClientMetrics,
    /// `karpenter_interruption_received_messages_total{message_type}` (the AWS provider's)
    pub interruption_received_messages: Family<Counter>,
    /// `karpenter_interruption_deleted_messages_total` (the AWS provider's)
    pub interruption_deleted_messages: Family<Counter>,
    /// `karpenter_interruption_message_queue_duration_seconds` (the AWS provider's): from AWS
    /// sending a message to its handling.
    pub interruption_message_queue_duration: Family<Histogram>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// A registry with every metric registered, for a provider that adds no labels.
    pub fn new() -> Self {
        Self::for_provider(&ProviderLabels::default())
    }

    /// A registry with every metric registered, with the labels `provider` adds.
    pub fn for_provider(provider: &ProviderLabels) -> Self {
        let mut b = Builder {
            registry: Registry::default(),
        };
        let build_info = b.gauge(
            "karpenter_build_info",
            "A metric with a constant '1' value labeled by version from which karpenter was built.",
            &["version", "goversion", "goarch", "commit"],
        );
        build_info.set(
            &[
                env!("CARGO_PKG_VERSION"),
                // Not Go: the toolchain stands where upstream names Go's.
                concat!("rust", env!("CARGO_PKG_RUST_VERSION")),
                go_arch(std::env::consts::ARCH),
                option_env!("KARPENTER_COMMIT").unwrap_or(""),
            ],
            1.0,
        );
        let disrupted_labels = [
            "reason",
            "nodepool",
            "capacity_type",
            "consolidation_policy",
            "termination_mode",
        ];
        let nodeclaims_created = b.counter(
            "karpenter_nodeclaims_created_total",
            "Number of nodeclaims created in total by Karpenter. Labeled by reason the nodeclaim was created, the owning nodepool, and if min values was relaxed for this nodeclaim.",
            &["reason", "nodepool", "min_values_relaxed"],
        );
        let nodeclaims_terminated = b.counter(
            "karpenter_nodeclaims_terminated_total",
            "Number of nodeclaims terminated in total by Karpenter. Labeled by the owning nodepool, capacity type, and zone.",
            &["nodepool", "capacity_type", "zone"],
        );
        let nodeclaims_disrupted = b.counter(
            "karpenter_nodeclaims_disrupted_total",
            "Number of nodeclaims disrupted in total by Karpenter. Labeled by reason the nodeclaim was disrupted, the owning nodepool, the capacity type, the consolidation policy, and the termination mode.",
            &disrupted_labels,
        );
        let pods_disruption_initiated = b.counter(
            "karpenter_pods_disruption_initiated_total",
            "Number of pod disruptions initiated in total by Karpenter, incremented by the reschedulable pod count whenever the underlying nodeclaim is disrupted. Pods owned by DaemonSets and mirror pods are excluded.",
            &disrupted_labels,
        );
        let nodeclaims_unhealthy_disrupted = b.counter(
            "karpenter_nodeclaims_unhealthy_disrupted_total",
            "Number of unhealthy nodeclaims disrupted in total by Karpenter. Labeled by condition on the node was disrupted, the owning nodepool, and the image ID.",
            &["condition", "nodepool", "capacity_type", "image_id"],
        );
        let nodeclaims_drifted = b.counter(
            "karpenter_nodeclaims_drifted_total",
            "Number of nodeclaims found drifted, by drift type and nodepool (karpenter-rs; upstream removed it in v1.0).",
            &["type", "nodepool"],
        );
        let nodeclaims_termination_duration = b.histogram(
            "karpenter_nodeclaims_termination_duration_seconds",
            "Duration of NodeClaim termination in seconds.",
            &["nodepool"],
            &exponential_buckets(1.0, 2.0, 12),
        );
        let nodeclaims_instance_termination_duration = b.histogram(
            "karpenter_nodeclaims_instance_termination_duration_seconds",
            "Duration of CloudProvider Instance termination in seconds.",
            &["nodepool"],
            &exponential_buckets(1.0, 2.0, 11),
        );
        let nodes_created = b.counter(
            "karpenter_nodes_created_total",
            "Number of nodes created in total by Karpenter. Labeled by owning nodepool and zone.",
            &["nodepool", "zone"],
        );
        let nodes_terminated = b.counter(
            "karpenter_nodes_terminated_total",
            "Number of nodes terminated in total by Karpenter. Labeled by owning nodepool and zone.",
            &["nodepool", "zone"],
        );
        let nodes_drained = b.counter(
            "karpenter_nodes_drained_total",
            "The total number of nodes drained by Karpenter",
            &["nodepool"],
        );
        let nodes_termination_duration = b.summary(
            "karpenter_nodes_termination_duration_seconds",
            "The time taken between a node's deletion request and the removal of its finalizer",
            &["nodepool"],
        );
        let nodes_lifetime_duration = b.histogram(
            "karpenter_nodes_lifetime_duration_seconds",
            "The lifetime duration of the nodes since creation.",
            &["nodepool"],
            &lifetime_buckets(),
        );
        let nodes = node_gauges(&mut b, provider);
        let nodepools_limit = b.gauge(
            "karpenter_nodepools_limit",
            "Limits specified on the nodepool that restrict the quantity of resources provisioned. Labeled by nodepool name and resource type.",
            &["resource_type", "nodepool"],
        );
        let nodepools_usage = b.gauge(
            "karpenter_nodepools_usage",
            "The amount of resources that have been provisioned for a nodepool. Labeled by nodepool name and resource type.",
            &["resource_type", "nodepool"],
        );
        let nodepools_allowed_disruptions = b.gauge(
            "karpenter_nodepools_allowed_disruptions",
            "The number of nodes for a given NodePool that can be concurrently disrupting at a point in time. Labeled by NodePool. Note that allowed disruptions can change very rapidly, as new nodes may be created and others may be deleted at any point.",
            &["nodepool", "reason"],
        );
        let nodepools_nodes_consuming_budgets = b.gauge(
            "karpenter_nodepools_nodes_consuming_budgets",
            "The number of nodes consuming the budget of a nodepool at a point in time. Labeled by NodePool.",
            &["nodepool", "reason"],
        );
        let pods = pods::PodMetrics::register(&mut b);
        let pods_eviction_requests = b.counter(
            "karpenter_pods_eviction_requests_total",
            "The total number of pod eviction requests made by Karpenter, labeled by response code",
            &["code"],
        );
        let pods_drained = b.counter(
            "karpenter_pods_drained_total",
            "The total number of pods drained during node termination by Karpenter, labeled by reason",
            &["reason"],
        );
        let scheduling_duration = b.histogram(
            "karpenter_scheduler_scheduling_duration_seconds",
            "Duration of scheduling simulations used for deprovisioning and provisioning in seconds.",
            &["controller"],
            &DURATION_BUCKETS,
        );
        let unschedulable_pods = b.gauge(
            "karpenter_scheduler_unschedulable_pods_count",
            "The number of unschedulable Pods.",
            &["controller"],
        );
        let ignored_pods = b.gauge(
            "karpenter_scheduler_ignored_pods_count",
            "Number of pods ignored during scheduling by Karpenter",
            &[],
        );
        let pending_pods_by_zone = b.gauge(
            "karpenter_scheduler_pending_pods_by_effective_zone_count",
            "Pending pods dimensioned by effective zone constraint, or the intersection of pod-level zone signals, volume topology (PVC zones), and topology constraints. Values: specific zone name (e.g., 'us-west-2a'), 'flexible' (multiple zones), or 'none' (no valid intersection).",
            &["controller", "zone"],
        );
        let scheduler_queue_depth = b.gauge(
            "karpenter_scheduler_queue_depth",
            "The number of pods currently waiting to be scheduled.",
            &["controller", "scheduling_id"],
        );
        let scheduler_unfinished_work = b.gauge(
            "karpenter_scheduler_unfinished_work_seconds",
            "How many seconds of work has been done that is in progress and hasn't been observed by scheduling_duration_seconds.",
            &["controller", "scheduling_id"],
        );
        let disruption_evaluation_duration = b.histogram(
            "karpenter_voluntary_disruption_decision_evaluation_duration_seconds",
            "Duration of the disruption decision evaluation process in seconds. Labeled by method and consolidation type.",
            &["reason", "consolidation_type"],
            &DURATION_BUCKETS,
        );
        let disruption_decisions = b.counter(
            "karpenter_voluntary_disruption_decisions_total",
            "Number of disruption decisions performed. Labeled by disruption decision, reason, and consolidation type.",
            &["decision", "reason", "consolidation_type"],
        );
        let disruption_decisions_by_nodepool = b.counter(
            "karpenter_voluntary_disruption_decisions_by_nodepool_total",
            "Number of disruption decisions performed by nodepool. Labeled by nodepool name, disruption decision, reason, and consolidation type.",
            &["nodepool", "decision", "reason", "consolidation_type"],
        );
        let disruption_eligible_nodes = b.gauge(
            "karpenter_voluntary_disruption_eligible_nodes",
            "Number of nodes eligible for disruption by Karpenter. Labeled by disruption reason.",
            &["reason"],
        );
        let consolidation_timeouts = b.counter(
            "karpenter_voluntary_disruption_consolidation_timeouts_total",
            "Number of times the Consolidation algorithm has reached a timeout. Labeled by consolidation type.",
            &["consolidation_type"],
        );
        // Upstream starts both at zero, so a rate over them exists before the first timeout.
        consolidation_timeouts.with(&["multi"]);
        consolidation_timeouts.with(&["single"]);
        let disruption_failed_validations = b.counter(
            "karpenter_voluntary_disruption_failed_validations_total",
            "Number of candidates that were selected for disruption but failed validation. Labeled by consolidation type.",
            &["consolidation_type"],
        );
        let disruption_queue_failures = b.counter(
            "karpenter_voluntary_disruption_queue_failures_total",
            "The number of times that an enqueued disruption decision failed. Labeled by disruption method.",
            &["decision", "reason", "consolidation_type"],
        );
        let cluster_state_node_count = b.gauge(
            "karpenter_cluster_state_node_count",
            "Current count of nodes in cluster state",
            &[],
        );
        let cluster_state_synced = b.gauge(
            "karpenter_cluster_state_synced",
            "Returns 1 if cluster state is synced and 0 otherwise. Synced checks that nodeclaims and nodes that are stored in the APIServer have the same representation as Karpenter's cluster state",
            &[],
        );
        let cluster_state_unsynced_time = b.gauge(
            "karpenter_cluster_state_unsynced_time_seconds",
            "The time for which cluster state is not synced",
            &[],
        );
        let cloudprovider_duration = b.histogram(
            "karpenter_cloudprovider_duration_seconds",
            "Duration of cloud provider method calls. Labeled by the controller, method name and provider.",
            &["controller", "method", "provider"],
            &DEFAULT_BUCKETS,
        );
        let cloudprovider_errors = b.counter(
            "karpenter_cloudprovider_errors_total",
            "Total number of errors returned from CloudProvider calls.",
            &["controller", "method", "provider", "error"],
        );
        let status = status::StatusMetrics::register(&mut b, provider);
        let reconcile_total = b.counter(
            "controller_runtime_reconcile_total",
            "Total number of reconciliations per controller",
            &["controller", "result"],
        );
        let reconcile_errors = b.counter(
            "controller_runtime_reconcile_errors_total",
            "Total number of reconciliation errors per controller",
            &["controller"],
        );
        let reconcile_time = b.histogram(
            "controller_runtime_reconcile_time_seconds",
            "Length of time per reconciliation per controller",
            &["controller"],
            &DURATION_BUCKETS[..40],
        );
        let leader_election_master_status = b.gauge(
            "leader_election_master_status",
            "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master. 'name' is the string used to identify the lease. Please make sure to group by name.",
            &["name"],
        );
        let leader_election_slowpath = b.counter(
            "leader_election_slowpath_total",
            "Total number of slow path exercised in renewing leader leases. 'name' is the string used to identify the lease. Please make sure to group by name.",
            &["name"],
        );
        let runtime = runtime::RuntimeMetrics::register(&mut b);
        let client = client::ClientMetrics::global().clone();
        client.register(&mut b);
        let interruption_received_messages = b.counter(
            "karpenter_interruption_received_messages_total",
            "Count of messages received from the SQS queue. Broken down by message type and whether the message was actionable.",
            &["message_type"],
        );
        let interruption_deleted_messages = b.counter(
            "karpenter_interruption_deleted_messages_total",
            "Count of messages deleted from the SQS queue.",
            &[],
        );
        let interruption_message_queue_duration = b.histogram(
            "karpenter_interruption_message_queue_duration_seconds",
            "Amount of time an interruption message is on the queue before it is processed by karpenter.",
            &[],
            &DURATION_BUCKETS,
        );
        Self {
            registry: b.registry,
            observer: Default::default(),
            build_info,
            nodeclaims_created,
            nodeclaims_terminated,
            nodeclaims_disrupted,
            pods_disruption_initiated,
            nodeclaims_unhealthy_disrupted,
            nodeclaims_drifted,
            nodeclaims_termination_duration,
            nodeclaims_instance_termination_duration,
            nodes_created,
            nodes_terminated,
            nodes_drained,
            nodes_termination_duration,
            nodes_lifetime_duration,
            nodes,
            nodepools_limit,
            nodepools_usage,
            nodepools_allowed_disruptions,
            nodepools_nodes_consuming_budgets,
            pods,
            pods_eviction_requests,
            pods_drained,
            scheduling_duration,
            unschedulable_pods,
            ignored_pods,
            scheduler_queue_depth,
            pending_pods_by_zone,
            scheduler_unfinished_work,
            disruption_evaluation_duration,
            disruption_decisions,
            disruption_decisions_by_nodepool,
            disruption_eligible_nodes,
            consolidation_timeouts,
            disruption_failed_validations,
            disruption_queue_failures,
            cluster_state_node_count,
            cluster_state_synced,
            cluster_state_unsynced_time,
            cloudprovider_duration,
            cloudprovider_errors,
            status,
            reconcile_total,
            reconcile_errors,
            reconcile_time,
            leader_election_master_status,
            leader_election_slowpath,
            runtime,
            client,
            interruption_received_messages,
            interruption_deleted_messages,
            interruption_message_queue_duration,
        }
    }

    /// Counts a NodeClaim disrupted for `reason` (`karpenter_nodeclaims_disrupted_total`) and,
    /// where upstream counts them, the reschedulable pods on its node
    /// (`karpenter_pods_disruption_initiated_total`). `consolidation_policy` is the NodePool's,
    /// snake_case, for consolidation, and empty otherwise.
    pub fn disrupted(
        &self,
        claim: &NodeClaim,
        reason: &str,
        consolidation_policy: &str,
        pods_on_node: Option<&[Arc<StoredPod>]>,
    ) {
        let values = [
            reason,
            label_of(claim, NODE_POOL_LABEL),
            label_of(claim, CAPACITY_TYPE_LABEL),
            consolidation_policy,
            termination_mode(claim),
        ];
        self.nodeclaims_disrupted.with(&values).inc();
        if let Some(pods_on_node) = pods_on_node {
            let n = pods_on_node
                .iter()
                .filter(|p| pod_predicates::is_reschedulable(&***p))
                .count();
            self.pods_disruption_initiated
                .with(&values)
                .inc_by(n as u64);
        }
    }

    /// Counts a NodeClaim whose finalizer came off (`karpenter_nodeclaims_terminated_total`).
    pub fn nodeclaim_terminated(&self, claim: &NodeClaim) {
        self.nodeclaims_terminated
            .with(&[
                label_of(claim, NODE_POOL_LABEL),
                label_of(claim, CAPACITY_TYPE_LABEL),
                label_of(claim, ZONE_LABEL),
            ])
            .inc();
    }

    /// Counts a NodeClaim's node registered (`karpenter_nodes_created_total`).
    pub fn node_created(&self, claim: &NodeClaim) {
        self.nodes_created
            .with(&[
                label_of(claim, NODE_POOL_LABEL),
                label_of(claim, ZONE_LABEL),
            ])
            .inc();
    }

    /// Counts one reconcile of `controller` (controller-runtime's total and errors).
    pub fn reconciled(&self, controller: &str, ok: bool) {
        let result = if ok { "success" } else { "error" };
        self.reconcile_total.with(&[controller, result]).inc();
        if !ok {
            self.reconcile_errors.with(&[controller]).inc();
        }
    }

    /// Counts one reconcile of `controller` that took `seconds`.
    pub fn reconciled_in(&self, controller: &str, ok: bool, seconds: f64) {
        self.reconciled(controller, ok);
        self.reconcile_time.with(&[controller]).observe(seconds);
    }

    /// How many reconciles of `controller` have finished, whatever their result.
    pub fn reconciles(&self, controller: &str) -> u64 {
        ["success", "error"]
            .iter()
            .filter_map(|result| self.reconcile_total.get(&[controller, result]))
            .map(|c| c.get())
            .sum()
    }

    /// Every family's descriptor, by name.
    pub fn descriptors(&self) -> Vec<Desc> {
        self.registry.descriptors()
    }

    /// The text exposition, as upstream serves it.
    pub fn encode(&self) -> String {
        self.registry.encode()
    }
}

fn node_gauges(b: &mut Builder, provider: &ProviderLabels) -> NodeGauges {
    let mut well_known: Vec<(String, String)> = Vec::new();
    for key in WELL_KNOWN_LABELS
        .iter()
        .map(|s| s.to_string())
        .chain(provider.well_known.iter().cloned())
    {
        if let Some(label) = node_metric_label(&key)
            && !well_known.iter().any(|(_, l)| *l == label)
        {
            well_known.push((key, label));
        }
    }
    let mut names: Vec<&str> = well_known.iter().map(|(_, l)| l.as_str()).collect();
    names.extend(["node_name", "phase", "managed"]);
    let mut with_resource = names.clone();
    with_resource.push("resource_type");
    let mut gauge = |name: &str, help: &str| b.gauge(name, help, &with_resource);
    let allocatable = gauge(
        "karpenter_nodes_allocatable",
        "Node allocatable are the resources allocatable by nodes.",
    );
    let total_pod_requests = gauge(
        "karpenter_nodes_total_pod_requests",
        "Node total pod requests are the resources requested by pods bound to nodes, including the DaemonSet pods.",
    );
    let total_pod_limits = gauge(
        "karpenter_nodes_total_pod_limits",
        "Node total pod limits are the resources specified by pod limits, including the DaemonSet pods.",
    );
    let total_daemon_requests = gauge(
        "karpenter_nodes_total_daemon_requests",
        "Node total daemon requests are the resource requested by DaemonSet pods bound to nodes.",
    );
    let total_daemon_limits = gauge(
        "karpenter_nodes_total_daemon_limits",
        "Node total daemon limits are the resources specified by DaemonSet pod limits.",
    );
    let system_overhead = gauge(
        "karpenter_nodes_system_overhead",
        "Node system daemon overhead are the resources reserved for system overhead, the difference between the node's capacity and allocatable values are reported by the status.",
    );
    let current_lifetime = b.gauge(
        "karpenter_nodes_current_lifetime_seconds",
        "Node age in seconds",
        &names,
    );
    let cluster_utilization = b.gauge(
        "karpenter_cluster_utilization_percent",
        "Utilization of allocatable resources by pod requests",
        &["resource_type"],
    );
    NodeGauges {
        allocatable,
        total_pod_requests,
        total_pod_limits,
        total_daemon_requests,
        total_daemon_limits,
        system_overhead,
        current_lifetime,
        cluster_utilization,
        well_known,
    }
}

/// Go's name for an architecture, as upstream's `goarch` label carries it.
fn go_arch(rust: &str) -> &str {
    match rust {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        "powerpc64" => "ppc64le",
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_upstream() {
        let m = Metrics::new();
        m.nodeclaims_created
            .with(&["provisioned", "default", "false"])
            .inc();
        m.scheduling_duration.with(&["provisioner"]).observe(0.2);
        m.reconciled("nodeclaim.lifecycle", true);
        m.reconciled("nodeclaim.lifecycle", false);
        m.cluster_state_synced.set(&[], 0.0);
        assert_eq!(m.reconciles("nodeclaim.lifecycle"), 2);
        let text = m.encode();
        for line in [
            "karpenter_nodeclaims_created_total{min_values_relaxed=\"false\",nodepool=\"default\",reason=\"provisioned\"} 1",
            "karpenter_scheduler_scheduling_duration_seconds_count{controller=\"provisioner\"} 1",
            "karpenter_build_info{commit=",
            "karpenter_cluster_state_synced 0",
            "controller_runtime_reconcile_total{controller=\"nodeclaim.lifecycle\",result=\"error\"} 1",
            "controller_runtime_reconcile_errors_total{controller=\"nodeclaim.lifecycle\"} 1",
            "karpenter_voluntary_disruption_consolidation_timeouts_total{consolidation_type=\"multi\"} 0",
        ] {
            assert!(text.contains(line), "{line} missing from\n{text}");
        }
    }

    #[test]
    fn metric_labels_from_label_keys() {
        for (key, node, operator) in [
            (
                "karpenter.sh/capacity-type",
                Some("capacity_type"),
                "karpenter_sh_capacity_type",
            ),
            (
                "node.kubernetes.io/instance-type",
                Some("instance_type"),
                "node_kubernetes_io_instance_type",
            ),
            (
                "karpenter.kwok.sh/kwoknodeclass",
                Some("kwoknodeclass"),
                "karpenter_kwok_sh_kwoknodeclass",
            ),
            ("plain", None, "plain"),
        ] {
            assert_eq!(node_metric_label(key).as_deref(), node, "{key}");
            assert_eq!(prometheus_label(key), operator, "{key}");
        }
    }

    #[test]
    fn node_gauges_carry_the_providers_well_known_labels() {
        let m = Metrics::for_provider(&ProviderLabels {
            well_known: vec!["karpenter.kwok.sh/instance-cpu".into()],
            node_classes: vec![],
        });
        let labels = &m.nodes.allocatable.desc().labels;
        for l in [
            "nodepool",
            "zone",
            "instance_cpu",
            "node_name",
            "resource_type",
        ] {
            assert!(labels.iter().any(|x| x == l), "{l} in {labels:?}");
        }
    }

    #[test]
    fn exponential_buckets_as_client_golang() {
        assert_eq!(exponential_buckets(1.0, 2.0, 4), vec![1.0, 2.0, 4.0, 8.0]);
        assert_eq!(exponential_buckets(0.5, 2.0, 15).last(), Some(&8192.0));
    }
}
