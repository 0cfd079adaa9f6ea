//! What one CreateFleet asks for, decided from the NodeClaim, the instance types and the
//! resolved NodeClass: which capacity type (upstream's order: reserved capacity, then spot, then
//! on-demand, each when the claim allows it and an offering is available), and the overrides
//! (type × subnet) in price order, at most 60 types, grouped into one launch template per AMI,
//! pod count and capacity reservation.

use std::collections::BTreeMap;
use std::sync::Arc;

use karpenter_api::NodeClaim;
use karpenter_api::labels::{ARCH_LABEL, CAPACITY_TYPE_LABEL};
use karpenter_core::instancetype::InstanceType;
use karpenter_core::resources::Resources;
use karpenter_core::scheduling::Requirements;

use crate::instancetype::{RESOURCE_EFA, Reservation};

/// At most this many instance types go into one fleet (upstream's `MaxInstanceTypes`).
pub const MAX_INSTANCE_TYPES: usize = 60;

/// A subnet a fleet may launch into.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LaunchSubnet {
    /// `subnet-…`.
    pub id: String,
    /// Its zone.
    pub zone: String,
    /// Free addresses; the roomiest subnet of a zone is used.
    pub available_ips: i64,
}

/// An AMI and the instance types it boots.
#[derive(Clone, Debug, PartialEq)]
pub struct LaunchImage {
    /// `ami-…`.
    pub id: String,
    /// What a type must satisfy to boot it (architecture, GPU variant).
    pub requirements: Requirements,
}

/// One override: a type in a subnet at a price.
#[derive(Clone, Debug, PartialEq)]
pub struct Override {
    /// `m5.large`.
    pub instance_type: String,
    /// The subnet.
    pub subnet_id: String,
    /// Its zone.
    pub zone: String,
    /// The offering's price.
    pub price: f64,
}

/// One launch template's worth of overrides: the AMI, the kubelet's max pods, and for reserved
/// capacity the reservation its instances go into.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct TemplateKey {
    /// `ami-…`.
    pub image: String,
    /// The kubelet's max pods.
    pub pods: i64,
    /// `cr-…`, for reserved capacity.
    pub reservation: Option<String>,
    /// EFA interfaces to attach: the type's EFA count when the claim requests EFA, else 0.
    pub efa: i64,
}

/// The fleet to request.
#[derive(Clone, Debug, PartialEq)]
pub struct FleetPlan {
    /// `spot` or `on-demand`.
    pub capacity_type: String,
    /// Overrides per launch template, cheapest first.
    pub by_image: BTreeMap<TemplateKey, Vec<Override>>,
}

/// Why no fleet can be asked for.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// No type, offering and subnet fits the claim.
    #[error(
        "no instance type, offering and subnet satisfies the claim's requirements and requests"
    )]
    NothingFits,
    /// The NodeClass resolved no AMI the fitting types can boot.
    #[error("no AMI boots instance type {0}")]
    NoImage(String),
}

/// Plans the fleet for a claim.
pub fn plan(
    claim: &NodeClaim,
    types: &[Arc<InstanceType>],
    subnets: &[LaunchSubnet],
    images: &[LaunchImage],
    reservations: &[Reservation],
) -> Result<FleetPlan, PlanError> {
    let requirements = Requirements::from_node_claim(&claim.spec.requirements);
    let requests = Resources::from_list(&claim.spec.resources.requests).unwrap_or_default();
    // Upstream attaches EFA interfaces when the claim names the resource at all.
    let wants_efa = claim.spec.resources.requests.contains_key(RESOURCE_EFA);
    let arch = |t: &InstanceType| {
        t.requirements
            .get(ARCH_LABEL)
            .and_then(|r| r.values().next().map(str::to_string))
            .unwrap_or_default()
    };
    // The first (newest) image the type can boot.
    let image_for = |t: &InstanceType| {
        images
            .iter()
            .find(|i| i.requirements.intersects(&t.requirements).is_ok())
    };
    let fitting: Vec<&InstanceType> = types
        .iter()
        .map(|t| &**t)
        .filter(|t| requirements.intersects(&t.requirements).is_ok())
        .filter(|t| requests.fits(t.allocatable()))
        .collect();
    // A type no resolved AMI boots (an arm64 type with only x86_64 images) cannot launch.
    let (fitting, unbootable): (Vec<&InstanceType>, Vec<&InstanceType>) =
        fitting.into_iter().partition(|t| image_for(t).is_some());
    if fitting.is_empty()
        && let Some(t) = unbootable.first()
    {
        return Err(PlanError::NoImage(format!("{} ({})", t.name, arch(t))));
    }
    // The roomiest subnet per zone.
    let mut subnet_by_zone: BTreeMap<&str, &LaunchSubnet> = BTreeMap::new();
    for s in subnets {
        let slot = subnet_by_zone.entry(&s.zone).or_insert(s);
        if s.available_ips > slot.available_ips {
            *slot = s;
        }
    }
    let available = |t: &InstanceType, ct: &str| {
        t.offerings.iter().any(|o| {
            o.available
                && o.capacity_type == ct
                && o.is_compatible(&requirements)
                && subnet_by_zone.contains_key(o.zone.as_str())
        })
    };
    let Some(capacity_type) = ["reserved", "spot", "on-demand"].into_iter().find(|ct| {
        requirements.allows(CAPACITY_TYPE_LABEL, ct) && fitting.iter().any(|t| available(t, ct))
    }) else {
        return Err(PlanError::NothingFits);
    };
    // The scheduler decided which reservations the claim may use (its
    // `karpenter.k8s.aws/capacity-reservation-id` requirement, which reserved offerings must
    // allow to be compatible); a reservation the NodeClass no longer resolves with room is
    // skipped.
    let still_open = |id: &str| reservations.iter().any(|r| r.id == id && r.available > 0);
    let mut overrides: Vec<(f64, &InstanceType, Option<String>, Override)> = Vec::new();
    for t in &fitting {
        for o in t.offerings.iter().filter(|o| {
            o.available && o.capacity_type == capacity_type && o.is_compatible(&requirements)
        }) {
            let reservation = match o.reserved() {
                Some(r) if still_open(&r.id) => Some(r.id.clone()),
                Some(_) => continue,
                None => None,
            };
            if let Some(subnet) = subnet_by_zone.get(o.zone.as_str()) {
                overrides.push((
                    o.price,
                    t,
                    reservation,
                    Override {
                        instance_type: t.name.clone(),
                        subnet_id: subnet.id.clone(),
                        zone: o.zone.clone(),
                        price: o.price,
                    },
                ));
            }
        }
    }
    // Cheapest types first (by their cheapest offering), then keep the first 60 types.
    overrides.sort_by(|a, b| a.0.total_cmp(&b.0).then_with(|| a.1.name.cmp(&b.1.name)));
    let mut kept_types: Vec<&str> = Vec::new();
    let mut by_image: BTreeMap<TemplateKey, Vec<Override>> = BTreeMap::new();
    for (_, t, reservation, o) in overrides {
        if !kept_types.contains(&t.name.as_str()) {
            if kept_types.len() == MAX_INSTANCE_TYPES {
                continue;
            }
            kept_types.push(&t.name);
        }
        if let Some(image) = image_for(t) {
            let key = TemplateKey {
                image: image.id.clone(),
                pods: t.capacity.pods / 1000,
                reservation,
                efa: if wants_efa {
                    t.capacity.get(RESOURCE_EFA) / 1000
                } else {
                    0
                },
            };
            by_image.entry(key).or_default().push(o);
        }
    }
    Ok(FleetPlan {
        capacity_type: capacity_type.into(),
        by_image,
    })
}

/// `capacity-block`, the reservation type of a Capacity Block for ML.
pub const CAPACITY_BLOCK: &str = "capacity-block";

/// Keeps one kind of reservation in a reserved plan, as upstream does: a fleet has a single
/// target capacity type, and Capacity Blocks need their own (`capacity-block`), so on-demand
/// reservations and Capacity Blocks cannot share a fleet. The kind whose cheapest override is
/// cheapest stays (on-demand reservations first on a tie); `type_of` names a reservation's
/// kind (`default` or `capacity-block`). Returns the kind kept, `None` for an unreserved plan.
pub fn keep_one_reservation_type(
    plan: &mut FleetPlan,
    type_of: impl Fn(&str) -> String,
) -> Option<String> {
    let kind = |key: &TemplateKey| key.reservation.as_deref().map(&type_of);
    let mut cheapest: BTreeMap<String, f64> = BTreeMap::new();
    for (key, overrides) in &plan.by_image {
        let Some(k) = kind(key) else { continue };
        let price = overrides
            .iter()
            .map(|o| o.price)
            .fold(f64::INFINITY, f64::min);
        let slot = cheapest.entry(k).or_insert(f64::INFINITY);
        *slot = slot.min(price);
    }
    let rank = |k: &str| u8::from(k == CAPACITY_BLOCK);
    let chosen = cheapest
        .into_iter()
        .min_by(|a, b| {
            a.1.total_cmp(&b.1)
                .then_with(|| rank(&a.0).cmp(&rank(&b.0)))
        })
        .map(|(k, _)| k)?;
    plan.by_image
        .retain(|key, _| kind(key).is_none_or(|k| k == chosen));
    Some(chosen)
}
