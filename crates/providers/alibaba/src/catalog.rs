//! The `alibaba` catalog: ECS instance types in cn-hangzhou with on-demand list prices in CNY,
//! shaped as the cloudpilot-ai provider shapes them — ACK's node reservations, the VM memory
//! overhead, a 20 GiB system disk — and labelled with its `karpenter.k8s.alibabacloud/instance-*`
//! labels. The data has no spot prices and no ENI counts, so types are offered on demand and
//! hold the kubelet's default 110 pods (the provider's answer when the cluster's CNI is neither
//! Terway nor Flannel).

use karpenter_cloudprovider::Catalog;
use karpenter_cloudprovider::catalog::{on_demand, requirements};
use karpenter_core::cloudprovider::{InstanceType, Overhead};
use karpenter_core::resources::Resources;
use serde::Deserialize;

const MIB: i64 = 1 << 20;

/// The provider's labels pods may require.
pub const LABELS: [&str; 7] = [
    "karpenter.k8s.alibabacloud/instance-category",
    "karpenter.k8s.alibabacloud/instance-family",
    "karpenter.k8s.alibabacloud/instance-generation",
    "karpenter.k8s.alibabacloud/instance-size",
    "karpenter.k8s.alibabacloud/instance-cpu",
    "karpenter.k8s.alibabacloud/instance-memory",
    "karpenter.k8s.alibabacloud/instance-gpu-count",
];

/// The share of an instance's memory the hypervisor keeps (the provider's
/// `VM_MEMORY_OVERHEAD_PERCENT` default).
pub const VM_MEMORY_OVERHEAD_PERCENT: f64 = 0.065;
/// Pods per node without a CNI-specific figure (the kubelet's default).
pub const DEFAULT_MAX_PODS: i64 = 110;
/// The default system disk, in GiB: the node's ephemeral storage.
pub const DEFAULT_SYSTEM_DISK_GIB: i64 = 20;

/// ACK's kube-reserved CPU in millicores: 6% of the first core, 1% of the second, 0.5% of the
/// third and fourth, 0.25% of the rest.
pub fn kube_reserved_cpu_milli(cpu_milli: i64) -> i64 {
    let whole_cores = [(1000, 60), (2000, 10), (3000, 5), (4000, 5)]
        .iter()
        .filter(|(threshold, _)| cpu_milli >= *threshold)
        .map(|(_, reserved)| reserved)
        .sum::<i64>();
    let beyond_four = if cpu_milli > 4000 {
        ((cpu_milli - 4000) as f64 * 0.0025) as i64
    } else {
        0
    };
    whole_cores + beyond_four
}

/// ACK's kube-reserved memory in MiB: `11 × pods + 255`, at most a quarter of the memory, and
/// the 200 MiB the provider adds because real nodes reserve that much more.
pub fn kube_reserved_memory_mib(pods: i64, memory_mib: i64) -> i64 {
    (11 * pods + 255).min(memory_mib / 4) + 200
}

/// The memory a node of `memory_mib` reports: less the VM overhead, rounded up to MiB.
pub fn memory_capacity_mib(memory_mib: i64) -> i64 {
    memory_mib - (memory_mib as f64 * VM_MEMORY_OVERHEAD_PERCENT).ceil() as i64
}

/// Category and generation from a type name (`ecs.g7.large`: `g`, `7`), as the provider reads
/// them.
fn category_and_generation(name: &str) -> Option<(String, String)> {
    let rest = name.strip_prefix("ecs.")?;
    let category: String = rest.chars().take_while(char::is_ascii_lowercase).collect();
    let mut after = &rest[category.len()..];
    // Big-memory families carry their size before the generation (`re6p-13tb…`).
    if let Some(tb) = after.strip_prefix('-') {
        let digits = tb.find(|c: char| !c.is_ascii_digit()).unwrap_or(tb.len());
        if digits > 0 && tb[digits..].starts_with("tb") {
            after = &tb[digits + 2..];
        }
    }
    let generation: String = after.chars().take_while(char::is_ascii_digit).collect();
    (!category.is_empty() && !generation.is_empty()).then_some((category, generation))
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

fn instance_type(t: EcsType) -> InstanceType {
    let mut capacity = Resources::new();
    capacity.cpu = t.vcpu * 1000;
    capacity.memory = memory_capacity_mib(t.memory_mib) * MIB * 1000;
    capacity.pods = DEFAULT_MAX_PODS * 1000;
    capacity.ephemeral_storage = DEFAULT_SYSTEM_DISK_GIB * 1024 * MIB * 1000;
    if t.gpu_count > 0 {
        capacity.set("nvidia.com/gpu", t.gpu_count * 1000);
    }
    let mut kube_reserved = Resources::new();
    kube_reserved.cpu = kube_reserved_cpu_milli(capacity.cpu);
    kube_reserved.memory = kube_reserved_memory_mib(DEFAULT_MAX_PODS, t.memory_mib) * MIB * 1000;
    let (category, generation) = category_and_generation(&t.name).unzip();
    let parts: Vec<&str> = t.name.split('.').collect();
    let (family, size) = match parts.as_slice() {
        [ecs, family, size] => (Some(format!("{ecs}.{family}")), Some(size.to_string())),
        _ => (None, None),
    };
    let labels = [
        (LABELS[0], category),
        (LABELS[1], family),
        (LABELS[2], generation),
        (LABELS[3], size),
        (LABELS[4], Some(t.vcpu.to_string())),
        (LABELS[5], Some(t.memory_mib.to_string())),
        (
            LABELS[6],
            (t.gpu_count > 0).then(|| t.gpu_count.to_string()),
        ),
    ];
    InstanceType::new(
        t.name.clone(),
        requirements(&t.name, &t.architecture, &t.zones, &["on-demand"], &labels),
        on_demand(&t.zones, t.on_demand_price_cny_per_hour),
        capacity,
        Overhead {
            kube_reserved,
            ..Default::default()
        },
    )
}

/// The `alibaba` catalog (prices in CNY).
pub fn catalog() -> Catalog {
    let types: Vec<EcsType> = serde_json::from_str(include_str!("../data/instance-types.json"))
        .expect("the embedded Alibaba Cloud catalog parses");
    let types = types
        .into_iter()
        .filter(|t| !t.zones.is_empty() && t.vcpu > 0)
        .map(instance_type);
    Catalog::new("alibaba", types, &LABELS)
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
