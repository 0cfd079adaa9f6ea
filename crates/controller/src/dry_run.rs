//! What the controller would do now, computed by its own provisioning and disruption code over
//! state listed once, with nothing written: `karpenter-rs plan` against a live cluster.

use karpenter_core::disruption::Decision;
use karpenter_core::provisioning::scheduling::NodePoolInput;

use crate::cloudprovider::CloudProvider;
use crate::provisioning::{Scheduled, schedule};
use crate::{Context, Error, disruption};

/// The decisions of one provisioning round and one disruption pass.
pub struct DryRun {
    /// What provisioning would launch, and where pending pods would go.
    pub provisioning: Scheduled,
    /// What disruption would start, and why the other nodes stay.
    pub disruption: Decision,
    /// The NodePools disruption saw: provisioning's and the static ones.
    pub pools: Vec<NodePoolInput>,
}

/// Lists the cluster into `ctx`'s state and decides as the loops would.
pub async fn dry_run<P: CloudProvider>(ctx: &Context<P>) -> Result<DryRun, Error> {
    ctx.cluster.list(&ctx.client).await?;
    if ctx.options.feature_gates.capacity_buffer {
        crate::capacity_buffer::read(ctx).await?;
    }
    let provisioning = schedule(ctx).await?;
    if ctx.options.feature_gates.capacity_buffer {
        crate::capacity_buffer::note_round(ctx, &provisioning.results, &provisioning.batch);
    }
    // Disruption sees the static NodePools too, as its loop does.
    let pools = crate::static_capacity::with_static_pools(ctx, provisioning.pools.clone()).await;
    let disruption = disruption::decision(ctx, &pools);
    Ok(DryRun {
        provisioning,
        disruption,
        pools,
    })
}
