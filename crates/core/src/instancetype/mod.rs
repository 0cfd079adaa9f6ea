//! The provider-neutral model of what can be launched: instance types, their offerings (zone ×
//! capacity type, with a price and availability) and the resources a node of each type offers.

pub mod fake;
pub mod overlay;
mod repair;

use karpenter_api::labels::{CAPACITY_TYPE_LABEL, ZONE_LABEL};

pub use repair::RepairPolicy;

use crate::resources::Resources;
use crate::scheduling::Requirements;

/// A NodePool and the instance types its provider offers for it.
#[derive(Clone, Debug)]
pub struct NodePoolInput {
    /// The NodePool.
    pub node_pool: karpenter_api::NodePool,
    /// Every instance type the provider has for it.
    pub instance_types: Vec<std::sync::Arc<InstanceType>>,
}

/// One way to buy an instance type: a zone and a capacity type, at a price.
#[derive(Clone, Debug, PartialEq)]
pub struct Offering {
    /// The zone (`topology.kubernetes.io/zone`).
    pub zone: String,
    /// `spot`, `on-demand` or `reserved` (`karpenter.sh/capacity-type`).
    pub capacity_type: String,
    /// Price per hour.
    pub price: f64,
    /// Whether it can be launched now (capacity errors mark offerings unavailable for a while).
    pub available: bool,
    /// The capacity reservation a `reserved` offering launches into; `None` for the others.
    pub reservation: Option<Reservation>,
}

/// A capacity reservation behind a `reserved` offering, as upstream's offering carries it: the
/// reservation-id requirement (upstream's `cloudprovider.ReservationIDLabel`) and
/// `ReservationCapacity`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reservation {
    /// The provider's reservation id (`cr-…` on AWS).
    pub id: String,
    /// How many more instances the reservation can launch.
    pub capacity: u32,
    /// The label a node launched into the reservation carries its id in. It is the
    /// provider's (`karpenter.k8s.aws/capacity-reservation-id` on AWS), so the provider names
    /// it here and the scheduler writes it into the NodeClaims it decides to launch into the
    /// reservation, without knowing the provider.
    pub label: String,
}

/// The capacity type of an offering backed by a capacity reservation.
pub const RESERVED: &str = "reserved";

impl Offering {
    /// Whether `requirements` allow this offering's zone and capacity type, and for a
    /// reserved offering its reservation id (a NodeClaim the scheduler pinned to reservations
    /// launches into no other).
    pub fn is_compatible(&self, requirements: &Requirements) -> bool {
        requirements.allows(ZONE_LABEL, &self.zone)
            && requirements.allows(CAPACITY_TYPE_LABEL, &self.capacity_type)
            && self
                .reservation
                .as_ref()
                .is_none_or(|r| requirements.allows(&r.label, &r.id))
    }

    /// The reservation behind this offering when it is a reserved one.
    pub fn reserved(&self) -> Option<&Reservation> {
        self.reservation
            .as_ref()
            .filter(|_| self.capacity_type == RESERVED)
    }
}

/// What the node reserves for itself out of the instance's capacity.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Overhead {
    /// Reserved for Kubernetes daemons (kubelet, container runtime).
    pub kube_reserved: Resources,
    /// Reserved for the operating system.
    pub system_reserved: Resources,
    /// Kept free so the kubelet can evict before the node runs out.
    pub eviction_threshold: Resources,
}

impl Overhead {
    /// The sum of all reservations.
    pub fn total(&self) -> Resources {
        let mut total = self.kube_reserved.clone();
        total.add(&self.system_reserved);
        total.add(&self.eviction_threshold);
        total
    }
}

/// A kind of machine a provider can launch.
#[derive(Clone, Debug, PartialEq)]
pub struct InstanceType {
    /// The name, also the node's `node.kubernetes.io/instance-type` label.
    pub name: String,
    /// The labels a node of this type has, as requirements (zone and capacity type span the
    /// offerings).
    pub requirements: Requirements,
    /// The ways to buy it.
    pub offerings: Vec<Offering>,
    /// The machine's resources.
    pub capacity: Resources,
    /// What the node keeps for itself.
    pub overhead: Overhead,
    allocatable: Resources,
    /// A NodeOverlay changed the price of one of its offerings.
    price_overlaid: bool,
    /// A NodeOverlay added to its capacity.
    capacity_overlaid: bool,
    /// The devices its drivers will publish (Dynamic Resource Allocation); none by default.
    pub dynamic_resources: std::sync::Arc<crate::scheduling::dynamic_resources::DynamicResources>,
}

impl InstanceType {
    /// An instance type; allocatable is computed once here.
    pub fn new(
        name: impl Into<String>,
        requirements: Requirements,
        offerings: Vec<Offering>,
        capacity: Resources,
        overhead: Overhead,
    ) -> Self {
        let mut allocatable = capacity.clone();
        allocatable.sub(&overhead.total());
        // Huge pages are carved out of memory.
        let huge_pages: i64 = capacity
            .iter()
            .filter(|(n, _)| n.starts_with("hugepages-"))
            .map(|(_, v)| v)
            .sum();
        allocatable.memory = (allocatable.memory - huge_pages).max(0);
        Self {
            name: name.into(),
            requirements,
            offerings,
            capacity,
            overhead,
            allocatable,
            price_overlaid: false,
            capacity_overlaid: false,
            dynamic_resources: Default::default(),
        }
    }

    /// Whether a NodeOverlay changed the price of one of its offerings (upstream's
    /// `IsPricingOverlayApplied`).
    pub fn price_overlaid(&self) -> bool {
        self.price_overlaid
    }

    /// Whether a NodeOverlay added to its capacity (upstream's `IsCapacityOverlayApplied`).
    pub fn capacity_overlaid(&self) -> bool {
        self.capacity_overlaid
    }

    /// What pods can use: capacity less overhead and huge pages.
    pub fn allocatable(&self) -> &Resources {
        &self.allocatable
    }

    /// The available offerings `requirements` allow.
    pub fn compatible_offerings<'a>(
        &'a self,
        requirements: &'a Requirements,
    ) -> impl Iterator<Item = &'a Offering> + 'a {
        self.offerings
            .iter()
            .filter(move |o| o.available && o.is_compatible(requirements))
    }

    /// The type without its reserved offerings, for when the `ReservedCapacity` gate is off
    /// (upstream's providers then offer none); `None` when it has none to drop.
    pub fn without_reserved_offerings(&self) -> Option<Self> {
        if !self.offerings.iter().any(|o| o.capacity_type == RESERVED) {
            return None;
        }
        let mut it = self.clone();
        it.offerings.retain(|o| o.capacity_type != RESERVED);
        let listed = it
            .requirements
            .get(CAPACITY_TYPE_LABEL)
            .filter(|r| r.operator() == karpenter_api::Operator::In)
            .cloned();
        if let Some(ct) = listed {
            it.requirements.remove(CAPACITY_TYPE_LABEL);
            let kept: Vec<&str> = ct.values().filter(|v| *v != RESERVED).collect();
            it.requirements.add(crate::scheduling::Requirement::new(
                CAPACITY_TYPE_LABEL,
                karpenter_api::Operator::In,
                &kept,
            ));
        }
        Some(it)
    }

    /// The cheapest available offering `requirements` allow, if any.
    pub fn cheapest_price(&self, requirements: &Requirements) -> Option<f64> {
        self.compatible_offerings(requirements)
            .map(|o| o.price)
            .min_by(f64::total_cmp)
    }
}

/// The claim's requirements, and the instance types it may launch as: those its requirements
/// allow and whose allocatable holds its requests.
pub fn launchable<'a>(
    types: &'a [std::sync::Arc<InstanceType>],
    claim: &karpenter_api::NodeClaim,
) -> (Requirements, Vec<&'a std::sync::Arc<InstanceType>>) {
    let requirements = Requirements::from_node_claim(&claim.spec.requirements);
    let requests = Resources::from_list(&claim.spec.resources.requests).unwrap_or_default();
    let types = types
        .iter()
        .filter(|it| requirements.intersects(&it.requirements).is_ok())
        .filter(|it| requests.fits(it.allocatable()))
        .collect();
    (requirements, types)
}

/// The launch a NodeClaim gets where the provider takes the lowest price (KWOK, and AWS for
/// on-demand): the cheapest available offering, among the instance types its requirements
/// allow and whose allocatable holds its requests. `plan` names the same one.
pub fn cheapest_launch<'a>(
    types: &'a [std::sync::Arc<InstanceType>],
    claim: &karpenter_api::NodeClaim,
) -> Option<(&'a InstanceType, &'a Offering)> {
    let (requirements, launchable) = launchable(types, claim);
    let mut best: Option<(&InstanceType, &Offering)> = None;
    for it in launchable {
        let cheapest = it
            .offerings
            .iter()
            .filter(|o| o.available && o.is_compatible(&requirements))
            .min_by(|a, b| a.price.total_cmp(&b.price));
        if let Some(o) = cheapest
            && best.is_none_or(|(_, b)| o.price < b.price)
        {
            best = Some((&**it, o));
        }
    }
    best
}

/// The labels of an instance launched as `it` in `offering` for `claim`: the type's own
/// single-valued labels, what the claim's requirements decide (see [`node_claim_labels`];
/// `provider_labels` are the provider's well-known ones), and the offering's zone and capacity
/// type.
///
/// [`node_claim_labels`]: crate::scheduling::requirements::node_claim_labels
pub fn launch_labels<S: AsRef<str>>(
    claim: &karpenter_api::NodeClaim,
    it: &InstanceType,
    offering: &Offering,
    provider_labels: &[S],
) -> std::collections::BTreeMap<String, String> {
    let mut labels = it.requirements.single_valued_labels();
    labels.extend(crate::scheduling::requirements::node_claim_labels(
        claim,
        provider_labels,
    ));
    labels.insert(ZONE_LABEL.into(), offering.zone.clone());
    labels.insert(CAPACITY_TYPE_LABEL.into(), offering.capacity_type.clone());
    if let Some(r) = offering.reserved() {
        labels.insert(r.label.clone(), r.id.clone());
    }
    labels
}

/// Orders instance types by their cheapest compatible available offering; types without one go
/// last. Ties keep their order (upstream's sort is unstable; a stable order is reproducible).
pub fn order_by_price<T: std::borrow::Borrow<InstanceType>>(
    types: &mut [T],
    requirements: &Requirements,
) {
    types.sort_by_cached_key(|it| {
        let price = it.borrow().cheapest_price(requirements).unwrap_or(f64::MAX);
        // Prices are finite and non-negative, so their bit patterns order like the numbers.
        price.to_bits()
    });
}
