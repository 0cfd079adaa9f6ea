//! Candidates: the managed nodes a disruption method may consider, what blocks the others
//! (the node itself, or a pod's `do-not-disrupt` or PodDisruptionBudget), what moving their
//! pods costs, and how many each NodePool's budget lets go now.

use k8s_openapi::jiff::Timestamp;
use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use karpenter_api::DisruptionReason;
use karpenter_api::labels::{
    CAPACITY_TYPE_LABEL, DO_NOT_DISRUPT_ANNOTATION, INSTANCE_TYPE_LABEL, ZONE_LABEL,
};

use super::{Blocked, Decision, Input, NodeState, budgets};
use crate::provisioning::scheduling::NodePoolInput;
use crate::state::pdb;
use crate::state::pods;
use crate::state::pods::eviction_cost;

pub(super) fn is_active(pod: &Pod) -> bool {
    !matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    ) && pod.metadata.deletion_timestamp.is_none()
}

/// Pods that must find another node when this one goes (upstream's `IsReschedulable`: a
/// terminating StatefulSet pod too, as it is recreated and needs a place).
pub(super) fn reschedulable(node: &NodeState) -> impl Iterator<Item = &Pod> {
    node.pods.iter().filter(|p| pods::is_reschedulable(*p))
}

/// The reschedulable pods that can leave now (upstream's `CurrentlyReschedulablePods`): no
/// active `do-not-disrupt`, no fully blocking PodDisruptionBudget. The others stay until a
/// `terminationGracePeriod` forces them out, so nothing is launched for them yet.
pub(super) fn currently_reschedulable<'a>(
    node: &'a NodeState,
    pdbs: &'a [PodDisruptionBudget],
    now: Timestamp,
) -> impl Iterator<Item = &'a Pod> {
    node.pods
        .iter()
        .filter(move |p| pdb::can_leave_now(p, pdbs, now))
}

/// 1 plus the positive eviction costs of the node's reschedulable pods.
pub(super) fn reschedule_cost(node: &NodeState) -> f64 {
    1.0 + reschedulable(node)
        .map(eviction_cost)
        .filter(|c| *c > 0.0)
        .sum::<f64>()
}

/// A node is empty when moving its pods costs nothing (no reschedulable pod with a positive
/// eviction cost).
pub(super) fn is_empty(node: &NodeState) -> bool {
    reschedule_cost(node) <= 1.0
}

/// What stops any voluntary disruption of the node itself, if anything.
fn node_blocked_reason(node: &NodeState, pools: &BTreeMap<&str, &NodePoolInput>) -> Option<String> {
    let Some(pool) = node.node_pool.as_deref() else {
        return Some("node is not managed by a NodePool".into());
    };
    if node.unclaimed {
        return Some("node isn't managed by karpenter (no NodeClaim)".into());
    }
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

/// What stops graceful disruption at the pod level: an active pod with `do-not-disrupt`, or
/// one the Eviction API would refuse. Every pod the drain evicts counts, DaemonSet pods
/// included; the drain leaves mirror pods and pods tolerating the disrupted taint alone
/// (upstream's `CanEvictPods` skips what is not evictable), so their budgets do not count.
fn pod_blocked_reason(
    node: &NodeState,
    pdbs: &[PodDisruptionBudget],
    now: Timestamp,
) -> Option<String> {
    for pod in node.pods.iter().filter(|p| is_active(p)) {
        let name = format!(
            "{}/{}",
            pod.metadata.namespace.as_deref().unwrap_or("default"),
            pod.metadata.name.as_deref().unwrap_or("?")
        );
        if pods::do_not_disrupt(pod, now) {
            return Some(format!("pod {name} has \"{DO_NOT_DISRUPT_ANNOTATION}\""));
        }
        if !crate::termination::drainable(pod, now) {
            continue;
        }
        if let Some(why) = pdb::blocks_eviction(pod, pdbs) {
            return Some(match why.strip_prefix("selected by") {
                Some(rest) => format!("pod {name} is selected by{rest}"),
                None => why,
            });
        }
    }
    None
}

/// A node that may be disrupted.
#[derive(Clone, Debug)]
pub(super) struct Candidate<'a> {
    pub(super) node: &'a NodeState,
    pub(super) pool: &'a NodePoolInput,
    pub(super) reschedule_cost: f64,
    /// A pod-level blocker graceful methods respect. Only a drifted node whose NodePool sets
    /// a `terminationGracePeriod` becomes a candidate with one: drift is upstream's
    /// "eventual" class, and the grace period bounds how long the blocker can hold the drain.
    pub(super) pod_blocker: Option<String>,
}

impl Candidate<'_> {
    pub(super) fn pool_name(&self) -> &str {
        self.pool.node_pool.name()
    }

    /// Its NodePool is static (`spec.replicas`): only static drift takes it.
    pub(super) fn is_static(&self) -> bool {
        crate::provisioning::static_capacity::is_static(&self.pool.node_pool)
    }

    pub(super) fn consolidatable(&self, now: Timestamp) -> bool {
        self.pool
            .node_pool
            .spec
            .disruption
            .consolidate_after
            .0
            .is_some_and(|after| {
                now.as_second() - self.node.last_pod_event.as_second() >= after.as_secs() as i64
            })
    }
}

/// Every managed node that may be disrupted, most savings per unit of disruption first; the
/// others are blocked in `decision` with the reason.
pub(super) fn candidates<'a>(input: &Input<'a>, decision: &mut Decision) -> Vec<Candidate<'a>> {
    let pools: BTreeMap<&str, &NodePoolInput> = input
        .node_pools
        .iter()
        .map(|p| (p.node_pool.name(), p))
        .collect();
    let mut candidates: Vec<Candidate<'a>> = Vec::new();
    for node in input.nodes.iter().filter(|n| n.node_pool.is_some()) {
        if let Some(why) = node_blocked_reason(node, &pools) {
            // Upstream publishes nothing about a node without a NodeClaim (not its to disrupt).
            let kind = if node.unclaimed {
                Blocked::Unmanaged
            } else {
                Blocked::NotCandidate
            };
            decision.block(&node.name, kind, why);
            continue;
        }
        let pool = pools[node.node_pool.as_deref().unwrap_or_default()];
        let pod_blocker = pod_blocked_reason(node, input.pdbs, input.now);
        let eventual = node.drifted && node.termination_grace_period.is_some();
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
    candidates.sort_by(|a, b| {
        (b.node.price / b.reschedule_cost)
            .total_cmp(&(a.node.price / a.reschedule_cost))
            .then_with(|| a.node.name.cmp(&b.node.name))
    });
    candidates
}

/// Remaining disruptions per NodePool for a reason: the budget less nodes already disrupting.
pub(super) fn budget_mapping(
    input: &Input<'_>,
    reason: DisruptionReason,
) -> HashMap<String, usize> {
    let mut out = HashMap::new();
    for pool in input.node_pools {
        let name = pool.node_pool.name();
        let nodes: Vec<&NodeState> = input
            .nodes
            .iter()
            .filter(|n| n.node_pool.as_deref() == Some(name))
            .collect();
        // As upstream, the pool's size is its initialized nodes whose instance is not being
        // terminated — those marked for deletion included — and of those, the NotReady and
        // the deleting are disruptions in progress. A claim still launching is neither.
        let sized: Vec<&&NodeState> = nodes
            .iter()
            .filter(|n| n.initialized && !n.instance_terminating && !n.unclaimed)
            .collect();
        let counted = sized.len();
        let disrupting = sized.iter().filter(|n| !n.ready || n.deleting).count();
        let allowed = budgets::allowed_disruptions(&pool.node_pool, counted, reason, input.now);
        out.insert(name.to_string(), allowed.saturating_sub(disrupting));
    }
    out
}

/// The leading `candidates` each NodePool's budget for `reason` allows; the rest are blocked
/// with the reason.
pub(super) fn within_budget<'c, 'a>(
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

/// Why a consolidation candidate cannot be priced, in upstream's words: its instance type is
/// unknown to its NodePool, or a label an offering is chosen by is missing.
pub(super) fn unpriceable(c: &Candidate<'_>) -> Option<String> {
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
pub(super) fn round_robin_by_pool<'c, 'a>(
    candidates: &[&'c Candidate<'a>],
) -> Vec<&'c Candidate<'a>> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use karpenter_api::NodePool;

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
                buffer_pods: 0,
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
