use std::sync::Arc;

use k8s_openapi::api::core::v1::NodeSelectorRequirement;
use karpenter_api::NodeClaim;
use karpenter_api::Operator;
use karpenter_core::instancetype::InstanceType;
use karpenter_core::instancetype::fake::FakeInstanceType;
use karpenter_core::scheduling::Requirement;
use serde_json::json;

use super::*;

fn claim(requirements: serde_json::Value, cpu: &str) -> NodeClaim {
    serde_json::from_value(json!({
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {"name": "default-abcde"},
        "spec": {
            "nodeClassRef": {"group": "karpenter.k8s.alibabacloud", "kind": "ECSNodeClass", "name": "default"},
            "requirements": requirements,
            "resources": {"requests": {"cpu": cpu}},
        },
    }))
    .unwrap()
}

fn any_capacity() -> serde_json::Value {
    json!([{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot", "on-demand"]}])
}

fn on_demand_only() -> serde_json::Value {
    json!([{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}])
}

fn it(name: &str, cpu: &str, arch: &str, offerings: &[(&str, &str, f64)]) -> InstanceType {
    FakeInstanceType::new(name)
        .resources(&[("cpu", cpu), ("memory", "8Gi"), ("pods", "110")])
        .arch(arch)
        .offerings(offerings)
        .build()
}

fn arcs(types: Vec<InstanceType>) -> Vec<Arc<InstanceType>> {
    types.into_iter().map(Arc::new).collect()
}

fn vsw(id: &str, zone: &str) -> VSwitch {
    VSwitch {
        id: id.into(),
        zone_id: zone.into(),
    }
}

fn image(id: &str, arch: &str) -> Image {
    Image {
        id: id.into(),
        name: None,
        requirements: vec![NodeSelectorRequirement {
            key: "kubernetes.io/arch".into(),
            operator: "In".into(),
            values: Some(vec![arch.into()]),
        }],
    }
}

fn zones() -> Vec<VSwitch> {
    vec![vsw("vsw-a", "cn-hangzhou-i"), vsw("vsw-b", "cn-hangzhou-j")]
}

fn images() -> Vec<Image> {
    vec![
        image("aliyun_3_x64", "amd64"),
        image("aliyun_3_arm64", "arm64"),
    ]
}

fn names(plan: &GroupPlan) -> Vec<&str> {
    plan.configs
        .iter()
        .map(|c| c.instance_type.as_str())
        .collect()
}

#[test]
fn capacity_type_is_spot_only_when_allowed_and_offered() {
    let spot_and_od = it(
        "ecs.g7.large",
        "2",
        "amd64",
        &[
            ("spot", "cn-hangzhou-i", 0.1),
            ("on-demand", "cn-hangzhou-i", 0.4),
        ],
    );
    let od = it(
        "ecs.g7.xlarge",
        "4",
        "amd64",
        &[("on-demand", "cn-hangzhou-i", 0.8)],
    );
    let cases: [(&str, serde_json::Value, Vec<InstanceType>, &str); 3] = [
        (
            "spot allowed and offered",
            any_capacity(),
            vec![spot_and_od.clone()],
            "spot",
        ),
        (
            "spot not allowed",
            on_demand_only(),
            vec![spot_and_od],
            "on-demand",
        ),
        (
            "spot allowed, none offered",
            any_capacity(),
            vec![od],
            "on-demand",
        ),
    ];
    for (what, reqs, types, expected) in cases {
        let p = plan(
            &claim(reqs, "1"),
            &arcs(types),
            &zones(),
            &images(),
            VSwitchSelectionPolicy::Cheapest,
            0,
        )
        .unwrap();
        assert_eq!(p.capacity_type, expected, "{what}");
        assert_eq!(p.spot(), expected == "spot", "{what}");
    }
}

#[test]
fn configs_are_cheapest_first_capped_at_twenty_and_fit_the_requests() {
    let types: Vec<InstanceType> = (0..30)
        .map(|i| {
            it(
                &format!("ecs.t{i:02}"),
                &format!("{}", 2 + i),
                "amd64",
                &[("on-demand", "cn-hangzhou-i", 1.0 + f64::from(30 - i))],
            )
        })
        .collect();
    let p = plan(
        &claim(on_demand_only(), "3"),
        &arcs(types),
        &zones(),
        &images(),
        VSwitchSelectionPolicy::Cheapest,
        0,
    )
    .unwrap();
    assert_eq!(p.configs.len(), MAX_INSTANCE_TYPES);
    // ecs.t00 (2 vCPU) cannot hold 3 CPUs; the dearest fitting ones are cut.
    assert!(!names(&p).contains(&"ecs.t00"));
    assert_eq!(names(&p)[0], "ecs.t29");
    let prices: Vec<f64> = p.configs.iter().map(|c| c.price).collect();
    assert!(prices.windows(2).all(|w| w[0] <= w[1]), "{prices:?}");
}

#[test]
fn exotic_types_only_when_nothing_else_fits() {
    let gpu = FakeInstanceType::new("ecs.gn7i-c8g1.2xlarge")
        .resources(&[
            ("cpu", "8"),
            ("memory", "30Gi"),
            ("pods", "110"),
            ("nvidia.com/gpu", "1"),
        ])
        .offerings(&[("on-demand", "cn-hangzhou-i", 0.05)])
        .build();
    let mut metal = it(
        "ecs.ebmg7.32xlarge",
        "128",
        "amd64",
        &[("on-demand", "cn-hangzhou-i", 0.06)],
    );
    metal.requirements.add(Requirement::new(
        LABEL_INSTANCE_SIZE,
        Operator::In,
        &["32xlarge-metal"],
    ));
    assert!(is_exotic(&gpu) && is_exotic(&metal));
    let general = it(
        "ecs.g7.2xlarge",
        "8",
        "amd64",
        &[("on-demand", "cn-hangzhou-i", 0.5)],
    );
    let with_general = plan(
        &claim(on_demand_only(), "4"),
        &arcs(vec![gpu.clone(), metal.clone(), general]),
        &zones(),
        &images(),
        VSwitchSelectionPolicy::Cheapest,
        0,
    )
    .unwrap();
    assert_eq!(names(&with_general), ["ecs.g7.2xlarge"]);
    let only_exotic = plan(
        &claim(on_demand_only(), "4"),
        &arcs(vec![gpu, metal]),
        &zones(),
        &images(),
        VSwitchSelectionPolicy::Cheapest,
        0,
    )
    .unwrap();
    assert_eq!(
        names(&only_exotic),
        ["ecs.gn7i-c8g1.2xlarge", "ecs.ebmg7.32xlarge"]
    );
}

#[test]
fn a_mixed_launch_drops_spot_dearer_than_the_cheapest_on_demand() {
    let small = it(
        "ecs.c7.large",
        "2",
        "amd64",
        &[
            ("on-demand", "cn-hangzhou-i", 0.2),
            ("spot", "cn-hangzhou-i", 0.08),
        ],
    );
    let big = it(
        "ecs.c7.4xlarge",
        "16",
        "amd64",
        &[
            ("on-demand", "cn-hangzhou-i", 1.6),
            ("spot", "cn-hangzhou-i", 0.3),
        ],
    );
    let p = plan(
        &claim(any_capacity(), "1"),
        &arcs(vec![big.clone(), small.clone()]),
        &zones(),
        &images(),
        VSwitchSelectionPolicy::Cheapest,
        0,
    )
    .unwrap();
    assert_eq!(p.capacity_type, "spot");
    assert_eq!(names(&p), ["ecs.c7.large"], "0.3 spot > 0.2 on-demand");
    // With minValues the scheduler counted on every type: nothing is filtered.
    let min_values = json!([
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot", "on-demand"]},
        {"key": "node.kubernetes.io/instance-type", "operator": "Exists", "minValues": 2},
    ]);
    let p = plan(
        &claim(min_values, "1"),
        &arcs(vec![big, small]),
        &zones(),
        &images(),
        VSwitchSelectionPolicy::Cheapest,
        0,
    )
    .unwrap();
    assert_eq!(names(&p), ["ecs.c7.large", "ecs.c7.4xlarge"]);
}

#[test]
fn the_v_switch_is_in_an_allowed_zone_with_stock() {
    let t = it(
        "ecs.g7.large",
        "2",
        "amd64",
        &[
            ("spot", "cn-hangzhou-i", 0.12),
            ("spot", "cn-hangzhou-j", 0.10),
            ("spot", "cn-hangzhou-k", 0.01),
            ("on-demand", "cn-hangzhou-i", 0.4),
            ("on-demand", "cn-hangzhou-j", 0.4),
        ],
    );
    let types = arcs(vec![t]);
    let zone_of = |reqs: serde_json::Value, policy, spread| {
        plan(
            &claim(reqs, "1"),
            &types,
            &zones(),
            &images(),
            policy,
            spread,
        )
        .map(|p| (p.configs[0].zone.clone(), p.configs[0].v_switch_id.clone()))
    };
    let cheapest = VSwitchSelectionPolicy::Cheapest;
    // No vSwitch in cn-hangzhou-k: its cheap spot offering cannot be launched.
    assert_eq!(
        zone_of(any_capacity(), cheapest, 0).unwrap(),
        ("cn-hangzhou-j".to_string(), "vsw-b".to_string())
    );
    let in_i = json!([
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]},
        {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["cn-hangzhou-i"]},
    ]);
    assert_eq!(zone_of(in_i, cheapest, 7).unwrap().1, "vsw-a");
    // On-demand costs the same in both zones: the spread picks either.
    let od: std::collections::BTreeSet<String> = (0..4)
        .map(|s| zone_of(on_demand_only(), cheapest, s).unwrap().0)
        .collect();
    assert_eq!(od.len(), 2, "{od:?}");
    // Balanced spreads spot too, dearer zone included.
    let balanced: std::collections::BTreeSet<String> = (0..4)
        .map(|s| {
            zone_of(any_capacity(), VSwitchSelectionPolicy::Balanced, s)
                .unwrap()
                .0
        })
        .collect();
    assert_eq!(balanced.len(), 2, "{balanced:?}");
    let only_k = json!([
        {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["cn-hangzhou-k"]},
    ]);
    assert_eq!(
        zone_of(only_k, cheapest, 0).unwrap_err(),
        PlanError::NothingFits
    );
}

#[test]
fn the_group_boots_one_image_and_only_types_it_boots() {
    let x86 = it(
        "ecs.g7.large",
        "2",
        "amd64",
        &[("on-demand", "cn-hangzhou-i", 0.4)],
    );
    let arm = it(
        "ecs.g8y.large",
        "2",
        "arm64",
        &[("on-demand", "cn-hangzhou-i", 0.3)],
    );
    let p = plan(
        &claim(on_demand_only(), "1"),
        &arcs(vec![x86.clone(), arm.clone()]),
        &zones(),
        &images(),
        VSwitchSelectionPolicy::Cheapest,
        0,
    )
    .unwrap();
    assert_eq!(p.image_id, "aliyun_3_arm64");
    assert_eq!(names(&p), ["ecs.g8y.large"], "the x86 type would not boot");
    let x86_only = vec![image("aliyun_3_x64", "amd64")];
    let p = plan(
        &claim(on_demand_only(), "1"),
        &arcs(vec![x86, arm.clone()]),
        &zones(),
        &x86_only,
        VSwitchSelectionPolicy::Cheapest,
        0,
    );
    assert_eq!(
        p.unwrap_err(),
        PlanError::NoImage("ecs.g8y.large (arm64)".into())
    );
    let p = plan(
        &claim(on_demand_only(), "1"),
        &arcs(vec![arm]),
        &zones(),
        &[],
        VSwitchSelectionPolicy::Cheapest,
        0,
    );
    assert!(matches!(p, Err(PlanError::NoImage(_))));
}

#[test]
fn nothing_fits_without_an_available_offering() {
    let mut t = it(
        "ecs.g7.large",
        "2",
        "amd64",
        &[("on-demand", "cn-hangzhou-i", 0.4)],
    );
    t.offerings[0].available = false;
    let p = plan(
        &claim(on_demand_only(), "1"),
        &arcs(vec![t]),
        &zones(),
        &images(),
        VSwitchSelectionPolicy::Cheapest,
        0,
    );
    assert_eq!(p.unwrap_err(), PlanError::NothingFits);
}
