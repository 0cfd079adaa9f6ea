//! What each Proxmox node — a zone; the Proxmox cluster is the region — has room for, after
//! upstream's `cloudcapacity` provider with its default `simple` policy
//! (`cpumanager/policy_simple.go`, `resourcemanager`):
//!
//! * a node offers its logical CPUs and its memory ([`NodeStatus`]), or what the node settings
//!   file's NUMA nodes say it has ([`HostSettings`]);
//! * it keeps CPUs and memory for itself: 1 GiB and no CPUs unless the settings file says
//!   otherwise;
//! * every running VM on it takes its memory and its vCPUs — a VM pinned to host CPUs
//!   (`affinity`) takes those CPUs, and VMs pinned to the same CPUs share them, so overlapping
//!   pins count once (`docs/noderesource.md`); memory is never overcommitted;
//! * a VM being created takes its room from the moment the provider picks the node
//!   ([`Capacities::reserve`]) until the API lists it running, so two creates cannot both take
//!   the last room.
//!
//! Everything here is pure: the caller reads the API (nodes, `/cluster/resources?type=vm`,
//! each VM's `affinity`) into [`NodeStatus`] and [`VmStatus`] and hands them in.
//!
//! Upstream's `static` policy, which pins new VMs to CPUs and NUMA nodes and derives the
//! topology from the CPU model (and the `node-capacity` VM its scheduler tool creates), is not
//! implemented; its settings are accepted and ignored.

mod cpuset;
mod settings;

use std::collections::BTreeMap;

use karpenter_core::resources::Resources;

pub use cpuset::{CpuSet, CpuSetError, MAX_CPU_ID};
pub use settings::{
    ANY_NODE, DEFAULT_RESERVED_MEMORY, HostSettings, NodeSettingsError, NodeSettingsFile, NumaNode,
};

/// One Proxmox node as the API reports it (`/cluster/resources?type=node` or
/// `/nodes/{node}/status`).
#[derive(Clone, Debug, PartialEq)]
pub struct NodeStatus {
    /// The node's name: the zone.
    pub name: String,
    /// Whether its status is `online`; other nodes offer nothing.
    pub online: bool,
    /// Logical CPUs (`maxcpu`, `cpuinfo.cpus`).
    pub cpus: u32,
    /// Memory, bytes (`maxmem`, `memory.total`).
    pub memory: u64,
    /// CPU load as the share of the node's CPUs in use (`cpu`, 0 to 1).
    pub cpu_load: f64,
}

/// One VM as the API reports it (`/cluster/resources?type=vm`, and its config's `affinity`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VmStatus {
    /// `vmid`.
    pub id: u32,
    /// Its name (the NodeClaim's, for the VMs this provider makes).
    pub name: String,
    /// The node it is on.
    pub node: String,
    /// Whether its status is `running`; stopped VMs and templates take no room.
    pub running: bool,
    /// vCPUs (`maxcpu`).
    pub cpus: u32,
    /// Memory, bytes (`maxmem`).
    pub memory: u64,
    /// The host CPUs it is pinned to (`affinity`), if any.
    pub affinity: Option<CpuSet>,
}

/// The room a VM takes: whole vCPUs and bytes of memory.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VmShape {
    /// vCPUs.
    pub cpus: u32,
    /// Memory, bytes.
    pub memory: u64,
}

impl VmShape {
    /// The VM an instance type's capacity makes: its CPU rounded up to whole cores (a VM has
    /// whole vCPUs; upstream takes the quantity's `Value()`, which rounds up) and its memory.
    pub fn of(capacity: &Resources) -> Self {
        let cpus = capacity.cpu.max(0).saturating_add(999) / 1000;
        Self {
            cpus: u32::try_from(cpus).unwrap_or(u32::MAX),
            memory: u64::try_from(capacity.memory.max(0) / 1000).unwrap_or(u64::MAX),
        }
    }

    /// Whether this shape fits in `free`.
    pub fn fits_in(&self, free: &VmShape) -> bool {
        self.cpus <= free.cpus && self.memory <= free.memory
    }
}

/// Why a node has no capacity model, or a reservation does not fit.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CapacityError {
    /// The settings reserve more CPUs than the node has (upstream leaves such a node out).
    #[error("node {region}/{node}: {reserved} reserved CPUs, but the node has {cpus}")]
    ReservedCpus {
        /// The region.
        region: String,
        /// The node.
        node: String,
        /// Reserved CPUs.
        reserved: usize,
        /// The node's CPUs.
        cpus: usize,
    },
    /// The settings reserve all the node's memory or more (upstream leaves such a node out).
    #[error(
        "node {region}/{node}: {reserved} bytes of memory reserved, not less than the node's {memory}"
    )]
    ReservedMemory {
        /// The region.
        region: String,
        /// The node.
        node: String,
        /// Reserved memory, bytes.
        reserved: u64,
        /// The node's memory, bytes.
        memory: u64,
    },
    /// No such zone in the region (an offline or unknown node).
    #[error("zone {region}/{zone} is not known")]
    UnknownZone {
        /// The region.
        region: String,
        /// The zone.
        zone: String,
    },
    /// Not enough free CPUs for the reservation.
    #[error("zone {region}/{zone}: not enough CPUs: requested {requested}, free {free}")]
    NotEnoughCpus {
        /// The region.
        region: String,
        /// The zone.
        zone: String,
        /// vCPUs asked for.
        requested: u32,
        /// vCPUs free.
        free: u32,
    },
    /// Not enough free memory for the reservation.
    #[error("zone {region}/{zone}: not enough memory: requested {requested} bytes, free {free}")]
    NotEnoughMemory {
        /// The region.
        region: String,
        /// The zone.
        zone: String,
        /// Bytes asked for.
        requested: u64,
        /// Bytes free.
        free: u64,
    },
}

/// A running VM as counted on its node.
#[derive(Clone, Debug, PartialEq, Eq)]
struct CountedVm {
    name: String,
    cpus: u32,
    memory: u64,
    /// The host CPUs it is pinned to, less the reserved ones (a VM pinned only to reserved
    /// CPUs takes none of the others); `None` when it floats.
    pinned: Option<CpuSet>,
}

/// One Proxmox node's CPUs and memory: what it has, keeps for itself, and its running VMs use.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeCapacity {
    region: String,
    name: String,
    cpus: CpuSet,
    reserved_cpus: CpuSet,
    memory: u64,
    reserved_memory: u64,
    cpu_load: u32,
    vms: BTreeMap<u32, CountedVm>,
}

impl NodeCapacity {
    /// The node's capacity from its status, its settings and the region's VMs (those running
    /// on this node are counted; the others are skipped). Fails as upstream's resource manager
    /// does when the settings reserve more than the node has.
    ///
    /// A VM pinned to CPUs the node does not have counts only the ones it has; a VM that would
    /// not fit is still counted (the node shows no room rather than room it does not have —
    /// upstream skips such a VM and so reports room that is taken).
    pub fn new(
        region: &str,
        node: &NodeStatus,
        settings: &HostSettings,
        vms: &[VmStatus],
    ) -> Result<Self, CapacityError> {
        let (cpus, memory) = if settings.numa_nodes.is_empty() {
            (CpuSet::first(node.cpus), node.memory)
        } else {
            settings
                .numa_nodes
                .values()
                .fold((CpuSet::new(), 0u64), |(cpus, memory), numa| {
                    (cpus.union(&numa.cpus), memory.saturating_add(numa.memory))
                })
        };
        if settings.reserved_cpus.len() > cpus.len() {
            return Err(CapacityError::ReservedCpus {
                region: region.into(),
                node: node.name.clone(),
                reserved: settings.reserved_cpus.len(),
                cpus: cpus.len(),
            });
        }
        if settings.reserved_memory >= memory {
            return Err(CapacityError::ReservedMemory {
                region: region.into(),
                node: node.name.clone(),
                reserved: settings.reserved_memory,
                memory,
            });
        }
        let reserved_cpus = settings.reserved_cpus.intersection(&cpus);
        let counted = vms
            .iter()
            .filter(|vm| vm.running && vm.node == node.name)
            .map(|vm| {
                let pinned = vm
                    .affinity
                    .as_ref()
                    .filter(|a| !a.is_empty())
                    .map(|a| a.intersection(&cpus).difference(&reserved_cpus));
                let counted = CountedVm {
                    name: vm.name.clone(),
                    cpus: vm.cpus,
                    memory: vm.memory,
                    pinned,
                };
                (vm.id, counted)
            })
            .collect();
        Ok(Self {
            region: region.into(),
            name: node.name.clone(),
            cpus,
            reserved_cpus,
            memory,
            reserved_memory: settings.reserved_memory,
            cpu_load: load_percent(node.cpu_load),
            vms: counted,
        })
    }

    /// The region.
    pub fn region(&self) -> &str {
        &self.region
    }

    /// The node's name, the zone.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The node's CPU load, percent (upstream's `CPULoad`, truncated).
    pub fn cpu_load(&self) -> u32 {
        self.cpu_load
    }

    /// What the node has for VMs: its CPUs and memory less what it keeps for itself.
    pub fn usable(&self) -> VmShape {
        VmShape {
            cpus: count(self.cpus.len() - self.reserved_cpus.len()),
            memory: self.memory - self.reserved_memory,
        }
    }

    /// What its running VMs take: the union of the pinned CPUs plus the floating vCPUs, and
    /// their memory.
    pub fn used(&self) -> VmShape {
        let pinned = self
            .vms
            .values()
            .filter_map(|vm| vm.pinned.as_ref())
            .fold(CpuSet::new(), |all, pinned| all.union(pinned));
        let floating: u32 = self
            .vms
            .values()
            .filter(|vm| vm.pinned.is_none())
            .fold(0, |sum, vm| sum.saturating_add(vm.cpus));
        VmShape {
            cpus: count(pinned.len()).saturating_add(floating),
            memory: self
                .vms
                .values()
                .fold(0, |sum, vm| sum.saturating_add(vm.memory)),
        }
    }

    /// What is left for new VMs (never below zero).
    pub fn free(&self) -> VmShape {
        let (usable, used) = (self.usable(), self.used());
        VmShape {
            cpus: usable.cpus.saturating_sub(used.cpus),
            memory: usable.memory.saturating_sub(used.memory),
        }
    }

    /// Whether VM `name` is counted here.
    fn counts(&self, name: &str) -> bool {
        self.vms.values().any(|vm| vm.name == name)
    }
}

fn count(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// A share of the CPUs in use as upstream's whole percent (`int(cpu * 100)`).
fn load_percent(share: f64) -> u32 {
    if share.is_finite() && share > 0.0 {
        // Truncation is upstream's; a share above 1 (never reported) is kept as is.
        (share * 100.0) as u32
    } else {
        0
    }
}

/// The online nodes of one region as [`NodeCapacity`]s, each with its settings from `file`
/// (the defaults without one) and the region's running VMs counted where they run. Nodes whose
/// settings reserve more than they have are left out, as upstream does, and returned as errors
/// for the caller to report.
pub fn region_nodes(
    region: &str,
    nodes: &[NodeStatus],
    vms: &[VmStatus],
    file: Option<&NodeSettingsFile>,
) -> (Vec<NodeCapacity>, Vec<CapacityError>) {
    let mut out = Vec::new();
    let mut errors = Vec::new();
    for node in nodes.iter().filter(|n| n.online) {
        let settings = file
            .map(|f| f.host_settings(region, &node.name))
            .unwrap_or_default();
        match NodeCapacity::new(region, node, &settings, vms) {
            Ok(capacity) => out.push(capacity),
            Err(e) => errors.push(e),
        }
    }
    (out, errors)
}

/// A VM being created, counted on its node until the API lists it running.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Pending {
    region: String,
    zone: String,
    shape: VmShape,
}

/// Every region's nodes, and the VMs being created on them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Capacities {
    regions: BTreeMap<String, BTreeMap<String, NodeCapacity>>,
    /// By the VM's name (the NodeClaim's).
    pending: BTreeMap<String, Pending>,
}

impl Capacities {
    /// Nothing known yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Replaces what is known of `region` with `nodes` (a fresh read of the API, e.g. from
    /// [`region_nodes`]). A VM being created that the read counts running is no longer
    /// pending: its room is now in its node's count. The others stay pending.
    pub fn replace_region(&mut self, region: &str, nodes: Vec<NodeCapacity>) {
        let nodes: BTreeMap<String, NodeCapacity> =
            nodes.into_iter().map(|n| (n.name.clone(), n)).collect();
        self.pending
            .retain(|name, p| p.region != region || !nodes.values().any(|n| n.counts(name)));
        self.regions.insert(region.to_string(), nodes);
    }

    /// Updates a node's CPU load (upstream refreshes it more often than the capacity), given
    /// as the share of its CPUs in use. Unknown nodes are ignored.
    pub fn set_cpu_load(&mut self, region: &str, zone: &str, share: f64) {
        if let Some(node) = self.regions.get_mut(region).and_then(|r| r.get_mut(zone)) {
            node.cpu_load = load_percent(share);
        }
    }

    /// The regions, sorted.
    pub fn regions(&self) -> impl Iterator<Item = &str> {
        self.regions.keys().map(String::as_str)
    }

    /// The zones of `region`, sorted.
    pub fn zones<'a>(&'a self, region: &str) -> impl Iterator<Item = &'a str> + 'a {
        self.regions
            .get(region)
            .into_iter()
            .flat_map(|nodes| nodes.keys().map(String::as_str))
    }

    /// A node.
    pub fn node(&self, region: &str, zone: &str) -> Option<&NodeCapacity> {
        self.regions.get(region).and_then(|r| r.get(zone))
    }

    /// What the VMs being created take in a zone.
    fn pending_in(&self, region: &str, zone: &str) -> VmShape {
        self.pending
            .values()
            .filter(|p| p.region == region && p.zone == zone)
            .fold(VmShape::default(), |sum, p| VmShape {
                cpus: sum.cpus.saturating_add(p.shape.cpus),
                memory: sum.memory.saturating_add(p.shape.memory),
            })
    }

    /// How many VMs are being created in a zone.
    pub fn pending_count(&self, region: &str, zone: &str) -> usize {
        self.pending
            .values()
            .filter(|p| p.region == region && p.zone == zone)
            .count()
    }

    /// What a zone has left for new VMs, after its running VMs and the ones being created;
    /// `None` for an unknown zone.
    pub fn free(&self, region: &str, zone: &str) -> Option<VmShape> {
        let free = self.node(region, zone)?.free();
        let pending = self.pending_in(region, zone);
        Some(VmShape {
            cpus: free.cpus.saturating_sub(pending.cpus),
            memory: free.memory.saturating_sub(pending.memory),
        })
    }

    /// Whether a VM of an instance type's `capacity` fits in a zone now: its CPU (compared as
    /// the quantity, as upstream's `FitInZone`) and memory at most what is free. Unknown zones
    /// hold nothing.
    pub fn fits(&self, region: &str, zone: &str, capacity: &Resources) -> bool {
        self.free(region, zone).is_some_and(|free| {
            i64::from(free.cpus) * 1000 >= capacity.cpu
                && i128::from(free.memory) * 1000 >= i128::from(capacity.memory)
        })
    }

    /// Counts VM `name` of `shape` in a zone while it is being created, if it fits. Reserving
    /// a name again moves its reservation (a retried create does not count twice). The
    /// reservation lasts until [`Capacities::release`] or until a
    /// [`Capacities::replace_region`] counts the VM running.
    pub fn reserve(
        &mut self,
        region: &str,
        zone: &str,
        name: &str,
        shape: VmShape,
    ) -> Result<(), CapacityError> {
        let previous = self.pending.remove(name);
        let result = match self.free(region, zone) {
            None => Err(CapacityError::UnknownZone {
                region: region.into(),
                zone: zone.into(),
            }),
            Some(free) if shape.memory > free.memory => Err(CapacityError::NotEnoughMemory {
                region: region.into(),
                zone: zone.into(),
                requested: shape.memory,
                free: free.memory,
            }),
            Some(free) if shape.cpus > free.cpus => Err(CapacityError::NotEnoughCpus {
                region: region.into(),
                zone: zone.into(),
                requested: shape.cpus,
                free: free.cpus,
            }),
            Some(_) => Ok(()),
        };
        match result {
            Ok(()) => {
                self.pending.insert(
                    name.to_string(),
                    Pending {
                        region: region.into(),
                        zone: zone.into(),
                        shape,
                    },
                );
            }
            Err(_) => {
                if let Some(previous) = previous {
                    self.pending.insert(name.to_string(), previous);
                }
            }
        }
        result
    }

    /// Drops VM `name`'s reservation (its create failed, or it is gone); whether there was one.
    pub fn release(&mut self, name: &str) -> bool {
        self.pending.remove(name).is_some()
    }

    /// Stops counting a VM that was deleted, so its room is free before the next read of the
    /// API (as upstream's release on delete); whether it was counted.
    pub fn forget_vm(&mut self, region: &str, zone: &str, id: u32) -> bool {
        self.regions
            .get_mut(region)
            .and_then(|r| r.get_mut(zone))
            .is_some_and(|node| node.vms.remove(&id).is_some())
    }
}

#[cfg(test)]
#[path = "capacity_tests.rs"]
mod tests;
