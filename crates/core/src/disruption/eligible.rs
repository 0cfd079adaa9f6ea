//! What upstream's disruption controller measures of each method, computed from the single
//! decision our disruption pass makes over every method at once.

use super::{Decision, Input};
use crate::state::pods;
use karpenter_api::ConsolidationPolicy;

/// `karpenter_voluntary_disruption_eligible_nodes` per reason: the candidates (nodes a method
/// would consider, budgets aside) that each method's filter accepts, as upstream's
/// `ShouldDisrupt`s do — empty ones where consolidation is on, drifted ones, and all of them
/// where the policy consolidates underutilized nodes.
pub fn eligible_by_reason(input: &Input<'_>, decision: &Decision) -> [(&'static str, usize); 3] {
    let chosen = |name: &str| {
        decision
            .commands
            .iter()
            .any(|c| c.candidates.iter().any(|n| n == name))
            || decision
                .blocked
                .get(name)
                .is_some_and(|b| b.kind.eligible())
    };
    let (mut empty, mut drifted, mut underutilized) = (0, 0, 0);
    for node in input.nodes.iter().filter(|n| chosen(&n.name)) {
        let pool = input.node_pools.iter().map(|p| &p.node_pool).find(|p| {
            Some(p.metadata.name.as_deref().unwrap_or_default()) == node.node_pool.as_deref()
        });
        let disruption = pool.map(|p| &p.spec.disruption);
        let consolidates = disruption.is_some_and(|d| d.consolidate_after.0.is_some());
        if node.drifted {
            drifted += 1;
        }
        if consolidates && !node.pods.iter().any(pods::is_reschedulable) {
            empty += 1;
        }
        if consolidates
            && disruption.is_some_and(|d| d.consolidation_policy != ConsolidationPolicy::WhenEmpty)
        {
            underutilized += 1;
        }
    }
    [
        ("empty", empty),
        ("drifted", drifted),
        ("underutilized", underutilized),
    ]
}
