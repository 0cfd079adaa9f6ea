//! Disruption of static NodePools (`spec.replicas`), after upstream's static drift suite and
//! its consolidation and emptiness exclusions: drifted nodes are replaced one for one within
//! budgets and `limits.nodes`; nothing else disrupts them.

mod support;

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use karpenter_api::{Budget, DisruptionReason, NillableDuration};
use karpenter_core::disruption::{Blocked, Decision, Input, Method, NodeState, decide};
use karpenter_core::instancetype::{InstanceType, fake};
use karpenter_core::provisioning::scheduling::{NodePoolInput, SchedulerOptions};
use support::*;

const NOW: i64 = 1_717_372_800 + 12 * 3600;

fn at(second: i64) -> k8s_openapi::jiff::Timestamp {
    k8s_openapi::jiff::Timestamp::from_second(second).unwrap()
}

fn types() -> Vec<Arc<InstanceType>> {
    arc(fake::instance_types(16))
}

/// A static NodePool of `replicas`, with `limits.nodes` and a Drifted budget when given.
fn static_pool(replicas: i64, limit: Option<&str>, budget: Option<&str>) -> NodePoolInput {
    let mut np = node_pool("static").0;
    np.spec.replicas = Some(replicas);
    np.spec.disruption.consolidate_after = NillableDuration::from_secs(0);
    if let Some(l) = limit {
        np.spec.limits = Some([("nodes".to_string(), Quantity(l.into()))].into());
    }
    if let Some(b) = budget {
        np.spec.disruption.budgets = vec![Budget {
            nodes: b.into(),
            reasons: Some(vec![DisruptionReason::Drifted]),
            schedule: None,
            duration: None,
        }];
    }
    NodePoolInput {
        node_pool: np,
        instance_types: types(),
    }
}

fn node(name: &str, cpu: usize, drifted: bool, pods: Vec<Pod>) -> NodeState {
    let it = fake::instance_types(16).into_iter().nth(cpu - 1).unwrap();
    NodeState {
        buffer_pods: 0,
        name: name.into(),
        node_pool: Some("static".into()),
        labels: managed_node_labels(name, "static", &it, "on-demand"),
        allocatable: it.allocatable().clone(),
        capacity: it.capacity.clone(),
        pods,
        initialized: true,
        ready: true,
        price: it.offerings[0].price,
        created_at: at(NOW - 3600),
        last_pod_event: at(NOW - 3600),
        drifted,
        drifted_at: drifted.then(|| at(NOW - 60)),
        ..Default::default()
    }
}

fn nodes(n: usize, drifted: bool) -> Vec<NodeState> {
    (0..n)
        .map(|i| node(&format!("n{i}"), 4, drifted, vec![]))
        .collect()
}

fn run(nodes: &[NodeState], pools: &[NodePoolInput]) -> Decision {
    decide(&Input {
        now: at(NOW),
        nodes,
        node_pools: pools,
        pdbs: &[],
        pending_pods: &[],
        daemonset_pods: &[],
        options: SchedulerOptions {
            provider_labels: fake::provider_labels(),
            ..Default::default()
        },
        spot_to_spot: false,
    })
}

#[test]
fn drifted_static_nodes_are_replaced_one_for_one() {
    let pools = [static_pool(5, Some("7"), None)];
    let d = run(&nodes(5, true), &pools);
    assert_eq!(d.commands.len(), 1, "{:?}", d.blocked);
    let cmd = &d.commands[0];
    assert_eq!(cmd.method, Method::StaticDrift);
    assert_eq!(cmd.reason, DisruptionReason::Drifted);
    assert_eq!(cmd.candidates, ["n0"]);
    // The replacement is a replica of the NodePool, not a place for the node's pods.
    assert_eq!(cmd.replacements.len(), 1);
    assert_eq!(cmd.replacements[0].node_pool, "static");
    assert!(cmd.replacements[0].pods.is_empty());
    assert_eq!(cmd.replacements[0].instance_types[0].name, "fake-it-0");
}

/// Upstream's "Limits and Scaling" and budget cases: (replicas, nodes limit, Drifted budget,
/// drifted nodes, of which deleting) → whether a replacement starts, and why not.
/// (replicas, nodes limit, Drifted budget, drifted nodes, of which deleting, why it waits).
type Case = (
    i64,
    Option<&'static str>,
    Option<&'static str>,
    usize,
    usize,
    Option<Blocked>,
);

#[test]
fn static_drift_respects_budgets_limits_and_scale_down() {
    let cases: [Case; 7] = [
        // "should not drift nodes when we cannot acquire limits"
        (5, Some("5"), None, 5, 0, Some(Blocked::Budget)),
        // "should drift nodes when we can acquire limits"
        (5, Some("7"), None, 5, 0, None),
        // "should handle missing node limits gracefully"
        (5, None, None, 5, 0, None),
        // "should keep drifting partially …": one replacement in flight fills a limit of 6
        (5, Some("6"), None, 6, 1, Some(Blocked::Budget)),
        // "should respect disruption budgets (Nodes Count)": 2 allowed, 2 already going
        (5, None, Some("2"), 7, 2, Some(Blocked::Budget)),
        (5, None, Some("2"), 6, 1, None),
        // "should wait until nodes are deprovisioned when we are overscaled"
        (1, None, None, 2, 0, Some(Blocked::Waiting)),
    ];
    for (replicas, limit, budget, n, deleting, want) in cases {
        let pools = [static_pool(replicas, limit, budget)];
        let mut ns = nodes(n, true);
        for node in ns.iter_mut().take(deleting) {
            node.deleting = true;
        }
        let d = run(&ns, &pools);
        let label = format!("{replicas} {limit:?} {budget:?} {n} {deleting}");
        match want {
            None => {
                assert_eq!(d.commands.len(), 1, "{label}: {:?}", d.blocked);
                assert_eq!(d.commands[0].method, Method::StaticDrift, "{label}");
            }
            Some(kind) => {
                assert!(d.commands.is_empty(), "{label}: {:?}", d.commands);
                let first = &ns[deleting].name;
                assert_eq!(d.blocked[first].kind, kind, "{label}: {:?}", d.blocked);
            }
        }
    }
}

#[test]
fn static_nodes_are_never_consolidated_or_emptied() {
    let pools = [static_pool(3, None, None)];
    let big_and_idle = vec![
        node("empty", 8, false, vec![]),
        node("underused", 16, false, vec![pod().cpu("100m").build()]),
        node("other", 16, false, vec![]),
    ];
    let d = run(&big_and_idle, &pools);
    assert!(d.commands.is_empty(), "{:?}", d.commands);
    for name in ["empty", "underused", "other"] {
        assert_eq!(d.blocked[name].kind, Blocked::Ineligible, "{name}");
        assert!(d.blocked[name].kind.event_reason().is_none());
    }
    // "should ignore nodes without the drifted status condition"
    assert!(run(&nodes(3, false), &pools).commands.is_empty());
    // "should ignore nodes with the karpenter.sh/do-not-disrupt annotation"
    let mut held = nodes(3, true);
    for n in &mut held {
        n.annotations
            .insert("karpenter.sh/do-not-disrupt".into(), "true".into());
    }
    let d = run(&held, &pools);
    assert!(d.commands.is_empty());
    assert_eq!(d.blocked["n0"].kind, Blocked::NotCandidate);
}
