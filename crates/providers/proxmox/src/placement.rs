//! Which Proxmox node (zone) a VM is created on, after upstream's
//! `pkg/providers/instance/instance_placement.go` and the zone loop of its `Create`:
//!
//! 1. the zones where the instance type has an available offering the NodeClaim allows
//!    ([`offered_zones`], upstream's `getValuesByKey`);
//! 2. of those, the NodeClass's selected zones in the region (its status), where the VM fits
//!    now — counting the VMs being created ([`Capacities::fits`]);
//! 3. in the order of the NodeClass's `placementStrategy.zoneBalance` ([`ZoneBalance`]):
//!    `Balanced` (the default) least CPU load first, `AvailabilityFirst` in a shuffled order.
//!
//! The caller tries the zones in order and [`Capacities::reserve`]s the first that still has
//! room. [`capacity_type`] (upstream's `getCapacityType`) says which capacity type the VM is
//! launched as.
//!
//! Upstream shuffles `AvailabilityFirst` zones at random; here the shuffle is seeded by the
//! caller (the NodeClaim's name), so a create retried for the same NodeClaim tries the zones
//! in the same order, while different NodeClaims still spread over the zones.

use std::collections::BTreeSet;

use karpenter_api::hash::fnv64;
use karpenter_api::labels::{
    CAPACITY_TYPE_LABEL, CAPACITY_TYPE_ON_DEMAND, CAPACITY_TYPE_RESERVED, CAPACITY_TYPE_SPOT,
};
use karpenter_core::instancetype::InstanceType;
use karpenter_core::scheduling::Requirements;

use crate::capacity::Capacities;

/// How a NodeClass spreads its VMs over the zones (`placementStrategy.zoneBalance`). Defined
/// here as a plain enum: the caller maps the NodeClass's value with [`ZoneBalance::from_spec`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ZoneBalance {
    /// `Balanced`: the zone with the least CPU load first (upstream's default).
    #[default]
    Balanced,
    /// `AvailabilityFirst`: the zones in a shuffled order.
    AvailabilityFirst,
}

impl ZoneBalance {
    /// `Balanced`, as the API spells it.
    pub const BALANCED: &'static str = "Balanced";
    /// `AvailabilityFirst`, as the API spells it.
    pub const AVAILABILITY_FIRST: &'static str = "AvailabilityFirst";

    /// The strategy a NodeClass's `zoneBalance` names. Absent, empty or unknown values are
    /// `Balanced`, as upstream's `switch` falls through to it.
    pub fn from_spec(value: Option<&str>) -> Self {
        match value {
            Some(Self::AVAILABILITY_FIRST) => Self::AvailabilityFirst,
            _ => Self::Balanced,
        }
    }

    /// The API's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Balanced => Self::BALANCED,
            Self::AvailabilityFirst => Self::AVAILABILITY_FIRST,
        }
    }
}

/// The zones of the type's available offerings that `requirements` allow (zone and capacity
/// type), each once, in the offerings' order.
pub fn offered_zones(instance_type: &InstanceType, requirements: &Requirements) -> Vec<String> {
    let mut seen = BTreeSet::new();
    instance_type
        .compatible_offerings(requirements)
        .filter(|o| seen.insert(o.zone.as_str()))
        .map(|o| o.zone.clone())
        .collect()
}

/// Orders a region's zones by `strategy`. Zones the region does not know (offline or gone
/// nodes) are dropped. `Balanced`: least CPU load first; ties go to the zone with fewer VMs
/// being created (so a burst of creates between two load readings spreads), then by name.
/// `AvailabilityFirst`: a shuffle seeded by `seed`, the same for the same seed and zones
/// whatever their input order.
pub fn order_zones(
    strategy: ZoneBalance,
    region: &str,
    zones: &[String],
    capacities: &Capacities,
    seed: &str,
) -> Vec<String> {
    let mut known: Vec<&String> = zones
        .iter()
        .filter(|z| capacities.node(region, z).is_some())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    match strategy {
        ZoneBalance::Balanced => {
            known.sort_by_key(|zone| {
                let load = capacities
                    .node(region, zone)
                    .map_or(u32::MAX, |n| n.cpu_load());
                (load, capacities.pending_count(region, zone), zone.as_str())
            });
        }
        ZoneBalance::AvailabilityFirst => shuffle(&mut known, fnv64(seed)),
    }
    known.into_iter().cloned().collect()
}

/// A Fisher–Yates shuffle driven by SplitMix64: small, and the same on every build.
fn shuffle<T>(items: &mut [T], seed: u64) {
    let mut state = seed;
    let mut next = || {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    for i in (1..items.len()).rev() {
        let bound = u64::try_from(i + 1).unwrap_or(u64::MAX);
        let j = usize::try_from(next() % bound).unwrap_or(0);
        items.swap(i, j);
    }
}

/// What a create needs to choose its zone.
#[derive(Clone, Copy, Debug)]
pub struct PlacementRequest<'a> {
    /// The type being launched.
    pub instance_type: &'a InstanceType,
    /// The NodeClaim's requirements.
    pub requirements: &'a Requirements,
    /// The region (the NodeClass's).
    pub region: &'a str,
    /// The zones the NodeClass can launch in there (its status's selected zones).
    pub selected_zones: &'a [String],
    /// The NodeClass's strategy.
    pub strategy: ZoneBalance,
    /// The shuffle's seed for `AvailabilityFirst`: the NodeClaim's name.
    pub seed: &'a str,
}

/// The zones to try for a create, best first: offered and allowed ([`offered_zones`]),
/// selected by the NodeClass, with room for the VM now, ordered by the strategy. Empty when
/// the type fits nowhere it may go.
pub fn zones_for_create(request: &PlacementRequest<'_>, capacities: &Capacities) -> Vec<String> {
    let selected: BTreeSet<&str> = request.selected_zones.iter().map(String::as_str).collect();
    let zones: Vec<String> = offered_zones(request.instance_type, request.requirements)
        .into_iter()
        .filter(|z| selected.contains(z.as_str()))
        .filter(|z| capacities.fits(request.region, z, &request.instance_type.capacity))
        .collect();
    order_zones(
        request.strategy,
        request.region,
        &zones,
        capacities,
        request.seed,
    )
}

/// The capacity type a VM of `instance_type` in `zone` is launched as: `reserved`, else
/// `spot`, when the NodeClaim's capacity-type requirement lists it and the type has an
/// available offering of it there; `on-demand` otherwise — also when the NodeClaim does not
/// name capacity types at all, as upstream has it.
pub fn capacity_type(
    requirements: &Requirements,
    instance_type: &InstanceType,
    zone: &str,
) -> &'static str {
    let listed = |capacity_type: &str| {
        requirements
            .get(CAPACITY_TYPE_LABEL)
            .is_some_and(|r| !r.is_complement() && r.has(capacity_type))
    };
    for candidate in [CAPACITY_TYPE_RESERVED, CAPACITY_TYPE_SPOT] {
        if !listed(candidate) {
            continue;
        }
        // Upstream narrows the NodeClaim's zones to the chosen one, so only the zone and the
        // capacity type decide.
        let offered = instance_type
            .offerings
            .iter()
            .any(|o| o.available && o.zone == zone && o.capacity_type == candidate);
        if offered {
            return candidate;
        }
    }
    CAPACITY_TYPE_ON_DEMAND
}

#[cfg(test)]
#[path = "placement_tests.rs"]
mod tests;
