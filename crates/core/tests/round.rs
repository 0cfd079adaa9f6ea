//! One round over a snapshot: the parts composed as the controller, the simulator and `plan`
//! compose them — expiration from the NodeClaim, the gates read once, buffer headroom kept.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::jiff::Timestamp;
use karpenter_api::{NodeClaim, NodePool};
use karpenter_core::disruption::Method;
use karpenter_core::feature_gates::FeatureGates;
use karpenter_core::instancetype::{RepairPolicy, fake};
use karpenter_core::provisioning::scheduling::{NodePoolInput, SchedulerOptions};
use karpenter_core::provisioning::static_capacity::Action;
use karpenter_core::round::{
    BufferHolding, Disruption, Parts, RoundInputs, RoundPlan, decide, expired_at,
};
use karpenter_core::state::{Observed, Snapshot};
use serde_json::{Value, json};

const NOW: &str = "2025-01-01T12:00:00Z";

fn now() -> Timestamp {
    NOW.parse().unwrap()
}

fn ago(minutes: i64) -> String {
    (now() - k8s_openapi::jiff::SignedDuration::from_mins(minutes)).to_string()
}

fn merge(into: &mut Value, from: Value) {
    match (into, from) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                merge(a.entry(k).or_insert(Value::Null), v);
            }
        }
        (slot, v) => *slot = v,
    }
}

fn pool(name: &str, extra: Value) -> NodePool {
    let mut v = json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name},
        "spec": {
            "disruption": {"consolidateAfter": "0s", "budgets": [{"nodes": "100%"}]},
            "template": {"spec": {
                "nodeClassRef": {"group": "karpenter.test.sh", "kind": "TestNodeClass", "name": "default"},
                "expireAfter": "Never",
                "requirements": [{"key": "node.kubernetes.io/instance-type", "operator": "In",
                    "values": ["default-instance-type"]}]}}}
    });
    merge(&mut v, extra);
    serde_json::from_value(v).unwrap()
}

/// A registered, initialized node of NodePool `default` with its NodeClaim, created
/// `age` minutes ago with `expire_after`.
fn managed(name: &str, age: i64, expire_after: &str) -> (Node, NodeClaim) {
    let labels = json!({"karpenter.sh/nodepool": "default", "karpenter.sh/initialized": "true",
        "karpenter.sh/registered": "true",
        "node.kubernetes.io/instance-type": "default-instance-type",
        "topology.kubernetes.io/zone": "test-zone-1", "karpenter.sh/capacity-type": "on-demand",
        "kubernetes.io/hostname": name});
    let node = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels, "creationTimestamp": ago(age)},
        "spec": {"providerID": format!("fake://{name}")},
        "status": {"allocatable": {"cpu": "4", "memory": "4Gi", "pods": "5"},
            "capacity": {"cpu": "4", "memory": "4Gi", "pods": "5"},
            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": ago(age)}]},
    }))
    .unwrap();
    let claim = serde_json::from_value(json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": name, "labels": labels, "creationTimestamp": ago(age)},
        "spec": {"nodeClassRef": {"group": "karpenter.test.sh", "kind": "TestNodeClass", "name": "default"},
            "requirements": [], "expireAfter": expire_after},
        "status": {"providerID": format!("fake://{name}"), "nodeName": name,
            "allocatable": {"cpu": "4", "memory": "4Gi", "pods": "5"},
            "capacity": {"cpu": "4", "memory": "4Gi", "pods": "5"},
            "lastPodEventTime": ago(age),
            "conditions": [
                {"type": "Launched", "status": "True", "reason": "Launched", "message": "", "lastTransitionTime": ago(age)},
                {"type": "Registered", "status": "True", "reason": "Registered", "message": "", "lastTransitionTime": ago(age)},
                {"type": "Initialized", "status": "True", "reason": "Initialized", "message": "", "lastTransitionTime": ago(age)}]},
    }))
    .unwrap();
    (node, claim)
}

struct Cluster {
    nodes: Vec<Node>,
    claims: Vec<NodeClaim>,
    pods: Vec<Pod>,
    pdbs: Vec<PodDisruptionBudget>,
    pools: Vec<NodePoolInput>,
}

impl Cluster {
    fn new(pools: Vec<NodePool>, managed: Vec<(Node, NodeClaim)>) -> Self {
        let types: Vec<_> = fake::default_instance_types()
            .into_iter()
            .map(Arc::new)
            .collect();
        let (nodes, claims) = managed.into_iter().unzip();
        Self {
            nodes,
            claims,
            pods: Vec::new(),
            pdbs: Vec::new(),
            pools: pools
                .into_iter()
                .map(|node_pool| NodePoolInput {
                    node_pool,
                    instance_types: types.clone(),
                })
                .collect(),
        }
    }

    fn snapshot(&self) -> Snapshot<'_, Pod> {
        Snapshot::new(Observed {
            nodes: self.nodes.iter().collect(),
            node_claims: self.claims.iter().collect(),
            pods: self.pods.iter().collect(),
            daemonsets: Vec::new(),
            pdbs: self.pdbs.iter().collect(),
            namespaces: Vec::new(),
            volume_claims: Vec::new(),
            volumes: Vec::new(),
            storage_classes: Vec::new(),
            csi_nodes: Vec::new(),
            services: Vec::new(),
            pod_controllers: Vec::new(),
            node_pools: &self.pools,
            provider_labels: &[],
            nominated: BTreeSet::new(),
            devices: Default::default(),
            marked_for_deletion: BTreeSet::new(),
        })
    }

    fn round<T>(
        &self,
        gates: FeatureGates,
        parts: Parts<'_>,
        virtual_pods: &[Pod],
        holding: BufferHolding<'_>,
        policies: &[RepairPolicy],
        f: impl FnOnce(RoundPlan<'_, Pod>) -> T,
    ) -> T {
        let snapshot = self.snapshot();
        let options = SchedulerOptions::default();
        let never = || false;
        f(decide(
            &snapshot,
            &RoundInputs {
                gates,
                now: now(),
                options: &options,
                virtual_pods,
                buffer_holding: holding,
                repair_policies: policies,
                parts,
                interrupt: &never,
            },
        ))
    }

    fn all(&self, gates: FeatureGates, f: impl FnOnce(RoundPlan<'_, Pod>) -> Summary) -> Summary {
        self.round(gates, Parts::ALL, &[], BufferHolding::Unknown, &[], f)
    }
}

#[derive(Debug, Default, PartialEq)]
struct Summary {
    expired: Vec<String>,
    commands: Vec<(Method, Vec<String>)>,
}

fn summary(plan: RoundPlan<'_, Pod>) -> Summary {
    let commands = match plan.disruption {
        Some(Disruption::Decided { decision, .. }) => decision
            .commands
            .into_iter()
            .map(|c| (c.method, c.candidates))
            .collect(),
        _ => Vec::new(),
    };
    Summary {
        expired: plan.expired.iter().map(|e| e.node.to_string()).collect(),
        commands,
    }
}

/// Upstream's expiration suite: a NodeClaim expires `expireAfter` after its creation, as its
/// own spec says — not as its NodePool says now (a NodePool changed after the launch changes
/// only the NodeClaims launched after it).
#[test]
fn expiration_reads_the_nodeclaim() {
    // (claim's expireAfter, age in minutes, NodePool's expireAfter, expired?)
    let cases = [
        ("1h", 120, "Never", true),
        ("1h", 59, "Never", false),
        ("1h", 60, "Never", true),
        ("Never", 600, "1h", false),
        ("720h", 120, "1h", false),
    ];
    for (claim_after, age, pool_after, want) in cases {
        let pool = pool(
            "default",
            json!({"spec": {"template": {"spec": {"expireAfter": pool_after}}}}),
        );
        let (node, claim) = managed("n", age, claim_after);
        assert_eq!(
            expired_at(&claim, now()).is_some(),
            want,
            "{claim_after} {age}m"
        );
        let cluster = Cluster::new(vec![pool], vec![(node, claim)]);
        let got = cluster.all(FeatureGates::default(), summary);
        let expected: Vec<String> = if want { vec!["n".into()] } else { vec![] };
        assert_eq!(got.expired, expected, "{claim_after} {age}m {pool_after}");
    }
}

/// A NodeClaim being deleted already is not expired again.
#[test]
fn a_deleting_nodeclaim_does_not_expire() {
    let (node, mut claim) = managed("n", 120, "1h");
    claim.metadata.deletion_timestamp =
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now()));
    claim.metadata.finalizers = Some(vec!["karpenter.sh/termination".into()]);
    let cluster = Cluster::new(vec![pool("default", json!({}))], vec![(node, claim)]);
    assert!(
        cluster
            .all(FeatureGates::default(), summary)
            .expired
            .is_empty()
    );
}

/// An expired node is deleted by expiration this round: disruption does not also take it
/// (an empty expired node is not emptiness's), and the other empty node still goes.
#[test]
fn disruption_leaves_the_nodes_expiration_takes() {
    let cluster = Cluster::new(
        vec![pool("default", json!({}))],
        vec![managed("old", 120, "1h"), managed("young", 120, "Never")],
    );
    let got = cluster.all(FeatureGates::default(), summary);
    assert_eq!(got.expired, ["old"]);
    assert_eq!(
        got.commands,
        [(Method::Emptiness, vec!["young".to_string()])]
    );
}

/// Parts not asked for are not decided; the gated parts only with their gate on.
#[test]
fn parts_and_gates() {
    let statics = pool("static", json!({"spec": {"replicas": 2}}));
    let (mut sick, sick_claim) = managed("sick", 120, "Never");
    sick.status.as_mut().unwrap().conditions = Some(vec![
        serde_json::from_value(
            json!({"type": "Ready", "status": "False", "lastTransitionTime": ago(60)}),
        )
        .unwrap(),
    ]);
    let cluster = Cluster::new(
        vec![pool("default", json!({})), statics],
        vec![(sick, sick_claim)],
    );
    let policies = [RepairPolicy::new(
        "Ready",
        "False",
        std::time::Duration::from_secs(600),
    )];
    let gated = |gates: FeatureGates, parts: Parts<'_>| {
        cluster.round(
            gates,
            parts,
            &[],
            BufferHolding::Unknown,
            &policies,
            |plan| {
                (
                    plan.provisioning.is_some(),
                    plan.disruption.is_some(),
                    plan.static_capacity
                        .iter()
                        .map(|s| {
                            (
                                s.node_pool.clone(),
                                s.action.clone(),
                                s.node_claim.is_some(),
                            )
                        })
                        .collect::<Vec<_>>(),
                    plan.repairs
                        .iter()
                        .filter(|j| {
                            matches!(
                                j.repair,
                                karpenter_core::disruption::repair::Repair::Repair { .. }
                            )
                        })
                        .count(),
                )
            },
        )
    };
    let off = FeatureGates::default();
    let on = FeatureGates {
        static_capacity: true,
        node_repair: true,
        ..off
    };
    assert_eq!(gated(off, Parts::ALL), (true, true, vec![], 0));
    assert_eq!(
        gated(on, Parts::ALL),
        (
            true,
            true,
            vec![("static".to_string(), Action::Create(2), true)],
            1
        )
    );
    assert_eq!(gated(on, Parts::NONE), (false, false, vec![], 0));
}

/// CapacityBuffer headroom keeps an empty node from emptiness: as the round's own provisioning
/// places the virtual pods, as the last round placed them, and — before any round has said —
/// on every node (after a restart nothing may go that a buffer keeps).
#[test]
fn buffer_headroom_keeps_nodes() {
    let cluster = Cluster::new(
        vec![pool("default", json!({}))],
        vec![managed("a", 120, "Never"), managed("b", 120, "Never")],
    );
    let virtual_pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "buffer-0", "namespace": "default", "uid": "buffer-0",
            "annotations": {"karpenter.sh/capacity-buffer-fake-pod": "true",
                "karpenter.sh/capacity-buffer-name": "buffer",
                "karpenter.sh/capacity-buffer-namespace": "default"}},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
        "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]},
    }))
    .unwrap();
    let gates = FeatureGates {
        capacity_buffer: true,
        ..FeatureGates::default()
    };
    let disruption_only = Parts {
        disruption: karpenter_core::round::Disrupt::Decide,
        ..Parts::NONE
    };
    let emptied = |virtual_pods: &[Pod], holding: BufferHolding<'_>, parts: Parts<'_>| {
        cluster.round(gates, parts, virtual_pods, holding, &[], |plan| {
            let mut gone: Vec<String> = summary(plan)
                .commands
                .into_iter()
                .filter(|(m, _)| *m == Method::Emptiness)
                .flat_map(|(_, nodes)| nodes)
                .collect();
            gone.sort();
            gone
        })
    };
    let pods = std::slice::from_ref(&virtual_pod);
    let none = BTreeMap::new();
    let on_a = BTreeMap::from([("a".to_string(), 1)]);
    // No buffer at all: both go, whatever is known.
    assert_eq!(
        emptied(&[], BufferHolding::Unknown, disruption_only),
        ["a", "b"]
    );
    // Not known yet: neither goes.
    assert!(emptied(pods, BufferHolding::Unknown, disruption_only).is_empty());
    // As the last round placed them.
    assert_eq!(
        emptied(pods, BufferHolding::Placed(&on_a), disruption_only),
        ["b"]
    );
    assert_eq!(
        emptied(pods, BufferHolding::Placed(&none), disruption_only),
        ["a", "b"]
    );
    // The round's own provisioning places the pod on one of them; the other goes.
    assert_eq!(emptied(pods, BufferHolding::Unknown, Parts::ALL).len(), 1);
    // With the gate off the virtual pods are not the round's.
    let off = cluster.round(
        FeatureGates::default(),
        Parts::ALL,
        pods,
        BufferHolding::Unknown,
        &[],
        |plan| plan.provisioning.map(|p| p.batch.len()),
    );
    assert_eq!(off, Some(0));
}

/// A running pod of `app` on `node` (1 CPU), with `extra` merged in.
fn bound(name: &str, node: &str, extra: Value) -> Pod {
    let mut v = json!({
        "metadata": {"name": name, "namespace": "default", "uid": name, "labels": {"app": "web"},
            "creationTimestamp": ago(100)},
        "spec": {"nodeName": node, "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
        "status": {"phase": "Running", "startTime": ago(100)},
    });
    merge(&mut v, extra);
    serde_json::from_value(v).unwrap()
}

/// A PodDisruptionBudget over `app: web` allowing `allowed` disruptions now (`minAvailable: 1`).
fn budget(allowed: i32) -> PodDisruptionBudget {
    budget_of(json!({"minAvailable": 1}), allowed)
}

/// A budget that allows no voluntary disruption at all (`maxUnavailable: 0`).
fn fully_blocking() -> PodDisruptionBudget {
    budget_of(json!({"maxUnavailable": 0}), 0)
}

fn budget_of(rule: Value, allowed: i32) -> PodDisruptionBudget {
    let mut spec = json!({"selector": {"matchLabels": {"app": "web"}}});
    merge(&mut spec, rule);
    serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "default"},
        "spec": spec,
        "status": {"disruptionsAllowed": allowed, "currentHealthy": 1, "desiredHealthy": 1,
            "expectedPods": 1, "observedGeneration": 1},
    }))
    .unwrap()
}

fn blocked_reason(plan: RoundPlan<'_, Pod>, node: &str) -> Option<String> {
    match plan.disruption {
        Some(Disruption::Decided { decision, .. }) => {
            decision.blocked.get(node).map(|b| b.reason.clone())
        }
        _ => None,
    }
}

/// Upstream's `IsReschedulable`: a terminating StatefulSet pod is recreated and needs a place,
/// so a node whose only pod is one is not empty.
#[test]
fn a_terminating_statefulset_pod_keeps_its_node_from_emptiness() {
    let sts = json!({"metadata": {"deletionTimestamp": ago(0),
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "db", "uid": "db"}]}});
    let other = json!({"metadata": {"deletionTimestamp": ago(0),
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "web"}]}});
    for (owner, emptied) in [(sts, false), (other, true)] {
        let mut cluster = Cluster::new(
            vec![pool("default", json!({}))],
            vec![managed("n", 120, "Never")],
        );
        cluster.pods = vec![bound("p", "n", owner)];
        let got = cluster.all(FeatureGates::default(), summary);
        assert_eq!(
            got.commands.iter().any(|(m, _)| *m == Method::Emptiness),
            emptied,
            "{got:?}"
        );
    }
}

/// Every pod but a mirror pod is evicted when a node goes, DaemonSet pods included: a budget
/// that allows no disruption of a DaemonSet pod keeps its node, as upstream.
#[test]
fn a_fully_blocking_budget_on_a_daemonset_pod_keeps_the_node() {
    let owner = |kind: &str| {
        json!({"metadata": {"ownerReferences": [{"apiVersion": if kind == "Node" { "v1" } else { "apps/v1" },
            "kind": kind, "name": "x", "uid": "x"}]}})
    };
    let tolerant = json!({"spec": {"tolerations": [{"operator": "Exists"}]}});
    for (kind, tolerates, kept) in [
        ("DaemonSet", false, true),
        ("Node", false, false),
        // The drain never evicts a pod that tolerates the disrupted taint.
        ("DaemonSet", true, false),
    ] {
        let mut cluster = Cluster::new(
            vec![pool("default", json!({}))],
            vec![managed("n", 120, "Never")],
        );
        let mut extra = owner(kind);
        if tolerates {
            merge(&mut extra, tolerant.clone());
        }
        cluster.pods = vec![bound("agent", "n", extra)];
        cluster.pdbs = vec![budget(0)];
        let reason = cluster.round(
            FeatureGates::default(),
            Parts::ALL,
            &[],
            BufferHolding::Unknown,
            &[],
            |plan| blocked_reason(plan, "n"),
        );
        assert_eq!(
            reason.as_deref()
                == Some("pdb prevents pod evictions (PodDisruptionBudget=[default/web])"),
            kept,
            "{kind}: {reason:?}"
        );
    }
}

/// Upstream's `CurrentlyReschedulablePods`: of a deleting node's pods, provisioning places only
/// those that can leave now — not one a fully blocking budget or an active `do-not-disrupt`
/// holds. A budget at zero only for now (mid-drain) holds nothing: the pod leaves once it lets.
#[test]
fn provisioning_places_only_the_pods_that_can_leave_a_deleting_node() {
    // (pod, budget, placed?)
    let cases = [
        (json!({}), None, true),
        (json!({}), Some(budget(1)), true),
        (json!({}), Some(budget(0)), true),
        (json!({}), Some(fully_blocking()), false),
        (
            json!({"metadata": {"annotations": {"karpenter.sh/do-not-disrupt": "true"}}}),
            None,
            false,
        ),
        (
            json!({"metadata": {"annotations": {"karpenter.sh/do-not-disrupt": "3h"}}}),
            None,
            false,
        ),
        (
            json!({"metadata": {"annotations": {"karpenter.sh/do-not-disrupt": "1m"}}}),
            None,
            true,
        ),
    ];
    for (extra, allowed, placed) in cases {
        let (node, mut claim) = managed("going", 120, "Never");
        claim.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now()));
        claim.metadata.finalizers = Some(vec!["karpenter.sh/termination".into()]);
        let mut cluster = Cluster::new(vec![pool("default", json!({}))], vec![(node, claim)]);
        cluster.pods = vec![bound("p", "going", extra.clone())];
        cluster.pdbs = allowed.clone().into_iter().collect();
        let batch = cluster.round(
            FeatureGates::default(),
            Parts {
                provisioning: true,
                ..Parts::NONE
            },
            &[],
            BufferHolding::Unknown,
            &[],
            |plan| plan.provisioning.map(|p| p.batch.len()),
        );
        let rule = allowed.and_then(|b| b.spec);
        assert_eq!(batch, Some(usize::from(placed)), "{extra} {rule:?}");
    }
}

/// A drifted node whose pod a fully blocking budget holds, with a `terminationGracePeriod`
/// (upstream's eventual disruption): it is replaced without capacity for the held pod, which
/// stays until the grace period forces it out.
#[test]
fn drift_launches_nothing_for_a_pod_that_cannot_leave() {
    let (node, mut claim) = managed("old", 120, "Never");
    claim.status.as_mut().unwrap().conditions.push(
        serde_json::from_value(
            json!({"type": "Drifted", "status": "True", "reason": "NodePoolDrifted",
            "message": "", "lastTransitionTime": ago(10)}),
        )
        .unwrap(),
    );
    // The grace period the drain is bounded by is the NodeClaim's own, as upstream reads it.
    claim.spec.termination_grace_period = serde_json::from_value(json!("1h")).unwrap();
    let pool = pool("default", json!({}));
    for (blocking, replacements) in [(fully_blocking(), 0), (budget(1), 1)] {
        let mut cluster = Cluster::new(vec![pool.clone()], vec![(node.clone(), claim.clone())]);
        cluster.pods = vec![bound("p", "old", json!({}))];
        let rule = blocking.spec.clone();
        cluster.pdbs = vec![blocking];
        let drift = cluster.round(
            FeatureGates::default(),
            Parts::ALL,
            &[],
            BufferHolding::Unknown,
            &[],
            |plan| match plan.disruption {
                Some(Disruption::Decided { decision, .. }) => decision
                    .commands
                    .into_iter()
                    .find(|c| c.method == Method::Drift)
                    .map(|c| c.replacements.len()),
                _ => None,
            },
        );
        assert_eq!(drift, Some(replacements), "{rule:?}");
    }
}

/// An empty node still inside `consolidateAfter` under `WhenEmpty` waits for it, and says so.
#[test]
fn an_empty_node_within_consolidate_after_says_it_waits() {
    let cluster = Cluster::new(
        vec![pool(
            "default",
            json!({"spec": {"disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "1h"}}}),
        )],
        vec![managed("n", 30, "Never")],
    );
    let reason = cluster.round(
        FeatureGates::default(),
        Parts::ALL,
        &[],
        BufferHolding::Unknown,
        &[],
        |plan| blocked_reason(plan, "n"),
    );
    assert_eq!(
        reason.as_deref(),
        Some("empty, waiting for consolidateAfter")
    );
}

/// What expiration deletes in a round counts as deleting for static capacity in the same
/// round: a static NodePool of one replica with an expired NodeClaim and a fresh one keeps the
/// fresh one (without it, the scale-down would take one of the two).
#[test]
fn static_capacity_counts_what_expiration_deletes() {
    let cluster = Cluster::new(
        vec![pool("default", json!({"spec": {"replicas": 1}}))],
        vec![managed("old", 120, "1h"), managed("young", 30, "1h")],
    );
    let gates = FeatureGates {
        static_capacity: true,
        ..FeatureGates::default()
    };
    let (expired, actions) = cluster.round(
        gates,
        Parts::ALL,
        &[],
        BufferHolding::Unknown,
        &[],
        |plan| {
            (
                plan.expired
                    .iter()
                    .map(|e| e.node.to_string())
                    .collect::<Vec<_>>(),
                plan.static_capacity
                    .iter()
                    .map(|s| s.action.clone())
                    .collect::<Vec<_>>(),
            )
        },
    );
    assert_eq!(expired, ["old"]);
    assert_eq!(actions, [Action::None]);
}
