//! Node repair (upstream's `node.health` controller, feature gate `NodeRepair`): every pass
//! looks at each node with a NodeClaim, and one that has failed one of the provider's repair
//! policies for longer than its toleration has its NodeClaim annotated with a termination
//! deadline of now and deleted — budgets, PDBs and `karpenter.sh/do-not-disrupt` do not hold
//! it back — unless the circuit breaker is open (more than 20% of its NodePool's nodes, or of
//! the cluster's for a NodeClaim without a NodePool, unhealthy); then the node gets a
//! `NodeRepairBlocked` event. The decision is `karpenter_core::disruption::repair`'s.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use karpenter_api::NodeClaim;
use karpenter_api::labels::{
    CAPACITY_TYPE_LABEL, NODE_CLAIM_TERMINATION_TIMESTAMP_ANNOTATION, NODE_POOL_LABEL,
};
use karpenter_core::disruption::repair::{self, Repair, Scope};
use karpenter_core::instancetype::RepairPolicy;
use kube::ResourceExt;
use kube::api::DeleteParams;
use serde_json::json;

use crate::cloudprovider::CloudProvider;
use crate::events::catalog;
use crate::{Context, Error};

/// How often every node is looked at (the default of `Options::repair_poll`). Upstream reconciles on node condition changes and
/// requeues at the end of each toleration; a pass this often acts within seconds of either.
pub const POLL: Duration = Duration::from_secs(10);

/// What one pass did.
#[derive(Debug, Default, PartialEq)]
pub struct Reconciled {
    /// NodeClaims deleted, with the condition their node failed.
    pub repaired: Vec<(String, String)>,
    /// Nodes due for repair that the circuit breaker held back.
    pub blocked: Vec<String>,
}

/// One pass over every node.
pub async fn reconcile<P: CloudProvider>(
    ctx: &Context<P>,
    policies: &[RepairPolicy],
) -> Result<Reconciled, Error> {
    if !ctx.cluster.synced() {
        return Err(Error::NotSynced("cluster state".into()));
    }
    let mut done = Reconciled::default();
    let nodes = ctx.cluster.nodes.all();
    let claims = ctx.cluster.node_claims.all();
    let node_refs: Vec<&Node> = nodes.iter().map(|n| &**n).collect();
    let claim_refs: Vec<&NodeClaim> = claims.iter().map(|c| &**c).collect();
    for judged in repair::judge_all(&node_refs, &claim_refs, policies, ctx.clock.now()) {
        let (node, claim) = (judged.node, judged.claim);
        match judged.repair {
            Repair::Healthy | Repair::Tolerated { .. } => {}
            Repair::Blocked { scope } => {
                blocked(ctx, node, scope).await;
                done.blocked.push(node.name_any());
            }
            Repair::Repair { policy } => {
                if force(ctx, node, claim, policy).await? {
                    done.repaired
                        .push((claim.name_any(), policy.condition_type.to_string()));
                }
            }
        }
    }
    Ok(done)
}

/// Publishes `NodeRepairBlocked` on the node. Upstream publishes nothing for a NodePool that
/// is gone.
async fn blocked<P: CloudProvider>(ctx: &Context<P>, node: &Node, scope: Scope<'_>) {
    if let Scope::NodePool(pool) = scope
        && ctx.cluster.node_pools.get(pool).is_none()
    {
        return;
    }
    tracing::info!(node = %node.name_any(), message = scope.blocked_message(), "node repair blocked");
    let uid = node.uid().unwrap_or_default();
    ctx.recorder
        .publish(
            node,
            catalog::node_repair_blocked(&uid, scope.blocked_message()),
        )
        .await;
}

/// Sets the claim's termination deadline to now and deletes it (unless it is already
/// deleting). Whether it deleted.
async fn force<P: CloudProvider>(
    ctx: &Context<P>,
    node: &Node,
    claim: &NodeClaim,
    policy: &RepairPolicy,
) -> Result<bool, Error> {
    let name = claim.name_any();
    let existing = claim
        .annotations()
        .get(NODE_CLAIM_TERMINATION_TIMESTAMP_ANNOTATION)
        .map(String::as_str);
    if let Some(at) = repair::termination_timestamp(existing, ctx.clock.now()) {
        let patch =
            json!({"metadata": {"annotations": {NODE_CLAIM_TERMINATION_TIMESTAMP_ANNOTATION: at}}});
        match ctx.patch_claim(&name, patch).await {
            Err(Error::Kube(kube::Error::Api(e))) if e.code == 404 => return Ok(false),
            other => other?,
        }
        tracing::info!(nodeclaim = %name, termination_timestamp = %at, "annotated nodeclaim");
    }
    if claim.metadata.deletion_timestamp.is_some() {
        return Ok(false);
    }
    let params = DeleteParams {
        preconditions: Some(kube::api::Preconditions {
            uid: claim.uid(),
            resource_version: None,
        }),
        ..Default::default()
    };
    ctx.delete_claim(&name, &params).await?;
    tracing::info!(nodeclaim = %name, node = %node.name_any(), condition = policy.condition_type, "deleting unhealthy node");
    let node_name = node.name_any();
    let pods = ctx.cluster.pods_on(&node_name);
    ctx.metrics.disrupted(claim, "unhealthy", "", Some(&pods));
    let label = |key: &str| node.labels().get(key).cloned().unwrap_or_default();
    let image_id = claim
        .status
        .as_ref()
        .and_then(|s| s.image_id.clone())
        .unwrap_or_default();
    ctx.metrics
        .nodeclaims_unhealthy_disrupted
        .with(&[
            &repair::snake_case(policy.condition_type),
            &label(NODE_POOL_LABEL),
            &label(CAPACITY_TYPE_LABEL),
            &image_id,
        ])
        .inc();
    Ok(true)
}

/// Runs [`reconcile`] every `repair_poll` while leading. Started only with the `NodeRepair` gate
/// on and a provider that declares policies, as upstream.
pub async fn run<P: CloudProvider>(
    ctx: Arc<Context<P>>,
    shutdown: tokio_util::sync::CancellationToken,
) {
    let policies = ctx.provider.repair_policies();
    let lm = ctx.metrics.runtime.controller("node.health", 1);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(ctx.options.repair_poll) => {}
        }
        if !ctx.is_leader() {
            continue;
        }
        let started = tokio::time::Instant::now();
        let result = reconcile(&ctx, &policies).await;
        lm.singleton_pass(started.elapsed());
        ctx.metrics.reconciled("node.health", result.is_ok());
        match result {
            Ok(_) | Err(Error::NotSynced(_)) => {}
            Err(e) => tracing::warn!(error = %e, "node repair"),
        }
    }
}
