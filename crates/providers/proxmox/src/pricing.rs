//! Prices of instance types by upstream's formula (`priceFromResources` in
//! `pkg/providers/instancetype/instancetype.go`). A Proxmox cluster bills nobody, so upstream
//! prices a VM as a stand-in for the electricity it draws: 0.025 per vCPU plus 0.001 per GB
//! (10^9 bytes) of memory, and a spot offering at half of that. Only the ratio between types
//! matters: Karpenter launches the cheapest type that fits, so the smallest VM wins.

use karpenter_api::labels::CAPACITY_TYPE_SPOT;
use karpenter_core::resources::Resources;

/// The price of one vCPU.
pub const CPU_PRICE: f64 = 0.025;
/// The price of one GB (10^9 bytes) of memory.
pub const MEMORY_PRICE_PER_GB: f64 = 0.001;
/// A spot offering's share of the on-demand price.
pub const SPOT_RATIO: f64 = 0.5;

/// The on-demand price of a VM with `capacity`: its CPU and memory by the constants above;
/// other resources (pods, storage, huge pages) cost nothing, as upstream has it.
pub fn on_demand(capacity: &Resources) -> f64 {
    let cores = capacity.cpu as f64 / 1000.0;
    let bytes = (capacity.memory / 1000) as f64;
    // Upstream's operation order (rate times bytes, then the unit), so the prices are its
    // floating-point values to the last bit.
    CPU_PRICE * cores + MEMORY_PRICE_PER_GB * bytes / 1e9
}

/// The price of an offering of `capacity_type`: spot at [`SPOT_RATIO`], anything else at the
/// on-demand price.
pub fn price(capacity: &Resources, capacity_type: &str) -> f64 {
    let price = on_demand(capacity);
    if capacity_type == CAPACITY_TYPE_SPOT {
        price * SPOT_RATIO
    } else {
        price
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prices_follow_upstreams_formula() {
        // (cpu, memory, on-demand): 0.025 × cores + 0.001 × bytes / 1e9.
        let cases = [
            ("1", "2Gi", 0.025 + 0.002_147_483_648),
            ("2", "8Gi", 0.05 + 0.008_589_934_592),
            ("16", "128Gi", 0.4 + 0.137_438_953_472),
            ("500m", "1G", 0.0125 + 0.001),
            ("0", "0", 0.0),
        ];
        for (cpu, memory, expected) in cases {
            let capacity = Resources::parse(&[("cpu", cpu), ("memory", memory)]);
            let got = on_demand(&capacity);
            assert!((got - expected).abs() < 1e-15, "{cpu} {memory}: {got}");
            assert_eq!(price(&capacity, "on-demand"), got);
            assert_eq!(price(&capacity, "reserved"), got);
            assert_eq!(price(&capacity, "spot"), got * 0.5);
        }
    }

    #[test]
    fn only_cpu_and_memory_cost() {
        let bare = Resources::parse(&[("cpu", "4"), ("memory", "16Gi")]);
        let full = Resources::parse(&[
            ("cpu", "4"),
            ("memory", "16Gi"),
            ("pods", "110"),
            ("ephemeral-storage", "30Gi"),
            ("hugepages-2Mi", "1Gi"),
        ]);
        assert_eq!(on_demand(&bare), on_demand(&full));
    }

    #[test]
    fn more_memory_per_vcpu_costs_more() {
        let price_of =
            |memory: &str| on_demand(&Resources::parse(&[("cpu", "2"), ("memory", memory)]));
        assert!(price_of("4Gi") < price_of("6Gi"));
        assert!(price_of("6Gi") < price_of("8Gi"));
        assert!(price_of("8Gi") < price_of("16Gi"));
    }
}
