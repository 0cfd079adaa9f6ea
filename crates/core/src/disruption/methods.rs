//! Upstream's disruption methods behind one trait, tried in order by [`super::decide`]: each
//! says which candidates it would move and returns at most one command, blocking the nodes it
//! passes over with the reason.

use k8s_openapi::api::core::v1::Pod;
use karpenter_api::DisruptionReason;

use super::candidates::{
    Candidate, budget_mapping, is_empty, reschedulable, round_robin_by_pool, within_budget,
};
use super::consolidation::{
    balanced_approves, consolidate, consolidation_candidates, no_consolidation, solve_without,
};
use super::{Blocked, Command, Decision, Input, Method};

/// One way to disrupt nodes.
pub(super) trait DisruptionMethod {
    /// The command this pass would carry out, if any; nodes passed over are blocked in
    /// `decision` with the reason.
    fn compute(
        &self,
        input: &Input<'_>,
        candidates: &[Candidate<'_>],
        decision: &mut Decision,
    ) -> Option<Command>;
}

/// The method behind `method`.
pub(super) fn method(method: Method) -> &'static dyn DisruptionMethod {
    match method {
        Method::Emptiness => &Emptiness,
        Method::Drift => &Drift,
        Method::MultiNodeConsolidation => &MultiNodeConsolidation,
        Method::SingleNodeConsolidation => &SingleNodeConsolidation,
    }
}

/// Every empty, consolidatable node within budget, in one command.
struct Emptiness;

impl DisruptionMethod for Emptiness {
    fn compute(
        &self,
        input: &Input<'_>,
        candidates: &[Candidate<'_>],
        decision: &mut Decision,
    ) -> Option<Command> {
        let empty: Vec<&Candidate<'_>> = candidates
            .iter()
            .filter(|c| {
                c.pod_blocker.is_none()
                    && !no_consolidation(c)
                    && is_empty(c.node)
                    && c.consolidatable(input.now)
            })
            .collect();
        let chosen = within_budget(input, DisruptionReason::Empty, &empty, decision);
        if chosen.is_empty() {
            return None;
        }
        Some(Command {
            reason: DisruptionReason::Empty,
            method: Method::Emptiness,
            candidates: chosen.iter().map(|c| c.node.name.clone()).collect(),
            replacements: Vec::new(),
            savings_per_hour: chosen.iter().map(|c| c.node.price).sum(),
        })
    }
}

/// The oldest drifted node whose pods fit, replaced with as many nodes as they need.
struct Drift;

impl DisruptionMethod for Drift {
    fn compute(
        &self,
        input: &Input<'_>,
        candidates: &[Candidate<'_>],
        decision: &mut Decision,
    ) -> Option<Command> {
        let budget = budget_mapping(input, DisruptionReason::Drifted);
        let mut drifted: Vec<&Candidate<'_>> =
            candidates.iter().filter(|c| c.node.drifted).collect();
        drifted.sort_by_key(|c| (!is_empty(c.node), c.node.created_at));
        for c in drifted {
            if budget.get(c.pool_name()).copied().unwrap_or(0) == 0 {
                decision.block(
                    &c.node.name,
                    Blocked::Budget,
                    format!(
                        "drifted, but no allowed disruptions for reason Drifted in NodePool {:?}",
                        c.pool_name()
                    ),
                );
                continue;
            }
            let moving: Vec<Pod> = reschedulable(c.node).cloned().collect();
            let (_, results) = solve_without(input, &[c.node], &moving);
            if !results.pod_errors.is_empty() {
                decision.block(
                    &c.node.name,
                    Blocked::Unconsolidatable,
                    "drifted, but its pods would not all schedule elsewhere".into(),
                );
                continue;
            }
            return Some(Command {
                reason: DisruptionReason::Drifted,
                method: Method::Drift,
                candidates: vec![c.node.name.clone()],
                replacements: results.new_node_claims,
                savings_per_hour: 0.0,
            });
        }
        None
    }
}

/// The longest prefix of the consolidation candidates (binary search, up to 100 nodes) that
/// can go with at most one cheaper replacement.
struct MultiNodeConsolidation;

/// Upstream's cap on how many nodes one multi-node consolidation considers.
const MAX_MULTI_NODE_CANDIDATES: usize = 100;

impl DisruptionMethod for MultiNodeConsolidation {
    fn compute(
        &self,
        input: &Input<'_>,
        candidates: &[Candidate<'_>],
        decision: &mut Decision,
    ) -> Option<Command> {
        let within_budget = consolidation_candidates(input, candidates, decision);
        if within_budget.len() < 2 {
            return None;
        }
        let (mut low, mut high) = (
            1usize,
            (within_budget.len() - 1).min(MAX_MULTI_NODE_CANDIDATES),
        );
        let mut best: Option<Command> = None;
        while low <= high {
            let mid = (low + high) / 2;
            let prefix = &within_budget[..=mid];
            let valid = consolidate(input, Method::MultiNodeConsolidation, prefix)
                .ok()
                .filter(|cmd| {
                    prefix
                        .iter()
                        .all(|c| balanced_approves(input, c.pool, cmd, prefix))
                });
            match valid {
                Some(cmd) => {
                    best = Some(cmd);
                    low = mid + 1;
                }
                None => high = mid - 1,
            }
        }
        best
    }
}

/// The first candidate that can go alone, taking the NodePools in turn so one large pool
/// cannot starve the others.
struct SingleNodeConsolidation;

impl DisruptionMethod for SingleNodeConsolidation {
    fn compute(
        &self,
        input: &Input<'_>,
        candidates: &[Candidate<'_>],
        decision: &mut Decision,
    ) -> Option<Command> {
        let within_budget = consolidation_candidates(input, candidates, decision);
        for c in &round_robin_by_pool(&within_budget) {
            let one = std::slice::from_ref(c);
            match consolidate(input, Method::SingleNodeConsolidation, one) {
                Ok(cmd) if balanced_approves(input, c.pool, &cmd, one) => return Some(cmd),
                Ok(_) => decision.block(
                    &c.node.name,
                    Blocked::Unconsolidatable,
                    "the Balanced policy judges the savings not worth the disruption".into(),
                ),
                Err(why) => decision.block(&c.node.name, Blocked::Unconsolidatable, why),
            }
        }
        None
    }
}
