//! Garbage collection, as upstream's `nodeclaim/garbagecollection` plus the providers' leaked
//! instance sweep: instances nobody claims are terminated (never leak a cloud instance), and
//! registered NodeClaims whose instance vanished are deleted.

use std::collections::HashSet;
use std::sync::Arc;

use karpenter_api::nodeclaim::condition::REGISTERED;
use karpenter_core::state::node_ready;
use kube::ResourceExt;

use crate::cloudprovider::{CloudProvider, CloudProviderError};
use crate::{Context, Error, conditions};

/// What one collection did.
#[derive(Debug, Default, PartialEq)]
pub struct Collected {
    /// Instances terminated because no NodeClaim claims them.
    pub instances: Vec<String>,
    /// NodeClaims deleted because their instance is gone.
    pub node_claims: Vec<String>,
}

/// One collection.
pub async fn collect<P: CloudProvider>(ctx: &Context<P>) -> Result<Collected, Error> {
    if !ctx.cluster.synced() {
        return Err(Error::NotSynced("cluster state".into()));
    }
    let instances = ctx
        .call("list", ctx.provider.list())
        .await
        .map_err(Error::Cloud)?;
    let claims = ctx.cluster.node_claims.all();
    let claimed_ids: HashSet<String> = claims
        .iter()
        .filter_map(|c| c.status.as_ref()?.provider_id.clone())
        .collect();
    let claim_names: HashSet<String> = claims.iter().map(|c| c.name_any()).collect();
    let now = ctx.clock.now();
    let mut collected = Collected::default();
    for instance in &instances {
        let id = instance
            .status
            .as_ref()
            .and_then(|s| s.provider_id.clone())
            .unwrap_or_default();
        let young = instance
            .metadata
            .creation_timestamp
            .as_ref()
            .is_some_and(|t| {
                now.duration_since(t.0).as_secs()
                    < ctx.options.instance_launch_grace.as_secs() as i64
            });
        if claimed_ids.contains(&id) || claim_names.contains(&instance.name_any()) || young {
            continue;
        }
        match ctx.call("delete", ctx.provider.delete(instance)).await {
            Ok(()) | Err(CloudProviderError::NotFound(_)) => {
                tracing::info!(provider_id = %id, "terminated an instance no nodeclaim claims");
                collected.instances.push(id);
            }
            Err(e) => tracing::warn!(provider_id = %id, error = %e, "garbage collecting instance"),
        }
    }
    let live: HashSet<String> = instances
        .iter()
        .filter_map(|i| i.status.as_ref()?.provider_id.clone())
        .collect();
    for claim in &claims {
        let Some(id) = claim.status.as_ref().and_then(|s| s.provider_id.clone()) else {
            continue;
        };
        let registered = claim
            .status
            .as_ref()
            .is_some_and(|s| conditions::is_true(&s.conditions, REGISTERED));
        let node_ready = ctx
            .cluster
            .node_for_provider_id(&id)
            .is_some_and(|n| node_ready(&n));
        if !registered
            || claim.metadata.deletion_timestamp.is_some()
            || live.contains(&id)
            || node_ready
        {
            continue;
        }
        ctx.delete_claim(&claim.name_any(), &Default::default())
            .await?;
        let node = claim.status.as_ref().and_then(|s| s.node_name.clone());
        let pods = node.map(|n| ctx.cluster.pods_on(&n)).unwrap_or_default();
        ctx.metrics
            .disrupted(claim, "garbage_collected", "", Some(&pods));
        tracing::info!(nodeclaim = %claim.name_any(), "deleting nodeclaim whose instance is gone");
        collected.node_claims.push(claim.name_any());
    }
    Ok(collected)
}

/// Collects every `garbage_collection_interval` until `shutdown`.
pub async fn run<P: CloudProvider>(
    ctx: Arc<Context<P>>,
    shutdown: tokio_util::sync::CancellationToken,
) {
    let lm = ctx
        .metrics
        .runtime
        .controller("nodeclaim.garbagecollection", 1);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(ctx.options.garbage_collection_interval) => {}
        }
        if !ctx.is_leader() {
            continue;
        }
        let started = tokio::time::Instant::now();
        let result = collect(&ctx).await;
        lm.singleton_pass(started.elapsed());
        ctx.metrics
            .reconciled("nodeclaim.garbagecollection", result.is_ok());
        if let Err(e) = result {
            tracing::warn!(error = %e, "garbage collection");
        }
    }
}
