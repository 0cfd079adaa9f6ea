//! Upstream's validation of a held command: after the validation delay, the cluster as it is
//! now must still allow what was decided — the candidates are still candidates for the same
//! method and within their NodePools' budgets and, for a consolidation, scheduling their pods
//! afresh still needs no more than the replacement decided, of the same instance types or
//! cheaper. Emptiness goes ahead with whichever candidates are still empty; a consolidation is
//! all or nothing. Drift is not validated.

use std::collections::BTreeSet;

use karpenter_api::DisruptionReason;

use super::candidates::{Candidate, budget_mapping, candidates};
use super::consolidation::{ineligible_for_consolidation, reschedule};
use super::methods::emptiness_eligible;
use super::{Command, Decision, Input, Method, NodeState};

/// Why a held command failed validation, as upstream sorts them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InvalidKind {
    /// A candidate is no longer one (pods came or went, a blocker appeared, it is deleting).
    Churn,
    /// A candidate was nominated for pending pods, or its NodePool's budget no longer allows it.
    Budget,
    /// Scheduling the candidates' pods now needs something other than what was decided.
    Scheduling,
}

impl InvalidKind {
    /// Upstream's reason word (the `ConsolidationRejected` event's reason).
    pub fn as_str(self) -> &'static str {
        match self {
            InvalidKind::Churn => "churn",
            InvalidKind::Budget => "budget",
            InvalidKind::Scheduling => "scheduling",
        }
    }
}

/// A failed validation: the kind and the reason in words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Invalid {
    /// What kind of failure.
    pub kind: InvalidKind,
    /// Why, in words.
    pub why: String,
}

impl Invalid {
    fn new(kind: InvalidKind, why: impl Into<String>) -> Self {
        Self {
            kind,
            why: why.into(),
        }
    }
}

impl std::fmt::Display for Invalid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.why, self.kind.as_str())
    }
}

/// Validates `command` against the cluster as `input` shows it now; the command to carry out
/// (emptiness may keep only some of its candidates) or why it is no longer valid.
pub fn validate(input: &Input<'_>, command: &Command) -> Result<Command, Invalid> {
    match command.method {
        Method::Drift | Method::StaticDrift => Ok(command.clone()),
        Method::Emptiness => validate_emptiness(input, command),
        Method::SingleNodeConsolidation | Method::MultiNodeConsolidation => {
            validate_consolidation(input, command)
        }
    }
}

/// The command's candidates that are still candidates and pass `eligible`, in the command's
/// order.
fn still_candidates<'a>(
    input: &Input<'a>,
    command: &Command,
    eligible: impl Fn(&Candidate<'a>) -> bool,
) -> Vec<Candidate<'a>> {
    let wanted: BTreeSet<&str> = command.candidates.iter().map(String::as_str).collect();
    let mut now: Vec<Candidate<'a>> = candidates(input, &mut Decision::default())
        .into_iter()
        .filter(|c| wanted.contains(c.node.name.as_str()) && eligible(c))
        .collect();
    now.sort_by_key(|c| {
        command
            .candidates
            .iter()
            .position(|name| *name == c.node.name)
    });
    now
}

fn validate_emptiness(input: &Input<'_>, command: &Command) -> Result<Command, Invalid> {
    let valid = still_candidates(input, command, |c| emptiness_eligible(c, input.now));
    if valid.is_empty() {
        return Err(Invalid::new(
            InvalidKind::Churn,
            format!(
                "{} candidates are no longer valid",
                command.candidates.len()
            ),
        ));
    }
    let mut budget = budget_mapping(input, DisruptionReason::Empty);
    let going: Vec<&Candidate<'_>> = valid
        .iter()
        .filter(|c| {
            let left = budget.entry(c.pool_name().to_string()).or_default();
            if *left == 0 {
                return false;
            }
            *left -= 1;
            true
        })
        .collect();
    if going.is_empty() {
        return Err(Invalid::new(
            InvalidKind::Budget,
            format!(
                "{} candidates failed validation because they were nominated for a pod or would violate disruption budgets",
                command.candidates.len()
            ),
        ));
    }
    Ok(Command {
        candidates: going.iter().map(|c| c.node.name.clone()).collect(),
        savings_per_hour: going.iter().map(|c| c.node.price).sum(),
        ..command.clone()
    })
}

fn validate_consolidation(input: &Input<'_>, command: &Command) -> Result<Command, Invalid> {
    let valid = still_candidates(input, command, |c| {
        c.pod_blocker.is_none() && ineligible_for_consolidation(c, input.now).is_none()
    });
    if valid.len() != command.candidates.len() {
        return Err(Invalid::new(
            InvalidKind::Churn,
            format!(
                "{} candidates are no longer valid",
                command.candidates.len() - valid.len()
            ),
        ));
    }
    let mut budget = budget_mapping(input, DisruptionReason::Underutilized);
    for c in &valid {
        let left = budget.entry(c.pool_name().to_string()).or_default();
        if *left == 0 {
            return Err(Invalid::new(
                InvalidKind::Budget,
                "a candidate can no longer be disrupted without violating budgets",
            ));
        }
        *left -= 1;
    }
    let nodes: Vec<&NodeState> = valid.iter().map(|c| c.node).collect();
    let claims =
        reschedule(input, &nodes).map_err(|why| Invalid::new(InvalidKind::Scheduling, why))?;
    let changed = || {
        Invalid::new(
            InvalidKind::Scheduling,
            "scheduling simulation produced new results",
        )
    };
    match (claims.as_slice(), command.replacements.as_slice()) {
        ([], []) => Ok(command.clone()),
        // A replacement is valid while the simulation would launch one of which the decided
        // types are a subset: the simulation does not filter by price, so a type outside it
        // means the pods now need something the decision ruled out (bigger, pricier).
        ([now], [decided]) => {
            let offered: BTreeSet<&str> = now
                .instance_types
                .iter()
                .map(|it| it.name.as_str())
                .collect();
            if decided
                .instance_types
                .iter()
                .all(|it| offered.contains(it.name.as_str()))
            {
                Ok(command.clone())
            } else {
                Err(changed())
            }
        }
        _ => Err(changed()),
    }
}
