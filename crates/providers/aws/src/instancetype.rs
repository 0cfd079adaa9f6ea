//! EC2 instance types as the scheduler sees them: capacity, the node's own overhead, labels and
//! offerings, computed from what DescribeInstanceTypes reports with upstream's formulas — the
//! VM's memory overhead, ENI-limited pod density, EKS kube-reserved bands and eviction
//! thresholds — so a pod fits here exactly when it fits under upstream Karpenter.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use crate::ec2nodeclass::{AmiFamily, BlockDeviceMapping, EC2NodeClassSpec};
use karpenter_api::Operator;
use karpenter_api::labels::{
    ARCH_LABEL, CAPACITY_TYPE_LABEL, INSTANCE_TYPE_LABEL, OS_LABEL, REGION_LABEL,
    WINDOWS_BUILD_LABEL, ZONE_LABEL,
};
use karpenter_core::instancetype::{InstanceType, Offering, Overhead};
use karpenter_core::resources::{Resources, parse_milli};
use karpenter_core::scheduling::{Requirement, Requirements};
use serde::Deserialize;

use crate::pricing::Pricing;

const MIB: i64 = 1 << 20;
/// Milli-units per MiB, the unit [`Resources`] keeps memory in.
const MILLI_MIB: i64 = MIB * 1000;

/// `karpenter.k8s.aws/instance-category` (`m`).
pub const LABEL_INSTANCE_CATEGORY: &str = "karpenter.k8s.aws/instance-category";
/// `karpenter.k8s.aws/instance-family` (`m5`).
pub const LABEL_INSTANCE_FAMILY: &str = "karpenter.k8s.aws/instance-family";
/// `karpenter.k8s.aws/instance-generation` (`5`).
pub const LABEL_INSTANCE_GENERATION: &str = "karpenter.k8s.aws/instance-generation";
/// `karpenter.k8s.aws/instance-size` (`2xlarge`).
pub const LABEL_INSTANCE_SIZE: &str = "karpenter.k8s.aws/instance-size";
/// `karpenter.k8s.aws/instance-cpu` (vCPUs).
pub const LABEL_INSTANCE_CPU: &str = "karpenter.k8s.aws/instance-cpu";
/// `karpenter.k8s.aws/instance-memory` (MiB).
pub const LABEL_INSTANCE_MEMORY: &str = "karpenter.k8s.aws/instance-memory";
/// `karpenter.k8s.aws/instance-gpu-count`.
pub const LABEL_GPU_COUNT: &str = "karpenter.k8s.aws/instance-gpu-count";
/// `karpenter.k8s.aws/instance-gpu-manufacturer`.
pub const LABEL_GPU_MANUFACTURER: &str = "karpenter.k8s.aws/instance-gpu-manufacturer";
/// `karpenter.k8s.aws/instance-accelerator-count`.
pub const LABEL_ACCELERATOR_COUNT: &str = "karpenter.k8s.aws/instance-accelerator-count";
/// `karpenter.k8s.aws/instance-accelerator-manufacturer`.
pub const LABEL_ACCELERATOR_MANUFACTURER: &str =
    "karpenter.k8s.aws/instance-accelerator-manufacturer";
/// The capacity reservation a reserved node runs in.
pub const LABEL_CAPACITY_RESERVATION_ID: &str = "karpenter.k8s.aws/capacity-reservation-id";
/// The kind of reservation a reserved node runs in: `default` (an On-Demand Capacity
/// Reservation) or `capacity-block` (a Capacity Block for ML). Set on the nodes a launch makes;
/// offerings do not carry it yet, so it is not among [`AWS_LABELS`].
pub const LABEL_CAPACITY_RESERVATION_TYPE: &str = "karpenter.k8s.aws/capacity-reservation-type";
/// Zone ids (`use1-az2`), stable across accounts unlike zone names.
pub const LABEL_ZONE_ID: &str = "topology.k8s.aws/zone-id";

/// Every label the AWS provider defines, which NodePools and pods may select on.
pub const AWS_LABELS: [&str; 24] = [
    LABEL_INSTANCE_CATEGORY,
    LABEL_INSTANCE_FAMILY,
    LABEL_INSTANCE_GENERATION,
    LABEL_INSTANCE_SIZE,
    LABEL_INSTANCE_CPU,
    LABEL_INSTANCE_MEMORY,
    "karpenter.k8s.aws/instance-cpu-manufacturer",
    "karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz",
    "karpenter.k8s.aws/instance-hypervisor",
    "karpenter.k8s.aws/instance-encryption-in-transit-supported",
    LABEL_GPU_COUNT,
    "karpenter.k8s.aws/instance-gpu-name",
    LABEL_GPU_MANUFACTURER,
    "karpenter.k8s.aws/instance-gpu-memory",
    LABEL_ACCELERATOR_COUNT,
    "karpenter.k8s.aws/instance-accelerator-name",
    LABEL_ACCELERATOR_MANUFACTURER,
    "karpenter.k8s.aws/instance-local-nvme",
    "karpenter.k8s.aws/instance-network-bandwidth",
    "karpenter.k8s.aws/instance-ebs-bandwidth",
    "karpenter.k8s.aws/instance-capability-flex",
    "karpenter.k8s.aws/instance-tenancy",
    LABEL_ZONE_ID,
    LABEL_CAPACITY_RESERVATION_ID,
];

/// What EC2 says of an instance type (DescribeInstanceTypes), reduced to what scheduling needs.
/// The embedded catalog holds the same fields for every type in us-east-1.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub struct InstanceTypeInfo {
    /// `m5.large`.
    pub name: String,
    /// Default vCPUs.
    pub vcpu: i64,
    /// Memory, MiB.
    pub memory_mib: i64,
    /// `amd64` or `arm64` (Kubernetes spelling).
    pub architecture: String,
    /// `intel`, `amd`, `aws`.
    #[serde(default)]
    pub cpu_manufacturer: Option<String>,
    /// Sustained clock speed, MHz.
    #[serde(default)]
    pub cpu_sustained_clock_mhz: Option<i64>,
    /// GPUs.
    #[serde(default)]
    pub gpu_count: i64,
    /// `nvidia`, `amd`, `habana`.
    #[serde(default)]
    pub gpu_manufacturer: Option<String>,
    /// `t4`, `a100`.
    #[serde(default)]
    pub gpu_name: Option<String>,
    /// Memory per GPU, MiB.
    #[serde(default)]
    pub gpu_memory_mib: i64,
    /// Inference accelerators or Neuron devices.
    #[serde(default)]
    pub accelerator_count: i64,
    /// `aws`.
    #[serde(default)]
    pub accelerator_manufacturer: Option<String>,
    /// `inferentia`, `trainium`.
    #[serde(default)]
    pub accelerator_name: Option<String>,
    /// Local NVMe storage, GiB (0: none).
    #[serde(default)]
    pub local_nvme_gib: i64,
    /// Instance store, GB.
    #[serde(default)]
    pub instance_store_gb: i64,
    /// Network bandwidth, Mbit/s.
    #[serde(default)]
    pub network_bandwidth_mbps: Option<i64>,
    /// EBS-optimized bandwidth, Mbit/s.
    #[serde(default)]
    pub ebs_bandwidth_mbps: Option<i64>,
    /// Network interfaces on the default card.
    pub max_enis: i64,
    /// IPv4 addresses per interface.
    pub ipv4_per_eni: i64,
    /// Branch interfaces for security groups for pods (0: no trunking).
    #[serde(default)]
    pub pod_eni: i64,
    /// EFA interfaces.
    #[serde(default)]
    pub efa: i64,
    /// `nitro`, `xen`; none for bare metal.
    #[serde(default)]
    pub hypervisor: Option<String>,
    /// Whether traffic is encrypted in transit.
    #[serde(default)]
    pub encryption_in_transit: bool,
    /// Whether the type can be bought as spot.
    #[serde(default = "yes")]
    pub spot_supported: bool,
}

fn yes() -> bool {
    true
}

/// An embedded catalog row: the type and where and at what price it is offered in us-east-1.
#[derive(Deserialize)]
struct CatalogRow {
    #[serde(flatten)]
    info: InstanceTypeInfo,
    zones: Vec<String>,
    on_demand_price_usd_per_hour: f64,
}

/// The embedded us-east-1 catalog: every instance type, the zones offering it, and on-demand
/// list prices. The provider starts from it until EC2 and the Pricing API answer; the
/// simulator uses it as is.
pub struct Catalog {
    /// Every instance type.
    pub types: Vec<InstanceTypeInfo>,
    /// The zones offering each type.
    pub zones: BTreeMap<String, Vec<String>>,
    /// On-demand prices, USD per hour.
    pub on_demand: BTreeMap<String, f64>,
}

/// The embedded catalog's region.
pub const CATALOG_REGION: &str = "us-east-1";

/// The embedded catalog, parsed once.
pub fn catalog() -> &'static Catalog {
    static CATALOG: OnceLock<Catalog> = OnceLock::new();
    CATALOG.get_or_init(|| {
        let rows: Vec<CatalogRow> =
            serde_json::from_str(include_str!("../data/instance-types.json"))
                .expect("the embedded AWS catalog parses");
        let mut catalog = Catalog {
            types: Vec::with_capacity(rows.len()),
            zones: BTreeMap::new(),
            on_demand: BTreeMap::new(),
        };
        for row in rows {
            catalog.zones.insert(row.info.name.clone(), row.zones);
            catalog
                .on_demand
                .insert(row.info.name.clone(), row.on_demand_price_usd_per_hour);
            catalog.types.push(row.info);
        }
        catalog
    })
}

/// A name's parts: `(category, generation, family, size)`; `m5d.2xlarge` →
/// `("m", "5", "m5d", "2xlarge")`, `u-6tb1.metal` → `("u", "1", "u-6tb1", "metal")`.
pub fn name_parts(
    name: &str,
) -> (
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
) {
    let (family, size) = match name.split_once('.') {
        Some((f, s)) if !s.contains('.') => (Some(f.to_string()), Some(s.to_string())),
        _ => (None, None),
    };
    let Some(family_str) = family.as_deref() else {
        return (None, None, None, None);
    };
    // Letters, an optional `-<n>tb` (high-memory types), then the generation digits.
    let category: String = family_str
        .chars()
        .take_while(|c| c.is_ascii_lowercase())
        .collect();
    let mut rest = &family_str[category.len()..];
    if let Some(after_dash) = rest.strip_prefix('-') {
        let digits = after_dash.chars().take_while(char::is_ascii_digit).count();
        if digits > 0 && after_dash[digits..].starts_with("tb") {
            rest = &after_dash[digits + 2..];
        }
    }
    let generation: String = rest.chars().take_while(char::is_ascii_digit).collect();
    if category.is_empty() || generation.is_empty() {
        return (None, None, family, size);
    }
    (Some(category), Some(generation), family, size)
}

/// The EFA resource: how many EFA interfaces a node has, attached when a NodeClaim requests it.
pub const RESOURCE_EFA: &str = "vpc.amazonaws.com/efa";

/// A capacity reservation the NodeClass selected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reservation {
    /// `cr-…`.
    pub id: String,
    /// The instance type it holds.
    pub instance_type: String,
    /// Its zone.
    pub zone: String,
    /// Instances it can still launch.
    pub available: i64,
}

/// A subnet's zone, as the EC2NodeClass status records it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ZoneInfo {
    /// `us-east-1a`.
    pub zone: String,
    /// `use1-az2`.
    pub zone_id: Option<String>,
}

/// The EC2NodeClass settings that shape instance types, and the provider's options.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeClassSettings {
    /// The bootstrap family.
    pub ami_family: AmiFamily,
    /// `kubelet.maxPods`.
    pub max_pods: Option<i64>,
    /// `kubelet.podsPerCore`.
    pub pods_per_core: Option<i64>,
    /// `kubelet.kubeReserved`.
    pub kube_reserved: BTreeMap<String, String>,
    /// `kubelet.systemReserved`.
    pub system_reserved: BTreeMap<String, String>,
    /// `kubelet.evictionHard`.
    pub eviction_hard: BTreeMap<String, String>,
    /// The disks, for the node's ephemeral storage.
    pub block_device_mappings: Vec<BlockDeviceMapping>,
    /// `instanceStorePolicy: RAID0`.
    pub instance_store_raid0: bool,
    /// `efa-only` interfaces on card 0, which take ENIs from pods.
    pub efa_only_interfaces: i64,
    /// Explicit interfaces, which decide the EFA count instead of the type's maximum.
    pub network_interfaces: Option<i64>,
    /// The share of memory the hypervisor keeps (`--vm-memory-overhead-percent`, 0.075).
    pub vm_memory_overhead_percent: f64,
    /// ENIs kept from pods (`--reserved-enis`, 0).
    pub reserved_enis: i64,
}

impl Default for NodeClassSettings {
    fn default() -> Self {
        Self {
            ami_family: AmiFamily::AL2023,
            max_pods: None,
            pods_per_core: None,
            kube_reserved: BTreeMap::new(),
            system_reserved: BTreeMap::new(),
            eviction_hard: BTreeMap::new(),
            block_device_mappings: Vec::new(),
            instance_store_raid0: false,
            efa_only_interfaces: 0,
            network_interfaces: None,
            vm_memory_overhead_percent: 0.075,
            reserved_enis: 0,
        }
    }
}

impl NodeClassSettings {
    /// The settings an EC2NodeClass spec implies, with the provider's options.
    pub fn from_spec(
        spec: &EC2NodeClassSpec,
        vm_memory_overhead_percent: f64,
        reserved_enis: i64,
    ) -> Self {
        let efa_only_interfaces = spec
            .network_interfaces
            .iter()
            .filter(|n| n.network_card_index == 0 && n.interface_type == "efa-only")
            .count() as i64;
        Self {
            ami_family: spec.ami_family(),
            max_pods: spec.kubelet_i64("maxPods"),
            pods_per_core: spec.kubelet_i64("podsPerCore"),
            kube_reserved: spec.kubelet_map("kubeReserved"),
            system_reserved: spec.kubelet_map("systemReserved"),
            eviction_hard: spec.kubelet_map("evictionHard"),
            block_device_mappings: spec.block_device_mappings.clone(),
            instance_store_raid0: spec.instance_store_policy.as_deref() == Some("RAID0"),
            efa_only_interfaces,
            network_interfaces: (!spec.network_interfaces.is_empty()).then(|| {
                spec.network_interfaces
                    .iter()
                    .filter(|n| n.interface_type == "efa-only")
                    .count() as i64
            }),
            vm_memory_overhead_percent,
            reserved_enis,
        }
    }

    /// Whether pod density follows the ENI limit (all but Windows).
    fn eni_limited_pod_density(&self) -> bool {
        !self.ami_family.is_windows()
    }

    /// Whether kube-reserved memory follows the ENI-limited pod count even when maxPods is set
    /// (the AL2/AL2023/Custom bootstrap scripts do; Bottlerocket and Windows use the pod count).
    fn eni_limited_memory_overhead(&self) -> bool {
        !matches!(self.ami_family, AmiFamily::Bottlerocket) && !self.ami_family.is_windows()
    }

    fn pods_per_core_enabled(&self) -> bool {
        !matches!(self.ami_family, AmiFamily::Bottlerocket)
    }

    /// The device whose size is the node's ephemeral storage, and its default size.
    fn ephemeral_device(&self) -> Option<(&'static str, &'static str)> {
        match self.ami_family {
            AmiFamily::AL2 | AmiFamily::AL2023 => Some(("/dev/xvda", "20Gi")),
            AmiFamily::Bottlerocket => Some(("/dev/xvdb", "20Gi")),
            AmiFamily::Windows2019 | AmiFamily::Windows2022 | AmiFamily::Windows2025 => {
                Some(("/dev/sda1", "50Gi"))
            }
            AmiFamily::Custom => None,
        }
    }
}

fn quantity(value: &str) -> i64 {
    parse_milli(value).unwrap_or(0)
}

/// Pods the type's network interfaces can address: `ENIs × (IPs per ENI − 1) + 2`.
pub fn eni_limited_pods(info: &InstanceTypeInfo, settings: &NodeClassSettings) -> i64 {
    eni_limited_pods_reserving(info, settings.reserved_enis, settings.efa_only_interfaces)
}

fn eni_limited_pods_reserving(info: &InstanceTypeInfo, reserved_enis: i64, efa_only: i64) -> i64 {
    let usable = (info.max_enis - reserved_enis - efa_only).max(0);
    if usable == 0 {
        return 0;
    }
    usable * (info.ipv4_per_eni - 1) + 2
}

/// The node's pod capacity.
pub fn pods(info: &InstanceTypeInfo, settings: &NodeClassSettings) -> i64 {
    let mut count = match settings.max_pods {
        Some(max) => max,
        None if settings.eni_limited_pod_density() => eni_limited_pods(info, settings),
        None => 110,
    };
    if let Some(per_core) = settings.pods_per_core.filter(|p| *p > 0)
        && settings.pods_per_core_enabled()
    {
        count = count.min(per_core * info.vcpu);
    }
    count
}

/// Memory the node sees: the type's memory (less 64 MiB on arm64) less the hypervisor's
/// share, rounded up to a MiB.
pub fn memory_mib(info: &InstanceTypeInfo, settings: &NodeClassSettings) -> i64 {
    let mut mib = info.memory_mib;
    if info.architecture == "arm64" {
        mib -= 64;
    }
    mib - (mib as f64 * settings.vm_memory_overhead_percent).ceil() as i64
}

/// The node's ephemeral storage, in milli-bytes.
pub fn ephemeral_storage(info: &InstanceTypeInfo, settings: &NodeClassSettings) -> i64 {
    if settings.instance_store_raid0 && info.instance_store_gb > 0 {
        return info.instance_store_gb * 1_000_000_000 * 1000;
    }
    let size = |bdm: &BlockDeviceMapping| bdm.ebs.as_ref()?.volume_size.as_deref().map(quantity);
    let bdms = &settings.block_device_mappings;
    if !bdms.is_empty() {
        if let Some(root) = bdms.iter().find(|b| b.root_volume).and_then(size) {
            return root;
        }
        match settings.ephemeral_device() {
            None => {
                return bdms
                    .last()
                    .and_then(size)
                    .unwrap_or_else(|| quantity("20Gi"));
            }
            Some((device, _)) => {
                if let Some(size) = bdms
                    .iter()
                    .find(|b| b.device_name.as_deref() == Some(device))
                    .and_then(size)
                {
                    return size;
                }
            }
        }
    }
    quantity(settings.ephemeral_device().map_or("20Gi", |(_, d)| d))
}

/// EKS's kube-reserved CPU: 6% of the first core, 1% of the second, 0.5% of the next two and
/// 0.25% of the rest, in millicores.
pub fn kube_reserved_cpu(vcpu: i64) -> i64 {
    let milli = vcpu * 1000;
    // Each band truncates on its own, in floating point, as upstream's does; integer
    // arithmetic would differ by a millicore on some sizes.
    [
        (0, 1000, 0.06),
        (1000, 2000, 0.01),
        (2000, 4000, 0.005),
        (4000, 1 << 31, 0.0025),
    ]
    .into_iter()
    .filter(|(start, _, _)| milli >= *start)
    .map(|(start, end, share): (i64, i64, f64)| ((milli.min(end) - start) as f64 * share) as i64)
    .sum()
}

fn reserved_list(values: &BTreeMap<String, String>, into: &mut Resources) {
    for (name, value) in values {
        into.set(name, quantity(value));
    }
}

/// An eviction signal: a percentage of the capacity, rounded up, or an absolute quantity.
fn eviction_signal(capacity_milli: i64, value: &str) -> i64 {
    match value.strip_suffix('%') {
        Some(percent) => {
            let p: f64 = percent.parse().unwrap_or(0.0);
            ((capacity_milli as f64 / 1000.0) / 100.0 * p).ceil() as i64 * 1000
        }
        None => quantity(value),
    }
}

/// The node's overhead: kube-reserved (EKS's formula unless set), system-reserved, and the
/// hard eviction thresholds (100Mi of memory and 10% of ephemeral storage unless set).
pub fn overhead(info: &InstanceTypeInfo, settings: &NodeClassSettings) -> Overhead {
    let pods_for_memory = if settings.eni_limited_memory_overhead() {
        // The bootstrap sizes this reservation before any ENIs are held back.
        eni_limited_pods_reserving(info, 0, settings.efa_only_interfaces)
    } else {
        pods(info, settings)
    };
    let mut kube_reserved = Resources::new();
    kube_reserved.cpu = kube_reserved_cpu(info.vcpu);
    kube_reserved.memory = (11 * pods_for_memory + 255) * MILLI_MIB;
    kube_reserved.ephemeral_storage = quantity("1Gi");
    reserved_list(&settings.kube_reserved, &mut kube_reserved);

    let mut system_reserved = Resources::new();
    reserved_list(&settings.system_reserved, &mut system_reserved);

    let memory = memory_mib(info, settings) * MILLI_MIB;
    let storage = ephemeral_storage(info, settings);
    let mut eviction_threshold = Resources::new();
    eviction_threshold.memory = 100 * MILLI_MIB;
    eviction_threshold.ephemeral_storage =
        ((storage as f64 / 1000.0) / 100.0 * 10.0).ceil() as i64 * 1000;
    if let Some(v) = settings.eviction_hard.get("memory.available") {
        eviction_threshold.memory = eviction_signal(memory, v);
    }
    if let Some(v) = settings.eviction_hard.get("nodefs.available") {
        eviction_threshold.ephemeral_storage = eviction_signal(storage, v);
    }
    Overhead {
        kube_reserved,
        system_reserved,
        eviction_threshold,
    }
}

/// The node's capacity: CPU, memory, pods, ephemeral storage and extended resources (GPUs,
/// Neuron devices, EFA, branch ENIs for security groups for pods).
pub fn capacity(info: &InstanceTypeInfo, settings: &NodeClassSettings) -> Resources {
    let mut capacity = Resources::new();
    capacity.cpu = info.vcpu * 1000;
    capacity.memory = memory_mib(info, settings) * MILLI_MIB;
    capacity.pods = pods(info, settings) * 1000;
    capacity.ephemeral_storage = ephemeral_storage(info, settings);
    let gpu_resource = match info.gpu_manufacturer.as_deref() {
        Some("nvidia") => Some("nvidia.com/gpu"),
        Some("amd") => Some("amd.com/gpu"),
        Some("habana") => Some("habana.ai/gaudi"),
        _ => None,
    };
    if let Some(resource) = gpu_resource.filter(|_| info.gpu_count > 0) {
        capacity.set(resource, info.gpu_count * 1000);
    }
    if info.accelerator_count > 0 && info.accelerator_manufacturer.as_deref() == Some("aws") {
        capacity.set("aws.amazon.com/neuron", info.accelerator_count * 1000);
    }
    if info.pod_eni > 0 {
        capacity.set("vpc.amazonaws.com/pod-eni", info.pod_eni * 1000);
    }
    let efa = settings.network_interfaces.unwrap_or(info.efa);
    if efa > 0 {
        capacity.set(RESOURCE_EFA, efa * 1000);
    }
    capacity
}

fn label(key: &str, value: Option<String>) -> Requirement {
    match value {
        Some(v) => Requirement::new(key, Operator::In, &[v]),
        None => Requirement::new(key, Operator::DoesNotExist, &[] as &[&str]),
    }
}

fn kebab(s: &str) -> String {
    s.to_lowercase().replace(' ', "-")
}

/// The type's requirements: well-known labels, the provider's labels (absent ones as
/// DoesNotExist, so a pod requiring a GPU never lands on a CPU type), the zones that both
/// offer the type and have a subnet, and the capacity types it can be bought as.
pub fn requirements(
    info: &InstanceTypeInfo,
    region: &str,
    offering_zones: &[String],
    subnet_zones: &[ZoneInfo],
    settings: &NodeClassSettings,
    reserved: &[Reservation],
) -> Requirements {
    let zones: Vec<&ZoneInfo> = subnet_zones
        .iter()
        .filter(|z| offering_zones.contains(&z.zone))
        .collect();
    let zone_names: Vec<&str> = zones.iter().map(|z| z.zone.as_str()).collect();
    let mut capacity_types = vec!["on-demand"];
    if info.spot_supported {
        capacity_types.push("spot");
    }
    if !reserved.is_empty() {
        capacity_types.push("reserved");
    }
    let os = if settings.ami_family.is_windows() {
        "windows"
    } else {
        "linux"
    };
    let (category, generation, family, size) = name_parts(&info.name);
    let flex = family.as_deref().is_some_and(|f| f.contains("-flex"));
    let some = |n: i64| (n > 0).then(|| n.to_string());
    let mut r: Requirements = [
        Requirement::new(INSTANCE_TYPE_LABEL, Operator::In, &[info.name.as_str()]),
        Requirement::new(ARCH_LABEL, Operator::In, &[info.architecture.as_str()]),
        Requirement::new(OS_LABEL, Operator::In, &[os]),
        Requirement::new(ZONE_LABEL, Operator::In, &zone_names),
        Requirement::new(REGION_LABEL, Operator::In, &[region]),
        Requirement::new(CAPACITY_TYPE_LABEL, Operator::In, &capacity_types),
        label(
            WINDOWS_BUILD_LABEL,
            settings.ami_family.windows_build().map(str::to_string),
        ),
        label(LABEL_INSTANCE_CPU, Some(info.vcpu.to_string())),
        label(LABEL_INSTANCE_MEMORY, Some(info.memory_mib.to_string())),
        label(LABEL_INSTANCE_CATEGORY, category),
        label(LABEL_INSTANCE_GENERATION, generation),
        label(LABEL_INSTANCE_FAMILY, family),
        label(LABEL_INSTANCE_SIZE, size),
        label(AWS_LABELS[6], info.cpu_manufacturer.as_deref().map(kebab)),
        label(
            AWS_LABELS[7],
            info.cpu_sustained_clock_mhz.map(|m| m.to_string()),
        ),
        label(AWS_LABELS[8], info.hypervisor.clone()),
        label(AWS_LABELS[9], Some(info.encryption_in_transit.to_string())),
        label(AWS_LABELS[10], some(info.gpu_count)),
        label(
            AWS_LABELS[11],
            info.gpu_name
                .as_deref()
                .filter(|_| info.gpu_count > 0)
                .map(kebab),
        ),
        label(
            AWS_LABELS[12],
            info.gpu_manufacturer
                .as_deref()
                .filter(|_| info.gpu_count > 0)
                .map(kebab),
        ),
        label(
            AWS_LABELS[13],
            some(info.gpu_memory_mib).filter(|_| info.gpu_count > 0),
        ),
        label(AWS_LABELS[14], some(info.accelerator_count)),
        label(
            AWS_LABELS[15],
            info.accelerator_name
                .as_deref()
                .filter(|_| info.accelerator_count > 0)
                .map(kebab),
        ),
        label(
            AWS_LABELS[16],
            info.accelerator_manufacturer
                .as_deref()
                .filter(|_| info.accelerator_count > 0)
                .map(kebab),
        ),
        label(AWS_LABELS[17], some(info.local_nvme_gib)),
        label(
            AWS_LABELS[18],
            info.network_bandwidth_mbps.map(|b| b.to_string()),
        ),
        label(
            AWS_LABELS[19],
            info.ebs_bandwidth_mbps.map(|b| b.to_string()),
        ),
        label(AWS_LABELS[20], Some(flex.to_string())),
        Requirement::new(AWS_LABELS[21], Operator::In, &["default", "dedicated"]),
    ]
    .into_iter()
    .collect();
    if reserved.is_empty() {
        r.add(label(LABEL_CAPACITY_RESERVATION_ID, None));
    } else {
        let ids: Vec<&str> = reserved.iter().map(|x| x.id.as_str()).collect();
        r.add(Requirement::new(
            LABEL_CAPACITY_RESERVATION_ID,
            Operator::In,
            &ids,
        ));
    }
    let zone_ids: Vec<&str> = zones.iter().filter_map(|z| z.zone_id.as_deref()).collect();
    if !zone_ids.is_empty() {
        r.add(Requirement::new(LABEL_ZONE_ID, Operator::In, &zone_ids));
    }
    r
}

/// The type's offerings: one per zone and capacity type that has a price, available unless
/// `unavailable` says a launch there recently failed for lack of capacity.
pub fn offerings(
    info: &InstanceTypeInfo,
    zones: &[String],
    pricing: &Pricing,
    reserved: &[Reservation],
    unavailable: &dyn Fn(&str, &str, &str) -> bool,
) -> Vec<Offering> {
    let mut offerings = Vec::new();
    for zone in zones {
        // Capacity already paid for is all but free to use, so it is chosen first (upstream
        // prices it at a ten-millionth of on-demand). One offering per reservation, as
        // upstream: the scheduler counts each down and pins a NodeClaim to the ones it may
        // launch into. A full reservation stays listed, unavailable, so the nodes in it keep
        // their price.
        if let Some(price) = pricing.on_demand(&info.name) {
            for reservation in reserved.iter().filter(|r| r.zone == *zone) {
                offerings.push(Offering {
                    zone: zone.clone(),
                    capacity_type: "reserved".into(),
                    price: price / 10_000_000.0,
                    available: reservation.available > 0
                        && !unavailable(&info.name, zone, "reserved"),
                    reservation: Some(karpenter_core::instancetype::Reservation {
                        id: reservation.id.clone(),
                        capacity: u32::try_from(reservation.available.max(0)).unwrap_or(u32::MAX),
                        label: LABEL_CAPACITY_RESERVATION_ID.into(),
                    }),
                });
            }
        }
        if let Some(price) = pricing.on_demand(&info.name) {
            offerings.push(Offering {
                zone: zone.clone(),
                capacity_type: "on-demand".into(),
                price,
                available: !unavailable(&info.name, zone, "on-demand"),
                reservation: None,
            });
        }
        if info.spot_supported
            && let Some(price) = pricing.spot(&info.name, zone)
        {
            offerings.push(Offering {
                zone: zone.clone(),
                capacity_type: "spot".into(),
                price,
                available: !unavailable(&info.name, zone, "spot"),
                reservation: None,
            });
        }
    }
    offerings
}

/// Resolves one instance type for a NodeClass: requirements, offerings in the zones that both
/// offer the type and have a subnet, capacity and overhead. `None` when no zone is left.
pub fn resolve(
    info: &InstanceTypeInfo,
    region: &str,
    offering_zones: &[String],
    subnet_zones: &[ZoneInfo],
    settings: &NodeClassSettings,
    pricing: &Pricing,
    unavailable: &dyn Fn(&str, &str, &str) -> bool,
) -> Option<InstanceType> {
    resolve_with_reservations(
        info,
        region,
        offering_zones,
        subnet_zones,
        settings,
        pricing,
        &[],
        unavailable,
    )
}

/// [`resolve`], with the NodeClass's capacity reservations of this type: each gets a
/// `reserved` offering, available while it has room.
#[allow(clippy::too_many_arguments)]
pub fn resolve_with_reservations(
    info: &InstanceTypeInfo,
    region: &str,
    offering_zones: &[String],
    subnet_zones: &[ZoneInfo],
    settings: &NodeClassSettings,
    pricing: &Pricing,
    reserved: &[Reservation],
    unavailable: &dyn Fn(&str, &str, &str) -> bool,
) -> Option<InstanceType> {
    let zones: Vec<String> = subnet_zones
        .iter()
        .filter(|z| offering_zones.contains(&z.zone))
        .map(|z| z.zone.clone())
        .collect();
    let reserved: Vec<Reservation> = reserved
        .iter()
        .filter(|r| r.instance_type == info.name && zones.contains(&r.zone))
        .cloned()
        .collect();
    let offerings = offerings(info, &zones, pricing, &reserved, unavailable);
    if offerings.is_empty() {
        return None;
    }
    Some(InstanceType::new(
        info.name.clone(),
        requirements(
            info,
            region,
            offering_zones,
            subnet_zones,
            settings,
            &reserved,
        ),
        offerings,
        capacity(info, settings),
        overhead(info, settings),
    ))
}
