//! Disruption decisions, after upstream's emptiness, consolidation, drift, expiration and
//! budget suites: which nodes go, which stay, and why.

mod support;

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use karpenter_api::{Budget, ConsolidationPolicy, DisruptionReason, NillableDuration};
use karpenter_core::disruption::{Blocked, Decision, Input, NodeState, decide};
use karpenter_core::instancetype::{InstanceType, fake};
use karpenter_core::provisioning::scheduling::{NodePoolInput, SchedulerOptions};
use support::*;

const NOW: i64 = 1_717_372_800 + 12 * 3600; // a Monday, noon UTC

fn at(second: i64) -> k8s_openapi::jiff::Timestamp {
    k8s_openapi::jiff::Timestamp::from_second(second).unwrap()
}

fn types() -> Vec<Arc<InstanceType>> {
    arc(fake::instance_types(16))
}

fn pool(name: &str, edit: impl FnOnce(&mut karpenter_api::NodePool)) -> NodePoolInput {
    let mut np = node_pool(name).0;
    np.spec.disruption.consolidate_after = NillableDuration::from_secs(0);
    edit(&mut np);
    NodePoolInput {
        node_pool: np,
        instance_types: types(),
    }
}

/// A managed, initialized node of instance type `fake-it-{cpu-1}` holding `pods`.
fn node(name: &str, pool: &str, cpu: usize, capacity_type: &str, pods: Vec<Pod>) -> NodeState {
    let it = fake::instance_types(16).into_iter().nth(cpu - 1).unwrap();
    let labels = managed_node_labels(name, pool, &it, capacity_type);
    NodeState {
        buffer_pods: 0,
        name: name.into(),
        node_pool: Some(pool.into()),
        labels,
        allocatable: it.allocatable().clone(),
        capacity: it.capacity.clone(),
        pods,
        initialized: true,
        ready: true,
        price: it.offerings[0].price,
        created_at: at(NOW - 3600),
        last_pod_event: at(NOW - 3600),
        ..Default::default()
    }
}

fn app(cpu: &str) -> Pod {
    let mut p = pod().labels(&[("app", "web")]).cpu(cpu).build();
    p.metadata.name = Some(format!("web-{cpu}"));
    p
}

fn run(nodes: &[NodeState], pools: &[NodePoolInput], pdbs: &[PodDisruptionBudget]) -> Decision {
    run_with(nodes, pools, pdbs, false)
}

/// A disruption pass's input at `NOW` over `nodes`, with no pending pods.
fn input<'a>(
    nodes: &'a [NodeState],
    pools: &'a [NodePoolInput],
    pdbs: &'a [PodDisruptionBudget],
    spot_to_spot: bool,
) -> Input<'a> {
    Input {
        now: at(NOW),
        nodes,
        node_pools: pools,
        pdbs,
        pending_pods: &[],
        daemonset_pods: &[],
        options: SchedulerOptions {
            provider_labels: fake::provider_labels(),
            ..Default::default()
        },
        spot_to_spot,
    }
}

fn run_with(
    nodes: &[NodeState],
    pools: &[NodePoolInput],
    pdbs: &[PodDisruptionBudget],
    spot_to_spot: bool,
) -> Decision {
    decide(&input(nodes, pools, pdbs, spot_to_spot))
}

fn deleted(d: &Decision) -> Vec<String> {
    d.commands
        .iter()
        .flat_map(|c| c.candidates.clone())
        .collect()
}

#[test]
fn emptiness() {
    let pools = [pool("default", |_| {})];
    // An empty node goes; a busy one stays (it is not empty, and consolidation keeps it).
    let d = run(
        &[
            node("empty", "default", 4, "on-demand", vec![]),
            node("busy", "default", 1, "on-demand", vec![app("500m")]),
        ],
        &pools,
        &[],
    );
    assert_eq!(deleted(&d), ["empty"]);
    assert_eq!(d.commands[0].reason, DisruptionReason::Empty);
    assert!(d.commands[0].replacements.is_empty());
    // DaemonSet pods do not keep a node busy.
    let ds = pod().owned_by_daemonset().cpu("100m").build();
    let d = run(
        &[node("only-ds", "default", 2, "on-demand", vec![ds])],
        &pools,
        &[],
    );
    assert_eq!(deleted(&d), ["only-ds"]);
    // Within consolidateAfter since the last pod event, an empty node waits.
    let waiting = [pool("default", |np| {
        np.spec.disruption.consolidate_after = NillableDuration::from_secs(7200)
    })];
    let d = run(
        &[node("empty", "default", 4, "on-demand", vec![])],
        &waiting,
        &[],
    );
    assert!(d.commands.is_empty());
    // consolidateAfter Never turns it off.
    let never = [pool("default", |np| {
        np.spec.disruption.consolidate_after = NillableDuration::NEVER
    })];
    assert!(
        run(
            &[node("empty", "default", 4, "on-demand", vec![])],
            &never,
            &[]
        )
        .commands
        .is_empty()
    );
    // Several empty nodes go in one command.
    let three: Vec<NodeState> = (0..3)
        .map(|i| node(&format!("e{i}"), "default", 2, "on-demand", vec![]))
        .collect();
    let all = [pool("default", |np| {
        np.spec.disruption.budgets = vec![Budget {
            nodes: "100%".into(),
            ..Default::default()
        }]
    })];
    assert_eq!(run(&three, &all, &[]).commands[0].candidates.len(), 3);
}

#[test]
fn budgets_limit_disruption() {
    let empty: Vec<NodeState> = (0..5)
        .map(|i| node(&format!("e{i}"), "default", 2, "on-demand", vec![]))
        .collect();
    let with = |b: Vec<Budget>| [pool("default", |np| np.spec.disruption.budgets = b)];
    let count = |pools: &[NodePoolInput]| deleted(&run(&empty, pools, &[])).len();
    assert_eq!(
        count(&with(vec![Budget {
            nodes: "10%".into(),
            ..Default::default()
        }])),
        1,
        "10% of 5 rounds up to 1"
    );
    assert_eq!(
        count(&with(vec![Budget {
            nodes: "2".into(),
            ..Default::default()
        }])),
        2
    );
    assert_eq!(
        count(&with(vec![Budget {
            nodes: "0".into(),
            ..Default::default()
        }])),
        0
    );
    assert_eq!(
        count(&with(vec![
            Budget {
                nodes: "100%".into(),
                ..Default::default()
            },
            Budget {
                nodes: "3".into(),
                ..Default::default()
            }
        ])),
        3,
        "the smallest wins"
    );
    // A budget for other reasons does not limit emptiness.
    assert_eq!(
        count(&with(vec![
            Budget {
                nodes: "0".into(),
                reasons: Some(vec![DisruptionReason::Drifted]),
                ..Default::default()
            },
            Budget {
                nodes: "100%".into(),
                ..Default::default()
            }
        ])),
        5
    );
    // A scheduled budget blocks only while it is active (weekdays 09:00–17:00; now is noon).
    let business_hours = Budget {
        nodes: "0".into(),
        schedule: Some("0 9 * * mon-fri".into()),
        duration: Some(karpenter_api::Duration::from_secs(8 * 3600)),
        reasons: None,
    };
    assert_eq!(
        count(&with(vec![
            business_hours.clone(),
            Budget {
                nodes: "100%".into(),
                ..Default::default()
            }
        ])),
        0
    );
    let night = Budget {
        schedule: Some("0 22 * * *".into()),
        ..business_hours
    };
    assert_eq!(
        count(&with(vec![
            night,
            Budget {
                nodes: "100%".into(),
                ..Default::default()
            }
        ])),
        5
    );
    // Nodes already disrupting (NotReady or deleting) use the budget up.
    let mut busy = empty.clone();
    busy[0].ready = false;
    busy[1].deleting = true;
    let d = run(
        &busy,
        &with(vec![Budget {
            nodes: "2".into(),
            ..Default::default()
        }]),
        &[],
    );
    assert!(d.commands.is_empty(), "2 allowed, 2 already disrupting");
    assert!(
        d.blocked
            .values()
            .any(|b| b.reason.contains("no allowed disruptions")),
        "{:?}",
        d.blocked
    );
    // A claim still launching (not initialized, no Ready node yet) is no disruption in
    // progress: it leaves the budget alone.
    let mut launching = empty.clone();
    launching[0].ready = false;
    launching[0].initialized = false;
    let d = run(
        &launching,
        &with(vec![Budget {
            nodes: "1".into(),
            ..Default::default()
        }]),
        &[],
    );
    assert_eq!(d.commands.len(), 1, "{:?}", d.blocked);
}

#[test]
fn candidates_respect_blockers() {
    let pools = [pool("default", |_| {})];
    let big = || node("big", "default", 8, "on-demand", vec![app("500m")]);
    // Without blockers the oversized node is replaced by a cheaper one.
    let d = run(&[big()], &pools, &[]);
    assert_eq!(deleted(&d), ["big"], "{:?}", d.blocked);
    let cases: Vec<(&str, NodeState, Vec<PodDisruptionBudget>, &str)> = vec![
        (
            "node annotation",
            {
                let mut n = big();
                n.annotations
                    .insert("karpenter.sh/do-not-disrupt".into(), "true".into());
                n
            },
            vec![],
            "do-not-disrupt",
        ),
        (
            "pod annotation",
            {
                let mut n = big();
                n.pods[0].metadata.annotations = Some(
                    [(
                        "karpenter.sh/do-not-disrupt".to_string(),
                        "true".to_string(),
                    )]
                    .into(),
                );
                n
            },
            vec![],
            "do-not-disrupt",
        ),
        (
            "PDB allows no disruption",
            big(),
            vec![pdb("pdb-0", 0, &[("app", "web")])],
            "prevents pod evictions",
        ),
        (
            "two PDBs",
            big(),
            vec![
                pdb("pdb-1", 1, &[("app", "web")]),
                pdb("pdb-2", 2, &[("app", "web")]),
            ],
            "more than one PodDisruptionBudget",
        ),
        (
            "uninitialized",
            {
                let mut n = big();
                n.initialized = false;
                n
            },
            vec![],
            "not initialized",
        ),
        (
            "deleting",
            {
                let mut n = big();
                n.deleting = true;
                n
            },
            vec![],
            "being deleted",
        ),
        (
            "nominated",
            {
                let mut n = big();
                n.nominated = true;
                n
            },
            vec![],
            "nominated",
        ),
        (
            "unmanaged",
            {
                let mut n = big();
                n.node_pool = None;
                n
            },
            vec![],
            "",
        ),
    ];
    for (name, n, pdbs, why) in cases {
        let d = run(std::slice::from_ref(&n), &pools, &pdbs);
        assert!(d.commands.is_empty(), "{name}: {:?}", d.commands);
        if !why.is_empty() {
            assert!(
                d.blocked.get("big").is_some_and(|b| b.reason.contains(why)),
                "{name}: {:?}",
                d.blocked
            );
        }
    }
    // A PDB that allows a disruption does not block; one for other pods neither.
    assert_eq!(
        deleted(&run(
            &[big()],
            &pools,
            &[pdb("pdb-1", 1, &[("app", "web")])]
        )),
        ["big"]
    );
    assert_eq!(
        deleted(&run(&[big()], &pools, &[pdb("pdb-0", 0, &[("app", "db")])])),
        ["big"]
    );
}

#[test]
fn do_not_disrupt_durations_expire() {
    let pools = [pool("default", |_| {})];
    let with_duration = |started_ago: i64| {
        let mut n = node("big", "default", 8, "on-demand", vec![app("500m")]);
        n.pods[0].metadata.annotations =
            Some([("karpenter.sh/do-not-disrupt".to_string(), "1h".to_string())].into());
        let started = k8s_openapi::jiff::Timestamp::from_second(NOW - started_ago).unwrap();
        n.pods[0].status = Some(k8s_openapi::api::core::v1::PodStatus {
            start_time: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                started,
            )),
            ..Default::default()
        });
        n
    };
    assert!(
        run(&[with_duration(600)], &pools, &[]).commands.is_empty(),
        "10 minutes of 1h"
    );
    assert_eq!(
        deleted(&run(&[with_duration(7200)], &pools, &[])),
        ["big"],
        "after 2h"
    );
}

#[test]
fn single_node_consolidation_replaces_with_a_cheaper_node() {
    let pools = [pool("default", |_| {})];
    let d = run(
        &[node("big", "default", 8, "on-demand", vec![app("500m")])],
        &pools,
        &[],
    );
    let cmd = &d.commands[0];
    assert_eq!(cmd.reason, DisruptionReason::Underutilized);
    assert_eq!(cmd.method.as_str(), "single-node consolidation");
    assert_eq!(cmd.replacements.len(), 1);
    let replacement = &cmd.replacements[0];
    assert!(
        replacement
            .instance_types
            .iter()
            .all(|it| it.capacity.cpu < 8000),
        "every option is cheaper"
    );
    assert!(cmd.savings_per_hour > 0.0);
    // A node already the cheapest that fits stays, and says why.
    let d = run(
        &[node("small", "default", 1, "on-demand", vec![app("500m")])],
        &pools,
        &[],
    );
    assert!(d.commands.is_empty());
    assert!(
        d.blocked["small"].reason.contains("cheaper"),
        "{:?}",
        d.blocked
    );
    assert_eq!(d.blocked["small"].kind, Blocked::Unconsolidatable);
    // Spot-to-spot consolidation is off (upstream's default).
    let d = run(
        &[node("spot", "default", 8, "spot", vec![app("500m")])],
        &pools,
        &[],
    );
    assert!(d.commands.is_empty());
    assert!(
        d.blocked["spot"].reason.contains("SpotToSpotConsolidation"),
        "{:?}",
        d.blocked
    );
    // WhenEmpty pools do not consolidate nodes with pods.
    let when_empty = [pool("default", |np| {
        np.spec.disruption.consolidation_policy = ConsolidationPolicy::WhenEmpty
    })];
    let d = run(
        &[node("big", "default", 8, "on-demand", vec![app("500m")])],
        &when_empty,
        &[],
    );
    assert!(d.commands.is_empty());
    assert!(d.blocked["big"].reason.contains("WhenEmpty"));
}

#[test]
fn pods_move_to_existing_nodes_when_they_fit() {
    let pools = [pool("default", |np| {
        np.spec.disruption.budgets = vec![Budget {
            nodes: "100%".into(),
            ..Default::default()
        }]
    })];
    // A roomy node that may not be disrupted takes the pods of a small one: delete, no replacement.
    let mut keeper = node("keeper", "default", 8, "on-demand", vec![app("1")]);
    keeper
        .annotations
        .insert("karpenter.sh/do-not-disrupt".into(), "true".into());
    let nodes = [keeper, node("b", "default", 4, "on-demand", vec![app("1")])];
    let d = run(&nodes, &pools, &[]);
    assert_eq!(d.commands.len(), 1, "{:?}", d.blocked);
    let cmd = &d.commands[0];
    assert_eq!(cmd.candidates, ["b"], "{cmd:?}");
    assert!(cmd.replacements.is_empty(), "{cmd:?}");
    assert!(d.blocked["keeper"].reason.contains("do-not-disrupt"));
    assert_eq!(d.blocked["keeper"].kind, Blocked::NotCandidate);

    // Two half-used 4-CPU nodes merge onto one cheaper node: replacing both beats deleting one.
    let nodes = [
        node("a", "default", 4, "on-demand", vec![app("1")]),
        node("b", "default", 4, "on-demand", vec![app("1")]),
    ];
    let d = run(&nodes, &pools, &[]);
    let cmd = &d.commands[0];
    assert_eq!(cmd.candidates.len(), 2, "{cmd:?}");
    assert_eq!(cmd.replacements.len(), 1);
    assert!(cmd.savings_per_hour > nodes[0].price, "{cmd:?}");
    // Their own type is an option, so every option must be cheaper than it (upstream's
    // filterOutSameInstanceType): no trading two nodes for one of the same.
    let options = &cmd.replacements[0].instance_types;
    assert!(!options.is_empty());
    for it in options {
        assert!(
            it.offerings[0].price < nodes[0].price,
            "{} is not cheaper",
            it.name
        );
    }

    // When the only option is the candidates' own type, merging is refused; single-node
    // consolidation deletes one of them instead, which saves as much without a launch.
    let mut np = node_pool("default")
        .require(INSTANCE_TYPE, karpenter_api::Operator::In, &["fake-it-3"])
        .0;
    np.spec.disruption.consolidate_after = NillableDuration::from_secs(0);
    np.spec.disruption.budgets = vec![Budget {
        nodes: "100%".into(),
        ..Default::default()
    }];
    let only_own = [NodePoolInput {
        node_pool: np,
        instance_types: types(),
    }];
    let d = run(&nodes, &only_own, &[]);
    let cmd = &d.commands[0];
    assert_eq!(
        (
            cmd.method.as_str(),
            cmd.candidates.len(),
            cmd.replacements.len()
        ),
        ("single-node consolidation", 1, 0),
        "{cmd:?}"
    );
}

#[test]
fn multi_node_consolidation_merges_nodes() {
    let pools = [pool("default", |np| {
        np.spec.disruption.budgets = vec![Budget {
            nodes: "100%".into(),
            ..Default::default()
        }]
    })];
    // Four 8-CPU nodes with one small pod each: all four can go for one small node.
    let nodes: Vec<NodeState> = (0..4)
        .map(|i| {
            node(
                &format!("n{i}"),
                "default",
                8,
                "on-demand",
                vec![app("500m")],
            )
        })
        .collect();
    let d = run(&nodes, &pools, &[]);
    let cmd = &d.commands[0];
    assert_eq!(cmd.method.as_str(), "multi-node consolidation");
    assert_eq!(cmd.candidates.len(), 4);
    assert_eq!(cmd.replacements.len(), 1);
    let before: f64 = nodes.iter().map(|n| n.price).sum();
    assert!(cmd.savings_per_hour > 0.0 && cmd.savings_per_hour < before);
}

#[test]
fn drift_replaces_drifted_nodes() {
    let pools = [pool("default", |_| {})];
    let mut n = node("old", "default", 2, "on-demand", vec![app("1")]);
    n.drifted = true;
    n.last_pod_event = at(NOW); // not consolidatable: only drift applies
    let d = run(&[n], &pools, &[]);
    assert_eq!(d.commands[0].reason, DisruptionReason::Drifted);
    assert_eq!(
        d.commands[0].replacements.len(),
        1,
        "its pod needs a new node"
    );
    // A drift budget of 0 holds it.
    let held = [pool("default", |np| {
        np.spec.disruption.budgets = vec![Budget {
            nodes: "0".into(),
            reasons: Some(vec![DisruptionReason::Drifted]),
            ..Default::default()
        }]
    })];
    let mut n = node("old", "default", 2, "on-demand", vec![app("1")]);
    n.drifted = true;
    n.last_pod_event = at(NOW);
    assert!(run(&[n], &held, &[]).commands.is_empty());
}

/// Upstream's drift: nodes go in the order they were found drifted; every empty drifted node
/// the budget allows goes in one command, before any node that needs a replacement.
#[test]
fn drift_takes_empty_nodes_together_then_the_first_found() {
    // Consolidation off: the empty nodes are drift's, not emptiness's.
    let pools = [pool("default", |np| {
        np.spec.disruption.consolidate_after = NillableDuration(None);
        np.spec.disruption.budgets = vec![Budget {
            nodes: "100%".into(),
            ..Default::default()
        }]
    })];
    let drifted = |name: &str, drifted_at: i64, pods: Vec<Pod>| {
        let mut n = node(name, "default", 2, "on-demand", pods);
        n.drifted = true;
        n.drifted_at = Some(at(drifted_at));
        n.last_pod_event = at(NOW);
        n
    };
    let nodes = [
        drifted("late-busy", NOW - 10, vec![app("1")]),
        drifted("early-busy", NOW - 300, vec![app("1")]),
        drifted("empty-1", NOW - 5, vec![]),
        drifted("empty-2", NOW - 50, vec![]),
    ];
    let d = run(&nodes, &pools, &[]);
    assert_eq!(d.commands[0].reason, DisruptionReason::Drifted);
    assert_eq!(d.commands[0].candidates, ["empty-2", "empty-1"]);
    assert!(d.commands[0].replacements.is_empty());
    let busy = &nodes[..2];
    let d = run(busy, &pools, &[]);
    assert_eq!(
        d.commands[0].candidates,
        ["early-busy"],
        "found drifted first, though created at the same time"
    );
}

/// Upstream's budget arithmetic: the NodePool's size counts initialized nodes, those marked
/// for deletion included, but not those whose instance is being terminated; the NotReady and
/// the deleting among them use the budget up.
#[test]
fn nodes_being_deleted_count_toward_the_pool_and_against_its_budget() {
    let budget = |nodes: &str| {
        [pool("default", |np| {
            np.spec.disruption.budgets = vec![Budget {
                nodes: nodes.into(),
                ..Default::default()
            }]
        })]
    };
    let empties = |n: usize| -> Vec<NodeState> {
        (0..n)
            .map(|i| node(&format!("e{i}"), "default", 2, "on-demand", vec![]))
            .collect()
    };
    let deleting = |name: &str, terminating: bool| {
        let mut n = node(name, "default", 2, "on-demand", vec![]);
        n.deleting = true;
        n.instance_terminating = terminating;
        n
    };
    let cases: [(&str, &str, Vec<NodeState>, usize); 5] = [
        ("4 nodes, 50%: two may go", "50%", empties(4), 2),
        (
            "one of 4 (counted) is being deleted: one more may go",
            "50%",
            [empties(3), vec![deleting("d", false)]].concat(),
            1,
        ),
        (
            "100% of 2, one being deleted: the other may go too",
            "100%",
            [empties(1), vec![deleting("d", false)]].concat(),
            1,
        ),
        (
            "a terminating instance is no longer part of the pool: 50% of 3",
            "50%",
            [empties(3), vec![deleting("d", true)]].concat(),
            2,
        ),
        (
            "a launching claim is neither",
            "50%",
            [
                empties(4),
                vec![NodeState {
                    buffer_pods: 0,
                    initialized: false,
                    ..node("new", "default", 2, "on-demand", vec![])
                }],
            ]
            .concat(),
            2,
        ),
    ];
    for (case, nodes_budget, nodes, expected) in cases {
        let pools = budget(nodes_budget);
        assert_eq!(deleted(&run(&nodes, &pools, &[])).len(), expected, "{case}");
    }
}

#[test]
fn drift_is_eventual_when_a_termination_grace_period_bounds_the_drain() {
    // The NodeClaim's grace period decides, as upstream: not its NodePool's.
    let pools = [pool("default", |_| {})];
    let (without, with_tgp) = (&pools, &pools);
    let grace = |mut n: NodeState| {
        n.termination_grace_period = Some(karpenter_api::Duration::from_secs(600));
        n
    };
    let pinned = || {
        let mut p = app("1");
        p.metadata.annotations = Some(
            [(
                "karpenter.sh/do-not-disrupt".to_string(),
                "true".to_string(),
            )]
            .into(),
        );
        p
    };
    let drifted = |pods: Vec<Pod>| {
        let mut n = node("old", "default", 2, "on-demand", pods);
        n.drifted = true;
        n
    };
    let guard = [pdb("guard", 0, &[("app", "web")])];
    let cases: Vec<(&str, NodeState, &[PodDisruptionBudget])> = vec![
        ("a do-not-disrupt pod", drifted(vec![pinned()]), &[]),
        ("a PDB allowing nothing", drifted(vec![app("1")]), &guard),
    ];
    for (blocker, n, pdbs) in cases {
        // Without a grace period the blocker holds the node, as for any graceful method.
        let d = run(std::slice::from_ref(&n), without, pdbs);
        assert!(d.commands.is_empty(), "{blocker}: {:?}", d.commands);
        assert_eq!(d.blocked["old"].kind, Blocked::NotCandidate, "{blocker}");
        // With one, drift replaces it: the grace period bounds the drain.
        let n = grace(n);
        let d = run(std::slice::from_ref(&n), with_tgp, pdbs);
        assert_eq!(
            d.commands.first().map(|c| c.reason),
            Some(DisruptionReason::Drifted),
            "{blocker}: {:?}",
            d.blocked
        );
        // A node that has not drifted stays graceful: consolidation respects the blocker.
        let mut calm = n.clone();
        calm.drifted = false;
        let d = run(&[calm], with_tgp, pdbs);
        assert!(d.commands.is_empty(), "{blocker}: {:?}", d.commands);
        assert_eq!(d.blocked["old"].kind, Blocked::NotCandidate, "{blocker}");
    }
}

#[test]
fn balanced_policy_weighs_savings_against_disruption() {
    let balanced = [pool("default", |np| {
        np.spec.disruption.consolidation_policy = ConsolidationPolicy::Balanced
    })];
    // A big saving for little disruption passes.
    let d = run(
        &[
            node("big", "default", 16, "on-demand", vec![app("500m")]),
            node("small", "default", 1, "on-demand", vec![app("500m")]),
        ],
        &balanced,
        &[],
    );
    assert!(deleted(&d).contains(&"big".to_string()), "{:?}", d.blocked);
    // Replacing a 2-CPU node by a 1-CPU one saves little against many pods' disruption.
    let crowded: Vec<Pod> = (0..10)
        .map(|i| {
            let mut p = app("50m");
            p.metadata.name = Some(format!("p{i}"));
            p
        })
        .collect();
    let nodes = [
        node("a", "default", 2, "on-demand", crowded),
        node(
            "big",
            "default",
            16,
            "on-demand",
            (0..12)
                .map(|i| {
                    let mut p = app("1");
                    p.metadata.name = Some(format!("q{i}"));
                    p
                })
                .collect(),
        ),
    ];
    let d = run(&nodes, &balanced, &[]);
    assert!(!deleted(&d).contains(&"a".to_string()), "{:?}", d.commands);
}

#[test]
fn spot_to_spot_consolidation_needs_fifteen_cheaper_types() {
    let pools = [pool("default", |_| {})];
    // Gate on, but only 7 types are cheaper than the 8-CPU spot node.
    let d = run_with(
        &[node("spot", "default", 8, "spot", vec![app("500m")])],
        &pools,
        &[],
        true,
    );
    assert!(d.commands.is_empty());
    assert!(
        d.blocked["spot"]
            .reason
            .contains("requires 15 cheaper instance type options")
            && d.blocked["spot"].reason.contains("got 7"),
        "{:?}",
        d.blocked
    );
    assert_eq!(d.blocked["spot"].kind, Blocked::Unconsolidatable);
    // The 16-CPU spot node has 15 cheaper types: replaced by spot, offered exactly 15 types,
    // the cheapest first.
    let d = run_with(
        &[node("spot", "default", 16, "spot", vec![app("500m")])],
        &pools,
        &[],
        true,
    );
    let cmd = &d.commands[0];
    assert_eq!(cmd.candidates, ["spot"]);
    let replacement = &cmd.replacements[0];
    assert_eq!(replacement.instance_types.len(), 15);
    assert!(
        replacement
            .requirements
            .allows(karpenter_api::labels::CAPACITY_TYPE_LABEL, "spot")
            && !replacement
                .requirements
                .allows(karpenter_api::labels::CAPACITY_TYPE_LABEL, "on-demand"),
        "the replacement stays spot"
    );
    assert!(cmd.savings_per_hour > 0.0);
    // On-demand to spot needs no gate and no fifteen types.
    let d = run(
        &[node("od", "default", 8, "on-demand", vec![app("500m")])],
        &pools,
        &[],
    );
    assert_eq!(deleted(&d), ["od"]);
}

/// Upstream's validation after the TTL wait, as a table: a command decided over `before` is
/// validated against the cluster `after` the wait changed it.
#[test]
fn validation_rejects_commands_the_cluster_no_longer_allows() {
    use karpenter_core::disruption::{InvalidKind, validate};
    let budget = |nodes: &str| {
        let nodes = nodes.to_string();
        [pool("default", |np| {
            np.spec.disruption.budgets = vec![Budget {
                nodes,
                ..Default::default()
            }]
        })]
    };
    let do_not_disrupt = |mut p: Pod| {
        p.metadata.annotations = Some(
            [(
                "karpenter.sh/do-not-disrupt".to_string(),
                "true".to_string(),
            )]
            .into(),
        );
        p
    };
    let pdb_pod = |mut p: Pod| {
        p.metadata.labels = Some([("guarded".to_string(), "yes".to_string())].into());
        p
    };
    let blocking_pdb = pdb("guard", 0, &[("guarded", "yes")]);
    let empty_pair = || {
        vec![
            node("e0", "default", 2, "on-demand", vec![]),
            node("e1", "default", 2, "on-demand", vec![]),
        ]
    };
    let oversized = || vec![node("big", "default", 8, "on-demand", vec![app("500m")])];
    let spread = || {
        (0..2)
            .map(|i| {
                node(
                    &format!("n{i}"),
                    "default",
                    8,
                    "on-demand",
                    vec![app("500m")],
                )
            })
            .collect::<Vec<_>>()
    };
    type Edit = Box<dyn Fn(&mut Vec<NodeState>)>;
    /// The candidates still going, or why not.
    type Outcome = Result<Vec<&'static str>, InvalidKind>;
    /// What the wait changed, and the PDBs after it.
    type Wait = (Edit, Vec<PodDisruptionBudget>);
    // (case, cluster before, the wait, the outcome)
    let cases: Vec<(&str, Vec<NodeState>, Wait, Outcome)> = vec![
        (
            "nothing changed: emptiness goes ahead",
            empty_pair(),
            (Box::new(|_| {}), vec![]),
            Ok(vec!["e0", "e1"]),
        ),
        (
            "a pod bound to one empty node: the other still goes",
            empty_pair(),
            (Box::new(|n| n[0].pods.push(app("100m"))), vec![]),
            Ok(vec!["e1"]),
        ),
        (
            "pods bound to every empty node",
            empty_pair(),
            (
                Box::new(|n| n.iter_mut().for_each(|n| n.pods.push(app("100m")))),
                vec![],
            ),
            Err(InvalidKind::Churn),
        ),
        (
            "an empty node nominated for pending pods",
            vec![node("e0", "default", 2, "on-demand", vec![])],
            (Box::new(|n| n[0].nominated = true), vec![]),
            Err(InvalidKind::Churn),
        ),
        (
            "the budget of one taken by a node gone NotReady",
            vec![
                node("e0", "default", 2, "on-demand", vec![]),
                node("other", "default", 2, "on-demand", vec![app("1500m")]),
            ],
            (Box::new(|n| n[1].ready = false), vec![]),
            Err(InvalidKind::Budget),
        ),
        (
            "nothing changed: the replacement goes ahead",
            oversized(),
            (Box::new(|_| {}), vec![]),
            Ok(vec!["big"]),
        ),
        (
            "a do-not-disrupt pod scheduled during the wait (replace)",
            oversized(),
            (
                Box::new(move |n| n[0].pods.push(do_not_disrupt(app("100m")))),
                vec![],
            ),
            Err(InvalidKind::Churn),
        ),
        (
            "a pod with a blocking PDB scheduled during the wait (replace)",
            oversized(),
            (
                Box::new(move |n| n[0].pods.push(pdb_pod(app("100m")))),
                vec![blocking_pdb.clone()],
            ),
            Err(InvalidKind::Churn),
        ),
        (
            "the pods grew: the decided replacement no longer fits them",
            oversized(),
            (Box::new(|n| n[0].pods.push(app("5"))), vec![]),
            Err(InvalidKind::Scheduling),
        ),
        (
            "do-not-disrupt pods scheduled on both nodes of a merge",
            spread(),
            (
                Box::new(move |n| {
                    n.iter_mut()
                        .for_each(|n| n.pods.push(do_not_disrupt(app("100m"))))
                }),
                vec![],
            ),
            Err(InvalidKind::Churn),
        ),
        (
            "pods with a blocking PDB scheduled on a node of a merge",
            spread(),
            (
                Box::new(move |n| n[1].pods.push(pdb_pod(app("100m")))),
                vec![blocking_pdb.clone()],
            ),
            Err(InvalidKind::Churn),
        ),
    ];
    for (case, mut nodes, (change, pdbs), expected) in cases {
        let pools = if case.starts_with("the budget of one") {
            budget("1")
        } else {
            budget("100%")
        };
        let decided = decide(&input(&nodes, &pools, &[], false))
            .commands
            .into_iter()
            .next()
            .unwrap_or_else(|| panic!("{case}: nothing decided"));
        change(&mut nodes);
        let outcome = validate(&input(&nodes, &pools, &pdbs, false), &decided);
        let outcome = outcome
            .map(|c| c.candidates)
            .map_err(|invalid| invalid.kind);
        let expected = expected.map(|c| c.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(outcome, expected, "{case}");
    }
}

/// A delete is valid while the candidate's pods still fit on the other nodes.
#[test]
fn validation_of_a_delete_fails_when_the_pods_no_longer_fit_elsewhere() {
    use karpenter_core::disruption::{InvalidKind, validate};
    let pools = [pool("default", |np| {
        np.spec.disruption.budgets = vec![Budget {
            nodes: "100%".into(),
            ..Default::default()
        }]
    })];
    let mut keeper = node("keeper", "default", 8, "on-demand", vec![app("1")]);
    keeper
        .annotations
        .insert("karpenter.sh/do-not-disrupt".into(), "true".into());
    let mut nodes = vec![keeper, node("b", "default", 4, "on-demand", vec![app("1")])];
    let decided = decide(&input(&nodes, &pools, &[], false))
        .commands
        .remove(0);
    assert!(decided.replacements.is_empty(), "{decided:?}");
    assert!(validate(&input(&nodes, &pools, &[], false), &decided).is_ok());
    // The keeper filled up meanwhile: b's pod would now need a new node.
    let mut filler = app("6500m");
    filler.metadata.name = Some("filler".into());
    nodes[0].pods.push(filler);
    assert_eq!(
        validate(&input(&nodes, &pools, &[], false), &decided)
            .map_err(|i| i.kind)
            .err(),
        Some(InvalidKind::Scheduling)
    );
}
