//! Offerings that just failed to launch for lack of capacity. EC2 answers an insufficient
//! capacity error per (instance type, zone, capacity type); those offerings are marked
//! unavailable for three minutes, as upstream, so the scheduler's next attempt picks others
//! instead of asking for the same empty pool again.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How long an offering stays unavailable after a capacity error (upstream's
/// `UnavailableOfferingsTTL`).
pub const UNAVAILABLE_OFFERINGS_TTL: Duration = Duration::from_secs(3 * 60);

/// The error codes that mean "no capacity here", not "you asked wrongly".
pub const INSUFFICIENT_CAPACITY_CODES: [&str; 7] = [
    "InsufficientInstanceCapacity",
    "InsufficientFreeAddressesInSubnet",
    "InsufficientCapacityOnHost",
    "MaxSpotInstanceCountExceeded",
    "UnfulfillableCapacity",
    "VcpuLimitExceeded",
    "ReservationCapacityExceeded",
];

/// Whether an error code is a capacity error.
pub fn is_insufficient_capacity(code: &str) -> bool {
    INSUFFICIENT_CAPACITY_CODES.contains(&code)
}

type Key = (String, String, String);

/// The unavailable offerings and when each comes back.
#[derive(Debug, Default)]
pub struct UnavailableOfferings {
    until: Mutex<HashMap<Key, Instant>>,
    version: AtomicU64,
}

impl UnavailableOfferings {
    /// Marks an offering unavailable from `now` for the TTL.
    pub fn mark(&self, instance_type: &str, zone: &str, capacity_type: &str, now: Instant) {
        let mut until = self.until.lock().unwrap_or_else(|e| e.into_inner());
        until.insert(
            (instance_type.into(), zone.into(), capacity_type.into()),
            now + UNAVAILABLE_OFFERINGS_TTL,
        );
        self.version.fetch_add(1, Ordering::Relaxed);
    }

    /// Changes whenever an offering is marked, so answers computed from the set know they
    /// are stale.
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::Relaxed)
    }

    /// Whether an offering is unavailable at `now`.
    pub fn is_unavailable(
        &self,
        instance_type: &str,
        zone: &str,
        capacity_type: &str,
        now: Instant,
    ) -> bool {
        let until = self.until.lock().unwrap_or_else(|e| e.into_inner());
        until
            .get(&(
                instance_type.to_string(),
                zone.to_string(),
                capacity_type.to_string(),
            ))
            .is_some_and(|t| now < *t)
    }

    /// Forgets expired entries.
    pub fn sweep(&self, now: Instant) {
        let mut until = self.until.lock().unwrap_or_else(|e| e.into_inner());
        until.retain(|_, t| now < *t);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offerings_come_back_after_the_ttl() {
        let u = UnavailableOfferings::default();
        let t0 = Instant::now();
        u.mark("m5.large", "us-east-1a", "spot", t0);
        assert!(u.is_unavailable("m5.large", "us-east-1a", "spot", t0));
        assert!(
            !u.is_unavailable("m5.large", "us-east-1a", "on-demand", t0),
            "other capacity types unaffected"
        );
        assert!(
            !u.is_unavailable("m5.large", "us-east-1b", "spot", t0),
            "other zones unaffected"
        );
        assert!(u.is_unavailable(
            "m5.large",
            "us-east-1a",
            "spot",
            t0 + Duration::from_secs(179)
        ));
        assert!(!u.is_unavailable(
            "m5.large",
            "us-east-1a",
            "spot",
            t0 + UNAVAILABLE_OFFERINGS_TTL
        ));
        u.sweep(t0 + UNAVAILABLE_OFFERINGS_TTL);
        assert!(u.until.lock().unwrap().is_empty());
    }
}
