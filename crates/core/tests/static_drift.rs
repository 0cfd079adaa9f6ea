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

/// A static NodePool of `replicas`, with `limits.nodes` and a Drifted budget when given
/// (else a budget of 100%).
fn static_pool(replicas: i64, limit: Option<&str>, budget: Option<&str>) -> NodePoolInput {
    let mut np = node_pool("static").0;
    np.spec.replicas = Some(replicas);
    np.spec.disruption.consolidate_after = NillableDuration::from_secs(0);
    if let Some(l) = limit {
        np.spec.limits = Some([("nodes".to_string(), Quantity(l.into()))].into());
    }
    // Upstream's suite allows every node by default.
    np.spec.disruption.budgets = vec![Budget {
        nodes: budget.unwrap_or("100%").into(),
        reasons: budget.map(|_| vec![DisruptionReason::Drifted]),
        schedule: None,
        duration: None,
    }];
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

/// A static NodePool named `name`, else as [`static_pool`].
fn named_pool(
    name: &str,
    replicas: i64,
    limit: Option<&str>,
    budget: Option<&str>,
) -> NodePoolInput {
    let mut p = static_pool(replicas, limit, budget);
    p.node_pool.metadata.name = Some(name.into());
    p
}

/// `n` drifted nodes of NodePool `pool`.
fn drifted_in(pool: &str, n: usize) -> Vec<NodeState> {
    (0..n)
        .map(|i| {
            let mut node = node(&format!("{pool}-{i}"), 4, true, vec![]);
            node.node_pool = Some(pool.into());
            node.labels
                .insert("karpenter.sh/nodepool".into(), pool.into());
            node
        })
        .collect()
}

/// The static drift commands of a pass, per NodePool.
fn started(d: &Decision) -> std::collections::BTreeMap<String, usize> {
    let mut out = std::collections::BTreeMap::new();
    for c in &d.commands {
        assert_eq!(c.method, Method::StaticDrift, "{c:?}");
        assert_eq!(c.candidates.len(), 1, "one node per command: {c:?}");
        *out.entry(c.replacements[0].node_pool.clone()).or_default() += 1;
    }
    out
}

#[test]
fn drifted_static_nodes_are_replaced_one_for_one() {
    let pools = [static_pool(5, Some("7"), None)];
    let d = run(&nodes(5, true), &pools);
    // limits.nodes 7 leaves room for two replacements beside the five: two commands.
    assert_eq!(d.commands.len(), 2, "{:?}", d.blocked);
    let cmd = &d.commands[0];
    assert_eq!(cmd.method, Method::StaticDrift);
    assert_eq!(cmd.reason, DisruptionReason::Drifted);
    assert_eq!(cmd.candidates, ["n0"]);
    assert_eq!(d.commands[1].candidates, ["n1"]);
    // The replacement is a replica of the NodePool, not a place for the node's pods.
    assert_eq!(cmd.replacements.len(), 1);
    assert_eq!(cmd.replacements[0].node_pool, "static");
    assert!(cmd.replacements[0].pods.is_empty());
    assert_eq!(cmd.replacements[0].instance_types[0].name, "fake-it-0");
    assert_eq!(d.blocked["n2"].kind, Blocked::Budget, "{:?}", d.blocked);
}

/// (replicas, nodes limit, Drifted budget, drifted nodes, of which deleting, commands started,
/// why the first node left waits).
type Case = (
    i64,
    Option<&'static str>,
    Option<&'static str>,
    usize,
    usize,
    usize,
    Option<Blocked>,
);

/// Upstream's static drift budgets, limits and scale-down: how many replacements one pass
/// starts (one command each).
#[test]
fn static_drift_respects_budgets_limits_and_scale_down() {
    let cases: [(&str, Case); 11] = [
        (
            "should respect disruption budgets (Nodes Count) for static drift",
            (5, None, Some("2"), 5, 0, 2, Some(Blocked::Budget)),
        ),
        (
            "should respect disruption budgets (Nodes Percentage) for static drift",
            (5, None, Some("20%"), 5, 0, 1, Some(Blocked::Budget)),
        ),
        (
            "nodes already going use the budget up",
            (5, None, Some("2"), 7, 2, 0, Some(Blocked::Budget)),
        ),
        (
            "one of two left",
            (5, None, Some("2"), 6, 1, 1, Some(Blocked::Budget)),
        ),
        (
            "should not drift nodes when we cannot acquire limits",
            (5, Some("5"), None, 5, 0, 0, Some(Blocked::Budget)),
        ),
        (
            "should drift nodes when we can acquire limits",
            (5, Some("5"), None, 2, 0, 2, None),
        ),
        (
            "should drift partially when we can acquire some limits",
            (5, Some("7"), None, 5, 0, 2, Some(Blocked::Budget)),
        ),
        (
            "should handle missing node limits gracefully",
            (5, None, None, 5, 0, 5, None),
        ),
        (
            "a replacement in flight fills a limit of 6",
            (5, Some("6"), None, 6, 1, 0, Some(Blocked::Budget)),
        ),
        (
            "should wait until nodes are deprovisioned when we are overscaled",
            (1, None, None, 2, 0, 0, Some(Blocked::Waiting)),
        ),
        (
            "should handle zero replicas",
            (0, None, None, 1, 0, 0, Some(Blocked::Waiting)),
        ),
    ];
    for (case, (replicas, limit, budget, n, deleting, expected, waits)) in cases {
        let pools = [static_pool(replicas, limit, budget)];
        let mut ns = nodes(n, true);
        for node in ns.iter_mut().take(deleting) {
            node.deleting = true;
        }
        let d = run(&ns, &pools);
        assert_eq!(
            started(&d).get("static").copied().unwrap_or(0),
            expected,
            "{case}: {:?}",
            d.blocked
        );
        if let Some(kind) = waits {
            let first = &ns[deleting + expected].name;
            assert_eq!(d.blocked[first].kind, kind, "{case}: {:?}", d.blocked);
        }
    }
}

/// Upstream's "should wait until nodes are deprovisioned when we are overscaled", on: once
/// the scale-down took the extra node, drift goes ahead.
#[test]
fn static_drift_resumes_once_the_scale_down_is_done() {
    let pools = [static_pool(1, None, None)];
    let mut ns = nodes(2, true);
    assert!(run(&ns, &pools).commands.is_empty());
    ns.pop();
    assert_eq!(started(&run(&ns, &pools))["static"], 1);
}

/// Upstream's "should keep drifting partially when we can acquire some limits for each
/// reconcile": replicas 5, `limits.nodes` 6: one replacement at a time, five passes, never
/// more than six nodes.
#[test]
fn static_drift_replaces_one_at_a_time_under_a_tight_limit() {
    let pools = [static_pool(5, Some("6"), None)];
    let mut ns = nodes(5, true);
    for round in 0..5 {
        let d = run(&ns, &pools);
        assert_eq!(started(&d)["static"], 1, "pass {round}: {:?}", d.blocked);
        let going = d.commands[0].candidates[0].clone();
        // In flight: the candidate is going and its replacement is there; nothing more starts.
        let i = ns.iter().position(|n| n.name == going).unwrap();
        ns[i].deleting = true;
        ns.push(node(&format!("r{round}"), 4, false, vec![]));
        assert_eq!(ns.len(), 6);
        assert!(run(&ns, &pools).commands.is_empty(), "pass {round}");
        // Done: the candidate is gone.
        ns.remove(i);
    }
    assert!(run(&ns, &pools).commands.is_empty());
    assert!(ns.iter().all(|n| !n.drifted));
}

/// Upstream's static drift across NodePools: each NodePool's budget and limit hold on their
/// own, all in one pass.
#[test]
fn static_drift_across_nodepools() {
    // (case, NodePools a, b and c, drifted nodes in each, replacements started in each)
    type Pools = (
        &'static str,
        Vec<NodePoolInput>,
        usize,
        [(&'static str, usize); 3],
    );
    let cases: [Pools; 2] = [
        (
            "should respect budgets for multiple static nodepools",
            vec![
                named_pool("a", 4, None, Some("1")),
                named_pool("b", 3, None, Some("2")),
                named_pool("c", 2, None, Some("100%")),
            ],
            2,
            [("a", 1), ("b", 2), ("c", 2)],
        ),
        (
            "should handle drift for multiple static NodePools independently",
            vec![
                named_pool("a", 3, None, None),
                named_pool("b", 2, Some("2"), None),
                named_pool("c", 2, None, None),
            ],
            2,
            [("a", 2), ("b", 0), ("c", 2)],
        ),
    ];
    for (case, pools, per_pool, expected) in cases {
        let ns: Vec<NodeState> = ["a", "b", "c"]
            .iter()
            .flat_map(|p| drifted_in(p, per_pool))
            .collect();
        let got = started(&run(&ns, &pools));
        for (pool, n) in expected {
            assert_eq!(
                got.get(pool).copied().unwrap_or(0),
                n,
                "{case}: {pool} {got:?}"
            );
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
