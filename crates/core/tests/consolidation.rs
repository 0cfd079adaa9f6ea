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
use karpenter_api::{
    Budget, ConsolidationPolicy, DisruptionReason, NillableDuration,
    NodeSelectorRequirementWithMinValues, Operator,
};
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

#[derive(Clone)]
struct Cluster {
    nodes: Vec<NodeState>,
    pools: Vec<NodePoolInput>,
    pdbs: Vec<PodDisruptionBudget>,
    pending: Vec<Pod>,
    spot_to_spot: bool,
    options: SchedulerOptions,
}

impl Cluster {
    fn new(nodes: Vec<NodeState>) -> Self {
        Self {
            nodes,
            pools: vec![pool("default")],
            pdbs: Vec::new(),
            pending: Vec::new(),
            spot_to_spot: true,
            options: SchedulerOptions {
                provider_labels: fake::provider_labels(),
                ..Default::default()
            },
        }
    }

    fn input(&self) -> Input<'_> {
        Input {
            now: at(NOW),
            nodes: &self.nodes,
            node_pools: &self.pools,
            pdbs: &self.pdbs,
            pending_pods: &self.pending,
            daemonset_pods: &[],
            options: self.options.clone(),
            spot_to_spot: self.spot_to_spot,
        }
    }

    fn decide(&self) -> Decision {
        decide(&self.input())
    }

    fn node_mut(&mut self, name: &str) -> &mut NodeState {
        self.nodes
            .iter_mut()
            .find(|n| n.name == name)
            .unwrap_or_else(|| panic!("no node {name}"))
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
    assert_eq!(
        d.blocked["node"].reason,
        "NodePool \"default\" has consolidation policy WhenEmpty, but node is not empty"
    );
    // As upstream, an `Unconsolidatable` event says so; the node is not eligible.
    assert_eq!(d.blocked["node"].kind, Blocked::Disabled);
    assert_eq!(
        d.blocked["node"].kind.event_reason(),
        Some("Unconsolidatable")
    );
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

// ---- Upstream's remaining cases: builders ----

const DO_NOT_DISRUPT: &str = "karpenter.sh/do-not-disrupt";

/// `n` ReplicaSet pods named `{prefix}-{i}`, requesting `cpu` (none if empty).
fn pods_named(prefix: &str, n: usize, cpu: &str) -> Vec<Pod> {
    (0..n)
        .map(|i| {
            let b = pod().labels(&[("app", "test")]);
            let mut p = if cpu.is_empty() { b } else { b.cpu(cpu) }.build();
            p.metadata.name = Some(format!("{prefix}-{i}"));
            p
        })
        .collect()
}

/// Sets every NodePool's budget to `nodes`.
fn set_budget(pools: &mut [NodePoolInput], nodes: &str) {
    for p in pools {
        p.node_pool.spec.disruption.budgets = vec![Budget {
            nodes: nodes.into(),
            ..Default::default()
        }];
    }
}

/// Adds a requirement with `minValues` to a NodePool.
fn require_min(
    np: &mut karpenter_api::NodePool,
    key: &str,
    op: Operator,
    values: &[&str],
    min: i32,
) {
    np.spec
        .template
        .spec
        .requirements
        .push(NodeSelectorRequirementWithMinValues {
            key: key.into(),
            operator: op,
            values: values.iter().map(|s| s.to_string()).collect(),
            min_values: Some(min),
        });
}

/// A 4-CPU type with one offering per `(capacity type, zone, price)`.
fn priced(name: &str, offerings: &[(&str, &str, f64)]) -> Arc<InstanceType> {
    Arc::new(
        fake::FakeInstanceType::new(name)
            .offerings(offerings)
            .build(),
    )
}

/// `n` types `{ct}-{i}` with one `ct` offering in test-zone-1 at 1.0 + 0.1 i (upstream's
/// spot-to-spot catalogs).
fn ladder(ct: &str, n: usize) -> Vec<Arc<InstanceType>> {
    (0..n)
        .map(|i| {
            priced(
                &format!("{ct}-{i}"),
                &[(ct, "test-zone-1", 1.0 + 0.1 * i as f64)],
            )
        })
        .collect()
}

/// Option names of the single command's replacement.
fn options_of(d: &Decision) -> Vec<String> {
    d.commands[0].replacements[0]
        .instance_types
        .iter()
        .map(|it| it.name.clone())
        .collect()
}

/// Passes until nothing more is decided, each command's candidates marked deleting (as the
/// orchestrator does once it acts): the nodes removed in all, and the first command's size.
fn run_until_settled(c: &mut Cluster) -> (Option<usize>, usize) {
    let mut first = None;
    let mut removed = 0;
    for _ in 0..20 {
        let d = c.decide();
        let Some(cmd) = d.commands.first() else { break };
        first.get_or_insert(cmd.candidates.len());
        removed += cmd.candidates.len();
        for name in &cmd.candidates {
            c.node_mut(name).deleting = true;
        }
    }
    (first, removed)
}

// ---- Budgets ----

/// Upstream's budget table: 10 nodes of the priciest type in one NodePool, or 3 in each of 10.
#[test]
fn budgets_cap_what_each_method_takes() {
    let one_pool = |pods: &dyn Fn(usize) -> Vec<Pod>| {
        Cluster::new(
            (0..10)
                .map(|i| pricey(&format!("node-{i}"), "on-demand", pods(i)))
                .collect(),
        )
    };
    let ten_pools = || {
        let mut nodes = Vec::new();
        let mut pools = Vec::new();
        for p in 0..10 {
            let name = format!("pool-{p}");
            for i in 0..3 {
                nodes.push(node_of(
                    &format!("{name}-node-{i}"),
                    &name,
                    &most_expensive("on-demand"),
                    vec![],
                ));
            }
            pools.push(pool(&name));
        }
        Cluster {
            pools,
            ..Cluster::new(nodes)
        }
    };
    let empty = |_: usize| Vec::new();
    // 100m each: all ten fit on one node, so multi-node consolidation would take nine.
    let small = |i: usize| pods_named(&format!("small-{i}"), 1, "100m");
    // 15 CPU each: two fit on a 32-CPU node.
    let large = |i: usize| pods_named(&format!("large-{i}"), 1, "15");
    // (case, cluster, budget, the first command's size, removed once settled)
    let cases: Vec<(&str, Cluster, &str, Option<usize>, usize)> = vec![
        (
            "should only allow 3 empty nodes to be disrupted",
            one_pool(&empty),
            "30%",
            Some(3),
            3,
        ),
        (
            "should allow all empty nodes to be disrupted",
            one_pool(&empty),
            "100%",
            Some(10),
            10,
        ),
        (
            "should allow no empty nodes to be disrupted",
            one_pool(&empty),
            "0%",
            None,
            0,
        ),
        (
            "should only allow 3 nodes to be deleted in multi node consolidation delete",
            one_pool(&small),
            "30%",
            Some(3),
            3,
        ),
        (
            "should only allow 3 nodes to be deleted in single node consolidation delete",
            one_pool(&large),
            "30%",
            None,
            3,
        ),
        (
            "should allow 2 nodes from each nodePool to be deleted",
            ten_pools(),
            "50%",
            Some(20),
            20,
        ),
        (
            "should allow all nodes from each nodePool to be deleted",
            ten_pools(),
            "100%",
            Some(30),
            30,
        ),
        (
            "should allow no nodes from each nodePool to be deleted",
            ten_pools(),
            "0%",
            None,
            0,
        ),
    ];
    for (case, mut c, budget, first, removed) in cases {
        set_budget(&mut c.pools, budget);
        let (got_first, got_removed) = run_until_settled(&mut c);
        if first.is_some() || removed == 0 {
            assert_eq!(got_first, first, "{case}: first command");
        }
        assert_eq!(got_removed, removed, "{case}: removed in all");
    }
}

/// A budget of 0% leaves every candidate blocked by the budget, so a later pass tries again
/// (upstream: the method is not marked consolidated). We keep no such mark: each pass decides
/// afresh, and the nodes say why they stay.
#[test]
fn candidates_held_by_a_budget_say_so() {
    let one_pool = |pods: bool| {
        Cluster::new(
            (0..10)
                .map(|i| {
                    let p = if pods {
                        pods_named(&format!("p{i}"), 1, "1")
                    } else {
                        vec![]
                    };
                    pricey(&format!("node-{i}"), "on-demand", p)
                })
                .collect(),
        )
    };
    let ten_pools = |pods: bool| {
        let mut nodes = Vec::new();
        let mut pools = Vec::new();
        for p in 0..10 {
            let name = format!("pool-{p}");
            for i in 0..3 {
                let ps = if pods {
                    pods_named(&format!("{name}-p{i}"), 1, "1")
                } else {
                    vec![]
                };
                nodes.push(node_of(
                    &format!("{name}-node-{i}"),
                    &name,
                    &most_expensive("on-demand"),
                    ps,
                ));
            }
            pools.push(pool(&name));
        }
        Cluster {
            pools,
            ..Cluster::new(nodes)
        }
    };
    let cases = [
        (
            "empty nodes held by the budget of one NodePool",
            one_pool(false),
        ),
        (
            "empty nodes held by the budgets of many NodePools",
            ten_pools(false),
        ),
        (
            "nodes with pods held by the budget of one NodePool",
            one_pool(true),
        ),
        (
            "nodes with pods held by the budgets of many NodePools",
            ten_pools(true),
        ),
    ];
    for (case, mut c) in cases {
        set_budget(&mut c.pools, "0%");
        let d = c.decide();
        assert!(d.commands.is_empty(), "{case}: {:?}", d.commands);
        for n in &c.nodes {
            assert_eq!(
                d.blocked[&n.name].kind,
                Blocked::Budget,
                "{case}: {}",
                n.name
            );
        }
        // Budget-held nodes count as eligible, as upstream's gauge counts them.
        assert_eq!(d.eligible_nodes(), c.nodes.len(), "{case}");
    }
}

// ---- Metrics ----

#[test]
fn eligible_nodes_count_what_consolidation_may_take() {
    let blocked = Cluster::new(vec![pricey(
        "node",
        "on-demand",
        vec![annotated(pods(1)[0].clone(), DO_NOT_DISRUPT, "true")],
    )]);
    let underutilized = |c: &Cluster| {
        let d = c.decide();
        let by_reason = karpenter_core::disruption::eligible_by_reason(&c.input(), &d);
        by_reason
            .iter()
            .find(|(reason, _)| *reason == "underutilized")
            .map(|(_, n)| *n)
    };
    assert_eq!(underutilized(&blocked), Some(0), "a do-not-disrupt pod");
    let free = Cluster::new(vec![pricey("node", "on-demand", pods(1))]);
    assert_eq!(underutilized(&free), Some(1), "the annotation removed");
}

// ---- Validation after the wait (TTL, and the metrics of invalidated commands) ----

/// A command decided over the cluster, then validated against it after `change` (what the
/// wait brought). `Err(None)`: invalid for whatever reason.
#[test]
fn held_commands_are_validated_after_the_wait() {
    use karpenter_core::disruption::{InvalidKind, Method, validate};
    type Change = Box<dyn Fn(&mut Cluster)>;
    let bind = |c: &mut Cluster, node: &str, p: Pod| {
        let n = c.node_mut(node);
        n.pods.push(p);
        n.last_pod_event = at(NOW);
    };
    let dnd = |name: &str| annotated(pods_named(name, 1, "")[0].clone(), DO_NOT_DISRUPT, "true");
    let guarded = |name: &str| {
        let mut p = pods_named(name, 1, "").remove(0);
        p.metadata.labels = Some(BTreeMap::from([("guarded".into(), "yes".into())]));
        p
    };
    let empty = || Cluster::new(vec![pricey("node", "on-demand", vec![])]);
    let three_empty = || {
        Cluster::new(
            (0..3)
                .map(|i| pricey(&format!("node-{i}"), "on-demand", vec![]))
                .collect(),
        )
    };
    let merge = |split: (usize, usize)| {
        Cluster::new(vec![
            pricey("node-0", "on-demand", pods_named("a", split.0, "")),
            pricey("node-1", "on-demand", pods_named("b", split.1, "")),
        ])
    };
    let replace =
        |cpu: &str| Cluster::new(vec![pricey("node", "on-demand", pods_named("p", 1, cpu))]);
    // Pods changing within consolidateAfter make a node no candidate. (Upstream's suite uses
    // 0s and its test validator; with 0s our nodes stay consolidatable when a pod binds, so
    // 30s here, the last pod events an hour old.)
    let settling = |mut c: Cluster| {
        for p in &mut c.pools {
            p.node_pool.spec.disruption.consolidate_after = NillableDuration::from_secs(30);
        }
        c
    };
    let no_budget: Change = Box::new(|c: &mut Cluster| set_budget(&mut c.pools, "0%"));
    let nominate = |node: &'static str| -> Change {
        Box::new(move |c: &mut Cluster| c.node_mut(node).nominated = true)
    };
    let churn = |node: &'static str| -> Change {
        Box::new(move |c: &mut Cluster| bind(c, node, pods_named("churn", 1, "100m").remove(0)))
    };
    let block_pdb = |c: &mut Cluster| c.pdbs = vec![pdb("guard", 0, &[("guarded", "yes")])];
    type Case = (
        &'static str,
        Cluster,
        Method,
        Change,
        Result<Vec<&'static str>, Option<InvalidKind>>,
    );
    let cases: Vec<Case> = vec![
        (
            "emptiness, a budget blocks the candidate",
            empty(),
            Method::Emptiness,
            no_budget,
            Err(Some(InvalidKind::Budget)),
        ),
        (
            "emptiness, pod churn",
            empty(),
            Method::Emptiness,
            churn("node"),
            Err(Some(InvalidKind::Churn)),
        ),
        (
            "emptiness, the candidate is nominated",
            empty(),
            Method::Emptiness,
            nominate("node"),
            Err(None),
        ),
        (
            "multi-node, budgets block the candidates",
            merge((1, 1)),
            Method::MultiNodeConsolidation,
            Box::new(|c: &mut Cluster| set_budget(&mut c.pools, "0%")),
            Err(Some(InvalidKind::Budget)),
        ),
        (
            "multi-node, pod churn",
            settling(merge((1, 1))),
            Method::MultiNodeConsolidation,
            churn("node-0"),
            Err(Some(InvalidKind::Churn)),
        ),
        (
            "multi-node, a candidate is nominated",
            merge((1, 1)),
            Method::MultiNodeConsolidation,
            nominate("node-0"),
            Err(None),
        ),
        (
            "single-node, a budget blocks the candidate",
            replace(""),
            Method::SingleNodeConsolidation,
            Box::new(|c: &mut Cluster| set_budget(&mut c.pools, "0%")),
            Err(Some(InvalidKind::Budget)),
        ),
        (
            "single-node, pod churn",
            settling(replace("")),
            Method::SingleNodeConsolidation,
            churn("node"),
            Err(Some(InvalidKind::Churn)),
        ),
        (
            "single-node, the candidate is nominated",
            replace(""),
            Method::SingleNodeConsolidation,
            nominate("node"),
            Err(None),
        ),
        (
            "the wait passes and the delete goes ahead",
            Cluster::new(vec![
                cheap("node-0", pods_named("a", 2, "")),
                cheap("node-1", pods_named("b", 1, "")),
            ]),
            Method::SingleNodeConsolidation,
            Box::new(|_: &mut Cluster| {}),
            Ok(vec!["node-1"]),
        ),
        (
            "a second pod needs other instance types after the wait",
            replace("1"),
            Method::SingleNodeConsolidation,
            Box::new(move |c: &mut Cluster| {
                bind(c, "node", pods_named("second", 1, "1").remove(0))
            }),
            Err(Some(InvalidKind::Scheduling)),
        ),
        (
            "an empty node gets a do-not-disrupt pod during the wait",
            empty(),
            Method::Emptiness,
            Box::new(move |c: &mut Cluster| bind(c, "node", dnd("late"))),
            Err(Some(InvalidKind::Churn)),
        ),
        (
            "a do-not-disrupt pod schedules on the node to replace",
            replace(""),
            Method::SingleNodeConsolidation,
            Box::new(move |c: &mut Cluster| bind(c, "node", dnd("late"))),
            Err(Some(InvalidKind::Churn)),
        ),
        (
            "a pod with a blocking PDB schedules on the node to replace",
            replace(""),
            Method::SingleNodeConsolidation,
            Box::new(move |c: &mut Cluster| {
                bind(c, "node", guarded("late"));
                block_pdb(c);
            }),
            Err(Some(InvalidKind::Churn)),
        ),
        (
            "do-not-disrupt pods schedule on the nodes to delete",
            merge((1, 1)),
            Method::MultiNodeConsolidation,
            Box::new(move |c: &mut Cluster| {
                bind(c, "node-0", dnd("late-0"));
                bind(c, "node-1", dnd("late-1"));
            }),
            Err(Some(InvalidKind::Churn)),
        ),
        (
            "pods with a blocking PDB schedule on the nodes to delete",
            merge((1, 1)),
            Method::MultiNodeConsolidation,
            Box::new(move |c: &mut Cluster| {
                bind(c, "node-0", guarded("late-0"));
                bind(c, "node-1", guarded("late-1"));
                block_pdb(c);
            }),
            Err(Some(InvalidKind::Churn)),
        ),
        (
            "the wait passes and the merge goes ahead",
            merge((2, 1)),
            Method::MultiNodeConsolidation,
            Box::new(|_: &mut Cluster| {}),
            Ok(vec!["node-0", "node-1"]),
        ),
        (
            "the wait passes and the empty nodes go together",
            three_empty(),
            Method::Emptiness,
            Box::new(|_: &mut Cluster| {}),
            Ok(vec!["node-0", "node-1", "node-2"]),
        ),
    ];
    for (case, mut c, method, change, expected) in cases {
        for n in &mut c.nodes {
            n.last_pod_event = at(NOW - 3600);
        }
        let d = c.decide();
        let decided = d
            .commands
            .first()
            .unwrap_or_else(|| panic!("{case}: nothing decided: {:?}", d.blocked))
            .clone();
        assert_eq!(decided.method, method, "{case}: {decided:?}");
        change(&mut c);
        let outcome = validate(&c.input(), &decided).map(|cmd| {
            let mut names = cmd.candidates;
            names.sort();
            names
        });
        match (outcome, expected) {
            (Ok(got), Ok(want)) => assert_eq!(got, names(&want), "{case}"),
            (Err(invalid), Err(Some(kind))) => assert_eq!(invalid.kind, kind, "{case}: {invalid}"),
            (Err(_), Err(None)) => {}
            (got, want) => panic!("{case}: got {got:?}, want {want:?}"),
        }
    }
}

/// Upstream goes on to single-node consolidation in the same pass when a merge fails
/// validation: node-2 goes alone. We abandon the held command and the next pass decides afresh
/// over the cluster as it now is: the three nodes, with the pods that came, still fit on one
/// cheaper node, so they merge again.
#[test]
fn after_a_merge_fails_validation_the_next_pass_decides_afresh() {
    use karpenter_core::disruption::validate;
    for ct in ["on-demand", "spot"] {
        let mut c = Cluster::new(
            (0..3)
                .map(|i| {
                    pricey(
                        &format!("node-{i}"),
                        ct,
                        pods_named(&format!("p{i}"), 1, ""),
                    )
                })
                .collect(),
        );
        let decided = c.decide().commands.remove(0);
        assert_eq!(decided.candidates.len(), 3, "{ct}: {decided:?}");
        // During the wait, 1-CPU pods bind to node-0 and node-1.
        for (node, name) in [("node-0", "late-0"), ("node-1", "late-1")] {
            c.node_mut(node).pods.extend(pods_named(name, 1, "1"));
        }
        assert!(validate(&c.input(), &decided).is_err(), "{ct}");
        let d = c.decide();
        let cmd = &d.commands[0];
        assert_eq!(cmd.method.as_str(), "multi-node consolidation", "{ct}");
        let mut merged = cmd.candidates.clone();
        merged.sort();
        assert_eq!(merged, names(&["node-0", "node-1", "node-2"]), "{ct}");
        assert_eq!(cmd.replacements.len(), 1, "{ct}");
        // The new decision is valid now.
        assert!(validate(&c.input(), cmd).is_ok(), "{ct}");
    }
}

// ---- Replace ----

#[test]
fn spot_to_spot_orders_by_price_and_keeps_min_values() {
    // 18 spot types at 1.0, 1.1, …; spot-16 marked down to 0.001; the node is spot-17.
    let catalog = || {
        let mut types = ladder("spot", 18);
        types[16] = priced("spot-16", &[("spot", "test-zone-1", 0.001)]);
        types
    };
    // (case, minValues on instance types, how many options the replacement lists)
    let cases = [
        ("without minValues", None, 15),
        ("minValues 16, above the default", Some(16), 16),
        ("minValues 10, below the default", Some(10), 15),
    ];
    for (case, min, listed) in cases {
        let types = catalog();
        let mut c = Cluster::new(vec![node_of("node", "default", &types[17], pods(1))]);
        c.pools[0].instance_types = types.clone();
        if let Some(min) = min {
            require_min(
                &mut c.pools[0].node_pool,
                INSTANCE_TYPE_LABEL,
                Operator::Exists,
                &[],
                min,
            );
        }
        let d = c.decide();
        assert_eq!(
            outcome(&d),
            Some((names(&["node"]), 1)),
            "{case}: {:?}",
            d.blocked
        );
        let options = options_of(&d);
        assert_eq!(options.len(), listed, "{case}: {options:?}");
        // The cheapest options by price: spot-16, then spot-0, spot-1, …
        let mut expected = vec!["spot-16".to_string()];
        expected.extend((0..listed - 1).map(|i| format!("spot-{i}")));
        let mut sorted = options.clone();
        sorted.sort();
        expected.sort();
        assert_eq!(sorted, expected, "{case}");
        assert!(!options.contains(&"spot-17".to_string()), "{case}");
    }
}

#[test]
fn spot_to_spot_needs_fifteen_cheaper_options() {
    // (case, catalog size, the node's rank by price, cheaper options)
    let cases = [
        ("fewer than 15 types in all", 5, 4, 4),
        ("the node is among the 15 cheapest", 20, 1, 1),
    ];
    for (case, size, rank, cheaper) in cases {
        let types = ladder("spot", size);
        let mut c = Cluster::new(vec![node_of("node", "default", &types[rank], pods(1))]);
        c.pools[0].instance_types = types;
        let d = c.decide();
        assert_eq!(outcome(&d), None, "{case}");
        assert_eq!(
            d.blocked["node"].reason,
            format!(
                "SpotToSpotConsolidation requires 15 cheaper instance type options than the current candidate to consolidate, got {cheaper}"
            ),
            "{case}"
        );
    }
}

#[test]
fn a_replacement_must_keep_min_values_after_the_price_filter() {
    for ct in ["on-demand", "spot"] {
        // minValues 16, but only 15 types are cheaper than the node.
        let types = ladder(ct, 18);
        let mut c = Cluster::new(vec![node_of("node", "default", &types[15], pods(1))]);
        c.pools[0].instance_types = types;
        require_min(
            &mut c.pools[0].node_pool,
            INSTANCE_TYPE_LABEL,
            Operator::Exists,
            &[],
            16,
        );
        let d = c.decide();
        assert_eq!(outcome(&d), None, "{ct}: {:?}", d.commands);
        assert_eq!(
            d.blocked["node"].reason,
            "Filtering by price: minValues requirement is not met for label(s) (label(s)=[node.kubernetes.io/instance-type])",
            "{ct}"
        );
    }
}

#[test]
fn unmet_min_values_after_dropping_the_same_type_is_no_panic() {
    // Two on-demand types of 5 CPU; three nodes of the pricier one with 4 CPU allocatable and
    // 2-CPU pods (1, 1 and 2 of them); minValues 2 on instance types.
    let five_cpu = |name: &str, price: f64| {
        Arc::new(
            fake::FakeInstanceType::new(name)
                .resources(&[("cpu", "5")])
                .offerings(&[("on-demand", "test-zone-1a", price)])
                .build(),
        )
    };
    let types = vec![
        five_cpu("current-on-demand", 0.5),
        five_cpu("other-on-demand", 0.4),
    ];
    let node = |name: &str, pods: Vec<Pod>| {
        let mut n = node_of(name, "default", &types[0], pods);
        n.allocatable = Resources::parse(&[("cpu", "4"), ("pods", "100"), ("memory", "4Gi")]);
        n.capacity = n.allocatable.clone();
        n
    };
    let mut c = Cluster::new(vec![
        node("node-0", pods_named("a", 1, "2")),
        node("node-1", pods_named("b", 1, "2")),
        node("node-2", pods_named("c", 2, "2")),
    ]);
    c.pools[0].instance_types = types.clone();
    c.pools[0].node_pool.spec.template.spec.requirements.clear();
    require_min(
        &mut c.pools[0].node_pool,
        INSTANCE_TYPE_LABEL,
        Operator::Exists,
        &[],
        2,
    );
    c.pools[0].node_pool.spec.template.spec.requirements.push(
        NodeSelectorRequirementWithMinValues {
            key: CAPACITY_TYPE_LABEL.into(),
            operator: Operator::In,
            values: vec!["on-demand".into()],
            min_values: None,
        },
    );
    let (first, removed) = run_until_settled(&mut c);
    assert_eq!(first, Some(1), "one node goes");
    assert_eq!(removed, 1);
}

#[test]
fn no_replacement_when_an_allowed_offering_would_cost_more() {
    // The node runs on an offering no longer available at 0.5.
    let current = || {
        let mut it = (*priced("current-on-demand", &[("on-demand", "test-zone-1a", 0.5)])).clone();
        it.offerings[0].available = false;
        Arc::new(it)
    };
    let cases = [
        (
            "won't replace node if any spot replacement is more expensive",
            priced(
                "potential-spot-replacement",
                &[
                    ("spot", "test-zone-1a", 1.0),
                    ("spot", "test-zone-1b", 0.2),
                    ("spot", "test-zone-1c", 0.4),
                ],
            ),
            false,
        ),
        (
            "won't replace on-demand node if on-demand replacement is more expensive",
            priced(
                "on-demand-replacement",
                &[
                    ("on-demand", "test-zone-1a", 0.6),
                    ("on-demand", "test-zone-1b", 0.6),
                    ("spot", "test-zone-1b", 0.2),
                    ("spot", "test-zone-1c", 0.3),
                ],
            ),
            true,
        ),
    ];
    for (case, replacement, on_demand_only) in cases {
        let current = current();
        let mut n = node_of("node", "default", &current, pods(1));
        n.labels.insert(ZONE_LABEL.into(), "test-zone-1a".into());
        n.labels
            .insert(CAPACITY_TYPE_LABEL.into(), "on-demand".into());
        let mut c = Cluster::new(vec![n]);
        c.pools[0].instance_types = vec![current, replacement];
        if on_demand_only {
            c.pools[0].node_pool.spec.template.spec.requirements =
                vec![NodeSelectorRequirementWithMinValues {
                    key: CAPACITY_TYPE_LABEL.into(),
                    operator: Operator::In,
                    values: vec!["on-demand".into()],
                    min_values: None,
                }];
        }
        let d = c.decide();
        assert_eq!(outcome(&d), None, "{case}: {:?}", d.commands);
        assert_eq!(d.blocked["node"].kind, Blocked::Unconsolidatable, "{case}");
    }
}

#[test]
fn replacements_hold_for_spot_and_on_demand_alike() {
    for ct in ["on-demand", "spot"] {
        // Another NodePool returns no instance types.
        let mut c = Cluster::new(vec![pricey("node", ct, pods(1))]);
        let mut empty = pool("empty");
        empty.instance_types.clear();
        c.pools.push(empty);
        let d = c.decide();
        assert_eq!(
            outcome(&d),
            Some((names(&["node"]), 1)),
            "{ct}: another pool without types"
        );
        assert!(!options_of(&d).contains(&most_expensive(ct).name), "{ct}");
        // A PDB allowing no disruption over all three pods holds the node.
        let mut c = Cluster::new(vec![pricey("node", ct, pods(3))]);
        c.pdbs = vec![pdb("guard", 0, &[("app", "test")])];
        assert_eq!(outcome(&c.decide()), None, "{ct}: PDB");
        // One in another namespace does not.
        let mut p = pods(1);
        p[0].metadata.namespace = Some("other".into());
        let mut c = Cluster::new(vec![pricey("node", ct, p)]);
        c.pdbs = vec![pdb("guard", 0, &[("app", "test")])];
        assert_eq!(
            outcome(&c.decide()),
            Some((names(&["node"]), 1)),
            "{ct}: PDB namespace"
        );
    }
}

/// A do-not-disrupt node (or a node with a do-not-disrupt pod) stays; the other, whose pods
/// do not fit on it, is replaced.
#[test]
fn do_not_disrupt_keeps_its_node_while_another_is_replaced() {
    for ct in ["on-demand", "spot"] {
        for on_pod in [false, true] {
            let case = format!(
                "{ct}, annotation on the {}",
                if on_pod { "pod" } else { "node" }
            );
            let mut kept_pods = pods_named("kept", 1, "2");
            if on_pod {
                kept_pods[0] = annotated(kept_pods[0].clone(), DO_NOT_DISRUPT, "true");
            }
            let mut kept = pricey("kept", ct, kept_pods);
            kept.allocatable =
                Resources::parse(&[("cpu", "5"), ("pods", "100"), ("memory", "128Gi")]);
            kept.capacity = kept.allocatable.clone();
            if !on_pod {
                kept.annotations
                    .insert(DO_NOT_DISRUPT.into(), "true".into());
            }
            let c = Cluster::new(vec![pricey("node", ct, pods_named("p", 2, "2")), kept]);
            let d = c.decide();
            assert_eq!(
                outcome(&d),
                Some((names(&["node"]), 1)),
                "{case}: {:?}",
                d.blocked
            );
            assert_eq!(d.blocked["kept"].kind, Blocked::NotCandidate, "{case}");
        }
    }
}

// ---- Delete ----

#[test]
fn a_node_is_replaced_once_consolidate_after_has_passed() {
    let mut c = Cluster::new(vec![pricey("node", "on-demand", pods(1))]);
    c.pools = vec![pool_with("default", |np| {
        np.spec.disruption.consolidate_after = NillableDuration::from_secs(60)
    })];
    c.nodes[0].last_pod_event = at(NOW - 30);
    assert_eq!(outcome(&c.decide()), None, "30s into a 1m consolidateAfter");
    c.nodes[0].last_pod_event = at(NOW - 120);
    assert_eq!(
        outcome(&c.decide()),
        Some((names(&["node"]), 1)),
        "2m later"
    );
}

/// Many full 3-CPU nodes, one of them not initialized, and a 1-CPU node whose pod fits in
/// any of their spare CPU: the pod goes to an initialized one and the small node is deleted.
/// (Upstream runs 100 such nodes; 20 here.)
#[test]
fn pods_move_to_initialized_nodes_before_uninitialized_ones() {
    let default_type = Arc::new(
        fake::FakeInstanceType::new("default-instance-type")
            .resources(&[("cpu", "3"), ("memory", "3Gi"), ("pods", "110")])
            .build(),
    );
    let small_type = Arc::new(
        fake::FakeInstanceType::new("small-instance-type")
            .resources(&[("cpu", "1"), ("memory", "1Gi"), ("pods", "10")])
            .build(),
    );
    let sized = |mut n: NodeState, cpu: &str, mem: &str| {
        n.allocatable = Resources::parse(&[("cpu", cpu), ("memory", mem), ("pods", "100")]);
        n.capacity = n.allocatable.clone();
        n
    };
    let mut nodes: Vec<NodeState> = (0..20)
        .map(|i| {
            let mut p = pod()
                .labels(&[("app", "test")])
                .requests(&[("cpu", "2"), ("memory", "2Gi")])
                .build();
            p.metadata.name = Some(format!("full-{i}"));
            sized(
                node_of(&format!("node-{i}"), "default", &default_type, vec![p]),
                "3",
                "3Gi",
            )
        })
        .collect();
    nodes[7].initialized = false;
    let mut small_pod = pod()
        .labels(&[("app", "test")])
        .requests(&[("cpu", "1"), ("memory", "1Gi")])
        .build();
    small_pod.metadata.name = Some("small".into());
    nodes.push(sized(
        node_of("small", "default", &small_type, vec![small_pod]),
        "1",
        "1Gi",
    ));
    let mut c = Cluster::new(nodes);
    c.pools[0].instance_types = vec![default_type, small_type];
    let d = c.decide();
    assert_eq!(
        outcome(&d),
        Some((names(&["small"]), 0)),
        "{:?}",
        d.blocked.get("small")
    );
    assert!(
        d.blocked
            .values()
            .all(|b| !b.reason.contains("uninitialized")),
        "{:?}",
        d.blocked
    );
}

#[test]
fn nodes_whose_pods_are_pinned_by_selectors_stay() {
    // Every pod selects its node's `foo` label: none can move.
    let mut a = cheap("node-0", vec![]);
    a.labels.insert("foo".into(), "1".into());
    let mut b = cheap("node-1", vec![]);
    b.labels.insert("foo".into(), "2".into());
    let pinned = |name: &str, foo: &str| {
        let mut p = pod()
            .labels(&[("app", "test")])
            .node_selector(&[("foo", foo)])
            .build();
        p.metadata.name = Some(name.into());
        p
    };
    a.pods = vec![pinned("p0", "1"), pinned("p1", "1")];
    b.pods = vec![pinned("p2", "2")];
    let d = Cluster::new(vec![a, b]).decide();
    assert_eq!(outcome(&d), None, "{:?}", d.commands);
}

// ---- Parallelization ----

/// A replacement launching for a consolidation takes the pods that come meanwhile: nothing
/// else is launched for them.
#[test]
fn pending_pods_go_to_a_launching_replacement() {
    use karpenter_core::provisioning::scheduling::{ExistingNodeInput, Scheduler};
    let launched = least_expensive("on-demand");
    let replacement = ExistingNodeInput {
        name: "replacement".into(),
        labels: node_of("replacement", "default", &launched, vec![]).labels,
        allocatable: launched.allocatable().clone(),
        capacity: launched.capacity.clone(),
        initialized: false,
        node_pool: Some("default".into()),
        ..Default::default()
    };
    let pools = vec![pool("default")];
    let mut scheduler = Scheduler::new(
        &pools,
        std::slice::from_ref(&replacement),
        &[],
        SchedulerOptions {
            provider_labels: fake::provider_labels(),
            ..Default::default()
        },
    );
    let results = scheduler.solve(&[pod().build()], &|| false);
    assert!(
        results.new_node_claims.is_empty(),
        "{:?}",
        results.new_node_claims
    );
    assert_eq!(results.existing_nodes["replacement"], vec![0]);
}

/// The node launched for the pods of a deleting node is nominated for them: not consolidated
/// while the nomination holds.
#[test]
fn a_node_launched_for_a_deleting_nodes_pods_is_not_consolidated() {
    let mut old = pricey("old", "on-demand", pods_named("old", 5, "1"));
    old.deleting = true;
    let mut new = pricey("new", "on-demand", pods_named("moved", 2, "1"));
    new.nominated = true;
    let d = Cluster::new(vec![old, new]).decide();
    assert_eq!(outcome(&d), None, "{:?}", d.commands);
    assert_eq!(d.blocked["new"].kind, Blocked::NotCandidate);
    assert_eq!(
        d.blocked["new"].reason,
        "node is nominated for pending pods"
    );
}

// ---- Preferences and minValues policy ----

#[test]
fn ignored_preferences_do_not_hold_consolidation() {
    let ignore = SchedulerOptions {
        provider_labels: fake::provider_labels(),
        respect_preferences: false,
        ..Default::default()
    };
    // Deletion: three pods preferring apart, two on node-0, one on node-1 (5 CPU each).
    let spread = |name: &str| {
        let mut p = pod()
            .labels(&[("app", "foo")])
            .prefer_anti_affinity_to(1, HOSTNAME_LABEL, &[("app", "foo")])
            .build();
        p.metadata.name = Some(name.into());
        p
    };
    let five = |mut n: NodeState| {
        n.allocatable = Resources::parse(&[("cpu", "5"), ("pods", "100"), ("memory", "128Gi")]);
        n.capacity = n.allocatable.clone();
        n
    };
    let mut c = Cluster::new(vec![
        five(cheap("node-0", vec![spread("p0"), spread("p1")])),
        five(cheap("node-1", vec![spread("p2")])),
    ]);
    c.options = ignore.clone();
    assert_eq!(
        outcome(&c.decide()),
        Some((names(&["node-1"]), 0)),
        "deletion"
    );
    // Replacement: the pod prefers the type it runs on.
    let most = most_expensive("on-demand");
    let mut p = pod()
        .labels(&[("app", "foo")])
        .prefer(1, &[(INSTANCE_TYPE_LABEL, "In", &[most.name.as_str()])])
        .build();
    p.metadata.name = Some("p".into());
    let mut c = Cluster::new(vec![pricey("node", "on-demand", vec![p])]);
    c.options = ignore;
    let d = c.decide();
    assert_eq!(outcome(&d), Some((names(&["node"]), 1)), "replacement");
    assert!(!options_of(&d).contains(&most.name));
}

/// `MIN_VALUES_POLICY=BestEffort` relaxes `minValues` to launch, never to consolidate: the
/// one cheaper type left after the price filter does not meet it.
#[test]
fn best_effort_min_values_do_not_relax_a_consolidation() {
    let (least, most) = (least_expensive("on-demand"), most_expensive("on-demand"));
    let mut np = pool_with("min-values", |np| {
        np.spec.weight = Some(100);
        np.spec.template.spec.requirements.clear();
        require_min(
            np,
            INSTANCE_TYPE_LABEL,
            Operator::In,
            &[&least.name, &most.name],
            3,
        );
    });
    np.instance_types = vec![least.clone(), most.clone()];
    let mut n = node_of("node", "min-values", &most, pods(1));
    n.allocatable = Resources::parse(&[("cpu", "5"), ("pods", "100"), ("memory", "128Gi")]);
    let mut c = Cluster::new(vec![n]);
    c.pools = vec![np];
    c.options.strict_min_values = false;
    let d = c.decide();
    assert_eq!(outcome(&d), None, "{:?}", d.commands);
    assert_eq!(d.blocked["node"].kind, Blocked::Unconsolidatable);
    assert!(
        d.blocked["node"]
            .reason
            .contains("minValues requirement is not met for label(s) (label(s)=[node.kubernetes.io/instance-type])"),
        "{:?}",
        d.blocked
    );
}

// ---- Single-node consolidation's order ----

/// With a budget of one, single-node consolidation takes the candidate that saves the most per
/// unit of disruption first: same price, fewer pods first.
#[test]
fn single_node_consolidation_takes_the_best_savings_ratio_first() {
    let cases = [
        (
            "same price, one pod against four and nineteen",
            [1, 4, 19],
            "node-0",
        ),
        (
            "same price, the fewest pods listed last",
            [19, 4, 1],
            "node-2",
        ),
    ];
    for (case, counts, first) in cases {
        let nodes = counts
            .iter()
            .enumerate()
            .map(|(i, &n)| cheap(&format!("node-{i}"), pods_named(&format!("n{i}"), n, "")))
            .collect();
        let mut c = Cluster::new(nodes);
        set_budget(&mut c.pools, "1");
        let d = c.decide();
        assert_eq!(outcome(&d), Some((names(&[first]), 0)), "{case}");
    }
}

// ---- Balanced ----

const NOT_WORTH_IT: &str = "the Balanced policy judges the savings not worth the disruption";

fn balanced_pool(name: &str) -> NodePoolInput {
    pool_with(name, |np| {
        np.spec.disruption.consolidation_policy = ConsolidationPolicy::Balanced
    })
}

/// Room for any number of pods.
fn roomy(mut n: NodeState) -> NodeState {
    n.allocatable = Resources::parse(&[("cpu", "32"), ("pods", "10000"), ("memory", "128Gi")]);
    n.capacity = n.allocatable.clone();
    n
}

/// Whether a Balanced NodePool deletes a node costing `savings` an hour with `pods` pods (a
/// disruption of 1 + `pods`), when the pool's nodes cost `total_cost` and disrupting them all
/// would cost `total_disruption`: a do-not-disrupt node with room for the pods makes up the
/// rest of the pool. Upstream scores the same numbers directly; a delete saves exactly the
/// node's price, so every score becomes a decision here.
fn balanced_delete(savings: f64, pods: usize, total_cost: f64, total_disruption: usize) -> bool {
    let it = least_expensive("on-demand");
    let mut candidate = node_of("candidate", "balanced", &it, pods_named("c", pods, ""));
    candidate.price = savings;
    let ballast_pods = total_disruption - (1 + pods) - 1;
    let mut ballast = roomy(node_of(
        "ballast",
        "balanced",
        &it,
        pods_named("b", ballast_pods, ""),
    ));
    ballast.price = total_cost - savings;
    ballast
        .annotations
        .insert(DO_NOT_DISRUPT.into(), "true".into());
    let c = Cluster {
        pools: vec![balanced_pool("balanced")],
        ..Cluster::new(vec![candidate, ballast])
    };
    let d = c.decide();
    match outcome(&d) {
        Some((candidates, 0)) if candidates == names(&["candidate"]) => true,
        None => {
            assert_eq!(
                d.blocked["candidate"].reason, NOT_WORTH_IT,
                "{:?}",
                d.blocked
            );
            false
        }
        other => panic!("unexpected {other:?}"),
    }
}

/// Upstream's ScoreMove tables, as decisions. (savings, pods on the node, pool cost, pool
/// disruption, approved). Its RFC pool: 10 nodes costing 58.08 a day, 80 pods, disruption 90.
#[test]
fn balanced_scores_savings_against_disruption() {
    let cases = [
        (
            "should approve an oversized node consolidation",
            7.26,
            3,
            58.08,
            90,
            true,
        ),
        (
            "should approve a spare capacity delete",
            4.84,
            4,
            58.08,
            90,
            true,
        ),
        ("should reject a marginal move", 2.42, 8, 58.08, 90, false),
        (
            "should reject a well-packed node with zero savings",
            0.0,
            10,
            58.08,
            90,
            false,
        ),
        (
            "should approve a replace in a uniform pool",
            2.42,
            8,
            48.40,
            90,
            true,
        ),
        (
            "low disruption node in a heterogeneous pool",
            4.84,
            4,
            58.08,
            117,
            true,
        ),
        (
            "high disruption node in a heterogeneous pool",
            4.84,
            31,
            58.08,
            117,
            false,
        ),
        (
            "the oversized move in a pool ten times larger",
            7.26,
            3,
            580.80,
            900,
            true,
        ),
        (
            "the marginal move in a pool ten times larger",
            2.42,
            8,
            580.80,
            900,
            false,
        ),
        ("an on-demand pool's share", 4.84, 3, 48.40, 90, true),
        (
            "a spot pool's proportionally equal share",
            1.45,
            3,
            14.50,
            90,
            true,
        ),
        ("high savings low disruption", 20.0, 4, 100.0, 100, true),
        ("equal fractions", 10.0, 9, 100.0, 100, true),
        ("low savings high disruption", 5.0, 49, 100.0, 100, false),
        ("zero savings", 0.0, 9, 100.0, 100, false),
    ];
    for (case, savings, pods, cost, disruption, approved) in cases {
        assert_eq!(
            balanced_delete(savings, pods, cost, disruption),
            approved,
            "{case}"
        );
    }
}

/// A pool whose nodes cost nothing has nothing to normalize savings against: rejected.
#[test]
fn balanced_rejects_moves_in_a_pool_that_costs_nothing() {
    let it = least_expensive("on-demand");
    let mut a = node_of("a", "balanced", &it, pods_named("a", 1, ""));
    let mut b = roomy(node_of("b", "balanced", &it, vec![]));
    a.price = 0.0;
    b.price = 0.0;
    b.annotations.insert(DO_NOT_DISRUPT.into(), "true".into());
    let c = Cluster {
        pools: vec![balanced_pool("balanced")],
        ..Cluster::new(vec![a, b])
    };
    let d = c.decide();
    assert_eq!(outcome(&d), None, "{:?}", d.commands);
    assert_eq!(d.blocked["a"].kind, Blocked::Unconsolidatable);
}

/// The same marginal move under each policy: only Balanced scores it; WhenEmpty never takes a
/// node with pods.
#[test]
fn only_the_balanced_policy_scores_moves() {
    let cases = [
        ("Balanced", ConsolidationPolicy::Balanced, Some(false)),
        (
            "WhenEmptyOrUnderutilized",
            ConsolidationPolicy::WhenEmptyOrUnderutilized,
            Some(true),
        ),
        ("WhenEmpty", ConsolidationPolicy::WhenEmpty, None),
    ];
    for (case, policy, deleted) in cases {
        let it = least_expensive("on-demand");
        let mut candidate = node_of("candidate", "p", &it, pods_named("c", 8, ""));
        candidate.price = 2.42;
        let mut ballast = roomy(node_of("ballast", "p", &it, pods_named("b", 80, "")));
        ballast.price = 58.08 - 2.42;
        ballast
            .annotations
            .insert(DO_NOT_DISRUPT.into(), "true".into());
        let c = Cluster {
            pools: vec![pool_with("p", |np| {
                np.spec.disruption.consolidation_policy = policy
            })],
            ..Cluster::new(vec![candidate, ballast])
        };
        let d = c.decide();
        match deleted {
            Some(true) => assert_eq!(outcome(&d), Some((names(&["candidate"]), 0)), "{case}"),
            Some(false) => {
                assert_eq!(outcome(&d), None, "{case}");
                assert_eq!(d.blocked["candidate"].reason, NOT_WORTH_IT, "{case}");
            }
            None => {
                assert_eq!(outcome(&d), None, "{case}");
                assert_eq!(d.blocked["candidate"].kind, Blocked::Disabled, "{case}");
            }
        }
    }
}

/// The pool's totals take in every node of the pool, candidates or not: a do-not-disrupt node
/// that costs a lot makes the same move worth less; a node without a price adds its
/// disruption, never NaN.
#[test]
fn balanced_totals_count_the_whole_pool() {
    let it = least_expensive("on-demand");
    let run = |others: Vec<NodeState>| {
        // The candidate: 1.0 an hour, 3 pods (disruption 4).
        let mut candidate = node_of("candidate", "balanced", &it, pods_named("c", 3, ""));
        candidate.price = 1.0;
        let mut nodes = vec![candidate];
        nodes.extend(others.into_iter().map(|mut n| {
            n.annotations.insert(DO_NOT_DISRUPT.into(), "true".into());
            roomy(n)
        }));
        let c = Cluster {
            pools: vec![balanced_pool("balanced")],
            ..Cluster::new(nodes)
        };
        outcome(&c.decide()).is_some()
    };
    let other = |name: &str, price: f64, pods: usize| {
        let mut n = node_of(name, "balanced", &it, pods_named(name, pods, ""));
        n.price = price;
        n
    };
    let unpriced = |name: &str, price: f64, pods: usize| {
        let mut n = other(name, price, pods);
        n.labels.remove(INSTANCE_TYPE_LABEL);
        n
    };
    let cases = [
        // 1/4 of the cost for 4/5 of the disruption.
        (
            "an empty node of 3.0 beside it",
            vec![other("other", 3.0, 0)],
            false,
        ),
        // The same and a node without a price but 4 pods: 1/4 for 4/10.
        (
            "and a node without a known price with 4 pods",
            vec![other("other", 3.0, 0), unpriced("unpriced", 0.0, 4)],
            true,
        ),
        // A node whose price is not a number counts nothing towards the cost: 1/2 for 4/6.
        (
            "a node priced NaN beside a node of 1.0",
            vec![other("other", 1.0, 0), other("nan", f64::NAN, 0)],
            true,
        ),
    ];
    for (case, others, approved) in cases {
        assert_eq!(run(others), approved, "{case}");
    }
}

/// One node of ten identical ones (4.84 an hour, one pod each) saves a tenth for a tenth of
/// the disruption: score 1, approved; the only node of a pool likewise.
#[test]
fn balanced_approves_a_delete_at_par() {
    for size in [10, 1] {
        let mut nodes: Vec<NodeState> = (0..size)
            .map(|i| {
                let mut n = node_of(
                    &format!("node-{i}"),
                    "balanced",
                    &least_expensive("on-demand"),
                    pods_named(&format!("p{i}"), 1, ""),
                );
                n.price = 4.84;
                n
            })
            .collect();
        // The pods need somewhere to go: a node of another pool with room.
        let mut sink = roomy(cheap("sink", vec![]));
        sink.annotations
            .insert(DO_NOT_DISRUPT.into(), "true".into());
        nodes.push(sink);
        let mut c = Cluster {
            pools: vec![balanced_pool("balanced"), pool("default")],
            ..Cluster::new(nodes)
        };
        set_budget(&mut c.pools, "1");
        let d = c.decide();
        assert_eq!(
            d.commands.first().map(|c| c.candidates.len()),
            Some(1),
            "{size} nodes: {:?}",
            d.blocked
        );
    }
}

/// A move across a Balanced pool and another credits the Balanced pool with its share of the
/// savings; every Balanced pool in the move must approve its part.
#[test]
fn balanced_scores_each_pool_of_a_move() {
    let it = least_expensive("on-demand");
    let node = |name: &str, pool: &str, price: f64, pods: usize| {
        let mut n = roomy(node_of(name, pool, &it, pods_named(name, pods, "")));
        n.price = price;
        n
    };
    // Five nodes in each pool, one pod each: one of each pool goes in one merge, approved.
    let mut nodes = Vec::new();
    for i in 0..5 {
        nodes.push(node(&format!("b-{i}"), "balanced", 4.84, 1));
        nodes.push(node(&format!("e-{i}"), "other", 4.84, 1));
    }
    let mut c = Cluster {
        pools: vec![balanced_pool("balanced"), pool("other")],
        ..Cluster::new(nodes)
    };
    set_budget(&mut c.pools, "1");
    let d = c.decide();
    let cmd = &d.commands[0];
    assert_eq!(
        cmd.method.as_str(),
        "multi-node consolidation",
        "{:?}",
        d.commands
    );
    assert_eq!(cmd.candidates.len(), 2);
    // Pool a: uniform; pool b: a node with 40 pods beside a do-not-disrupt one costing 3.0.
    // Merging a's node with b's heavy one: b's share (1/4 of its cost for 41/43 of its
    // disruption) fails, so the move is refused and a's node goes alone.
    let two_pools = |light_price: f64| {
        let mut nodes: Vec<NodeState> = (0..10)
            .map(|i| node(&format!("a-{i}"), "a", 4.84, 1))
            .collect();
        nodes.push(node("b-heavy", "b", 1.0, 40));
        let mut light = node("b-light", "b", light_price, 1);
        light
            .annotations
            .insert(DO_NOT_DISRUPT.into(), "true".into());
        nodes.push(light);
        let mut c = Cluster {
            pools: vec![balanced_pool("a"), balanced_pool("b")],
            ..Cluster::new(nodes)
        };
        set_budget(&mut c.pools, "1");
        c.decide()
    };
    let d = two_pools(3.0);
    let cmd = &d.commands[0];
    assert_eq!(
        cmd.method.as_str(),
        "single-node consolidation",
        "{:?}",
        d.commands
    );
    assert_eq!(cmd.candidates, names(&["a-0"]));
    // Control: were b's other node free, b's share (all of its cost for 41/43) would pass
    // and the two would merge.
    let d = two_pools(0.0);
    let mut merged = d.commands[0].candidates.clone();
    merged.sort();
    assert_eq!(merged, names(&["a-0", "b-heavy"]), "{:?}", d.commands);
}

/// The savings a Balanced pool is credited are those of the offerings it may launch: an
/// on-demand pool's replacement costs its on-demand price, not a spot price it cannot use.
#[test]
fn balanced_savings_use_the_offerings_the_pool_allows() {
    let source = priced("source-type", &[("on-demand", "test-zone-1", 0.5)]);
    let dest = priced(
        "dest-type",
        &[
            ("spot", "test-zone-1", 0.1),
            ("on-demand", "test-zone-1", 0.4),
        ],
    );
    // The candidate (3 pods, disruption 4) and a full do-not-disrupt node: the pool costs
    // 1.0 and disrupting it 10. Replaced at 0.4: a tenth saved for 4/10 disrupted.
    let candidate = node_of("candidate", "balanced", &source, pods_named("c", 3, ""));
    let mut full = node_of("full", "balanced", &source, pods_named("f", 5, ""));
    full.allocatable = Resources::parse(&[("cpu", "32"), ("pods", "5"), ("memory", "128Gi")]);
    full.annotations
        .insert(DO_NOT_DISRUPT.into(), "true".into());
    let mut c = Cluster {
        pools: vec![pool_with("balanced", |np| {
            np.spec.disruption.consolidation_policy = ConsolidationPolicy::Balanced;
            np.spec.template.spec.requirements = vec![NodeSelectorRequirementWithMinValues {
                key: CAPACITY_TYPE_LABEL.into(),
                operator: Operator::In,
                values: vec!["on-demand".into()],
                min_values: None,
            }];
        })],
        ..Cluster::new(vec![candidate, full])
    };
    c.pools[0].instance_types = vec![source, dest];
    let d = c.decide();
    assert_eq!(outcome(&d), None, "{:?}", d.commands);
    assert_eq!(d.blocked["candidate"].reason, NOT_WORTH_IT);
}

/// Upstream's Balanced integration cases, through the same pass.
#[test]
fn balanced_consolidation_end_to_end() {
    let balanced = |nodes: Vec<NodeState>| Cluster {
        pools: vec![balanced_pool("default")],
        ..Cluster::new(nodes)
    };
    // An oversized node with one small pod is replaced.
    let d = balanced(vec![pricey(
        "node",
        "on-demand",
        pods_named("p", 1, "500m"),
    )])
    .decide();
    assert_eq!(outcome(&d), Some((names(&["node"]), 1)), "oversized");
    assert!(!options_of(&d).contains(&most_expensive("on-demand").name));
    // A well-packed node of the cheapest type stays.
    let d = balanced(vec![cheap("node", pods_named("p", 8, "3500m"))]).decide();
    assert_eq!(outcome(&d), None, "well-packed");
    // Three underutilized nodes merge.
    let d = balanced(
        (0..3)
            .map(|i| {
                pricey(
                    &format!("node-{i}"),
                    "on-demand",
                    pods_named(&format!("p{i}"), 1, "1"),
                )
            })
            .collect(),
    )
    .decide();
    assert!(
        d.commands[0].candidates.len() >= 2,
        "merge: {:?}",
        d.commands
    );
    // A budget of 0% blocks it all.
    let mut c = balanced(vec![pricey(
        "node",
        "on-demand",
        pods_named("p", 1, "500m"),
    )]);
    set_budget(&mut c.pools, "0%");
    let d = c.decide();
    assert_eq!(outcome(&d), None);
    assert_eq!(d.blocked["node"].kind, Blocked::Budget);
    // With a budget of one, the empty node goes before the underutilized one.
    let mut c = balanced(vec![
        pricey("empty", "on-demand", vec![]),
        pricey("underutilized", "on-demand", pods_named("p", 1, "500m")),
    ]);
    set_budget(&mut c.pools, "1");
    let d = c.decide();
    assert_eq!(outcome(&d), Some((names(&["empty"]), 0)), "priority");
    // A node whose pod fits on another is deleted, saving its whole price.
    let mid = by_price("on-demand")[by_price("on-demand").len() / 2].clone();
    let d = balanced(vec![
        node_of("a", "default", &mid, pods_named("a", 1, "1")),
        node_of("b", "default", &mid, pods_named("b", 30, "1")),
    ])
    .decide();
    let cmd = &d.commands[0];
    assert_eq!(
        (cmd.candidates.clone(), cmd.replacements.len()),
        (names(&["a"]), 0)
    );
    assert!((cmd.savings_per_hour - mid.offerings[0].price).abs() < 1e-9);
    // A node whose pod needs a new one is replaced, saving less than its price.
    let d = balanced(vec![pricey("a", "on-demand", pods_named("a", 1, "2"))]).decide();
    let cmd = &d.commands[0];
    assert_eq!(cmd.replacements.len(), 1);
    let price = most_expensive("on-demand").offerings[0].price;
    assert!(cmd.savings_per_hour > 0.0 && cmd.savings_per_hour < price);
}

/// Multi-node consolidation takes candidates by savings per unit of disruption: the moderate
/// node with one pod comes before the cheap one with eight.
#[test]
fn balanced_merges_take_the_best_ratio_first() {
    let od = by_price("on-demand");
    let (cheap_type, moderate, expensive) = (
        od.iter()
            .find(|it| it.capacity.cpu == 4000)
            .unwrap()
            .clone(),
        od[od.len() / 2].clone(),
        od.last().unwrap().clone(),
    );
    let mut small = node_of("c", "default", &cheap_type, pods_named("c", 8, "100m"));
    small.allocatable = Resources::parse(&[("cpu", "4"), ("pods", "100"), ("memory", "8Gi")]);
    let c = Cluster {
        pools: vec![balanced_pool("default")],
        ..Cluster::new(vec![
            node_of("a", "default", &expensive, pods_named("a", 10, "100m")),
            node_of("b", "default", &moderate, pods_named("b", 1, "100m")),
            small,
        ])
    };
    let d = c.decide();
    let cmd = &d.commands[0];
    let at = |n: &str| cmd.candidates.iter().position(|c| c == n);
    assert!(at("b").is_some(), "{:?}", d.commands);
    if let Some(c) = at("c") {
        assert!(at("b").unwrap() < c);
    }
}

/// A Balanced pool is scored; a WhenEmptyOrUnderutilized one beside it consolidates as usual.
#[test]
fn balanced_and_other_pools_side_by_side() {
    let mut c = Cluster::new(vec![
        node_of(
            "balanced-node",
            "balanced",
            &most_expensive("on-demand"),
            pods_named("b", 1, "500m"),
        ),
        node_of(
            "default-node",
            "default",
            &most_expensive("on-demand"),
            pods_named("d", 1, "500m"),
        ),
    ]);
    c.pools = vec![balanced_pool("balanced"), pool("default")];
    let mut removed = Vec::new();
    for _ in 0..4 {
        let d = c.decide();
        let Some(cmd) = d.commands.first() else { break };
        removed.extend(cmd.candidates.clone());
        for n in cmd.candidates.clone() {
            c.node_mut(&n).deleting = true;
        }
    }
    removed.sort();
    assert_eq!(removed, names(&["balanced-node", "default-node"]));
}

/// Single-node and multi-node consolidation order candidates by savings ratio, whatever the
/// policy: a merge lists them best first.
#[test]
fn candidates_are_ordered_by_savings_ratio_under_every_policy() {
    let cases = [
        ("Balanced", vec!["balanced"]),
        ("WhenEmptyOrUnderutilized", vec!["default"]),
        ("a Balanced pool and another", vec!["balanced", "default"]),
    ];
    for (case, pools) in cases {
        // Price / (1 + pods): 8/2, 6/3 (or 6/2), 2/2 — best first by ratio.
        let it = least_expensive("on-demand");
        let spec = [("x", 8.0, 1), ("y", 6.0, 2), ("z", 2.0, 1)];
        let mut nodes: Vec<NodeState> = spec
            .iter()
            .enumerate()
            .map(|(i, (name, price, pods))| {
                let pool = pools[i % pools.len()];
                let mut n = node_of(name, pool, &it, pods_named(name, *pods, ""));
                n.price = *price;
                n
            })
            .collect();
        let mut sink = roomy(node_of("sink", "sink", &it, vec![]));
        sink.annotations
            .insert(DO_NOT_DISRUPT.into(), "true".into());
        nodes.push(sink);
        let mut all: Vec<NodePoolInput> = pools
            .iter()
            .map(|p| {
                if *p == "balanced" {
                    balanced_pool(p)
                } else {
                    pool(p)
                }
            })
            .collect();
        all.push(pool("sink"));
        let c = Cluster {
            pools: all,
            ..Cluster::new(nodes)
        };
        let d = c.decide();
        assert_eq!(
            d.commands.first().map(|c| c.candidates.clone()),
            Some(names(&["x", "y", "z"])),
            "{case}: {:?}",
            d.blocked
        );
    }
}

/// A running node costs the price of its own offering, available for new launches or not: a
/// node on an offering no longer offered at 1.00 is not "replaced" by a 3.00 type, though its
/// type's only available offering costs 5.00.
#[test]
fn a_running_node_is_priced_by_its_offering_whatever_its_availability() {
    use support::cluster::{self, managed, on, replicated};
    let types = || {
        let mut source = fake::FakeInstanceType::new("source-type")
            .offerings(&[
                ("on-demand", "test-zone-1", 1.0),
                ("on-demand", "test-zone-2", 5.0),
            ])
            .build();
        source.offerings[0].available = false;
        let mid = fake::FakeInstanceType::new("mid-type")
            .offerings(&[
                ("on-demand", "test-zone-1", 3.0),
                ("on-demand", "test-zone-2", 3.0),
            ])
            .build();
        vec![source, mid]
    };
    for (zone, replaced) in [("test-zone-1", false), ("test-zone-2", true)] {
        let source = types().remove(0);
        let c = cluster::Cluster::with_types([node_pool("default")], types())
            .node(
                managed("node", "default", "default-instance-type")
                    .instance_type(source)
                    .zone(zone),
            )
            .pods([on("node", replicated(pod().build()))]);
        let d = c.disrupt();
        assert_eq!(
            d.commands.iter().any(|m| m.candidates == names(&["node"])),
            replaced,
            "{zone}: {:?}",
            d
        );
    }
}

/// Upstream's "can replace nodes, considers PDB policy": three pods under a PDB allowing no
/// disruption (`maxUnavailable: 0`) whose `unhealthyPodEvictionPolicy` is `AlwaysAllow`, all
/// three not Ready, do not hold their node: it is replaced by a cheaper one — on-demand, and
/// spot with spot-to-spot consolidation on. With the pods Ready, the budget holds them.
/// (Adapted: the node's type costs 5.00 and sixteen cheaper types from 1.00 can replace it,
/// as spot-to-spot needs at least fifteen cheaper options.)
#[test]
fn unhealthy_pods_under_an_always_allow_budget_do_not_hold_their_node() {
    use k8s_openapi::api::core::v1::{PodCondition, PodStatus};
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
    use support::cluster::{self, managed, named, on, replicated};
    let types = || {
        let offer = |price| {
            [
                ("on-demand", "test-zone-1", price),
                ("spot", "test-zone-1", price / 2.0),
            ]
        };
        std::iter::once(
            fake::FakeInstanceType::new("expensive-type")
                .offerings(&offer(5.0))
                .build(),
        )
        .chain((0..16).map(|i| {
            fake::FakeInstanceType::new(&format!("cheap-type-{i}"))
                .offerings(&offer(1.0 + f64::from(i) * 0.1))
                .build()
        }))
        .collect::<Vec<_>>()
    };
    for (case, capacity_type, ready, replaced) in [
        (
            "if the candidate is on-demand node",
            "on-demand",
            "False",
            true,
        ),
        ("if the candidate is spot node", "spot", "False", true),
        (
            "pods Ready: the budget holds them",
            "on-demand",
            "True",
            false,
        ),
    ] {
        let mut budget = pdb("pdb", 0, &[("app", "web")]);
        let spec = budget.spec.as_mut().unwrap();
        spec.max_unavailable = Some(IntOrString::Int(0));
        spec.unhealthy_pod_eviction_policy = Some("AlwaysAllow".into());
        let pods = (0..3).map(|i| {
            let mut p = on(
                "node",
                replicated(named(
                    &format!("p{i}"),
                    pod().labels(&[("app", "web")]).build(),
                )),
            );
            p.status = Some(PodStatus {
                phase: Some("Running".into()),
                conditions: Some(vec![PodCondition {
                    type_: "Ready".into(),
                    status: ready.into(),
                    ..Default::default()
                }]),
                ..Default::default()
            });
            p
        });
        let mut c = cluster::Cluster::with_types([node_pool("default")], types())
            .node(
                managed("node", "default", "default-instance-type")
                    .instance_type(types().remove(0))
                    .capacity_type(capacity_type),
            )
            .pods(pods)
            .pdb(budget);
        c.gates.spot_to_spot_consolidation = true;
        let d = c.disrupt();
        let replacing = d
            .commands
            .iter()
            .any(|m| m.candidates == names(&["node"]) && m.replacements.len() == 1);
        assert_eq!(replacing, replaced, "{case}: {d:?}");
    }
}
