//! The simulator's `aws` catalog: EC2 instance types in us-east-1 resolved by the provider's
//! own code (AL2023 defaults, a subnet in every zone), so the simulator's nodes are the ones
//! the provider would launch. The embedded data has no spot prices, so only on-demand is
//! offered.

use std::time::Duration;

use karpenter_cloudprovider::{Catalog, RepairPolicy};

use crate::instancetype::{
    self, AWS_LABELS, CATALOG_REGION, LABEL_CAPACITY_RESERVATION_ID, NodeClassSettings, ZoneInfo,
};
use crate::pricing::Pricing;

/// The `aws` catalog.
pub fn catalog() -> Catalog {
    let catalog = instancetype::catalog();
    let mut zones: Vec<&String> = catalog.zones.values().flatten().collect();
    zones.sort();
    zones.dedup();
    let subnets: Vec<ZoneInfo> = zones
        .into_iter()
        .map(|z| ZoneInfo {
            zone: z.clone(),
            zone_id: None,
        })
        .collect();
    let settings = NodeClassSettings::default();
    let pricing = Pricing::embedded();
    let types = catalog.types.iter().filter_map(|info| {
        instancetype::resolve(
            info,
            CATALOG_REGION,
            &catalog.zones[&info.name],
            &subnets,
            &settings,
            &pricing,
            &|_, _, _| false,
        )
    });
    Catalog::new("aws", types, &AWS_LABELS)
        .with_repair_policies(repair_policies())
        .with_reservation_label(LABEL_CAPACITY_RESERVATION_ID)
}

/// Upstream's AWS repair policies: not Ready for 30 minutes, or an accelerator, storage,
/// network, kernel or container runtime problem reported by the node monitoring agent. The
/// provider declares them, and the simulator's `aws` catalog carries them.
pub fn repair_policies() -> Vec<RepairPolicy> {
    let minutes = |m: u64| Duration::from_secs(m * 60);
    vec![
        RepairPolicy::new("Ready", "False", minutes(30)),
        RepairPolicy::new("Ready", "Unknown", minutes(30)),
        RepairPolicy::new("AcceleratedHardwareReady", "False", minutes(10)),
        RepairPolicy::new("StorageReady", "False", minutes(30)),
        RepairPolicy::new("NetworkingReady", "False", minutes(30)),
        RepairPolicy::new("KernelReady", "False", minutes(30)),
        RepairPolicy::new("ContainerRuntimeReady", "False", minutes(30)),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: i64 = 1 << 20;

    #[test]
    fn matches_karpenters_published_allocatable() {
        let catalog = catalog();
        let types = &catalog.instance_types;
        assert!(types.len() > 1300, "{}", types.len());
        // Upstream's worked example: m5.large allocatable 1930m CPU, 6903Mi memory, 29 pods.
        let m5 = types
            .iter()
            .find(|t| t.name == "m5.large")
            .expect("m5.large");
        assert_eq!(m5.allocatable().cpu, 1930);
        assert_eq!(m5.allocatable().memory, 6903 * MIB * 1000);
        assert_eq!(m5.allocatable().pods, 29_000);
        assert!(
            m5.requirements
                .allows("karpenter.k8s.aws/instance-family", "m5")
        );
        assert!(
            m5.offerings
                .iter()
                .all(|o| o.capacity_type == "on-demand" && o.zone.starts_with("us-east-1"))
        );
        let gpu = types
            .iter()
            .find(|t| t.capacity.get("nvidia.com/gpu") > 0)
            .expect("a GPU type");
        assert!(
            gpu.requirements
                .get("karpenter.k8s.aws/instance-gpu-name")
                .is_some()
        );
    }
}
