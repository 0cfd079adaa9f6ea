//! Disruption over a snapshot of Kubernetes objects, through the round the controller, the
//! simulator and `plan` share: upstream's candidate filtering, budget arithmetic, emptiness,
//! drift and its metrics' labels, as tables of (cluster → what goes, what stays).

mod support;

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::jiff::SignedDuration;
use karpenter_api::{DisruptionReason, NillableDuration};
use karpenter_core::disruption::{Blocked, Method, eviction_cost};
use karpenter_core::instancetype::fake;
use karpenter_core::instancetype::fake::FakeInstanceType;
use karpenter_core::round::{BufferHolding, Disrupt, Disruption, Parts, RoundInputs, decide};
use karpenter_core::state::{Observed, Snapshot};
use serde_json::{Value, json};
use support::cluster::*;
use support::*;

/// What the round sees besides the cluster's objects: provisioning's nominations, the nodes
/// commands in flight took, CapacityBuffer headroom, volumes.
#[derive(Default)]
struct Extra<'a> {
    nominated: &'a [&'a str],
    marked: &'a [&'a str],
    virtual_pods: &'a [Pod],
    holding: Option<&'a BTreeMap<String, usize>>,
    volume_claims: &'a [PersistentVolumeClaim],
    volumes: &'a [PersistentVolume],
    storage_classes: &'a [StorageClass],
}

/// A fresh disruption decision, with upstream's eligible-node counts.
struct Outcome {
    d: Disrupted,
    commands: Vec<karpenter_core::disruption::Command>,
    eligible: BTreeMap<&'static str, usize>,
}

impl Outcome {
    /// Whether `node` is a candidate: taken by a command, or staying for a reason other than
    /// not being one.
    fn candidate(&self, node: &str) -> bool {
        self.d
            .commands
            .iter()
            .any(|c| c.candidates.iter().any(|n| n == node))
            || self.d.blocked.get(node).is_some_and(|(kind, _)| {
                !matches!(kind, Blocked::NotCandidate | Blocked::Unmanaged)
            })
    }

    fn why(&self, node: &str) -> String {
        self.d
            .blocked
            .get(node)
            .map(|(_, why)| why.clone())
            .unwrap_or_default()
    }
}

fn disrupt(cluster: &Cluster, extra: &Extra<'_>) -> Outcome {
    let snapshot = Snapshot::new(Observed {
        nodes: cluster.nodes.iter().collect(),
        node_claims: cluster.claims.iter().collect(),
        pods: cluster.pods.iter().collect(),
        daemonsets: cluster.daemonsets.iter().collect(),
        pdbs: cluster.pdbs.iter().collect(),
        namespaces: Vec::new(),
        volume_claims: extra.volume_claims.iter().collect(),
        volumes: extra.volumes.iter().collect(),
        storage_classes: extra.storage_classes.iter().collect(),
        csi_nodes: Vec::new(),
        services: Vec::new(),
        pod_controllers: Vec::new(),
        node_pools: &cluster.pools,
        provider_labels: &[],
        nominated: extra.nominated.iter().map(|s| s.to_string()).collect(),
        devices: Default::default(),
        marked_for_deletion: extra.marked.iter().map(|s| s.to_string()).collect(),
    });
    let never = || false;
    let mut gates = cluster.gates;
    gates.capacity_buffer |= !extra.virtual_pods.is_empty();
    let plan = decide(
        &snapshot,
        &RoundInputs {
            gates,
            now: cluster.now,
            options: &cluster.options,
            virtual_pods: extra.virtual_pods,
            buffer_holding: extra
                .holding
                .map_or(BufferHolding::Unknown, BufferHolding::Placed),
            repair_policies: &[],
            parts: Parts {
                disruption: Disrupt::Decide,
                ..Parts::NONE
            },
            interrupt: &never,
        },
    );
    let Some(Disruption::Decided { decision, eligible }) = plan.disruption else {
        panic!("a fresh decision was asked for");
    };
    let d = Disrupted {
        commands: decision
            .commands
            .iter()
            .map(|c| Move {
                method: c.method,
                candidates: c.candidates.clone(),
                replacements: c
                    .replacements
                    .iter()
                    .map(|r| r.instance_types.iter().map(|t| t.name.clone()).collect())
                    .collect(),
            })
            .collect(),
        blocked: decision
            .blocked
            .iter()
            .map(|(n, b)| (n.clone(), (b.kind, b.reason.clone())))
            .collect(),
    };
    Outcome {
        d,
        commands: decision.commands,
        eligible: eligible.into_iter().collect(),
    }
}

fn plain(cluster: &Cluster) -> Outcome {
    disrupt(cluster, &Extra::default())
}

/// A NodePool with `consolidateAfter` and a single budget of `nodes`.
fn pool(name: &str, consolidate_after: &str, nodes: &str) -> PoolBuilder {
    let mut p = node_pool(name);
    p.0.spec.disruption.consolidate_after = match consolidate_after {
        "Never" => NillableDuration::NEVER,
        s => NillableDuration::from_secs(s.trim_end_matches('s').parse().unwrap()),
    };
    p.0.spec.disruption.budgets = vec![karpenter_api::Budget {
        nodes: nodes.into(),
        ..Default::default()
    }];
    p
}

fn node(name: &str) -> ManagedNode {
    managed(name, "default", "default-instance-type")
}

/// A running ReplicaSet pod named `name` on `node`, asking for `cpu`.
fn app_on(node: &str, name: &str, cpu: &str) -> Pod {
    on(
        node,
        named(
            name,
            replicated(pod().labels(&[("app", "web")]).cpu(cpu).build()),
        ),
    )
}

fn with(mut pod: Pod, patch: Value) -> Pod {
    let mut v = serde_json::to_value(&pod).unwrap();
    merge(&mut v, patch);
    pod = serde_json::from_value(v).unwrap();
    pod
}

fn annotated(pod: Pod, key: &str, value: &str) -> Pod {
    with(pod, json!({"metadata": {"annotations": {key: value}}}))
}

fn owned_by(pod: Pod, kind: &str) -> Pod {
    let api = if kind == "Node" { "v1" } else { "apps/v1" };
    with(
        pod,
        json!({"metadata": {"ownerReferences": [
            {"apiVersion": api, "kind": kind, "name": "owner", "uid": "owner-uid", "controller": true}]}}),
    )
}

/// A PodDisruptionBudget over `app: web` with `maxUnavailable: 0` (upstream's fully blocking
/// budget), or one allowing `allowed` disruptions.
fn budget(name: &str, allowed: Option<i32>) -> PodDisruptionBudget {
    let spec = match allowed {
        None => json!({"selector": {"matchLabels": {"app": "web"}}, "maxUnavailable": 0}),
        Some(_) => json!({"selector": {"matchLabels": {"app": "web"}}, "minAvailable": 1}),
    };
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
        "status": {"disruptionsAllowed": allowed.unwrap_or(0), "currentHealthy": 1,
            "desiredHealthy": 1, "expectedPods": 1, "observedGeneration": 1},
    }))
    .unwrap()
}

/// Sets a condition on the NodeClaim named `claim`.
fn condition(cluster: &mut Cluster, claim: &str, kind: &str, status: &str, minutes_ago: i64) {
    let c = cluster
        .claims
        .iter_mut()
        .find(|c| c.metadata.name.as_deref() == Some(claim))
        .unwrap();
    let conditions = &mut c.status.as_mut().unwrap().conditions;
    conditions.retain(|c| c.type_ != kind);
    conditions.push(
        serde_json::from_value(json!({"type": kind, "status": status, "reason": kind,
            "message": "", "lastTransitionTime": ago(minutes_ago)}))
        .unwrap(),
    );
}

/// Removes `label` from the Node and the NodeClaim named `name`.
fn unlabel(cluster: &mut Cluster, name: &str, label: &str) {
    for n in cluster
        .nodes
        .iter_mut()
        .filter(|n| n.metadata.name.as_deref() == Some(name))
    {
        n.metadata.labels.as_mut().unwrap().remove(label);
    }
    for c in cluster
        .claims
        .iter_mut()
        .filter(|c| c.metadata.name.as_deref() == Some(name))
    {
        c.metadata.labels.as_mut().unwrap().remove(label);
    }
}

type Setup = Box<dyn Fn(&mut Cluster)>;

/// Upstream's candidate filtering: a node with `pods` (and what `edit` does to the cluster)
/// is, or is not, a candidate for graceful disruption (consolidation, emptiness) or, drifted
/// with a `terminationGracePeriod`, for eventual disruption (drift).
#[test]
fn candidate_filtering() {
    let dnd = |p: Pod| annotated(p, "karpenter.sh/do-not-disrupt", "true");
    let web = || app_on("n", "web", "100m");
    // (case, node, its pods, PDBs, an edit, candidate? — or the reason it is not)
    type Case = (
        &'static str,
        ManagedNode,
        Vec<Pod>,
        Vec<PodDisruptionBudget>,
        Option<Setup>,
        Result<(), &'static str>,
    );
    let drifted_tgp = || node("n").drifted().termination_grace_period("300s");
    let cases: Vec<Case> = vec![
        (
            "do-not-disrupt pod, no terminationGracePeriod",
            node("n"),
            vec![dnd(web())],
            vec![],
            None,
            Err("pod default/web has \"karpenter.sh/do-not-disrupt\""),
        ),
        (
            "do-not-disrupt mirror pod",
            node("n"),
            vec![dnd(owned_by(web(), "Node"))],
            vec![],
            None,
            Err("do-not-disrupt"),
        ),
        (
            "do-not-disrupt DaemonSet pod",
            node("n"),
            vec![dnd(owned_by(web(), "DaemonSet"))],
            vec![],
            None,
            Err("do-not-disrupt"),
        ),
        (
            "do-not-disrupt pod, terminationGracePeriod, eventual",
            drifted_tgp(),
            vec![dnd(web())],
            vec![],
            None,
            Ok(()),
        ),
        (
            "PDB-blocked pod, terminationGracePeriod, eventual",
            drifted_tgp(),
            vec![web()],
            vec![budget("guard", None)],
            None,
            Ok(()),
        ),
        (
            "do-not-disrupt pod, terminationGracePeriod, graceful",
            node("n").termination_grace_period("300s"),
            vec![dnd(web())],
            vec![],
            None,
            Err("do-not-disrupt"),
        ),
        (
            "PDB-blocked pod, terminationGracePeriod, graceful",
            node("n").termination_grace_period("300s"),
            vec![web()],
            vec![budget("guard", None)],
            None,
            Err("pdb prevents pod evictions (PodDisruptionBudget=[default/guard])"),
        ),
        (
            "do-not-disrupt pod, no terminationGracePeriod, eventual",
            node("n").drifted(),
            vec![dnd(web())],
            vec![],
            None,
            Err("do-not-disrupt"),
        ),
        (
            "PDB-blocked pod, no terminationGracePeriod, eventual",
            node("n").drifted(),
            vec![web()],
            vec![budget("guard", None)],
            None,
            Err("pdb prevents pod evictions"),
        ),
        (
            "do-not-disrupt terminating pod",
            node("n"),
            vec![with(
                dnd(web()),
                json!({"metadata": {"deletionTimestamp": ago(0)}}),
            )],
            vec![],
            None,
            Ok(()),
        ),
        (
            "do-not-disrupt terminal pods",
            node("n"),
            vec![
                with(dnd(web()), json!({"status": {"phase": "Succeeded"}})),
                with(
                    dnd(app_on("n", "failed", "100m")),
                    json!({"status": {"phase": "Failed"}}),
                ),
            ],
            vec![],
            None,
            Ok(()),
        ),
        (
            "do-not-disrupt on the node",
            node("n").annotate("karpenter.sh/do-not-disrupt", "true"),
            vec![],
            vec![],
            None,
            Err("node has \"karpenter.sh/do-not-disrupt\""),
        ),
        (
            "multiple PDBs on one pod",
            node("n"),
            vec![web()],
            vec![budget("one", Some(1)), budget("two", Some(1))],
            None,
            Err("more than one PodDisruptionBudget"),
        ),
        (
            "fully blocking PDB",
            node("n"),
            vec![web()],
            vec![budget("guard", None)],
            None,
            Err("pdb prevents pod evictions"),
        ),
        (
            "fully blocking PDB on a DaemonSet pod",
            node("n"),
            vec![owned_by(web(), "DaemonSet")],
            vec![budget("guard", None)],
            None,
            Err("pdb prevents pod evictions"),
        ),
        (
            "fully blocking PDB on a mirror pod",
            node("n"),
            vec![owned_by(web(), "Node")],
            vec![budget("guard", None)],
            None,
            Ok(()),
        ),
        (
            "fully blocking PDB on terminal pods",
            node("n"),
            vec![
                with(web(), json!({"status": {"phase": "Succeeded"}})),
                with(
                    app_on("n", "failed", "100m"),
                    json!({"status": {"phase": "Failed"}}),
                ),
            ],
            vec![budget("guard", None)],
            None,
            Ok(()),
        ),
        (
            "fully blocking PDB on a terminating pod",
            node("n"),
            vec![with(
                web(),
                json!({"metadata": {"deletionTimestamp": ago(0)}}),
            )],
            vec![budget("guard", None)],
            None,
            Ok(()),
        ),
        (
            "just a Node",
            node("n"),
            vec![],
            vec![],
            Some(Box::new(|c: &mut Cluster| {
                c.claims.clear();
                let (node, claim) = node("other").build();
                c.nodes.push(node);
                c.claims.extend(claim);
            })),
            Err("isn't managed by karpenter"),
        ),
        (
            // Not even when the cluster holds no NodeClaim at all (a dump trimmed of them:
            // `plan` says so in a warning).
            "a cluster without any NodeClaim",
            node("n"),
            vec![],
            vec![],
            Some(Box::new(|c: &mut Cluster| c.claims.clear())),
            Err("isn't managed by karpenter"),
        ),
        (
            "just a NodeClaim",
            node("n"),
            vec![],
            vec![],
            Some(Box::new(|c: &mut Cluster| c.nodes.clear())),
            Err("not initialized"),
        ),
        (
            "deleting",
            node("n").deleting(),
            vec![],
            vec![],
            None,
            Err("being deleted"),
        ),
        (
            "not initialized",
            node("n").uninitialized(),
            vec![],
            vec![],
            None,
            Err("not initialized"),
        ),
        (
            "no karpenter.sh/nodepool label",
            node("n"),
            vec![],
            vec![],
            Some(Box::new(|c: &mut Cluster| {
                unlabel(c, "n", "karpenter.sh/nodepool")
            })),
            Err(""),
        ),
        (
            "a NodePool that does not exist",
            managed("n", "gone", "default-instance-type"),
            vec![],
            vec![],
            None,
            Err("NodePool \"gone\" not found"),
        ),
        (
            "no capacity-type label",
            node("n"),
            vec![],
            vec![],
            Some(Box::new(|c: &mut Cluster| {
                unlabel(c, "n", "karpenter.sh/capacity-type")
            })),
            Ok(()),
        ),
        (
            "no zone label",
            node("n"),
            vec![],
            vec![],
            Some(Box::new(|c: &mut Cluster| {
                unlabel(c, "n", "topology.kubernetes.io/zone")
            })),
            Ok(()),
        ),
        (
            "no instance-type label",
            node("n"),
            vec![],
            vec![],
            Some(Box::new(|c: &mut Cluster| {
                unlabel(c, "n", "node.kubernetes.io/instance-type")
            })),
            Ok(()),
        ),
        (
            "an instance type that cannot be resolved",
            node("n").instance_type(FakeInstanceType::new("unknown-type").build()),
            vec![],
            vec![],
            None,
            Ok(()),
        ),
    ];
    for (case, n, pods, pdbs, edit, expected) in cases {
        let mut cluster = Cluster::new([pool("default", "0s", "100%")])
            .node(n)
            .pods(pods);
        cluster.pdbs = pdbs;
        if let Some(edit) = edit {
            edit(&mut cluster);
        }
        let out = plain(&cluster);
        match expected {
            Ok(()) => assert!(out.candidate("n"), "{case}: {:?}", out.d),
            Err(why) => {
                assert!(!out.candidate("n"), "{case}: {:?}", out.d);
                assert!(out.why("n").contains(why), "{case}: {:?}", out.d.blocked);
            }
        }
    }
}

/// Provisioning's nominations and the nodes a command in flight took (upstream's
/// `MarkedForDeletion`, and its queue's "already being disrupted") are no candidates.
#[test]
fn nominated_and_marked_nodes_are_not_candidates() {
    let cluster = Cluster::new([pool("default", "0s", "100%")]).node(node("n"));
    assert!(plain(&cluster).candidate("n"));
    let cases = [
        (
            "nominated",
            Extra {
                nominated: &["n"],
                ..Default::default()
            },
            "nominated",
        ),
        (
            "marked for deletion by a command in flight",
            Extra {
                marked: &["n"],
                ..Default::default()
            },
            "being deleted",
        ),
    ];
    for (case, extra, why) in cases {
        let out = disrupt(&cluster, &extra);
        assert!(!out.candidate("n"), "{case}: {:?}", out.d);
        assert!(out.why("n").contains(why), "{case}: {:?}", out.d.blocked);
    }
}

/// Upstream's eviction cost: 1 for a plain pod, more with a higher deletion cost or
/// priority, less with a lower one.
#[test]
fn eviction_cost_follows_deletion_cost_and_priority() {
    let plain_pod = Pod::default();
    let cost = |deletion: &str| {
        eviction_cost(&annotated(
            Pod::default(),
            "controller.kubernetes.io/pod-deletion-cost",
            deletion,
        ))
    };
    let priority = |p: i32| eviction_cost(&with(Pod::default(), json!({"spec": {"priority": p}})));
    assert_eq!(eviction_cost(&plain_pod), 1.0, "standard cost");
    assert!(cost("100") > 1.0, "a positive deletion cost");
    assert!(cost("-100") < 1.0, "a negative deletion cost");
    assert!(
        cost("101") > cost("100") && cost("100") > cost("99"),
        "higher deletion costs cost more"
    );
    assert!(priority(1) > 1.0, "a higher priority");
    assert!(priority(-1) < 1.0, "a lower priority");
}

/// Upstream's budget mapping, observed through emptiness: ten empty nodes under a 50% budget,
/// and what else the NodePool holds — how many of the ten may go.
#[test]
fn what_counts_toward_a_nodepools_budget() {
    let ten = || (0..10).map(|i| node(&format!("e{i}"))).collect::<Vec<_>>();
    // (case, budget, nodes, an edit, marked for deletion, how many go)
    type Case = (
        &'static str,
        &'static str,
        Vec<ManagedNode>,
        Option<Setup>,
        &'static [&'static str],
        usize,
    );
    let cases: Vec<Case> = vec![
        (
            "an unmanaged node is not counted: 50% of 10",
            "50%",
            [ten(), vec![node("other").unmanaged()]].concat(),
            None,
            &[],
            5,
        ),
        (
            "a Node without a NodeClaim is not counted",
            "50%",
            [ten(), vec![node("bare")]].concat(),
            Some(Box::new(|c: &mut Cluster| {
                c.claims
                    .retain(|c| c.metadata.name.as_deref() != Some("bare"))
            })),
            &[],
            5,
        ),
        (
            "an uninitialized node is not counted",
            "50%",
            [ten(), vec![node("new").uninitialized()]].concat(),
            None,
            &[],
            5,
        ),
        (
            "an instance terminating is not counted",
            "50%",
            [ten(), vec![node("term")]].concat(),
            Some(Box::new(|c: &mut Cluster| {
                condition(c, "term", "InstanceTerminating", "True", 1)
            })),
            &[],
            5,
        ),
        (
            "the budget never goes negative: 10% of 11, ten deleting",
            "10%",
            [
                (0..10)
                    .map(|i| node(&format!("d{i}")).deleting())
                    .collect::<Vec<_>>(),
                vec![node("e0")],
            ]
            .concat(),
            None,
            &[],
            0,
        ),
        (
            "deleting and marked for deletion count against it: 5 − 2",
            "50%",
            [
                (0..8).map(|i| node(&format!("e{i}"))).collect::<Vec<_>>(),
                vec![node("d").deleting(), node("m")],
            ]
            .concat(),
            None,
            &["m"],
            3,
        ),
        (
            "NotReady nodes count against it: 5 − 2",
            "50%",
            [
                (0..8).map(|i| node(&format!("e{i}"))).collect::<Vec<_>>(),
                vec![node("nr0").not_ready(), node("nr1").not_ready()],
            ]
            .concat(),
            None,
            &[],
            3,
        ),
    ];
    for (case, nodes, members, edit, marked, expected) in cases {
        let mut cluster = Cluster::new([pool("default", "0s", nodes)]);
        for m in members {
            cluster = cluster.node(m);
        }
        if let Some(edit) = edit {
            edit(&mut cluster);
        }
        let out = disrupt(
            &cluster,
            &Extra {
                marked,
                ..Default::default()
            },
        );
        assert_eq!(out.d.removed().len(), expected, "{case}: {:?}", out.d);
        if expected == 0 {
            assert_eq!(out.d.blocked["e0"].0, Blocked::Budget, "{case}");
        }
    }
}

/// Upstream's emptiness budgets: ten empty nodes in one NodePool, or three in each of ten.
#[test]
fn emptiness_within_budgets() {
    // (case, NodePools, nodes per pool, budget, nodes gone in one command)
    let cases = [
        ("all empty nodes", 1, 10, "100%", 10),
        ("no empty nodes", 1, 10, "0%", 0),
        ("3 of 10", 1, 10, "30%", 3),
        (
            "2 of 3 from each of 10 NodePools (50% rounds up)",
            10,
            3,
            "50%",
            20,
        ),
        ("all nodes of each of 10 NodePools", 10, 3, "100%", 30),
    ];
    for (case, pools, per_pool, nodes, expected) in cases {
        let names: Vec<String> = (0..pools).map(|p| format!("pool-{p}")).collect();
        let mut cluster = Cluster::new(names.iter().map(|n| {
            let mut p = pool(n, "30s", nodes);
            if pools > 1 {
                p.0.spec.disruption.consolidation_policy =
                    karpenter_api::ConsolidationPolicy::WhenEmpty;
            }
            p
        }));
        for (p, name) in names.iter().enumerate() {
            for i in 0..per_pool {
                cluster = cluster.node(managed(
                    &format!("n-{p}-{i}"),
                    name,
                    "default-instance-type",
                ));
            }
        }
        let out = plain(&cluster);
        match expected {
            0 => assert!(out.d.commands.is_empty(), "{case}: {:?}", out.d),
            _ => {
                assert_eq!(out.d.commands.len(), 1, "{case}: {:?}", out.d);
                assert_eq!(out.d.commands[0].method, Method::Emptiness, "{case}");
                assert_eq!(out.d.removed().len(), expected, "{case}");
            }
        }
        if pools > 1 {
            for name in &names {
                let gone = out
                    .d
                    .removed()
                    .iter()
                    .filter(|n| n.starts_with(&format!("n-{}-", &name[5..])))
                    .count();
                assert_eq!(gone, expected / pools, "{case}: {name}");
            }
        }
    }
}

/// Upstream's emptiness cases: one node (empty unless said) and whether emptiness takes it.
#[test]
fn emptiness_cases() {
    // (case, node, its pods, an edit, emptied?)
    type Case = (&'static str, ManagedNode, Vec<Pod>, Option<Setup>, bool);
    let ts = |p: Pod| with(p, json!({"metadata": {"deletionTimestamp": ago(0)}}));
    let cases: Vec<Case> = vec![
        ("an empty node", node("n"), vec![], None, true),
        (
            "an empty, drifted node",
            node("n").drifted(),
            vec![],
            None,
            true,
        ),
        (
            // Upstream's Consolidatable condition is not set until consolidateAfter has
            // passed since the node's last pod event: ours reads that time.
            "not consolidatable yet: a pod left a minute ago (consolidateAfter 30s → 10m)",
            node("n"),
            vec![],
            Some(Box::new(|c: &mut Cluster| {
                c.pool_mut("default").spec.disruption.consolidate_after =
                    NillableDuration::from_secs(600);
                let status = c.claims[0].status.as_mut().unwrap();
                status.last_pod_event_time =
                    Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                        now() - SignedDuration::from_mins(1),
                    ));
            })),
            false,
        ),
        (
            "not consolidatable: the node is younger than consolidateAfter",
            node("n").age(5),
            vec![],
            Some(Box::new(|c: &mut Cluster| {
                c.pool_mut("default").spec.disruption.consolidate_after =
                    NillableDuration::from_secs(600);
            })),
            false,
        ),
        (
            "do-not-disrupt on the node",
            node("n").annotate("karpenter.sh/do-not-disrupt", "true"),
            vec![],
            None,
            false,
        ),
        (
            "do-not-disrupt false on the node",
            node("n").annotate("karpenter.sh/do-not-disrupt", "false"),
            vec![],
            None,
            true,
        ),
        (
            // On the cheapest type, so consolidation has nothing cheaper either.
            "a node with a pod",
            managed("n", "default", "small-instance-type"),
            vec![app_on("n", "web", "100m")],
            None,
            false,
        ),
        (
            "a DaemonSet pod leaves it empty",
            node("n"),
            vec![owned_by(app_on("n", "ds", "100m"), "DaemonSet")],
            None,
            true,
        ),
        (
            "terminating Deployment pods leave it empty",
            node("n"),
            vec![ts(app_on("n", "a", "100m")), ts(app_on("n", "b", "100m"))],
            None,
            true,
        ),
        (
            "a terminating StatefulSet pod keeps it",
            managed("n", "default", "small-instance-type"),
            vec![ts(owned_by(app_on("n", "db", "100m"), "StatefulSet"))],
            None,
            false,
        ),
    ];
    for (case, n, pods, edit, emptied) in cases {
        let mut cluster = Cluster::new([pool("default", "30s", "100%")])
            .node(n)
            .pods(pods);
        if let Some(edit) = edit {
            edit(&mut cluster);
        }
        let out = plain(&cluster);
        let by_emptiness = out
            .d
            .commands
            .iter()
            .any(|c| c.method == Method::Emptiness && c.candidates == ["n"]);
        assert_eq!(by_emptiness, emptied, "{case}: {:?}", out.d);
        if !emptied {
            assert!(out.d.removed().is_empty(), "{case}: {:?}", out.d);
        }
        if case == "an empty, drifted node" {
            assert_eq!(out.eligible["drifted"], 1, "{case}");
        }
    }
    // Several empty nodes go in one command.
    let cluster = Cluster::new([pool("default", "30s", "100%")])
        .node(node("a"))
        .node(node("b"));
    let out = plain(&cluster);
    assert_eq!(out.d.commands.len(), 1);
    assert_eq!(out.d.removed(), ["a", "b"]);
}

/// `karpenter_voluntary_disruption_eligible_nodes`: a node with a pod is no empty candidate;
/// once the pod is gone it is.
#[test]
fn eligible_nodes_by_reason() {
    let busy = Cluster::new([pool("default", "0s", "100%")])
        .node(node("n"))
        .pods([app_on("n", "web", "100m")]);
    assert_eq!(plain(&busy).eligible["empty"], 0);
    let idle = Cluster::new([pool("default", "0s", "100%")]).node(node("n"));
    assert_eq!(plain(&idle).eligible["empty"], 1);
    // Drift: a do-not-disrupt pod on a node not drifted counts nothing; drifted and free, one.
    let held = Cluster::new([pool("default", "3600s", "100%")])
        .node(node("n"))
        .pods([annotated(
            app_on("n", "web", "100m"),
            "karpenter.sh/do-not-disrupt",
            "true",
        )]);
    assert_eq!(plain(&held).eligible["drifted"], 0);
    let drifted = Cluster::new([pool("default", "3600s", "100%")])
        .node(node("n").drifted())
        .pods([app_on("n", "web", "100m")]);
    assert_eq!(plain(&drifted).eligible["drifted"], 1);
}

/// Upstream's "considers pending pods when consolidating": a pending pod that only the node
/// can hold keeps it from being replaced by a smaller one. (Our catalogue has every size from
/// 1 to 64 CPUs: the 62-CPU pod and the node's 1-CPU pod fit only the 64-CPU type.)
#[test]
fn pending_pods_keep_the_node_they_need() {
    let types = fake::instance_types(64);
    let pending = with(
        named("big", pod().cpu("62").build()),
        json!({"status": {"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}}),
    );
    let big = types[63].clone();
    let cluster = |pending: Vec<Pod>| {
        Cluster::with_types([pool("default", "0s", "100%")], types.clone())
            .node(node("n").instance_type(big.clone()))
            .pods([app_on("n", "web", "1")])
            .pods(pending)
    };
    let out = plain(&cluster(vec![]));
    assert_eq!(out.d.removed(), ["n"], "without it the node is replaced");
    let out = plain(&cluster(vec![pending]));
    assert!(out.d.removed().is_empty(), "{:?}", out.d);
}

/// Upstream's buffer pod protection: nodes a CapacityBuffer's virtual pods hold are not
/// empty; the count per node is what the last provisioning round placed.
#[test]
fn buffer_pods_protect_the_nodes_they_hold() {
    let virtual_pod = serde_json::from_value::<Pod>(json!({
        "metadata": {"name": "buffer-0", "namespace": "default", "uid": "buffer-0",
            "annotations": {"karpenter.sh/capacity-buffer-fake-pod": "true",
                "karpenter.sh/capacity-buffer-name": "buffer",
                "karpenter.sh/capacity-buffer-namespace": "default"}},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}]},
        "status": {"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]},
    }))
    .unwrap();
    // (case, buffer pods per node, real pods on a, what goes)
    type Case<'a> = (&'a str, &'a [(&'a str, usize)], bool, &'a [&'a str]);
    let cases: [Case<'_>; 6] = [
        (
            "a node hosting buffer pods stays",
            &[("a", 3)],
            false,
            &["b"],
        ),
        (
            "once the buffer pods are cleared it goes",
            &[],
            false,
            &["a", "b"],
        ),
        (
            "only the node with buffer pods is kept",
            &[("a", 1)],
            false,
            &["b"],
        ),
        (
            "real pods and buffer pods: not empty",
            &[("a", 2)],
            true,
            &["b"],
        ),
        (
            "every node hosting buffer pods stays",
            &[("a", 2), ("b", 3)],
            false,
            &[],
        ),
        (
            "a count of zero protects nothing",
            &[("a", 0)],
            false,
            &["a", "b"],
        ),
    ];
    for (case, counts, busy, expected) in cases {
        let mut cluster = Cluster::new([pool("default", "0s", "100%")])
            .node(node("a"))
            .node(node("b"));
        if busy {
            cluster = cluster.pods([app_on("a", "web", "100m")]);
        }
        let holding: BTreeMap<String, usize> =
            counts.iter().map(|(n, c)| (n.to_string(), *c)).collect();
        let out = disrupt(
            &cluster,
            &Extra {
                virtual_pods: std::slice::from_ref(&virtual_pod),
                holding: Some(&holding),
                ..Default::default()
            },
        );
        let emptied: Vec<String> = out
            .d
            .commands
            .iter()
            .filter(|c| c.method == Method::Emptiness)
            .flat_map(|c| c.candidates.clone())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        assert_eq!(emptied, expected, "{case}: {:?}", out.d);
    }
}

fn drift_pool() -> PoolBuilder {
    pool("default", "3600s", "100%")
}

/// Upstream's drift cases: drifted nodes (consolidation waits an hour, so only drift acts)
/// and what drift does — which node it takes and how many replacements it launches.
#[test]
fn drift_cases() {
    // (case, cluster, the command: candidates and replacement count; None: nothing)
    type Case = (&'static str, Cluster, Option<(Vec<&'static str>, usize)>);
    let young = |name: &str| node(name).age(30);
    let dnd = |p: Pod, v: &str| annotated(p, "karpenter.sh/do-not-disrupt", v);
    let started_now = |p: Pod| with(p, json!({"status": {"startTime": ago(0)}}));
    let mut not_drifted = Cluster::new([drift_pool()]).node(young("n"));
    condition(&mut not_drifted, "n", "Drifted", "False", 5);
    let mut earliest = Cluster::new([drift_pool()])
        .node(young("a").drifted())
        .node(young("b").drifted())
        .pods([app_on("a", "pa", "3"), app_on("b", "pb", "3")]);
    condition(&mut earliest, "a", "Drifted", "True", 5);
    condition(&mut earliest, "b", "Drifted", "True", 60);
    let cases: Vec<Case> = vec![
        (
            "the first drifted node cannot move its pods: the next one goes",
            Cluster::new([drift_pool()])
                .node(young("stuck").drifted())
                .node(young("free").drifted())
                .pods([app_on("stuck", "huge", "150"), app_on("free", "web", "1")]),
            Some((vec!["free"], 1)),
        ),
        (
            "no Drifted condition",
            Cluster::new([drift_pool()])
                .node(young("n"))
                .pods([app_on("n", "web", "1")]),
            None,
        ),
        ("Drifted=False", not_drifted, None),
        (
            "do-not-disrupt on the node",
            Cluster::new([drift_pool()]).node(
                young("n")
                    .drifted()
                    .annotate("karpenter.sh/do-not-disrupt", "true"),
            ),
            None,
        ),
        (
            "do-not-disrupt false on the node: its pod moves to the other node",
            Cluster::new([drift_pool()])
                .node(
                    young("n")
                        .drifted()
                        .annotate("karpenter.sh/do-not-disrupt", "false"),
                )
                .node(young("other"))
                .pods([app_on("n", "web", "1")]),
            Some((vec!["n"], 0)),
        ),
        (
            "a do-not-disrupt pod: no replacement",
            Cluster::new([drift_pool()])
                .node(young("n").drifted())
                .pods([dnd(app_on("n", "web", "1"), "true")]),
            None,
        ),
        (
            "a do-not-disrupt pod with a terminationGracePeriod: taken, nothing launched for it",
            Cluster::new([drift_pool()])
                .node(young("n").drifted().termination_grace_period("300s"))
                .pods([dnd(app_on("n", "web", "1"), "true")]),
            Some((vec!["n"], 0)),
        ),
        (
            "a pod a PDB blocks, with a terminationGracePeriod: nothing launched for it",
            Cluster::new([drift_pool()])
                .node(young("n").drifted().termination_grace_period("300s"))
                .pods([app_on("n", "web", "1")])
                .pdb(budget("guard", None)),
            Some((vec!["n"], 0)),
        ),
        (
            "a do-not-disrupt of 2m on a pod started now",
            Cluster::new([drift_pool()])
                .node(young("n").drifted())
                .pods([started_now(dnd(app_on("n", "web", "1"), "2m"))]),
            None,
        ),
        (
            "an invalid do-not-disrupt value holds nothing",
            Cluster::new([drift_pool()])
                .node(young("n").drifted())
                .pods([dnd(app_on("n", "web", "1"), "invalid-format")]),
            Some((vec!["n"], 1)),
        ),
        (
            "replaced: its pod needs a new node",
            Cluster::new([drift_pool()])
                .node(young("n").drifted())
                .pods([app_on("n", "web", "1")]),
            Some((vec!["n"], 1)),
        ),
        (
            "deleted: its pod fits on another node",
            Cluster::new([drift_pool()])
                .node(young("n").drifted())
                .node(young("other"))
                .pods([app_on("n", "web", "1")]),
            Some((vec!["n"], 0)),
        ),
        (
            "empty, consolidation disabled",
            Cluster::new([pool("default", "Never", "100%")]).node(node("n").drifted()),
            Some((vec!["n"], 0)),
        ),
        (
            "empty before non-empty",
            Cluster::new([pool("default", "Never", "100%")])
                .node(node("busy").drifted())
                .node(node("empty").drifted())
                .pods([app_on("busy", "web", "1")]),
            Some((vec!["empty"], 0)),
        ),
        (
            "one non-empty node at a time, the earliest drifted first",
            earliest,
            Some((vec!["b"], 1)),
        ),
    ];
    for (case, cluster, expected) in cases {
        let out = plain(&cluster);
        let got = out
            .d
            .commands
            .first()
            .map(|c| (c.candidates.clone(), c.replacements.len()));
        let expected = expected.map(|(c, r)| (c.iter().map(|s| s.to_string()).collect(), r));
        assert_eq!(got, expected, "{case}: {:?}", out.d);
        if let Some(cmd) = out.commands.first() {
            assert_eq!(cmd.reason, DisruptionReason::Drifted, "{case}");
        }
    }
}

/// Upstream: an empty drifted node that is consolidatable goes (by emptiness, the first
/// method), and counts as eligible for drift.
#[test]
fn an_empty_consolidatable_drifted_node_goes() {
    let cluster = Cluster::new([pool("default", "0s", "100%")]).node(node("n").drifted());
    let out = plain(&cluster);
    assert_eq!(out.d.removed(), ["n"]);
    assert_eq!(out.eligible["drifted"], 1);
    // With consolidation disabled drift takes it.
    let cluster = Cluster::new([pool("default", "Never", "100%")]).node(node("n").drifted());
    let out = plain(&cluster);
    assert_eq!(out.d.commands[0].method, Method::Drift);
    assert_eq!(out.eligible["drifted"], 1);
}

/// Upstream's duration do-not-disrupt on several pods: drift waits for the longest.
#[test]
fn drift_waits_for_the_longest_do_not_disrupt_duration() {
    let pods = [
        with(
            annotated(app_on("n", "one", "1"), "karpenter.sh/do-not-disrupt", "1m"),
            json!({"status": {"startTime": ago(0)}}),
        ),
        with(
            annotated(
                app_on("n", "three", "1"),
                "karpenter.sh/do-not-disrupt",
                "3m",
            ),
            json!({"status": {"startTime": ago(0)}}),
        ),
    ];
    for (minutes, drifts) in [(0, false), (2, false), (4, true)] {
        let mut cluster = Cluster::new([drift_pool()])
            .node(node("n").age(30).drifted())
            .pods(pods.clone());
        cluster.now = now() + SignedDuration::from_mins(minutes);
        let out = plain(&cluster);
        assert_eq!(
            !out.d.commands.is_empty(),
            drifts,
            "after {minutes}m: {:?}",
            out.d
        );
    }
}

/// Upstream's "can replace drifted nodes with multiple nodes": an 8-CPU node of a type no
/// longer offered holds three 2-CPU pods; only 3-CPU nodes are offered, so three replace it.
#[test]
fn a_drifted_node_can_be_replaced_by_several() {
    let mut current = FakeInstanceType::new("current-on-demand")
        .resources(&[("cpu", "8")])
        .offerings(&[("on-demand", "test-zone-1a", 0.5)])
        .build();
    current.offerings[0].available = false;
    let replacement = FakeInstanceType::new("replacement-on-demand")
        .resources(&[("cpu", "3")])
        .offerings(&[("on-demand", "test-zone-1a", 0.3)])
        .build();
    let cluster = Cluster::with_types([drift_pool()], vec![current.clone(), replacement])
        .node(
            node("n")
                .age(30)
                .drifted()
                .instance_type(current)
                .zone("test-zone-1a"),
        )
        .pods((0..3).map(|i| app_on("n", &format!("p{i}"), "2")));
    let out = plain(&cluster);
    assert_eq!(out.d.commands.len(), 1, "{:?}", out.d);
    let cmd = &out.d.commands[0];
    assert_eq!(cmd.candidates, ["n"]);
    assert_eq!(
        cmd.replacements,
        vec![vec!["replacement-on-demand".to_string()]; 3]
    );
}

/// Marks what `out`'s first command takes as in flight and returns how many commands the
/// passes made before none came (each pass sees the earlier commands' candidates marked).
fn passes_until_none(cluster: &Cluster, limit: usize) -> Vec<Vec<String>> {
    let mut marked: Vec<String> = Vec::new();
    let mut taken = Vec::new();
    for _ in 0..limit {
        let refs: Vec<&str> = marked.iter().map(String::as_str).collect();
        let out = disrupt(
            cluster,
            &Extra {
                marked: &refs,
                ..Default::default()
            },
        );
        let Some(cmd) = out.d.commands.first() else {
            break;
        };
        marked.extend(cmd.candidates.clone());
        taken.push(cmd.candidates.clone());
    }
    taken
}

/// Upstream's drift budgets over successive passes: commands in flight count against the
/// budget (3 of 10 at 30%), one non-empty node per command.
#[test]
fn drift_budgets_count_commands_in_flight() {
    // Five drifted nodes with a pod each, five idle ones; 30% of 10 is 3.
    let mut cluster = Cluster::new([pool("default", "3600s", "30%")]);
    for i in 0..10 {
        let n = node(&format!("n{i}")).age(30);
        cluster = cluster.node(if i < 5 { n.drifted() } else { n });
    }
    cluster = cluster.pods((0..5).map(|i| app_on(&format!("n{i}"), &format!("p{i}"), "1")));
    let taken = passes_until_none(&cluster, 6);
    assert_eq!(taken.len(), 3, "{taken:?}");
    assert!(taken.iter().all(|c| c.len() == 1), "{taken:?}");
    // Ten empty drifted nodes, 30%: three allowed.
    let mut cluster = Cluster::new([pool("default", "3600s", "30%")]);
    for i in 0..10 {
        cluster = cluster.node(node(&format!("n{i}")).age(30).drifted());
    }
    let out = plain(&cluster);
    assert_eq!(out.d.removed().len(), 3, "{:?}", out.d);
    assert_eq!(out.d.commands[0].method, Method::Drift);
}

/// Upstream's "should allow multiple replace operations to happen successively": ten drifted
/// nodes each full with a pod, a budget of 3: three replacements start, one per pass, then the
/// budget holds the rest.
#[test]
fn drift_replaces_successively_within_the_budget() {
    let mut cluster = Cluster::new([pool("default", "Never", "3")]);
    for i in 0..10 {
        cluster = cluster.node(node(&format!("n{i}")).drifted());
    }
    cluster = cluster.pods((0..10).map(|i| app_on(&format!("n{i}"), &format!("p{i}"), "3")));
    let mut marked: Vec<String> = Vec::new();
    let mut replacements = 0;
    for _ in 0..5 {
        let refs: Vec<&str> = marked.iter().map(String::as_str).collect();
        let out = disrupt(
            &cluster,
            &Extra {
                marked: &refs,
                ..Default::default()
            },
        );
        let Some(cmd) = out.d.commands.first() else {
            break;
        };
        assert_eq!(cmd.candidates.len(), 1);
        replacements += cmd.replacements.len();
        marked.extend(cmd.candidates.clone());
    }
    assert_eq!(marked.len(), 3, "{marked:?}");
    assert_eq!(replacements, 3);
}

/// Upstream's drift budgets across NodePools: ten NodePools of three drifted nodes (two with a
/// pod), a budget of one each: one node of each goes. (Upstream takes them one command per
/// pass; ours takes every empty drifted node the budgets allow in one command.)
#[test]
fn drift_budgets_per_nodepool() {
    let names: Vec<String> = (0..10).map(|p| format!("pool-{p}")).collect();
    let mut cluster = Cluster::new(names.iter().map(|n| pool(n, "Never", "1")));
    for (p, name) in names.iter().enumerate() {
        for i in 0..3 {
            cluster = cluster
                .node(managed(&format!("n-{p}-{i}"), name, "default-instance-type").drifted());
        }
        cluster =
            cluster.pods((0..2).map(|i| app_on(&format!("n-{p}-{i}"), &format!("p-{p}-{i}"), "1")));
    }
    let taken: Vec<String> = passes_until_none(&cluster, 20).concat();
    assert_eq!(taken.len(), 10, "{taken:?}");
    for p in 0..10 {
        assert_eq!(
            taken
                .iter()
                .filter(|n| n.starts_with(&format!("n-{p}-")))
                .count(),
            1,
            "pool-{p}: {taken:?}"
        );
    }
}

/// Upstream's "should allow pods on deleting nodes to reschedule to uninitialized nodes":
/// with every other node marked for deletion, the drifted node's pod still finds a place (a
/// new NodeClaim).
#[test]
fn pods_of_a_candidate_reschedule_when_every_other_node_is_going() {
    let mut cluster = Cluster::new([pool("default", "Never", "100%")]);
    for i in 0..10 {
        let n = node(&format!("n{i}"));
        cluster = cluster.node(if i == 0 { n.drifted() } else { n });
    }
    cluster = cluster.pods([app_on("n0", "web", "2")]);
    let marked: Vec<String> = (1..10).map(|i| format!("n{i}")).collect();
    let refs: Vec<&str> = marked.iter().map(String::as_str).collect();
    let out = disrupt(
        &cluster,
        &Extra {
            marked: &refs,
            ..Default::default()
        },
    );
    let cmd = out.d.commands.first().expect("drift acts");
    assert_eq!(cmd.candidates, ["n0"]);
    assert_eq!(cmd.replacements.len(), 1, "{:?}", out.d);
}

/// Upstream's "should ensure that we do not duplicate capacity for disrupted nodes with
/// provisioning": once a command took a node and launched its replacement, provisioning
/// places the node's pods on the replacement instead of launching more.
#[test]
fn provisioning_counts_on_a_disruption_replacement() {
    let base = || {
        Cluster::new([pool("default", "Never", "100%")])
            .node(node("old").drifted())
            .pods([app_on("old", "web", "1")])
    };
    let provision = |cluster: &Cluster| {
        let snapshot = Snapshot::new(Observed {
            nodes: cluster.nodes.iter().collect(),
            node_claims: cluster.claims.iter().collect(),
            pods: cluster.pods.iter().collect(),
            daemonsets: Vec::new(),
            pdbs: Vec::new(),
            namespaces: Vec::new(),
            volume_claims: Vec::new(),
            volumes: Vec::new(),
            storage_classes: Vec::new(),
            csi_nodes: Vec::new(),
            services: Vec::new(),
            pod_controllers: Vec::new(),
            node_pools: &cluster.pools,
            provider_labels: &[],
            nominated: BTreeSet::new(),
            devices: Default::default(),
            marked_for_deletion: ["old".to_string()].into(),
        });
        let never = || false;
        let plan = decide(
            &snapshot,
            &RoundInputs {
                gates: cluster.gates,
                now: cluster.now,
                options: &cluster.options,
                virtual_pods: &[],
                buffer_holding: BufferHolding::Unknown,
                repair_policies: &[],
                parts: Parts {
                    provisioning: true,
                    ..Parts::NONE
                },
                interrupt: &never,
            },
        );
        let p = plan.provisioning.unwrap();
        (p.batch.len(), p.results.new_node_claims.len())
    };
    assert_eq!(
        provision(&base()),
        (1, 1),
        "no replacement yet: the pod needs a launch"
    );
    let (_, replacement) = node("replacement").uninitialized().build();
    let with_replacement = base().claim(replacement.unwrap());
    assert_eq!(
        provision(&with_replacement),
        (1, 0),
        "the replacement takes the pod"
    );
}

/// Upstream's "can replace node with a local PV (ignoring hostname affinity)": a pod whose
/// local volume is pinned to its node by hostname can still be moved to a replacement.
#[test]
fn a_pod_with_a_local_volume_can_move_to_a_replacement() {
    fn from<T: k8s_openapi::serde::de::DeserializeOwned>(v: Value) -> T {
        serde_json::from_value(v).unwrap()
    }
    let storage_classes: Vec<StorageClass> = vec![from(json!({
        "metadata": {"name": "local-path"}, "provisioner": "kubernetes.io/no-provisioner"}))];
    let volumes: Vec<PersistentVolume> = vec![from(json!({
        "metadata": {"name": "pv"},
        "spec": {"local": {"path": "/mnt"}, "storageClassName": "local-path",
            "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
            "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "kubernetes.io/hostname", "operator": "In", "values": ["n"]}]}]}}}}))];
    let volume_claims: Vec<PersistentVolumeClaim> = vec![from(json!({
        "metadata": {"name": "pvc", "namespace": "default"},
        "spec": {"volumeName": "pv", "storageClassName": "local-path",
            "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
        "status": {"phase": "Bound"}}))];
    let pod = with(
        owned_by(app_on("n", "db", "100m"), "StatefulSet"),
        json!({"spec": {"volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "pvc"}}]}}),
    );
    // A 32-CPU node holding a small pod: a cheaper replacement is worth it.
    let big = fake::instance_types(32).pop().unwrap();
    let cluster = Cluster::with_types([pool("default", "0s", "100%")], fake::instance_types(32))
        .node(node("n").instance_type(big))
        .pods([pod]);
    let out = disrupt(
        &cluster,
        &Extra {
            volume_claims: &volume_claims,
            volumes: &volumes,
            storage_classes: &storage_classes,
            ..Default::default()
        },
    );
    assert_eq!(out.d.removed(), ["n"], "{:?}", out.d);
    assert_eq!(out.d.commands[0].replacements.len(), 1);
}

/// Upstream's metrics suite: what each kind of decision is labelled with —
/// `karpenter_voluntary_disruption_decisions_total{decision, reason, consolidation_type}`.
#[test]
fn decisions_carry_upstreams_metric_labels() {
    let three = || {
        Cluster::new([pool("default", "0s", "100%")])
            .node(node("a"))
            .node(node("b"))
            .node(node("c"))
    };
    let drift = |pods: Vec<Pod>, nodes: &[&str]| {
        let mut c = Cluster::new([pool("default", "Never", "100%")]);
        for (i, n) in nodes.iter().enumerate() {
            let m = node(n);
            c = c.node(if i == 0 { m.drifted() } else { m });
        }
        c.pods(pods)
    };
    let big = fake::instance_types(16).pop().unwrap();
    let types = fake::instance_types(16);
    let pricey = |name: &str| node(name).instance_type(big.clone());
    // (case, cluster, decision, reason, consolidation_type, candidates)
    let cases: Vec<(&str, Cluster, &str, DisruptionReason, &str, usize)> = vec![
        (
            "single node empty",
            Cluster::new([pool("default", "0s", "100%")]).node(node("a")),
            "delete",
            DisruptionReason::Empty,
            "empty",
            1,
        ),
        (
            "single node delete (drift, its pods fit elsewhere)",
            drift(
                vec![app_on("a", "p0", "100m"), app_on("a", "p1", "100m")],
                &["a", "b"],
            ),
            "delete",
            DisruptionReason::Drifted,
            "",
            1,
        ),
        (
            "single node replace (drift)",
            drift(
                (0..4)
                    .map(|i| app_on("a", &format!("p{i}"), "100m"))
                    .collect(),
                &["a"],
            ),
            "replace",
            DisruptionReason::Drifted,
            "",
            1,
        ),
        (
            "multi-node empty",
            three(),
            "delete",
            DisruptionReason::Empty,
            "empty",
            3,
        ),
        (
            // c may not go but has room: a's and b's pods move there.
            "multi-node delete",
            Cluster::with_types([pool("default", "0s", "100%")], types.clone())
                .node(pricey("a"))
                .node(pricey("b"))
                .node(pricey("c").annotate("karpenter.sh/do-not-disrupt", "true"))
                .pods([
                    app_on("a", "p0", "1"),
                    app_on("b", "p1", "1"),
                    app_on("c", "p2", "1"),
                ]),
            "delete",
            DisruptionReason::Underutilized,
            "multi",
            2,
        ),
        (
            "multi-node replace",
            Cluster::with_types([pool("default", "0s", "100%")], types.clone())
                .node(pricey("a"))
                .node(pricey("b"))
                .node(pricey("c"))
                .pods([
                    app_on("a", "p0", "6"),
                    app_on("b", "p1", "6"),
                    app_on("c", "p2", "1"),
                    app_on("c", "p3", "1"),
                ]),
            "replace",
            DisruptionReason::Underutilized,
            "multi",
            3,
        ),
    ];
    for (case, cluster, decision, reason, kind, candidates) in cases {
        let out = plain(&cluster);
        let cmd = out
            .commands
            .first()
            .unwrap_or_else(|| panic!("{case}: nothing decided: {:?}", out.d));
        let got = (
            if cmd.replacements.is_empty() {
                "delete"
            } else {
                "replace"
            },
            cmd.reason,
            cmd.method.consolidation_type(),
            cmd.candidates.len(),
        );
        assert_eq!(
            got,
            (decision, reason, kind, candidates),
            "{case}: {:?}",
            out.d
        );
    }
}
