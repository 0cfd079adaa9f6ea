//! NodeOverlays in the controller (feature gate `NodeOverlay`): the overlays last listed, which
//! [`overlaid`] applies to the NodePools' instance types before every provisioning and
//! disruption decision (through `provisioning::pool_inputs`), and the loop [`run`] that keeps
//! that list current and writes each overlay's status as upstream's nodeoverlay controller
//! does: `ValidationSucceeded` (`False` with reason `RuntimeValidation` or `Conflict`) and
//! `Ready` over it.
//!
//! What an overlay does and when it conflicts is decided in
//! `karpenter_core::instancetype::overlay`, shared with the simulator and `plan`; [`status`]
//! is pure.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use karpenter_api::nodeoverlay::condition::{
    CONFLICT_MESSAGE, REASON_CONFLICT, REASON_RUNTIME_VALIDATION, VALIDATION_SUCCEEDED,
};
use karpenter_api::nodeoverlay::{NodeOverlay, NodeOverlayStatus};
use karpenter_cloudprovider::conditions::ConditionSet;
use karpenter_core::instancetype::overlay::{Evaluation, Outcome, apply_to_pools};
use karpenter_core::provisioning::scheduling::NodePoolInput;
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams};
use tokio_util::sync::CancellationToken;

use crate::cloudprovider::CloudProvider;
use crate::{Context, Error};

/// How often the overlays are listed and their statuses written. Upstream reacts to watch
/// events and re-evaluates every 6 h; a short poll of a small cluster-scoped list keeps this
/// module free of a watcher in cluster state.
pub const RESYNC: Duration = Duration::from_secs(10);

/// The parts `Ready` summarises.
const READY_DEPENDENTS: [&str; 1] = [VALIDATION_SUCCEEDED];

/// The NodeOverlays last listed (`None` until the first list), and, per NodePool, the last
/// evaluation of them that covered its instance types.
#[derive(Debug, Default)]
pub struct OverlayStore {
    overlays: RwLock<Option<Arc<Vec<NodeOverlay>>>>,
    evaluations: RwLock<HashMap<String, Arc<Evaluation>>>,
}

impl OverlayStore {
    /// The overlays last listed, if they have been.
    pub fn get(&self) -> Option<Arc<Vec<NodeOverlay>>> {
        self.overlays
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Replaces the overlays.
    pub fn set(&self, overlays: Vec<NodeOverlay>) {
        *self.overlays.write().unwrap_or_else(|e| e.into_inner()) = Some(Arc::new(overlays));
    }

    /// The last evaluation that covered `pool`: what the last decision about it overlaid its
    /// instance types with. Launches record from it, and overlay drift compares with it.
    pub fn evaluation(&self, pool: &str) -> Option<Arc<Evaluation>> {
        self.evaluations
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(pool)
            .cloned()
    }

    fn set_evaluation(&self, pools: &[NodePoolInput], eval: &Arc<Evaluation>) {
        let mut evaluations = self.evaluations.write().unwrap_or_else(|e| e.into_inner());
        for pool in pools {
            evaluations.insert(pool.node_pool.name().to_string(), eval.clone());
        }
    }
}

/// The status of `overlay` given what became of it, at `now`.
pub fn status(overlay: &NodeOverlay, outcome: &Outcome, now: Timestamp) -> NodeOverlayStatus {
    let mut next = overlay.status.clone().unwrap_or_default();
    let created = overlay
        .metadata
        .creation_timestamp
        .as_ref()
        .map_or(now, |t| t.0);
    let mut set = ConditionSet::new(
        &mut next.conditions,
        &READY_DEPENDENTS,
        overlay.metadata.generation,
        created,
        now,
    );
    match outcome {
        Outcome::Applied => set.set_true(VALIDATION_SUCCEEDED),
        Outcome::Invalid(message) => set.set(
            VALIDATION_SUCCEEDED,
            "False",
            REASON_RUNTIME_VALIDATION,
            message,
        ),
        Outcome::Conflict => set.set(
            VALIDATION_SUCCEEDED,
            "False",
            REASON_CONFLICT,
            CONFLICT_MESSAGE,
        ),
    }
    set.finish();
    next
}

async fn list(client: &kube::Client) -> Result<Vec<NodeOverlay>, Error> {
    let api: Api<NodeOverlay> = Api::all(client.clone());
    Ok(api.list(&ListParams::default()).await?.items)
}

/// `pools` with the overlays applied when the gate is on (listing them first if no pass of
/// [`run`] has yet, as `plan` from a live cluster does). `None` when they cannot be listed:
/// as upstream, no NodePool is used before the overlays have been evaluated.
pub(crate) async fn overlaid<P: CloudProvider>(
    ctx: &Context<P>,
    mut pools: Vec<NodePoolInput>,
) -> Option<(Vec<NodePoolInput>, Arc<Evaluation>)> {
    let overlays = match ctx.overlays.get() {
        Some(o) => o,
        None => match list(&ctx.client).await {
            Ok(o) => {
                ctx.overlays.set(o);
                ctx.overlays.get()?
            }
            Err(e) => {
                tracing::warn!(error = %e, "skipping nodepools, awaiting nodeoverlay evaluation");
                return None;
            }
        },
    };
    let eval = apply_to_pools(&overlays, &mut pools);
    let eval = Arc::new(eval);
    ctx.overlays.set_evaluation(&pools, &eval);
    Some((pools, eval))
}

async fn reconcile<P: CloudProvider>(ctx: &Context<P>) -> Result<(), Error> {
    ctx.overlays.set(list(&ctx.client).await?);
    if !ctx.is_leader() {
        return Ok(());
    }
    let pools = crate::provisioning::provider_pool_inputs(ctx).await;
    let Some((_, eval)) = overlaid(ctx, pools).await else {
        return Ok(());
    };
    let api: Api<NodeOverlay> = Api::all(ctx.client.clone());
    let now = ctx.clock.now();
    for overlay in ctx.overlays.get().iter().flat_map(|o| o.iter()) {
        let Some(outcome) = eval.outcomes.get(overlay.name()) else {
            continue;
        };
        let next = status(overlay, outcome, now);
        if overlay.status.as_ref() == Some(&next) {
            continue;
        }
        let patch = serde_json::json!({
            "metadata": {"resourceVersion": overlay.metadata.resource_version},
            "status": next,
        });
        match api
            .patch_status(
                overlay.name(),
                &PatchParams::default(),
                &Patch::Merge(patch),
            )
            .await
        {
            Ok(_) => {}
            // Deleted, or changed since listed: the next pass sees it as it is.
            Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => {}
            Err(e) => return Err(Error::Kube(e)),
        }
    }
    Ok(())
}

/// Lists the overlays and writes their statuses every [`RESYNC`] until `shutdown`; does
/// nothing while the `NodeOverlay` gate is off.
pub async fn run<P: CloudProvider>(ctx: Arc<Context<P>>, shutdown: CancellationToken) {
    if !ctx.options.feature_gates.node_overlay {
        shutdown.cancelled().await;
        return;
    }
    let lm = ctx.metrics.runtime.controller("nodeoverlay", 1);
    loop {
        let started = tokio::time::Instant::now();
        let result = reconcile(&ctx).await;
        lm.singleton_pass(started.elapsed());
        ctx.metrics.reconciled("nodeoverlay", result.is_ok());
        if let Err(e) = result {
            tracing::warn!(error = %e, "nodeoverlay status");
        }
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(ctx.options.overlay_poll) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn overlay() -> NodeOverlay {
        serde_json::from_value(json!({
            "metadata": {"name": "o", "generation": 2},
            "spec": {"requirements": []},
        }))
        .unwrap()
    }

    fn condition<'a>(s: &'a NodeOverlayStatus, type_: &str) -> (&'a str, &'a str) {
        let c = s.conditions.iter().find(|c| c.type_ == type_).unwrap();
        (c.status.as_str(), c.reason.as_str())
    }

    #[test]
    fn status_table() {
        let now = Timestamp::UNIX_EPOCH;
        // (outcome, ValidationSucceeded, its reason, Ready)
        let cases = [
            (Outcome::Applied, "True", VALIDATION_SUCCEEDED, "True"),
            (Outcome::Conflict, "False", REASON_CONFLICT, "False"),
            (
                Outcome::Invalid("spec.capacity[cpu]: restricted".into()),
                "False",
                REASON_RUNTIME_VALIDATION,
                "False",
            ),
        ];
        for (outcome, status_, reason, ready) in cases {
            let s = status(&overlay(), &outcome, now);
            assert_eq!(
                condition(&s, VALIDATION_SUCCEEDED),
                (status_, reason),
                "{outcome:?}"
            );
            assert_eq!(condition(&s, "Ready").0, ready, "{outcome:?}");
            let c = s
                .conditions
                .iter()
                .find(|c| c.type_ == VALIDATION_SUCCEEDED)
                .unwrap();
            assert_eq!(c.observed_generation, Some(2));
        }
        let s = status(&overlay(), &Outcome::Conflict, now);
        let c = s
            .conditions
            .iter()
            .find(|c| c.type_ == VALIDATION_SUCCEEDED)
            .unwrap();
        assert_eq!(c.message, CONFLICT_MESSAGE);
    }

    #[test]
    fn an_unchanged_outcome_writes_nothing_new() {
        let now = Timestamp::UNIX_EPOCH;
        let mut o = overlay();
        o.status = Some(status(&o, &Outcome::Applied, now));
        let later = Timestamp::from_second(60).unwrap();
        assert_eq!(o.status, Some(status(&o, &Outcome::Applied, later)));
    }
}
