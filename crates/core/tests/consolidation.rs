//! Consolidation cases ported from upstream's disruption suite (`consolidation_test.go`): the
//! same clusters — nodes of the cheapest or priciest type of the assorted catalog with 32 CPU
//! allocatable, ReplicaSet pods bound to them — and the same outcome, checked against
//! [`decide`].

mod support;

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use karpenter_api::labels::{
    ARCH_LABEL, CAPACITY_TYPE_LABEL, HOSTNAME_LABEL, INSTANCE_TYPE_LABEL, NODE_POOL_LABEL,
    OS_LABEL, ZONE_LABEL,
};
use karpenter_api::{Budget, ConsolidationPolicy, DisruptionReason, NillableDuration};
use karpenter_core::disruption::{Blocked, Decision, Input, NodeState, decide};
use karpenter_core::instancetype::{InstanceType, fake};
use karpenter_core::provisioning::scheduling::{NodePoolInput, SchedulerOptions};
use karpenter_core::resources::Resources;
use support::*;

const NOW: i64 = 1_717_372_800 + 12 * 3600;

fn at(second: i64) -> k8s_openapi::jiff::Timestamp {
    k8s_openapi::jiff::Timestamp::from_second(second).unwrap()
}

/// The assorted catalog's Linux amd64 types offered as `capacity_type`, cheapest first.
fn by_price(capacity_type: &str) -> Vec<Arc<InstanceType>> {
    let mut types: Vec<Arc<InstanceType>> = catalog()
        .into_iter()
        .filter(|it| {
            it.offerings[0].capacity_type == capacity_type
                && it.requirements.allows(OS_LABEL, "linux")
                && it.requirements.allows(ARCH_LABEL, "amd64")
        })
        .collect();
    types.sort_by(|a, b| a.offerings[0].price.total_cmp(&b.offerings[0].price));
    types
}

fn catalog() -> Vec<Arc<InstanceType>> {
    fake::instance_types_assorted()
        .into_iter()
        .map(Arc::new)
        .collect()
}

fn least_expensive(ct: &str) -> Arc<InstanceType> {
    by_price(ct)[0].clone()
}

fn most_expensive(ct: &str) -> Arc<InstanceType> {
    by_price(ct).last().unwrap().clone()
}

/// Upstream's consolidation NodePool: WhenEmptyOrUnderutilized, 100% budget, consolidateAfter 0s.
fn pool(name: &str) -> NodePoolInput {
    pool_with(name, |_| {})
}

fn pool_with(name: &str, edit: impl FnOnce(&mut karpenter_api::NodePool)) -> NodePoolInput {
    let mut np = node_pool(name).0;
    np.spec.disruption.consolidate_after = NillableDuration::from_secs(0);
    np.spec.disruption.budgets = vec![Budget {
        nodes: "100%".into(),
        ..Default::default()
    }];
    edit(&mut np);
    NodePoolInput {
        node_pool: np,
        instance_types: catalog(),
    }
}

/// A Karpenter node of `it` in `pool` with upstream's 32 CPU and 100 pods allocatable.
fn node_of(name: &str, pool: &str, it: &InstanceType, pods: Vec<Pod>) -> NodeState {
    let offering = &it.offerings[0];
    let mut labels = BTreeMap::new();
    for (k, v) in [
        (CAPACITY_TYPE_LABEL, offering.capacity_type.as_str()),
        (ZONE_LABEL, offering.zone.as_str()),
        (INSTANCE_TYPE_LABEL, it.name.as_str()),
        (HOSTNAME_LABEL, name),
        (NODE_POOL_LABEL, pool),
        (ARCH_LABEL, "amd64"),
        (OS_LABEL, "linux"),
    ] {
        labels.insert(k.to_string(), v.to_string());
    }
    let allocatable = Resources::parse(&[("cpu", "32"), ("pods", "100"), ("memory", "128Gi")]);
    NodeState {
        buffer_pods: 0,
        name: name.into(),
        node_pool: Some(pool.into()),
        labels,
        capacity: allocatable.clone(),
        allocatable,
        pods,
        initialized: true,
        ready: true,
        price: offering.price,
        created_at: at(NOW - 3600),
        last_pod_event: at(NOW - 3600),
        ..Default::default()
    }
}

fn cheap(name: &str, pods: Vec<Pod>) -> NodeState {
    node_of(name, "default", &least_expensive("on-demand"), pods)
}

fn pricey(name: &str, ct: &str, pods: Vec<Pod>) -> NodeState {
    node_of(name, "default", &most_expensive(ct), pods)
}

/// Upstream's ReplicaSet pods: labelled `app: test`, no requests.
fn pods(n: usize) -> Vec<Pod> {
    (0..n)
        .map(|i| {
            let mut p = pod().labels(&[("app", "test")]).build();
            p.metadata.name = Some(format!("pod-{i}"));
            p
        })
        .collect()
}

fn annotated(mut p: Pod, key: &str, value: &str) -> Pod {
    p.metadata
        .annotations
        .get_or_insert_default()
        .insert(key.into(), value.into());
    p
}

fn started(mut p: Pod, seconds_ago: i64) -> Pod {
    p.status.get_or_insert_default().start_time =
        Some(Time(Timestamp::from_second(NOW - seconds_ago).unwrap()));
    p
}

struct Cluster {
    nodes: Vec<NodeState>,
    pools: Vec<NodePoolInput>,
    pdbs: Vec<PodDisruptionBudget>,
    pending: Vec<Pod>,
    spot_to_spot: bool,
}

impl Cluster {
    fn new(nodes: Vec<NodeState>) -> Self {
        Self {
            nodes,
            pools: vec![pool("default")],
            pdbs: Vec::new(),
            pending: Vec::new(),
            spot_to_spot: true,
        }
    }

    fn decide(&self) -> Decision {
        decide(&Input {
            now: at(NOW),
            nodes: &self.nodes,
            node_pools: &self.pools,
            pdbs: &self.pdbs,
            pending_pods: &self.pending,
            daemonset_pods: &[],
            options: SchedulerOptions {
                provider_labels: fake::provider_labels(),
                ..Default::default()
            },
            spot_to_spot: self.spot_to_spot,
        })
    }
}

/// The single command's candidates and its number of replacements.
fn outcome(d: &Decision) -> Option<(Vec<String>, usize)> {
    assert!(d.commands.len() <= 1, "{:?}", d.commands);
    d.commands
        .first()
        .map(|c| (c.candidates.clone(), c.replacements.len()))
}

fn names(names: &[&str]) -> Vec<String> {
    names.iter().map(|s| s.to_string()).collect()
}

// ---- Delete ----

#[test]
fn can_delete_nodes() {
    let p = pods(3);
    let c = Cluster::new(vec![
        cheap("node-0", vec![p[0].clone(), p[1].clone()]),
        cheap("node-1", vec![p[2].clone()]),
    ]);
    // The node with one pod is cheaper to disrupt; its pod fits on the other node.
    assert_eq!(outcome(&c.decide()), Some((names(&["node-1"]), 0)));
}

#[test]
fn pod_churn_holds_a_node_within_consolidate_after() {
    let mut c = Cluster::new(vec![cheap("node-0", vec![]), cheap("node-1", vec![])]);
    c.pools = vec![pool_with("default", |np| {
        np.spec.disruption.consolidate_after = NillableDuration::from_secs(300)
    })];
    c.nodes[0].last_pod_event = at(NOW - 10);
    let d = c.decide();
    assert_eq!(outcome(&d), Some((names(&["node-1"]), 0)));
    assert_eq!(d.commands[0].reason, DisruptionReason::Empty);
}

#[test]
fn can_delete_nodes_if_another_nodepool_is_unusable() {
    let p = pods(3);
    let mut c = Cluster::new(vec![
        cheap("node-0", vec![p[0].clone(), p[1].clone()]),
        cheap("node-1", vec![p[2].clone()]),
    ]);
    // A second pool offers nothing at all.
    let mut other = pool("other");
    other.instance_types.clear();
    c.pools.push(other);
    assert_eq!(outcome(&c.decide()), Some((names(&["node-1"]), 0)));
}

#[test]
fn can_delete_nodes_when_non_karpenter_capacity_can_fit_pods() {
    let p = pods(1);
    let mut unmanaged = cheap("unmanaged", vec![]);
    unmanaged.node_pool = None;
    unmanaged.labels.remove(NODE_POOL_LABEL);
    let c = Cluster::new(vec![cheap("node-0", p), unmanaged]);
    assert_eq!(outcome(&c.decide()), Some((names(&["node-0"]), 0)));
}

#[test]
fn can_delete_nodes_considering_pdbs() {
    // The PDB-guarded pod pins node-1; node-0's pods move onto it instead.
    let p = pods(3);
    let guarded = {
        let mut g = p[2].clone();
        g.metadata.labels = Some(BTreeMap::from([("guarded".into(), "yes".into())]));
        g
    };
    let mut c = Cluster::new(vec![
        cheap("node-0", vec![p[0].clone(), p[1].clone()]),
        cheap("node-1", vec![guarded]),
    ]);
    c.pdbs = vec![pdb("guard", 0, &[("guarded", "yes")])];
    assert_eq!(outcome(&c.decide()), Some((names(&["node-0"]), 0)));
}

#[test]
fn can_delete_nodes_considering_do_not_disrupt_on_nodes() {
    let p = pods(3);
    let mut c = Cluster::new(vec![
        cheap("node-0", vec![p[0].clone(), p[1].clone()]),
        cheap("node-1", vec![p[2].clone()]),
    ]);
    c.nodes[1]
        .annotations
        .insert("karpenter.sh/do-not-disrupt".into(), "true".into());
    assert_eq!(outcome(&c.decide()), Some((names(&["node-0"]), 0)));
}

#[test]
fn can_delete_nodes_considering_do_not_disrupt_on_pods() {
    let p = pods(3);
    let c = Cluster::new(vec![
        cheap("node-0", vec![p[0].clone(), p[1].clone()]),
        cheap(
            "node-1",
            vec![annotated(
                p[2].clone(),
                "karpenter.sh/do-not-disrupt",
                "true",
            )],
        ),
    ]);
    assert_eq!(outcome(&c.decide()), Some((names(&["node-0"]), 0)));
}

#[test]
fn do_not_disrupt_pods_block_consolidation_even_with_a_termination_grace_period() {
    // Consolidation is graceful: a grace period does not override the annotation. Without it
    // this node would be replaced (see `can_replace_a_node_with_a_cheaper_one`).
    let mut c = Cluster::new(vec![pricey(
        "node",
        "on-demand",
        vec![annotated(
            pods(1)[0].clone(),
            "karpenter.sh/do-not-disrupt",
            "true",
        )],
    )]);
    c.pools = vec![pool_with("default", |np| {
        np.spec.template.spec.termination_grace_period =
            Some(karpenter_api::Duration::from_secs(300))
    })];
    let d = c.decide();
    assert_eq!(outcome(&d), None, "{:?}", d.commands);
    assert_eq!(d.blocked["node"].kind, Blocked::NotCandidate);
    assert!(
        d.blocked["node"].reason.contains("do-not-disrupt"),
        "{:?}",
        d.blocked
    );
}

#[test]
fn duration_do_not_disrupt_blocks_until_it_runs_out_and_bad_values_block_nothing() {
    let cases = [
        (
            "1h",
            600,
            false,
            "a 1h annotation on a pod started 10 minutes ago",
        ),
        (
            "1h",
            7200,
            true,
            "a 1h annotation on a pod started 2 hours ago",
        ),
        ("invalid", 600, true, "an unparsable value"),
    ];
    for (value, age, deletable, case) in cases {
        let p = started(
            annotated(pods(1)[0].clone(), "karpenter.sh/do-not-disrupt", value),
            age,
        );
        let c = Cluster::new(vec![cheap("node-0", vec![p]), cheap("node-1", pods(2))]);
        let d = c.decide();
        let node0_goes = d
            .commands
            .iter()
            .any(|cmd| cmd.candidates.contains(&"node-0".to_string()));
        assert_eq!(node0_goes, deletable, "{case}: {:?}", d.blocked);
    }
}

#[test]
fn pods_without_an_owner_are_moved_too() {
    let p = pods(3);
    for pod in &p {
        assert!(pod.metadata.owner_references.is_none());
    }
    let c = Cluster::new(vec![
        cheap("node-0", vec![p[0].clone(), p[1].clone()]),
        cheap("node-1", vec![p[2].clone()]),
    ]);
    assert_eq!(outcome(&c.decide()), Some((names(&["node-1"]), 0)));
}

#[test]
fn wont_delete_a_node_whose_pods_would_land_on_an_uninitialized_node() {
    let p = pods(3);
    let mut c = Cluster::new(vec![
        cheap("node-0", vec![p[0].clone(), p[1].clone()]),
        cheap("node-1", vec![p[2].clone()]),
    ]);
    c.nodes[0].initialized = false;
    let d = c.decide();
    assert_eq!(outcome(&d), None);
    assert!(
        d.blocked["node-1"].reason.contains("uninitialized"),
        "{:?}",
        d.blocked
    );
}

#[test]
fn consolidate_after_holds_candidates_until_their_window_passes() {
    let p = pods(3);
    let mut c = Cluster::new(vec![
        cheap("node-0", vec![p[0].clone(), p[1].clone()]),
        cheap("node-1", vec![p[2].clone()]),
    ]);
    c.pools = vec![pool_with("default", |np| {
        np.spec.disruption.consolidate_after = NillableDuration::from_secs(60)
    })];
    for n in &mut c.nodes {
        n.last_pod_event = at(NOW - 30);
    }
    assert_eq!(outcome(&c.decide()), None, "inside the window");
    for n in &mut c.nodes {
        n.last_pod_event = at(NOW - 120);
    }
    assert_eq!(outcome(&c.decide()), Some((names(&["node-1"]), 0)));
}

#[test]
fn pods_may_move_onto_a_node_whose_pool_never_consolidates() {
    let mut c = Cluster::new(vec![
        cheap("node-0", pods(1)),
        node_of(
            "destination",
            "never",
            &least_expensive("on-demand"),
            vec![],
        ),
    ]);
    c.pools.push(pool_with("never", |np| {
        np.spec.disruption.consolidate_after = NillableDuration::NEVER
    }));
    assert_eq!(outcome(&c.decide()), Some((names(&["node-0"]), 0)));
}

#[test]
fn a_permanently_pending_pod_does_not_stop_deletion() {
    let p = pods(3);
    let mut c = Cluster::new(vec![
        cheap("node-0", vec![p[0].clone(), p[1].clone()]),
        cheap("node-1", vec![p[2].clone()]),
    ]);
    // Nothing in the catalog offers this much CPU.
    c.pending = vec![pod().cpu("1000").build()];
    assert_eq!(outcome(&c.decide()), Some((names(&["node-1"]), 0)));
}

#[test]
fn wont_delete_nodes_if_a_running_pod_would_go_pending() {
    let big = || pod().labels(&[("app", "test")]).cpu("20").build();
    let c = Cluster::new(vec![
        cheap("node-0", vec![big()]),
        cheap("node-1", vec![big()]),
    ]);
    let d = c.decide();
    assert_eq!(outcome(&d), None, "{:?}", d.commands);
}

#[test]
fn initialized_nodes_are_considered_before_uninitialized_ones() {
    // The uninitialized node is not a candidate and takes no pods: only the initialized,
    // empty node goes.
    let mut c = Cluster::new(vec![
        cheap("initialized", vec![]),
        cheap("uninitialized", vec![]),
    ]);
    c.nodes[1].initialized = false;
    assert_eq!(outcome(&c.decide()), Some((names(&["initialized"]), 0)));
}

// ---- Replace ----

#[test]
fn can_replace_a_node_with_a_cheaper_one() {
    for ct in ["on-demand", "spot"] {
        let c = Cluster::new(vec![pricey("node", ct, pods(1))]);
        let d = c.decide();
        let cmd = &d.commands[0];
        assert_eq!(cmd.candidates, names(&["node"]), "{ct}");
        assert_eq!(cmd.replacements.len(), 1, "{ct}");
        let price = most_expensive(ct).offerings[0].price;
        assert!(
            cmd.replacements[0]
                .instance_types
                .iter()
                .all(|it| it.offerings.iter().all(|o| o.price < price)),
            "{ct}: every option is cheaper than {price}"
        );
        assert!(cmd.savings_per_hour > 0.0);
    }
}

#[test]
fn can_replace_nodes_if_another_nodepool_has_no_instance_types() {
    let mut c = Cluster::new(vec![pricey("node", "on-demand", pods(1))]);
    let mut empty = pool("empty");
    empty.instance_types.clear();
    c.pools.push(empty);
    assert_eq!(outcome(&c.decide()), Some((names(&["node"]), 1)));
}

#[test]
fn replacement_respects_pdbs_and_their_namespace() {
    let guarded = |ns: &str| {
        let mut p = pods(1);
        p[0].metadata.namespace = Some(ns.into());
        Cluster {
            pdbs: vec![pdb("guard", 0, &[("app", "test")])],
            ..Cluster::new(vec![pricey("node", "on-demand", p)])
        }
    };
    let d = guarded("default").decide();
    assert_eq!(outcome(&d), None);
    assert_eq!(
        d.blocked["node"].reason,
        "pdb prevents pod evictions (PodDisruptionBudget=[default/guard])"
    );
    // A PDB in another namespace does not cover the pod.
    assert_eq!(
        outcome(&guarded("other").decide()),
        Some((names(&["node"]), 1))
    );
}

#[test]
fn replacement_respects_do_not_disrupt() {
    let mut on_node = Cluster::new(vec![pricey("node", "on-demand", pods(1))]);
    on_node.nodes[0]
        .annotations
        .insert("karpenter.sh/do-not-disrupt".into(), "true".into());
    assert_eq!(outcome(&on_node.decide()), None);
    let on_pod = Cluster::new(vec![pricey(
        "node",
        "on-demand",
        vec![annotated(
            pods(1)[0].clone(),
            "karpenter.sh/do-not-disrupt",
            "true",
        )],
    )]);
    let d = on_pod.decide();
    assert_eq!(outcome(&d), None);
    assert_eq!(d.blocked["node"].kind, Blocked::NotCandidate);
}

#[test]
fn wont_replace_a_node_when_no_replacement_is_cheaper() {
    for ct in ["on-demand", "spot"] {
        let c = Cluster::new(vec![node_of(
            "node",
            "default",
            &least_expensive(ct),
            pods(1),
        )]);
        let d = c.decide();
        assert_eq!(outcome(&d), None, "{ct}");
        assert_eq!(d.blocked["node"].kind, Blocked::Unconsolidatable, "{ct}");
    }
}

#[test]
fn spot_to_spot_needs_the_gate() {
    let mut c = Cluster::new(vec![pricey("node", "spot", pods(1))]);
    c.spot_to_spot = false;
    let d = c.decide();
    assert_eq!(outcome(&d), None);
    assert!(
        d.blocked["node"]
            .reason
            .contains("SpotToSpotConsolidation is disabled")
    );
}

#[test]
fn spot_to_spot_replacement_offers_the_fifteen_cheapest() {
    let c = Cluster::new(vec![pricey("node", "spot", pods(1))]);
    let d = c.decide();
    let options = &d.commands[0].replacements[0].instance_types;
    assert_eq!(options.len(), 15);
    // They are the cheapest 15 spot types that fit, in price order.
    let prices: Vec<f64> = options
        .iter()
        .map(|it| {
            it.offerings
                .iter()
                .filter(|o| o.capacity_type == "spot")
                .map(|o| o.price)
                .fold(f64::MAX, f64::min)
        })
        .collect();
    assert!(prices.windows(2).all(|w| w[0] <= w[1]), "{prices:?}");
    let cheapest_spot = by_price("spot")[0].offerings[0].price;
    assert_eq!(prices[0], cheapest_spot);
}

// ---- Multi-NodeClaim ----

#[test]
fn can_merge_three_nodes_into_one() {
    for ct in ["on-demand", "spot"] {
        let p = pods(3);
        let c = Cluster::new(vec![
            pricey("node-0", ct, vec![p[0].clone()]),
            pricey("node-1", ct, vec![p[1].clone()]),
            pricey("node-2", ct, vec![p[2].clone()]),
        ]);
        let d = c.decide();
        let cmd = &d.commands[0];
        assert_eq!(cmd.candidates.len(), 3, "{ct}: {:?}", d.commands);
        assert_eq!(cmd.replacements.len(), 1, "{ct}");
        assert_eq!(cmd.method.as_str(), "multi-node consolidation");
    }
}

#[test]
fn can_merge_spot_and_on_demand_nodes_into_one() {
    let p = pods(3);
    let c = Cluster::new(vec![
        pricey("node-0", "on-demand", vec![p[0].clone()]),
        pricey("node-1", "spot", vec![p[1].clone()]),
        pricey("node-2", "on-demand", vec![p[2].clone()]),
    ]);
    let d = c.decide();
    assert_eq!(d.commands[0].candidates.len(), 3, "{:?}", d.commands);
    assert_eq!(d.commands[0].replacements.len(), 1);
}

#[test]
fn wont_merge_two_nodes_into_one_of_the_same_type() {
    for ct in ["on-demand", "spot"] {
        let p = pods(3);
        let c = Cluster::new(vec![
            node_of(
                "node-0",
                "default",
                &least_expensive(ct),
                vec![p[0].clone()],
            ),
            node_of(
                "node-1",
                "default",
                &least_expensive(ct),
                vec![p[1].clone(), p[2].clone()],
            ),
        ]);
        // node-0's pod moves onto node-1: a delete, not a replacement of the same type.
        assert_eq!(outcome(&c.decide()), Some((names(&["node-0"]), 0)), "{ct}");
    }
}

#[test]
fn multiple_empty_nodes_go_in_one_command() {
    let c = Cluster::new(vec![
        pricey("node-0", "on-demand", vec![]),
        pricey("node-1", "on-demand", vec![]),
        pricey("node-2", "on-demand", vec![]),
    ]);
    let d = c.decide();
    assert_eq!(
        outcome(&d),
        Some((names(&["node-0", "node-1", "node-2"]), 0))
    );
    assert_eq!(d.commands[0].reason, DisruptionReason::Empty);
}

// ---- Events (the reasons people read) ----

#[test]
fn disabled_consolidation_says_why() {
    let when_empty = Cluster {
        pools: vec![pool_with("default", |np| {
            np.spec.disruption.consolidation_policy = ConsolidationPolicy::WhenEmpty
        })],
        ..Cluster::new(vec![pricey("node", "on-demand", pods(1))])
    };
    let d = when_empty.decide();
    assert_eq!(outcome(&d), None);
    assert!(
        d.blocked["node"].reason.contains("WhenEmpty"),
        "{:?}",
        d.blocked
    );
    // Upstream stays silent here: the policy's name says it all.
    assert_eq!(d.blocked["node"].kind, Blocked::Ineligible);
    assert_eq!(d.blocked["node"].kind.event_reason(), None);
    assert_eq!(d.eligible_nodes(), 0);
    let never = Cluster {
        pools: vec![pool_with("default", |np| {
            np.spec.disruption.consolidate_after = NillableDuration::NEVER
        })],
        ..Cluster::new(vec![pricey("node", "on-demand", pods(1))])
    };
    let d = never.decide();
    assert_eq!(outcome(&d), None);
    assert_eq!(
        d.blocked["node"].reason,
        "NodePool \"default\" has consolidation disabled"
    );
    assert_eq!(
        d.blocked["node"].kind.event_reason(),
        Some("Unconsolidatable")
    );
    assert_eq!(d.eligible_nodes(), 0);
    // WhenEmptyOrUnderutilized says nothing of the kind.
    let d = Cluster::new(vec![pricey("node", "on-demand", pods(1))]).decide();
    assert!(!d.blocked.contains_key("node"), "{:?}", d.blocked);
}

#[test]
fn a_candidate_without_well_known_labels_is_unconsolidatable() {
    let cases = [
        (INSTANCE_TYPE_LABEL, "Instance Type \"\" not found"),
        (
            CAPACITY_TYPE_LABEL,
            "Node does not have label \"karpenter.sh/capacity-type\"",
        ),
        (
            ZONE_LABEL,
            "Node does not have label \"topology.kubernetes.io/zone\"",
        ),
    ];
    for (label, why) in cases {
        let mut c = Cluster::new(vec![pricey("node", "on-demand", pods(1))]);
        c.nodes[0].labels.remove(label);
        let d = c.decide();
        assert_eq!(outcome(&d), None, "without {label}");
        assert_eq!(d.blocked["node"].reason, why);
        assert_eq!(d.blocked["node"].kind, Blocked::Unconsolidatable);
    }
    // A type the NodePool does not offer (any more).
    let mut c = Cluster::new(vec![pricey("node", "on-demand", pods(1))]);
    c.nodes[0]
        .labels
        .insert(INSTANCE_TYPE_LABEL.into(), "retired".into());
    assert_eq!(
        c.decide().blocked["node"].reason,
        "Instance Type \"retired\" not found"
    );
}

// ---- Node lifetime, topology ----

#[test]
fn the_node_with_the_best_savings_ratio_goes_first() {
    // Same pods, different prices: the pricier node saves more per unit of disruption.
    let p = pods(2);
    let mut c = Cluster::new(vec![
        cheap("cheap", vec![p[0].clone()]),
        pricey("pricey", "on-demand", vec![p[1].clone()]),
    ]);
    c.pools = vec![pool_with("default", |np| {
        np.spec.disruption.budgets = vec![Budget {
            nodes: "1".into(),
            ..Default::default()
        }]
    })];
    let d = c.decide();
    assert_eq!(
        d.commands[0].candidates,
        names(&["pricey"]),
        "{:?}",
        d.commands
    );
}

#[test]
fn wont_delete_a_node_if_it_would_violate_pod_anti_affinity() {
    let spread = |i: usize| {
        let mut p = pod()
            .labels(&[("app", "test")])
            .anti_affinity_to(HOSTNAME_LABEL, &[("app", "test")])
            .build();
        p.metadata.name = Some(format!("pod-{i}"));
        p
    };
    let c = Cluster::new(vec![
        cheap("node-0", vec![spread(0)]),
        cheap("node-1", vec![spread(1)]),
    ]);
    let d = c.decide();
    assert_eq!(outcome(&d), None, "{:?}", d.commands);
}

#[test]
fn can_replace_a_node_maintaining_zonal_spread() {
    let zone_of = |n: &NodeState| n.labels[ZONE_LABEL].clone();
    let spread = |i: usize| {
        let mut p = pod()
            .labels(&[("app", "test")])
            .spread(ZONE_LABEL, 1, "DoNotSchedule", &[("app", "test")])
            .build();
        p.metadata.name = Some(format!("pod-{i}"));
        p
    };
    // One pod per zone; the zone-1 node is the priciest type and can be replaced in place.
    let zones = ["test-zone-1", "test-zone-2", "test-zone-3"];
    let mut nodes = Vec::new();
    for (i, zone) in zones.iter().enumerate() {
        let mut in_zone = by_price("on-demand")
            .into_iter()
            .filter(|it| it.offerings[0].zone == *zone);
        let it = if i == 0 {
            in_zone.last().unwrap()
        } else {
            in_zone.next().unwrap()
        };
        nodes.push(node_of(
            &format!("node-{i}"),
            "default",
            &it,
            vec![spread(i)],
        ));
    }
    let c = Cluster::new(nodes);
    let d = c.decide();
    let cmd = &d.commands[0];
    assert_eq!(cmd.candidates, names(&["node-0"]), "{:?}", d.commands);
    assert_eq!(cmd.replacements.len(), 1);
    let replacement = &cmd.replacements[0];
    assert!(
        replacement
            .requirements
            .allows(ZONE_LABEL, &zone_of(&c.nodes[0]))
            && !replacement.requirements.allows(ZONE_LABEL, "test-zone-2"),
        "the replacement stays in the vacated zone: {:?}",
        replacement.requirements
    );
}

// ---- Reserved capacity ----

const RESERVATION_LABEL: &str = "karpenter.test.sh/reservation-id";

/// `it` with a reserved offering in its first offering's zone, priced as upstream's test does
/// (a millionth of the other), 10 instances left.
fn with_reservation(it: &InstanceType) -> InstanceType {
    let mut it = it.clone();
    let base = it.offerings[0].clone();
    it.offerings.push(karpenter_core::instancetype::Offering {
        capacity_type: "reserved".into(),
        price: base.price / 1_000_000.0,
        reservation: Some(karpenter_core::instancetype::Reservation {
            id: format!("r-{}", it.name),
            capacity: 10,
            label: RESERVATION_LABEL.into(),
        }),
        ..base
    });
    let mut cts: Vec<String> = it
        .offerings
        .iter()
        .map(|o| o.capacity_type.clone())
        .collect();
    cts.sort();
    cts.dedup();
    it.requirements.remove(CAPACITY_TYPE_LABEL);
    it.requirements
        .add(karpenter_core::scheduling::Requirement::new(
            CAPACITY_TYPE_LABEL,
            karpenter_api::Operator::In,
            &cts,
        ));
    it
}

/// The default pool with reservations for the named types.
fn reserved_pool(reserved: &[&str]) -> NodePoolInput {
    let mut p = pool("default");
    p.instance_types = catalog()
        .into_iter()
        .map(|it| {
            if reserved.contains(&it.name.as_str()) {
                Arc::new(with_reservation(&it))
            } else {
                it
            }
        })
        .collect();
    p
}

/// A node launched into `it`'s reservation.
fn reserved_node(name: &str, it: &InstanceType, pods: Vec<Pod>) -> NodeState {
    let it = with_reservation(it);
    let mut node = node_of(name, "default", &it, pods);
    let offering = it.offerings.last().unwrap();
    node.labels
        .insert(CAPACITY_TYPE_LABEL.into(), "reserved".into());
    node.labels
        .insert(RESERVATION_LABEL.into(), format!("r-{}", it.name));
    node.price = offering.price;
    node
}

/// The replacement's launch: its cheapest type's cheapest offering it allows.
fn launch_of(d: &Decision) -> (String, String, Option<String>) {
    let claim = &d.commands[0].replacements[0];
    let it = &claim.instance_types[0];
    let o = it
        .compatible_offerings(&claim.requirements)
        .min_by(|a, b| a.price.total_cmp(&b.price))
        .unwrap();
    (
        it.name.clone(),
        o.capacity_type.clone(),
        o.reservation.as_ref().map(|r| r.id.clone()),
    )
}

#[test]
fn can_consolidate_from_one_reserved_offering_to_another() {
    let (most, least) = (most_expensive("on-demand"), least_expensive("on-demand"));
    let mut c = Cluster::new(vec![reserved_node("node-0", &most, pods(1))]);
    c.pools = vec![reserved_pool(&[&most.name, &least.name])];
    let d = c.decide();
    assert_eq!(outcome(&d), Some((names(&["node-0"]), 1)));
    assert_eq!(
        launch_of(&d),
        (
            least.name.clone(),
            "reserved".into(),
            Some(format!("r-{}", least.name))
        )
    );
    let ct = d.commands[0].replacements[0]
        .requirements
        .get(CAPACITY_TYPE_LABEL)
        .unwrap();
    assert_eq!(ct.values().collect::<Vec<_>>(), ["reserved"]);
}

#[test]
fn can_consolidate_into_reserved_capacity_for_the_same_instance_pool() {
    for ct in ["on-demand", "spot"] {
        let reserved_type = most_expensive("on-demand");
        let mut c = Cluster::new(vec![pricey("node-0", ct, pods(1))]);
        c.pools = vec![reserved_pool(&[&reserved_type.name])];
        let d = c.decide();
        assert_eq!(outcome(&d), Some((names(&["node-0"]), 1)), "from {ct}");
        assert_eq!(
            launch_of(&d),
            (
                reserved_type.name.clone(),
                "reserved".into(),
                Some(format!("r-{}", reserved_type.name))
            ),
            "from {ct}"
        );
    }
}

#[test]
fn a_reserved_node_is_not_replaced_by_pricier_capacity() {
    // The cheapest type in its reservation: every other launch costs more.
    let least = least_expensive("on-demand");
    let mut c = Cluster::new(vec![reserved_node("node-0", &least, pods(1))]);
    c.pools = vec![reserved_pool(&[&least.name])];
    assert_eq!(outcome(&c.decide()), None);
}

#[test]
fn consolidation_does_not_count_on_a_reservation_with_no_capacity() {
    // The priciest on-demand node could go into its type's reservation, but that is full.
    let most = most_expensive("on-demand");
    let mut c = Cluster::new(vec![pricey("node-0", "on-demand", pods(1))]);
    let mut p = reserved_pool(&[&most.name]);
    for it in &mut p.instance_types {
        if it.name == most.name {
            let it = Arc::make_mut(it);
            let o = it.offerings.last_mut().unwrap();
            o.available = false;
            o.reservation.as_mut().unwrap().capacity = 0;
        }
    }
    c.pools = vec![p];
    let d = c.decide();
    // Replaced by a cheaper on-demand type, not into the reservation.
    assert_eq!(outcome(&d), Some((names(&["node-0"]), 1)));
    let (_, ct, id) = launch_of(&d);
    assert_ne!(ct, "reserved");
    assert_eq!(id, None);
}
