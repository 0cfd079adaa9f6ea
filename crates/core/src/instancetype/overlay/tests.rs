//! Upstream's NodeOverlay controller and store cases (pkg/controllers/nodeoverlay), as tables:
//! overlays, instance types, and each overlay's outcome or the overlaid prices and capacity.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Value, json};

use super::*;
use crate::instancetype::fake::FakeInstanceType;

fn overlay(name: &str, weight: Option<i32>, reqs: Value, change: Value) -> NodeOverlay {
    let mut spec = json!({"requirements": reqs});
    if let Some(w) = weight {
        spec["weight"] = json!(w);
    }
    for (k, v) in change.as_object().unwrap() {
        spec[k] = v.clone();
    }
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).unwrap()
}

fn types_in(key: &str, values: &[&str]) -> Value {
    json!([{"key": key, "operator": "In", "values": values}])
}

fn it_in(values: &[&str]) -> Value {
    types_in("node.kubernetes.io/instance-type", values)
}

fn pool(name: &str, labels: Value) -> NodePool {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"template": {"metadata": {"labels": labels}, "spec": {"nodeClassRef": {"group": "g", "kind": "K", "name": "n"}}}},
    }))
    .unwrap()
}

/// Upstream's test types: `default-instance-type` with one spot offering in test-zone-1 at
/// 1.02, and the other fake types with the default five offerings.
fn upstream_types() -> Vec<Arc<InstanceType>> {
    vec![
        Arc::new(
            FakeInstanceType::new("default-instance-type")
                .offerings(&[("spot", "test-zone-1", 1.02)])
                .build(),
        ),
        Arc::new(
            FakeInstanceType::new("small-instance-type")
                .resources(&[("cpu", "2"), ("memory", "2Gi")])
                .build(),
        ),
        Arc::new(FakeInstanceType::new("gpu-vendor-instance-type").build()),
        Arc::new(FakeInstanceType::new("gpu-vendor-b-instance-type").build()),
        Arc::new(
            FakeInstanceType::new("arm-instance-type")
                .arch("arm64")
                .build(),
        ),
    ]
}

/// Four offerings of one type: spot zone 1 (1.02), on-demand zone 2 (2.02), spot zone 3
/// (3.02), reserved zone 4 (4.02).
fn offering_types() -> Vec<Arc<InstanceType>> {
    vec![Arc::new(
        FakeInstanceType::new("default-instance-type")
            .offerings(&[
                ("spot", "test-zone-1", 1.02),
                ("on-demand", "test-zone-2", 2.02),
                ("spot", "test-zone-3", 3.02),
                ("reserved", "test-zone-4", 4.02),
            ])
            .build(),
    )]
}

fn outcomes(overlays: &[NodeOverlay], types: &[Arc<InstanceType>]) -> BTreeMap<String, Outcome> {
    let np = pool("default", json!({}));
    evaluate(
        overlays,
        &[PoolTypes {
            node_pool: &np,
            instance_types: types,
        }],
    )
    .outcomes
}

use Outcome::{Applied, Conflict};

/// A case name, the overlays, the instance types, and each overlay's expected outcome.
type ConflictCase = (
    &'static str,
    Vec<NodeOverlay>,
    Vec<Arc<InstanceType>>,
    Vec<Outcome>,
);

#[test]
fn conflict_table() {
    let zone = "topology.kubernetes.io/zone";
    let ct = "karpenter.sh/capacity-type";
    let exists_ct = json!([{"key": ct, "operator": "Exists"}]);
    // (case, overlays, instance types, expected outcomes in the overlays' order)
    let cases: Vec<ConflictCase> = vec![
        (
            "a single overlay",
            vec![overlay(
                "a",
                Some(10),
                it_in(&["default-instance-type"]),
                json!({"price": "1.03"}),
            )],
            upstream_types(),
            vec![Applied],
        ),
        (
            "same weight, overlapping types: the later name wins",
            vec![
                overlay(
                    "overlay-a",
                    Some(10),
                    types_in("kubernetes.io/arch", &["arm64"]),
                    json!({"price": "1.03"}),
                ),
                overlay(
                    "overlay-b",
                    Some(10),
                    exists_ct.clone(),
                    json!({"price": "23"}),
                ),
            ],
            upstream_types(),
            vec![Conflict, Applied],
        ),
        (
            "same weight, disjoint types",
            vec![
                overlay(
                    "overlay-a",
                    Some(10),
                    types_in("kubernetes.io/arch", &["arm64"]),
                    json!({"price": "1.03"}),
                ),
                overlay(
                    "overlay-b",
                    Some(10),
                    types_in("kubernetes.io/arch", &["amd64"]),
                    json!({"price": "23"}),
                ),
            ],
            upstream_types(),
            vec![Applied, Applied],
        ),
        (
            "overlap on a zone",
            vec![
                overlay(
                    "overlay-a",
                    Some(10),
                    types_in(zone, &["test-zone-1", "test-zone-4"]),
                    json!({"price": "1.03"}),
                ),
                overlay(
                    "overlay-b",
                    Some(10),
                    exists_ct.clone(),
                    json!({"price": "23"}),
                ),
            ],
            offering_types(),
            vec![Conflict, Applied],
        ),
        (
            "overlap on a capacity type",
            vec![
                overlay(
                    "overlay-a",
                    Some(10),
                    types_in(ct, &["spot"]),
                    json!({"price": "1.03"}),
                ),
                overlay(
                    "overlay-b",
                    Some(10),
                    types_in(zone, &["test-zone-3"]),
                    json!({"price": "23"}),
                ),
            ],
            offering_types(),
            vec![Conflict, Applied],
        ),
        (
            "offerings that do not overlap",
            vec![
                overlay(
                    "overlay-a",
                    Some(10),
                    types_in(ct, &["on-demand"]),
                    json!({"price": "1.03"}),
                ),
                overlay(
                    "overlay-b",
                    Some(10),
                    types_in(zone, &["test-zone-1", "test-zone-3"]),
                    json!({"price": "23"}),
                ),
            ],
            offering_types(),
            vec![Applied, Applied],
        ),
        (
            "price: same weight, overlapping types",
            vec![
                overlay(
                    "overlay-a",
                    Some(10),
                    it_in(&["default-instance-type", "small-instance-type"]),
                    json!({"price": "1.03"}),
                ),
                overlay(
                    "overlay-b",
                    Some(10),
                    it_in(&["default-instance-type", "gpu-vendor-instance-type"]),
                    json!({"price": "23"}),
                ),
            ],
            upstream_types(),
            vec![Conflict, Applied],
        ),
        (
            "priceAdjustment: same weight, overlapping types",
            vec![
                overlay(
                    "overlay-a",
                    Some(10),
                    it_in(&["default-instance-type", "small-instance-type"]),
                    json!({"priceAdjustment": "+54"}),
                ),
                overlay(
                    "overlay-b",
                    Some(10),
                    it_in(&["default-instance-type", "gpu-vendor-instance-type"]),
                    json!({"priceAdjustment": "-2"}),
                ),
            ],
            upstream_types(),
            vec![Conflict, Applied],
        ),
        (
            "equal prices of one weight still conflict",
            vec![
                overlay(
                    "overlay-a",
                    Some(10),
                    it_in(&["default-instance-type"]),
                    json!({"price": "100"}),
                ),
                overlay(
                    "overlay-b",
                    Some(10),
                    it_in(&["default-instance-type"]),
                    json!({"price": "100"}),
                ),
            ],
            upstream_types(),
            vec![Conflict, Applied],
        ),
        (
            "price: different weights",
            vec![
                overlay(
                    "overlay-a",
                    Some(10),
                    it_in(&["default-instance-type"]),
                    json!({"price": "54"}),
                ),
                overlay(
                    "overlay-b",
                    Some(20),
                    it_in(&["default-instance-type"]),
                    json!({"price": "23"}),
                ),
            ],
            upstream_types(),
            vec![Applied, Applied],
        ),
        (
            "a price and a capacity of one weight do not conflict",
            vec![
                overlay(
                    "overlay-a",
                    Some(10),
                    it_in(&["default-instance-type"]),
                    json!({"price": "54"}),
                ),
                overlay(
                    "overlay-b",
                    Some(10),
                    it_in(&["default-instance-type"]),
                    json!({"capacity": {"smarter-devices/fuse": "1"}}),
                ),
            ],
            upstream_types(),
            vec![Applied, Applied],
        ),
        (
            "capacity: same resource, same weight",
            vec![
                overlay(
                    "overlay-a",
                    Some(10),
                    it_in(&["default-instance-type", "small-instance-type"]),
                    json!({"capacity": {"smarter-devices/fuse": "1"}}),
                ),
                overlay(
                    "overlay-b",
                    Some(10),
                    it_in(&["default-instance-type", "gpu-vendor-instance-type"]),
                    json!({"capacity": {"smarter-devices/fuse": "54"}}),
                ),
            ],
            upstream_types(),
            vec![Conflict, Applied],
        ),
        (
            "capacity: equal values of one weight still conflict",
            vec![
                overlay(
                    "overlay-a",
                    Some(10),
                    it_in(&["default-instance-type", "small-instance-type"]),
                    json!({"capacity": {"smarter-devices/fuse": "54"}}),
                ),
                overlay(
                    "overlay-b",
                    Some(10),
                    it_in(&["default-instance-type", "gpu-vendor-instance-type"]),
                    json!({"capacity": {"smarter-devices/fuse": "54"}}),
                ),
            ],
            upstream_types(),
            vec![Conflict, Applied],
        ),
        (
            "capacity: three overlays, one conflicting pair",
            vec![
                overlay(
                    "conflicting-overlay-1",
                    Some(10),
                    it_in(&["default-instance-type", "small-instance-type"]),
                    json!({"capacity": {"hugepages-1Gi": "2Gi"}}),
                ),
                overlay(
                    "good-overlay-1",
                    Some(10),
                    it_in(&["default-instance-type"]),
                    json!({"capacity": {"smarter-devices/fuse": "1"}}),
                ),
                overlay(
                    "conflicting-overlay-2",
                    Some(10),
                    it_in(&["default-instance-type"]),
                    json!({"capacity": {"hugepages-1Gi": "3Gi"}}),
                ),
            ],
            upstream_types(),
            vec![Conflict, Applied, Applied],
        ),
        (
            "capacity: mutually exclusive requirements",
            vec![
                overlay(
                    "overlay-a",
                    Some(10),
                    it_in(&["default-instance-type"]),
                    json!({"capacity": {"smarter-devices/fuse": "54"}}),
                ),
                overlay(
                    "overlay-b",
                    Some(10),
                    json!([{"key": "node.kubernetes.io/instance-type", "operator": "NotIn", "values": ["default-instance-type"]}]),
                    json!({"capacity": {"smarter-devices/fuse": "5"}}),
                ),
            ],
            upstream_types(),
            vec![Applied, Applied],
        ),
        (
            "capacity: different weights",
            vec![
                overlay(
                    "overlay-a",
                    Some(10),
                    it_in(&["default-instance-type"]),
                    json!({"capacity": {"smarter-devices/fuse": "55"}}),
                ),
                overlay(
                    "overlay-b",
                    Some(20),
                    it_in(&["default-instance-type", "gpu-vendor-instance-type"]),
                    json!({"capacity": {"smarter-devices/fuse": "5"}}),
                ),
            ],
            upstream_types(),
            vec![Applied, Applied],
        ),
        (
            "capacity: different resources of one weight",
            vec![
                overlay(
                    "overlay-a",
                    Some(10),
                    it_in(&["default-instance-type"]),
                    json!({"capacity": {"smarter-devices/fuse": "55"}}),
                ),
                overlay(
                    "overlay-b",
                    Some(10),
                    it_in(&["default-instance-type", "gpu-vendor-instance-type"]),
                    json!({"capacity": {"hugepages-2Mi": "100Mi"}}),
                ),
            ],
            upstream_types(),
            vec![Applied, Applied],
        ),
        (
            "unset weights are weight 0 and conflict with each other",
            vec![
                overlay(
                    "overlay-a",
                    None,
                    it_in(&["default-instance-type"]),
                    json!({"price": "1"}),
                ),
                overlay(
                    "overlay-b",
                    None,
                    it_in(&["default-instance-type"]),
                    json!({"price": "2"}),
                ),
            ],
            upstream_types(),
            vec![Conflict, Applied],
        ),
    ];
    for (case, overlays, types, expected) in cases {
        let got = outcomes(&overlays, &types);
        let got: Vec<Outcome> = overlays.iter().map(|o| got[o.name()].clone()).collect();
        assert_eq!(got, expected, "{case}");
    }
}

#[test]
fn runtime_validation_failures_are_not_applied() {
    let types = upstream_types();
    for (case, change, reqs) in [
        (
            "invalid requirement value",
            json!({"price": "1"}),
            json!([{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["invalid-value"]}]),
        ),
        (
            "a well-known resource",
            json!({"capacity": {"cpu": "1"}}),
            it_in(&["default-instance-type"]),
        ),
        (
            "NotIn without values",
            json!({"price": "1"}),
            json!([{"key": "test", "operator": "NotIn"}]),
        ),
    ] {
        let o = overlay("bad", Some(1), reqs, change);
        let got = outcomes(std::slice::from_ref(&o), &types);
        assert!(matches!(got["bad"], Outcome::Invalid(_)), "{case}: {got:?}");
        let np = pool("default", json!({}));
        let eval = evaluate(
            &[o],
            &[PoolTypes {
                node_pool: &np,
                instance_types: &types,
            }],
        );
        assert!(eval.is_empty(), "{case}");
    }
}

fn price_of(types: &[Arc<InstanceType>], name: &str, zone: &str) -> f64 {
    let it = types.iter().find(|t| t.name == name).unwrap();
    it.offerings.iter().find(|o| o.zone == zone).unwrap().price
}

fn applied(
    overlays: &[NodeOverlay],
    np: &NodePool,
    types: &[Arc<InstanceType>],
) -> Vec<Arc<InstanceType>> {
    evaluate(
        overlays,
        &[PoolTypes {
            node_pool: np,
            instance_types: types,
        }],
    )
    .apply(np.name(), types)
}

#[test]
fn price_table() {
    let np = pool("default", json!({}));
    let zone = "topology.kubernetes.io/zone";
    // (case, overlays, type, zone, expected price)
    let cases: Vec<(&str, Vec<NodeOverlay>, &str, &str, f64)> = vec![
        (
            "price replaces",
            vec![overlay(
                "a",
                None,
                it_in(&["default-instance-type"]),
                json!({"price": "13234.223"}),
            )],
            "default-instance-type",
            "test-zone-1",
            13234.223,
        ),
        (
            "adjustment adds",
            vec![overlay(
                "a",
                None,
                it_in(&["default-instance-type"]),
                json!({"priceAdjustment": "+1000"}),
            )],
            "default-instance-type",
            "test-zone-1",
            1001.02,
        ),
        (
            "adjustment subtracts, not below zero",
            vec![overlay(
                "a",
                None,
                it_in(&["default-instance-type"]),
                json!({"priceAdjustment": "-10"}),
            )],
            "default-instance-type",
            "test-zone-1",
            0.0,
        ),
        (
            "percent increase",
            vec![overlay(
                "a",
                None,
                it_in(&["default-instance-type"]),
                json!({"priceAdjustment": "+10%"}),
            )],
            "default-instance-type",
            "test-zone-1",
            1.122,
        ),
        (
            "percent decrease",
            vec![overlay(
                "a",
                None,
                it_in(&["default-instance-type"]),
                json!({"priceAdjustment": "-50%"}),
            )],
            "default-instance-type",
            "test-zone-1",
            0.51,
        ),
        (
            "-100% is free",
            vec![overlay(
                "a",
                None,
                it_in(&["default-instance-type"]),
                json!({"priceAdjustment": "-100%"}),
            )],
            "default-instance-type",
            "test-zone-1",
            0.0,
        ),
        (
            "another type's price is unchanged",
            vec![overlay(
                "a",
                None,
                it_in(&["small-instance-type"]),
                json!({"price": "13234.223"}),
            )],
            "default-instance-type",
            "test-zone-1",
            1.02,
        ),
        (
            "another NodePool's overlay is not applied",
            vec![overlay(
                "a",
                None,
                types_in("karpenter.sh/nodepool", &["other"]),
                json!({"price": "13234.223"}),
            )],
            "default-instance-type",
            "test-zone-1",
            1.02,
        ),
        (
            "its NodePool's overlay is",
            vec![overlay(
                "a",
                None,
                types_in("karpenter.sh/nodepool", &["default"]),
                json!({"priceAdjustment": "+1000"}),
            )],
            "default-instance-type",
            "test-zone-1",
            1001.02,
        ),
        (
            "a custom label the NodePool does not set does not match",
            vec![overlay(
                "a",
                None,
                types_in("team", &["a"]),
                json!({"price": "9"}),
            )],
            "default-instance-type",
            "test-zone-1",
            1.02,
        ),
        (
            "the heavier overlay's price wins",
            vec![
                overlay(
                    "a",
                    Some(10),
                    it_in(&["default-instance-type"]),
                    json!({"price": "54"}),
                ),
                overlay(
                    "b",
                    Some(20),
                    it_in(&["default-instance-type"]),
                    json!({"price": "23"}),
                ),
            ],
            "default-instance-type",
            "test-zone-1",
            23.0,
        ),
        (
            "a conflicting overlay is not applied",
            vec![
                overlay(
                    "overlay-a",
                    Some(10),
                    it_in(&["default-instance-type", "small-instance-type"]),
                    json!({"price": "1.03"}),
                ),
                overlay(
                    "overlay-b",
                    Some(10),
                    it_in(&["default-instance-type"]),
                    json!({"price": "23"}),
                ),
            ],
            "small-instance-type",
            "test-zone-1",
            FakeInstanceType::new("s")
                .resources(&[("cpu", "2"), ("memory", "2Gi")])
                .build()
                .offerings[0]
                .price,
        ),
        (
            "only the matching offering",
            vec![overlay(
                "a",
                None,
                types_in(zone, &["test-zone-2"]),
                json!({"price": "7"}),
            )],
            "default-instance-type",
            "test-zone-1",
            1.02,
        ),
    ];
    for (case, overlays, name, zone, expected) in cases {
        let types = if case == "only the matching offering" {
            offering_types()
        } else {
            upstream_types()
        };
        let out = applied(&overlays, &np, &types);
        let got = price_of(&out, name, zone);
        assert!((got - expected).abs() < 1e-9, "{case}: {got} != {expected}");
    }
    // Offerings: each matched one changes, the rest keep their price.
    let out = applied(
        &[overlay(
            "a",
            None,
            types_in(zone, &["test-zone-2", "test-zone-4"]),
            json!({"priceAdjustment": "+1000"}),
        )],
        &np,
        &offering_types(),
    );
    let prices: Vec<f64> = out[0].offerings.iter().map(|o| o.price).collect();
    assert_eq!(prices, vec![1.02, 1002.02, 3.02, 1004.02]);
    assert!(out[0].price_overlaid() && !out[0].capacity_overlaid());
}

#[test]
fn nodepool_template_labels_match() {
    let types = upstream_types();
    let labelled = pool("labelled", json!({"team": "a"}));
    let plain = pool("plain", json!({}));
    let o = overlay("a", None, types_in("team", &["a"]), json!({"price": "9"}));
    let pools = [
        PoolTypes {
            node_pool: &labelled,
            instance_types: &types,
        },
        PoolTypes {
            node_pool: &plain,
            instance_types: &types,
        },
    ];
    let eval = evaluate(std::slice::from_ref(&o), &pools);
    assert_eq!(
        price_of(
            &eval.apply("labelled", &types),
            "default-instance-type",
            "test-zone-1"
        ),
        9.0
    );
    assert_eq!(
        price_of(
            &eval.apply("plain", &types),
            "default-instance-type",
            "test-zone-1"
        ),
        1.02
    );
}

#[test]
fn capacity_table() {
    let np = pool("default", json!({}));
    let fuse = "smarter-devices/fuse";
    let cases: Vec<(&str, Vec<NodeOverlay>, &str, &str, i64)> = vec![
        (
            "adds an extended resource",
            vec![overlay(
                "a",
                None,
                it_in(&["default-instance-type"]),
                json!({"capacity": {fuse: "5"}}),
            )],
            "default-instance-type",
            fuse,
            5000,
        ),
        (
            "not to types that do not match",
            vec![overlay(
                "a",
                None,
                it_in(&["small-instance-type"]),
                json!({"capacity": {fuse: "5"}}),
            )],
            "default-instance-type",
            fuse,
            0,
        ),
        (
            "the heavier overlay wins",
            vec![
                overlay(
                    "overlay-a",
                    Some(10),
                    it_in(&["default-instance-type"]),
                    json!({"capacity": {fuse: "5"}}),
                ),
                overlay(
                    "overlay-b",
                    Some(20),
                    it_in(&["default-instance-type"]),
                    json!({"capacity": {fuse: "99"}}),
                ),
            ],
            "default-instance-type",
            fuse,
            99000,
        ),
        (
            "resources from several overlays merge",
            vec![
                overlay(
                    "overlay-a",
                    Some(10),
                    it_in(&["default-instance-type"]),
                    json!({"capacity": {fuse: "5"}}),
                ),
                overlay(
                    "overlay-b",
                    Some(20),
                    it_in(&["default-instance-type"]),
                    json!({"capacity": {"hugepages-1Gi": "2Gi"}}),
                ),
            ],
            "default-instance-type",
            "hugepages-1Gi",
            (2i64 << 30) * 1000,
        ),
        (
            "resources from several overlays merge (the other)",
            vec![
                overlay(
                    "overlay-a",
                    Some(10),
                    it_in(&["default-instance-type"]),
                    json!({"capacity": {fuse: "5"}}),
                ),
                overlay(
                    "overlay-b",
                    Some(20),
                    it_in(&["default-instance-type"]),
                    json!({"capacity": {"hugepages-1Gi": "2Gi"}}),
                ),
            ],
            "default-instance-type",
            fuse,
            5000,
        ),
        (
            "no partial application: a conflicting overlay changes no type",
            vec![
                overlay(
                    "overlay-a",
                    Some(10),
                    it_in(&[
                        "default-instance-type",
                        "small-instance-type",
                        "gpu-vendor-b-instance-type",
                    ]),
                    json!({"capacity": {"smarter-devices/buz": "54"}}),
                ),
                overlay(
                    "overlay-b",
                    Some(10),
                    it_in(&["small-instance-type", "gpu-vendor-instance-type"]),
                    json!({"capacity": {"smarter-devices/buz": "21"}}),
                ),
            ],
            "default-instance-type",
            "smarter-devices/buz",
            0,
        ),
        (
            "no partial application: the other applies",
            vec![
                overlay(
                    "overlay-a",
                    Some(10),
                    it_in(&[
                        "default-instance-type",
                        "small-instance-type",
                        "gpu-vendor-b-instance-type",
                    ]),
                    json!({"capacity": {"smarter-devices/buz": "54"}}),
                ),
                overlay(
                    "overlay-b",
                    Some(10),
                    it_in(&["small-instance-type", "gpu-vendor-instance-type"]),
                    json!({"capacity": {"smarter-devices/buz": "21"}}),
                ),
            ],
            "small-instance-type",
            "smarter-devices/buz",
            21000,
        ),
    ];
    for (case, overlays, name, resource, expected) in cases {
        let out = applied(&overlays, &np, &upstream_types());
        let it = out.iter().find(|t| t.name == name).unwrap();
        assert_eq!(it.capacity.get(resource), expected, "{case}");
        assert_eq!(
            it.capacity_overlaid(),
            expected != 0 || case.contains("merge"),
            "{case}: marked"
        );
    }
    // Huge pages come out of allocatable memory, as the kubelet carves them.
    let out = applied(
        &[overlay(
            "a",
            None,
            it_in(&["default-instance-type"]),
            json!({"capacity": {"hugepages-1Gi": "2Gi"}}),
        )],
        &np,
        &upstream_types(),
    );
    let before = upstream_types()[0].allocatable().memory;
    assert_eq!(out[0].allocatable().memory, before - (2i64 << 30) * 1000);
}

#[test]
fn no_partial_application_across_nodepools() {
    // overlay-a matches in both NodePools but conflicts only in the second: it applies in
    // neither.
    let types = upstream_types();
    let one = pool("one", json!({}));
    let two = pool("two", json!({}));
    let overlays = [
        overlay(
            "overlay-a",
            Some(10),
            it_in(&["default-instance-type"]),
            json!({"price": "5"}),
        ),
        overlay(
            "overlay-b",
            Some(10),
            types_in("karpenter.sh/nodepool", &["two"]),
            json!({"price": "7"}),
        ),
    ];
    let eval = evaluate(
        &overlays,
        &[
            PoolTypes {
                node_pool: &one,
                instance_types: &types,
            },
            PoolTypes {
                node_pool: &two,
                instance_types: &types,
            },
        ],
    );
    assert_eq!(eval.outcomes["overlay-a"], Conflict);
    assert_eq!(
        price_of(
            &eval.apply("one", &types),
            "default-instance-type",
            "test-zone-1"
        ),
        1.02
    );
    assert_eq!(
        price_of(
            &eval.apply("two", &types),
            "default-instance-type",
            "test-zone-1"
        ),
        7.0
    );
}

#[test]
fn unchanged_types_are_shared() {
    let np = pool("default", json!({}));
    let types = upstream_types();
    let out = applied(&[], &np, &types);
    assert!(out.iter().zip(&types).all(|(a, b)| Arc::ptr_eq(a, b)));
    let out = applied(
        &[overlay(
            "a",
            None,
            it_in(&["default-instance-type"]),
            json!({"price": "2"}),
        )],
        &np,
        &types,
    );
    assert!(!Arc::ptr_eq(&out[0], &types[0]));
    assert!(
        out[1..]
            .iter()
            .zip(&types[1..])
            .all(|(a, b)| Arc::ptr_eq(a, b))
    );
}

#[test]
fn ordering_is_weight_then_name_descending() {
    let a = overlay("a", Some(5), json!([]), json!({}));
    let b = overlay("b", Some(5), json!([]), json!({}));
    let c = overlay("c", None, json!([]), json!({}));
    let d = overlay("d", Some(100), json!([]), json!({}));
    let mut list = vec![&a, &b, &c, &d];
    order_by_weight(&mut list);
    let names: Vec<&str> = list.iter().map(|o| o.name()).collect();
    assert_eq!(names, ["d", "b", "a", "c"]);
}

#[test]
fn price_change_table() {
    let cases: [(Option<&str>, Option<&str>, f64, f64); 9] = [
        (Some("43"), None, 1.0, 43.0),
        (Some("34.43"), None, 1.0, 34.43),
        (None, Some("+43"), 1.0, 44.0),
        (None, Some("-0.5"), 1.0, 0.5),
        (None, Some("-43"), 1.0, 0.0),
        (None, Some("+100.102%"), 2.0, 4.00204),
        (None, Some("-1%"), 100.0, 99.0),
        (None, Some("-.42"), 1.0, 0.58),
        (None, None, 3.0, 3.0),
    ];
    for (price, adj, base, expected) in cases {
        let change = PriceChange::parse(price, adj).unwrap();
        let got = change.map_or(base, |c| c.apply(base));
        assert!((got - expected).abs() < 1e-9, "{price:?} {adj:?}: {got}");
    }
    assert!(PriceChange::parse(Some("1"), Some("+1")).is_err());
    assert!(PriceChange::parse(None, Some("1")).is_err());
    assert!(PriceChange::parse(Some("x"), None).is_err());
}
