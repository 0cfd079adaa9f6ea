//! The metrics loop: every few seconds, while this replica leads, the gauges that describe
//! the cluster are recomputed from cluster state (nodes, NodePools, pods, status conditions),
//! as upstream's metrics controllers do, and the series of objects that are gone go with
//! them. A standby reports none of them, so that sums over replicas stay right.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use karpenter_api::NodePool;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::Metrics;
use super::state_gauges::{self, BudgetNode, NodeView};
use super::status::{KindMetrics, StatusObject};
use crate::Context;
use crate::cloudprovider::CloudProvider;
use crate::nodepool_status::usage;

/// How often the gauges are recomputed: upstream's node metrics controller's period.
pub const PERIOD: Duration = Duration::from_secs(5);

/// Where the status metrics read a provider's NodeClasses: the kind and every object of it
/// now (the provider's status loop registers it, see [`Metrics::track_node_classes`]).
pub type NodeClassSource = (String, Box<dyn Fn() -> Vec<StatusObject> + Send + Sync>);

/// What the loop keeps between passes.
#[derive(Default)]
pub struct Observer {
    unsynced_since: Mutex<Option<Instant>>,
    sources: Mutex<Vec<NodeClassSource>>,
}

impl Metrics {
    /// Has the status metrics of the NodeClass `kind` read from `objects` on every pass.
    pub fn track_node_classes(
        &self,
        kind: &str,
        objects: impl Fn() -> Vec<StatusObject> + Send + Sync + 'static,
    ) {
        self.observer
            .sources
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((kind.to_string(), Box::new(objects)));
    }
}

/// Sets `karpenter_cluster_state_*` from cluster state now (also on every scrape).
pub fn cluster_state<P: CloudProvider>(ctx: &Context<P>) {
    let m = &ctx.metrics;
    let synced = ctx.cluster.synced();
    m.cluster_state_node_count
        .set(&[], ctx.cluster.nodes.len() as f64);
    m.cluster_state_synced.set(&[], f64::from(u8::from(synced)));
    let mut since = m
        .observer
        .unsynced_since
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    let unsynced = if synced {
        *since = None;
        0.0
    } else {
        since
            .get_or_insert_with(Instant::now)
            .elapsed()
            .as_secs_f64()
    };
    m.cluster_state_unsynced_time.set(&[], unsynced);
}

/// One pass: every gauge computed from state, while leading; none while not.
pub fn pass<P: CloudProvider>(ctx: &Context<P>) {
    let m = &ctx.metrics;
    cluster_state(ctx);
    if !ctx.options.disable_leader_election {
        m.leader_election_master_status.set(
            &[ctx.options.leader_election_name.as_str()],
            f64::from(u8::from(ctx.is_leader())),
        );
    }
    // DISABLE_CLUSTER_STATE_OBSERVABILITY: upstream then runs no node, pod, NodePool or
    // status-condition metrics controllers.
    if ctx.options.disable_cluster_state_observability {
        clear(m);
        return;
    }
    if !ctx.is_leader() || !ctx.cluster.synced() {
        if !ctx.is_leader() {
            clear(m);
        }
        return;
    }
    let now = ctx.clock.now();
    let cluster = &ctx.cluster;
    let nodes = cluster.nodes.all();
    let claims = cluster.node_claims.all();
    let pools = cluster.node_pools.all();
    let by_id = cluster.node_claims_by_provider_id();
    let claim_of = |n: &k8s_openapi::api::core::v1::Node| {
        let id = n.spec.as_ref()?.provider_id.as_deref()?;
        by_id.get(id).map(|c| &**c)
    };

    // Nodes.
    let pods_by_node = cluster.pods_by_node();
    let totals = state_gauges::pod_totals(&pods_by_node);
    let views: Vec<NodeView> = nodes
        .iter()
        .map(|n| NodeView {
            node: n,
            claim: claim_of(n),
            pods: totals.get(n.metadata.name.as_deref().unwrap_or_default()),
        })
        .collect();
    let s = state_gauges::node_series(&views, &m.nodes.well_known, now);
    m.nodes.allocatable.replace_all(s.allocatable);
    m.nodes.total_pod_requests.replace_all(s.total_pod_requests);
    m.nodes.total_pod_limits.replace_all(s.total_pod_limits);
    m.nodes
        .total_daemon_requests
        .replace_all(s.total_daemon_requests);
    m.nodes
        .total_daemon_limits
        .replace_all(s.total_daemon_limits);
    m.nodes.system_overhead.replace_all(s.system_overhead);
    m.nodes.current_lifetime.replace_all(s.current_lifetime);
    m.nodes
        .cluster_utilization
        .replace_all(s.cluster_utilization);

    // NodePools the provider manages.
    let managed: Vec<&NodePool> = pools
        .iter()
        .map(|p| &**p)
        .filter(|p| ctx.provider.supports(&p.spec.template.spec.node_class_ref))
        .collect();
    let marked = cluster.marked_for_deletion();
    let used = usage(
        nodes.iter().map(|n| &**n),
        claims.iter().map(|c| &**c),
        &marked,
    );
    let (usage_series, limits) = state_gauges::node_pool_series(&managed, &used);
    m.nodepools_usage.replace_all(usage_series);
    m.nodepools_limit.replace_all(limits);
    let budget_nodes: Vec<BudgetNode> = nodes
        .iter()
        .filter_map(|n| BudgetNode::of(n, claim_of(n), &marked))
        .collect();
    let (allowed, consuming) = state_gauges::budget_series(&managed, &budget_nodes, now);
    m.nodepools_allowed_disruptions.replace_all(allowed);
    m.nodepools_nodes_consuming_budgets.replace_all(consuming);

    // Pods.
    m.pods
        .observe(&cluster.pods.all(), |name| cluster.nodes.get(name), now);

    // Status conditions.
    let status = &m.status;
    let of_claims: Vec<StatusObject> = claims
        .iter()
        .map(|c| StatusObject::of_node_claim(c))
        .collect();
    status.observe(&status.node_claims, &of_claims, now);
    let of_pools: Vec<StatusObject> = pools
        .iter()
        .map(|p| StatusObject::of_node_pool(p))
        .collect();
    status.observe(&status.node_pools, &of_pools, now);
    let of_nodes: Vec<StatusObject> = nodes.iter().map(|n| StatusObject::of_node(n)).collect();
    status.observe(&status.nodes, &of_nodes, now);
    let sources = m.observer.sources.lock().unwrap_or_else(|e| e.into_inner());
    for (kind, objects) in sources.iter() {
        if let Some(k) = status.node_class(kind) {
            status.observe(k, &objects(), now);
        }
    }
}

/// Drops the gauges a standby does not report.
fn clear(m: &Metrics) {
    for f in [
        &m.nodes.allocatable,
        &m.nodes.total_pod_requests,
        &m.nodes.total_pod_limits,
        &m.nodes.total_daemon_requests,
        &m.nodes.total_daemon_limits,
        &m.nodes.system_overhead,
        &m.nodes.current_lifetime,
        &m.nodes.cluster_utilization,
        &m.nodepools_usage,
        &m.nodepools_limit,
        &m.nodepools_allowed_disruptions,
        &m.nodepools_nodes_consuming_budgets,
    ] {
        f.replace_all([]);
    }
    m.pods.clear();
    let status = &m.status;
    let kinds: Vec<&KindMetrics> = [&status.node_claims, &status.node_pools, &status.nodes]
        .into_iter()
        .chain(&status.node_classes)
        .collect();
    for k in kinds {
        k.clear();
    }
    for f in [
        &status.count,
        &status.current_status_seconds,
        &status.termination_current_time,
    ] {
        f.replace_all([]);
    }
}

/// Runs the pass every [`PERIOD`] until `shutdown`.
pub async fn run<P: CloudProvider>(ctx: Arc<Context<P>>, shutdown: CancellationToken) {
    let lm = ctx.metrics.runtime.controller("metrics", 1);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(PERIOD) => {}
        }
        let started = Instant::now();
        pass(&ctx);
        lm.singleton_pass(started.elapsed());
        ctx.metrics
            .reconciled_in("metrics", true, started.elapsed().as_secs_f64());
    }
}
