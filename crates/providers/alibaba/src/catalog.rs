//! The `alibaba` catalog: ECS instance types in cn-hangzhou with on-demand list prices in CNY,
//! built by the provider's own [`instancetype::instance_type`] — ACK's node reservations, the
//! VM memory overhead, a 20 GiB system disk, the `karpenter.k8s.alibabacloud/instance-*`
//! labels. The data has no spot prices and no ENI counts, so types are offered on demand and
//! hold the kubelet's default 110 pods (the provider's answer when the cluster's CNI is neither
//! Terway nor Flannel).

use karpenter_cloudprovider::Catalog;
use karpenter_cloudprovider::catalog::on_demand;
use serde::Deserialize;

use crate::instancetype::{self, EcsInstanceType, InstanceTypeOptions};
pub use crate::instancetype::{
    DEFAULT_MAX_PODS, LABELS, VM_MEMORY_OVERHEAD_PERCENT, category_and_generation,
    kube_reserved_cpu_milli, kube_reserved_memory_mib,
};

const MIB: i64 = 1 << 20;

/// The catalog's region.
pub const REGION: &str = "cn-hangzhou";
/// The default system disk, in GiB: the node's ephemeral storage.
pub const DEFAULT_SYSTEM_DISK_GIB: i64 = 20;

/// The memory a node of `memory_mib` reports: less the VM overhead, rounded up to MiB.
pub fn memory_capacity_mib(memory_mib: i64) -> i64 {
    instancetype::memory_capacity_bytes(memory_mib * MIB, VM_MEMORY_OVERHEAD_PERCENT) / MIB
}

/// The GPU of a family, as `DescribeInstanceTypes` names it (`GPUSpec`, GiB per GPU): the
/// data lists GPU counts only, and the labels and the `nvidia.com/gpu` resource need the
/// maker.
fn gpu(name: &str) -> Option<(&'static str, f64)> {
    match instancetype::family_and_size(name)?.0.as_str() {
        "ecs.gn5i-c16g1" | "ecs.gn5i-c28g1" | "ecs.gn5i-c2g1" | "ecs.gn5i-c4g1"
        | "ecs.gn5i-c8g1" => Some(("NVIDIA P4", 8.0)),
        "ecs.gn6e-c12g1" => Some(("NVIDIA V100", 32.0)),
        _ => None,
    }
}

#[derive(Deserialize)]
struct EcsType {
    name: String,
    vcpu: i64,
    memory_mib: i64,
    architecture: String,
    gpu_count: i64,
    zones: Vec<String>,
    on_demand_price_cny_per_hour: f64,
}

impl EcsType {
    /// The record as `DescribeInstanceTypes` would describe the type.
    fn as_api(&self) -> EcsInstanceType {
        let (gpu_spec, gpu_memory) = gpu(&self.name).unwrap_or(("", 0.0));
        EcsInstanceType {
            instance_type_id: self.name.clone(),
            instance_type_family: instancetype::family_and_size(&self.name)
                .map(|(family, _)| family)
                .unwrap_or_default(),
            cpu_core_count: self.vcpu,
            memory_size: self.memory_mib as f64 / 1024.0,
            cpu_architecture: if self.architecture == "arm64" {
                "ARM".into()
            } else {
                "X86".into()
            },
            gpu_amount: self.gpu_count,
            gpu_spec: gpu_spec.into(),
            gpu_memory_size: gpu_memory,
            ..Default::default()
        }
    }
}

/// The `alibaba` catalog (prices in CNY): the embedded types built as the provider builds
/// instance types ([`instancetype::instance_type`]) with a default NodeClass, offered on
/// demand in the zones the data lists.
pub fn catalog() -> Catalog {
    let types: Vec<EcsType> = serde_json::from_str(include_str!("../data/instance-types.json"))
        .expect("the embedded Alibaba Cloud catalog parses");
    let options = InstanceTypeOptions::new(REGION);
    let types = types
        .into_iter()
        .filter(|t| !t.zones.is_empty() && t.vcpu > 0)
        .filter_map(|t| {
            instancetype::instance_type(
                &t.as_api(),
                on_demand(&t.zones, t.on_demand_price_cny_per_hour),
                &options,
            )
        });
    Catalog::new("alibaba", types, &LABELS).with_currency("CNY")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kube_reserved_cpu_by_size() {
        for (milli, reserved) in [
            (1000, 60),
            (2000, 70),
            (4000, 80),
            // 80m + 0.25% of 4000m.
            (8000, 90),
            // 80m + 0.25% of 60000m.
            (64000, 230),
        ] {
            assert_eq!(kube_reserved_cpu_milli(milli), reserved, "{milli}m");
        }
    }

    #[test]
    fn kube_reserved_memory_is_capped_at_a_quarter() {
        assert_eq!(kube_reserved_memory_mib(110, 8192), 1465 + 200);
        assert_eq!(kube_reserved_memory_mib(110, 4096), 1024 + 200);
    }

    #[test]
    fn names_give_category_and_generation() {
        let cases = [
            ("ecs.g7.large", Some(("g", "7"))),
            ("ecs.gn5i-c16g1.4xlarge", Some(("gn", "5"))),
            ("ecs.re6p-13tb2.26xlarge", Some(("re", "6"))),
            ("m5.large", None),
        ];
        for (name, expected) in cases {
            let got = category_and_generation(name);
            let got = got.as_ref().map(|(c, g)| (c.as_str(), g.as_str()));
            assert_eq!(got, expected, "{name}");
        }
    }

    #[test]
    fn types_get_ack_allocatable() {
        let catalog = catalog();
        assert!(catalog.instance_types.len() > 100);
        let find = |name: &str| {
            catalog
                .instance_types
                .iter()
                .find(|t| t.name == name)
                .unwrap_or_else(|| panic!("{name}"))
                .clone()
        };
        // 8192 MiB less ceil(6.5%) = 7659 MiB; less 1465 + 200 MiB kube-reserved = 5994 MiB.
        let g7 = find("ecs.g7.large");
        assert_eq!(g7.capacity.memory, 7659 * MIB * 1000);
        assert_eq!(g7.allocatable().memory, 5994 * MIB * 1000);
        assert_eq!(g7.allocatable().cpu, 1930);
        assert_eq!(g7.allocatable().pods, 110_000);
        assert!(
            g7.requirements
                .allows("karpenter.k8s.alibabacloud/instance-family", "ecs.g7")
        );
        // 131072 MiB less 8520 = 122552 MiB; less 1665 MiB = 120887 MiB; 64 cores less 230m.
        let c7 = find("ecs.c7.16xlarge");
        assert_eq!(c7.allocatable().memory, 120_887 * MIB * 1000);
        assert_eq!(c7.allocatable().cpu, 63_770);
        assert!(catalog.instance_types.iter().all(|t| {
            t.offerings
                .iter()
                .all(|o| o.zone.starts_with("cn-hangzhou-"))
        }));
    }
}
