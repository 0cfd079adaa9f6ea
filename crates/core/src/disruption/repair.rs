//! Node repair (upstream's node health controller, feature gate `NodeRepair`): a node whose
//! condition matches one of the provider's [`RepairPolicy`]s for longer than the policy's
//! toleration is replaced — its NodeClaim deleted with a termination deadline of now, so it
//! drains past PodDisruptionBudgets, `karpenter.sh/do-not-disrupt` and disruption budgets —
//! unless more than 20% of the nodes around it are unhealthy too (the circuit breaker: a
//! fleet-wide problem is not fixed by replacing the fleet).
//!
//! Pure: the caller passes the node, the nodes the breaker counts and the time, and carries
//! out the answer.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, NodeCondition};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use karpenter_api::NodeClaim;
use karpenter_api::labels::NODE_POOL_LABEL;

use crate::instancetype::RepairPolicy;

/// The share of a NodePool's (or, for a NodeClaim without one, the cluster's) nodes that may
/// be unhealthy before repair stops (upstream's `allowedUnhealthyPercent`).
pub const ALLOWED_UNHEALTHY_PERCENT: usize = 20;

/// How long upstream waits before looking again at a node whose repair the breaker blocked.
pub const BLOCKED_RECHECK: Duration = Duration::from_secs(5 * 60);

/// Upstream's `NodeRepairBlocked` message for a NodePool over the threshold.
pub const NODE_POOL_BLOCKED_MESSAGE: &str = "more than 20% nodes are unhealthy in the nodepool";

/// Upstream's `NodeRepairBlocked` message for the cluster over the threshold (a NodeClaim
/// without a NodePool), word for word, "then" included, for alerts matching on it.
pub const CLUSTER_BLOCKED_MESSAGE: &str = "more then 20% nodes are unhealthy in the cluster";

/// A node condition one of the policies names, at the policy's status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Unhealthy<'p> {
    /// The policy the condition matches.
    pub policy: &'p RepairPolicy,
    /// When the node may be repaired: the condition's transition plus the toleration.
    pub repair_at: Timestamp,
}

/// Whose nodes the circuit breaker counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope<'a> {
    /// The nodes labelled with this NodePool.
    NodePool(&'a str),
    /// Every node of the cluster (a NodeClaim without a NodePool).
    Cluster,
}

impl Scope<'_> {
    /// Upstream's `NodeRepairBlocked` message for this scope.
    pub fn blocked_message(&self) -> &'static str {
        match self {
            Scope::NodePool(_) => NODE_POOL_BLOCKED_MESSAGE,
            Scope::Cluster => CLUSTER_BLOCKED_MESSAGE,
        }
    }
}

/// What to do with one node now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Repair<'p, 'a> {
    /// No policy's condition holds.
    Healthy,
    /// Unhealthy, within its toleration: look again at `until`.
    Tolerated {
        /// When the toleration ends.
        until: Timestamp,
    },
    /// Due for repair, but too many of the nodes in `scope` are unhealthy.
    Blocked {
        /// Whose nodes are over the threshold.
        scope: Scope<'a>,
    },
    /// Replace it: delete its NodeClaim forcefully.
    Repair {
        /// The policy whose condition it failed.
        policy: &'p RepairPolicy,
    },
}

fn condition<'n>(node: &'n Node, type_: &str) -> Option<&'n NodeCondition> {
    node.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
}

/// The policy `node` fails whose toleration ends first, if any. A condition without a
/// transition time counts as failing since forever (as upstream's zero time does).
pub fn unhealthy<'p>(node: &Node, policies: &'p [RepairPolicy]) -> Option<Unhealthy<'p>> {
    policies
        .iter()
        .filter_map(|policy| {
            let c = condition(node, policy.condition_type)
                .filter(|c| c.status == policy.condition_status)?;
            let since = c
                .last_transition_time
                .as_ref()
                .map_or(Timestamp::UNIX_EPOCH, |t| t.0);
            let toleration =
                SignedDuration::try_from(policy.toleration).unwrap_or(SignedDuration::MAX);
            let repair_at = since.checked_add(toleration).unwrap_or(Timestamp::MAX);
            Some(Unhealthy { policy, repair_at })
        })
        // The first of equal deadlines wins, as upstream's strict comparison keeps it.
        .min_by_key(|u| u.repair_at)
}

/// How many of `nodes` may be unhealthy: 20%, rounded up (as a PodDisruptionBudget's
/// percentage), so one of three nodes may be.
pub fn allowed_unhealthy(nodes: usize) -> usize {
    (nodes * ALLOWED_UNHEALTHY_PERCENT).div_ceil(100)
}

/// Whether more of `nodes` fail a policy — tolerated or not — than [`allowed_unhealthy`].
pub fn breaker_open<'n>(
    nodes: impl IntoIterator<Item = &'n Node>,
    policies: &[RepairPolicy],
) -> bool {
    let (mut total, mut failing) = (0, 0);
    for node in nodes {
        total += 1;
        if unhealthy(node, policies).is_some() {
            failing += 1;
        }
    }
    failing > allowed_unhealthy(total)
}

/// What to do with `node`, whose NodeClaim belongs to `node_pool` (its
/// `karpenter.sh/nodepool` label; `None` for a standalone NodeClaim), at `now`. `cluster`
/// is every node: the breaker counts those of the node's NodePool (by the Node's label), or
/// all of them for a standalone NodeClaim. Budgets and do-not-disrupt are not consulted:
/// repair is forceful.
pub fn decide<'p, 'a, 'n>(
    node: &Node,
    node_pool: Option<&'a str>,
    cluster: impl IntoIterator<Item = &'n Node>,
    policies: &'p [RepairPolicy],
    now: Timestamp,
) -> Repair<'p, 'a> {
    let Some(unhealthy) = unhealthy(node, policies) else {
        return Repair::Healthy;
    };
    if now < unhealthy.repair_at {
        return Repair::Tolerated {
            until: unhealthy.repair_at,
        };
    }
    let scope = node_pool.map_or(Scope::Cluster, Scope::NodePool);
    let counted = cluster.into_iter().filter(|n| match scope {
        Scope::NodePool(pool) => {
            n.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(NODE_POOL_LABEL))
                .map(String::as_str)
                == Some(pool)
        }
        Scope::Cluster => true,
    });
    if breaker_open(counted, policies) {
        return Repair::Blocked { scope };
    }
    Repair::Repair {
        policy: unhealthy.policy,
    }
}

/// A node with a NodeClaim, and what repair does with it.
#[derive(Clone, Copy, Debug)]
pub struct Judged<'n, 'p> {
    /// The node.
    pub node: &'n Node,
    /// Its NodeClaim (matched by provider id).
    pub claim: &'n NodeClaim,
    /// What to do.
    pub repair: Repair<'p, 'n>,
}

/// [`decide`] for every node of `nodes` that has a NodeClaim among `claims` (matched by
/// provider id; nodes without one are not karpenter's to repair), the breaker counting all of
/// `nodes`: the pass the controller's loop, the simulator and `plan` each make.
pub fn judge_all<'n, 'p>(
    nodes: &[&'n Node],
    claims: &[&'n NodeClaim],
    policies: &'p [RepairPolicy],
    now: Timestamp,
) -> Vec<Judged<'n, 'p>> {
    let by_provider_id: std::collections::HashMap<&str, &NodeClaim> = claims
        .iter()
        .filter_map(|c| Some((c.status.as_ref()?.provider_id.as_deref()?, *c)))
        .collect();
    nodes
        .iter()
        .filter_map(|node| {
            let provider_id = node.spec.as_ref()?.provider_id.as_deref()?;
            let claim = *by_provider_id.get(provider_id)?;
            let pool = claim
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(NODE_POOL_LABEL))
                .map(String::as_str);
            Some(Judged {
                node,
                claim,
                repair: decide(node, pool, nodes.iter().copied(), policies, now),
            })
        })
        .collect()
}

/// The `karpenter.sh/nodeclaim-termination-timestamp` to write on a NodeClaim being repaired
/// at `now`, given the one it has: now (to the second, RFC 3339), so its pods are deleted at
/// once, unless it already has a deadline in the past. `None`: leave it.
pub fn termination_timestamp(existing: Option<&str>, now: Timestamp) -> Option<String> {
    if let Some(at) = existing.and_then(|e| e.parse::<Timestamp>().ok())
        && at < now
    {
        return None;
    }
    let now = Timestamp::from_second(now.as_second())
        .unwrap_or(now)
        .to_string();
    (existing != Some(now.as_str())).then_some(now)
}

/// Upstream's `pretty.ToSnakeCase`, which names the condition in
/// `karpenter_nodeclaims_unhealthy_disrupted_total`: `AcceleratedHardwareReady` →
/// `accelerated_hardware_ready`.
pub fn snake_case(s: &str) -> String {
    let c: Vec<char> = s.chars().collect();
    // Any character before a capitalised word ("xWord" → "x_Word"), matches not overlapping.
    let mut first = Vec::with_capacity(c.len() + 4);
    let mut i = 0;
    while i < c.len() {
        let word = c.get(i + 1).is_some_and(char::is_ascii_uppercase)
            && c.get(i + 2).is_some_and(char::is_ascii_lowercase);
        if word && c[i] != '\n' {
            let mut end = i + 2;
            while c.get(end).is_some_and(char::is_ascii_lowercase) {
                end += 1;
            }
            first.push(c[i]);
            first.push('_');
            first.extend_from_slice(&c[i + 1..end]);
            i = end;
        } else {
            first.push(c[i]);
            i += 1;
        }
    }
    // Then a lower-case letter or digit before a capital ("aB" → "a_B").
    let mut out = String::with_capacity(first.len() + 4);
    let mut i = 0;
    while i < first.len() {
        let lower = first[i].is_ascii_lowercase() || first[i].is_ascii_digit();
        if lower && first.get(i + 1).is_some_and(char::is_ascii_uppercase) {
            out.push(first[i]);
            out.push('_');
            out.push(first[i + 1]);
            i += 2;
        } else {
            out.push(first[i]);
            i += 1;
        }
    }
    out.to_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    const MINUTE: i64 = 60;

    fn t(minutes: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + minutes * MINUTE).unwrap()
    }

    /// Upstream's fake provider's policy: `BadNode` False for 30 minutes.
    fn bad_node() -> Vec<RepairPolicy> {
        vec![RepairPolicy::new(
            "BadNode",
            "False",
            Duration::from_secs(30 * 60),
        )]
    }

    fn node(name: &str, pool: Option<&str>, conditions: &[(&str, &str, i64)]) -> Node {
        let mut n = Node::default();
        n.metadata.name = Some(name.into());
        n.metadata.labels = pool.map(|p| [(NODE_POOL_LABEL.to_string(), p.to_string())].into());
        n.status = Some(k8s_openapi::api::core::v1::NodeStatus {
            conditions: Some(
                conditions
                    .iter()
                    .map(|(type_, status, at)| NodeCondition {
                        type_: type_.to_string(),
                        status: status.to_string(),
                        last_transition_time: Some(Time(t(*at))),
                        ..Default::default()
                    })
                    .collect(),
            ),
            ..Default::default()
        });
        n
    }

    /// Upstream's "Reconciliation" cases: one node in a NodePool, its conditions set at
    /// minute 0, looked at at `now`.
    #[test]
    fn reconciliation_cases_are_upstreams() {
        let two = vec![
            RepairPolicy::new("BadNode", "False", Duration::from_secs(60 * 60)),
            RepairPolicy::new(
                "ValidUnhealthyCondition",
                "False",
                Duration::from_secs(30 * 60),
            ),
        ];
        // (case, policies, the node's conditions, minute looked at, the policy repaired or
        // the minute to look again)
        type Case<'a> = (
            &'a str,
            &'a [RepairPolicy],
            &'a [(&'a str, &'a str)],
            i64,
            Result<&'a str, Option<i64>>,
        );
        let cases: &[Case] = &[
            (
                "unhealthy past the toleration is repaired",
                &bad_node(),
                &[("BadNode", "False")],
                60,
                Ok("BadNode"),
            ),
            (
                "a condition type no policy names is ignored",
                &bad_node(),
                &[("FakeHealthyNode", "False")],
                60,
                Err(None),
            ),
            (
                "a status the policy does not name is ignored",
                &bad_node(),
                &[("BadNode", "True")],
                60,
                Err(None),
            ),
            (
                "within the toleration it waits until it ends",
                &bad_node(),
                &[("BadNode", "False")],
                20,
                Err(Some(30)),
            ),
            (
                "at 27 minutes it looks again in 3",
                &bad_node(),
                &[("BadNode", "False")],
                27,
                Err(Some(30)),
            ),
            (
                "the condition closest to its toleration decides when to look again",
                &two,
                &[("ValidUnhealthyCondition", "False"), ("BadNode", "False")],
                27,
                Err(Some(30)),
            ),
            (
                "the condition closest to its toleration is the one repaired",
                &two,
                &[("ValidUnhealthyCondition", "False"), ("BadNode", "False")],
                45,
                Ok("ValidUnhealthyCondition"),
            ),
            (
                "exactly at the end of the toleration it is repaired",
                &bad_node(),
                &[("BadNode", "False")],
                30,
                Ok("BadNode"),
            ),
        ];
        for (name, policies, conditions, now, want) in cases {
            let conditions: Vec<(&str, &str, i64)> =
                conditions.iter().map(|(ty, st)| (*ty, *st, 0)).collect();
            let n = node("n", Some("default"), &conditions);
            let got = decide(&n, Some("default"), [&n], policies, t(*now));
            let want = match want {
                Ok(condition) => Repair::Repair {
                    policy: policies
                        .iter()
                        .find(|p| p.condition_type == *condition)
                        .unwrap(),
                },
                Err(None) => Repair::Healthy,
                Err(Some(until)) => Repair::Tolerated { until: t(*until) },
            };
            assert_eq!(got, want, "{name}");
        }
    }

    /// Upstream's "Forceful termination" cases: the circuit breaker.
    #[test]
    fn circuit_breaker_cases_are_upstreams() {
        let policies = bad_node();
        // (case, nodes, unhealthy, NodePool of the claims, which nodes to look at, blocked)
        type Case<'a> = (&'a str, usize, usize, Option<&'a str>, &'a [usize], bool);
        let cases: &[Case] = &[
            (
                "3 of 10 in a NodePool: blocked",
                10,
                3,
                Some("default"),
                &[0, 1],
                true,
            ),
            (
                "3 of 10 in the cluster, no NodePool: blocked",
                10,
                3,
                None,
                &[0, 1, 2],
                true,
            ),
            (
                "1 of 3 rounds up to allowed",
                3,
                1,
                Some("default"),
                &[0],
                false,
            ),
            (
                "2 of 10 is the limit, allowed",
                10,
                2,
                Some("default"),
                &[0, 1],
                false,
            ),
            ("2 of 3: blocked", 3, 2, Some("default"), &[0], true),
            (
                "a lone unhealthy node is repaired",
                1,
                1,
                Some("default"),
                &[0],
                false,
            ),
        ];
        for (name, total, bad, pool, look, blocked) in cases {
            let nodes: Vec<Node> = (0..*total)
                .map(|i| {
                    let conditions: &[(&str, &str, i64)] = if i < *bad {
                        &[("BadNode", "False", 0)]
                    } else {
                        &[]
                    };
                    node(&format!("n{i}"), *pool, conditions)
                })
                .collect();
            for i in *look {
                let got = decide(&nodes[*i], *pool, &nodes, &policies, t(60));
                let want = if *blocked {
                    Repair::Blocked {
                        scope: pool.map_or(Scope::Cluster, Scope::NodePool),
                    }
                } else {
                    Repair::Repair {
                        policy: &policies[0],
                    }
                };
                assert_eq!(got, want, "{name}: node {i}");
            }
        }
    }

    #[test]
    fn the_breaker_counts_only_the_nodepools_nodes_and_tolerated_ones_too() {
        let policies = bad_node();
        let mut nodes = vec![node("sick", Some("a"), &[("BadNode", "False", 0)])];
        // Pool "a" has 5 nodes, one of them sick; pool "b" is all sick.
        nodes.extend((0..4).map(|i| node(&format!("a{i}"), Some("a"), &[])));
        nodes.extend((0..5).map(|i| node(&format!("b{i}"), Some("b"), &[("BadNode", "False", 0)])));
        assert_eq!(
            decide(&nodes[0], Some("a"), &nodes, &policies, t(60)),
            Repair::Repair {
                policy: &policies[0]
            }
        );
        // Two more sick nodes of "a", still within their toleration, count against the
        // breaker: 3 of 7 is over ceil(1.4) = 2.
        nodes.push(node("recent", Some("a"), &[("BadNode", "False", 50)]));
        assert_eq!(
            decide(&nodes[0], Some("a"), &nodes, &policies, t(60)),
            Repair::Repair {
                policy: &policies[0]
            },
            "2 of 6 is allowed"
        );
        nodes.push(node("recent2", Some("a"), &[("BadNode", "False", 55)]));
        assert_eq!(
            decide(&nodes[0], Some("a"), &nodes, &policies, t(60)),
            Repair::Blocked {
                scope: Scope::NodePool("a")
            }
        );
        // Cluster-wide, 8 of 12 are sick.
        assert!(breaker_open(&nodes, &policies));
    }

    #[test]
    fn allowed_unhealthy_is_twenty_percent_rounded_up() {
        for (nodes, allowed) in [
            (0, 0),
            (1, 1),
            (3, 1),
            (5, 1),
            (6, 2),
            (10, 2),
            (11, 3),
            (100, 20),
        ] {
            assert_eq!(allowed_unhealthy(nodes), allowed, "{nodes} nodes");
        }
    }

    #[test]
    fn a_condition_without_transition_time_is_past_its_toleration() {
        let mut n = node("n", None, &[("BadNode", "False", 0)]);
        n.status.as_mut().unwrap().conditions.as_mut().unwrap()[0].last_transition_time = None;
        assert!(matches!(
            decide(&n, None, [&n; 10].into_iter().take(1), &bad_node(), t(0)),
            Repair::Repair { .. }
        ));
    }

    /// Upstream's termination grace period cases.
    #[test]
    fn termination_timestamp_cases_are_upstreams() {
        let now = t(60);
        let at = |m: i64| t(m).to_string();
        let cases: &[(&str, Option<String>, Option<String>)] = &[
            (
                "set to now when force termination starts",
                None,
                Some(at(60)),
            ),
            (
                "a later one (the NodePool's terminationGracePeriod) is not respected",
                Some(at(180)),
                Some(at(60)),
            ),
            ("an earlier one stays", Some(at(57)), None),
            ("one equal to now stays", Some(at(60)), None),
            (
                "an unreadable one is replaced",
                Some("soon".into()),
                Some(at(60)),
            ),
        ];
        for (name, existing, want) in cases {
            assert_eq!(
                termination_timestamp(existing.as_deref(), now),
                *want,
                "{name}"
            );
        }
        let fractional = now.checked_add(SignedDuration::from_millis(500)).unwrap();
        assert_eq!(
            termination_timestamp(None, fractional).as_deref(),
            Some("2023-11-14T23:13:20Z"),
            "whole seconds, as Go's RFC 3339"
        );
    }

    #[test]
    fn snake_case_is_upstreams() {
        for (name, want) in [
            ("Ready", "ready"),
            ("BadNode", "bad_node"),
            ("AcceleratedHardwareReady", "accelerated_hardware_ready"),
            ("ContainerRuntimeReady", "container_runtime_ready"),
            ("KernelReady", "kernel_ready"),
            (
                "kubernetes.azure.com/NodeHealthy",
                "kubernetes.azure.com/_node_healthy",
            ),
            ("GPUReady", "gpu_ready"),
            ("Disk2Pressure", "disk2_pressure"),
        ] {
            assert_eq!(snake_case(name), want, "{name}");
        }
    }
}
