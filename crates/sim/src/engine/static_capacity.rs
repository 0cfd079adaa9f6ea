//! Static capacity in the simulator (the `StaticCapacity` gate): every second, as the
//! controller's loop, each static NodePool is brought to its replicas through the core's
//! decision — launches for the missing NodeClaims, drains for the surplus ones.

use k8s_openapi::api::core::v1::Taint;
use karpenter_api::labels::DISRUPTED_TAINT_KEY;
use karpenter_core::provisioning::static_capacity::{self, Action};

use super::Simulation;
use super::disruption::EPOCH;

impl Simulation {
    pub(super) fn static_capacity(&mut self) {
        if !self.feature_gates.static_capacity {
            return;
        }
        let pools: Vec<_> = self
            .pool_inputs()
            .into_iter()
            .filter(|p| static_capacity::is_static(&p.node_pool))
            .collect();
        if pools.is_empty() {
            return;
        }
        let objects = self.objects();
        let now = EPOCH + self.now as i64;
        let decided: Vec<(usize, Action)> = pools
            .iter()
            .enumerate()
            .map(|(i, p)| (i, objects.static_capacity(&p.node_pool, now)))
            .collect();
        drop(objects);
        for (i, action) in decided {
            let pool = &pools[i];
            match action {
                Action::None => {}
                Action::NodeLimitReached => {}
                Action::Create(n) => {
                    let Some(claim) =
                        static_capacity::node_claim(pool, &self.catalog.provider_labels)
                    else {
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
