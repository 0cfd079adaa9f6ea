//! The instance types a provider resolved for each NodeClass, reused while nothing they derive
//! from changed.
//!
//! Resolving a NodeClass's types (filtering the catalog, pricing, marking unavailable offerings)
//! is the costliest part of `get_instance_types`, and the scheduler asks for it on every
//! provisioning round. A provider keys each entry on everything the result depends on (the
//! NodeClass's options, its catalog's generation, the unavailable-offerings version), so a
//! changed input misses; the TTL bounds how long an offering whose capacity error expired keeps
//! looking unavailable.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use karpenter_core::instancetype::InstanceType;

/// How long resolved instance types are reused when their key still matches.
pub const RESOLVED_TYPES_TTL: Duration = Duration::from_secs(30);

struct Entry {
    key: String,
    at: Instant,
    types: Vec<Arc<InstanceType>>,
}

/// Resolved instance types per NodeClass name.
pub struct ResolvedTypes {
    ttl: Duration,
    entries: Mutex<BTreeMap<String, Entry>>,
}

impl Default for ResolvedTypes {
    fn default() -> Self {
        Self::new(RESOLVED_TYPES_TTL)
    }
}

impl ResolvedTypes {
    /// An empty cache whose entries live `ttl`.
    pub fn new(ttl: Duration) -> Self {
        Self {
            ttl,
            entries: Mutex::default(),
        }
    }

    /// The types resolved for `node_class` under `key`, if they were resolved less than the
    /// TTL before `now`.
    pub fn get(&self, node_class: &str, key: &str, now: Instant) -> Option<Vec<Arc<InstanceType>>> {
        let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        let entry = entries.get(node_class)?;
        (entry.key == key && now.saturating_duration_since(entry.at) < self.ttl)
            .then(|| entry.types.clone())
    }

    /// Remembers `types` as resolved for `node_class` under `key` at `now`.
    pub fn put(&self, node_class: &str, key: String, types: Vec<Arc<InstanceType>>, now: Instant) {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        entries.insert(
            node_class.to_string(),
            Entry {
                key,
                at: now,
                types,
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn types(names: &[&str]) -> Vec<Arc<InstanceType>> {
        names
            .iter()
            .map(|n| {
                Arc::new(InstanceType::new(
                    *n,
                    Default::default(),
                    Vec::new(),
                    Default::default(),
                    Default::default(),
                ))
            })
            .collect()
    }

    fn names(types: &[Arc<InstanceType>]) -> Vec<&str> {
        types.iter().map(|t| t.name.as_str()).collect()
    }

    #[test]
    fn an_entry_is_reused_only_under_its_key_within_the_ttl() {
        let cache = ResolvedTypes::new(Duration::from_secs(30));
        let t0 = Instant::now();
        assert!(cache.get("default", "k1", t0).is_none());
        cache.put("default", "k1".into(), types(&["a", "b"]), t0);

        let cases = [
            (
                "default",
                "k1",
                Duration::from_secs(0),
                Some(vec!["a", "b"]),
            ),
            (
                "default",
                "k1",
                Duration::from_secs(29),
                Some(vec!["a", "b"]),
            ),
            ("default", "k1", Duration::from_secs(30), None),
            ("default", "k2", Duration::from_secs(1), None),
            ("other", "k1", Duration::from_secs(1), None),
        ];
        for (class, key, after, want) in cases {
            let got = cache.get(class, key, t0 + after);
            assert_eq!(
                got.as_deref().map(names),
                want,
                "{class} under {key} after {after:?}"
            );
        }
    }

    #[test]
    fn a_new_resolution_replaces_the_old_one() {
        let cache = ResolvedTypes::default();
        let t0 = Instant::now();
        cache.put("default", "k1".into(), types(&["a"]), t0);
        cache.put("default", "k2".into(), types(&["b"]), t0);
        assert!(cache.get("default", "k1", t0).is_none());
        assert_eq!(names(&cache.get("default", "k2", t0).unwrap()), ["b"]);
    }
}
