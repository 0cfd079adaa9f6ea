//! Static capacity in the simulator (the `StaticCapacity` gate): every second, as the
//! controller's loop, each static NodePool is brought to its replicas through the core's
//! decision — launches for the missing NodeClaims, drains for the surplus ones.

use k8s_openapi::api::core::v1::Taint;
use karpenter_api::labels::DISRUPTED_TAINT_KEY;
use karpenter_core::provisioning::static_capacity::{self, Action};
use karpenter_core::round::Parts;

use super::Simulation;

impl Simulation {
    pub(super) fn static_capacity(&mut self) {
        // Nothing for the round to decide: skip building the snapshot.
        if !self.feature_gates.static_capacity
            || !self.pools.values().any(static_capacity::is_static)
        {
            return;
        }
        let parts = Parts {
            static_capacity: true,
            ..Parts::NONE
        };
        let decided = self.round(parts, |_, plan| plan.static_capacity);
        for planned in decided {
            match planned.action {
                Action::None => {}
                Action::NodeLimitReached => {}
                Action::Create(n) => {
                    let Some(claim) = planned.node_claim else {
                        continue;
                    };
                    for _ in 0..n {
                        self.launch(&claim, "static");
                    }
                }
                Action::Delete(names) => {
                    for name in names {
                        let Some(n) = self.node_index(&name) else {
                            continue;
                        };
                        // Deleting the NodeClaim: termination taints and drains the node.
                        self.nodes[n].taints.push(Taint {
                            key: DISRUPTED_TAINT_KEY.into(),
                            effect: "NoSchedule".into(),
                            ..Default::default()
                        });
                        self.start_drain(n);
                        self.event("Overprovisioned", format!("node/{name}"));
                    }
                }
            }
        }
    }
}
