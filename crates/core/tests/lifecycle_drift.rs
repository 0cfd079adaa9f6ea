//! Upstream's NodeClaim drift suite, its reserved-capacity `InstanceTypeNotFound` table: a
//! node launched into a capacity reservation has not drifted while its instance type is still
//! offered as reserved or on-demand in its zone, and has once only spot or nothing is.

use std::collections::BTreeMap;
use std::sync::Arc;

use karpenter_api::NodeClaim;
use karpenter_api::labels::{CAPACITY_TYPE_LABEL, INSTANCE_TYPE_LABEL, ZONE_LABEL};
use karpenter_core::disruption::drift::{DriftReason, instance_type_not_found};
use karpenter_core::instancetype::{InstanceType, Offering, Reservation, fake};

const TYPE: &str = "reserved-type";
const ZONE: &str = "test-zone-1a";
const RESERVATION_LABEL: &str = "karpenter.test.sh/capacity-reservation-id";

/// The instance type with offerings of `capacity_types` only, all in the node's zone.
fn offered_as(capacity_types: &[&str]) -> Vec<Arc<InstanceType>> {
    let mut it = fake::FakeInstanceType::new(TYPE)
        .offerings(&[("on-demand", ZONE, 1.0), ("spot", ZONE, 0.5)])
        .build();
    it.offerings.push(Offering {
        zone: ZONE.into(),
        capacity_type: "reserved".into(),
        price: 0.1,
        available: true,
        reservation: Some(Reservation {
            id: "cr-1".into(),
            capacity: 1,
            label: RESERVATION_LABEL.into(),
        }),
    });
    it.offerings
        .retain(|o| capacity_types.contains(&o.capacity_type.as_str()));
    vec![Arc::new(it)]
}

/// A node launched into the reservation.
fn reserved_claim() -> NodeClaim {
    let mut c = NodeClaim::default();
    c.metadata.name = Some("reserved".into());
    c.metadata.labels = Some(BTreeMap::from([
        (INSTANCE_TYPE_LABEL.to_string(), TYPE.to_string()),
        (ZONE_LABEL.to_string(), ZONE.to_string()),
        (CAPACITY_TYPE_LABEL.to_string(), "reserved".to_string()),
        (RESERVATION_LABEL.to_string(), "cr-1".to_string()),
    ]));
    c
}

#[test]
fn a_reserved_node_drifts_only_once_neither_reserved_nor_on_demand_is_offered() {
    let cases: [(&str, &[&str], bool); 5] = [
        (
            "reserved and on-demand offerings",
            &["reserved", "on-demand"],
            false,
        ),
        ("reserved offerings", &["reserved"], false),
        ("on-demand offerings", &["on-demand"], false),
        ("only spot", &["spot"], true),
        ("no compatible offerings", &[], true),
    ];
    for (case, offered, drifted) in cases {
        assert_eq!(
            instance_type_not_found(&offered_as(offered), &reserved_claim()),
            drifted.then_some(DriftReason::InstanceTypeNotFound),
            "{case}"
        );
    }
}
