//! The KWOK provider's instance types, by upstream's generator (`kwok/tools`): what the
//! provider launches and what the simulator's `kwok` catalog offers.

use karpenter_api::Operator;
use karpenter_api::labels::{
    ARCH_LABEL, CAPACITY_TYPE_LABEL, INSTANCE_TYPE_LABEL, OS_LABEL, ZONE_LABEL,
};

use karpenter_cloudprovider::{Catalog, InstanceType, Offering, Overhead, RepairPolicy};
use karpenter_core::resources::Resources;
use karpenter_core::scheduling::{Requirement, Requirements};

/// Labels the KWOK provider defines on its instance types.
pub const KWOK_LABELS: [&str; 4] = [
    "karpenter.kwok.sh/instance-size",
    "karpenter.kwok.sh/instance-family",
    "karpenter.kwok.sh/instance-cpu",
    "karpenter.kwok.sh/instance-memory",
];

/// The `kwok` catalog: the 144 instance types and the provider's labels.
pub fn catalog() -> Catalog {
    Catalog::new("kwok", instance_types(), &KWOK_LABELS).with_repair_policies(repair_policies())
}

/// Upstream's KWOK repair policies: a node not Ready for 10 minutes is replaced.
pub fn repair_policies() -> Vec<RepairPolicy> {
    let toleration = std::time::Duration::from_secs(10 * 60);
    vec![
        RepairPolicy::new("Ready", "False", toleration),
        RepairPolicy::new("Ready", "Unknown", toleration),
    ]
}

/// The KWOK provider's 144 instance types, by upstream's generator: 1–256 vCPU, families `c`,
/// `s` and `m` (2, 4 and 8 GiB per vCPU), Linux and Windows, amd64 and arm64, in four zones on
/// spot and on demand. On-demand costs 0.025 per vCPU plus 0.001 per GB; spot 70% of that.
pub fn instance_types() -> Vec<InstanceType> {
    let mut out = Vec::new();
    for cpu in [1i64, 2, 4, 8, 16, 32, 48, 64, 96, 128, 192, 256] {
        for (family, gib_per_cpu) in [("c", 2i64), ("s", 4), ("m", 8)] {
            for os in ["linux", "windows"] {
                for arch in ["amd64", "arm64"] {
                    let memory_gib = cpu * gib_per_cpu;
                    let name = format!("{family}-{cpu}x-{arch}-{os}");
                    let capacity = Resources::parse(&[
                        ("cpu", &cpu.to_string()),
                        ("memory", &format!("{memory_gib}Gi")),
                        ("pods", &(cpu * 16).clamp(0, 1024).to_string()),
                        ("ephemeral-storage", "20Gi"),
                    ]);
                    let on_demand = 0.025 * cpu as f64
                        + 0.001 * (memory_gib as f64 * (1u64 << 30) as f64) / 1e9;
                    let mut offerings = Vec::new();
                    for zone in ["test-zone-a", "test-zone-b", "test-zone-c", "test-zone-d"] {
                        offerings.push(Offering {
                            zone: zone.into(),
                            capacity_type: "spot".into(),
                            price: on_demand * 0.7,
                            available: true,
                            reservation: None,
                        });
                        offerings.push(Offering {
                            zone: zone.into(),
                            capacity_type: "on-demand".into(),
                            price: on_demand,
                            available: true,
                            reservation: None,
                        });
                    }
                    let requirements: Requirements = [
                        Requirement::new(INSTANCE_TYPE_LABEL, Operator::In, &[name.as_str()]),
                        Requirement::new(ARCH_LABEL, Operator::In, &[arch]),
                        Requirement::new(OS_LABEL, Operator::In, &[os]),
                        Requirement::new(
                            ZONE_LABEL,
                            Operator::In,
                            &["test-zone-a", "test-zone-b", "test-zone-c", "test-zone-d"],
                        ),
                        Requirement::new(CAPACITY_TYPE_LABEL, Operator::In, &["spot", "on-demand"]),
                        Requirement::new(KWOK_LABELS[0], Operator::In, &[cpu.to_string()]),
                        Requirement::new(KWOK_LABELS[1], Operator::In, &[family]),
                        Requirement::new(KWOK_LABELS[2], Operator::In, &[cpu.to_string()]),
                        Requirement::new(
                            KWOK_LABELS[3],
                            Operator::In,
                            &[(memory_gib * 1024).to_string()],
                        ),
                    ]
                    .into_iter()
                    .collect();
                    let overhead = Overhead {
                        kube_reserved: Resources::parse(&[("cpu", "100m"), ("memory", "10Mi")]),
                        ..Default::default()
                    };
                    out.push(InstanceType::new(
                        name,
                        requirements,
                        offerings,
                        capacity,
                        overhead,
                    ));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kwok_catalog_matches_upstreams_generator() {
        let types = instance_types();
        assert_eq!(types.len(), 144);
        assert_eq!(types[0].name, "c-1x-amd64-linux");
        assert_eq!(types.last().unwrap().name, "m-256x-arm64-windows");
        let c1 = &types[0];
        let od = c1
            .offerings
            .iter()
            .find(|o| o.capacity_type == "on-demand")
            .unwrap()
            .price;
        let spot = c1
            .offerings
            .iter()
            .find(|o| o.capacity_type == "spot")
            .unwrap()
            .price;
        assert!((od - 0.027147).abs() < 1e-6, "{od}");
        assert!((spot - 0.019003).abs() < 1e-6, "{spot}");
        assert_eq!(c1.offerings.len(), 8);
        assert_eq!(
            types
                .iter()
                .find(|t| t.name == "m-256x-amd64-linux")
                .unwrap()
                .capacity
                .get("pods"),
            1_024_000
        );
    }
}
