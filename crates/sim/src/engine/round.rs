//! The simulator's rounds: the core's [`decide`] over the snapshot of the simulated cluster,
//! with the parts the simulated loops have due — the same composition as the controller's.

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use karpenter_core::round::{BufferHolding, Parts, RoundInputs, RoundPlan, decide};
use karpenter_core::state::Snapshot;

use super::Simulation;
use super::disruption::EPOCH;

impl Simulation {
    /// Wall time now: virtual second 0 is [`EPOCH`].
    pub(super) fn wall_now(&self) -> Timestamp {
        Timestamp::from_second(EPOCH + self.now as i64).unwrap_or(Timestamp::UNIX_EPOCH)
    }

    /// Runs `report` over the snapshot of the cluster now and the round `parts` decide on it.
    pub(super) fn round<T>(
        &self,
        parts: Parts<'_>,
        report: impl FnOnce(&Snapshot<'_, Pod>, RoundPlan<'_, Pod>) -> T,
    ) -> T {
        let pools = self.pool_inputs();
        let objects = self.objects();
        let options = self.options();
        let snapshot = objects.snapshot(&pools, &self.catalog.provider_labels);
        let never = || false;
        let plan = decide(
            &snapshot,
            &RoundInputs {
                gates: self.feature_gates,
                now: self.wall_now(),
                options: &options,
                virtual_pods: self.buffers.virtual_pods(),
                buffer_holding: BufferHolding::Placed(self.buffers.placed()),
                repair_policies: &self.catalog.repair_policies,
                parts,
                interrupt: &never,
            },
        );
        report(&snapshot, plan)
    }
}
