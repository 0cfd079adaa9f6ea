//! Capacity reservations in one scheduling simulation (upstream's `ReservationManager`): how
//! many more instances each reservation can launch, and which reservations each NodeClaim the
//! simulation opened holds.
//!
//! A NodeClaim holds every reservation it could launch into, not just one: which instance type
//! and offering the launch picks is the provider's choice, so the simulation counts
//! pessimistically. As pods narrow a NodeClaim it releases the reservations it can no longer
//! use, and other NodeClaims may take them.

use std::collections::{BTreeMap, BTreeSet};

use crate::instancetype::InstanceType;

/// How the scheduler treats a pod that would cost a NodeClaim its reserved offerings
/// (upstream's `ReservedOfferingMode`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ReservedOfferingMode {
    /// The pod may join anyway and the NodeClaim falls back to spot or on-demand (disruption's
    /// simulations, which must place every pod of a candidate in one pass).
    #[default]
    Fallback,
    /// The pod is refused instead, and a pod that could use a reservation that is held by
    /// other NodeClaims of this round waits for the next round rather than fall back
    /// (provisioning).
    Strict,
}

/// Why a reservation could not be taken.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ReservationError {
    /// No offering in this simulation carries the id.
    #[error("reservation {id:?}: no offering carries it")]
    Unknown {
        /// The reservation id.
        id: String,
    },
    /// Every instance the reservation can launch is held by other NodeClaims.
    #[error("reservation {id:?}: no capacity left")]
    Exhausted {
        /// The reservation id.
        id: String,
    },
}

/// One reservation's remaining capacity and the label its id goes in.
#[derive(Clone, Debug)]
struct Remaining {
    capacity: u32,
    label: String,
}

/// Reservation capacity for one simulation.
#[derive(Clone, Debug, Default)]
pub struct ReservationManager {
    /// Per reservation id.
    remaining: BTreeMap<String, Remaining>,
    /// The reservations each NodeClaim (by placeholder hostname) holds.
    held: BTreeMap<String, BTreeSet<String>>,
}

impl ReservationManager {
    /// The capacity of every reservation the instance types' reserved offerings carry. An id
    /// offered more than once (NodePools sharing a reservation, refreshed between reads)
    /// counts with its smallest capacity.
    pub fn new<'a>(instance_types: impl IntoIterator<Item = &'a InstanceType>) -> Self {
        let mut remaining: BTreeMap<String, Remaining> = BTreeMap::new();
        for r in instance_types
            .into_iter()
            .flat_map(|it| &it.offerings)
            .filter_map(|o| o.reserved())
        {
            remaining
                .entry(r.id.clone())
                .and_modify(|e| e.capacity = e.capacity.min(r.capacity))
                .or_insert_with(|| Remaining {
                    capacity: r.capacity,
                    label: r.label.clone(),
                });
        }
        Self {
            remaining,
            held: BTreeMap::new(),
        }
    }

    /// Whether there are reservations at all (most simulations have none).
    pub fn is_empty(&self) -> bool {
        self.remaining.is_empty()
    }

    /// Whether `host` holds reservation `id` or could take it now. Unknown ids cannot be taken.
    pub fn can_reserve(&self, host: &str, id: &str) -> bool {
        self.has_reservation(host, id) || self.remaining.get(id).is_some_and(|r| r.capacity > 0)
    }

    /// Makes `host` hold each of `ids`; holding one already is no change. Stops at the first
    /// id that cannot be taken, keeping those taken before it.
    pub fn reserve<'a>(
        &mut self,
        host: &str,
        ids: impl IntoIterator<Item = &'a str>,
    ) -> Result<(), ReservationError> {
        for id in ids {
            if self.has_reservation(host, id) {
                continue;
            }
            let entry = self
                .remaining
                .get_mut(id)
                .ok_or_else(|| ReservationError::Unknown { id: id.into() })?;
            // Counts never go below zero: a full reservation refuses.
            entry.capacity = entry
                .capacity
                .checked_sub(1)
                .ok_or_else(|| ReservationError::Exhausted { id: id.into() })?;
            self.held
                .entry(host.to_string())
                .or_default()
                .insert(id.to_string());
        }
        Ok(())
    }

    /// Gives back what `host` holds of `ids`; ids it does not hold are ignored.
    pub fn release<'a>(&mut self, host: &str, ids: impl IntoIterator<Item = &'a str>) {
        let Some(held) = self.held.get_mut(host) else {
            return;
        };
        for id in ids {
            if held.remove(id)
                && let Some(r) = self.remaining.get_mut(id)
            {
                r.capacity += 1;
            }
        }
    }

    /// Whether `host` holds reservation `id`.
    pub fn has_reservation(&self, host: &str, id: &str) -> bool {
        self.held.get(host).is_some_and(|h| h.contains(id))
    }

    /// How many more instances reservation `id` can launch in this simulation (0 if unknown).
    pub fn remaining_capacity(&self, id: &str) -> u32 {
        self.remaining.get(id).map_or(0, |r| r.capacity)
    }

    /// The label reservation `id` is written in.
    pub fn label(&self, id: &str) -> Option<&str> {
        self.remaining.get(id).map(|r| r.label.as_str())
    }
}

#[cfg(test)]
mod tests {
    //! Upstream's `reservationmanager_test.go`, case by case.

    use super::*;
    use crate::instancetype::{Offering, Overhead, Reservation};
    use crate::resources::Resources;
    use crate::scheduling::Requirements;

    const LABEL: &str = "karpenter.test.sh/reservation-id";

    fn reserved_type(name: &str, zone: &str, id: &str, capacity: u32) -> InstanceType {
        InstanceType::new(
            name,
            Requirements::new(),
            vec![Offering {
                zone: zone.into(),
                capacity_type: "reserved".into(),
                price: 0.001,
                available: true,
                reservation: Some(Reservation {
                    id: id.into(),
                    capacity,
                    label: LABEL.into(),
                }),
            }],
            Resources::new(),
            Overhead::default(),
        )
    }

    /// Reservations of 3 ("small-reserved"), 2 ("medium-reserved") and 1 ("large-reserved").
    fn manager() -> ReservationManager {
        let types = [
            reserved_type("small", "test-zone-1", THREE, 3),
            reserved_type("medium", "test-zone-2", TWO, 2),
            reserved_type("large", "test-zone-3", ONE, 1),
        ];
        ReservationManager::new(&types)
    }

    const THREE: &str = "small-reserved";
    const TWO: &str = "medium-reserved";
    const ONE: &str = "large-reserved";

    #[test]
    fn can_reserve_with_capacity_and_again_for_the_holder() {
        let mut rm = manager();
        assert!(rm.can_reserve("hostname-1", ONE));
        rm.reserve("hostname-1", [ONE]).unwrap();
        assert!(
            rm.can_reserve("hostname-1", ONE),
            "the holder can always take it again"
        );
        assert!(!rm.can_reserve("hostname-new", ONE), "exhausted for others");
    }

    #[test]
    fn unknown_reservations_cannot_be_taken() {
        let mut rm = manager();
        assert!(!rm.can_reserve("hostname-1", "i-dont-exist"));
        assert_eq!(
            rm.reserve("hostname-1", ["i-dont-exist"]),
            Err(ReservationError::Unknown {
                id: "i-dont-exist".into()
            })
        );
    }

    #[test]
    fn reserving_twice_for_one_host_counts_once() {
        let mut rm = manager();
        rm.reserve("hostname-1", [TWO]).unwrap();
        rm.reserve("hostname-1", [TWO]).unwrap();
        assert!(rm.can_reserve("hostname-2", TWO));
        assert_eq!(rm.remaining_capacity(TWO), 1);
    }

    #[test]
    fn reserving_decrements_until_exhausted_and_never_below_zero() {
        let mut rm = manager();
        for h in ["hostname-1", "hostname-2", "hostname-3"] {
            rm.reserve(h, [THREE]).unwrap();
        }
        assert!(!rm.can_reserve("hostname-4", THREE));
        assert_eq!(
            rm.reserve("hostname-4", [THREE]),
            Err(ReservationError::Exhausted { id: THREE.into() })
        );
        assert_eq!(rm.remaining_capacity(THREE), 0);
        assert!(!rm.has_reservation("hostname-4", THREE));
    }

    #[test]
    fn several_reservations_in_one_call() {
        let mut rm = manager();
        rm.reserve("hostname-1", [THREE, TWO]).unwrap();
        assert!(rm.has_reservation("hostname-1", THREE));
        assert!(rm.has_reservation("hostname-1", TWO));
        // Mixed new and existing: the existing one is not counted again.
        let mut rm = manager();
        rm.reserve("hostname-1", [TWO]).unwrap();
        rm.reserve("hostname-1", [TWO, ONE]).unwrap();
        assert!(rm.has_reservation("hostname-1", TWO) && rm.has_reservation("hostname-1", ONE));
        assert!(rm.can_reserve("hostname-2", TWO));
    }

    #[test]
    fn releasing_restores_capacity_and_ignores_what_is_not_held() {
        let mut rm = manager();
        rm.reserve("hostname-1", [THREE]).unwrap();
        rm.release("hostname-1", [THREE]);
        assert!(!rm.has_reservation("hostname-1", THREE));
        assert_eq!(rm.remaining_capacity(THREE), 3);
        // Nothing held: no change, no failure.
        rm.release("hostname-1", [THREE]);
        rm.reserve("hostname-1", [THREE]).unwrap();
        rm.release("hostname-2", [THREE]);
        assert_eq!(rm.remaining_capacity(THREE), 2);
    }

    #[test]
    fn partial_release() {
        let mut rm = manager();
        rm.reserve("hostname-1", [THREE, TWO]).unwrap();
        rm.release("hostname-1", [THREE]);
        assert!(!rm.has_reservation("hostname-1", THREE));
        assert!(rm.has_reservation("hostname-1", TWO));
        rm.release("hostname-1", [TWO]);
        assert!(!rm.has_reservation("hostname-1", TWO));
    }

    #[test]
    fn capacity_after_exhaustion_and_cycles() {
        let mut rm = manager();
        for h in ["hostname-1", "hostname-2", "hostname-3"] {
            rm.reserve(h, [THREE]).unwrap();
        }
        assert_eq!(rm.remaining_capacity(THREE), 0);
        rm.release("hostname-1", [THREE]);
        assert_eq!(rm.remaining_capacity(THREE), 1);

        let mut rm = manager();
        rm.reserve("hostname-1", [THREE]).unwrap();
        rm.release("hostname-1", [THREE]);
        rm.reserve("hostname-2", [THREE]).unwrap();
        assert_eq!(rm.remaining_capacity(THREE), 2);
    }

    #[test]
    fn complex_patterns() {
        let mut rm = manager();
        rm.reserve("host-1", [TWO, THREE]).unwrap();
        rm.reserve("host-2", [TWO, ONE]).unwrap();
        rm.reserve("host-3", [THREE]).unwrap();
        assert!(rm.has_reservation("host-1", THREE) && rm.has_reservation("host-1", TWO));
        assert!(rm.has_reservation("host-2", TWO) && rm.has_reservation("host-2", ONE));
        assert!(rm.has_reservation("host-3", THREE));
        assert_eq!(rm.remaining_capacity(TWO), 0);
        assert_eq!(rm.remaining_capacity(THREE), 1);
        assert_eq!(rm.remaining_capacity(ONE), 0);
    }

    #[test]
    fn mixed_operations_stay_consistent() {
        let mut rm = manager();
        rm.reserve("host-1", [TWO, THREE]).unwrap();
        rm.reserve("host-2", [THREE, ONE]).unwrap();
        rm.release("host-1", [TWO]);
        rm.reserve("host-3", [TWO]).unwrap();
        rm.release("host-2", [ONE]);
        assert!(!rm.has_reservation("host-1", TWO));
        assert!(rm.has_reservation("host-1", THREE));
        assert!(rm.has_reservation("host-2", THREE));
        assert!(!rm.has_reservation("host-2", ONE));
        assert!(rm.has_reservation("host-3", TWO));
        assert_eq!(rm.remaining_capacity(TWO), 1);
        assert_eq!(rm.remaining_capacity(THREE), 1);
        assert_eq!(rm.remaining_capacity(ONE), 1);
    }

    #[test]
    fn shared_ids_count_with_their_smallest_capacity() {
        let types = [
            reserved_type("a", "z", "shared", 4),
            reserved_type("b", "z", "shared", 2),
        ];
        let rm = ReservationManager::new(&types);
        assert_eq!(rm.remaining_capacity("shared"), 2);
        assert_eq!(rm.label("shared"), Some(LABEL));
    }
}
