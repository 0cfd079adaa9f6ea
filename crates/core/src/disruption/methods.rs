//! Upstream's disruption methods behind one trait, tried in order by [`super::decide`]: each
//! says which candidates it would move and returns at most one command, blocking the nodes it
//! passes over with the reason.

use k8s_openapi::jiff::Timestamp;
use karpenter_api::DisruptionReason;

use super::candidates::{Candidate, budget_mapping, is_empty, round_robin_by_pool, within_budget};
use super::consolidation::{
    balanced_approves, balanced_could_pass, consolidate, consolidation_candidates,
    no_consolidation, reschedule,
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

    /// Every command this pass would carry out: [`DisruptionMethod::compute`]'s, unless the
    /// method acts on several candidates at once in separate commands (static drift).
    fn compute_all(
        &self,
        input: &Input<'_>,
        candidates: &[Candidate<'_>],
        decision: &mut Decision,
    ) -> Vec<Command> {
        self.compute(input, candidates, decision)
            .into_iter()
            .collect()
    }
}

/// The method behind `method`.
pub(super) fn method(method: Method) -> &'static dyn DisruptionMethod {
    match method {
        Method::Emptiness => &Emptiness,
        Method::StaticDrift => &StaticDrift,
        Method::Drift => &Drift,
        Method::MultiNodeConsolidation => &MultiNodeConsolidation,
        Method::SingleNodeConsolidation => &SingleNodeConsolidation,
    }
}

/// Every empty, consolidatable node within budget, in one command.
struct Emptiness;

/// Whether emptiness may take the candidate (upstream's `ShouldDisrupt` for emptiness): empty,
/// nothing blocking it, consolidation enabled, holding no CapacityBuffer capacity and
/// `consolidateAfter` passed.
pub(super) fn emptiness_eligible(c: &Candidate<'_>, now: Timestamp) -> bool {
    !c.is_static()
        && c.pod_blocker.is_none()
        && !no_consolidation(c)
        && c.node.buffer_pods == 0
        && is_empty(c.node)
        && c.consolidatable(now)
}

/// Upstream's `Unconsolidatable` message for a node a CapacityBuffer's virtual pods hold.
fn holds_buffer(c: &Candidate<'_>) -> Option<String> {
    (c.node.buffer_pods > 0 && !c.is_static() && !no_consolidation(c))
        .then(|| format!("Node {:?} has buffer pods", c.node.name))
}

impl DisruptionMethod for Emptiness {
    fn compute(
        &self,
        input: &Input<'_>,
        candidates: &[Candidate<'_>],
        decision: &mut Decision,
    ) -> Option<Command> {
        for c in candidates {
            // Removing it would only make provisioning launch the buffer's capacity again.
            if let Some(why) = holds_buffer(c).filter(|_| is_empty(c.node)) {
                decision.block(&c.node.name, Blocked::Unconsolidatable, why);
            }
        }
        let empty: Vec<&Candidate<'_>> = candidates
            .iter()
            .filter(|c| emptiness_eligible(c, input.now))
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

/// Drift, as upstream: drifted nodes in the order they were found drifted; every empty one the
/// budgets allow in one command, or else the first whose pods fit, replaced with as many
/// nodes as they need.
struct Drift;

impl DisruptionMethod for Drift {
    fn compute(
        &self,
        input: &Input<'_>,
        candidates: &[Candidate<'_>],
        decision: &mut Decision,
    ) -> Option<Command> {
        let mut budget = budget_mapping(input, DisruptionReason::Drifted);
        let mut drifted: Vec<&Candidate<'_>> = candidates
            .iter()
            .filter(|c| c.node.drifted && !c.is_static())
            .collect();
        drifted.sort_by(|a, b| {
            (a.node.drifted_at, &a.node.name).cmp(&(b.node.drifted_at, &b.node.name))
        });
        let no_budget = |c: &Candidate<'_>, decision: &mut Decision| {
            decision.block(
                &c.node.name,
                Blocked::Budget,
                format!(
                    "drifted, but no allowed disruptions for reason Drifted in NodePool {:?}",
                    c.pool_name()
                ),
            );
        };
        let (empty, occupied): (Vec<&Candidate<'_>>, Vec<&Candidate<'_>>) =
            drifted.into_iter().partition(|c| is_empty(c.node));
        // Empty nodes need no simulation and go first, all that the budgets allow.
        let mut going = Vec::new();
        for c in empty {
            match budget.get_mut(c.pool_name()) {
                Some(left) if *left > 0 => {
                    *left -= 1;
                    going.push(c.node.name.clone());
                }
                _ => no_budget(c, decision),
            }
        }
        if !going.is_empty() {
            return Some(Command {
                reason: DisruptionReason::Drifted,
                method: Method::Drift,
                candidates: going,
                replacements: Vec::new(),
                savings_per_hour: 0.0,
            });
        }
        for c in occupied {
            if budget.get(c.pool_name()).copied().unwrap_or(0) == 0 {
                no_budget(c, decision);
                continue;
            }
            let replacements = match reschedule(input, &[c.node]) {
                Ok(claims) => claims,
                Err(why) => {
                    decision.block(
                        &c.node.name,
                        Blocked::Unconsolidatable,
                        format!("drifted, but its pods would not all move: {why}"),
                    );
                    continue;
                }
            };
            return Some(Command {
                reason: DisruptionReason::Drifted,
                method: Method::Drift,
                candidates: vec![c.node.name.clone()],
                replacements,
                savings_per_hour: 0.0,
            });
        }
        None
    }
}

/// Upstream's static drift: a drifted node of a static NodePool is replaced by one new node of
/// its NodePool (its pods are not simulated: the replacement is a replica, not a place for
/// them), within the Drifted budget and `limits.nodes` (each replacement must fit beside the
/// nodes it replaces), and not while the NodePool is above its replicas (the scale-down goes
/// first). As upstream, one pass starts every replacement the budget and the limit allow, one
/// command per node, drifted nodes in the order they were found drifted.
struct StaticDrift;

impl DisruptionMethod for StaticDrift {
    fn compute(
        &self,
        input: &Input<'_>,
        candidates: &[Candidate<'_>],
        decision: &mut Decision,
    ) -> Option<Command> {
        self.compute_all(input, candidates, decision)
            .into_iter()
            .next()
    }

    fn compute_all(
        &self,
        input: &Input<'_>,
        candidates: &[Candidate<'_>],
        decision: &mut Decision,
    ) -> Vec<Command> {
        use crate::provisioning::static_capacity::{self, ClaimState, Counts};
        let mut budget = budget_mapping(input, DisruptionReason::Drifted);
        let mut drifted: Vec<&Candidate<'_>> = candidates
            .iter()
            .filter(|c| c.node.drifted && c.is_static())
            .collect();
        drifted.sort_by(|a, b| {
            (a.node.drifted_at, &a.node.name).cmp(&(b.node.drifted_at, &b.node.name))
        });
        // Replacements this pass started, per NodePool: each holds a place under the limit.
        let mut started: std::collections::HashMap<&str, usize> = Default::default();
        let mut commands = Vec::new();
        for c in drifted {
            let pool = &c.pool.node_pool;
            let counts = Counts::of(
                input
                    .nodes
                    .iter()
                    .filter(|n| n.node_pool.as_deref() == Some(c.pool_name()))
                    .map(|n| {
                        if n.deleting {
                            ClaimState::Deleting
                        } else {
                            ClaimState::Active
                        }
                    }),
            );
            let already = started.get(c.pool_name()).copied().unwrap_or(0);
            let replicas = pool.spec.replicas.unwrap_or_default().max(0) as usize;
            let with_started = Counts {
                active: counts.active + already,
                ..counts
            };
            let blocked = if budget.get(c.pool_name()).copied().unwrap_or(0) == 0 {
                Some((
                    Blocked::Budget,
                    format!(
                        "drifted, but no allowed disruptions for reason Drifted in NodePool {:?}",
                        c.pool_name()
                    ),
                ))
            } else if counts.active + counts.pending_disruption > replicas {
                Some((
                    Blocked::Waiting,
                    format!(
                        "drifted, waiting for NodePool {:?} to scale down to its replicas",
                        c.pool_name()
                    ),
                ))
            } else if static_capacity::within_node_limit(pool, with_started, 1) == 0 {
                Some((
                    Blocked::Budget,
                    format!(
                        "drifted, but NodePool {:?} is at its node limit, no room for a replacement",
                        c.pool_name()
                    ),
                ))
            } else {
                None
            };
            if let Some((kind, why)) = blocked {
                decision.block(&c.node.name, kind, why);
                continue;
            }
            let Some(replacement) =
                static_capacity::node_claim(c.pool, &input.options.provider_labels)
            else {
                decision.block(
                    &c.node.name,
                    Blocked::Unconsolidatable,
                    format!(
                        "drifted, but no instance type can launch for NodePool {:?}",
                        c.pool_name()
                    ),
                );
                continue;
            };
            if let Some(left) = budget.get_mut(c.pool_name()) {
                *left -= 1;
            }
            *started.entry(c.pool_name()).or_default() += 1;
            commands.push(Command {
                reason: DisruptionReason::Drifted,
                method: Method::StaticDrift,
                candidates: vec![c.node.name.clone()],
                replacements: vec![replacement],
                savings_per_hour: 0.0,
            });
        }
        commands
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
                .filter(|cmd| balanced_approves(input, cmd, prefix));
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
        let not_worth_it = "the Balanced policy judges the savings not worth the disruption";
        for c in &round_robin_by_pool(&within_budget) {
            if !balanced_could_pass(input, c) {
                // Even deleting it outright would not pass: no move of it will.
                decision.block(&c.node.name, Blocked::Unconsolidatable, not_worth_it.into());
                continue;
            }
            let one = std::slice::from_ref(c);
            match consolidate(input, Method::SingleNodeConsolidation, one) {
                Ok(cmd) if balanced_approves(input, &cmd, one) => return Some(cmd),
                Ok(_) => {
                    decision.block(&c.node.name, Blocked::Unconsolidatable, not_worth_it.into())
                }
                Err(why) => decision.block(&c.node.name, Blocked::Unconsolidatable, why),
            }
        }
        None
    }
}
