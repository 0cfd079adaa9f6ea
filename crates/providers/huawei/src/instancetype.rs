//! ECS flavors as instance types, the way huaweicloud-samples' provider builds them
//! (`pkg/providers/instancetype/{instancetype,types}.go`), from two answers:
//!
//! * ECS `ListFlavors` (`GET /v1/{project_id}/cloudservers/flavors`, [`ListFlavorsResponse`]):
//!   each flavor's vCPUs, memory and `os_extra_specs` — the per-zone sale status
//!   (`cond:operation:status`, `cond:operation:az`), the architecture and the supplementary
//!   NIC quota that caps pods;
//! * ECS `ListServerAzInfo` (`GET /v1/{project_id}/availability-zones`,
//!   [`ListServerAzInfoResponse`]): the region's zones, where a flavor without a per-zone
//!   status sells.
//!
//! [`instance_types`] turns them into instance types for one CCENodeClass: one on-demand
//! offering per zone the flavor sells in (CCE Karpenter launches on demand only), priced from
//! a [`PriceTable`], available unless a recent launch failed there; capacity and CCE's node
//! reservations as CCE computes them ([`kube_reserved_memory_mib`], [`kube_reserved_cpu_milli`],
//! [`system_reserved_memory_mib`], [`ephemeral_storage_bytes`]), with the NodeClass's
//! `kubelet` settings taking over where it sets them. The simulator's catalog
//! ([`crate::catalog`]) builds its types with the same [`instance_type`].
//!
//! Huawei Cloud subnets span the region's zones, so no zone is ruled out by the NodeClass.

use std::collections::{BTreeMap, BTreeSet};

use karpenter_api::Operator;
use karpenter_api::labels::{
    ARCH_AMD64, ARCH_LABEL, CAPACITY_TYPE_LABEL, CAPACITY_TYPE_ON_DEMAND, INSTANCE_TYPE_LABEL,
    OS_LABEL, REGION_LABEL, WINDOWS_BUILD_LABEL, ZONE_LABEL,
};
use karpenter_core::instancetype::{InstanceType, Offering, Overhead};
use karpenter_core::resources::{self, Resources};
use karpenter_core::scheduling::{Requirement, Requirements};
use serde::{Deserialize, Deserializer, Serialize};

use crate::ccenodeclass::CCENodeClassSpec;
use crate::pricing::PriceTable;

const MIB: i64 = 1 << 20;
const GIB: i64 = 1 << 30;

/// `karpenter.k8s.huawei/instance-size`. Upstream registers it but never sets it: every type
/// carries it as `DoesNotExist`.
pub const LABEL_INSTANCE_SIZE: &str = "karpenter.k8s.huawei/instance-size";
/// `karpenter.k8s.huawei/instance-cpu`: the flavor's `vcpus`, as ECS writes it.
pub const LABEL_INSTANCE_CPU: &str = "karpenter.k8s.huawei/instance-cpu";
/// `karpenter.k8s.huawei/instance-memory`: the flavor's `ram`, MiB.
pub const LABEL_INSTANCE_MEMORY: &str = "karpenter.k8s.huawei/instance-memory";
/// `karpenter.k8s.huawei/instance-network-bandwidth` (registered, never set: `DoesNotExist`).
pub const LABEL_INSTANCE_NETWORK_BANDWIDTH: &str =
    "karpenter.k8s.huawei/instance-network-bandwidth";
/// `karpenter.k8s.huawei/instance-gpu-name` (registered, never set: `DoesNotExist`).
pub const LABEL_INSTANCE_GPU_NAME: &str = "karpenter.k8s.huawei/instance-gpu-name";
/// `karpenter.k8s.huawei/instance-gpu-manufacturer` (registered, never set: `DoesNotExist`).
pub const LABEL_INSTANCE_GPU_MANUFACTURER: &str = "karpenter.k8s.huawei/instance-gpu-manufacturer";
/// `karpenter.k8s.huawei/instance-gpu-count` (registered, never set: `DoesNotExist`).
pub const LABEL_INSTANCE_GPU_COUNT: &str = "karpenter.k8s.huawei/instance-gpu-count";
/// `karpenter.k8s.huawei/instance-gpu-memory` (registered, never set: `DoesNotExist`).
pub const LABEL_INSTANCE_GPU_MEMORY: &str = "karpenter.k8s.huawei/instance-gpu-memory";

/// The labels upstream registers as well known (`pkg/apis/v1alpha1/labels.go`): pods may
/// require them.
pub const LABELS: [&str; 8] = [
    LABEL_INSTANCE_SIZE,
    LABEL_INSTANCE_CPU,
    LABEL_INSTANCE_MEMORY,
    LABEL_INSTANCE_NETWORK_BANDWIDTH,
    LABEL_INSTANCE_GPU_NAME,
    LABEL_INSTANCE_GPU_MANUFACTURER,
    LABEL_INSTANCE_GPU_COUNT,
    LABEL_INSTANCE_GPU_MEMORY,
];

/// Flavors per `ListFlavors` page upstream asks for (`limit`); a shorter page is the last, and
/// the next page starts after the last flavor's `id` (`marker`).
pub const LIST_FLAVORS_PAGE_SIZE: u32 = 1000;
/// The size of the data disk CCE gives the runtime and the kubelet when the NodeClass sets no
/// `blockDeviceMappings.k8s.volumeSize`, GiB (upstream's `DefaultKubernetesVolumeSizeGiB`).
pub const DEFAULT_KUBERNETES_VOLUME_GIB: i64 = 100;
/// The container runtime when the NodeClass names none.
pub const RUNTIME_CONTAINERD: &str = "containerd";
/// The other runtime CCE installs, whose per-pod reservation is larger.
pub const RUNTIME_DOCKER: &str = "docker";
/// The kubelet's `memory.available` eviction threshold on CCE nodes.
pub const EVICTION_MEMORY_MIB: i64 = 100;
/// The kubelet's `nodefs.available` eviction threshold on CCE nodes, a share of the
/// ephemeral storage.
pub const EVICTION_NODEFS_PERCENT: f32 = 10.0;

/// The sale statuses (`cond:operation:status`, and in `cond:operation:az`) under which a
/// flavor sells: commercial, promoted, open beta. Anything not named here sells too (upstream
/// is permissive so that a new status does not hide every flavor).
pub const SELLING_STATUSES: [&str; 4] = ["", "normal", "promotion", "obt"];
/// The sale statuses under which a flavor does not sell: withdrawn, sold out, beta sold out.
pub const NOT_SELLING_STATUSES: [&str; 3] = ["abandon", "sellout", "obt_sellout"];

/// A string ECS may also send as a bare number (`vcpus` is a string in the API; a hand-written
/// answer may hold `2`).
fn string_or_number<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Either {
        S(String),
        N(serde_json::Number),
    }
    Ok(match Option::<Either>::deserialize(d)? {
        Some(Either::S(s)) => s,
        Some(Either::N(n)) => n.to_string(),
        None => String::new(),
    })
}

/// The `os_extra_specs` of a flavor (the SDK's `FlavorExtraSpec`), the keys the provider
/// reads. ECS sends every value as a string; absent keys are `None`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct FlavorExtraSpec {
    /// `cond:operation:status`: the region-wide sale status (`normal`, `abandon`, `sellout`,
    /// `obt`, `promotion`, …); `normal` when absent.
    #[serde(
        rename = "cond:operation:status",
        skip_serializing_if = "Option::is_none"
    )]
    pub cond_operation_status: Option<String>,
    /// `cond:operation:az`: per-zone statuses overriding the region-wide one,
    /// `az0(normal), az1(sellout)`.
    #[serde(rename = "cond:operation:az", skip_serializing_if = "Option::is_none")]
    pub cond_operation_az: Option<String>,
    /// `ecs:instance_architecture`: `arm64` on Kunpeng flavors, absent on x86 ones.
    #[serde(
        rename = "ecs:instance_architecture",
        skip_serializing_if = "Option::is_none"
    )]
    pub ecs_instance_architecture: Option<String>,
    /// `quota:sub_network_interface_max_num`: the supplementary NICs the flavor takes, which
    /// caps pods on CCE Turbo (one NIC per pod).
    #[serde(
        rename = "quota:sub_network_interface_max_num",
        skip_serializing_if = "Option::is_none"
    )]
    pub quota_sub_network_interface_max_num: Option<String>,
}

/// One flavor of `ListFlavors` (the SDK's `Flavor`), the fields the provider reads.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Flavor {
    /// The flavor's id (`c7.large.2`; equal to the name on public flavors). BSS prices the
    /// flavor by `<id>.linux`.
    pub id: String,
    /// The flavor's name, the instance type (`c7.large.2`).
    pub name: String,
    /// vCPUs, a decimal string (`"2"`).
    #[serde(deserialize_with = "string_or_number")]
    pub vcpus: String,
    /// Memory, MiB.
    pub ram: i64,
    /// The extended specs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub os_extra_specs: Option<FlavorExtraSpec>,
}

impl Flavor {
    /// The Kubernetes architecture (`kubernetes.io/arch`, what the node's kubelet reports):
    /// ECS writes `ecs:instance_architecture` as `x86` or `arm64`; `amd64` without it. Upstream
    /// copies ECS's word, so its x86 types carry `x86` and never match a pod asking for
    /// `amd64`; this maps it. An unknown word is kept as written.
    pub fn architecture(&self) -> &str {
        match self
            .os_extra_specs
            .as_ref()
            .and_then(|s| s.ecs_instance_architecture.as_deref())
        {
            None | Some("" | "x86" | "x86_64" | "amd64") => ARCH_AMD64,
            Some("arm" | "arm64" | "aarch64") => "arm64",
            Some(other) => other,
        }
    }

    /// The vCPUs in millicores; `None` when `vcpus` is not a quantity (upstream would panic
    /// on such a flavor; it is left out here).
    pub fn cpu_milli(&self) -> Option<i64> {
        resources::parse_milli(&self.vcpus)
            .ok()
            .filter(|milli| *milli > 0)
    }

    /// The supplementary-NIC quota when it is a positive integer.
    pub fn supplementary_nics(&self) -> Option<i64> {
        let quota = self
            .os_extra_specs
            .as_ref()?
            .quota_sub_network_interface_max_num
            .as_deref()?;
        quota.trim().parse::<i64>().ok().filter(|n| *n > 0)
    }
}

/// `ListFlavors`' answer: `{"flavors": [...]}`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ListFlavorsResponse {
    /// The flavors of this page.
    pub flavors: Vec<Flavor>,
}

/// One zone of `ListServerAzInfo` (the SDK's `ListServerAzInfo`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ServerAzInfo {
    /// `cn-north-4a`.
    pub availability_zone_id: String,
    /// The zone's type (`core`, `dec`, `edge`, …); upstream does not look at it.
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
    /// The zone's mode.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// The public border group (EIP pool) of the zone.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub public_border_group: Option<String>,
    /// The zone's display alias.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub alias: Option<String>,
    /// The AZ groups the zone belongs to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub az_group_ids: Option<Vec<String>>,
    /// The sub-type of the zone's type.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub category: Option<i32>,
}

/// `ListServerAzInfo`'s answer: `{"availability_zones": [...]}`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ListServerAzInfoResponse {
    /// The region's zones.
    pub availability_zones: Vec<ServerAzInfo>,
}

impl ListServerAzInfoResponse {
    /// The zones' ids, in the answer's order.
    pub fn zone_ids(&self) -> Vec<String> {
        self.availability_zones
            .iter()
            .map(|z| z.availability_zone_id.clone())
            .filter(|z| !z.is_empty())
            .collect()
    }
}

/// Whether a sale status means the flavor sells. The status is matched as ECS spells it
/// (after trimming): `SELLOUT` is not `sellout`, and unknown statuses sell, as upstream has it.
pub fn status_sells(status: &str) -> bool {
    !NOT_SELLING_STATUSES.contains(&status.trim())
}

/// The per-zone statuses of a `cond:operation:az` value, zone → status:
/// `cn-south-2b(normal), cn-south-1c(sellout)`. Parts are split on commas and semicolons,
/// full-width ones too (`，` `；`), and full-width parentheses read as ASCII ones; a part
/// without a well-formed `(status)` is a zone with an empty status (which sells). A zone named
/// twice keeps its last status.
pub fn parse_cond_operation_az(value: &str) -> BTreeMap<String, String> {
    let normalized: String = value
        .chars()
        .map(|c| match c {
            '，' | '；' | ';' => ',',
            '（' => '(',
            '）' => ')',
            other => other,
        })
        .collect();
    let mut out = BTreeMap::new();
    for part in normalized
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
    {
        let (zone, status) = match (part.find('('), part.rfind(')')) {
            (Some(open), Some(close)) if close > open => {
                (part[..open].trim(), part[open + 1..close].trim())
            }
            _ => (part, ""),
        };
        if !zone.is_empty() {
            out.insert(zone.to_string(), status.to_string());
        }
    }
    out
}

/// The zones offerings can go to: the region's zones (`ListServerAzInfo`) and any zone a
/// flavor's `cond:operation:az` names.
pub fn zone_universe(flavors: &[Flavor], zones: &[String]) -> BTreeSet<String> {
    let mut universe: BTreeSet<String> = zones.iter().filter(|z| !z.is_empty()).cloned().collect();
    for specs in flavors.iter().filter_map(|f| f.os_extra_specs.as_ref()) {
        if let Some(az) = specs.cond_operation_az.as_deref() {
            universe.extend(parse_cond_operation_az(az).into_keys());
        }
    }
    universe
}

/// The zones of `universe` a flavor sells in: all of them when its region-wide status sells
/// (`normal` when absent or empty), none otherwise; then each zone its `cond:operation:az`
/// names is added or removed by that zone's own status.
pub fn offering_zones(
    universe: &BTreeSet<String>,
    specs: Option<&FlavorExtraSpec>,
) -> BTreeSet<String> {
    let status = specs
        .and_then(|s| s.cond_operation_status.as_deref())
        .filter(|s| !s.is_empty())
        .unwrap_or("normal");
    let mut zones = if status_sells(status) {
        universe.clone()
    } else {
        BTreeSet::new()
    };
    let overrides = specs
        .and_then(|s| s.cond_operation_az.as_deref())
        .map(parse_cond_operation_az)
        .unwrap_or_default();
    for (zone, status) in overrides {
        if status_sells(&status) {
            zones.insert(zone);
        } else {
            zones.remove(&zone);
        }
    }
    zones
}

/// The zones each flavor sells in, by name (a name listed twice keeps its last flavor, as
/// upstream's map does).
pub fn offering_zones_by_flavor(
    flavors: &[Flavor],
    zones: &[String],
) -> BTreeMap<String, BTreeSet<String>> {
    let universe = zone_universe(flavors, zones);
    flavors
        .iter()
        .map(|f| {
            (
                f.name.clone(),
                offering_zones(&universe, f.os_extra_specs.as_ref()),
            )
        })
        .collect()
}

/// CCE's default pods per node by memory: 20 below 8 GiB, 40 from 8, 60 from 16, 80 from 32,
/// 110 from 64 GiB.
pub fn default_max_pods_by_memory(memory_mib: i64) -> i64 {
    match memory_mib {
        m if m >= 65536 => 110,
        m if m >= 32768 => 80,
        m if m >= 16384 => 60,
        m if m >= 8192 => 40,
        _ => 20,
    }
}

/// Pods per node when the NodeClass sets no `maxPods`: the memory tier, at most the
/// flavor's supplementary NICs when it states them. Upstream applies the NIC cap whatever the
/// cluster's network (it does not know whether the cluster is CCE Turbo).
pub fn default_max_pods(flavor: &Flavor) -> i64 {
    let by_memory = default_max_pods_by_memory(flavor.ram);
    flavor
        .supplementary_nics()
        .map_or(by_memory, |nics| by_memory.min(nics))
}

/// CCE's kube-reserved memory, MiB: 500 MiB and, per pod of the memory tier (not the node's
/// pod capacity: CCE's v2 formula uses the tier), 20 MiB with Docker or 5 MiB otherwise.
pub fn kube_reserved_memory_mib(memory_mib: i64, runtime: &str) -> i64 {
    let per_pod = if runtime == RUNTIME_DOCKER { 20 } else { 5 };
    500 + per_pod * default_max_pods_by_memory(memory_mib)
}

/// CCE's system-reserved memory, MiB: 400 MiB and 25 MiB per GiB of memory (rounded down).
pub fn system_reserved_memory_mib(memory_mib: i64) -> i64 {
    400 + memory_mib * 25 / 1024
}

/// CCE's kube-reserved CPU, millicores: 6% of the first core, 1% of the second, 0.5% of the
/// third and fourth, 0.25% of the rest; each tier's share rounded down on its own.
pub fn kube_reserved_cpu_milli(cpu_milli: i64) -> i64 {
    let tiers: [(i64, i64, f64); 4] = [
        (0, 1000, 0.06),
        (1000, 2000, 0.01),
        (2000, 4000, 0.005),
        (4000, 1 << 31, 0.0025),
    ];
    tiers
        .iter()
        .filter(|(start, _, _)| cpu_milli >= *start)
        .map(|(start, end, share)| ((cpu_milli.min(*end) - start) as f64 * share) as i64)
        .sum()
}

const EXT4_BLOCK: i64 = 4096;
const EXT4_BLOCKS_PER_GROUP: i64 = 32768;
const EXT4_GROUPS_PER_DESCRIPTOR_BLOCK: i64 = 64;
const EXT4_INODE_TABLE_BLOCKS_PER_GROUP: i64 = 512;
const LVM_EXTENT: i64 = 4 * MIB;
/// What LVM keeps at the start of the data disk for its metadata.
const LVM_METADATA: i64 = 4 * MIB;
/// The share of CCE's `vgpaas` volume group its kubernetes LV gets (the runtime LV the rest).
const KUBERNETES_LV_PERCENT: i64 = 10;

fn ceil_div(a: i64, b: i64) -> i64 {
    if a <= 0 { 0 } else { (a + b - 1) / b }
}

fn align_down(v: i64, unit: i64) -> i64 {
    if v <= 0 { 0 } else { v / unit * unit }
}

/// Groups holding a superblock backup with ext4's `sparse_super`: groups 0 and 1 and every
/// power of 3, 5 and 7 below the group count.
fn sparse_super_groups(groups: i64) -> i64 {
    if groups <= 0 {
        return 0;
    }
    let mut copies = 2;
    for base in [3, 5, 7] {
        let mut group = base;
        while group < groups {
            copies += 1;
            if group > (groups - 1) / base {
                break;
            }
            group *= base;
        }
    }
    copies
}

/// Blocks mke2fs reserves for growing the group descriptor table (room for 1024× the
/// filesystem, at most 2^32 blocks, at most a block's worth of pointers).
fn reserved_gdt_blocks(blocks: i64, descriptor_blocks: i64) -> i64 {
    let most = if blocks < 0xffff_ffff / 1024 {
        blocks * 1024
    } else {
        0xffff_ffff
    };
    let groups = ceil_div(most, EXT4_BLOCKS_PER_GROUP);
    (ceil_div(groups, EXT4_GROUPS_PER_DESCRIPTOR_BLOCK) - descriptor_blocks)
        .clamp(0, EXT4_BLOCK / 4)
}

/// mke2fs's default journal size for a filesystem of `blocks` 4 KiB blocks.
fn journal_blocks(blocks: i64) -> i64 {
    match blocks {
        b if b < 2048 => 0,
        b if b < 32768 => 1024,
        b if b < 256 * 1024 => 4096,
        b if b < 512 * 1024 => 8192,
        b if b < 4096 * 1024 => 16384,
        b if b < 8192 * 1024 => 32768,
        b if b < 16384 * 1024 => 65536,
        b if b < 32768 * 1024 => 131_072,
        _ => 262_144,
    }
}

/// What `df` reports for an ext4 filesystem made on `device_bytes` with mke2fs 1.47's
/// defaults: the device less bitmaps and inode tables in every group, superblock and
/// descriptor copies in the backup groups, and the journal.
pub fn ext4_size_bytes(device_bytes: i64) -> i64 {
    let blocks = device_bytes.max(0) / EXT4_BLOCK;
    if blocks == 0 {
        return 0;
    }
    let groups = ceil_div(blocks, EXT4_BLOCKS_PER_GROUP);
    let descriptor_blocks = ceil_div(groups, EXT4_GROUPS_PER_DESCRIPTOR_BLOCK);
    let overhead = groups * (2 + EXT4_INODE_TABLE_BLOCKS_PER_GROUP)
        + sparse_super_groups(groups)
            * (1 + descriptor_blocks + reserved_gdt_blocks(blocks, descriptor_blocks))
        + journal_blocks(blocks);
    device_bytes - overhead * EXT4_BLOCK
}

/// The node's ephemeral storage, bytes, for a k8s data disk of `volume_gib`: CCE splits the
/// disk (less LVM's metadata) into a runtime LV and a kubernetes LV of 10%, both on 4 MiB
/// extents, and the kubelet reports the kubernetes LV's ext4 filesystem.
pub fn ephemeral_storage_bytes(volume_gib: i64) -> i64 {
    let volume_group = align_down(volume_gib * GIB - LVM_METADATA, LVM_EXTENT);
    let kubernetes_lv = align_down(volume_group * KUBERNETES_LV_PERCENT / 100, LVM_EXTENT);
    ext4_size_bytes(kubernetes_lv)
}

/// The `nodefs.available` eviction threshold, bytes: [`EVICTION_NODEFS_PERCENT`] of the
/// ephemeral storage, rounded down. The share is a 32-bit float as the kubelet's flag parsing
/// makes it, so 10% of 10,459,828,224 bytes is 1,045,982,837, not …822.
pub fn eviction_nodefs_bytes(ephemeral_bytes: i64) -> i64 {
    let share = f64::from(EVICTION_NODEFS_PERCENT / 100.0);
    (ephemeral_bytes as f64 * share) as i64
}

/// Why instance types cannot be built.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum InstanceTypesError {
    /// No flavors are known yet (upstream's "no instance types found").
    #[error("no instance types found")]
    NoInstanceTypes,
    /// A `kubelet.kubeReserved` or `kubelet.systemReserved` value of the NodeClass is not a
    /// quantity.
    #[error("spec.kubelet.{field}[{key}]: {value:?} is not a quantity: {reason}")]
    Reservation {
        /// `kubeReserved` or `systemReserved`.
        field: &'static str,
        /// The resource (`cpu`, `memory`, …).
        key: String,
        /// The value as written.
        value: String,
        /// Why it does not parse.
        reason: String,
    },
}

/// The NodeClass settings that shape instance types, and the region.
#[derive(Clone, Debug, PartialEq)]
pub struct InstanceTypeOptions {
    /// The region (`topology.kubernetes.io/region`).
    pub region: String,
    /// `kubelet.maxPods`.
    pub max_pods: Option<i32>,
    /// `kubelet.kubeReserved`, thousandths by resource: each replaces CCE's figure for that
    /// resource.
    pub kube_reserved: BTreeMap<String, i64>,
    /// `kubelet.systemReserved`, as `kube_reserved`.
    pub system_reserved: BTreeMap<String, i64>,
    /// `runtimeConfiguration.type`: `containerd` or `docker`.
    pub runtime: String,
    /// `blockDeviceMappings.k8s.volumeSize`, GiB.
    pub kubernetes_volume_gib: i64,
}

impl InstanceTypeOptions {
    /// Options for a region with every NodeClass setting at its default.
    pub fn new(region: impl Into<String>) -> Self {
        Self {
            region: region.into(),
            max_pods: None,
            kube_reserved: BTreeMap::new(),
            system_reserved: BTreeMap::new(),
            runtime: RUNTIME_CONTAINERD.into(),
            kubernetes_volume_gib: DEFAULT_KUBERNETES_VOLUME_GIB,
        }
    }

    /// The options a CCENodeClass sets: `kubelet.maxPods`, `kubeReserved` and
    /// `systemReserved` (which CCE's `CreateNode` hands to the kubelet, so they replace CCE's
    /// figures key by key), the runtime, and the k8s data disk's size. `pid` reservations are
    /// passed to the node but are no schedulable resource, so they are left out here (as
    /// upstream's allocatable, which only subtracts resources the capacity has, ignores them).
    pub fn for_node_class(
        spec: &CCENodeClassSpec,
        region: impl Into<String>,
    ) -> Result<Self, InstanceTypesError> {
        let kubelet = spec.kubelet.as_ref();
        let reservations = |field: &'static str, map: Option<&BTreeMap<String, String>>| {
            map.into_iter()
                .flatten()
                .filter(|(key, _)| key.as_str() != "pid")
                .map(|(key, value)| {
                    resources::parse_milli(value)
                        .map(|milli| (key.clone(), milli))
                        .map_err(|e| InstanceTypesError::Reservation {
                            field,
                            key: key.clone(),
                            value: value.clone(),
                            reason: e.to_string(),
                        })
                })
                .collect::<Result<BTreeMap<_, _>, _>>()
        };
        Ok(Self {
            region: region.into(),
            max_pods: kubelet.and_then(|k| k.max_pods),
            kube_reserved: reservations("kubeReserved", kubelet.map(|k| &k.kube_reserved))?,
            system_reserved: reservations("systemReserved", kubelet.map(|k| &k.system_reserved))?,
            runtime: spec
                .runtime_configuration
                .as_ref()
                .and_then(|r| r.type_.clone())
                .filter(|t| !t.is_empty())
                .unwrap_or_else(|| RUNTIME_CONTAINERD.into()),
            kubernetes_volume_gib: spec
                .block_device_mappings
                .k8s
                .as_ref()
                .map(|d| i64::from(d.volume_size))
                .filter(|gib| *gib > 0)
                .unwrap_or(DEFAULT_KUBERNETES_VOLUME_GIB),
        })
    }

    /// Pods per node: `maxPods`, else [`default_max_pods`].
    pub fn max_pods(&self, flavor: &Flavor) -> i64 {
        self.max_pods
            .map_or_else(|| default_max_pods(flavor), i64::from)
    }
}

/// A node's capacity: the flavor's vCPUs and memory (no hypervisor share: ECS reports the
/// flavor's full RAM), its pods, and the ephemeral storage of the k8s data disk. `None` when
/// `vcpus` is not a quantity.
pub fn capacity(flavor: &Flavor, options: &InstanceTypeOptions) -> Option<Resources> {
    let mut capacity = Resources::new();
    capacity.cpu = flavor.cpu_milli()?;
    capacity.memory = flavor.ram * MIB * 1000;
    capacity.pods = options.max_pods(flavor) * 1000;
    capacity.ephemeral_storage = ephemeral_storage_bytes(options.kubernetes_volume_gib) * 1000;
    Some(capacity)
}

/// CCE's reservations for a node of `flavor` with `capacity`: kube-reserved CPU and memory,
/// system-reserved memory, the kubelet's eviction thresholds; the NodeClass's
/// `kubeReserved`/`systemReserved` replace CCE's figure for each resource they name.
pub fn overhead(flavor: &Flavor, capacity: &Resources, options: &InstanceTypeOptions) -> Overhead {
    let mut kube_reserved = Resources::new();
    kube_reserved.cpu = kube_reserved_cpu_milli(capacity.cpu);
    kube_reserved.memory = kube_reserved_memory_mib(flavor.ram, &options.runtime) * MIB * 1000;
    for (name, milli) in &options.kube_reserved {
        kube_reserved.set(name, *milli);
    }
    let mut system_reserved = Resources::new();
    system_reserved.memory = system_reserved_memory_mib(flavor.ram) * MIB * 1000;
    for (name, milli) in &options.system_reserved {
        system_reserved.set(name, *milli);
    }
    let mut eviction_threshold = Resources::new();
    eviction_threshold.memory = EVICTION_MEMORY_MIB * MIB * 1000;
    eviction_threshold.ephemeral_storage =
        eviction_nodefs_bytes(capacity.ephemeral_storage / 1000) * 1000;
    Overhead {
        kube_reserved,
        system_reserved,
        eviction_threshold,
    }
}

fn requirement(key: &str, values: &[&str]) -> Requirement {
    Requirement::new(key, Operator::In, values)
}

fn absent(key: &str) -> Requirement {
    Requirement::new(key, Operator::DoesNotExist, &[] as &[&str])
}

/// The flavor's labels as requirements: name, architecture, Linux, region, on demand, vCPUs
/// and memory; the other registered labels as `DoesNotExist` (upstream reads no size, bandwidth
/// or GPU from the flavor); the zones it sells in when there are any.
pub fn requirements(flavor: &Flavor, zones: &BTreeSet<String>, region: &str) -> Requirements {
    let memory = flavor.ram.to_string();
    let mut r: Requirements = [
        requirement(INSTANCE_TYPE_LABEL, &[&flavor.name]),
        requirement(ARCH_LABEL, &[flavor.architecture()]),
        requirement(OS_LABEL, &["linux"]),
        requirement(REGION_LABEL, &[region]),
        absent(WINDOWS_BUILD_LABEL),
        requirement(CAPACITY_TYPE_LABEL, &[CAPACITY_TYPE_ON_DEMAND]),
        requirement(LABEL_INSTANCE_CPU, &[&flavor.vcpus]),
        requirement(LABEL_INSTANCE_MEMORY, &[&memory]),
        absent(LABEL_INSTANCE_NETWORK_BANDWIDTH),
        absent(LABEL_INSTANCE_SIZE),
        absent(LABEL_INSTANCE_GPU_NAME),
        absent(LABEL_INSTANCE_GPU_MANUFACTURER),
        absent(LABEL_INSTANCE_GPU_COUNT),
        absent(LABEL_INSTANCE_GPU_MEMORY),
    ]
    .into_iter()
    .collect();
    if !zones.is_empty() {
        let zones: Vec<&str> = zones.iter().map(String::as_str).collect();
        r.add(requirement(ZONE_LABEL, &zones));
    }
    r
}

/// Whether recent launch failures ruled an offering out: `(type, zone, capacity type)`.
pub type Unavailable<'a> = &'a dyn Fn(&str, &str, &str) -> bool;

/// A flavor's offerings: one on demand in each zone it sells in, at the table's price (or
/// [`crate::pricing::MISSING_PRICE`] when the table has none, as upstream keeps unpriced
/// flavors launchable but last), available unless `unavailable` rules it out.
pub fn offerings(
    name: &str,
    zones: &BTreeSet<String>,
    prices: &PriceTable,
    unavailable: Unavailable<'_>,
) -> Vec<Offering> {
    let price = prices.on_demand_or_missing(name);
    zones
        .iter()
        .map(|zone| Offering {
            zone: zone.clone(),
            capacity_type: CAPACITY_TYPE_ON_DEMAND.into(),
            price,
            available: !unavailable(name, zone, CAPACITY_TYPE_ON_DEMAND),
            reservation: None,
        })
        .collect()
}

/// One flavor as an instance type selling in `zones` with `offerings`; `None` without an
/// offering or when `vcpus` is not a quantity.
pub fn instance_type(
    flavor: &Flavor,
    zones: &BTreeSet<String>,
    offerings: Vec<Offering>,
    options: &InstanceTypeOptions,
) -> Option<InstanceType> {
    if offerings.is_empty() {
        return None;
    }
    let capacity = capacity(flavor, options)?;
    let overhead = overhead(flavor, &capacity, options);
    Some(InstanceType::new(
        flavor.name.clone(),
        requirements(flavor, zones, &options.region),
        offerings,
        capacity,
        overhead,
    ))
}

/// The instance types of one NodeClass from `ListFlavors` (`flavors`, every page) and
/// `ListServerAzInfo` (`zones`), sorted by name. A flavor listed twice counts once (its last
/// listing); a flavor that sells nowhere, or whose `vcpus` is not a number, is left out.
/// Fails only when no flavor is known, as upstream's `List` does.
pub fn instance_types(
    flavors: &[Flavor],
    zones: &[String],
    options: &InstanceTypeOptions,
    prices: &PriceTable,
    unavailable: Unavailable<'_>,
) -> Result<Vec<InstanceType>, InstanceTypesError> {
    if flavors.is_empty() {
        return Err(InstanceTypesError::NoInstanceTypes);
    }
    let universe = zone_universe(flavors, zones);
    let by_name: BTreeMap<&str, &Flavor> = flavors.iter().map(|f| (f.name.as_str(), f)).collect();
    Ok(by_name
        .into_values()
        .filter_map(|flavor| {
            let zones = offering_zones(&universe, flavor.os_extra_specs.as_ref());
            let offerings = offerings(&flavor.name, &zones, prices, unavailable);
            instance_type(flavor, &zones, offerings, options)
        })
        .collect())
}

#[cfg(test)]
#[path = "instancetype_tests.rs"]
mod tests;
