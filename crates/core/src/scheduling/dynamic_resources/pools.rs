//! The cluster's ResourceSlices grouped into pools, as the allocator reads them: only a pool's
//! newest generation counts, a pool missing slices is incomplete, and one whose slices
//! contradict each other is invalid.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use k8s_openapi::api::core::v1::NodeSelector;
use karpenter_api::dra::{CounterSet, Device, ResourceSlice};

use super::capacity::milli;
use crate::scheduling::{AllowUndefined, Requirements};

/// A pool by driver and name.
pub(crate) type PoolKey = (String, String);

/// Counters by set and counter name, in thousandths.
pub(crate) type Counters = BTreeMap<(String, String), i64>;

/// One driver pool in the cluster.
#[derive(Debug)]
pub(crate) struct Pool {
    pub key: PoolKey,
    /// Its slices at the newest generation.
    pub slices: Vec<Arc<ResourceSlice>>,
    /// Fewer slices than the pool says it has: devices may be missing.
    pub incomplete: bool,
    /// Duplicate device names or counter sets, or a device drawing on a counter that does not
    /// exist: none of its devices are allocated.
    pub invalid: bool,
    /// The counters its slices declare.
    pub counters: Counters,
}

/// Pools of `slices`, in driver and pool order.
pub(crate) fn gather(slices: &[Arc<ResourceSlice>]) -> Vec<Pool> {
    let mut by_key: BTreeMap<PoolKey, Vec<Arc<ResourceSlice>>> = BTreeMap::new();
    for slice in slices {
        let key = (slice.spec.driver.clone(), slice.spec.pool.name.clone());
        let newest = by_key.entry(key).or_default();
        match newest.first().map(|s| s.spec.pool.generation) {
            Some(g) if g > slice.spec.pool.generation => {}
            Some(g) if g < slice.spec.pool.generation => *newest = vec![slice.clone()],
            _ => newest.push(slice.clone()),
        }
    }
    by_key
        .into_iter()
        .map(|(key, slices)| {
            let expected = slices[0].spec.pool.resource_slice_count;
            let incomplete = slices.len() as i64 != expected;
            let (counters, mut invalid) = counter_sets(
                slices
                    .iter()
                    .flat_map(|s| s.spec.shared_counters.iter().flatten()),
            );
            let mut names = BTreeSet::new();
            for device in slices.iter().flat_map(|s| &s.spec.devices) {
                invalid |= !names.insert(device.name.as_str());
                invalid |= !draws_on_known_counters(device, &counters);
            }
            Pool {
                key,
                slices,
                incomplete,
                invalid,
                counters,
            }
        })
        .collect()
}

/// The counters of `sets`, and whether a set's name came twice.
pub(crate) fn counter_sets<'a>(sets: impl Iterator<Item = &'a CounterSet>) -> (Counters, bool) {
    let mut counters = Counters::new();
    let mut seen = BTreeSet::new();
    let mut duplicate = false;
    for set in sets {
        duplicate |= !seen.insert(set.name.clone());
        for (name, c) in &set.counters {
            counters.insert((set.name.clone(), name.clone()), milli(&c.value));
        }
    }
    (counters, duplicate)
}

/// Whether every counter `device` draws on is declared.
pub(crate) fn draws_on_known_counters(device: &Device, counters: &Counters) -> bool {
    consumption(device).keys().all(|k| counters.contains_key(k))
}

/// What `device` draws from its pool's counters.
pub(crate) fn consumption(device: &Device) -> Counters {
    let mut out = Counters::new();
    for c in &device.consumes_counters {
        for (name, counter) in &c.counters {
            *out.entry((c.counter_set.clone(), name.clone()))
                .or_default() += milli(&counter.value);
        }
    }
    out
}

/// Whether a node meeting `requirements` (named `node_name`, empty for a NodeClaim not
/// launched yet) reaches the devices of `slice`.
pub(crate) fn slice_reaches(
    slice: &ResourceSlice,
    requirements: &Requirements,
    node_name: &str,
    allow: AllowUndefined<'_>,
) -> bool {
    let spec = &slice.spec;
    if spec.all_nodes == Some(true) || spec.shared_counters.is_some() {
        return true;
    }
    if let Some(name) = spec.node_name.as_deref().filter(|n| !n.is_empty()) {
        return !node_name.is_empty() && name == node_name;
    }
    match &spec.node_selector {
        Some(selector) => selector.node_selector_terms.iter().any(|term| {
            let term = Requirements::from_node_selector(
                term.match_expressions.as_deref().unwrap_or_default(),
            );
            requirements.compatible(&term, allow).is_ok()
        }),
        None => false,
    }
}

/// What reaching a slice's devices requires of the node: every term's expressions together
/// (a device's topology must hold whichever term admitted the node). `None` for devices every
/// node, or one named node, reaches.
pub(crate) fn slice_topology(slice: &ResourceSlice) -> Option<Requirements> {
    if slice.spec.all_nodes == Some(true) || slice.spec.node_name.is_some() {
        return None;
    }
    selector_requirements(slice.spec.node_selector.as_ref()?)
}

/// A node selector's expressions (all its terms', together; fields are not labels).
pub(crate) fn selector_requirements(selector: &NodeSelector) -> Option<Requirements> {
    let mut out = Requirements::new();
    for term in &selector.node_selector_terms {
        out.add_all(&Requirements::from_node_selector(
            term.match_expressions.as_deref().unwrap_or_default(),
        ));
    }
    Some(out)
}

/// Every pool's counters left after what `used` (already allocated devices, by pool) consumes.
pub(crate) fn remaining_counters(
    pools: &[Pool],
    allocated: impl Fn(&PoolKey, &Device) -> bool,
) -> HashMap<PoolKey, Counters> {
    let mut out = HashMap::new();
    for pool in pools {
        let mut left = pool.counters.clone();
        for device in pool.slices.iter().flat_map(|s| &s.spec.devices) {
            if allocated(&pool.key, device) {
                for (k, v) in consumption(device) {
                    *left.entry(k).or_default() -= v;
                }
            }
        }
        out.insert(pool.key.clone(), left);
    }
    out
}
