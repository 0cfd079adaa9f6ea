//! Offerings that just failed to launch for lack of capacity: a provider marks the
//! (instance type, zone, capacity type) its cloud refused, for upstream's three minutes or for
//! as long as the cloud's error says, so the scheduler's next attempt picks others instead of
//! asking the same empty pool again.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How long an offering stays unavailable after a capacity error (upstream's
/// `UnavailableOfferingsTTL`).
pub const UNAVAILABLE_OFFERINGS_TTL: Duration = Duration::from_secs(3 * 60);

type Key = (String, String, String);

/// The unavailable offerings and when each comes back.
#[derive(Debug, Default)]
pub struct UnavailableOfferings {
    until: Mutex<HashMap<Key, Instant>>,
    version: AtomicU64,
}

impl UnavailableOfferings {
    /// Marks an offering unavailable from `now` for upstream's default TTL.
    pub fn mark(&self, instance_type: &str, zone: &str, capacity_type: &str, now: Instant) {
        self.mark_for(
            instance_type,
            zone,
            capacity_type,
            now,
            UNAVAILABLE_OFFERINGS_TTL,
        );
    }

    /// Marks an offering unavailable from `now` for `ttl` (providers keep some failures
    /// longer: a size a region does not sell, a quota). A later mark never shortens an
    /// earlier, longer one.
    pub fn mark_for(
        &self,
        instance_type: &str,
        zone: &str,
        capacity_type: &str,
        now: Instant,
        ttl: Duration,
    ) {
        let mut until = self.until.lock().unwrap_or_else(|e| e.into_inner());
        let entry = until
            .entry((instance_type.into(), zone.into(), capacity_type.into()))
            .or_insert(now);
        *entry = (*entry).max(now + ttl);
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

    #[test]
    fn a_longer_ttl_is_not_shortened_by_a_later_mark() {
        let u = UnavailableOfferings::default();
        let t0 = Instant::now();
        let day = Duration::from_secs(23 * 3600);
        u.mark_for("Standard_D2s_v5", "eastus-1", "on-demand", t0, day);
        u.mark("Standard_D2s_v5", "eastus-1", "on-demand", t0);
        assert!(u.is_unavailable(
            "Standard_D2s_v5",
            "eastus-1",
            "on-demand",
            t0 + Duration::from_secs(3600)
        ));
    }
}
