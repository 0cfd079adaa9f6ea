//! The simulator's `proxmox` catalog: upstream's built-in instance types
//! ([`instancetype::default_specs`]) on a homelab cluster, built by the provider's own
//! [`instancetype::instance_types`] — upstream's reservations, prices by its formula, on
//! demand, offered on each node and available where an empty node has room for the VM.
//!
//! The cluster ([`homelab`]) is region `pve` with three nodes: `pve1` and `pve2` with 32
//! threads and 128 GiB, `pve3` with 16 threads and 64 GiB, each keeping upstream's 1 GiB for
//! itself. So the 64 GB types fit only on `pve1` and `pve2`, and `m1.16VCPU-128GB` nowhere (no
//! node has 128 GiB beside the host's share); it is listed, as upstream lists every type, and
//! never launched. The simulator does not fill the nodes as it launches: each offering stays
//! as an empty node makes it.

use karpenter_cloudprovider::Catalog;

use crate::capacity::{Capacities, HostSettings, NodeCapacity, NodeStatus};
use crate::instancetype::{self, InstanceTypeOptions, LABELS};

/// The catalog's region (a Proxmox cluster's name).
pub const REGION: &str = "pve";

/// The catalog's nodes: (name, logical CPUs, memory GiB).
pub const NODES: [(&str, u32, u64); 3] = [("pve1", 32, 128), ("pve2", 32, 128), ("pve3", 16, 64)];

/// The homelab cluster of [`NODES`], empty, with the default host settings.
pub fn homelab() -> Capacities {
    let nodes = NODES
        .iter()
        .map(|&(name, cpus, gib)| {
            let status = NodeStatus {
                name: name.into(),
                online: true,
                cpus,
                memory: gib << 30,
                cpu_load: 0.0,
            };
            NodeCapacity::new(REGION, &status, &HostSettings::default(), &[])
                .expect("the catalog's nodes have more than they reserve")
        })
        .collect();
    let mut capacities = Capacities::new();
    capacities.replace_region(REGION, nodes);
    capacities
}

/// The `proxmox` catalog.
pub fn catalog() -> Catalog {
    let types = instancetype::instance_types(
        &instancetype::default_specs(),
        &homelab(),
        &InstanceTypeOptions::default(),
        &|_, _, _| false,
    );
    Catalog::new("proxmox", types, &LABELS)
}
