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

/// The custom integer label upstream's `minValues` cases use.
const GENERATION: &str = "karpenter/numerical-value";

/// Upstream's arm64 Linux type of `cpu` CPUs with one spot offering at `price`, labelled
/// with `generation` when given.
fn typed(name: &str, cpu: &str, price: f64, generation: Option<&str>) -> InstanceType {
    let mut it = fake::FakeInstanceType::new(name)
        .arch("arm64")
        .operating_systems(&["linux"])
        .resources(&[("cpu", cpu), ("memory", &format!("{cpu}Gi"))])
        .offerings(&[("spot", "test-zone-1-spot", price)])
        .build();
    if let Some(g) = generation {
        it.requirements
            .add(karpenter_core::scheduling::Requirement::new(
                GENERATION,
                Operator::In,
                &[g],
            ));
    }
    it
}

/// Two pods of 0.9 CPU that fit together on the larger types only.
fn two_small_pods() -> Vec<k8s_openapi::api::core::v1::Pod> {
    pod()
        .requests(&[("cpu", "0.9"), ("memory", "0.9Gi")])
        .times(2)
}

#[test]
fn min_values_keep_enough_instance_types() {
    use Operator::*;
    let cases: Vec<(&str, PoolBuilder, Vec<InstanceType>)> = vec![
        (
            "instance types In, minValues 2",
            node_pool("default").require_min(
                INSTANCE_TYPE,
                In,
                &["instance-type-1", "instance-type-2"],
                2,
            ),
            vec![
                typed("instance-type-1", "1", 0.52, None),
                typed("instance-type-2", "4", 1.0, None),
            ],
        ),
        (
            "Gt 2, minValues 2",
            node_pool("default").require_min(GENERATION, Gt, &["2"], 2),
            vec![
                typed("instance-type-1", "1", 0.52, Some("2")),
                typed("instance-type-2", "1", 1.0, Some("3")),
                typed("instance-type-3", "4", 1.2, Some("4")),
            ],
        ),
        (
            "Lt 4, minValues 2",
            node_pool("default").require_min(GENERATION, Lt, &["4"], 2),
            vec![
                typed("instance-type-1", "1", 0.52, Some("2")),
                typed("instance-type-2", "2", 1.0, Some("3")),
                typed("instance-type-3", "4", 1.2, Some("4")),
            ],
        ),
        (
            "the larger minValues of In (1) and NotIn (2)",
            node_pool("default")
                .require_min(
                    INSTANCE_TYPE,
                    In,
                    &["instance-type-1", "instance-type-2", "instance-type-3"],
                    1,
                )
                .require_min(INSTANCE_TYPE, NotIn, &["instance-type-3"], 2),
            vec![
                typed("instance-type-1", "1", 0.52, None),
                typed("instance-type-2", "2", 1.0, None),
                typed("instance-type-3", "4", 1.2, None),
            ],
        ),
        (
            "the larger minValues of Gt (1) and Lt (2)",
            node_pool("default")
                .require_min(GENERATION, Gt, &["2"], 1)
                .require_min(GENERATION, Lt, &["5"], 2),
            vec![
                typed("instance-type-1", "1", 0.52, Some("2")),
                typed("instance-type-2", "1", 1.0, Some("3")),
                typed("instance-type-3", "4", 1.2, Some("4")),
                typed("instance-type-4", "4", 1.2, Some("5")),
            ],
        ),
        (
            "the larger minValues of Exists (1) and In (2)",
            node_pool("default")
                .require_min(INSTANCE_TYPE, Exists, &[], 1)
                .require_min(
                    INSTANCE_TYPE,
                    In,
                    &["instance-type-1", "instance-type-2"],
                    2,
                ),
            vec![
                typed("instance-type-1", "1", 0.52, None),
                typed("instance-type-2", "4", 1.0, None),
            ],
        ),
        (
            "minValues on two keys",
            node_pool("default")
                .require_min(ARCH, Exists, &[], 2)
                .require_min(
                    INSTANCE_TYPE,
                    In,
                    &["instance-type-1", "instance-type-2"],
                    1,
                ),
            vec![typed("instance-type-1", "1", 0.52, None), {
                // The second type is amd64: two architectures are possible.
                let mut it = typed("instance-type-2", "4", 1.0, None);
                it.requirements.remove(ARCH);
                it.requirements
                    .add(karpenter_core::scheduling::Requirement::new(
                        ARCH,
                        Operator::In,
                        &["amd64"],
                    ));
                it
            }],
        ),
    ];
    let mut failures = Vec::new();
    for (case, p, types) in cases {
        let o = Env::with_types(p, types).provision(&two_small_pods());
        if !(o.scheduled(0) && o.scheduled(1)) {
            failures.push(format!("{case}: {:?}", o.results.pod_errors));
            continue;
        }
        // Without minValues both would share the larger type; keeping two options each
        // (one of them too small for two) they go to two nodes.
        if o.nodes.len() != 2 {
            failures.push(format!("{case}: {} nodes", o.nodes.len()));
        }
        for claim in &o.results.new_node_claims {
            if claim.instance_types.len() < 2 {
                failures.push(format!(
                    "{case}: a NodeClaim lists {} types",
                    claim.instance_types.len()
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn min_values_that_cannot_be_kept() {
    use Operator::*;
    // (case, NodePool, instance types, pods' extra requirement, max instance types)
    type Case<'a> = (
        &'a str,
        PoolBuilder,
        Vec<InstanceType>,
        Option<&'a str>,
        usize,
    );
    let cases: Vec<Case<'_>> = vec![
        (
            "the pods' Gt leaves one generation",
            node_pool("default").require_min(GENERATION, Exists, &[], 2),
            vec![
                typed("instance-type-1", "1", 0.52, Some("2")),
                typed("instance-type-2", "4", 1.0, Some("3")),
            ],
            Some("2"),
            600,
        ),
        (
            "Lt 4 leaves one type",
            node_pool("default").require_min(GENERATION, Lt, &["4"], 2),
            vec![
                typed("instance-type-1", "2", 0.52, Some("2")),
                typed("instance-type-2", "4", 1.2, Some("4")),
            ],
            None,
            600,
        ),
        (
            "fewer types than minValues",
            node_pool("default").require_min(INSTANCE_TYPE, Exists, &[], 11),
            fake::instance_types_assorted()
                .into_iter()
                .take(10)
                .collect(),
            None,
            600,
        ),
        (
            "the list is truncated below minValues",
            node_pool("default").require_min(
                INSTANCE_TYPE,
                In,
                &["instance-type-1", "instance-type-2"],
                2,
            ),
            vec![
                typed("instance-type-1", "1", 0.52, None),
                typed("instance-type-2", "4", 1.0, None),
            ],
            None,
            1,
        ),
    ];
    let mut failures = Vec::new();
    for (case, p, types, gt, max) in cases {
        let mut env = Env::with_types(p, types);
        env.options.max_instance_types = max;
        let pods: Vec<_> = match gt {
            Some(v) => pod()
                .requests(&[("cpu", "0.9"), ("memory", "0.9Gi")])
                .require(&[(GENERATION, "Gt", &[v])])
                .times(2),
            None => two_small_pods(),
        };
        let o = env.provision(&pods);
        if o.scheduled(0) || o.scheduled(1) {
            failures.push(format!("{case}: scheduled"));
        }
        let why = if gt.is_some() {
            "minValues requirement is not met for label(s) (label(s)=[karpenter/numerical-value])"
        } else {
            "minValues"
        };
        if o.results.pod_errors.len() != 2
            || !o.results.pod_errors.values().all(|e| e.contains(why))
        {
            failures.push(format!("{case}: {:?}", o.results.pod_errors));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn cheapest_with_constraints_from_the_node_pool_and_the_pod() {
    let types = fake::instance_types_assorted();
    // (case, the NodePool's constraints, the pod's)
    type Case<'a> = (&'a str, Vec<(&'a str, &'a str)>, Vec<(&'a str, &'a str)>);
    let cases: Vec<Case<'_>> = vec![
        (
            "NodePool spot, pod zone 2",
            vec![(CAPACITY_TYPE, "spot")],
            vec![(ZONE, "test-zone-2")],
        ),
        (
            "NodePool amd64/linux, pod spot/zone 2",
            vec![(ARCH, "amd64"), (OS, "linux")],
            vec![(CAPACITY_TYPE, "spot"), (ZONE, "test-zone-2")],
        ),
    ];
    for (case, on_pool, on_pod) in cases {
        let mut p = pool();
        for (k, v) in &on_pool {
            p = p.require(k, Operator::In, &[v]);
        }
        let o = Env::with_types(p, shuffled(types.clone()))
            .provision(&[pod().node_selector(&on_pod).build()]);
        assert!(o.scheduled(0), "{case}: {:?}", o.results.pod_errors);
        let all: Vec<(&str, &str)> = on_pool.iter().chain(&on_pod).copied().collect();
        let want = oracle(&types, &all).expect("the catalog covers the case");
        assert!((o.node(0).price - want).abs() < 1e-12, "{case}");
        for it in &o.results.new_node_claims[0].instance_types {
            for (k, v) in &all {
                assert!(has(it, k, v), "{case}: option {} lacks {k}={v}", it.name);
            }
        }
    }
}

#[test]
fn no_instance_type_matches_the_selector() {
    let assorted = fake::instance_types_assorted;
    let amd64 = |it: &InstanceType| has(it, ARCH, "amd64");
    let no_arm_in_zone_2 = |it: &InstanceType| !has(it, ZONE, "test-zone-2") || amd64(it);
    // (case, the catalog, the NodePool, the pod)
    let cases: Vec<(&str, Vec<InstanceType>, PoolBuilder, PodBuilder)> = vec![
        (
            "pod arm64, no arm64 type",
            assorted().into_iter().filter(amd64).collect(),
            pool(),
            pod().node_selector(&[(ARCH, "arm64")]),
        ),
        (
            "pod arm64 in zone 2, no arm64 type there",
            assorted().into_iter().filter(no_arm_in_zone_2).collect(),
            pool(),
            pod().node_selector(&[(ARCH, "arm64"), (ZONE, "test-zone-2")]),
        ),
        (
            "NodePool arm64, pod zone 2, no arm64 type there",
            assorted().into_iter().filter(no_arm_in_zone_2).collect(),
            pool().require(ARCH, Operator::In, &["arm64"]),
            pod().node_selector(&[(ZONE, "test-zone-2")]),
        ),
    ];
    for (case, types, p, pd) in cases {
        assert!(!types.is_empty(), "{case}");
        let o = Env::with_types(p, types).provision(&[pd.build()]);
        assert!(!o.scheduled(0), "{case}");
        assert!(
            o.results.new_node_claims.is_empty(),
            "{case}: nothing launched"
        );
    }
}
