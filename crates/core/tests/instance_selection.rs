//! Upstream's instance-selection suite (`instance_selection_test.go`): every launch uses the
//! cheapest instance type that satisfies the NodePool and the pod, and every instance type the
//! NodeClaim lists satisfies them too. Checked against a brute-force oracle over the assorted
//! catalog, presented in shuffled order.

mod support;

use karpenter_api::Operator;
use karpenter_core::instancetype::{InstanceType, fake};
use support::*;

/// Shuffles deterministically so order never decides the answer.
fn shuffled(mut types: Vec<InstanceType>) -> Vec<InstanceType> {
    let mut state = 0x2545_F491_4F6C_DD1Du64;
    for i in (1..types.len()).rev() {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        types.swap(i, (state % (i as u64 + 1)) as usize);
    }
    types
}

fn pool() -> PoolBuilder {
    node_pool("default")
        .only(CAPACITY_TYPE, Operator::In, &["spot", "on-demand"])
        .require(ARCH, Operator::In, &["arm64", "amd64"])
}

/// Whether an instance type's single label value (or one of its offerings) matches.
fn has(it: &InstanceType, key: &str, value: &str) -> bool {
    match key {
        ZONE => it.offerings.iter().any(|o| o.available && o.zone == value),
        CAPACITY_TYPE => it
            .offerings
            .iter()
            .any(|o| o.available && o.capacity_type == value),
        _ => it.requirements.get(key).is_some_and(|r| r.has(value)),
    }
}

/// The cheapest price among offerings satisfying every constraint, by brute force.
fn oracle(types: &[InstanceType], constraints: &[(&str, &str)]) -> Option<f64> {
    types
        .iter()
        .filter(|it| {
            constraints
                .iter()
                .filter(|(k, _)| *k != ZONE && *k != CAPACITY_TYPE)
                .all(|(k, v)| has(it, k, v))
        })
        .flat_map(|it| it.offerings.iter())
        .filter(|o| {
            o.available
                && constraints.iter().all(|(k, v)| match *k {
                    ZONE => o.zone == *v,
                    CAPACITY_TYPE => o.capacity_type == *v,
                    _ => true,
                })
        })
        .map(|o| o.price)
        .min_by(f64::total_cmp)
}

#[test]
fn cheapest_instance_that_fits_the_constraints() {
    let types = fake::instance_types_assorted();
    // (name, whether the NodePool or the pod sets the constraints, constraints)
    type Case<'a> = (&'a str, bool, Vec<(&'a str, &'a str)>);
    let cases: Vec<Case<'_>> = vec![
        ("no constraints", false, vec![]),
        ("pod arch amd64", false, vec![(ARCH, "amd64")]),
        ("pod arch arm64", false, vec![(ARCH, "arm64")]),
        ("NodePool arch amd64", true, vec![(ARCH, "amd64")]),
        ("NodePool arch arm64", true, vec![(ARCH, "arm64")]),
        ("NodePool os windows", true, vec![(OS, "windows")]),
        ("pod os windows", false, vec![(OS, "windows")]),
        ("pod os linux", false, vec![(OS, "linux")]),
        ("NodePool os linux", true, vec![(OS, "linux")]),
        ("NodePool zone 2", true, vec![(ZONE, "test-zone-2")]),
        ("pod zone 2", false, vec![(ZONE, "test-zone-2")]),
        ("NodePool spot", true, vec![(CAPACITY_TYPE, "spot")]),
        ("pod spot", false, vec![(CAPACITY_TYPE, "spot")]),
        (
            "NodePool on-demand in zone 1",
            true,
            vec![(CAPACITY_TYPE, "on-demand"), (ZONE, "test-zone-1")],
        ),
        (
            "pod spot in zone 1",
            false,
            vec![(CAPACITY_TYPE, "spot"), (ZONE, "test-zone-1")],
        ),
        (
            "NodePool on-demand/zone 1/arm64/windows",
            true,
            vec![
                (CAPACITY_TYPE, "on-demand"),
                (ZONE, "test-zone-1"),
                (ARCH, "arm64"),
                (OS, "windows"),
            ],
        ),
        (
            "pod spot/zone 2/amd64/linux",
            false,
            vec![
                (CAPACITY_TYPE, "spot"),
                (ZONE, "test-zone-2"),
                (ARCH, "amd64"),
                (OS, "linux"),
            ],
        ),
    ];
    let mut failures = Vec::new();
    for (name, on_pool, constraints) in cases {
        let mut p = pool();
        let mut pd = pod();
        if on_pool {
            for (k, v) in &constraints {
                p = p.require(k, Operator::In, &[v]);
            }
        } else {
            pd = pd.node_selector(&constraints);
        }
        let outcome = Env::with_types(p, shuffled(types.clone())).provision(&[pd.build()]);
        if !outcome.scheduled(0) {
            failures.push(format!(
                "{name}: not scheduled: {:?}",
                outcome.results.pod_errors
            ));
            continue;
        }
        let want = oracle(&types, &constraints).expect("the catalog covers every case");
        if (outcome.node(0).price - want).abs() > 1e-12 {
            failures.push(format!(
                "{name}: launched at {} but {want} was possible",
                outcome.node(0).price
            ));
        }
        for it in &outcome.results.new_node_claims[0].instance_types {
            for (k, v) in &constraints {
                if !has(it, k, v) {
                    failures.push(format!("{name}: option {} lacks {k}={v}", it.name));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn no_instance_type_matches() {
    let types = fake::instance_types_assorted();
    for (p, pd) in [
        (pool(), pod().node_selector(&[(ARCH, "s390x")])),
        (
            pool().require(ARCH, Operator::In, &["arm64"]),
            pod().node_selector(&[(ARCH, "amd64")]),
        ),
        (
            pool().require(ARCH, Operator::In, &["arm64"]),
            pod().node_selector(&[(ZONE, "test-zone-4")]),
        ),
    ] {
        assert!(
            !Env::with_types(p, types.clone())
                .provision(&[pd.build()])
                .scheduled(0)
        );
    }
}

#[test]
fn cheapest_with_enough_resources() {
    let types = fake::instance_types_assorted();
    let o = Env::with_types(pool(), shuffled(types.clone()))
        .provision(&[pod().requests(&[("cpu", "5"), ("memory", "20Gi")]).build()]);
    let node = o.node(0);
    assert!(
        node.instance_type.starts_with("8-cpu-32-mem"),
        "{}",
        node.instance_type
    );
    assert!(
        o.results.new_node_claims[0]
            .instance_types
            .iter()
            .all(|it| it.allocatable().cpu >= 5000)
    );
}

#[test]
fn on_demand_price_decides_when_only_on_demand_is_allowed() {
    // test-instance1 is cheaper on demand, test-instance2 cheaper on spot: on-demand only must
    // pick test-instance1 however spot prices would order them.
    let types = vec![
        fake::FakeInstanceType::new("test-instance1")
            .operating_systems(&["linux"])
            .resources(&[("cpu", "1"), ("memory", "1Gi")])
            .offerings(&[
                ("on-demand", "test-zone-1a", 1.0),
                ("spot", "test-zone-1a", 0.2),
            ])
            .build(),
        fake::FakeInstanceType::new("test-instance2")
            .operating_systems(&["linux"])
            .resources(&[("cpu", "1"), ("memory", "1Gi")])
            .offerings(&[
                ("on-demand", "test-zone-1a", 1.3),
                ("spot", "test-zone-1a", 0.1),
            ])
            .build(),
    ];
    let o = Env::with_types(
        node_pool("default").only(CAPACITY_TYPE, Operator::In, &["on-demand"]),
        types.clone(),
    )
    .provision(&[pod().build()]);
    assert_eq!(o.node(0).instance_type, "test-instance1");
    let o = Env::with_types(
        node_pool("default").only(CAPACITY_TYPE, Operator::In, &["spot"]),
        types,
    )
    .provision(&[pod().build()]);
    assert_eq!(o.node(0).instance_type, "test-instance2");
}

#[test]
fn nodeclaims_list_at_most_600_types_cheapest_first() {
    let types = fake::instance_types(700);
    let o = Env::with_types(node_pool("default"), shuffled(types)).provision(&[pod().build()]);
    let listed = &o.results.new_node_claims[0].instance_types;
    assert_eq!(listed.len(), 600);
    let prices: Vec<f64> = listed.iter().map(|it| it.offerings[0].price).collect();
    assert!(prices.windows(2).all(|w| w[0] <= w[1]), "cheapest first");
    assert_eq!(listed[0].name, "fake-it-0");
}
