//! What the controller would do now, computed by its own round over state listed once, with
//! nothing written: `karpenter-rs plan` against a live cluster.

use std::sync::Arc;

use karpenter_core::provisioning::scheduling::NodePoolInput;
use karpenter_core::round::{Parts, RoundPlan};
use karpenter_core::state::Snapshot;

use crate::cloudprovider::CloudProvider;
use crate::state::StoredPod;
use crate::{Context, Error};

/// Lists the cluster into `ctx`'s state, decides every part of a round as the loops would
/// (disruption deciding afresh), and hands the snapshot and the plan to `report`.
pub async fn dry_run<P: CloudProvider, T>(
    ctx: &Context<P>,
    report: impl FnOnce(
        &Snapshot<'_, Arc<StoredPod>>,
        RoundPlan<'_, Arc<StoredPod>>,
        &[NodePoolInput],
    ) -> T,
) -> Result<T, Error> {
    ctx.cluster.list(&ctx.client).await?;
    if ctx.options.feature_gates.capacity_buffer {
        crate::capacity_buffer::read(ctx).await?;
    }
    let pools = crate::provisioning::pool_inputs(ctx).await;
    crate::provisioning::round(ctx, &pools, Parts::ALL, |snapshot, plan| {
        report(snapshot, plan, &pools)
    })
    .await
}
