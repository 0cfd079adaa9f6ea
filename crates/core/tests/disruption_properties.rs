//! Properties of every disruption decision, over random clusters: no command exceeds its
//! NodePool's budget, touches a node a PodDisruptionBudget or `do-not-disrupt` protects, or
//! removes capacity its pods need; consolidation always saves money; the same input gives the
//! same decision.

mod support;

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use karpenter_api::{Budget, DisruptionReason, NillableDuration};
use karpenter_core::disruption::budgets::allowed_disruptions;
use karpenter_core::disruption::{Decision, Input, NodeState, decide};
use karpenter_core::instancetype::{InstanceType, fake};
use karpenter_core::provisioning::scheduling::{NodePoolInput, SchedulerOptions};
use karpenter_core::resources::{Resources, pod_requests};
use proptest::prelude::*;
use support::*;

const NOW: i64 = 1_717_372_800 + 12 * 3600;

fn at(second: i64) -> k8s_openapi::jiff::Timestamp {
    k8s_openapi::jiff::Timestamp::from_second(second).unwrap()
}
const APPS: [&str; 3] = ["web", "db", "batch"];

#[derive(Clone, Debug)]
struct NodeSpec {
    cpus: usize,
    spot: bool,
    pods: Vec<(usize, u32)>, // (app, cpu milli)
    do_not_disrupt: bool,
}

#[derive(Clone, Debug)]
struct ClusterSpec {
    nodes: Vec<NodeSpec>,
    budget: String,
    /// Disruptions each app's PodDisruptionBudget allows (None: no PDB).
    pdb_allowed: [Option<i32>; 3],
}

fn node_spec() -> impl Strategy<Value = NodeSpec> {
    (
        prop::sample::select(vec![2usize, 4, 8, 16]),
        any::<bool>(),
        prop::collection::vec((0usize..3, 100u32..1500), 0..5),
        prop::bool::weighted(0.1),
    )
        .prop_map(|(cpus, spot, pods, do_not_disrupt)| NodeSpec {
            cpus,
            spot,
            pods,
            do_not_disrupt,
        })
}

fn cluster_spec() -> impl Strategy<Value = ClusterSpec> {
    (
        prop::collection::vec(node_spec(), 1..9),
        prop::sample::select(vec!["0", "1", "2", "10%", "50%", "100%"]),
        [
            prop::option::of(0i32..2),
            prop::option::of(0i32..2),
            prop::option::of(0i32..2),
        ],
    )
        .prop_map(|(nodes, budget, pdb_allowed)| ClusterSpec {
            nodes,
            budget: budget.into(),
            pdb_allowed,
        })
}

fn types() -> Vec<Arc<InstanceType>> {
    arc(fake::instance_types(16))
}

struct Cluster {
    nodes: Vec<NodeState>,
    pools: Vec<NodePoolInput>,
    pdbs: Vec<PodDisruptionBudget>,
}

/// Builds the cluster, leaving out pods that would not fit their node.
fn build(spec: &ClusterSpec) -> Cluster {
    let mut np = node_pool("default").0;
    np.spec.disruption.consolidate_after = NillableDuration::from_secs(0);
    np.spec.disruption.budgets = vec![Budget {
        nodes: spec.budget.clone(),
        ..Default::default()
    }];
    let catalog = fake::instance_types(16);
    let mut nodes = Vec::new();
    for (i, n) in spec.nodes.iter().enumerate() {
        let it = &catalog[n.cpus - 1];
        let capacity_type = if n.spot { "spot" } else { "on-demand" };
        let name = format!("node-{i}");
        let labels = managed_node_labels(&name, "default", it, capacity_type);
        let mut used = Resources::new();
        let mut pods: Vec<Pod> = Vec::new();
        for (j, &(app, cpu)) in n.pods.iter().enumerate() {
            let mut p = pod()
                .labels(&[("app", APPS[app])])
                .cpu(&format!("{cpu}m"))
                .build();
            p.metadata.name = Some(format!("{name}-{j}"));
            p.metadata.namespace = Some("default".into());
            let r = pod_requests(&p).unwrap();
            if used.fits_with(&r, it.allocatable()) {
                used.add(&r);
                pods.push(p);
            }
        }
        let mut annotations = BTreeMap::new();
        if n.do_not_disrupt {
            annotations.insert("karpenter.sh/do-not-disrupt".into(), "true".into());
        }
        let offering = it
            .offerings
            .iter()
            .find(|o| o.capacity_type == capacity_type)
            .unwrap();
        nodes.push(NodeState {
            buffer_pods: 0,
            name,
            node_pool: Some("default".into()),
            labels,
            annotations,
            allocatable: it.allocatable().clone(),
            capacity: it.capacity.clone(),
            pods,
            initialized: true,
            ready: true,
            price: offering.price,
            created_at: at(NOW - 3600),
            last_pod_event: at(NOW - 3600),
            ..Default::default()
        });
    }
    let pdbs = spec
        .pdb_allowed
        .iter()
        .enumerate()
        .filter_map(|(app, allowed)| {
            allowed.map(|allowed| pdb(APPS[app], allowed, &[("app", APPS[app])]))
        })
        .collect();
    Cluster {
        nodes,
        pools: vec![NodePoolInput {
            node_pool: np,
            instance_types: types(),
        }],
        pdbs,
    }
}

fn run(c: &Cluster) -> Decision {
    decide(&Input {
        now: at(NOW),
        nodes: &c.nodes,
        node_pools: &c.pools,
        pdbs: &c.pdbs,
        pending_pods: &[],
        daemonset_pods: &[],
        options: SchedulerOptions {
            provider_labels: fake::provider_labels(),
            ..Default::default()
        },
        spot_to_spot: false,
    })
}

fn app_of(pod: &Pod) -> usize {
    let app = &pod.metadata.labels.as_ref().unwrap()["app"];
    APPS.iter().position(|a| a == app).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn decisions_respect_budgets_pdbs_and_capacity(spec in cluster_spec()) {
        let cluster = build(&spec);
        let decision = run(&cluster);
        prop_assert!(decision.commands.len() <= 1, "one command per pass");
        let by_name: BTreeMap<&str, &NodeState> =
            cluster.nodes.iter().map(|n| (n.name.as_str(), n)).collect();
        for cmd in &decision.commands {
            // Budget: never more candidates than the pool allows for the reason.
            let allowed = allowed_disruptions(
                &cluster.pools[0].node_pool,
                cluster.nodes.len(),
                cmd.reason,
                at(NOW),
            );
            prop_assert!(cmd.candidates.len() <= allowed, "{cmd:?} exceeds budget {allowed}");
            let removed: Vec<&NodeState> = cmd.candidates.iter().map(|c| by_name[c.as_str()]).collect();
            for node in &removed {
                // do-not-disrupt nodes are never candidates.
                prop_assert!(!node.annotations.contains_key("karpenter.sh/do-not-disrupt"));
                // No pod whose PDB allows no disruption is evicted.
                for p in &node.pods {
                    let allowed = spec.pdb_allowed[app_of(p)];
                    prop_assert!(allowed.is_none_or(|a| a > 0), "{} evicted past its PDB", node.name);
                }
            }
            // Capacity: the moved pods' requests fit in what is left plus the replacements.
            let mut moved = Resources::new();
            for p in removed.iter().flat_map(|n| &n.pods) {
                moved.add(&pod_requests(p).unwrap());
            }
            let mut free = Resources::new();
            for n in cluster.nodes.iter().filter(|n| !cmd.candidates.contains(&n.name)) {
                let mut used = Resources::new();
                for p in &n.pods {
                    used.add(&pod_requests(p).unwrap());
                }
                free.cpu += n.allocatable.cpu - used.cpu;
                free.memory += n.allocatable.memory - used.memory;
                free.pods += n.allocatable.pods - used.pods;
            }
            for r in &cmd.replacements {
                let smallest = r.instance_types.iter().map(|it| it.allocatable().cpu).min().unwrap();
                free.cpu += smallest;
                free.memory += r.instance_types.iter().map(|it| it.allocatable().memory).min().unwrap();
                free.pods += r.instance_types.iter().map(|it| it.allocatable().pods).min().unwrap();
            }
            prop_assert!(moved.cpu <= free.cpu && moved.memory <= free.memory && moved.pods <= free.pods,
                "{cmd:?}: moved {moved:?} but only {free:?} left");
            // Consolidation always saves, and a replacement is cheaper than what it replaces.
            if cmd.reason != DisruptionReason::Drifted {
                prop_assert!(cmd.savings_per_hour > 0.0);
                let price: f64 = removed.iter().map(|n| n.price).sum();
                for r in &cmd.replacements {
                    prop_assert!(r.cheapest_price().unwrap() < price);
                }
            }
            // Empty means empty.
            if cmd.reason == DisruptionReason::Empty {
                prop_assert!(removed.iter().all(|n| n.pods.is_empty()));
                prop_assert!(cmd.replacements.is_empty());
            }
        }
        // Every node is acted on or explained.
        for n in &cluster.nodes {
            let acted = decision.commands.iter().any(|c| c.candidates.contains(&n.name));
            prop_assert!(acted || decision.blocked.contains_key(&n.name), "{} unexplained", n.name);
        }
        // Deterministic.
        let again = run(&cluster);
        prop_assert_eq!(
            decision.commands.iter().map(|c| (c.method, c.candidates.clone())).collect::<Vec<_>>(),
            again.commands.iter().map(|c| (c.method, c.candidates.clone())).collect::<Vec<_>>()
        );
    }
}
