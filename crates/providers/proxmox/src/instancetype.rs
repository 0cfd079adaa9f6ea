//! Instance types, the way upstream's `pkg/providers/instancetype` makes them. Proxmox has no
//! catalogue of machine sizes — a VM is any number of vCPUs and any amount of memory — so the
//! provider offers synthetic sizes:
//!
//! * by default upstream's families ([`default_specs`]): 1, 2, 4, 8 and 16 vCPUs with 2, 3, 4
//!   or 8 GiB per vCPU, named `<family>1.<n>VCPU-<m>GB` (`c1` compute 1:2, `t1` 1:3, `s1`
//!   standard 1:4, `m1` memory 1:8; [`family`] also names `x1` 1:16 and `e1` for other
//!   ratios, which the built-in list does not use), 30 GiB of ephemeral storage (the boot
//!   disk), 64 pods at 2 GiB and 110 above, amd64 Linux, on demand; with upstream's
//!   reservations ([`kube_reserved`], [`system_reserved`], [`eviction_threshold`]);
//! * or the operator's list, a JSON file (`--instance-types-file`, [`parse_file`]).
//!
//! [`instance_types`] turns the list into `karpenter_core` instance types for one NodeClass:
//! an offering per Proxmox node (zone) of each region, of the type's capacity type, priced by
//! [`crate::pricing`], available where the node has room for the VM now
//! ([`Capacities::fits`]) and no recent launch failed. The NodeClass's `maxPods` replaces the
//! type's pods.

use std::collections::{BTreeMap, BTreeSet};

use karpenter_api::Operator;
use karpenter_api::labels::{
    ARCH_AMD64, ARCH_LABEL, CAPACITY_TYPE_LABEL, CAPACITY_TYPE_ON_DEMAND, INSTANCE_TYPE_LABEL,
    OS_LABEL, REGION_LABEL, ZONE_LABEL,
};
use karpenter_core::instancetype::{InstanceType, Offering, Overhead};
use karpenter_core::resources::{CPU, MEMORY, PODS, Resources};
use karpenter_core::scheduling::{Requirement, Requirements};

use crate::capacity::Capacities;
use crate::pricing;

mod file;

pub use file::{FILE_CAPACITY_TYPES, InstanceTypesFileError, parse_file, to_file};

/// The labels upstream registers as well known (`pkg/apis/v1alpha1/labels.go`): pods may
/// require them.
pub use crate::apis::WELL_KNOWN_LABELS as LABELS;
pub use crate::apis::{LABEL_INSTANCE_CPU_TYPE, LABEL_INSTANCE_FAMILY, LABEL_INSTANCE_IMAGE_ID};

/// The vCPU counts of the built-in list.
pub const DEFAULT_CPUS: [u32; 5] = [1, 2, 4, 8, 16];
/// The GiB per vCPU of the built-in list (`c1`, `t1`, `s1`, `m1`).
pub const DEFAULT_MEMORY_FACTORS: [u32; 4] = [2, 3, 4, 8];
/// The ephemeral storage of the built-in list, GiB.
pub const DEFAULT_STORAGE_GIB: u32 = 30;

const MIB: i64 = 1 << 20;
const GIB: i64 = 1 << 30;

/// One instance type as the list (built-in or the file) describes it, before offerings.
#[derive(Clone, Debug, PartialEq)]
pub struct InstanceTypeSpec {
    /// The name, `<family>.<size>`.
    pub name: String,
    /// The VM's resources: `cpu`, `memory`, `pods`, usually `ephemeral-storage`, perhaps huge
    /// pages.
    pub capacity: Resources,
    /// `on-demand` or `spot`: the one capacity type it is offered as.
    pub capacity_type: String,
    /// What the node keeps for itself.
    pub overhead: Overhead,
}

impl InstanceTypeSpec {
    /// The family: the name up to its first dot (the whole name without one).
    pub fn family(&self) -> &str {
        self.name.split('.').next().unwrap_or_default()
    }
}

/// The family of a memory-to-vCPU ratio (GiB per vCPU): `c` compute 2, `t` 3, `s` standard 4,
/// `m` memory 8, `x` in-memory 16, `e` any other.
pub fn family(memory_factor: u32) -> &'static str {
    match memory_factor {
        2 => "c",
        3 => "t",
        4 => "s",
        8 => "m",
        16 => "x",
        _ => "e",
    }
}

/// A generated type's name: `c1.2VCPU-4GB` for 2 vCPUs at 2 GiB each.
pub fn type_name(cpus: u32, memory_factor: u32) -> String {
    let memory = u64::from(cpus) * u64::from(memory_factor);
    format!("{}1.{cpus}VCPU-{memory}GB", family(memory_factor))
}

/// Pods on a generated type by its memory: 32 up to 1 GiB, 64 up to 2 GiB, 110 above.
pub fn default_pods(memory_gib: u64) -> i64 {
    match memory_gib {
        0..=1 => 32,
        2 => 64,
        _ => 110,
    }
}

/// Upstream's kube-reserved for a VM of `capacity`: CPU by whole vCPUs (rounded up) — 10m
/// below one, 20m for one, 50m for two or three, 100m from four — and memory 384Mi.
///
/// Upstream's memory tiers (128Mi, 192Mi, 256Mi) are written against the memory in MiB but
/// read like GiB thresholds (`< 1`, `< 2`, `< 4`), so they apply only to VMs under 4 MiB and
/// every real VM gets 384Mi; its published `hack/instance-types.json` has 384Mi for the 2 GiB
/// type. The tiers are kept as upstream computes them, so allocatable matches upstream's.
pub fn kube_reserved(capacity: &Resources) -> Resources {
    let cores = capacity.cpu.max(0).saturating_add(999) / 1000;
    let cpu_milli = match cores {
        0 => 10,
        1 => 20,
        2..=3 => 50,
        _ => 100,
    };
    let memory_mib = capacity.memory / 1000 / MIB;
    let reserved_mib = match memory_mib {
        i64::MIN..=0 => 128,
        1 => 192,
        2..=3 => 256,
        _ => 384,
    };
    let mut reserved = Resources::new();
    reserved.cpu = cpu_milli;
    reserved.memory = reserved_mib * MIB * 1000;
    reserved
}

/// Upstream's system-reserved, the same for every size: 10m CPU and 64Mi memory.
pub fn system_reserved() -> Resources {
    Resources::parse(&[(CPU, "10m"), (MEMORY, "64Mi")])
}

/// Upstream's eviction threshold (the kubelet's `memory.available`), the same for every size:
/// 100Mi.
pub fn eviction_threshold() -> Resources {
    Resources::parse(&[(MEMORY, "100Mi")])
}

/// What to generate (upstream's `InstanceTypeOptions`, the generator's flags).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GenerateOptions {
    /// vCPU counts.
    pub cpus: Vec<u32>,
    /// GiB of memory per vCPU.
    pub memory_factors: Vec<u32>,
    /// Ephemeral storage, GiB; none when 0.
    pub storage_gib: u32,
    /// Whether to set [`kube_reserved`].
    pub kube_reserved: bool,
    /// Whether to set [`system_reserved`].
    pub system_reserved: bool,
    /// Whether to set [`eviction_threshold`].
    pub eviction_threshold: bool,
}

/// The built-in list's options: [`DEFAULT_CPUS`] × [`DEFAULT_MEMORY_FACTORS`],
/// [`DEFAULT_STORAGE_GIB`], every reservation.
impl Default for GenerateOptions {
    fn default() -> Self {
        Self {
            cpus: DEFAULT_CPUS.to_vec(),
            memory_factors: DEFAULT_MEMORY_FACTORS.to_vec(),
            storage_gib: DEFAULT_STORAGE_GIB,
            kube_reserved: true,
            system_reserved: true,
            eviction_threshold: true,
        }
    }
}

/// The types of every vCPU count × memory factor, vCPUs first (upstream's order), on demand.
pub fn generate(options: &GenerateOptions) -> Vec<InstanceTypeSpec> {
    let mut out = Vec::new();
    for &cpus in &options.cpus {
        for &factor in &options.memory_factors {
            let memory_gib = u64::from(cpus) * u64::from(factor);
            let mut capacity = Resources::new();
            capacity.cpu = i64::from(cpus) * 1000;
            capacity.memory = i64::try_from(memory_gib)
                .unwrap_or(i64::MAX)
                .saturating_mul(GIB * 1000);
            capacity.pods = default_pods(memory_gib) * 1000;
            if options.storage_gib > 0 {
                capacity.ephemeral_storage = i64::from(options.storage_gib) * GIB * 1000;
            }
            let overhead = Overhead {
                kube_reserved: if options.kube_reserved {
                    kube_reserved(&capacity)
                } else {
                    Resources::new()
                },
                system_reserved: if options.system_reserved {
                    system_reserved()
                } else {
                    Resources::new()
                },
                eviction_threshold: if options.eviction_threshold {
                    eviction_threshold()
                } else {
                    Resources::new()
                },
            };
            out.push(InstanceTypeSpec {
                name: type_name(cpus, factor),
                capacity,
                capacity_type: CAPACITY_TYPE_ON_DEMAND.into(),
                overhead,
            });
        }
    }
    out
}

/// Upstream's built-in list: the 20 types of [`GenerateOptions::default`].
pub fn default_specs() -> Vec<InstanceTypeSpec> {
    generate(&GenerateOptions::default())
}

/// The NodeClass settings and scope that shape one NodeClass's instance types.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InstanceTypeOptions {
    /// `kubeletConfiguration.maxPods`: replaces every type's pods.
    pub max_pods: Option<i32>,
    /// `region`: offer only this region's nodes; `None` offers every region's, as upstream.
    pub region: Option<String>,
    /// The zones the NodeClass can launch in (its status's selected zones); `None` offers
    /// every node of the region(s).
    pub zones: Option<BTreeSet<String>>,
}

/// Whether recent launch failures ruled an offering out: `(type, zone, capacity type)`.
pub type Unavailable<'a> = &'a dyn Fn(&str, &str, &str) -> bool;

/// A node's capacity for a type: the list's, with `maxPods` in place of its pods.
pub fn capacity(spec: &InstanceTypeSpec, options: &InstanceTypeOptions) -> Resources {
    let mut capacity = spec.capacity.clone();
    if let Some(max_pods) = options.max_pods {
        capacity.set(PODS, i64::from(max_pods) * 1000);
    }
    capacity
}

/// The type's offerings: one of its capacity type in every zone of the regions in scope, at
/// [`pricing::price`] of its capacity, available where the zone has room for the VM and
/// `unavailable` does not rule it out. A zone name found in two regions (two clusters with a
/// node of the same name) is offered once, available if either has room.
pub fn offerings(
    spec: &InstanceTypeSpec,
    capacities: &Capacities,
    options: &InstanceTypeOptions,
    unavailable: Unavailable<'_>,
) -> Vec<Offering> {
    let price = pricing::price(&spec.capacity, &spec.capacity_type);
    let mut zones: BTreeMap<&str, bool> = BTreeMap::new();
    for region in regions_in_scope(capacities, options) {
        for zone in capacities.zones(region) {
            if options.zones.as_ref().is_some_and(|z| !z.contains(zone)) {
                continue;
            }
            let fits = capacities.fits(region, zone, &spec.capacity);
            *zones.entry(zone).or_default() |= fits;
        }
    }
    zones
        .into_iter()
        .map(|(zone, fits)| Offering {
            zone: zone.to_string(),
            capacity_type: spec.capacity_type.clone(),
            price,
            available: fits && !unavailable(&spec.name, zone, &spec.capacity_type),
            reservation: None,
        })
        .collect()
}

fn regions_in_scope<'a>(
    capacities: &'a Capacities,
    options: &'a InstanceTypeOptions,
) -> impl Iterator<Item = &'a str> + 'a {
    capacities
        .regions()
        .filter(|r| options.region.as_deref().is_none_or(|only| only == *r))
}

fn requirement(key: &str, values: &[&str]) -> Requirement {
    Requirement::new(key, Operator::In, values)
}

fn absent(key: &str) -> Requirement {
    Requirement::new(key, Operator::DoesNotExist, &[] as &[&str])
}

/// The type's labels as requirements (upstream's `computeRequirements`): name, amd64, Linux,
/// the regions, its capacity type, its family, and no CPU type or image id; plus the zones of
/// its offerings, which upstream leaves to the offerings and the core here reads from the
/// requirements. Regions and zones are left out when there are none.
pub fn requirements(spec: &InstanceTypeSpec, regions: &[&str], zones: &[&str]) -> Requirements {
    let mut r: Requirements = [
        requirement(INSTANCE_TYPE_LABEL, &[&spec.name]),
        requirement(ARCH_LABEL, &[ARCH_AMD64]),
        requirement(OS_LABEL, &["linux"]),
        requirement(CAPACITY_TYPE_LABEL, &[&spec.capacity_type]),
        requirement(LABEL_INSTANCE_FAMILY, &[spec.family()]),
        absent(LABEL_INSTANCE_CPU_TYPE),
        absent(LABEL_INSTANCE_IMAGE_ID),
    ]
    .into_iter()
    .collect();
    if !regions.is_empty() {
        r.add(requirement(REGION_LABEL, regions));
    }
    if !zones.is_empty() {
        r.add(requirement(ZONE_LABEL, zones));
    }
    r
}

/// One type for a NodeClass: its capacity (with `maxPods`), its reservations, requirements
/// and offerings. A type offered nowhere is still returned (upstream lists every type; the
/// core does not launch one without an available offering).
pub fn instance_type(
    spec: &InstanceTypeSpec,
    capacities: &Capacities,
    options: &InstanceTypeOptions,
    unavailable: Unavailable<'_>,
) -> InstanceType {
    let offerings = offerings(spec, capacities, options, unavailable);
    let regions: Vec<&str> = regions_in_scope(capacities, options).collect();
    let zones: Vec<&str> = offerings.iter().map(|o| o.zone.as_str()).collect();
    let requirements = requirements(spec, &regions, &zones);
    InstanceType::new(
        spec.name.clone(),
        requirements,
        offerings,
        capacity(spec, options),
        spec.overhead.clone(),
    )
}

/// Every type of the list for one NodeClass, in the list's order.
pub fn instance_types(
    specs: &[InstanceTypeSpec],
    capacities: &Capacities,
    options: &InstanceTypeOptions,
    unavailable: Unavailable<'_>,
) -> Vec<InstanceType> {
    specs
        .iter()
        .map(|spec| instance_type(spec, capacities, options, unavailable))
        .collect()
}

#[cfg(test)]
#[path = "instancetype_tests.rs"]
mod tests;
