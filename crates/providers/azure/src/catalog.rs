//! The `azure` catalog: VM sizes in eastus with on-demand list prices, shaped as upstream's
//! provider shapes them — AKS's node reservations, the VM memory overhead, the default pod
//! density of an Azure CNI overlay cluster and a 128 GB OS disk — and labelled with upstream's
//! `karpenter.azure.com/sku-*` labels — and filtered by the provider's own rule for which sizes
//! can be nodes ([`is_node_size`]). The data has no per-zone availability and no spot prices,
//! so every size is offered on demand in the three eastus zones.

use karpenter_cloudprovider::Catalog;

use crate::instancetype::is_node_size;
use crate::vmsize;
use karpenter_cloudprovider::catalog::{on_demand, requirements};
use karpenter_core::instancetype::{InstanceType, Overhead};
use karpenter_core::resources::Resources;
use serde::Deserialize;
use std::collections::HashSet;
use std::sync::OnceLock;

const MIB: i64 = 1 << 20;
const GIB: i64 = 1 << 30;

/// The provider's labels pods may require.
pub const LABELS: [&str; 9] = [
    "karpenter.azure.com/sku-name",
    "karpenter.azure.com/sku-family",
    "karpenter.azure.com/sku-series",
    "karpenter.azure.com/sku-version",
    "karpenter.azure.com/sku-cpu",
    "karpenter.azure.com/sku-memory",
    "karpenter.azure.com/sku-gpu-count",
    "karpenter.azure.com/sku-gpu-manufacturer",
    "karpenter.azure.com/sku-gpu-name",
];

/// The share of a VM's memory the hypervisor keeps (upstream's `VM_MEMORY_OVERHEAD_PERCENT`).
pub const VM_MEMORY_OVERHEAD_PERCENT: f64 = 0.075;
/// Pods per node when the NodeClass sets none, on upstream's default network (Azure CNI
/// overlay).
pub const DEFAULT_MAX_PODS: i64 = 250;
/// The OS disk when the NodeClass sets none, in GB: the node's ephemeral storage.
pub const DEFAULT_OS_DISK_GB: i64 = 128;
/// The kubelet's hard eviction threshold for memory on AKS nodes.
pub const EVICTION_MEMORY_MIB: i64 = 750;

const ZONES: [&str; 3] = ["eastus-1", "eastus-2", "eastus-3"];

/// A progressive rate: each `(upper bound, rate)` bracket taxes the part of the amount below
/// its bound and above the previous one.
fn bracketed(amount: f64, brackets: &[(f64, f64)]) -> f64 {
    let mut lower = 0.0;
    let mut total = 0.0;
    for &(upper, rate) in brackets {
        if lower > amount {
            break;
        }
        total += (upper.min(amount) - lower) * rate;
        lower = upper;
    }
    total
}

/// AKS's kube-reserved CPU in millicores: 6% of the first core, 4% of the second, 2% of the
/// third and fourth, 1% of the rest.
pub fn kube_reserved_cpu_milli(vcpus: i64) -> i64 {
    let brackets = [(1.0, 0.06), (2.0, 0.04), (4.0, 0.02), (f64::MAX, 0.01)];
    (1000.0 * bracketed(vcpus as f64, &brackets)) as i64
}

/// AKS's kube-reserved memory in MiB, from the size's memory in GiB: 25% of the first 4 GiB,
/// 20% of the next 4, 10% of the next 8, 6% up to 128 GiB and 2% above.
pub fn kube_reserved_memory_mib(memory_gib: f64) -> i64 {
    let brackets = [
        (4.0, 0.25),
        (8.0, 0.20),
        (16.0, 0.10),
        (128.0, 0.06),
        (f64::MAX, 0.02),
    ];
    (1024.0 * bracketed(memory_gib, &brackets)) as i64
}

/// The memory a node of `memory_gib` reports: whole GiB, less the VM overhead rounded up.
pub fn memory_capacity_bytes(memory_gib: f64) -> i64 {
    memory_capacity_bytes_with_overhead(memory_gib, VM_MEMORY_OVERHEAD_PERCENT)
}

/// [`memory_capacity_bytes`] with another VM overhead share (upstream's
/// `--vm-memory-overhead-percent`).
pub fn memory_capacity_bytes_with_overhead(memory_gib: f64, overhead_percent: f64) -> i64 {
    let memory = memory_gib as i64 * GIB;
    memory - (memory as f64 * overhead_percent).ceil() as i64
}

/// The node's kube-reserved CPU and memory and its memory eviction threshold, from the size's
/// vCPUs and memory: what AKS keeps off allocatable.
pub fn overhead(vcpus: i64, memory_gib: f64) -> Overhead {
    let mut kube_reserved = Resources::new();
    kube_reserved.cpu = kube_reserved_cpu_milli(vcpus);
    kube_reserved.memory = kube_reserved_memory_mib(memory_gib) * MIB * 1000;
    let mut eviction_threshold = Resources::new();
    eviction_threshold.memory = EVICTION_MEMORY_MIB * MIB * 1000;
    Overhead {
        kube_reserved,
        eviction_threshold,
        ..Default::default()
    }
}

#[derive(Clone, Deserialize)]
struct Sku {
    name: String,
    #[serde(default)]
    in_karpenter_known_skus: bool,
    vcpu: i64,
    memory_mib: i64,
    architecture: String,
    gpu_count: i64,
    gpu_manufacturer: Option<String>,
    gpu_name: Option<String>,
    on_demand_price_usd_per_hour: f64,
}

/// One size as the provider would offer it.
fn instance_type(sku: Sku, zones: &[String]) -> Option<InstanceType> {
    let size = vmsize::parse(sku.name.strip_prefix("Standard_")?)?;
    let memory_gib = sku.memory_mib as f64 / 1024.0;
    if !is_node_size(
        &sku.name,
        &size,
        Some(sku.vcpu),
        Some(memory_gib),
        sku.gpu_count,
    ) {
        return None;
    }
    let mut capacity = Resources::new();
    capacity.cpu = sku.vcpu * 1000;
    capacity.memory = memory_capacity_bytes(memory_gib) * 1000;
    capacity.pods = DEFAULT_MAX_PODS * 1000;
    capacity.ephemeral_storage = DEFAULT_OS_DISK_GB * 1_000_000_000 * 1000;
    let gpu_manufacturer = sku.gpu_manufacturer.filter(|_| sku.gpu_count > 0);
    match gpu_manufacturer.as_deref() {
        Some("amd") => capacity.set("amd.com/gpu", sku.gpu_count * 1000),
        Some(_) => capacity.set("nvidia.com/gpu", sku.gpu_count * 1000),
        None => {}
    }
    let labels = [
        (LABELS[0], Some(sku.name.clone())),
        (LABELS[1], Some(size.family.clone())),
        (LABELS[2], Some(size.series.clone())),
        (LABELS[3], Some(size.version_label())),
        (LABELS[4], Some(sku.vcpu.to_string())),
        (LABELS[5], Some(sku.memory_mib.to_string())),
        (LABELS[6], Some(sku.gpu_count.to_string())),
        (LABELS[7], gpu_manufacturer),
        (LABELS[8], sku.gpu_name.filter(|_| sku.gpu_count > 0)),
    ];
    Some(InstanceType::new(
        sku.name.clone(),
        requirements(&sku.name, &sku.architecture, zones, &["on-demand"], &labels),
        on_demand(zones, sku.on_demand_price_usd_per_hour),
        capacity,
        overhead(sku.vcpu, memory_gib),
    ))
}

/// The embedded data, parsed once.
fn embedded() -> &'static [Sku] {
    static SKUS: OnceLock<Vec<Sku>> = OnceLock::new();
    SKUS.get_or_init(|| {
        serde_json::from_str(include_str!("../data/skus.json"))
            .expect("the embedded Azure catalog parses")
    })
}

/// The embedded eastus on-demand list prices, USD per hour, by size name: the prices the
/// provider starts from before (or without) the Retail Prices API.
pub fn embedded_on_demand_prices() -> impl Iterator<Item = (&'static str, f64)> {
    embedded()
        .iter()
        .filter(|s| s.on_demand_price_usd_per_hour > 0.0)
        .map(|s| (s.name.as_str(), s.on_demand_price_usd_per_hour))
}

/// Whether upstream knows the size (its known-SKU list, as of the embedded data). Sizes it
/// does not know are offered at a penalty price so they never win on cost alone.
pub fn is_known_sku(name: &str) -> bool {
    static KNOWN: OnceLock<HashSet<&'static str>> = OnceLock::new();
    KNOWN
        .get_or_init(|| {
            embedded()
                .iter()
                .filter(|s| s.in_karpenter_known_skus)
                .map(|s| s.name.as_str())
                .collect()
        })
        .contains(name)
}

/// The `azure` catalog.
pub fn catalog() -> Catalog {
    let zones: Vec<String> = ZONES.iter().map(|z| z.to_string()).collect();
    let types = embedded()
        .iter()
        .cloned()
        .filter_map(|s| instance_type(s, &zones));
    Catalog::new("azure", types, &LABELS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kube_reserved_cpu_by_core_count() {
        // 6% of 1000m, +4%, +2% per core to 4, +1% per core after.
        for (vcpus, milli) in [(1, 60), (2, 100), (4, 140), (8, 180), (16, 260), (64, 740)] {
            assert_eq!(kube_reserved_cpu_milli(vcpus), milli, "{vcpus} vCPUs");
        }
    }

    #[test]
    fn kube_reserved_memory_by_size() {
        for (gib, mib) in [
            // 25% of 4 GiB.
            (4.0, 1024),
            // 1 GiB + 20% of 4 GiB = 1.8 GiB.
            (8.0, 1843),
            // 1.8 GiB + 10% of 8 GiB = 2.6 GiB.
            (16.0, 2662),
            // 2.6 GiB + 6% of 48 GiB = 5.48 GiB.
            (64.0, 5611),
            // 2.6 GiB + 6% of 112 GiB + 2% of 128 GiB = 11.88 GiB.
            (256.0, 12165),
        ] {
            assert_eq!(kube_reserved_memory_mib(gib), mib, "{gib} GiB");
        }
    }

    #[test]
    fn sizes_get_aks_allocatable() {
        let catalog = catalog();
        assert!(
            catalog.instance_types.len() > 800,
            "{}",
            catalog.instance_types.len()
        );
        // The provider's own rule: no confidential, constrained-vCPU or tiny sizes.
        let names: Vec<&str> = catalog
            .instance_types
            .iter()
            .map(|t| t.name.as_str())
            .collect();
        for ruled_out in [
            "Standard_DC2as_v5",
            "Standard_EC2as_v5",
            "Standard_E8-4ds_v5",
            "Standard_B1s",
            "Standard_A1_v2",
        ] {
            assert!(!names.contains(&ruled_out), "{ruled_out}");
        }
        let d2 = catalog
            .instance_types
            .iter()
            .find(|t| t.name == "Standard_D2s_v3")
            .expect("Standard_D2s_v3");
        // 8 GiB less ceil(7.5%) = 7,945,689,497 bytes; less 1843 MiB kube-reserved and the
        // 750 MiB eviction threshold = 5,226,731,929 bytes.
        assert_eq!(d2.capacity.memory, 7_945_689_497 * 1000);
        assert_eq!(d2.allocatable().memory, 5_226_731_929 * 1000);
        assert_eq!(d2.allocatable().cpu, 1900);
        assert_eq!(d2.allocatable().pods, 250_000);
        assert!(
            d2.requirements
                .allows("karpenter.azure.com/sku-family", "D")
        );
        assert!(
            d2.requirements
                .allows("karpenter.azure.com/sku-series", "Ds_v3")
        );
        assert!(
            d2.requirements
                .allows("karpenter.azure.com/sku-memory", "8192")
        );
        assert!(
            !d2.requirements
                .allows("karpenter.azure.com/sku-gpu-manufacturer", "nvidia")
        );
        let gpu = catalog
            .instance_types
            .iter()
            .find(|t| t.name == "Standard_NC12s_v3")
            .expect("Standard_NC12s_v3");
        assert_eq!(gpu.capacity.get("nvidia.com/gpu"), 2000);
        assert!(
            gpu.requirements
                .allows("karpenter.azure.com/sku-gpu-name", "v100")
        );
        assert!(catalog.instance_types.iter().all(|t| {
            t.offerings.len() == 3
                && t.offerings
                    .iter()
                    .all(|o| o.capacity_type == "on-demand" && o.zone.starts_with("eastus-"))
        }));
    }
}
