//! The simulator's rounds: the core's [`decide`] over the snapshot of the simulated cluster,
//! with the parts the simulated loops have due — the same composition as the controller's.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use karpenter_core::round::{BufferHolding, Disrupt, Parts, RoundInputs, RoundPlan, decide};
use karpenter_core::state::{ClusterObjects, Snapshot};
use karpenter_planner::Plan;
use serde_json::{Value, json};

use super::Simulation;
use super::disruption::EPOCH;

/// A provisioning round or a disruption decision of the simulator, with the cluster it was
/// made on — what `plan` must decide the same on.
#[derive(Clone, Debug)]
pub struct Decided {
    /// When, in simulated seconds.
    pub t_s: u64,
    /// When, in Unix seconds (what `plan` takes as now).
    pub now: i64,
    /// The cluster as a dump `plan -f` reads: a JSON `List` of the objects the round read and
    /// the NodePools.
    pub dump: String,
    /// What the simulator decided, as `plan` reports it.
    pub plan: Plan,
    /// Provisioning was decided.
    pub provisioning: bool,
    /// Disruption decided afresh.
    pub disruption: bool,
    /// The simulated controller held nominations or commands in flight, which a dump does not
    /// carry.
    pub controller_memory: bool,
}

impl Simulation {
    /// Wall time now: virtual second 0 is [`EPOCH`].
    pub(super) fn wall_now(&self) -> Timestamp {
        self.wall_at(self.now)
    }

    /// Wall time at virtual second `t`.
    pub(super) fn wall_at(&self, t: u64) -> Timestamp {
        Timestamp::from_second(EPOCH + t as i64).unwrap_or(Timestamp::UNIX_EPOCH)
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
        let deciding = matches!(parts.disruption, Disrupt::Decide);
        if let Some(recorded) = &self.recorded
            && (parts.provisioning || deciding)
        {
            let reported = Plan::from_round(&snapshot, &plan, &pools, self.pools.len(), 0);
            recorded.borrow_mut().push(Decided {
                t_s: self.now,
                now: EPOCH + self.now as i64,
                dump: self.dump(&objects),
                plan: reported,
                provisioning: parts.provisioning,
                disruption: deciding,
                controller_memory: !objects.nominated.is_empty()
                    || !objects.marked_for_deletion.is_empty(),
            });
        }
        report(&snapshot, plan)
    }

    /// `objects` and the NodePools as one `List`, as `kubectl get -o json` prints it.
    fn dump(&self, objects: &ClusterObjects<Pod>) -> String {
        fn value(item: &impl serde::Serialize) -> Value {
            serde_json::to_value(item).expect("API objects serialize")
        }
        fn all<T: serde::Serialize>(items: &[Arc<T>]) -> impl Iterator<Item = Value> + '_ {
            items.iter().map(|i| value(&**i))
        }
        let items: Vec<Value> = all(&objects.nodes)
            .chain(all(&objects.node_claims))
            .chain(objects.pods.iter().map(value))
            .chain(all(&objects.daemonsets))
            .chain(all(&objects.pdbs))
            .chain(all(&objects.namespaces))
            .chain(all(&objects.volume_claims))
            .chain(all(&objects.volumes))
            .chain(all(&objects.storage_classes))
            .chain(all(&objects.csi_nodes))
            .chain(self.pools.values().map(value))
            .collect();
        json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string()
    }
}
