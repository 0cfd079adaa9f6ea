//! ECS instance types as the cloudpilot-ai provider builds them
//! (`pkg/providers/instancetype/{instancetype,types}.go`), from two answers:
//!
//! * `DescribeInstanceTypes` ([`EcsInstanceType`]): what each type is — vCPUs, memory, GPUs,
//!   ENIs — read once per refresh and, in a Terway cluster, cut to the types whose ENIs can
//!   hold enough pods ([`supported_types`]);
//! * `DescribeAvailableResource`, once on demand and once with `SpotStrategy=SpotAsPriceGo`
//!   ([`Availability`]): which zones have stock of each type.
//!
//! [`instance_types`] turns them into instance types for one ECSNodeClass: offerings for every
//! zone any type is sold in × {on-demand, spot}, priced from a [`PriceTable`], available where
//! the type has stock, the NodeClass has a vSwitch and no recent launch failed; capacity and
//! ACK's node reservations ([`kube_reserved_cpu_milli`], [`kube_reserved_memory_mib`]) as
//! upstream computes them. The simulator's catalog ([`crate::catalog`]) builds its types with
//! the same [`instance_type`], so both use one formula.

use std::collections::{BTreeMap, BTreeSet};

use karpenter_api::Operator;
use karpenter_api::labels::{
    ARCH_AMD64, ARCH_ARM64, ARCH_LABEL, CAPACITY_TYPE_LABEL, CAPACITY_TYPE_ON_DEMAND,
    CAPACITY_TYPE_SPOT, INSTANCE_TYPE_LABEL, OS_LABEL, REGION_LABEL, WINDOWS_BUILD_LABEL,
    ZONE_LABEL,
};
use karpenter_core::instancetype::{InstanceType, Offering, Overhead};
use karpenter_core::resources::Resources;
use karpenter_core::scheduling::{Requirement, Requirements};
use serde::{Deserialize, Serialize};

use crate::ecsnodeclass::ECSNodeClassSpec;
use crate::pricing::PriceTable;

const MIB: i64 = 1 << 20;
const GIB: i64 = 1 << 30;

/// `karpenter.k8s.alibabacloud/instance-category` (`g` of `ecs.g7.large`).
pub const LABEL_INSTANCE_CATEGORY: &str = "karpenter.k8s.alibabacloud/instance-category";
/// `karpenter.k8s.alibabacloud/instance-family` (`ecs.g7`).
pub const LABEL_INSTANCE_FAMILY: &str = "karpenter.k8s.alibabacloud/instance-family";
/// `karpenter.k8s.alibabacloud/instance-generation` (`7`).
pub const LABEL_INSTANCE_GENERATION: &str = "karpenter.k8s.alibabacloud/instance-generation";
/// `karpenter.k8s.alibabacloud/instance-size` (`large`).
pub const LABEL_INSTANCE_SIZE: &str = "karpenter.k8s.alibabacloud/instance-size";
/// `karpenter.k8s.alibabacloud/instance-cpu` (vCPUs).
pub const LABEL_INSTANCE_CPU: &str = "karpenter.k8s.alibabacloud/instance-cpu";
/// `karpenter.k8s.alibabacloud/instance-cpu-model` (`intel`, `amd`).
pub const LABEL_INSTANCE_CPU_MODEL: &str = "karpenter.k8s.alibabacloud/instance-cpu-model";
/// `karpenter.k8s.alibabacloud/instance-memory` (MiB).
pub const LABEL_INSTANCE_MEMORY: &str = "karpenter.k8s.alibabacloud/instance-memory";
/// `karpenter.k8s.alibabacloud/instance-gpu-name` (`nvidia-t4`).
pub const LABEL_INSTANCE_GPU_NAME: &str = "karpenter.k8s.alibabacloud/instance-gpu-name";
/// `karpenter.k8s.alibabacloud/instance-gpu-manufacturer` (`NVIDIA`, as `GPUSpec` spells it).
pub const LABEL_INSTANCE_GPU_MANUFACTURER: &str =
    "karpenter.k8s.alibabacloud/instance-gpu-manufacturer";
/// `karpenter.k8s.alibabacloud/instance-gpu-count`.
pub const LABEL_INSTANCE_GPU_COUNT: &str = "karpenter.k8s.alibabacloud/instance-gpu-count";
/// `karpenter.k8s.alibabacloud/instance-gpu-memory` (GiB per GPU).
pub const LABEL_INSTANCE_GPU_MEMORY: &str = "karpenter.k8s.alibabacloud/instance-gpu-memory";
/// `topology.k8s.alibabacloud/zone-id`: the zone again (ECS zone names are their ids).
pub const LABEL_TOPOLOGY_ZONE_ID: &str = "topology.k8s.alibabacloud/zone-id";

/// The labels upstream registers as well known: pods may require them.
pub const LABELS: [&str; 12] = [
    LABEL_INSTANCE_CATEGORY,
    LABEL_INSTANCE_FAMILY,
    LABEL_INSTANCE_GENERATION,
    LABEL_INSTANCE_SIZE,
    LABEL_INSTANCE_CPU,
    LABEL_INSTANCE_CPU_MODEL,
    LABEL_INSTANCE_MEMORY,
    LABEL_INSTANCE_GPU_NAME,
    LABEL_INSTANCE_GPU_MANUFACTURER,
    LABEL_INSTANCE_GPU_COUNT,
    LABEL_INSTANCE_GPU_MEMORY,
    LABEL_TOPOLOGY_ZONE_ID,
];

/// NVIDIA GPUs.
pub const RESOURCE_NVIDIA_GPU: &str = "nvidia.com/gpu";
/// AMD GPUs.
pub const RESOURCE_AMD_GPU: &str = "amd.com/gpu";
/// Secondary ENIs, which Terway's exclusive-ENI pods request.
pub const RESOURCE_ALIYUN_ENI: &str = "aliyun/eni";

/// The share of an instance's memory the hypervisor keeps (`--vm-memory-overhead-percent`,
/// `VM_MEMORY_OVERHEAD_PERCENT`, default 0.065).
pub const VM_MEMORY_OVERHEAD_PERCENT: f64 = 0.065;
/// Pods per node when neither the NodeClass nor the CNI says otherwise (the kubelet's
/// default, upstream's `KubeletMaxPods`).
pub const DEFAULT_MAX_PODS: i64 = 110;
/// Pods per node on Flannel (ACK's Flannel default).
pub const FLANNEL_MAX_PODS: i64 = 256;
/// Host-network pods a Terway node runs besides the ENI-addressed ones.
pub const TERWAY_HOST_NETWORK_PODS: i64 = 3;
/// The fewest ENI-addressed pods a type must hold to be offered in a Terway cluster.
pub const TERWAY_MIN_ENI_PODS: i64 = 11;
/// The system disk when the NodeClass sets no `volumeSize`: the node's ephemeral storage.
pub const DEFAULT_SYSTEM_DISK: &str = "20Gi";
/// The `StatusCategory` values that mean a zone, or a type in it, can be launched:
/// `ClosedWithStock` has stock, ECS just will not add more.
pub const WITH_STOCK: [&str; 2] = ["WithStock", "ClosedWithStock"];

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

/// ACK's kube-reserved memory in MiB for `memory_mib` of (VM) memory: `11 × pods + 255`, at
/// most a quarter of the memory, and 200 MiB more because upstream measured real nodes
/// reserving that much beyond the published formula.
pub fn kube_reserved_memory_mib(pods: i64, memory_mib: i64) -> i64 {
    (11 * pods + 255).min(memory_mib / 4) + 200
}

/// The memory a node with `memory_bytes` reports: less `overhead_percent` for the hypervisor,
/// rounded up to whole MiB.
pub fn memory_capacity_bytes(memory_bytes: i64, overhead_percent: f64) -> i64 {
    if memory_bytes == 0 {
        return 0;
    }
    let overhead_mib = (memory_bytes as f64 * overhead_percent / MIB as f64).ceil() as i64;
    memory_bytes - overhead_mib * MIB
}

/// Bytes of a `MemorySize` in GiB. The SDK reads it as a 32-bit float and upstream writes it
/// as `%fGi` (six decimals) before parsing it as a quantity, which rounds up to a byte; the
/// same steps here give the same bytes for fractional sizes (`0.5`, `1.5`, …).
pub fn memory_bytes(memory_gib: f64) -> i64 {
    let text = format!("{:.6}", memory_gib as f32);
    let (whole, frac) = text.split_once('.').unwrap_or((&text, "0"));
    let micro = whole.parse::<i128>().unwrap_or(0) * 1_000_000 + frac.parse::<i128>().unwrap_or(0);
    let bytes = (micro * i128::from(GIB) + 999_999) / 1_000_000;
    i64::try_from(bytes).unwrap_or(i64::MAX)
}

/// A number as Go's `fmt.Sprint` of a `float32` writes it below a million: whole numbers
/// without a point, others in the shortest form that reads back (`22.5`).
fn float32_label(v: f32) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

/// One item of `DescribeInstanceTypes` (`InstanceTypes.InstanceType[]`), the fields the
/// provider reads. Missing fields read as zero or empty, as the SDK's nil pointers do through
/// `tea.Int32Value`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub struct EcsInstanceType {
    /// `ecs.g7.large`.
    pub instance_type_id: String,
    /// `ecs.g7` (upstream reads the family from the name instead).
    pub instance_type_family: String,
    /// vCPUs.
    pub cpu_core_count: i64,
    /// Memory in GiB.
    pub memory_size: f64,
    /// `X86` or `ARM`.
    pub cpu_architecture: String,
    /// GPUs.
    #[serde(rename = "GPUAmount")]
    pub gpu_amount: i64,
    /// `NVIDIA T4`: manufacturer, then model.
    #[serde(rename = "GPUSpec")]
    pub gpu_spec: String,
    /// Memory per GPU, GiB.
    #[serde(rename = "GPUMemorySize")]
    pub gpu_memory_size: f64,
    /// ENIs the type takes, the primary one included.
    pub eni_quantity: i64,
    /// Private IPv4 addresses per ENI.
    pub eni_private_ip_address_quantity: i64,
    /// The CPU (`Intel Xeon(Ice Lake) Platinum 8369B`); absent on some types.
    pub physical_processor_model: Option<String>,
    /// Local disks' capacity, GiB. Not ephemeral storage: upstream's nodes keep images and
    /// pods on the system disk.
    pub local_storage_capacity: i64,
    /// Local disks.
    pub local_storage_amount: i64,
    /// `local_ssd_pro`, `local_hdd_pro`, …
    pub local_storage_category: String,
}

impl EcsInstanceType {
    /// The Kubernetes architecture: `ARM` is arm64, anything else amd64 (upstream's default).
    pub fn arch(&self) -> &'static str {
        match self.cpu_architecture.as_str() {
            "ARM" => ARCH_ARM64,
            _ => ARCH_AMD64,
        }
    }

    /// Pods Terway can address through the type's secondary ENIs.
    pub fn terway_eni_pods(&self) -> i64 {
        (self.eni_quantity - 1) * self.eni_private_ip_address_quantity
    }

    /// The GPUs' manufacturer: the first word of `GPUSpec`.
    pub fn gpu_manufacturer(&self) -> &str {
        self.gpu_spec.split(' ').next().unwrap_or_default()
    }
}

/// One page of `DescribeInstanceTypes`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub struct DescribeInstanceTypesPage {
    /// The types.
    pub instance_types: InstanceTypeList,
    /// The next page's token; absent or empty on the last.
    pub next_token: Option<String>,
    /// The request's id.
    pub request_id: String,
}

/// `InstanceTypes` of a page.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub struct InstanceTypeList {
    /// The items.
    pub instance_type: Vec<EcsInstanceType>,
}

/// The container network of the cluster, which decides pods per node.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Cni {
    /// Terway in ENI-IP mode: pods take the secondary ENIs' addresses.
    Terway,
    /// Flannel.
    Flannel,
    /// Anything else: the kubelet's default.
    #[default]
    Other,
}

impl Cni {
    /// The CNI of ACK's cluster metadata (`MetaData.Capabilities.Network`): `terway-eniip` or
    /// `Flannel`; anything else is [`Cni::Other`].
    pub fn from_ack(network: &str) -> Self {
        match network {
            "terway-eniip" => Cni::Terway,
            "Flannel" => Cni::Flannel,
            _ => Cni::Other,
        }
    }
}

/// The types the cluster can run: in a Terway cluster only those whose secondary ENIs hold
/// [`TERWAY_MIN_ENI_PODS`] pods (upstream's refresh drops the others).
pub fn supported_types(types: Vec<EcsInstanceType>, cni: Cni) -> Vec<EcsInstanceType> {
    types
        .into_iter()
        .filter(|t| cni != Cni::Terway || t.terway_eni_pods() >= TERWAY_MIN_ENI_PODS)
        .collect()
}

/// The NodeClass and cluster settings that shape instance types.
#[derive(Clone, Debug, PartialEq)]
pub struct InstanceTypeOptions {
    /// The region (`topology.kubernetes.io/region`).
    pub region: String,
    /// `kubeletConfiguration.maxPods`.
    pub max_pods: Option<i32>,
    /// `kubeletConfiguration.podsPerCore`.
    pub pods_per_core: Option<i32>,
    /// `systemDisk.volumeSize`, a quantity.
    pub system_disk_volume_size: Option<String>,
    /// The cluster's CNI.
    pub cni: Cni,
    /// The share of memory the hypervisor keeps.
    pub vm_memory_overhead_percent: f64,
}

impl InstanceTypeOptions {
    /// Options for a region with every NodeClass setting at its default.
    pub fn new(region: impl Into<String>) -> Self {
        Self {
            region: region.into(),
            max_pods: None,
            pods_per_core: None,
            system_disk_volume_size: None,
            cni: Cni::Other,
            vm_memory_overhead_percent: VM_MEMORY_OVERHEAD_PERCENT,
        }
    }

    /// The options an ECSNodeClass sets. Its `kubeReserved`, `systemReserved` and eviction
    /// thresholds are not among them: upstream neither hands them to the node (ACK's node
    /// config carries only `maxPods`) nor counts them, so the node reserves ACK's figures and
    /// counting the NodeClass's would misstate its allocatable.
    pub fn for_node_class(
        spec: &ECSNodeClassSpec,
        region: impl Into<String>,
        cni: Cni,
        vm_memory_overhead_percent: f64,
    ) -> Self {
        let kubelet = spec.kubelet_configuration.as_ref();
        Self {
            region: region.into(),
            max_pods: kubelet.and_then(|k| k.max_pods),
            pods_per_core: kubelet.and_then(|k| k.pods_per_core),
            // As launches size the disk: `volumeSize`, else `size` in GiB.
            system_disk_volume_size: spec.system_disk.as_ref().and_then(|d| {
                d.volume_size
                    .clone()
                    .or_else(|| d.size.filter(|s| *s > 0).map(|s| format!("{s}Gi")))
            }),
            cni,
            vm_memory_overhead_percent,
        }
    }
}

/// Pods per node: `maxPods` if set, else by CNI — Terway's ENI addresses plus the host-network
/// pods, Flannel's 256, or the kubelet's 110 — at most `podsPerCore` × vCPUs when that is set.
pub fn max_pods(info: &EcsInstanceType, options: &InstanceTypeOptions) -> i64 {
    let count = match (options.max_pods, options.cni) {
        (Some(max), _) => i64::from(max),
        (None, Cni::Terway) => info.terway_eni_pods() + TERWAY_HOST_NETWORK_PODS,
        (None, Cni::Flannel) => FLANNEL_MAX_PODS,
        (None, Cni::Other) => DEFAULT_MAX_PODS,
    };
    match options.pods_per_core {
        Some(per_core) if per_core > 0 => count.min(i64::from(per_core) * info.cpu_core_count),
        _ => count,
    }
}

/// The ephemeral storage, milli-bytes: the system disk's `volumeSize`, else 20 GiB.
fn ephemeral_storage_milli(options: &InstanceTypeOptions) -> i64 {
    let default = || karpenter_core::resources::parse_milli(DEFAULT_SYSTEM_DISK).unwrap_or(0);
    options
        .system_disk_volume_size
        .as_deref()
        .and_then(|q| karpenter_core::resources::parse_milli(q).ok())
        .unwrap_or_else(default)
}

/// The machine's resources: vCPUs, memory less the VM overhead, the system disk, pods, GPUs by
/// manufacturer and the secondary ENIs.
pub fn capacity(info: &EcsInstanceType, options: &InstanceTypeOptions) -> Resources {
    let mut capacity = Resources::new();
    capacity.cpu = info.cpu_core_count * 1000;
    capacity.memory = memory_capacity_bytes(
        memory_bytes(info.memory_size),
        options.vm_memory_overhead_percent,
    ) * 1000;
    capacity.ephemeral_storage = ephemeral_storage_milli(options);
    capacity.pods = max_pods(info, options) * 1000;
    match info.gpu_manufacturer().to_ascii_lowercase().as_str() {
        "nvidia" if info.gpu_amount > 0 => {
            capacity.set(RESOURCE_NVIDIA_GPU, info.gpu_amount * 1000)
        }
        "amd" if info.gpu_amount > 0 => capacity.set(RESOURCE_AMD_GPU, info.gpu_amount * 1000),
        _ => {}
    }
    // Upstream always offers the secondary ENIs; a type reporting none has none to offer.
    let secondary_enis = info.eni_quantity - 1;
    if secondary_enis > 0 {
        capacity.set(RESOURCE_ALIYUN_ENI, secondary_enis * 1000);
    }
    capacity
}

/// ACK's reservations for a node of `info` with `capacity`: CPU by cores, memory by pods and
/// the VM's memory (before the hypervisor's share). Upstream puts all of it in kube-reserved.
pub fn overhead(info: &EcsInstanceType, capacity: &Resources) -> Overhead {
    let mut kube_reserved = Resources::new();
    kube_reserved.cpu = kube_reserved_cpu_milli(capacity.cpu);
    let memory_mib = memory_bytes(info.memory_size) / MIB;
    kube_reserved.memory = kube_reserved_memory_mib(capacity.pods / 1000, memory_mib) * MIB * 1000;
    Overhead {
        kube_reserved,
        ..Default::default()
    }
}

/// Category and generation from a type name, as upstream's `^ecs\.([a-z]+)(-[0-9]+tb)?([0-9]+)`
/// reads them (`ecs.g7.large`: `g`, `7`; `ecs.re6p-13tb2.26xlarge`: `re`, `6`).
pub fn category_and_generation(name: &str) -> Option<(String, String)> {
    let rest = name.strip_prefix("ecs.")?;
    let category: String = rest.chars().take_while(char::is_ascii_lowercase).collect();
    let mut after = &rest[category.len()..];
    if let Some(tb) = after.strip_prefix('-') {
        let digits = tb.find(|c: char| !c.is_ascii_digit()).unwrap_or(tb.len());
        if digits > 0 && tb[digits..].starts_with("tb") {
            after = &tb[digits + 2..];
        }
    }
    let generation: String = after.chars().take_while(char::is_ascii_digit).collect();
    (!category.is_empty() && !generation.is_empty()).then_some((category, generation))
}

/// Family and size from a name of three dotted parts (`ecs.g7.large`: `ecs.g7`, `large`).
pub fn family_and_size(name: &str) -> Option<(String, String)> {
    match name.split('.').collect::<Vec<_>>().as_slice() {
        [ecs, family, size] => Some((format!("{ecs}.{family}"), size.to_string())),
        _ => None,
    }
}

/// The GPU name label of a `GPUSpec`: lower case, spaces, slashes and stars as dashes.
pub fn gpu_name(spec: &str) -> String {
    spec.replace([' ', '/', '*'], "-").to_lowercase()
}

/// The CPU model label of a `PhysicalProcessorModel`: `amd`, `intel`, or empty for any other
/// maker (upstream sets the label empty then rather than leaving it out).
pub fn cpu_model(model: &str) -> &'static str {
    if model.contains("AMD") {
        "amd"
    } else if model.contains("Intel") {
        "intel"
    } else {
        ""
    }
}

fn requirement(key: &str, values: &[&str]) -> Requirement {
    Requirement::new(key, Operator::In, values)
}

fn optional(key: &str, value: Option<&str>) -> Requirement {
    match value {
        Some(v) => requirement(key, &[v]),
        None => Requirement::new(key, Operator::DoesNotExist, &[] as &[&str]),
    }
}

/// The type's labels as requirements. Zones and capacity types span the available offerings
/// only; the zone id is set only when some offering is available.
pub fn requirements(info: &EcsInstanceType, offerings: &[Offering], region: &str) -> Requirements {
    let available = || offerings.iter().filter(|o| o.available);
    let zones: Vec<&str> = available()
        .map(|o| o.zone.as_str())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let capacity_types: Vec<&str> = available()
        .map(|o| o.capacity_type.as_str())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let name = info.instance_type_id.as_str();
    let (category, generation) = category_and_generation(name).unzip();
    let (family, size) = family_and_size(name).unzip();
    let cpu = info.cpu_core_count.to_string();
    let memory = float32_label(info.memory_size as f32 * 1024.0);
    let gpu = info.gpu_amount != 0;
    let gpu_name = gpu.then(|| gpu_name(&info.gpu_spec));
    let gpu_count = gpu.then(|| info.gpu_amount.to_string());
    let gpu_memory = gpu.then(|| float32_label(info.gpu_memory_size as f32));
    let mut r: Requirements = [
        requirement(INSTANCE_TYPE_LABEL, &[name]),
        requirement(ARCH_LABEL, &[info.arch()]),
        requirement(OS_LABEL, &["linux"]),
        requirement(ZONE_LABEL, &zones),
        requirement(REGION_LABEL, &[region]),
        optional(WINDOWS_BUILD_LABEL, None),
        requirement(CAPACITY_TYPE_LABEL, &capacity_types),
        requirement(LABEL_INSTANCE_CPU, &[&cpu]),
        optional(
            LABEL_INSTANCE_CPU_MODEL,
            info.physical_processor_model.as_deref().map(cpu_model),
        ),
        requirement(LABEL_INSTANCE_MEMORY, &[&memory]),
        optional(LABEL_INSTANCE_CATEGORY, category.as_deref()),
        optional(LABEL_INSTANCE_FAMILY, family.as_deref()),
        optional(LABEL_INSTANCE_GENERATION, generation.as_deref()),
        optional(LABEL_INSTANCE_SIZE, size.as_deref()),
        optional(LABEL_INSTANCE_GPU_NAME, gpu_name.as_deref()),
        optional(
            LABEL_INSTANCE_GPU_MANUFACTURER,
            gpu.then(|| info.gpu_manufacturer()),
        ),
        optional(LABEL_INSTANCE_GPU_COUNT, gpu_count.as_deref()),
        optional(LABEL_INSTANCE_GPU_MEMORY, gpu_memory.as_deref()),
    ]
    .into_iter()
    .collect();
    if !zones.is_empty() {
        r.add(requirement(LABEL_TOPOLOGY_ZONE_ID, &zones));
    }
    r
}

/// One type as an instance type with `offerings`; `None` without any offering (no price in
/// any zone), as upstream drops such types.
pub fn instance_type(
    info: &EcsInstanceType,
    offerings: Vec<Offering>,
    options: &InstanceTypeOptions,
) -> Option<InstanceType> {
    if offerings.is_empty() {
        return None;
    }
    let capacity = capacity(info, options);
    let overhead = overhead(info, &capacity);
    Some(InstanceType::new(
        info.instance_type_id.clone(),
        requirements(info, &offerings, &options.region),
        offerings,
        capacity,
        overhead,
    ))
}

/// Zones with stock, by instance type: one `DescribeAvailableResource` answer read.
pub type ZonesByType = BTreeMap<String, BTreeSet<String>>;

/// `DescribeAvailableResource`'s answer (`AvailableZones.AvailableZone[]`).
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub struct DescribeAvailableResourceAnswer {
    /// The zones.
    pub available_zones: AvailableZones,
    /// The request's id.
    pub request_id: String,
}

/// `AvailableZones`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub struct AvailableZones {
    /// One per zone.
    pub available_zone: Vec<AvailableZone>,
}

/// A zone and what it has.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub struct AvailableZone {
    /// `cn-hangzhou-i`.
    pub zone_id: String,
    /// `Available` or `SoldOut`.
    pub status: String,
    /// `WithStock`, `ClosedWithStock`, `WithoutStock` or `ClosedWithoutStock`.
    pub status_category: String,
    /// The resources.
    pub available_resources: AvailableResources,
}

/// `AvailableResources`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub struct AvailableResources {
    /// By kind (`InstanceType`).
    pub available_resource: Vec<AvailableResource>,
}

/// Resources of one kind.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub struct AvailableResource {
    /// `InstanceType`.
    #[serde(rename = "Type")]
    pub kind: String,
    /// The resources.
    pub supported_resources: SupportedResources,
}

/// `SupportedResources`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub struct SupportedResources {
    /// The items.
    pub supported_resource: Vec<SupportedResource>,
}

/// One resource in one zone.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub struct SupportedResource {
    /// The instance type.
    pub value: String,
    /// `Available` or `SoldOut`.
    pub status: String,
    /// As the zone's.
    pub status_category: String,
}

/// Whether a zone or resource has stock. Upstream reads `StatusCategory`; an answer without
/// one falls back to `Status` being `Available`.
fn with_stock(status_category: &str, status: &str) -> bool {
    if status_category.is_empty() {
        status == "Available"
    } else {
        WITH_STOCK.contains(&status_category)
    }
}

/// Why instance types cannot be listed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum InstanceTypesError {
    /// `DescribeAvailableResource` answered without zones.
    #[error("DescribeAvailableResource returned no zones (RequestId {request_id})")]
    NoZones {
        /// The answer's request id.
        request_id: String,
    },
    /// No instance types are known yet.
    #[error("no instance types found")]
    NoInstanceTypes,
    /// No on-demand availability is known yet.
    #[error("no instance types offerings found")]
    NoOnDemandOfferings,
    /// No spot availability is known yet.
    #[error("no spot instance types offerings found")]
    NoSpotOfferings,
    /// The NodeClass has no vSwitches resolved.
    #[error("no vswitches found")]
    NoVSwitches,
}

/// The zones with stock of each type in one answer: zones and types whose `StatusCategory` is
/// `WithStock` or `ClosedWithStock`. An answer without zones is an error, as upstream treats
/// it: an empty map would read as "nothing launches anywhere".
pub fn zones_with_stock(
    answer: &DescribeAvailableResourceAnswer,
) -> Result<ZonesByType, InstanceTypesError> {
    let zones = &answer.available_zones.available_zone;
    if zones.is_empty() {
        return Err(InstanceTypesError::NoZones {
            request_id: answer.request_id.clone(),
        });
    }
    let mut by_type = ZonesByType::new();
    for zone in zones
        .iter()
        .filter(|z| with_stock(&z.status_category, &z.status))
    {
        for resource in zone
            .available_resources
            .available_resource
            .iter()
            .flat_map(|r| &r.supported_resources.supported_resource)
            .filter(|r| with_stock(&r.status_category, &r.status))
        {
            by_type
                .entry(resource.value.clone())
                .or_default()
                .insert(zone.zone_id.clone());
        }
    }
    Ok(by_type)
}

/// Where each type has stock, on demand and as spot.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Availability {
    /// From `DescribeAvailableResource` with `InstanceChargeType=PostPaid`.
    pub on_demand: ZonesByType,
    /// From `DescribeAvailableResource` with `SpotStrategy=SpotAsPriceGo`.
    pub spot: ZonesByType,
}

impl Availability {
    /// Every zone some type is sold in on demand: the zones offerings are made for (upstream
    /// takes them from the on-demand answer only).
    pub fn zones(&self) -> BTreeSet<&str> {
        self.on_demand
            .values()
            .flatten()
            .map(String::as_str)
            .collect()
    }
}

/// Whether recent launch failures ruled an offering out: `(type, zone, capacity type)`.
pub type Unavailable<'a> = &'a dyn Fn(&str, &str, &str) -> bool;

/// A type's offerings: in every zone of `availability`, an on-demand offering when the type
/// has an on-demand price and a spot offering when it has a spot price there; each available
/// when the type has stock of that kind in the zone, the NodeClass has a vSwitch there, and
/// `unavailable` does not rule it out.
pub fn offerings(
    name: &str,
    availability: &Availability,
    vswitch_zones: &BTreeSet<String>,
    prices: &PriceTable,
    unavailable: Unavailable<'_>,
) -> Vec<Offering> {
    let has = |map: &ZonesByType, zone: &str| map.get(name).is_some_and(|z| z.contains(zone));
    let mut out = Vec::new();
    for zone in availability.zones() {
        let reachable = vswitch_zones.contains(zone);
        if let Some(price) = prices.on_demand(name) {
            out.push(Offering {
                zone: zone.to_string(),
                capacity_type: CAPACITY_TYPE_ON_DEMAND.into(),
                price,
                available: reachable
                    && has(&availability.on_demand, zone)
                    && !unavailable(name, zone, CAPACITY_TYPE_ON_DEMAND),
                reservation: None,
            });
        }
        if let Some(price) = prices.spot(name, zone) {
            out.push(Offering {
                zone: zone.to_string(),
                capacity_type: CAPACITY_TYPE_SPOT.into(),
                price,
                available: reachable
                    && has(&availability.spot, zone)
                    && !unavailable(name, zone, CAPACITY_TYPE_SPOT),
                reservation: None,
            });
        }
    }
    out
}

/// The instance types of one NodeClass, whose vSwitches are in `vswitch_zones`. Fails, as
/// upstream's list does, until types, both availabilities and the vSwitches are known.
pub fn instance_types(
    types: &[EcsInstanceType],
    availability: &Availability,
    vswitch_zones: &BTreeSet<String>,
    options: &InstanceTypeOptions,
    prices: &PriceTable,
    unavailable: Unavailable<'_>,
) -> Result<Vec<InstanceType>, InstanceTypesError> {
    if types.is_empty() {
        return Err(InstanceTypesError::NoInstanceTypes);
    }
    if availability.on_demand.is_empty() {
        return Err(InstanceTypesError::NoOnDemandOfferings);
    }
    if availability.spot.is_empty() {
        return Err(InstanceTypesError::NoSpotOfferings);
    }
    if vswitch_zones.is_empty() {
        return Err(InstanceTypesError::NoVSwitches);
    }
    Ok(types
        .iter()
        .filter_map(|info| {
            let offerings = offerings(
                &info.instance_type_id,
                availability,
                vswitch_zones,
                prices,
                unavailable,
            );
            instance_type(info, offerings, options)
        })
        .collect())
}

#[cfg(test)]
#[path = "instancetype_tests.rs"]
mod tests;
