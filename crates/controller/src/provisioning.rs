//! The provisioner: pods the kube-scheduler could not place are batched (1 s idle, 10 s at
//! most), the scheduling simulation decides which fit on nodes that exist or are launching and
//! which need new NodeClaims, and those NodeClaims are created.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use k8s_openapi::api::core::v1::ObjectReference;
use karpenter_api::{NodeClaim, NodePool};
use karpenter_core::provisioning::capacity_buffer::is_virtual_pod;
use karpenter_core::provisioning::nodepools::launchable;
use karpenter_core::provisioning::scheduling::{NodePoolInput, Results, SchedulerOptions};
use karpenter_core::provisioning::static_capacity::is_static;
use karpenter_core::provisioning::{Batcher, node_claim_for};
use karpenter_core::round::{
    BufferHolding, Parts, RoundInputs, RoundPlan, RoundPod, nomination_window,
};
use karpenter_core::state::{Snapshot, pods};
use kube::Api;
use kube::api::PostParams;

use crate::cloudprovider::CloudProvider;
use crate::events::{Note, catalog};
use crate::state::StoredPod;
use crate::{Context, Error};

/// Upstream's budget for one simulation; what is decided by then is kept.
const SOLVE_TIMEOUT: Duration = Duration::from_secs(60);
/// What one provisioning round did.
#[derive(Debug, Default, PartialEq)]
pub struct Provisioned {
    /// Names of the NodeClaims created.
    pub node_claims: Vec<String>,
    /// Pods the simulation placed on nodes that exist or are launching.
    pub nominated: usize,
    /// Pods that fit nowhere.
    pub unschedulable: usize,
}

/// The NodePools a round may launch from, each with its instance types — dynamic and static
/// ones (the scheduler launches only from the dynamic; disruption replaces the static pools'
/// drifted nodes and static capacity keeps their size) — with the NodeOverlays applied when
/// the `NodeOverlay` gate is on (none while they cannot be listed, as upstream skips NodePools
/// whose overlays are not evaluated yet).
pub(crate) async fn pool_inputs<P: CloudProvider>(ctx: &Context<P>) -> Vec<NodePoolInput> {
    let pools = provider_pool_inputs(ctx).await;
    if !ctx.options.feature_gates.node_overlay {
        return pools;
    }
    crate::nodeoverlay::overlaid(ctx, pools)
        .await
        .map(|(pools, _)| pools)
        .unwrap_or_default()
}

/// The NodePools a round may launch from, each with the provider's instance types as they are.
pub(crate) async fn provider_pool_inputs<P: CloudProvider>(ctx: &Context<P>) -> Vec<NodePoolInput> {
    let mut pools = Vec::new();
    for pool in ctx.cluster.node_pools.all() {
        if !launchable(&pool) {
            continue;
        }
        match ctx
            .call("get_instance_types", ctx.provider.instance_types(&pool))
            .await
        {
            // A static pool stays without types: disruption must still know its nodes are
            // never consolidated.
            Ok(types) if !types.is_empty() || is_static(&pool) => pools.push(NodePoolInput {
                node_pool: (*pool).clone(),
                instance_types: types,
            }),
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(nodepool = pool.name(), error = %e, "skipping nodepool, no instance types")
            }
        }
    }
    pools
}

/// The scheduling settings the controller's flags set, for every round.
pub(crate) fn scheduler_options<P: CloudProvider>(ctx: &Context<P>) -> SchedulerOptions {
    SchedulerOptions {
        respect_preferences: ctx.options.preference_policy == "Respect",
        strict_min_values: ctx.options.min_values_policy == "Strict",
        provider_labels: ctx.provider.provider_labels(),
        default_constraints: ctx.options.scheduler_config.default_constraints.clone(),
        ignore_dra_requests: ctx.options.ignore_dra_requests,
        ..Default::default()
    }
}

/// Runs `report` over the snapshot of the state now, launching from `pools`, and the round
/// `parts` decide on it, the state's objects held meanwhile. Errors while state is not synced,
/// or, for provisioning, while a NodeClaim has not launched (its capacity is not known:
/// upstream waits).
pub(crate) async fn round<P: CloudProvider, T>(
    ctx: &Context<P>,
    pools: &[NodePoolInput],
    parts: Parts<'_>,
    report: impl FnOnce(&Snapshot<'_, Arc<StoredPod>>, RoundPlan<'_, Arc<StoredPod>>) -> T,
) -> Result<T, Error> {
    let cluster = &ctx.cluster;
    if !cluster.synced() {
        return Err(Error::NotSynced(
            "cluster state has not listed every kind yet".into(),
        ));
    }
    let provider_labels = ctx.provider.provider_labels();
    let options = scheduler_options(ctx);
    let policies = ctx.provider.repair_policies();
    let virtual_pods = ctx.buffers.virtual_pods();
    let placed = ctx.buffers.placed();
    let objects = cluster.objects();
    let snapshot = objects.snapshot(pools, &provider_labels);
    if parts.provisioning
        && let Some(c) = snapshot.not_launched.first()
    {
        return Err(Error::NotSynced(format!(
            "nodeclaim {} is not launched yet",
            c.metadata.name.as_deref().unwrap_or_default()
        )));
    }
    let started = Instant::now();
    let interrupt = || started.elapsed() > SOLVE_TIMEOUT;
    let solving = parts.provisioning.then(|| {
        let queued = snapshot.provisionable.len()
            + snapshot.displaced.len()
            + if ctx.options.feature_gates.capacity_buffer {
                virtual_pods.len()
            } else {
                0
            };
        crate::metrics::Solving::start(&ctx.metrics, "provisioner", queued)
    });
    let plan = karpenter_core::round::decide(
        &snapshot,
        &RoundInputs {
            gates: ctx.options.feature_gates,
            now: ctx.clock.now(),
            options: &options,
            virtual_pods: &virtual_pods,
            buffer_holding: placed
                .as_ref()
                .map_or(BufferHolding::Unknown, BufferHolding::Placed),
            repair_policies: &policies,
            parts,
            interrupt: &interrupt,
        },
    );
    if let Some(solving) = solving {
        solving.done(&ctx.metrics);
    }
    Ok(report(&snapshot, plan))
}

/// What a provisioning round decides, before anything is written.
pub struct Scheduled {
    /// The NodePools used, with their instance types.
    pub pools: Vec<NodePoolInput>,
    /// The pods scheduled: provisionable ones, oldest first, then those of nodes being
    /// deleted, then the CapacityBuffers' virtual pods. Shared with cluster state: tens of
    /// thousands of whole `Pod`s would double the controller's memory for the round.
    pub batch: Vec<Arc<StoredPod>>,
    /// Where they go.
    pub results: Results,
    /// The nodes the round counts on.
    pub nominations: Vec<String>,
    /// Pending pods provisioning ignores, with why (upstream's "ignoring pod" events).
    pub rejected: Vec<(ObjectReference, String)>,
    /// How many pending pods it ignores: those, and those keeping off karpenter's nodes.
    pub ignored: usize,
    /// When the simulation started.
    pub started: Instant,
}

/// The scheduling simulation over the current state, exactly as a provisioning round runs it,
/// without writing anything.
pub async fn schedule<P: CloudProvider>(ctx: &Context<P>) -> Result<Scheduled, Error> {
    let started = Instant::now();
    let specs = &ctx.cluster.specs;
    let pools = pool_inputs(ctx).await;
    let parts = Parts {
        provisioning: true,
        ..Parts::NONE
    };
    let scheduled = round(ctx, &pools, parts, |snapshot, plan| {
        let provisioning = plan.provisioning?;
        let nominations = provisioning
            .nominations()
            .into_iter()
            .map(str::to_string)
            .collect();
        let batch = provisioning
            .batch
            .iter()
            .map(|p| match p {
                RoundPod::Real(p) => Arc::clone(p),
                RoundPod::Virtual(p) => Arc::new(StoredPod::new((*p).clone(), specs)),
            })
            .collect();
        Some(Scheduled {
            pools: Vec::new(),
            nominations,
            batch,
            results: provisioning.results,
            ignored: snapshot.rejected.len() + snapshot.avoiding,
            rejected: snapshot
                .rejected
                .iter()
                .map(|(pod, why)| (pods::reference(&***pod), why.clone()))
                .collect(),
            started,
        })
    })
    .await?
    .ok_or_else(|| Error::NotSynced("the round decided no provisioning".into()))?;
    Ok(Scheduled { pools, ..scheduled })
}

/// Upstream's `FailedScheduling` on the pod `reference` names: once per pod per 5 minutes.
fn failed_scheduling(reference: &ObjectReference, reason: &str) -> Note<'static> {
    catalog::failed_scheduling(reference.uid.as_deref().unwrap_or_default(), reason)
}

/// Upstream's `Nominated` on the pod `reference` names.
fn nominated(
    reference: &ObjectReference,
    claim: Option<&str>,
    node: Option<&str>,
) -> Note<'static> {
    catalog::nominated(reference.uid.as_deref().unwrap_or_default(), claim, node)
}

/// One provisioning round over the current state.
pub async fn provision<P: CloudProvider>(ctx: &Context<P>) -> Result<Provisioned, Error> {
    let Scheduled {
        pools,
        batch,
        nominations,
        results,
        started,
        rejected,
        ignored,
        ..
    } = schedule(ctx).await?;
    ctx.metrics.ignored_pods.set(&[], ignored as f64);
    let now = ctx.clock.now();
    for (pod, _) in &rejected {
        let key = format!(
            "{}/{}",
            pod.namespace.as_deref().unwrap_or_default(),
            pod.name.as_deref().unwrap_or_default()
        );
        ctx.metrics.pods.decided(&key, false, now);
    }
    if ctx.options.feature_gates.capacity_buffer {
        crate::capacity_buffer::record_round(ctx, &results, &batch).await;
    }
    // Virtual pods never exist: no metrics, events or nominations for them.
    let real = |i: &usize| !is_virtual_pod(&*batch[*i]);
    for (i, pod) in batch.iter().enumerate() {
        // Pods of nodes being deleted are simulated too; they are bound already.
        if pod.node_name.is_none() && real(&i) {
            ctx.metrics
                .pods
                .decided(&pod.key(), !results.pod_errors.contains_key(&i), now);
        }
    }
    for (pod, why) in rejected {
        let note = failed_scheduling(&pod, &format!("ignoring pod, {why}"));
        ctx.recorder.publish_to(pod, note).await;
    }
    if batch.is_empty() {
        return Ok(Provisioned::default());
    }
    let by_name: HashMap<&str, &NodePool> = pools
        .iter()
        .map(|p| (p.node_pool.name(), &p.node_pool))
        .collect();
    ctx.metrics
        .scheduling_duration
        .with(&["provisioner"])
        .observe(started.elapsed().as_secs_f64());
    // Pods waiting for reserved capacity are deferred, not unschedulable (upstream); virtual
    // pods are nobody's.
    ctx.metrics.unschedulable_pods.set(
        &["provisioner"],
        results
            .pod_errors
            .keys()
            .filter(|i| real(i) && !results.deferred.contains(*i))
            .count() as f64,
    );
    // Series of zones no pending pod has now go, as upstream resets the gauge each pass.
    ctx.metrics
        .pending_pods_by_zone
        .remove_matching(&[("controller", "provisioner")]);
    for (zone, n) in &results.pending_by_zone {
        ctx.metrics
            .pending_pods_by_zone
            .set(&["provisioner", zone], *n as f64);
    }
    tracing::info!(
        pods = batch.len(),
        nodeclaims = results.new_node_claims.len(),
        nominated = results.existing_nodes.values().map(Vec::len).sum::<usize>(),
        unschedulable = results.pod_errors.len(),
        duration = ?started.elapsed(),
        "computed new nodeclaim(s) to fit pod(s)"
    );
    for (i, reason) in results
        .pod_errors
        .iter()
        .filter(|(i, _)| real(i) && !results.deferred.contains(*i))
    {
        let pod = pods::reference(&batch[*i]);
        let note = failed_scheduling(&pod, reason);
        ctx.recorder.publish_to(pod, note).await;
    }
    let window = nomination_window(ctx.options.batch_max_duration);
    for node in &nominations {
        ctx.cluster.nominations.nominate(node, window);
    }
    for (node, pods) in &results.existing_nodes {
        for &i in pods.iter().filter(|i| real(i)) {
            let pod = pods::reference(&batch[i]);
            let note = nominated(&pod, None, Some(node));
            ctx.recorder.publish_to(pod, note).await;
        }
    }
    let api: Api<NodeClaim> = Api::all(ctx.client.clone());
    let mut created = Vec::new();
    // One failed create does not hold back the others (upstream creates them all and reports
    // the errors together); the pods of a failed one are provisioned again next round.
    let mut failed: Option<kube::Error> = None;
    for claim in &results.new_node_claims {
        let Some(pool) = by_name.get(claim.node_pool.as_str()) else {
            continue;
        };
        let object = node_claim_for(claim, pool);
        let made = match api.create(&PostParams::default(), &object).await {
            Ok(made) => made,
            Err(e) => {
                tracing::error!(nodepool = %claim.node_pool, error = %e, "creating nodeclaim");
                failed.get_or_insert(e);
                continue;
            }
        };
        let name = made.metadata.name.clone().unwrap_or_default();
        ctx.cluster.node_claims.apply(made);
        ctx.metrics
            .nodeclaims_created
            .with(&[
                "provisioned",
                &claim.node_pool,
                &claim.min_values_relaxed.to_string(),
            ])
            .inc();
        for &i in claim.pods.iter().filter(|i| real(i)) {
            let pod = pods::reference(&batch[i]);
            let note = nominated(&pod, Some(&name), None);
            ctx.recorder.publish_to(pod, note).await;
        }
        tracing::info!(nodeclaim = %name, nodepool = %claim.node_pool, pods = claim.pods.len(), "created nodeclaim");
        created.push(name);
    }
    if let Some(e) = failed {
        return Err(Error::Kube(e));
    }
    Ok(Provisioned {
        node_claims: created,
        nominated: results
            .existing_nodes
            .values()
            .flatten()
            .filter(|i| real(i))
            .count(),
        unschedulable: results.pod_errors.keys().filter(|i| real(i)).count(),
    })
}

/// Runs the provisioner until `shutdown`.
pub async fn run<P: CloudProvider>(
    ctx: Arc<Context<P>>,
    shutdown: tokio_util::sync::CancellationToken,
) {
    let mut batcher = Batcher::new(
        ctx.options.batch_idle_duration,
        ctx.options.batch_max_duration,
    );
    let origin = Instant::now();
    let mut changes = ctx.cluster.subscribe();
    let lm = ctx.metrics.runtime.controller("provisioner", 1);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = changes.changed() => {}
            _ = tokio::time::sleep(Duration::from_millis(100)) => {}
        }
        if !ctx.is_leader() {
            continue;
        }
        let provisionable: Vec<Arc<StoredPod>> = ctx
            .cluster
            .pods
            .all()
            .into_iter()
            .filter(|p| pods::is_provisionable(&**p))
            .collect();
        // When the provisioner first saw each pod pending (upstream's pod "ack").
        let keys: Vec<String> = provisionable.iter().map(|p| p.key()).collect();
        ctx.metrics
            .pods
            .ack(keys.iter().map(String::as_str), ctx.clock.now());
        let mut pending: Vec<String> = provisionable
            .iter()
            .filter_map(|p| p.metadata.uid.clone())
            .collect();
        // Buffers trigger rounds too, as upstream's buffer controller triggers the provisioner.
        if ctx.options.feature_gates.capacity_buffer {
            pending.extend(
                ctx.buffers
                    .virtual_pods()
                    .iter()
                    .filter_map(|p| p.metadata.uid.clone()),
            );
        }
        if !batcher.observe(origin.elapsed(), pending.iter().map(String::as_str)) {
            continue;
        }
        let started = Instant::now();
        let result = provision(&ctx).await;
        lm.singleton_pass(started.elapsed());
        ctx.metrics.reconciled_in(
            "provisioner",
            result.is_ok(),
            started.elapsed().as_secs_f64(),
        );
        match result {
            Ok(_) => {}
            Err(Error::NotSynced(why)) => {
                tracing::debug!(reason = %why, "waiting for cluster state before provisioning");
                batcher.retry(origin.elapsed());
            }
            Err(e) => {
                tracing::error!(error = %e, "provisioning failed, retrying");
                batcher.retry(origin.elapsed());
            }
        }
    }
}
