//! The real clouds' catalogs (AWS us-east-1, Azure eastus, Alibaba Cloud cn-hangzhou), from the
//! embedded data. None of the sources has spot prices, so these catalogs offer on-demand only.

use karpenter_api::Operator;
use karpenter_api::labels::{
    ARCH_LABEL, CAPACITY_TYPE_LABEL, INSTANCE_TYPE_LABEL, OS_LABEL, ZONE_LABEL,
};
use karpenter_core::cloudprovider::{InstanceType, Offering, Overhead};
use karpenter_core::resources::Resources;
use karpenter_core::scheduling::{Requirement, Requirements};
use serde::Deserialize;

const MIB: i64 = 1 << 20;

/// Upstream AWS provider's kube-reserved CPU: 6% of the first core, 1% of the second, 0.5% of
/// the third and fourth, 0.25% of the rest.
fn kube_reserved_cpu_milli(vcpu: i64) -> i64 {
    let cores = vcpu * 1000;
    let band = |from: i64, to: i64, percent_x100: i64| {
        ((cores.min(to) - from).max(0) * percent_x100) / 10_000
    };
    band(0, 1000, 600) + band(1000, 2000, 100) + band(2000, 4000, 50) + band(4000, i64::MAX, 25)
}

/// Upstream AWS provider's node overhead for `vcpu` cores and `pods` pods: kube-reserved CPU by
/// the bands above, kube-reserved memory `11 × pods + 255 MiB`, and a 100 MiB eviction threshold.
fn eks_overhead(vcpu: i64, pods: i64) -> Overhead {
    let mut kube_reserved = Resources::new();
    kube_reserved.cpu = kube_reserved_cpu_milli(vcpu);
    kube_reserved.memory = (11 * pods + 255) * MIB * 1000;
    let mut eviction_threshold = Resources::new();
    eviction_threshold.memory = 100 * MIB * 1000;
    Overhead {
        kube_reserved,
        eviction_threshold,
        ..Default::default()
    }
}

fn requirements(
    name: &str,
    arch: &str,
    zones: &[String],
    extra: &[(&str, String)],
) -> Requirements {
    let mut r: Requirements = [
        Requirement::new(INSTANCE_TYPE_LABEL, Operator::In, &[name]),
        Requirement::new(ARCH_LABEL, Operator::In, &[arch]),
        Requirement::new(OS_LABEL, Operator::In, &["linux"]),
        Requirement::new(ZONE_LABEL, Operator::In, zones),
        Requirement::new(CAPACITY_TYPE_LABEL, Operator::In, &["on-demand"]),
    ]
    .into_iter()
    .collect();
    for (key, value) in extra {
        r.add(Requirement::new(key, Operator::In, &[value.as_str()]));
    }
    r
}

fn on_demand(zones: &[String], price: f64) -> Vec<Offering> {
    zones
        .iter()
        .map(|z| Offering {
            zone: z.clone(),
            capacity_type: "on-demand".into(),
            price,
            available: true,
        })
        .collect()
}

/// EC2 instance types in us-east-1, resolved by the AWS provider's own code (AL2023 defaults,
/// a subnet in every zone), so the simulator's nodes are the ones the provider would launch.
/// The data has no spot prices, so only on-demand is offered.
pub fn aws() -> Vec<InstanceType> {
    use karpenter_aws::instancetype::{self, CATALOG_REGION, NodeClassSettings, ZoneInfo, catalog};
    let catalog = catalog();
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
    let pricing = karpenter_aws::pricing::Pricing::embedded();
    catalog
        .types
        .iter()
        .filter_map(|info| {
            instancetype::resolve(
                info,
                CATALOG_REGION,
                &catalog.zones[&info.name],
                &subnets,
                &settings,
                &pricing,
                &|_, _, _| false,
            )
        })
        .collect()
}

/// The AWS provider's own labels, which pods may require.
pub use karpenter_aws::instancetype::AWS_LABELS;

#[derive(Deserialize)]
struct AzureSku {
    name: String,
    family: String,
    vcpu: i64,
    memory_mib: i64,
    architecture: String,
    gpu_count: i64,
    gpu_manufacturer: Option<String>,
    on_demand_price_usd_per_hour: f64,
}

/// The Azure provider's own labels, which pods may require.
pub const AZURE_LABELS: [&str; 5] = [
    "karpenter.azure.com/sku-name",
    "karpenter.azure.com/sku-family",
    "karpenter.azure.com/sku-cpu",
    "karpenter.azure.com/sku-memory",
    "karpenter.azure.com/sku-gpu-count",
];

/// The three eastus zones; the data has no per-zone availability, so every SKU is offered in
/// all three.
const AZURE_ZONES: [&str; 3] = ["eastus-1", "eastus-2", "eastus-3"];

/// Azure VM SKUs in eastus, with the same node overhead formula as the AWS catalog (110 pods)
/// as an approximation of AKS's reservations.
pub fn azure() -> Vec<InstanceType> {
    let skus: Vec<AzureSku> = serde_json::from_str(include_str!("../../catalogs/azure/skus.json"))
        .expect("the embedded Azure catalog parses");
    let zones: Vec<String> = AZURE_ZONES.iter().map(|z| z.to_string()).collect();
    skus.into_iter()
        .filter(|s| s.vcpu > 0)
        .map(|s| {
            let pods = 110;
            let capacity = cloud_capacity(
                s.vcpu,
                s.memory_mib,
                pods,
                s.gpu_count,
                s.gpu_manufacturer.as_deref(),
            );
            // Azure families are named like standardDSv3Family; the label holds the letters.
            let family = s
                .family
                .trim_start_matches("standard")
                .trim_end_matches("Family")
                .to_string();
            let labels = [
                (AZURE_LABELS[0], s.name.clone()),
                (AZURE_LABELS[1], family),
                (AZURE_LABELS[2], s.vcpu.to_string()),
                (AZURE_LABELS[3], s.memory_mib.to_string()),
                (AZURE_LABELS[4], s.gpu_count.to_string()),
            ];
            let requirements = requirements(&s.name, &s.architecture, &zones, &labels);
            InstanceType::new(
                s.name,
                requirements,
                on_demand(&zones, s.on_demand_price_usd_per_hour),
                capacity,
                eks_overhead(s.vcpu, pods),
            )
        })
        .collect()
}

fn cloud_capacity(
    vcpu: i64,
    memory_mib: i64,
    pods: i64,
    gpus: i64,
    gpu_manufacturer: Option<&str>,
) -> Resources {
    let mut capacity = Resources::new();
    capacity.cpu = vcpu * 1000;
    capacity.memory = memory_mib * MIB * 1000;
    capacity.pods = pods * 1000;
    capacity.ephemeral_storage = 20 * 1024 * MIB * 1000;
    if gpus > 0 {
        let resource = if gpu_manufacturer == Some("amd") {
            "amd.com/gpu"
        } else {
            "nvidia.com/gpu"
        };
        capacity.set(resource, gpus * 1000);
    }
    capacity
}

#[derive(Deserialize)]
struct AlibabaType {
    name: String,
    family: String,
    vcpu: i64,
    memory_mib: i64,
    architecture: String,
    gpu_count: i64,
    zones: Vec<String>,
    on_demand_price_cny_per_hour: f64,
}

/// The Alibaba Cloud provider's own labels, which pods may require.
pub const ALIBABA_LABELS: [&str; 3] = [
    "karpenter.k8s.alibabacloud/instance-family",
    "karpenter.k8s.alibabacloud/instance-cpu",
    "karpenter.k8s.alibabacloud/instance-memory",
];

/// ECS instance types in cn-hangzhou (prices in CNY), with the same overhead formula (110 pods).
pub fn alibaba() -> Vec<InstanceType> {
    let types: Vec<AlibabaType> =
        serde_json::from_str(include_str!("../../catalogs/alibaba/instance-types.json"))
            .expect("the embedded Alibaba catalog parses");
    types
        .into_iter()
        .filter(|t| !t.zones.is_empty() && t.vcpu > 0)
        .map(|t| {
            let pods = 110;
            let capacity = cloud_capacity(t.vcpu, t.memory_mib, pods, t.gpu_count, None);
            let labels = [
                (ALIBABA_LABELS[0], t.family.clone()),
                (ALIBABA_LABELS[1], t.vcpu.to_string()),
                (ALIBABA_LABELS[2], t.memory_mib.to_string()),
            ];
            let requirements = requirements(&t.name, &t.architecture, &t.zones, &labels);
            InstanceType::new(
                t.name,
                requirements,
                on_demand(&t.zones, t.on_demand_price_cny_per_hour),
                capacity,
                eks_overhead(t.vcpu, pods),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eks_cpu_reservation_bands() {
        assert_eq!(kube_reserved_cpu_milli(1), 60);
        assert_eq!(kube_reserved_cpu_milli(2), 70);
        assert_eq!(kube_reserved_cpu_milli(4), 80);
        assert_eq!(kube_reserved_cpu_milli(8), 90);
        assert_eq!(kube_reserved_cpu_milli(96), 310);
    }

    #[test]
    fn aws_catalog_matches_karpenters_published_allocatable() {
        let types = aws();
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

    #[test]
    fn azure_and_alibaba_catalogs_load() {
        let azure = azure();
        assert!(azure.len() > 1200);
        let d2 = azure
            .iter()
            .find(|t| t.name == "Standard_D2s_v3")
            .expect("Standard_D2s_v3");
        assert_eq!(d2.capacity.cpu, 2000);
        assert!(d2.allocatable().cpu < 2000 && d2.allocatable().memory > 0);
        assert!(
            d2.requirements
                .allows("karpenter.azure.com/sku-family", "DSv3")
        );
        let alibaba = alibaba();
        assert!(alibaba.len() > 100);
        assert!(alibaba.iter().all(|t| {
            t.offerings
                .iter()
                .all(|o| o.zone.starts_with("cn-hangzhou"))
        }));
    }
}
