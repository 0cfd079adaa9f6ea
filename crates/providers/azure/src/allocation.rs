//! Which VM a NodeClaim becomes: one size and one offering, chosen as upstream's default
//! allocation strategy chooses — the cheapest available offering its requirements allow; at
//! equal price spot before on-demand, then a zone before no zone. Zones that tie are spread
//! across claims (upstream shuffles them), by a hash of the claim's name so a retried create
//! of the same claim asks for the same zone.

use std::cmp::Ordering;
use std::sync::Arc;

use karpenter_api::NodeClaim;
use karpenter_api::labels::{CAPACITY_TYPE_ON_DEMAND, CAPACITY_TYPE_SPOT};
use karpenter_core::instancetype::{InstanceType, Offering, launchable};
use karpenter_core::scheduling::Requirements;

use crate::instancetype::{
    AKS_LABEL_PRIORITY, AKS_LABEL_SCALE_SET_PRIORITY, LABEL_PLACEMENT_SCOPE, REGIONAL_ZONE,
};

/// What to launch.
#[derive(Clone, Debug, PartialEq)]
pub struct Selection {
    /// The VM size.
    pub instance_type: Arc<InstanceType>,
    /// Where and how it is bought.
    pub offering: Offering,
}

impl Selection {
    /// Whether the VM is spot.
    pub fn spot(&self) -> bool {
        self.offering.capacity_type == CAPACITY_TYPE_SPOT
    }

    /// The ARM zone (`1`, `2`, `3`), or `None` for a regional VM.
    pub fn arm_zone(&self) -> Option<String> {
        arm_zone(&self.offering.zone)
    }
}

/// `eastus-2` → `2`; the regional zone → `None`.
pub fn arm_zone(zone: &str) -> Option<String> {
    if zone == REGIONAL_ZONE {
        return None;
    }
    zone.rsplit_once('-')
        .map(|(_, n)| n.to_string())
        .or_else(|| Some(zone.to_string()))
}

/// `zonal` or `regional`, as the placement-scope label says of an offering's zone.
pub fn placement_scope(zone: &str) -> &'static str {
    if zone == REGIONAL_ZONE {
        "regional"
    } else {
        "zonal"
    }
}

/// AKS's priority label value for a capacity type.
pub fn priority(capacity_type: &str) -> &'static str {
    if capacity_type == CAPACITY_TYPE_SPOT {
        "spot"
    } else {
        "regular"
    }
}

/// Whether `requirements` allow buying `offering`: its zone and capacity type, and the
/// placement scope and AKS priority labels those decide.
pub fn allows(requirements: &Requirements, offering: &Offering) -> bool {
    offering.available
        && offering.is_compatible(requirements)
        && requirements.allows(LABEL_PLACEMENT_SCOPE, placement_scope(&offering.zone))
        && requirements.allows(AKS_LABEL_PRIORITY, priority(&offering.capacity_type))
        && requirements.allows(
            AKS_LABEL_SCALE_SET_PRIORITY,
            priority(&offering.capacity_type),
        )
}

/// Orders two offerings: cheaper first, then spot, then zonal. Zone names never decide.
fn compare(a: &Offering, b: &Offering) -> Ordering {
    let capacity_rank = |o: &Offering| match o.capacity_type.as_str() {
        CAPACITY_TYPE_SPOT => 0,
        CAPACITY_TYPE_ON_DEMAND => 1,
        _ => 2,
    };
    let scope_rank = |o: &Offering| u8::from(o.zone == REGIONAL_ZONE);
    a.price
        .total_cmp(&b.price)
        .then_with(|| capacity_rank(a).cmp(&capacity_rank(b)))
        .then_with(|| scope_rank(a).cmp(&scope_rank(b)))
}

/// A stable per-claim spread of offerings that tie.
fn spread(claim: &str, zone: &str) -> u64 {
    karpenter_api::hash::fnv64(&format!("{claim}/{zone}"))
}

/// Every instance type the claim can launch as, each with its allowed offerings best first,
/// the types ordered by their best offering (then by name).
pub fn ranked(types: &[Arc<InstanceType>], claim: &NodeClaim) -> Vec<Selection> {
    let (requirements, launchable) = launchable(types, claim);
    let name = claim.metadata.name.as_deref().unwrap_or_default();
    let mut best: Vec<Selection> = launchable
        .into_iter()
        .filter_map(|it| {
            let offering = it
                .offerings
                .iter()
                .filter(|o| allows(&requirements, o))
                .min_by(|a, b| {
                    compare(a, b).then_with(|| spread(name, &a.zone).cmp(&spread(name, &b.zone)))
                })?;
            Some(Selection {
                instance_type: it.clone(),
                offering: offering.clone(),
            })
        })
        .collect();
    best.sort_by(|a, b| {
        compare(&a.offering, &b.offering)
            .then_with(|| a.instance_type.name.cmp(&b.instance_type.name))
    });
    best
}

/// The launch for `claim`: the first of [`ranked`].
pub fn select(types: &[Arc<InstanceType>], claim: &NodeClaim) -> Option<Selection> {
    ranked(types, claim).into_iter().next()
}

#[cfg(test)]
mod tests {
    use super::*;
    use karpenter_api::NodeSelectorRequirementWithMinValues;
    use karpenter_core::instancetype::Overhead;
    use karpenter_core::resources::Resources;

    fn offering(price: f64, capacity_type: &str, zone: &str, available: bool) -> Offering {
        Offering {
            zone: zone.into(),
            capacity_type: capacity_type.into(),
            price,
            available,
            reservation: None,
        }
    }

    fn it(name: &str, offerings: Vec<Offering>) -> Arc<InstanceType> {
        Arc::new(InstanceType::new(
            name,
            Requirements::new(),
            offerings,
            Resources::default(),
            Overhead::default(),
        ))
    }

    fn claim(name: &str, requirements: &[(&str, &[&str])]) -> NodeClaim {
        let mut c = NodeClaim::default();
        c.metadata.name = Some(name.into());
        c.spec.requirements = requirements
            .iter()
            .map(|(key, values)| NodeSelectorRequirementWithMinValues {
                key: key.to_string(),
                operator: karpenter_api::Operator::In,
                values: values.iter().map(|v| v.to_string()).collect(),
                min_values: None,
            })
            .collect();
        c
    }

    const CT: &str = karpenter_api::labels::CAPACITY_TYPE_LABEL;
    const ZONE: &str = karpenter_api::labels::ZONE_LABEL;
    const OD: &str = CAPACITY_TYPE_ON_DEMAND;
    const SPOT: &str = CAPACITY_TYPE_SPOT;

    /// Upstream's allocation strategy cases: which capacity type wins.
    #[test]
    fn the_chosen_offering_is_upstreams() {
        type Case<'a> = (
            &'a str,
            Vec<Offering>,
            Vec<(&'a str, &'a [&'a str])>,
            Option<&'a str>,
        );
        let cases: Vec<Case> = vec![
            (
                "on-demand when spot is not asked for",
                vec![offering(0.5, OD, "westus-1", true)],
                vec![(CT, &[OD]), (ZONE, &["westus-1"])],
                Some(OD),
            ),
            (
                "spot when asked for and available",
                vec![offering(0.1, SPOT, "westus-1", true)],
                vec![(CT, &[SPOT]), (ZONE, &["westus-1"])],
                Some(SPOT),
            ),
            (
                "nothing when spot is only in another zone",
                vec![offering(0.1, SPOT, "westus-2", true)],
                vec![(CT, &[SPOT]), (ZONE, &["westus-1"])],
                None,
            ),
            (
                "spot when it is cheaper",
                vec![
                    offering(0.5, OD, "westus-1", true),
                    offering(0.1, SPOT, "westus-1", true),
                ],
                vec![(CT, &[OD, SPOT]), (ZONE, &["westus-1"])],
                Some(SPOT),
            ),
            (
                "on-demand when it is cheaper",
                vec![
                    offering(0.1, OD, "westus-1", true),
                    offering(0.5, SPOT, "westus-1", true),
                ],
                vec![(CT, &[OD, SPOT]), (ZONE, &["westus-1"])],
                Some(OD),
            ),
            (
                "spot when asked for by the AKS priority label",
                vec![
                    offering(0.1, OD, "westus-1", true),
                    offering(0.05, SPOT, "westus-1", true),
                ],
                vec![(AKS_LABEL_PRIORITY, &["spot"]), (ZONE, &["westus-1"])],
                Some(SPOT),
            ),
            (
                "on-demand when the AKS priority label asks for regular, though spot is cheaper",
                vec![
                    offering(0.1, OD, "westus-1", true),
                    offering(0.05, SPOT, "westus-1", true),
                ],
                vec![(AKS_LABEL_PRIORITY, &["regular"])],
                Some(OD),
            ),
            (
                "spot at the same price as on-demand",
                vec![
                    offering(0.1, OD, "westus-1", true),
                    offering(0.1, SPOT, "westus-1", true),
                ],
                vec![],
                Some(SPOT),
            ),
            (
                "never an unavailable offering",
                vec![
                    offering(0.01, SPOT, "westus-1", false),
                    offering(0.1, OD, "westus-1", true),
                ],
                vec![],
                Some(OD),
            ),
        ];
        for (name, offerings, requirements, want) in cases {
            let types = vec![it("Standard_D2s_v3", offerings)];
            let got = select(&types, &claim("c", &requirements));
            assert_eq!(
                got.as_ref().map(|s| s.offering.capacity_type.as_str()),
                want,
                "{name}"
            );
        }
    }

    #[test]
    fn types_go_cheapest_first_then_by_name() {
        let types = vec![
            it(
                "Standard_F16s_v2",
                vec![offering(0.5, OD, "westus-1", true)],
            ),
            it(
                "Standard_D2s_v3",
                vec![offering(0.05, SPOT, "westus-1", true)],
            ),
            it(
                "Standard_D64s_v3",
                vec![offering(0.1, OD, "westus-1", true)],
            ),
            it("Standard_D4s_v3", vec![offering(0.1, OD, "westus-1", true)]),
            it("Standard_A1", vec![offering(0.01, OD, "westus-1", false)]),
        ];
        let ranked = ranked(&types, &claim("c", &[(CT, &[OD])]));
        let names: Vec<&str> = ranked
            .iter()
            .map(|s| s.instance_type.name.as_str())
            .collect();
        assert_eq!(
            names,
            ["Standard_D4s_v3", "Standard_D64s_v3", "Standard_F16s_v2"]
        );
    }

    #[test]
    fn a_zone_beats_no_zone_at_the_same_price_and_zones_spread_across_claims() {
        let types = vec![it(
            "Standard_D2s_v3",
            vec![
                offering(0.1, OD, REGIONAL_ZONE, true),
                offering(0.1, OD, "westus-1", true),
                offering(0.1, OD, "westus-2", true),
                offering(0.1, OD, "westus-3", true),
            ],
        )];
        let mut zones = std::collections::BTreeSet::new();
        for i in 0..30 {
            let claim = claim(&format!("default-{i}"), &[]);
            let s = select(&types, &claim).unwrap();
            assert_ne!(s.offering.zone, REGIONAL_ZONE);
            assert_eq!(
                select(&types, &claim).unwrap().offering.zone,
                s.offering.zone,
                "a retry asks for the same zone"
            );
            zones.insert(s.offering.zone);
        }
        assert_eq!(zones.len(), 3, "{zones:?}");
        // Asked for a regional VM, it gets one.
        let regional = claim("c", &[(LABEL_PLACEMENT_SCOPE, &["regional"])]);
        let s = select(&types, &regional).unwrap();
        assert_eq!(
            (s.offering.zone.as_str(), s.arm_zone()),
            (REGIONAL_ZONE, None)
        );
    }

    #[test]
    fn arm_zones_from_zone_labels() {
        assert_eq!(arm_zone("eastus-2").as_deref(), Some("2"));
        assert_eq!(arm_zone(REGIONAL_ZONE), None);
    }
}
