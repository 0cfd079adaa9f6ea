//! The scenario's capacity reservations as a provider offers them: a `reserved` offering per
//! reservation on its instance type, priced as upstream's AWS provider prices it (the on-demand
//! price over ten million: all but free, while keeping the types' order for consolidation), with
//! what is left of it. A node launched into a reservation takes one instance; when it goes away
//! the instance is free again, so what is left is always the count less the live nodes in it.

use std::sync::Arc;

use karpenter_api::Operator;
use karpenter_api::labels::{CAPACITY_TYPE_LABEL, ZONE_LABEL};
use karpenter_core::instancetype::{InstanceType, Offering, RESERVED, Reservation};
use karpenter_core::scheduling::Requirement;

use crate::catalog::Catalog;
use crate::scenario::CapacityReservation;

/// The label a reservation's id goes in when neither the scenario nor the catalog names one.
pub const DEFAULT_LABEL: &str = "simulation.karpenter-rs.dev/reservation-id";

/// Upstream's AWS provider divides the on-demand price by this for reserved offerings.
const PRICE_DIVISOR: f64 = 10_000_000.0;

/// The scenario's reservations, each with the label its id goes in.
#[derive(Clone, Debug, Default)]
pub(super) struct Reservations(Vec<(CapacityReservation, String)>);

impl Reservations {
    /// The declared reservations; the label defaults to the catalog's provider label for
    /// reservation ids, if it has one.
    pub(super) fn new(declared: &[CapacityReservation], catalog: &Catalog) -> Self {
        let catalog_label = catalog
            .reservation_label
            .clone()
            .unwrap_or_else(|| DEFAULT_LABEL.to_string());
        Self(
            declared
                .iter()
                .map(|r| {
                    let label = r.label.clone().unwrap_or_else(|| catalog_label.clone());
                    (r.clone(), label)
                })
                .collect(),
        )
    }

    /// The labels reservation ids go in (the scheduler labels NodeClaims pinned to one).
    pub(super) fn labels(&self) -> Vec<String> {
        let mut labels: Vec<String> = self.0.iter().map(|(_, l)| l.clone()).collect();
        labels.sort();
        labels.dedup();
        labels
    }

    /// The reservation a node with `labels` was launched into.
    pub(super) fn id_of(
        &self,
        labels: &std::collections::BTreeMap<String, String>,
    ) -> Option<String> {
        self.0
            .iter()
            .find(|(r, label)| labels.get(label) == Some(&r.id))
            .map(|(r, _)| r.id.clone())
    }

    /// `types` with each reservation's offering added to its instance type; `in_use(label, id)`
    /// counts the live nodes launched into it. A full reservation stays listed, unavailable, so
    /// the nodes in it keep their price.
    pub(super) fn offer(
        &self,
        types: &[Arc<InstanceType>],
        in_use: impl Fn(&str, &str) -> u32,
    ) -> Vec<Arc<InstanceType>> {
        if self.0.is_empty() {
            return types.to_vec();
        }
        types
            .iter()
            .map(|it| {
                let mine: Vec<&(CapacityReservation, String)> = self
                    .0
                    .iter()
                    .filter(|(r, _)| r.instance_type == it.name)
                    .collect();
                if mine.is_empty() {
                    return it.clone();
                }
                let mut it = (**it).clone();
                for (r, label) in mine {
                    let left = r.count.saturating_sub(in_use(label, &r.id));
                    let on_demand = it
                        .offerings
                        .iter()
                        .filter(|o| o.capacity_type == "on-demand")
                        .find(|o| o.zone == r.zone)
                        .or_else(|| it.offerings.iter().find(|o| o.capacity_type == "on-demand"))
                        .map_or(0.0, |o| o.price);
                    it.offerings.push(Offering {
                        zone: r.zone.clone(),
                        capacity_type: RESERVED.into(),
                        price: on_demand / PRICE_DIVISOR,
                        available: left > 0,
                        reservation: Some(Reservation {
                            id: r.id.clone(),
                            capacity: left,
                            label: label.clone(),
                        }),
                    });
                    widen(&mut it, ZONE_LABEL, &r.zone);
                    widen(&mut it, CAPACITY_TYPE_LABEL, RESERVED);
                }
                Arc::new(it)
            })
            .collect()
    }
}

/// Adds `value` to the type's `In` requirement on `key` (its labels span its offerings).
fn widen(it: &mut InstanceType, key: &str, value: &str) {
    let Some(r) = it.requirements.get(key) else {
        return;
    };
    if r.operator() != Operator::In || r.has(value) {
        return;
    }
    let mut values: Vec<String> = r.values().map(str::to_string).collect();
    values.push(value.to_string());
    it.requirements.remove(key);
    it.requirements
        .add(Requirement::new(key, Operator::In, &values));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn declared(id: &str, count: u32) -> CapacityReservation {
        CapacityReservation {
            id: id.into(),
            instance_type: "c-4x".into(),
            zone: "z-2".into(),
            count,
            label: None,
        }
    }

    fn catalog() -> Catalog {
        let zones = vec!["z-1".to_string()];
        let it = InstanceType::new(
            "c-4x",
            karpenter_cloudprovider::catalog::requirements(
                "c-4x",
                "amd64",
                &zones,
                &["on-demand"],
                &[],
            ),
            karpenter_cloudprovider::catalog::on_demand(&zones, 2.0),
            Default::default(),
            Default::default(),
        );
        Catalog::new("test", [it], &[])
    }

    #[test]
    fn offers_what_is_left_at_upstreams_price_and_keeps_full_ones_unavailable() {
        let catalog = catalog();
        let rs = Reservations::new(&[declared("cr-a", 2), declared("cr-b", 1)], &catalog);
        let used = |_: &str, id: &str| if id == "cr-b" { 1 } else { 0 };
        let types = rs.offer(&catalog.instance_types, used);
        let reserved: Vec<(&str, u32, bool, f64)> = types[0]
            .offerings
            .iter()
            .filter_map(|o| {
                o.reservation
                    .as_ref()
                    .map(|r| (r.id.as_str(), r.capacity, o.available, o.price))
            })
            .collect();
        assert_eq!(
            reserved,
            [
                ("cr-a", 2, true, 2.0 / PRICE_DIVISOR),
                ("cr-b", 0, false, 2.0 / PRICE_DIVISOR)
            ]
        );
        let r = &types[0].offerings[1].reservation.as_ref().unwrap();
        assert_eq!(r.label, DEFAULT_LABEL);
        // The type's labels span the reservation's zone and capacity type.
        assert!(types[0].requirements.allows(ZONE_LABEL, "z-2"));
        assert!(
            types[0]
                .requirements
                .allows(CAPACITY_TYPE_LABEL, "reserved")
        );
    }

    #[test]
    fn the_label_comes_from_the_scenario_then_the_catalog() {
        let mut catalog = catalog();
        catalog.reservation_label = Some("example.com/capacity-reservation-id".into());
        let mut named = declared("cr-n", 1);
        named.label = Some("example.com/mine".into());
        let rs = Reservations::new(&[declared("cr-a", 1), named], &catalog);
        assert_eq!(
            rs.labels(),
            ["example.com/capacity-reservation-id", "example.com/mine"]
        );
        let labels = [("example.com/mine".to_string(), "cr-n".to_string())].into();
        assert_eq!(rs.id_of(&labels).as_deref(), Some("cr-n"));
    }
}
