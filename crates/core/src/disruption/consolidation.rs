//! Consolidation's simulation: remove candidates, reschedule their pods (and the pending ones)
//! onto the rest, and judge the move — delete, replace with one strictly cheaper node, or
//! refuse with the reason upstream gives.

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use karpenter_api::labels::{CAPACITY_TYPE_LABEL, INSTANCE_TYPE_LABEL};
use karpenter_api::{ConsolidationPolicy, DisruptionReason};

use super::candidates::{
    Candidate, currently_reschedulable, is_empty, reschedule_cost, unpriceable, within_budget,
};
use super::{
    Blocked, Command, Decision, Input, MIN_INSTANCE_TYPES_FOR_SPOT_TO_SPOT, Method, NodeState,
};
use crate::provisioning::capacity_buffer::is_virtual_pod;
use crate::provisioning::scheduling::{
    BoundPod, ExistingNodeInput, NewNodeClaim, Results, Scheduler,
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
            volume_usage: n.volume_usage.clone(),
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
        .flat_map(|n| currently_reschedulable(n, input.pdbs, input.now).cloned())
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
    let kept: Vec<NewNodeClaim> = results
        .new_node_claims
        .into_iter()
        .filter(|c| c.pods.iter().any(|p| *p < moving.len()))
        .collect();
    buffer_capacity_kept(input, &pods, &results.existing_nodes, &kept)?;
    Ok(kept)
}

/// CapacityBuffer capacity that exists must survive a move. Upstream ignores pending pods
/// here, virtual ones included, so it would move real pods into a buffer's room and the next
/// provisioning round would launch it again; the move is refused instead (the nodes'
/// `buffer_pods` say how many virtual pods existing capacity holds).
fn buffer_capacity_kept(
    input: &Input<'_>,
    pods: &[Pod],
    existing: &std::collections::BTreeMap<String, Vec<usize>>,
    replacements: &[NewNodeClaim],
) -> Result<(), String> {
    let virtual_pods = pods.iter().filter(|p| is_virtual_pod(*p)).count();
    let held: usize = input
        .nodes
        .iter()
        .filter(|n| !n.deleting)
        .map(|n| n.buffer_pods)
        .sum::<usize>()
        .min(virtual_pods);
    if held == 0 {
        return Ok(());
    }
    let placed = existing
        .values()
        .flatten()
        .chain(replacements.iter().flat_map(|c| &c.pods))
        .filter(|&&i| pods.get(i).is_some_and(is_virtual_pod))
        .count();
    if placed < held {
        return Err(format!(
            "would leave {} CapacityBuffer virtual pod(s) without capacity",
            held - placed
        ));
    }
    Ok(())
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
            // The cheaper options must still offer what `minValues` asks for (upstream's
            // `RemoveInstanceTypeOptionsByPriceAndMinValues`).
            if let Some(key) = crate::provisioning::scheduling::nodeclaim::unmet_min_values(
                &claim.requirements,
                claim.instance_types.iter().map(|it| &**it),
            ) {
                return Err(format!(
                    "Filtering by price: minValues requirement is not met for label(s) (label(s)=[{key}])"
                ));
            }
            if spot_to_spot && nodes.len() == 1 {
                let cheaper = claim.instance_types.len();
                if cheaper < MIN_INSTANCE_TYPES_FOR_SPOT_TO_SPOT {
                    return Err(format!(
                        "SpotToSpotConsolidation requires {MIN_INSTANCE_TYPES_FOR_SPOT_TO_SPOT} cheaper instance type options than the current candidate to consolidate, got {cheaper}"
                    ));
                }
                // The launch picks among the 15 cheapest spot options, or as many of the
                // cheapest as `minValues` needs if that is more.
                crate::instancetype::order_by_price(&mut claim.instance_types, &claim.requirements);
                let keep = (1..=claim.instance_types.len())
                    .find(|&n| {
                        crate::provisioning::scheduling::nodeclaim::unmet_min_values(
                            &claim.requirements,
                            claim.instance_types[..n].iter().map(|it| &**it),
                        )
                        .is_none()
                    })
                    .unwrap_or(claim.instance_types.len())
                    .max(MIN_INSTANCE_TYPES_FOR_SPOT_TO_SPOT);
                claim.instance_types.truncate(keep);
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

/// A Balanced NodePool's denominators: what all its nodes cost per hour, and what disrupting
/// all of them would cost (candidates or not, as upstream's `computeNodePoolTotals`). A price
/// that is not a number counts as 0, so one bad price cannot reject every move of the pool.
fn pool_totals(input: &Input<'_>, pool: &str) -> (f64, f64) {
    input
        .nodes
        .iter()
        .filter(|n| n.node_pool.as_deref() == Some(pool))
        .fold((0.0, 0.0), |(cost, disruption), n| {
            let price = if n.price.is_finite() { n.price } else { 0.0 };
            (cost + price, disruption + reschedule_cost(n))
        })
}

/// Upstream's Balanced score: a move passes when its share of the pool's cost saved is at
/// least 1/k of its share of the pool's disruption cost. Nothing to normalize against, or
/// nothing saved, fails; no disruption at all passes.
fn balanced_score_passes(
    savings: f64,
    disruption: f64,
    (total_cost, total_disruption): (f64, f64),
) -> bool {
    if total_cost <= 0.0 || total_disruption <= 0.0 {
        return false;
    }
    let savings_share = savings / total_cost;
    if savings_share <= 0.0 {
        return false;
    }
    let disruption_share = disruption / total_disruption;
    disruption_share == 0.0
        || savings_share / disruption_share >= 1.0 / karpenter_api::nodepool::BALANCED_K
}

/// Upstream's Balanced policy over a move: every Balanced NodePool among the candidates must
/// approve its part — its candidates' disruption cost, and (across pools) the savings in
/// proportion to what its candidates cost. Other policies always approve.
pub(super) fn balanced_approves(
    input: &Input<'_>,
    command: &Command,
    candidates: &[&Candidate<'_>],
) -> bool {
    let source_cost: f64 = candidates.iter().map(|c| c.node.price).sum();
    let mut pools: Vec<&str> = candidates.iter().map(|c| c.pool_name()).collect();
    pools.sort_unstable();
    pools.dedup();
    pools.iter().all(|&pool| {
        let mine: Vec<&&Candidate<'_>> = candidates
            .iter()
            .filter(|c| c.pool_name() == pool)
            .collect();
        if mine[0].pool.node_pool.spec.disruption.consolidation_policy
            != ConsolidationPolicy::Balanced
        {
            return true;
        }
        let pool_cost: f64 = mine.iter().map(|c| c.node.price).sum();
        let savings = if pools.len() > 1 && source_cost > 0.0 {
            command.savings_per_hour * pool_cost / source_cost
        } else {
            command.savings_per_hour
        };
        let disruption: f64 = mine.iter().map(|c| c.reschedule_cost).sum();
        balanced_score_passes(savings, disruption, pool_totals(input, pool))
    })
}

/// Upstream's `CanPassThreshold`: whether deleting the candidate outright — the best any move
/// of it can do — would pass its Balanced NodePool's score. Other policies always pass.
pub(super) fn balanced_could_pass(input: &Input<'_>, c: &Candidate<'_>) -> bool {
    if c.pool.node_pool.spec.disruption.consolidation_policy != ConsolidationPolicy::Balanced {
        return true;
    }
    let totals = pool_totals(input, c.pool_name());
    totals.0 <= 0.0 || balanced_score_passes(c.node.price, c.reschedule_cost, totals)
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
        .filter(|c| match ineligible_for_consolidation(c, input.now) {
            Some((kind, why)) => {
                decision.block_if_unexplained(&c.node.name, kind, &why);
                false
            }
            None => true,
        })
        .collect();
    within_budget(
        input,
        DisruptionReason::Underutilized,
        &consolidatable,
        decision,
    )
}

/// Why a candidate without a pod-level blocker may not be consolidated now (upstream's
/// `ShouldDisrupt` for consolidation), if anything: it cannot be priced, its NodePool disables
/// consolidation or allows only empty nodes, it is empty (emptiness's business), or its pods
/// changed within `consolidateAfter`.
pub(super) fn ineligible_for_consolidation(
    c: &Candidate<'_>,
    now: Timestamp,
) -> Option<(Blocked, String)> {
    // Static NodePools keep their size: never consolidated (no event, as upstream).
    if c.is_static() {
        return Some((
            Blocked::Ineligible,
            format!("NodePool {:?} is static, never consolidated", c.pool_name()),
        ));
    }
    // Pricing a node needs its type, capacity type and zone (upstream's checks).
    if let Some(why) = unpriceable(c) {
        return Some((Blocked::Unconsolidatable, why));
    }
    let spec = &c.pool.node_pool.spec.disruption;
    if no_consolidation(c) {
        Some((
            Blocked::Disabled,
            format!("NodePool {:?} has consolidation disabled", c.pool_name()),
        ))
    } else if is_empty(c.node) {
        Some((
            Blocked::Ineligible,
            "empty, waiting for consolidateAfter".to_string(),
        ))
    } else if spec.consolidation_policy == ConsolidationPolicy::WhenEmpty {
        // Upstream publishes `Unconsolidatable` for it (the node is not counted eligible).
        Some((
            Blocked::Disabled,
            format!(
                "NodePool {:?} has consolidation policy WhenEmpty, but node is not empty",
                c.pool_name()
            ),
        ))
    } else if !c.consolidatable(now) {
        Some((
            Blocked::Ineligible,
            "pods changed within consolidateAfter".to_string(),
        ))
    } else {
        None
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::disruption::candidates::reschedule_cost;
    use crate::provisioning::scheduling::{NodePoolInput, SchedulerOptions};
    use karpenter_api::NodePool;

    /// Upstream's ScoreMove table: pool totals of 100 (cost) and 100 (disruption), k = 2.
    #[test]
    fn balanced_score_as_upstream() {
        let cases = [
            ("high savings, low disruption", 20.0, 5.0, true),
            ("equal fractions", 10.0, 10.0, true),
            ("low savings, high disruption", 5.0, 50.0, false),
            ("zero disruption cost", 10.0, 0.0, true),
            ("zero savings", 0.0, 10.0, false),
            ("negative savings", -5.0, 10.0, false),
            ("exactly at the threshold", 5.0, 10.0, true),
            ("just under the threshold", 4.9, 10.0, false),
        ];
        for (case, savings, disruption, approved) in cases {
            assert_eq!(
                balanced_score_passes(savings, disruption, (100.0, 100.0)),
                approved,
                "{case}"
            );
        }
        assert!(
            !balanced_score_passes(10.0, 1.0, (0.0, 100.0)),
            "nothing to normalize against"
        );
    }

    fn pool(name: &str, policy: ConsolidationPolicy) -> NodePoolInput {
        let mut node_pool = NodePool::default();
        node_pool.metadata.name = Some(name.into());
        node_pool.spec.disruption.consolidation_policy = policy;
        NodePoolInput {
            node_pool,
            instance_types: Vec::new(),
        }
    }

    fn node(name: &str, pool: &str, price: f64, pods: usize) -> NodeState {
        NodeState {
            buffer_pods: 0,
            name: name.into(),
            node_pool: Some(pool.into()),
            price,
            pods: (0..pods)
                .map(|i| {
                    let mut p = Pod::default();
                    p.metadata.name = Some(format!("{name}-{i}"));
                    p
                })
                .collect(),
            ..Default::default()
        }
    }

    fn delete(candidates: &[&Candidate<'_>]) -> Command {
        Command {
            reason: DisruptionReason::Underutilized,
            method: Method::MultiNodeConsolidation,
            candidates: candidates.iter().map(|c| c.node.name.clone()).collect(),
            replacements: Vec::new(),
            savings_per_hour: candidates.iter().map(|c| c.node.price).sum(),
        }
    }

    /// A move across NodePools credits each Balanced pool only with the savings its own nodes
    /// bring: an expensive node of another pool does not buy the disruption of a Balanced
    /// pool's busiest node.
    #[test]
    fn balanced_credits_each_pool_with_its_share_of_the_savings() {
        let balanced = pool("balanced", ConsolidationPolicy::Balanced);
        let other = pool("other", ConsolidationPolicy::WhenEmptyOrUnderutilized);
        // The Balanced pool: one node with 20 pods (disruption 21) and two with one (2 each).
        let nodes = [
            node("heavy", "balanced", 1.0, 20),
            node("light-0", "balanced", 1.0, 1),
            node("light-1", "balanced", 1.0, 1),
            node("pricey", "other", 10.0, 1),
        ];
        let input = Input {
            now: Timestamp::UNIX_EPOCH,
            nodes: &nodes,
            node_pools: &[],
            pdbs: &[],
            pending_pods: &[],
            daemonset_pods: &[],
            options: SchedulerOptions::default(),
            spot_to_spot: false,
        };
        let candidate = |n: &'static str| {
            let node = nodes.iter().find(|x| x.name == n).expect("node");
            Candidate {
                node,
                pool: if node.node_pool.as_deref() == Some("balanced") {
                    &balanced
                } else {
                    &other
                },
                reschedule_cost: reschedule_cost(node),
                pod_blocker: None,
            }
        };
        let (heavy, light, pricey) = (
            candidate("heavy"),
            candidate("light-0"),
            candidate("pricey"),
        );
        // Alone, the heavy node saves 1/3 of the pool's cost for 21/25 of its disruption.
        assert!(!balanced_approves(&input, &delete(&[&heavy]), &[&heavy]));
        // With the pricey node of another pool, the Balanced pool is credited 1 of the 11
        // saved, not all 11: still rejected.
        let both = [&heavy, &pricey];
        assert!(!balanced_approves(&input, &delete(&both), &both));
        // A light node passes alone (1/3 saved for 2/25 disrupted) and with the other pool.
        assert!(balanced_approves(&input, &delete(&[&light]), &[&light]));
        let both = [&light, &pricey];
        assert!(balanced_approves(&input, &delete(&both), &both));
        // Deleting the heavy node outright could never pass, so no move of it is tried.
        assert!(!balanced_could_pass(&input, &heavy));
        assert!(balanced_could_pass(&input, &light));
        assert!(balanced_could_pass(&input, &pricey), "not a Balanced pool");
    }
}
