//! Instance types from the Resource SKUs list, as upstream's provider builds them, in two
//! steps: [`supported_skus`] keeps the VM sizes AKS can run a node on in the region (the
//! refresh), and [`instance_types`] turns them into instance types for one NodeClass — its
//! image family, disk, pod density and security settings filter and shape them — with a spot
//! and an on-demand offering per zone, priced from a [`PriceTable`].

use std::collections::{BTreeMap, BTreeSet};

use karpenter_api::Operator;
use karpenter_api::labels::{
    ARCH_LABEL, CAPACITY_TYPE_LABEL, CAPACITY_TYPE_ON_DEMAND, CAPACITY_TYPE_SPOT,
    INSTANCE_TYPE_LABEL, OS_LABEL, REGION_LABEL, ZONE_LABEL,
};
use karpenter_core::instancetype::{InstanceType, Offering};
use karpenter_core::resources::Resources;
use karpenter_core::scheduling::{Requirement, Requirements};

use crate::catalog::{
    DEFAULT_MAX_PODS, DEFAULT_OS_DISK_GB, VM_MEMORY_OVERHEAD_PERCENT, is_known_sku,
    memory_capacity_bytes_with_overhead, overhead,
};
use crate::gpus;
use crate::pricing::{MISSING_PRICE, PriceTable};
use crate::skus::{ResourceSku, VIRTUAL_MACHINES};
use crate::vmsize::{self, VmSize};

/// `karpenter.azure.com/sku-name` (`Standard_D2s_v3`).
pub const LABEL_SKU_NAME: &str = "karpenter.azure.com/sku-name";
/// `karpenter.azure.com/sku-family` (`D`).
pub const LABEL_SKU_FAMILY: &str = "karpenter.azure.com/sku-family";
/// `karpenter.azure.com/sku-series` (`Ds_v3`).
pub const LABEL_SKU_SERIES: &str = "karpenter.azure.com/sku-series";
/// `karpenter.azure.com/sku-version` (`3`; `1` when the name has none).
pub const LABEL_SKU_VERSION: &str = "karpenter.azure.com/sku-version";
/// `karpenter.azure.com/sku-cpu` (vCPUs).
pub const LABEL_SKU_CPU: &str = "karpenter.azure.com/sku-cpu";
/// `karpenter.azure.com/sku-memory` (MiB).
pub const LABEL_SKU_MEMORY: &str = "karpenter.azure.com/sku-memory";
/// `kubernetes.azure.com/sku-cpu`: AKS's copy of [`LABEL_SKU_CPU`].
pub const AKS_LABEL_CPU: &str = "kubernetes.azure.com/sku-cpu";
/// `kubernetes.azure.com/sku-memory`: AKS's copy of [`LABEL_SKU_MEMORY`].
pub const AKS_LABEL_MEMORY: &str = "kubernetes.azure.com/sku-memory";
/// `karpenter.azure.com/sku-networking-accelerated` (`true`/`false`).
pub const LABEL_SKU_ACCELERATED_NETWORKING: &str = "karpenter.azure.com/sku-networking-accelerated";
/// `karpenter.azure.com/sku-storage-premium-capable` (`true`/`false`).
pub const LABEL_SKU_STORAGE_PREMIUM_CAPABLE: &str =
    "karpenter.azure.com/sku-storage-premium-capable";
/// `karpenter.azure.com/sku-storage-ephemeralos-maxsize` (GB); absent without ephemeral OS
/// disk support.
pub const LABEL_SKU_STORAGE_EPHEMERAL_OS_MAX_SIZE: &str =
    "karpenter.azure.com/sku-storage-ephemeralos-maxsize";
/// `karpenter.azure.com/sku-storage-ultra-ssd` (`true` and/or `false`).
pub const LABEL_ULTRA_SSD: &str = "karpenter.azure.com/sku-storage-ultra-ssd";
/// `karpenter.azure.com/sku-gpu-name` (`A100`).
pub const LABEL_SKU_GPU_NAME: &str = "karpenter.azure.com/sku-gpu-name";
/// `karpenter.azure.com/sku-gpu-manufacturer` (`nvidia`, `amd`).
pub const LABEL_SKU_GPU_MANUFACTURER: &str = "karpenter.azure.com/sku-gpu-manufacturer";
/// `karpenter.azure.com/sku-gpu-count`.
pub const LABEL_SKU_GPU_COUNT: &str = "karpenter.azure.com/sku-gpu-count";
/// `karpenter.azure.com/placement-scope` (`zonal`, `regional`).
pub const LABEL_PLACEMENT_SCOPE: &str = "karpenter.azure.com/placement-scope";
/// `karpenter.azure.com/sku-hyperv-generation` (`1`, `2`).
pub const LABEL_SKU_HYPERV_GENERATION: &str = "karpenter.azure.com/sku-hyperv-generation";
/// `kubernetes.azure.com/mode` (`system`, `user`).
pub const AKS_LABEL_MODE: &str = "kubernetes.azure.com/mode";
/// `kubernetes.azure.com/scalesetpriority` (`regular`, `spot`).
pub const AKS_LABEL_SCALE_SET_PRIORITY: &str = "kubernetes.azure.com/scalesetpriority";
/// `kubernetes.azure.com/priority` (`regular`, `spot`).
pub const AKS_LABEL_PRIORITY: &str = "kubernetes.azure.com/priority";
/// `kubernetes.azure.com/os-sku` (`Ubuntu`, `AzureLinux`).
pub const AKS_LABEL_OS_SKU: &str = "kubernetes.azure.com/os-sku";
/// `kubernetes.azure.com/fips_enabled` (`true`, or absent).
pub const AKS_LABEL_FIPS_ENABLED: &str = "kubernetes.azure.com/fips_enabled";

/// The labels instance types carry beyond the well-known Kubernetes ones.
pub const AZURE_LABELS: [&str; 24] = [
    LABEL_SKU_NAME,
    LABEL_SKU_FAMILY,
    LABEL_SKU_SERIES,
    LABEL_SKU_VERSION,
    LABEL_SKU_CPU,
    LABEL_SKU_MEMORY,
    AKS_LABEL_CPU,
    AKS_LABEL_MEMORY,
    LABEL_SKU_ACCELERATED_NETWORKING,
    LABEL_SKU_STORAGE_PREMIUM_CAPABLE,
    LABEL_SKU_STORAGE_EPHEMERAL_OS_MAX_SIZE,
    LABEL_ULTRA_SSD,
    LABEL_SKU_GPU_NAME,
    LABEL_SKU_GPU_MANUFACTURER,
    LABEL_SKU_GPU_COUNT,
    LABEL_PLACEMENT_SCOPE,
    LABEL_SKU_HYPERV_GENERATION,
    AKS_LABEL_MODE,
    AKS_LABEL_SCALE_SET_PRIORITY,
    AKS_LABEL_PRIORITY,
    AKS_LABEL_OS_SKU,
    AKS_LABEL_FIPS_ENABLED,
    REGION_LABEL,
    ZONE_LABEL,
];

/// The zone label of a VM placed in no zone: AKS labels regional nodes with fault domain `0`.
pub const REGIONAL_ZONE: &str = "0";

/// Sizes AKS refuses for node pools: too small to run a node.
pub const AKS_RESTRICTED_SIZES: [&str; 12] = [
    "Standard_A0",
    "Standard_A1",
    "Standard_A1_v2",
    "Standard_B1s",
    "Standard_B1ms",
    "Standard_F1",
    "Standard_F1s",
    "Basic_A0",
    "Basic_A1",
    "Basic_A2",
    "Basic_A3",
    "Basic_A4",
];

/// Sizes known not to work with the provider.
pub const KARPENTER_RESTRICTED_SIZES: [&str; 2] = ["Standard_E64i_v3", "Standard_E64is_v3"];

/// GPU driver handling of a NodeClass (`spec.gpu.mode`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum GpuMode {
    /// The node installs the GPU driver: only sizes it can install one for are offered.
    #[default]
    Driver,
    /// The user brings the driver: every supported GPU size is offered.
    None,
}

/// The NodeClass settings that shape instance types, resolved (defaults applied).
#[derive(Clone, Debug, PartialEq)]
pub struct InstanceTypeOptions {
    /// `Ubuntu`, `Ubuntu2204`, `Ubuntu2404` or `AzureLinux`.
    pub image_family: String,
    /// The OS disk, GB: the node's ephemeral storage.
    pub os_disk_size_gb: i64,
    /// Pods per node.
    pub max_pods: i64,
    /// Encryption at host: only sizes that support it.
    pub encryption_at_host: bool,
    /// Secure boot or vTPM: only sizes with trusted launch.
    pub trusted_launch: bool,
    /// GPU driver handling.
    pub gpu_mode: GpuMode,
    /// Artifact streaming explicitly enabled: no arm64 sizes (it has none there).
    pub artifact_streaming: bool,
    /// FIPS images: nodes get `kubernetes.azure.com/fips_enabled=true`.
    pub fips: bool,
    /// LocalDNS enabled: only sizes with 4 vCPUs or more.
    pub local_dns: bool,
    /// The share of memory the hypervisor keeps (`--vm-memory-overhead-percent`).
    pub vm_memory_overhead_percent: f64,
}

impl Default for InstanceTypeOptions {
    fn default() -> Self {
        Self {
            image_family: "Ubuntu".into(),
            os_disk_size_gb: DEFAULT_OS_DISK_GB,
            max_pods: DEFAULT_MAX_PODS,
            encryption_at_host: false,
            trusted_launch: false,
            gpu_mode: GpuMode::Driver,
            artifact_streaming: false,
            fips: false,
            local_dns: false,
            vm_memory_overhead_percent: VM_MEMORY_OVERHEAD_PERCENT,
        }
    }
}

impl InstanceTypeOptions {
    /// The options an AKSNodeClass sets, in a cluster with this network and memory overhead.
    pub fn for_node_class(
        spec: &crate::aksnodeclass::AKSNodeClassSpec,
        local_dns_enabled: bool,
        network: &crate::bootstrap::Network,
        vm_memory_overhead_percent: f64,
    ) -> Self {
        Self {
            image_family: spec.image_family().as_str().to_string(),
            os_disk_size_gb: i64::from(spec.os_disk_size_gb),
            max_pods: i64::from(network.max_pods(spec.max_pods)),
            encryption_at_host: spec
                .security
                .as_ref()
                .and_then(|s| s.encryption_at_host)
                .unwrap_or(false),
            trusted_launch: spec.trusted_launch(),
            gpu_mode: if spec.gpu_driver_installed() {
                GpuMode::Driver
            } else {
                GpuMode::None
            },
            artifact_streaming: spec.artifact_streaming_enabled(),
            fips: spec.fips(),
            local_dns: local_dns_enabled,
            vm_memory_overhead_percent,
        }
    }
}

/// Whether the Ubuntu image families (`Ubuntu`, `Ubuntu2204`, `Ubuntu2404`).
fn is_ubuntu(image_family: &str) -> bool {
    matches!(image_family, "Ubuntu" | "Ubuntu2204" | "Ubuntu2404")
}

/// The `kubernetes.azure.com/os-sku` of an image family: Ubuntu by default, an unknown family
/// as itself.
pub fn os_sku(image_family: &str) -> &str {
    match image_family {
        "" => "Ubuntu",
        f if is_ubuntu(f) => "Ubuntu",
        other => other,
    }
}

/// The Kubernetes architecture of an ARM `CpuArchitectureType`; unknown values pass through.
pub fn kube_arch(cpu_architecture: &str) -> &str {
    match cpu_architecture {
        "x64" => "amd64",
        "Arm64" => "arm64",
        other => other,
    }
}

/// The zone label of an ARM zone: `<region>-<zone>` (`eastus-1`).
pub fn zone_label(region: &str, arm_zone: &str) -> String {
    format!("{}-{arm_zone}", region.to_ascii_lowercase())
}

/// The sizes AKS can run a node on, by name: VM sizes only, not restricted by AKS or the
/// provider, with a parseable size name, not restricted in `region`, at least 2 vCPUs and
/// 3.5 GiB, no GPU outside the supported list, no constrained vCPUs, not confidential.
pub fn supported_skus(
    skus: impl IntoIterator<Item = ResourceSku>,
    region: &str,
) -> BTreeMap<String, ResourceSku> {
    skus.into_iter()
        .filter(|s| s.resource_type == VIRTUAL_MACHINES)
        .filter(|s| !is_restricted(&s.name))
        .filter_map(|s| {
            let size = vmsize::parse(s.size.as_deref()?)?;
            (!s.location_restricted(region) && is_supported(&s, &size)).then_some(s)
        })
        .map(|s| (s.name.clone(), s))
        .collect()
}

/// Whether AKS or the provider rules the size out by name.
pub fn is_restricted(name: &str) -> bool {
    AKS_RESTRICTED_SIZES.contains(&name) || KARPENTER_RESTRICTED_SIZES.contains(&name)
}

fn is_supported(sku: &ResourceSku, size: &VmSize) -> bool {
    is_node_size(
        &sku.name,
        size,
        sku.vcpus(),
        sku.memory_gib(),
        sku.gpus().unwrap_or(0),
    )
}

/// Whether a size can be a node at all, by what it is (the simulator's catalog applies the
/// same rule to its embedded data): at least 2 vCPUs and 3.5 GiB, no constrained vCPUs, not
/// confidential, GPUs only where AKS knows the drivers, and not ruled out by name. `name` is
/// the full name (`Standard_NC24ads_A100_v4`).
pub fn is_node_size(
    name: &str,
    size: &VmSize,
    vcpus: Option<i64>,
    memory_gib: Option<f64>,
    gpus: i64,
) -> bool {
    let enough_cpu = vcpus.is_some_and(|c| c >= 2);
    let enough_memory = memory_gib.is_some_and(|m| m >= 3.5);
    // A size with GPUs runs a node only with drivers AKS knows how to provide.
    let unsupported_gpu = gpus > 0 && !gpus::is_gpu_sku(name);
    // Confidential sizes (DC, EC) need images the provider does not build.
    let confidential = size.series.starts_with("DC") || size.series.starts_with("EC");
    enough_cpu
        && enough_memory
        && !unsupported_gpu
        && size.cpus_constrained.is_none()
        && !confidential
        && !is_restricted(name)
}

/// Whether the NodeClass can use the size: the image has its GPU's drivers, and it has what
/// encryption at host, LocalDNS, the GPU mode, artifact streaming and trusted launch need.
pub fn supported_by_node_class(
    sku: &ResourceSku,
    arch: &str,
    options: &InstanceTypeOptions,
) -> bool {
    let name = sku.name.as_str();
    let gpu = gpus::is_gpu_sku(name);
    let image_ok = !gpu
        || if is_ubuntu(&options.image_family) {
            gpus::supported_on_os(name, "ubuntu")
        } else if options.image_family == "AzureLinux" {
            gpus::supported_on_os(name, "azurelinux") || gpus::supported_on_os(name, "azurelinux3")
        } else {
            false
        };
    let encryption_ok =
        !options.encryption_at_host || sku.has_capability("EncryptionAtHostSupported");
    // LocalDNS needs 4 vCPUs and 256 MB for itself.
    let local_dns_ok = !options.local_dns
        || (sku.vcpus().is_some_and(|c| c >= 4) && sku.memory_mib().is_some_and(|m| m >= 244));
    let gpu_mode_ok =
        options.gpu_mode != GpuMode::Driver || !gpu || gpus::driver_install_supported(name);
    let streaming_ok = !options.artifact_streaming || kube_arch(arch) != "arm64";
    let trusted_launch_ok = !options.trusted_launch || sku.trusted_launch_supported();
    image_ok && encryption_ok && local_dns_ok && gpu_mode_ok && streaming_ok && trusted_launch_ok
}

/// The zone labels the size is offered in: `<region>-<n>` for each unrestricted zone and,
/// because any size can also be placed without a zone, [`REGIONAL_ZONE`]; only the latter in a
/// region without zones.
pub fn offering_zones(sku: &ResourceSku, region: &str) -> Vec<String> {
    let mut zones: Vec<String> = sku
        .available_zones(region)
        .unwrap_or_default()
        .iter()
        .map(|z| zone_label(region, z))
        .collect();
    zones.push(REGIONAL_ZONE.to_string());
    zones
}

/// Where an ephemeral OS disk goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DiskPlacement {
    /// The local NVMe disk.
    NvmeDisk,
    /// The host cache.
    CacheDisk,
    /// The temporary (resource) disk.
    ResourceDisk,
}

/// The largest ephemeral OS disk the size takes, in GB, and where it goes: the NVMe disk when
/// it can hold the OS, else the cache disk, else the temporary disk; `None` without ephemeral
/// OS disk support or any such disk.
pub fn max_ephemeral_os_disk(sku: &ResourceSku) -> Option<(i64, DiskPlacement)> {
    const MIB: i64 = 1 << 20;
    const GB: i64 = 1_000_000_000;
    if !sku.has_capability("EphemeralOSDiskSupported") {
        return None;
    }
    let positive = |name: &str| sku.capability_i64(name).filter(|v| *v > 0);
    if let Some(nvme_mib) = positive("NvmeDiskSizeInMiB")
        && sku.capability_contains("SupportedEphemeralOSDiskPlacements", "NvmeDisk")
    {
        return Some((nvme_mib * MIB / GB, DiskPlacement::NvmeDisk));
    }
    if let Some(bytes) = positive("CachedDiskBytes") {
        return Some((bytes / GB, DiskPlacement::CacheDisk));
    }
    // ARM says MB; the unit is MiB.
    positive("MaxResourceVolumeMB").map(|mib| (mib * MIB / GB, DiskPlacement::ResourceDisk))
}

/// The `sku-storage-ultra-ssd` values of an offering in `zone`: `true` and `false` when Ultra
/// SSDs can be attached there, else only `false`.
fn ultra_ssd(sku: &ResourceSku, zone: &str) -> &'static [&'static str] {
    let available = if zone == REGIONAL_ZONE {
        sku.has_capability("UltraSSDAvailable")
    } else {
        let arm_zone = zone.rsplit('-').next().unwrap_or(zone);
        sku.has_capability_in_zone("UltraSSDAvailable", arm_zone)
    };
    if available {
        &["true", "false"]
    } else {
        &["false"]
    }
}

/// The size's instance types for a NodeClass. `unavailable(size, zone, capacity type)` says
/// which offerings recent launch failures have ruled out.
pub fn instance_types<'a>(
    skus: impl IntoIterator<Item = &'a ResourceSku>,
    region: &str,
    options: &InstanceTypeOptions,
    prices: &PriceTable,
    unavailable: &dyn Fn(&str, &str, &str) -> bool,
) -> Vec<InstanceType> {
    skus.into_iter()
        .filter_map(|sku| instance_type(sku, region, options, prices, unavailable))
        .collect()
}

/// One size as an instance type, or `None` when its name or architecture cannot be read or
/// the NodeClass cannot use it.
pub fn instance_type(
    sku: &ResourceSku,
    region: &str,
    options: &InstanceTypeOptions,
    prices: &PriceTable,
    unavailable: &dyn Fn(&str, &str, &str) -> bool,
) -> Option<InstanceType> {
    let size = vmsize::parse(sku.size.as_deref()?)?;
    let arch = sku.cpu_architecture()?;
    let vcpus = sku.vcpus()?;
    let memory_gib = sku.memory_gib()?;
    if !supported_by_node_class(sku, arch, options) {
        return None;
    }
    let offerings = offerings(sku, region, prices, unavailable);
    let requirements = requirements(sku, &size, arch, region, &offerings, options);
    let overhead = overhead(vcpus, memory_gib);
    Some(InstanceType::new(
        sku.name.clone(),
        requirements,
        offerings,
        capacity(sku, vcpus, memory_gib, options),
        overhead,
    ))
}

/// A spot and an on-demand offering per zone. Sizes upstream does not know are priced at
/// [`MISSING_PRICE`] so they never win on cost; spot is available only where the SKU is low
/// priority capable.
fn offerings(
    sku: &ResourceSku,
    region: &str,
    prices: &PriceTable,
    unavailable: &dyn Fn(&str, &str, &str) -> bool,
) -> Vec<Offering> {
    let name = sku.name.as_str();
    let known = is_known_sku(name);
    let (on_demand_price, spot_price) = if known {
        (
            prices.on_demand_or_missing(name),
            prices.spot_or_missing(name),
        )
    } else {
        (MISSING_PRICE, MISSING_PRICE)
    };
    let spot_capable = sku.low_priority_capable();
    offering_zones(sku, region)
        .into_iter()
        .flat_map(|zone| {
            let on_demand = Offering {
                available: !unavailable(name, &zone, CAPACITY_TYPE_ON_DEMAND),
                zone: zone.clone(),
                capacity_type: CAPACITY_TYPE_ON_DEMAND.into(),
                price: on_demand_price,
                reservation: None,
            };
            let spot = Offering {
                available: spot_capable && !unavailable(name, &zone, CAPACITY_TYPE_SPOT),
                zone,
                capacity_type: CAPACITY_TYPE_SPOT.into(),
                price: spot_price,
                reservation: None,
            };
            [on_demand, spot]
        })
        .collect()
}

fn capacity(
    sku: &ResourceSku,
    vcpus: i64,
    memory_gib: f64,
    options: &InstanceTypeOptions,
) -> Resources {
    let mut capacity = Resources::new();
    capacity.cpu = vcpus * 1000;
    capacity.memory =
        memory_capacity_bytes_with_overhead(memory_gib, options.vm_memory_overhead_percent) * 1000;
    capacity.pods = options.max_pods * 1000;
    capacity.ephemeral_storage = options.os_disk_size_gb * 1_000_000_000 * 1000;
    let gpus = sku.gpus().unwrap_or(0);
    match gpus::manufacturer(&sku.name) {
        Some(gpus::NVIDIA) => capacity.set("nvidia.com/gpu", gpus * 1000),
        Some(gpus::AMD) => capacity.set("amd.com/gpu", gpus * 1000),
        _ => {}
    }
    capacity
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

fn requirements(
    sku: &ResourceSku,
    size: &VmSize,
    arch: &str,
    region: &str,
    offerings: &[Offering],
    options: &InstanceTypeOptions,
) -> Requirements {
    // Zones, capacity types, placement scopes and Ultra SSD span the available offerings only.
    let available: Vec<&Offering> = offerings.iter().filter(|o| o.available).collect();
    let set = |f: &dyn Fn(&Offering) -> Vec<&str>| -> Vec<String> {
        let values: BTreeSet<&str> = available.iter().flat_map(|o| f(o)).collect();
        values.into_iter().map(str::to_string).collect()
    };
    let zones = set(&|o| vec![o.zone.as_str()]);
    let capacity_types = set(&|o| vec![o.capacity_type.as_str()]);
    let scopes = set(&|o| {
        vec![if o.zone == REGIONAL_ZONE {
            "regional"
        } else {
            "zonal"
        }]
    });
    let ultra = set(&|o| ultra_ssd(sku, &o.zone).to_vec());

    let name = sku.name.as_str();
    let cpu = sku.vcpus().unwrap_or_default().to_string();
    let memory = sku.memory_mib().unwrap_or_default().to_string();
    let gpu_manufacturer = gpus::manufacturer(name);
    let gpu_count = if gpu_manufacturer.is_some() {
        sku.gpus().unwrap_or(0)
    } else {
        0
    }
    .to_string();
    let gpu_name = gpu_manufacturer.and(size.accelerator.as_deref());
    let ephemeral = max_ephemeral_os_disk(sku).map(|(gb, _)| gb.to_string());
    let hyperv: Vec<&str> = [(sku.hyperv_gen1(), "1"), (sku.hyperv_gen2(), "2")]
        .into_iter()
        .filter_map(|(has, v)| has.then_some(v))
        .collect();
    let bool_label = |b: bool| if b { "true" } else { "false" };
    let version = size.version_label();

    [
        requirement(INSTANCE_TYPE_LABEL, &[name]),
        requirement(ARCH_LABEL, &[kube_arch(arch)]),
        requirement(OS_LABEL, &["linux"]),
        Requirement::new(ZONE_LABEL, Operator::In, &zones),
        requirement(REGION_LABEL, &[region]),
        Requirement::new(CAPACITY_TYPE_LABEL, Operator::In, &capacity_types),
        Requirement::new(LABEL_PLACEMENT_SCOPE, Operator::In, &scopes),
        Requirement::new(LABEL_ULTRA_SSD, Operator::In, &ultra),
        requirement(LABEL_SKU_CPU, &[&cpu]),
        requirement(LABEL_SKU_MEMORY, &[&memory]),
        requirement(AKS_LABEL_CPU, &[&cpu]),
        requirement(AKS_LABEL_MEMORY, &[&memory]),
        requirement(LABEL_SKU_GPU_COUNT, &[&gpu_count]),
        optional(LABEL_SKU_GPU_MANUFACTURER, gpu_manufacturer),
        optional(LABEL_SKU_GPU_NAME, gpu_name),
        requirement(AKS_LABEL_MODE, &["system", "user"]),
        requirement(AKS_LABEL_SCALE_SET_PRIORITY, &["regular", "spot"]),
        requirement(AKS_LABEL_PRIORITY, &["regular", "spot"]),
        requirement(AKS_LABEL_OS_SKU, &[os_sku(&options.image_family)]),
        // AKS sets this label only on FIPS nodes.
        optional(AKS_LABEL_FIPS_ENABLED, options.fips.then_some("true")),
        requirement(LABEL_SKU_NAME, &[name]),
        requirement(LABEL_SKU_FAMILY, &[&size.family]),
        requirement(LABEL_SKU_SERIES, &[&size.series]),
        requirement(LABEL_SKU_VERSION, &[&version]),
        optional(
            LABEL_SKU_STORAGE_EPHEMERAL_OS_MAX_SIZE,
            ephemeral.as_deref(),
        ),
        requirement(
            LABEL_SKU_STORAGE_PREMIUM_CAPABLE,
            &[bool_label(sku.has_capability("PremiumIO"))],
        ),
        requirement(
            LABEL_SKU_ACCELERATED_NETWORKING,
            &[bool_label(
                sku.has_capability("AcceleratedNetworkingEnabled"),
            )],
        ),
        if hyperv.is_empty() {
            optional(LABEL_SKU_HYPERV_GENERATION, None)
        } else {
            requirement(LABEL_SKU_HYPERV_GENERATION, &hyperv)
        },
    ]
    .into_iter()
    .collect()
}

#[cfg(test)]
#[path = "instancetype_tests.rs"]
mod tests;
