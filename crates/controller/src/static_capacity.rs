//! Static capacity (the `StaticCapacity` gate): every static NodePool (`spec.replicas`) is
//! kept at exactly its replicas, whatever the pods need, as upstream's `static.provisioning`
//! and `static.deprovisioning` controllers do. The decisions are
//! `karpenter_core::provisioning::static_capacity`'s; this loop reads cluster state, creates
//! the NodeClaims they ask for (built by `node_claim_for`, as provisioning builds them) and
//! deletes the surplus ones (termination drains them).

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use karpenter_api::{NodeClaim, NodePool};
use karpenter_core::provisioning::node_claim_for;
use karpenter_core::provisioning::scheduling::NodePoolInput;
use karpenter_core::provisioning::static_capacity::{self, Action};
use kube::api::{DeleteParams, PostParams};
use kube::{Api, ResourceExt};

use crate::cloudprovider::CloudProvider;
use crate::{Context, Error};

/// Upstream requeues a static NodePool every minute even without a change.
const RESYNC: Duration = Duration::from_secs(60);

/// What one pass did, by NodeClaim name.
#[derive(Debug, Default, PartialEq)]
pub struct Reconciled {
    /// NodeClaims created.
    pub created: Vec<String>,
    /// NodeClaims deleted.
    pub deleted: Vec<String>,
}

/// The static NodePool `pool` with its instance types (overlaid when `NodeOverlay` is on), as
/// the scheduler would see it.
async fn pool_input<P: CloudProvider>(ctx: &Context<P>, pool: &NodePool) -> Option<NodePoolInput> {
    let types = match ctx
        .call("get_instance_types", ctx.provider.instance_types(pool))
        .await
    {
        Ok(types) => types,
        Err(e) => {
            tracing::warn!(nodepool = pool.name_any(), error = %e, "static nodepool: no instance types");
            return None;
        }
    };
    let input = NodePoolInput {
        node_pool: pool.clone(),
        instance_types: types,
    };
    if !ctx.options.feature_gates.node_overlay {
        return Some(input);
    }
    crate::nodeoverlay::overlaid(ctx, vec![input])
        .await
        .and_then(|(pools, _)| pools.into_iter().next())
}

/// One pass over every static NodePool.
pub async fn reconcile<P: CloudProvider>(ctx: &Context<P>) -> Result<Reconciled, Error> {
    // As upstream: never count NodeClaims before state holds them all, or a restart would
    // create a second set.
    if !ctx.cluster.synced() {
        return Err(Error::NotSynced("cluster state".into()));
    }
    let marked = ctx.cluster.marked_for_deletion();
    let claims = ctx.cluster.node_claims.all();
    let refs: Vec<&NodeClaim> = claims.iter().map(|c| &**c).collect();
    let pods_on = |node: &str| -> Vec<Pod> {
        ctx.cluster
            .pods_on(node)
            .iter()
            .map(|p| p.to_pod())
            .collect()
    };
    let now = ctx.clock.now();
    let mut done = Reconciled::default();
    let mut failed = None;
    for pool in ctx.cluster.node_pools.all() {
        let result = match static_capacity::decide(&pool, &refs, &marked, &pods_on, now) {
            Action::None => Ok(()),
            Action::NodeLimitReached => {
                tracing::info!(nodepool = pool.name_any(), "nodepool node limit reached");
                Ok(())
            }
            Action::Create(n) => scale_up(ctx, &pool, n, &mut done).await,
            Action::Delete(names) => scale_down(ctx, &pool, names, &mut done).await,
        };
        if let Err(e) = result {
            tracing::error!(nodepool = pool.name_any(), error = %e, "static capacity");
            failed.get_or_insert(e);
        }
    }
    match failed {
        Some(e) => Err(e),
        None => Ok(done),
    }
}

async fn scale_up<P: CloudProvider>(
    ctx: &Context<P>,
    pool: &NodePool,
    count: usize,
    done: &mut Reconciled,
) -> Result<(), Error> {
    let Some(input) = pool_input(ctx, pool).await else {
        return Ok(());
    };
    let provider_labels = ctx.provider.provider_labels();
    let Some(claim) = static_capacity::node_claim(&input, &provider_labels) else {
        tracing::warn!(
            nodepool = pool.name_any(),
            "static nodepool: no instance type can launch for it"
        );
        return Ok(());
    };
    tracing::info!(
        nodepool = pool.name_any(),
        desired = pool.spec.replicas,
        provision_count = count,
        "provisioning nodeclaims to satisfy replica count"
    );
    let api: Api<NodeClaim> = Api::all(ctx.client.clone());
    let object = node_claim_for(&claim, &input.node_pool);
    for _ in 0..count {
        let made = api.create(&PostParams::default(), &object).await?;
        let name = made.name_any();
        ctx.cluster.node_claims.apply(made);
        ctx.metrics
            .nodeclaims_created
            .with(&["provisioned", &claim.node_pool, "false"])
            .inc();
        tracing::info!(nodeclaim = %name, nodepool = %claim.node_pool, "created nodeclaim");
        done.created.push(name);
    }
    Ok(())
}

async fn scale_down<P: CloudProvider>(
    ctx: &Context<P>,
    pool: &NodePool,
    going: Vec<String>,
    done: &mut Reconciled,
) -> Result<(), Error> {
    tracing::info!(
        nodepool = pool.name_any(),
        desired = pool.spec.replicas,
        deprovision_count = going.len(),
        "deprovisioning nodeclaims to satisfy replica count"
    );
    let api: Api<NodeClaim> = Api::all(ctx.client.clone());
    for name in going {
        match api.delete(&name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => return Err(e.into()),
        }
        tracing::info!(nodeclaim = %name, nodepool = pool.name_any(), "deleting nodeclaim");
        done.deleted.push(name);
    }
    Ok(())
}

/// Runs static capacity until `shutdown`: on every change of cluster state, and every minute.
pub async fn run<P: CloudProvider>(
    ctx: Arc<Context<P>>,
    shutdown: tokio_util::sync::CancellationToken,
) {
    let mut changes = ctx.cluster.subscribe();
    let lm = ctx.metrics.runtime.controller("static.provisioning", 1);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = changes.changed() => {}
            _ = tokio::time::sleep(RESYNC) => {}
        }
        if !ctx.is_leader() {
            continue;
        }
        let started = tokio::time::Instant::now();
        let result = reconcile(&ctx).await;
        lm.singleton_pass(started.elapsed());
        ctx.metrics
            .reconciled("static.provisioning", result.is_ok());
        match result {
            Ok(_) | Err(Error::NotSynced(_)) => {}
            Err(e) => tracing::warn!(error = %e, "static capacity, retrying"),
        }
    }
}
