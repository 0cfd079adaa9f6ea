//! Static capacity (upstream's `StaticCapacity` gate): a NodePool with `spec.replicas` keeps
//! exactly that many NodeClaims whatever the pods need. The same decisions for the
//! controller, the simulator and `plan`: how many NodeClaims to create on a scale-up (within
//! `limits.nodes`), which to delete on a scale-down (upstream's order), and the NodeClaim a
//! static NodePool launches.
//!
//! Counts follow upstream's per-NodePool state: a NodeClaim is *active* (counts toward the
//! replicas), *pending disruption* (a disruption command took it; its replacement is active)
//! or *deleting* (being deleted, or marked for deletion by disruption). Deleting ones still
//! hold a place under `limits.nodes` until they are gone.

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use karpenter_api::NodePool;

use super::scheduling::nodeclaim::NodeClaimTemplate;
use super::scheduling::{MAX_INSTANCE_TYPES, NewNodeClaim, NodePoolInput};
use crate::resources::{Limits, NODES, Resources};
use crate::state::pods;
use crate::state::pods::eviction_cost;

/// Whether `pool` is a static NodePool (`spec.replicas` set).
pub fn is_static(pool: &NodePool) -> bool {
    pool.spec.replicas.is_some()
}

/// Where a static NodePool's NodeClaim stands, for counting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClaimState {
    /// Launching or running, not taken by disruption.
    Active,
    /// Taken by a disruption command whose replacement is on its way.
    PendingDisruption,
    /// Being deleted, or marked for deletion.
    Deleting,
}

/// How many NodeClaims of a NodePool are in each state.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Active ones.
    pub active: usize,
    /// Pending disruption.
    pub pending_disruption: usize,
    /// Deleting.
    pub deleting: usize,
}

impl Counts {
    /// Counts `states`.
    pub fn of(states: impl IntoIterator<Item = ClaimState>) -> Self {
        let mut counts = Self::default();
        for s in states {
            match s {
                ClaimState::Active => counts.active += 1,
                ClaimState::PendingDisruption => counts.pending_disruption += 1,
                ClaimState::Deleting => counts.deleting += 1,
            }
        }
        counts
    }

    /// Every NodeClaim that holds a place under `limits.nodes`.
    pub fn total(&self) -> usize {
        self.active + self.pending_disruption + self.deleting
    }
}

/// `limits.nodes` of `pool`, if set (a limit that does not parse limits nothing, as the
/// scheduler reads limits).
pub fn node_limit(pool: &NodePool) -> Option<usize> {
    let limits = Limits::from_list(pool.spec.limits.as_ref()?).ok()?;
    // Quantities are read in thousandths; a fractional node limit rounds down.
    limits
        .get(NODES)
        .map(|milli| (milli.max(0) / 1000) as usize)
}

/// How many more NodeClaims `pool` may hold under `limits.nodes` (upstream's reservation:
/// every NodeClaim it has counts, deleting ones included); `wanted` when it has no limit.
pub fn within_node_limit(pool: &NodePool, counts: Counts, wanted: usize) -> usize {
    match node_limit(pool) {
        Some(limit) => wanted.min(limit.saturating_sub(counts.total())),
        None => wanted,
    }
}

/// What a static NodePool needs on the way up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScaleUp {
    /// It has its replicas (counting those pending disruption, whose replacements are coming),
    /// or it is not static.
    Satisfied,
    /// Create this many NodeClaims.
    Create(usize),
    /// It lacks NodeClaims but `limits.nodes` allows no more.
    NodeLimitReached,
}

/// Upstream's static provisioning: with fewer active and pending-disruption NodeClaims than
/// `replicas`, create the missing active ones, within `limits.nodes`. A scale-down is
/// [`scale_down`]'s business.
pub fn scale_up(pool: &NodePool, counts: Counts) -> ScaleUp {
    let Some(replicas) = pool.spec.replicas else {
        return ScaleUp::Satisfied;
    };
    let replicas = replicas.max(0) as usize;
    if counts.active + counts.pending_disruption >= replicas {
        return ScaleUp::Satisfied;
    }
    match within_node_limit(pool, counts, replicas - counts.active) {
        0 => ScaleUp::NodeLimitReached,
        n => ScaleUp::Create(n),
    }
}

/// A NodeClaim of a static NodePool, as a scale-down chooses among them.
#[derive(Clone, Debug)]
pub struct StaticClaim<'a> {
    /// The NodeClaim's name.
    pub name: &'a str,
    /// Where it stands.
    pub state: ClaimState,
    /// It has a provider ID (the instance was launched).
    pub launched: bool,
    /// The pods bound to its node (none without a node).
    pub pods: Vec<&'a Pod>,
    /// When it was created.
    pub created_at: Timestamp,
    /// Its `expireAfter` in seconds (`None`: never).
    pub expire_after: Option<i64>,
}

fn owned_by_daemonset(pod: &Pod) -> bool {
    pod.metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.kind == "DaemonSet" && o.api_version == "apps/v1")
}

/// Upstream's empty node for a scale-down: no pods, or only DaemonSet pods none of which is
/// `do-not-disrupt`.
fn empty(claim: &StaticClaim<'_>, now: Timestamp) -> bool {
    claim
        .pods
        .iter()
        .all(|p| owned_by_daemonset(p) && !pods::do_not_disrupt(*p, now))
}

/// The fraction of its lifetime a NodeClaim has left (1 without `expireAfter`): a node about to
/// expire is cheap to remove, it will go soon anyway.
fn lifetime_remaining(claim: &StaticClaim<'_>, now: Timestamp) -> f64 {
    let now = now.as_second();
    match claim.expire_after {
        Some(total) if total > 0 => {
            ((total - (now - claim.created_at.as_second())) as f64 / total as f64).clamp(0.0, 1.0)
        }
        _ => 1.0,
    }
}

/// Upstream's static deprovisioning: which NodeClaims to delete when `pool` has more active
/// ones than `replicas` (deleting and pending-disruption ones are not counted, so a scale-down
/// never races a drift replacement). In upstream's order: NodeClaims not launched yet, then
/// empty nodes, then the rest by rescheduling cost × lifetime remaining, nodes with a
/// `do-not-disrupt` pod last; ties by name.
pub fn scale_down<'a>(pool: &NodePool, claims: &[StaticClaim<'a>], now: Timestamp) -> Vec<&'a str> {
    let Some(replicas) = pool.spec.replicas else {
        return Vec::new();
    };
    let active = claims
        .iter()
        .filter(|c| c.state == ClaimState::Active)
        .count();
    let excess = active.saturating_sub(replicas.max(0) as usize);
    if excess == 0 {
        return Vec::new();
    }
    let mut live: Vec<&StaticClaim<'a>> = claims
        .iter()
        .filter(|c| c.state != ClaimState::Deleting)
        .collect();
    live.sort_by_key(|c| c.name);
    let (unlaunched, launched): (Vec<_>, Vec<_>) = live.into_iter().partition(|c| !c.launched);
    let (empties, mut occupied): (Vec<_>, Vec<_>) =
        launched.into_iter().partition(|c| empty(c, now));
    let cost = |c: &StaticClaim<'_>| {
        c.pods.iter().map(|p| eviction_cost(p)).sum::<f64>() * lifetime_remaining(c, now)
    };
    let blocked = |c: &StaticClaim<'_>| c.pods.iter().any(|p| pods::do_not_disrupt(*p, now));
    occupied.sort_by(|a, b| {
        blocked(a)
            .cmp(&blocked(b))
            .then_with(|| cost(a).total_cmp(&cost(b)))
            .then_with(|| a.name.cmp(b.name))
    });
    unlaunched
        .into_iter()
        .chain(empties)
        .chain(occupied)
        .take(excess)
        .map(|c| c.name)
        .collect()
}

/// The NodeClaim a static NodePool launches: its template's requirements, labels and taints,
/// with every instance type that can launch for it listed cheapest first (up to upstream's
/// 600), so the provider launches the cheapest compatible offering, as upstream's providers do
/// for a static NodeClaim. No pods, so no resource requests. `None` when no instance type can
/// launch for the NodePool.
pub fn node_claim(pool: &NodePoolInput, provider_labels: &[String]) -> Option<NewNodeClaim> {
    let template =
        NodeClaimTemplate::new(&pool.node_pool, &pool.instance_types, &[], provider_labels);
    let allowed = template.offerings.allowed(&template.requirements);
    let mut types: Vec<(usize, f64)> = (0..template.instance_types.len())
        .filter_map(|i| template.cheapest_price(i, allowed).map(|p| (i, p)))
        .collect();
    // Cheapest first; equal prices keep the provider's order.
    types.sort_by(|a, b| a.1.total_cmp(&b.1));
    types.truncate(MAX_INSTANCE_TYPES);
    if types.is_empty() {
        return None;
    }
    let mut labels = template.labels.clone();
    labels.extend(template.requirements.labels(provider_labels));
    Some(NewNodeClaim {
        node_pool: template.node_pool.clone(),
        requirements: template.requirements.clone(),
        instance_types: types
            .into_iter()
            .map(|(i, _)| template.instance_types[i].clone())
            .collect(),
        pods: Vec::new(),
        requests: Resources::new(),
        labels,
        taints: template.taints.clone(),
        startup_taints: template.startup_taints.clone(),
        min_values_relaxed: false,
        dra_drivers: Vec::new(),
    })
}

/// What static capacity does now for one static NodePool.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Nothing: it has its replicas (or is not static, or is being deleted).
    None,
    /// Create this many NodeClaims ([`node_claim`] says which).
    Create(usize),
    /// It lacks NodeClaims but `limits.nodes` allows no more.
    NodeLimitReached,
    /// Delete these surplus NodeClaims, in this order.
    Delete(Vec<String>),
}

/// The decision for `pool` over every NodeClaim in the cluster (those of other NodePools are
/// skipped): `marked` holds the nodes disruption took (their NodeClaims count as deleting),
/// `pods_on` the pods bound to a node. A scale-up waits while the NodePool is not `Ready`
/// (`launchable`); a scale-down never does. The controller, the simulator and `plan` all
/// decide through this.
pub fn decide(
    pool: &NodePool,
    claims: &[&karpenter_api::NodeClaim],
    marked: &std::collections::BTreeSet<String>,
    pods_on: &dyn Fn(&str) -> Vec<Pod>,
    now: Timestamp,
) -> Action {
    if !is_static(pool) || pool.metadata.deletion_timestamp.is_some() {
        return Action::None;
    }
    let name = pool.metadata.name.as_deref().unwrap_or_default();
    let own: Vec<&karpenter_api::NodeClaim> = claims
        .iter()
        .copied()
        .filter(|c| {
            c.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(karpenter_api::labels::NODE_POOL_LABEL))
                .is_some_and(|p| p == name)
        })
        .collect();
    let node_of =
        |c: &karpenter_api::NodeClaim| c.status.as_ref().and_then(|s| s.node_name.clone());
    let state = |c: &karpenter_api::NodeClaim| {
        if c.metadata.deletion_timestamp.is_some()
            || node_of(c).is_some_and(|n| marked.contains(&n))
        {
            ClaimState::Deleting
        } else {
            ClaimState::Active
        }
    };
    match scale_up(pool, Counts::of(own.iter().map(|c| state(c)))) {
        ScaleUp::Create(n) if super::nodepools::launchable(pool) => return Action::Create(n),
        ScaleUp::NodeLimitReached => return Action::NodeLimitReached,
        _ => {}
    }
    let pods: Vec<Vec<Pod>> = own
        .iter()
        .map(|c| node_of(c).map(|n| pods_on(&n)).unwrap_or_default())
        .collect();
    let static_claims: Vec<StaticClaim<'_>> = own
        .iter()
        .zip(&pods)
        .map(|(c, pods)| StaticClaim {
            name: c.metadata.name.as_deref().unwrap_or_default(),
            state: state(c),
            launched: c.status.as_ref().is_some_and(|s| s.provider_id.is_some()),
            pods: pods.iter().collect(),
            created_at: c
                .metadata
                .creation_timestamp
                .as_ref()
                .map_or(Timestamp::UNIX_EPOCH, |t| t.0),
            expire_after: c.spec.expire_after.0.map(|d| d.as_secs() as i64),
        })
        .collect();
    match scale_down(pool, &static_claims, now) {
        going if going.is_empty() => Action::None,
        going => Action::Delete(going.into_iter().map(str::to_string).collect()),
    }
}

#[cfg(test)]
#[path = "static_capacity_tests.rs"]
mod tests;
