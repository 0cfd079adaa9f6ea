//! Disruption decisions: which nodes to remove or replace, and why the others stay — upstream's
//! methods in upstream's order (emptiness, drift, multi-node consolidation, single-node
//! consolidation), within each NodePool's budgets, never past a PodDisruptionBudget or a
//! `karpenter.sh/do-not-disrupt`. Pure: the caller passes the cluster and the time, and carries
//! out the commands (taint, launch replacements, wait for them, then delete).

pub mod budgets;
pub mod drift;
pub mod pdb;

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::core::v1::{Pod, Taint};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use karpenter_api::labels::{
    CAPACITY_TYPE_LABEL, DO_NOT_DISRUPT_ANNOTATION, INSTANCE_TYPE_LABEL,
    POD_DELETION_COST_ANNOTATION, ZONE_LABEL,
};
use karpenter_api::{ConsolidationPolicy, DisruptionReason, NodePool};

use crate::provisioning::scheduling::{
    BoundPod, ExistingNodeInput, NewNodeClaim, NodePoolInput, Scheduler, SchedulerOptions,
};
use crate::resources::Resources;

/// A node as disruption sees it.
#[derive(Clone, Debug, Default)]
pub struct NodeState {
    /// The node's name.
    pub name: String,
    /// Its NodePool (`None`: not managed by karpenter).
    pub node_pool: Option<String>,
    /// Its labels.
    pub labels: BTreeMap<String, String>,
    /// Its annotations.
    pub annotations: BTreeMap<String, String>,
    /// Its taints.
    pub taints: Vec<Taint>,
    /// What pods can use.
    pub allocatable: Resources,
    /// Its capacity.
    pub capacity: Resources,
    /// The pods bound to it.
    pub pods: Vec<Pod>,
    /// Ready, startup taints gone.
    pub initialized: bool,
    /// Ready now (a NotReady node counts as already disrupting).
    pub ready: bool,
    /// Marked for deletion or terminating.
    pub deleting: bool,
    /// A recent provisioning decision counts on it.
    pub nominated: bool,
    /// What it costs per hour.
    pub price: f64,
    /// When it was created (seconds; the same clock as `now`).
    pub created_at: i64,
    /// When a pod last bound to or left it (or when it initialized).
    pub last_pod_event: i64,
    /// Its NodeClaim no longer matches its NodePool or NodeClass.
    pub drifted: bool,
}

/// A decision to disrupt nodes.
#[derive(Clone, Debug)]
pub struct Command {
    /// Why.
    pub reason: DisruptionReason,
    /// Which method decided it.
    pub method: &'static str,
    /// The nodes to remove.
    pub candidates: Vec<String>,
    /// Nodes to launch first (consolidation replaces with at most one; drift with any number).
    pub replacements: Vec<NewNodeClaim>,
    /// What the move saves per hour.
    pub savings_per_hour: f64,
}

/// Why a node stays, in the terms of the event upstream publishes about it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Blocked {
    /// Not a candidate at all (do-not-disrupt, a PDB, not initialized, …): `DisruptionBlocked`.
    NotCandidate,
    /// Its NodePool's budget allows no more disruptions now: `DisruptionBlocked`.
    Budget,
    /// A candidate no method could remove or replace profitably: `Unconsolidatable`.
    Unconsolidatable,
    /// A candidate left for a later pass because another method acts first (no event).
    Waiting,
}

/// The outcome of one disruption pass.
#[derive(Clone, Debug, Default)]
pub struct Decision {
    /// Commands to carry out (from the first method that found any).
    pub commands: Vec<Command>,
    /// Every managed node not chosen, and why it stays.
    pub blocked: BTreeMap<String, String>,
    /// The kind of each reason in `blocked`.
    pub blocked_kind: BTreeMap<String, Blocked>,
}

impl Decision {
    fn block(&mut self, node: &str, kind: Blocked, why: String) {
        self.blocked.insert(node.to_string(), why);
        self.blocked_kind.insert(node.to_string(), kind);
    }
}

/// Everything a disruption pass looks at.
pub struct Input<'a> {
    /// Now, in seconds since the Unix epoch (budget schedules are cron in UTC).
    pub now: i64,
    /// Every node.
    pub nodes: &'a [NodeState],
    /// The NodePools with their instance types.
    pub node_pools: &'a [NodePoolInput],
    /// PodDisruptionBudgets, with `status.disruptionsAllowed` filled in.
    pub pdbs: &'a [PodDisruptionBudget],
    /// Pods waiting for a node (they must still fit after a move).
    pub pending_pods: &'a [Pod],
    /// DaemonSet pods, for replacement overhead.
    pub daemonset_pods: &'a [Pod],
    /// Scheduling options (provider labels).
    pub options: SchedulerOptions,
    /// Upstream's `SpotToSpotConsolidation` feature gate (off by default): replace spot nodes
    /// with cheaper spot nodes.
    pub spot_to_spot: bool,
}

/// Upstream's `MinInstanceTypesForSpotToSpotConsolidation`: a single spot node is replaced
/// only when at least this many cheaper types could take its place, and the replacement lists
/// exactly this many, so the launch lands among them and is not consolidated again at once.
pub const MIN_INSTANCE_TYPES_FOR_SPOT_TO_SPOT: usize = 15;

fn is_daemonset_pod(pod: &Pod) -> bool {
    pod.metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.kind == "DaemonSet" || o.kind == "Node")
}

fn is_active(pod: &Pod) -> bool {
    !matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    ) && pod.metadata.deletion_timestamp.is_none()
}

/// Pods that must find another node when this one goes.
fn reschedulable(node: &NodeState) -> impl Iterator<Item = &Pod> {
    node.pods
        .iter()
        .filter(|p| is_active(p) && !is_daemonset_pod(p))
}

/// Upstream's eviction cost of a pod: 1, raised by its deletion cost and priority, within ±10.
pub fn eviction_cost(pod: &Pod) -> f64 {
    let deletion_cost = pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(POD_DELETION_COST_ANNOTATION))
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or(0.0);
    let priority = pod.spec.as_ref().and_then(|s| s.priority).unwrap_or(0) as f64;
    (1.0 + deletion_cost / 2f64.powi(27) + priority / 2f64.powi(25)).clamp(-10.0, 10.0)
}

/// 1 plus the positive eviction costs of the node's reschedulable pods.
fn reschedule_cost(node: &NodeState) -> f64 {
    1.0 + reschedulable(node)
        .map(eviction_cost)
        .filter(|c| *c > 0.0)
        .sum::<f64>()
}

/// A node is empty when moving its pods costs nothing (no reschedulable pod with a positive
/// eviction cost).
fn is_empty(node: &NodeState) -> bool {
    reschedule_cost(node) <= 1.0
}

/// When a pod's `do-not-disrupt` still holds: `"true"`, or a duration not yet elapsed since it
/// started.
fn do_not_disrupt(pod: &Pod, now: i64) -> bool {
    let Some(value) = pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(DO_NOT_DISRUPT_ANNOTATION))
    else {
        return false;
    };
    if value == "true" {
        return true;
    }
    match karpenter_api::duration::parse_go_duration(value) {
        Ok(d) => {
            let started = pod
                .status
                .as_ref()
                .and_then(|s| s.start_time.as_ref())
                .map(|t| t.0.as_second());
            started.is_none_or(|s| now < s + d.as_secs() as i64)
        }
        Err(_) => false,
    }
}

/// What stops any voluntary disruption of the node itself, if anything.
fn node_blocked_reason(node: &NodeState, pools: &BTreeMap<&str, &NodePoolInput>) -> Option<String> {
    let Some(pool) = node.node_pool.as_deref() else {
        return Some("node is not managed by a NodePool".into());
    };
    if !pools.contains_key(pool) {
        return Some(format!("NodePool {pool:?} not found"));
    }
    if !node.initialized {
        return Some("node is not initialized".into());
    }
    if node.deleting {
        return Some("node is being deleted".into());
    }
    if node.nominated {
        return Some("node is nominated for pending pods".into());
    }
    if node
        .annotations
        .get(DO_NOT_DISRUPT_ANNOTATION)
        .is_some_and(|v| v == "true")
    {
        return Some(format!("node has \"{DO_NOT_DISRUPT_ANNOTATION}\""));
    }
    None
}

/// What stops graceful disruption at the pod level: a pod with `do-not-disrupt`, or a pod whose
/// PodDisruptionBudget allows no eviction now.
fn pod_blocked_reason(node: &NodeState, pdbs: &[PodDisruptionBudget], now: i64) -> Option<String> {
    for pod in node.pods.iter().filter(|p| is_active(p)) {
        let name = format!(
            "{}/{}",
            pod.metadata.namespace.as_deref().unwrap_or("default"),
            pod.metadata.name.as_deref().unwrap_or("?")
        );
        if do_not_disrupt(pod, now) {
            return Some(format!("pod {name} has \"{DO_NOT_DISRUPT_ANNOTATION}\""));
        }
        if is_daemonset_pod(pod) {
            continue;
        }
        let matching: Vec<&PodDisruptionBudget> =
            pdbs.iter().filter(|b| pdb::selects(b, pod)).collect();
        if matching.len() > 1 {
            return Some(format!(
                "pod {name} is selected by more than one PodDisruptionBudget; eviction does not support multiple PDBs"
            ));
        }
        if let Some(budget) = matching.first()
            && budget
                .status
                .as_ref()
                .is_none_or(|s| s.disruptions_allowed <= 0)
        {
            return Some(format!(
                "pdb prevents pod evictions (PodDisruptionBudget=[{}/{}])",
                budget.metadata.namespace.as_deref().unwrap_or("default"),
                budget.metadata.name.as_deref().unwrap_or("?")
            ));
        }
    }
    None
}

/// A node that may be disrupted.
#[derive(Clone, Debug)]
struct Candidate<'a> {
    node: &'a NodeState,
    pool: &'a NodePoolInput,
    reschedule_cost: f64,
    /// A pod-level blocker graceful methods respect. Only a drifted node whose NodePool sets
    /// a `terminationGracePeriod` becomes a candidate with one: drift is upstream's
    /// "eventual" class, and the grace period bounds how long the blocker can hold the drain.
    pod_blocker: Option<String>,
}

impl Candidate<'_> {
    fn pool_name(&self) -> &str {
        self.pool.node_pool.name()
    }

    fn consolidatable(&self, now: i64) -> bool {
        self.pool
            .node_pool
            .spec
            .disruption
            .consolidate_after
            .0
            .is_some_and(|after| now - self.node.last_pod_event >= after.as_secs() as i64)
    }
}

/// Remaining disruptions per NodePool for a reason: the budget less nodes already disrupting.
fn budget_mapping(input: &Input<'_>, reason: DisruptionReason) -> HashMap<String, usize> {
    let mut out = HashMap::new();
    for pool in input.node_pools {
        let name = pool.node_pool.name();
        let nodes: Vec<&NodeState> = input
            .nodes
            .iter()
            .filter(|n| n.node_pool.as_deref() == Some(name))
            .collect();
        let counted = nodes
            .iter()
            .filter(|n| n.initialized && !n.deleting)
            .count();
        let disrupting = nodes.iter().filter(|n| !n.ready || n.deleting).count();
        let allowed = budgets::allowed_disruptions(&pool.node_pool, counted, reason, input.now);
        out.insert(name.to_string(), allowed.saturating_sub(disrupting));
    }
    out
}

/// The leading `candidates` each NodePool's budget for `reason` allows; the rest are blocked
/// with the reason.
fn within_budget<'c, 'a>(
    input: &Input<'_>,
    reason: DisruptionReason,
    candidates: &[&'c Candidate<'a>],
    decision: &mut Decision,
) -> Vec<&'c Candidate<'a>> {
    let mut budget = budget_mapping(input, reason);
    let mut chosen = Vec::new();
    for c in candidates {
        let left = budget
            .get_mut(c.pool_name())
            .expect("every pool has a budget entry");
        if *left == 0 {
            decision.block(
                &c.node.name,
                Blocked::Budget,
                format!(
                    "no allowed disruptions for reason {} in NodePool {:?}",
                    reason.as_str(),
                    c.pool_name()
                ),
            );
            continue;
        }
        *left -= 1;
        chosen.push(*c);
    }
    chosen
}

/// The scheduling simulation with `removed` gone: do their pods (and the pending ones) fit, and
/// what would be launched?
enum Simulation {
    Delete,
    Replace(Box<NewNodeClaim>),
    Invalid(String),
}

/// The nodes pods may move to: every node not deleting and not `removed`.
fn remaining_nodes(input: &Input<'_>, removed: &[&NodeState]) -> Vec<ExistingNodeInput> {
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

fn simulate(input: &Input<'_>, removed: &[&NodeState]) -> Simulation {
    let existing = remaining_nodes(input, removed);
    let moving: Vec<Pod> = removed
        .iter()
        .flat_map(|n| reschedulable(n).cloned())
        .collect();
    let mut pods = moving.clone();
    pods.extend(input.pending_pods.iter().cloned());
    let results = Scheduler::new(
        input.node_pools,
        &existing,
        input.daemonset_pods,
        input.options.clone(),
    )
    .solve(&pods, &|| false);
    if let Some((_, reason)) = results.pod_errors.iter().find(|(i, _)| **i < moving.len()) {
        return Simulation::Invalid(format!("not all pods would schedule, {reason}"));
    }
    let uninitialized: Vec<&str> = results
        .existing_nodes
        .iter()
        .filter(|(_, pods)| pods.iter().any(|p| *p < moving.len()))
        .map(|(name, _)| name.as_str())
        .filter(|name| existing.iter().any(|e| e.name == *name && !e.initialized))
        .collect();
    if let Some(name) = uninitialized.first() {
        return Simulation::Invalid(format!("would schedule against uninitialized node {name}"));
    }
    let claims: Vec<&NewNodeClaim> = results
        .new_node_claims
        .iter()
        .filter(|c| c.pods.iter().any(|p| *p < moving.len()))
        .collect();
    match claims.len() {
        0 => Simulation::Delete,
        1 => Simulation::Replace(Box::new(claims[0].clone())),
        n => Simulation::Invalid(format!("can't remove without creating {n} nodes")),
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
fn consolidate(input: &Input<'_>, candidates: &[&Candidate<'_>]) -> Result<Command, String> {
    let nodes: Vec<&NodeState> = candidates.iter().map(|c| c.node).collect();
    let price: f64 = nodes.iter().map(|n| n.price).sum();
    match simulate(input, &nodes) {
        Simulation::Invalid(why) => Err(why),
        Simulation::Delete => Ok(Command {
            reason: DisruptionReason::Underutilized,
            method: "",
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
                method: "",
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
fn balanced_approves(
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

/// One disruption pass: the first method, in upstream's order, that finds something to do.
pub fn decide(input: &Input<'_>) -> Decision {
    let pools: BTreeMap<&str, &NodePoolInput> = input
        .node_pools
        .iter()
        .map(|p| (p.node_pool.name(), p))
        .collect();
    let mut decision = Decision::default();
    let mut candidates: Vec<Candidate<'_>> = Vec::new();
    for node in input.nodes.iter().filter(|n| n.node_pool.is_some()) {
        if let Some(why) = node_blocked_reason(node, &pools) {
            decision.block(&node.name, Blocked::NotCandidate, why);
            continue;
        }
        let pool = pools[node.node_pool.as_deref().unwrap_or_default()];
        let pod_blocker = pod_blocked_reason(node, input.pdbs, input.now);
        let eventual = node.drifted
            && pool
                .node_pool
                .spec
                .template
                .spec
                .termination_grace_period
                .is_some();
        match pod_blocker {
            Some(why) if !eventual => decision.block(&node.name, Blocked::NotCandidate, why),
            pod_blocker => candidates.push(Candidate {
                node,
                pool,
                reschedule_cost: reschedule_cost(node),
                pod_blocker,
            }),
        }
    }
    // Most savings per unit of disruption first.
    candidates.sort_by(|a, b| {
        (b.node.price / b.reschedule_cost)
            .total_cmp(&(a.node.price / a.reschedule_cost))
            .then_with(|| a.node.name.cmp(&b.node.name))
    });
    let no_consolidation = |c: &Candidate<'_>| {
        c.pool
            .node_pool
            .spec
            .disruption
            .consolidate_after
            .0
            .is_none()
    };

    // 1. Emptiness: every empty, consolidatable node within budget, in one command.
    let empty: Vec<&Candidate<'_>> = candidates
        .iter()
        .filter(|c| {
            c.pod_blocker.is_none()
                && !no_consolidation(c)
                && is_empty(c.node)
                && c.consolidatable(input.now)
        })
        .collect();
    let chosen = within_budget(input, DisruptionReason::Empty, &empty, &mut decision);
    if !chosen.is_empty() {
        let savings = chosen.iter().map(|c| c.node.price).sum();
        decision.commands.push(Command {
            reason: DisruptionReason::Empty,
            method: "emptiness",
            candidates: chosen.iter().map(|c| c.node.name.clone()).collect(),
            replacements: Vec::new(),
            savings_per_hour: savings,
        });
        return finish(decision, &candidates);
    }

    // 2. Drift: the oldest drifted node whose pods fit, replaced with as many nodes as needed.
    let mut budget = budget_mapping(input, DisruptionReason::Drifted);
    let mut drifted: Vec<&Candidate<'_>> = candidates.iter().filter(|c| c.node.drifted).collect();
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
        let nodes = [c.node];
        let removed: Vec<Pod> = reschedulable(c.node).cloned().collect();
        let existing = remaining_nodes(input, &nodes);
        let results = Scheduler::new(
            input.node_pools,
            &existing,
            input.daemonset_pods,
            input.options.clone(),
        )
        .solve(&removed, &|| false);
        if !results.pod_errors.is_empty() {
            decision.block(
                &c.node.name,
                Blocked::Unconsolidatable,
                "drifted, but its pods would not all schedule elsewhere".into(),
            );
            continue;
        }
        if let Some(left) = budget.get_mut(c.pool_name()) {
            *left -= 1;
        }
        decision.commands.push(Command {
            reason: DisruptionReason::Drifted,
            method: "drift",
            candidates: nodes.iter().map(|n| n.name.clone()).collect(),
            replacements: results.new_node_claims,
            savings_per_hour: 0.0,
        });
        return finish(decision, &candidates);
    }

    // Consolidation is graceful: candidates admitted for drift alone stop here.
    for c in &candidates {
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
                Some("consolidateAfter is Never")
            } else if spec.consolidation_policy == ConsolidationPolicy::WhenEmpty {
                Some("consolidationPolicy is WhenEmpty and the node has pods")
            } else if is_empty(c.node) {
                Some("empty, waiting for consolidateAfter")
            } else if !c.consolidatable(input.now) {
                Some("pods changed within consolidateAfter")
            } else {
                None
            };
            if let Some(why) = why {
                decision
                    .blocked
                    .entry(c.node.name.clone())
                    .or_insert_with(|| why.to_string());
            }
            why.is_none()
        })
        .collect();
    let within_budget = within_budget(
        input,
        DisruptionReason::Underutilized,
        &consolidatable,
        &mut decision,
    );

    // 3. Multi-node consolidation: the longest prefix (binary search, up to 100 nodes) that can
    //    go with at most one cheaper replacement.
    if within_budget.len() >= 2 {
        let (mut low, mut high) = (1usize, (within_budget.len() - 1).min(100));
        let mut best: Option<Command> = None;
        while low <= high {
            let mid = (low + high) / 2;
            let prefix = &within_budget[..=mid];
            let valid = consolidate(input, prefix).ok().filter(|cmd| {
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
        if let Some(mut cmd) = best {
            cmd.method = "multi-node consolidation";
            decision.commands.push(cmd);
            return finish(decision, &candidates);
        }
    }

    // 4. Single-node consolidation: the first node that can go alone, taking the NodePools in
    //    turn so one large pool cannot starve the others.
    for c in &round_robin_by_pool(&within_budget) {
        match consolidate(input, std::slice::from_ref(c)) {
            Ok(mut cmd) if balanced_approves(input, c.pool, &cmd, std::slice::from_ref(c)) => {
                cmd.method = "single-node consolidation";
                decision.commands.push(cmd);
                return finish(decision, &candidates);
            }
            Ok(_) => decision.block(
                &c.node.name,
                Blocked::Unconsolidatable,
                "the Balanced policy judges the savings not worth the disruption".into(),
            ),
            Err(why) => decision.block(&c.node.name, Blocked::Unconsolidatable, why),
        }
    }
    finish(decision, &candidates)
}

/// Why a consolidation candidate cannot be priced, in upstream's words: its instance type is
/// unknown to its NodePool, or a label an offering is chosen by is missing.
fn unpriceable(c: &Candidate<'_>) -> Option<String> {
    let labels = &c.node.labels;
    let instance_type = labels.get(INSTANCE_TYPE_LABEL).map_or("", String::as_str);
    if !c
        .pool
        .instance_types
        .iter()
        .any(|it| it.name == instance_type)
    {
        return Some(format!("Instance Type {instance_type:?} not found"));
    }
    [CAPACITY_TYPE_LABEL, ZONE_LABEL]
        .into_iter()
        .find(|l| !labels.contains_key(*l))
        .map(|l| format!("Node does not have label {l:?}"))
}

/// `candidates` interleaved across NodePools (first of each pool, then second of each, …),
/// keeping each pool's order and the pools in order of first appearance.
fn round_robin_by_pool<'c, 'a>(candidates: &[&'c Candidate<'a>]) -> Vec<&'c Candidate<'a>> {
    let mut pools: Vec<(&str, std::collections::VecDeque<&'c Candidate<'a>>)> = Vec::new();
    for c in candidates {
        match pools.iter_mut().find(|(name, _)| *name == c.pool_name()) {
            Some((_, queue)) => queue.push_back(c),
            None => pools.push((c.pool_name(), [*c].into())),
        }
    }
    let mut out = Vec::with_capacity(candidates.len());
    while out.len() < candidates.len() {
        for (_, queue) in &mut pools {
            if let Some(c) = queue.pop_front() {
                out.push(c);
            }
        }
    }
    out
}

/// Every candidate neither acted on nor blocked waits for a later pass; say so, so that no node
/// goes unexplained.
fn finish(mut decision: Decision, candidates: &[Candidate<'_>]) -> Decision {
    let acting = decision.commands.first().map(|c| c.method);
    for c in candidates {
        let chosen = decision
            .commands
            .iter()
            .any(|cmd| cmd.candidates.contains(&c.node.name));
        if !chosen && !decision.blocked.contains_key(&c.node.name) {
            let (kind, why) = match acting {
                Some(method) => (
                    Blocked::Waiting,
                    format!("waits for a later pass: {method} acts first"),
                ),
                None => (
                    Blocked::Unconsolidatable,
                    "no cheaper way to run its pods was found".into(),
                ),
            };
            decision.block(&c.node.name, kind, why);
        }
    }
    decision
}

/// Nodes past their NodePool's `expireAfter`: they are replaced regardless of budgets.
pub fn expired<'a>(nodes: &'a [NodeState], pools: &[NodePool], now: i64) -> Vec<&'a NodeState> {
    nodes
        .iter()
        .filter(|n| !n.deleting)
        .filter(|n| {
            let pool = pools
                .iter()
                .find(|p| Some(p.name()) == n.node_pool.as_deref());
            pool.and_then(|p| p.spec.template.spec.expire_after.0)
                .is_some_and(|after| now >= n.created_at + after.as_secs() as i64)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_node_order_takes_node_pools_in_turn() {
        let pool = |name: &str| {
            let mut node_pool = NodePool::default();
            node_pool.metadata.name = Some(name.into());
            NodePoolInput {
                node_pool,
                instance_types: Vec::new(),
            }
        };
        let (a, b) = (pool("a"), pool("b"));
        let nodes: Vec<NodeState> = ["a1", "a2", "a3", "b1"]
            .iter()
            .map(|n| NodeState {
                name: n.to_string(),
                ..Default::default()
            })
            .collect();
        let candidates: Vec<Candidate<'_>> = nodes
            .iter()
            .map(|node| Candidate {
                node,
                pool: if node.name.starts_with('a') { &a } else { &b },
                reschedule_cost: 1.0,
                pod_blocker: None,
            })
            .collect();
        let refs: Vec<&Candidate<'_>> = candidates.iter().collect();
        let order: Vec<&str> = round_robin_by_pool(&refs)
            .iter()
            .map(|c| c.node.name.as_str())
            .collect();
        assert_eq!(order, ["a1", "b1", "a2", "a3"]);
    }
}
