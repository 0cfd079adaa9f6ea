//! Consolidation's simulation: remove candidates, reschedule their pods (and the pending ones)
//! onto the rest, and judge the move — delete, replace with one strictly cheaper node, or
//! refuse with the reason upstream gives.

use k8s_openapi::api::core::v1::Pod;
use karpenter_api::labels::{CAPACITY_TYPE_LABEL, INSTANCE_TYPE_LABEL};
use karpenter_api::{ConsolidationPolicy, DisruptionReason};

use super::candidates::{
    Candidate, is_empty, reschedulable, reschedule_cost, unpriceable, within_budget,
};
use super::{
    Blocked, Command, Decision, Input, MIN_INSTANCE_TYPES_FOR_SPOT_TO_SPOT, Method, NodeState,
};
use crate::provisioning::scheduling::{
    BoundPod, ExistingNodeInput, NewNodeClaim, NodePoolInput, Results, Scheduler,
};

/// The scheduling simulation with `removed` gone: do their pods (and the pending ones) fit, and
/// what would be launched?
pub(super) enum Simulation {
    Delete,
    Replace(Box<NewNodeClaim>),
    Invalid(String),
}

/// The nodes pods may move to: every node not deleting and not `removed`.
pub(super) fn remaining_nodes(input: &Input<'_>, removed: &[&NodeState]) -> Vec<ExistingNodeInput> {
    input
        .nodes
        .iter()
        .filter(|n| !n.deleting && !removed.iter().any(|r| r.name == n.name))
        .map(|n| ExistingNodeInput {
            name: n.name.clone(),
            labels: n.labels.clone(),
            taints: n.taints.clone(),
            allocatable: n.allocatable.clone(),
            capacity: n.capacity.clone(),
            pods: BoundPod::all(&n.pods),
            initialized: n.initialized,
            node_pool: n.node_pool.clone(),
            ..Default::default()
        })
        .collect()
}

/// Schedules `pods` as if the `removed` nodes were gone.
pub(super) fn solve_without(
    input: &Input<'_>,
    removed: &[&NodeState],
    pods: &[Pod],
) -> (Vec<ExistingNodeInput>, Results) {
    let existing = remaining_nodes(input, removed);
    let results = Scheduler::new(
        input.node_pools,
        &existing,
        input.daemonset_pods,
        input.options.clone(),
    )
    .solve(pods, &|| false);
    (existing, results)
}

/// Where the pods of `removed` would go, with the pending pods, as upstream's
/// `SimulateScheduling`: an error when one of them would not schedule, or only onto a node not
/// initialized yet (its pods would not move there at once); else the new NodeClaims they need.
pub(super) fn reschedule(
    input: &Input<'_>,
    removed: &[&NodeState],
) -> Result<Vec<NewNodeClaim>, String> {
    let moving: Vec<Pod> = removed
        .iter()
        .flat_map(|n| reschedulable(n).cloned())
        .collect();
    let mut pods = moving.clone();
    pods.extend(input.pending_pods.iter().cloned());
    let (existing, results) = solve_without(input, removed, &pods);
    if let Some((_, reason)) = results.pod_errors.iter().find(|(i, _)| **i < moving.len()) {
        return Err(format!("not all pods would schedule, {reason}"));
    }
    let uninitialized: Vec<&str> = results
        .existing_nodes
        .iter()
        .filter(|(_, pods)| pods.iter().any(|p| *p < moving.len()))
        .map(|(name, _)| name.as_str())
        .filter(|name| existing.iter().any(|e| e.name == *name && !e.initialized))
        .collect();
    if let Some(name) = uninitialized.first() {
        return Err(format!("would schedule against uninitialized node {name}"));
    }
    Ok(results
        .new_node_claims
        .into_iter()
        .filter(|c| c.pods.iter().any(|p| *p < moving.len()))
        .collect())
}

pub(super) fn simulate(input: &Input<'_>, removed: &[&NodeState]) -> Simulation {
    match reschedule(input, removed) {
        Err(why) => Simulation::Invalid(why),
        Ok(claims) => match claims.len() {
            0 => Simulation::Delete,
            1 => Simulation::Replace(Box::new(claims.into_iter().next().expect("one claim"))),
            n => Simulation::Invalid(format!("can't remove without creating {n} nodes")),
        },
    }
}

/// The most a replacement could cost: its priciest compatible offering in the first capacity
/// type (reserved, spot, on-demand) it could launch as.
fn worst_launch_price(claim: &NewNodeClaim, index: usize) -> f64 {
    let it = &claim.instance_types[index];
    for ct in ["reserved", "spot", "on-demand"] {
        let prices: Vec<f64> = it
            .compatible_offerings(&claim.requirements)
            .filter(|o| o.capacity_type == ct)
            .map(|o| o.price)
            .collect();
        if !prices.is_empty() {
            return prices.into_iter().fold(f64::MIN, f64::max);
        }
    }
    f64::MAX
}

/// A consolidation of `candidates`: delete them, or replace them with one strictly cheaper node.
pub(super) fn consolidate(
    input: &Input<'_>,
    method: Method,
    candidates: &[&Candidate<'_>],
) -> Result<Command, String> {
    let nodes: Vec<&NodeState> = candidates.iter().map(|c| c.node).collect();
    let price: f64 = nodes.iter().map(|n| n.price).sum();
    match simulate(input, &nodes) {
        Simulation::Invalid(why) => Err(why),
        Simulation::Delete => Ok(Command {
            reason: DisruptionReason::Underutilized,
            method,
            candidates: nodes.iter().map(|n| n.name.clone()).collect(),
            replacements: Vec::new(),
            savings_per_hour: price,
        }),
        Simulation::Replace(mut claim) => {
            // Judged on every option, before the capacity type is narrowed below.
            let ceiling = if nodes.len() > 1 {
                same_instance_type_ceiling(&claim, &nodes).map_or(price, |c| c.min(price))
            } else {
                price
            };
            let all_spot = nodes.iter().all(|n| {
                n.labels
                    .get(CAPACITY_TYPE_LABEL)
                    .is_some_and(|c| c == "spot")
            });
            let allows_spot = claim.requirements.allows(CAPACITY_TYPE_LABEL, "spot");
            let spot_to_spot = all_spot && allows_spot;
            if spot_to_spot && !input.spot_to_spot {
                return Err("SpotToSpotConsolidation is disabled, can't replace a spot node with a spot node".into());
            }
            // Prefer spot when both are allowed: the on-demand fallback would cost more.
            // Spot-to-spot must stay spot.
            if allows_spot
                && (spot_to_spot || claim.requirements.allows(CAPACITY_TYPE_LABEL, "on-demand"))
            {
                claim.requirements.add(crate::scheduling::Requirement::new(
                    CAPACITY_TYPE_LABEL,
                    karpenter_api::Operator::In,
                    &["spot"],
                ));
            }
            let keep: Vec<usize> = (0..claim.instance_types.len())
                .filter(|&i| worst_launch_price(&claim, i) < ceiling)
                .collect();
            if keep.is_empty() {
                return Err("can't replace with a cheaper node".into());
            }
            claim.instance_types = keep
                .iter()
                .map(|&i| claim.instance_types[i].clone())
                .collect();
            if spot_to_spot && nodes.len() == 1 {
                let cheaper = claim.instance_types.len();
                if cheaper < MIN_INSTANCE_TYPES_FOR_SPOT_TO_SPOT {
                    return Err(format!(
                        "SpotToSpotConsolidation requires {MIN_INSTANCE_TYPES_FOR_SPOT_TO_SPOT} cheaper instance type options than the current candidate to consolidate, got {cheaper}"
                    ));
                }
                // The launch picks among the 15 cheapest spot options.
                crate::cloudprovider::order_by_price(
                    &mut claim.instance_types,
                    &claim.requirements,
                );
                claim
                    .instance_types
                    .truncate(MIN_INSTANCE_TYPES_FOR_SPOT_TO_SPOT);
            }
            let replacement_price = claim.cheapest_price().unwrap_or(price);
            Ok(Command {
                reason: DisruptionReason::Underutilized,
                method,
                candidates: nodes.iter().map(|n| n.name.clone()).collect(),
                savings_per_hour: price - replacement_price,
                replacements: vec![*claim],
            })
        }
    }
}

/// Merging nodes onto one of their own instance types only pays if that type is cheaper than
/// what runs now: when a replacement option (any capacity type) is a type some candidate
/// already is, the replacement must cost less than the cheapest such candidate — otherwise
/// keeping that node and deleting the rest disrupts fewer pods for the same savings. `None`
/// when no option is a candidate's type.
fn same_instance_type_ceiling(claim: &NewNodeClaim, nodes: &[&NodeState]) -> Option<f64> {
    claim
        .instance_types
        .iter()
        .flat_map(|it| {
            nodes
                .iter()
                .filter(|n| n.labels.get(INSTANCE_TYPE_LABEL) == Some(&it.name))
                .map(|n| n.price)
        })
        .min_by(f64::total_cmp)
}

/// Upstream's Balanced policy: a move passes when its share of the pool's savings is at least
/// half its share of the pool's disruption.
pub(super) fn balanced_approves(
    input: &Input<'_>,
    pool: &NodePoolInput,
    command: &Command,
    candidates: &[&Candidate<'_>],
) -> bool {
    if pool.node_pool.spec.disruption.consolidation_policy != ConsolidationPolicy::Balanced {
        return true;
    }
    let nodes: Vec<&NodeState> = input
        .nodes
        .iter()
        .filter(|n| n.node_pool.as_deref() == Some(pool.node_pool.name()))
        .collect();
    let total_cost: f64 = nodes.iter().map(|n| n.price).sum();
    let total_disruption: f64 = nodes.iter().map(|n| reschedule_cost(n)).sum();
    let disruption: f64 = candidates.iter().map(|c| c.reschedule_cost).sum();
    if command.savings_per_hour <= 0.0 || total_cost <= 0.0 {
        return false;
    }
    if disruption <= 0.0 || total_disruption <= 0.0 {
        return true;
    }
    (command.savings_per_hour / total_cost) / (disruption / total_disruption)
        >= 1.0 / karpenter_api::nodepool::BALANCED_K
}

/// The candidates consolidation may move, within the budget for `Underutilized`, in order; the
/// others are blocked in `decision`. Consolidation is graceful: a pod-level blocker holds, even
/// on a drifted node admitted for drift alone.
pub(super) fn consolidation_candidates<'c, 'a>(
    input: &Input<'_>,
    candidates: &'c [Candidate<'a>],
    decision: &mut Decision,
) -> Vec<&'c Candidate<'a>> {
    for c in candidates {
        if let Some(why) = &c.pod_blocker {
            decision.block(&c.node.name, Blocked::NotCandidate, why.clone());
        }
    }
    // Consolidation applies to non-empty, consolidatable nodes of pools that allow it.
    let consolidatable: Vec<&Candidate<'_>> = candidates
        .iter()
        .filter(|c| c.pod_blocker.is_none())
        .filter(|c| {
            // Pricing a node needs its type, capacity type and zone (upstream's checks).
            if let Some(why) = unpriceable(c) {
                decision.block(&c.node.name, Blocked::Unconsolidatable, why);
                return false;
            }
            let spec = &c.pool.node_pool.spec.disruption;
            let why = if no_consolidation(c) {
                Some((
                    Blocked::Disabled,
                    format!("NodePool {:?} has consolidation disabled", c.pool_name()),
                ))
            } else if spec.consolidation_policy == ConsolidationPolicy::WhenEmpty {
                Some((
                    Blocked::Ineligible,
                    "consolidationPolicy is WhenEmpty and the node has pods".to_string(),
                ))
            } else if is_empty(c.node) {
                Some((
                    Blocked::Ineligible,
                    "empty, waiting for consolidateAfter".to_string(),
                ))
            } else if !c.consolidatable(input.now) {
                Some((
                    Blocked::Ineligible,
                    "pods changed within consolidateAfter".to_string(),
                ))
            } else {
                None
            };
            match why {
                Some((kind, why)) => {
                    decision.block_if_unexplained(&c.node.name, kind, &why);
                    false
                }
                None => true,
            }
        })
        .collect();
    within_budget(
        input,
        DisruptionReason::Underutilized,
        &consolidatable,
        decision,
    )
}

/// Whether the candidate's NodePool disables consolidation (`consolidateAfter: Never`).
pub(super) fn no_consolidation(c: &Candidate<'_>) -> bool {
    c.pool
        .node_pool
        .spec
        .disruption
        .consolidate_after
        .0
        .is_none()
}
