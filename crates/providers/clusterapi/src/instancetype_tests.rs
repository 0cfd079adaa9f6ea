use std::collections::BTreeSet;

use karpenter_api::labels::{INSTANCE_TYPE_LABEL, ZONE_LABEL};
use serde_json::{Value, json};

use super::*;
use crate::shape::{
    CPU_ANNOTATION, GPU_COUNT_ANNOTATION, GPU_TYPE_ANNOTATION, MEMORY_ANNOTATION, PRICE_ANNOTATION,
    TAINTS_ANNOTATION,
};

const MAX_SIZE: &str = crate::capi::MAX_SIZE_ANNOTATION;

/// A member MachineDeployment of 4 CPUs and 16 GiB with these extra annotations and template
/// labels, as upstream's tests make them.
fn md(name: &str, annotations: Value, template_labels: Value) -> MachineDeployment {
    let mut all = json!({CPU_ANNOTATION: "4", MEMORY_ANNOTATION: "16Gi"});
    for (k, v) in annotations.as_object().unwrap() {
        all[k] = v.clone();
    }
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "test", "labels": {MEMBER_LABEL: ""}, "annotations": all},
        "spec": {"clusterName": "test-cluster", "replicas": 1,
                 "template": {"metadata": {"labels": template_labels}, "spec": {"clusterName": "test-cluster"}}},
    }))
    .unwrap()
}

fn keys(it: &InstanceType) -> BTreeSet<String> {
    it.requirements
        .iter()
        .map(|r| r.key().to_string())
        .collect()
}

/// The keys every type has whatever its labels say.
const OWN: [&str; 7] = [
    INSTANCE_TYPE_LABEL,
    "kubernetes.io/arch",
    "kubernetes.io/os",
    ZONE_LABEL,
    "karpenter.sh/capacity-type",
    INSTANCE_CPU_LABEL,
    INSTANCE_MEMORY_LABEL,
];

fn one(md: MachineDeployment) -> (Arc<InstanceType>, Offer) {
    let r = resolve(&[md], None, &Options::default());
    assert!(r.skipped.is_empty(), "{:?}", r.skipped);
    (r.instance_types[0].clone(), r.offers[0].clone())
}

/// Upstream: "adds nothing to requirements when no managed labels or scale from zero
/// annotations are present" — here only the provider's own keys.
#[test]
fn without_labels_only_the_providers_own_requirements() {
    let (it, offer) = one(md("md-1", json!({}), json!({})));
    assert_eq!(keys(&it), OWN.iter().map(|s| s.to_string()).collect());
    assert_eq!(it.name, "md-1", "the MachineDeployment's name stands in");
    let value = |k: &str| {
        it.requirements
            .get(k)
            .unwrap()
            .values()
            .next()
            .unwrap()
            .to_string()
    };
    assert_eq!(value("kubernetes.io/arch"), "amd64");
    assert_eq!(value("kubernetes.io/os"), "linux");
    assert_eq!(value(INSTANCE_CPU_LABEL), "4");
    assert_eq!(value(INSTANCE_MEMORY_LABEL), "16384");
    assert_eq!(offer.key(), "test/md-1");
    assert_eq!(it.allocatable().cpu, 4000, "allocatable is the capacity");
}

/// Upstream: "adds labels to the requirements from the Cluster API propagation rules".
#[test]
fn labels_cluster_api_propagates() {
    let (it, _) = one(md(
        "md-1",
        json!({}),
        json!({
            MEMBER_LABEL: "1",
            "node-restriction.kubernetes.io/some-thing": "2",
            "prefixed.node-restriction.kubernetes.io/some-other-thing": "3",
            "node.cluster.x-k8s.io/another-thing": "4",
            "prefixed.node.cluster.x-k8s.io/another-thing": "5",
            "node-role.kubernetes.io/worker": "",
            "node.cluster.x-k8s.io": "workload-target",
            // Not propagated.
            "my.special.label/should-not-propagate": "bar",
            "prefixed.node-role.kubernetes.io/no-propagate": "special-role",
        }),
    ));
    let extra: BTreeSet<String> = keys(&it)
        .into_iter()
        .filter(|k| !OWN.contains(&k.as_str()))
        .collect();
    let want: BTreeSet<String> = [
        MEMBER_LABEL,
        "node-restriction.kubernetes.io/some-thing",
        "prefixed.node-restriction.kubernetes.io/some-other-thing",
        "node.cluster.x-k8s.io/another-thing",
        "prefixed.node.cluster.x-k8s.io/another-thing",
        "node-role.kubernetes.io/worker",
        "node.cluster.x-k8s.io",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    assert_eq!(extra, want);
}

/// Upstream: "adds labels to the requirements from the scale from zero annotations" and
/// "…from the propagation rules and the scale from zero annotations"; the annotation wins.
#[test]
fn labels_from_the_annotation_win_over_propagated_ones() {
    let (it, offer) = one(md(
        "md-1",
        json!({LABELS_ANNOTATION: format!("{ZONE_LABEL}=east,{INSTANCE_SIZE_LABEL}=big,node.cluster.x-k8s.io/tier=gold"), "some-other-label": "stuff!"}),
        json!({"node.cluster.x-k8s.io/tier": "silver", "node-restriction.kubernetes.io/some-thing": "2"}),
    ));
    let value = |k: &str| {
        it.requirements
            .get(k)
            .unwrap()
            .values()
            .next()
            .unwrap()
            .to_string()
    };
    assert_eq!(value(INSTANCE_SIZE_LABEL), "big");
    assert_eq!(value("node.cluster.x-k8s.io/tier"), "gold");
    assert_eq!(value("node-restriction.kubernetes.io/some-thing"), "2");
    assert_eq!(value(ZONE_LABEL), "east");
    assert_eq!(offer.zone, "east");
    assert!(it.requirements.get("some-other-label").is_none());
}

/// Upstream: "adds a single available on-demand offering with price 0 and empty zone" and
/// "adds the correct zone to offering when the well known zone label is present".
#[test]
fn one_on_demand_offering_in_the_labelled_zone() {
    let (it, _) = one(md("md-1", json!({}), json!({})));
    assert_eq!(
        it.offerings,
        [Offering {
            zone: String::new(),
            capacity_type: "on-demand".into(),
            price: 0.0,
            available: true,
            reservation: None,
        }]
    );
    let (it, _) = one(md(
        "md-1",
        json!({LABELS_ANNOTATION: format!("{ZONE_LABEL}=east"), PRICE_ANNOTATION: "0.25"}),
        json!({}),
    ));
    assert_eq!(it.offerings.len(), 1);
    assert_eq!(it.offerings[0].zone, "east");
    assert_eq!(it.offerings[0].price, 0.25);
    // A spot MachineDeployment (its nodes say so) offers spot.
    let (it, _) = one(md(
        "md-1",
        json!({LABELS_ANNOTATION: "karpenter.sh/capacity-type=spot"}),
        json!({}),
    ));
    assert_eq!(it.offerings[0].capacity_type, "spot");
}

/// Upstream: "sets offering Available to false when replicas are at max size" and "…true when
/// replicas are below max size".
#[test]
fn available_below_the_max_size() {
    let cases = [(10, "10", false), (3, "10", true), (0, "0", false)];
    for (replicas, max, available) in cases {
        let mut m = md("md-1", json!({MAX_SIZE: max}), json!({}));
        m.spec.replicas = Some(replicas);
        let (it, offer) = one(m);
        assert_eq!(it.offerings[0].available, available, "{replicas} of {max}");
        assert_eq!(offer.available(), available);
    }
}

/// Upstream: "returns the expected number of instance types when mixed MachineDeployments are
/// available" — only members count; the selector narrows them.
#[test]
fn only_selected_members() {
    let member = md("md-1", json!({}), json!({}));
    let mut other = md("md-2", json!({}), json!({}));
    other.metadata.labels = None;
    let mut gpu = md("md-3", json!({}), json!({}));
    gpu.metadata
        .labels
        .as_mut()
        .unwrap()
        .insert("pool".into(), "gpu".into());
    let mds = [member, other, gpu];
    let all = resolve(&mds, None, &Options::default());
    assert_eq!((all.selected, all.instance_types.len()), (2, 2));
    let selector: LabelSelector =
        serde_json::from_value(json!({"matchLabels": {"pool": "gpu"}})).unwrap();
    let gpu = resolve(&mds, Some(&selector), &Options::default());
    assert_eq!(gpu.selected, 1);
    assert_eq!(gpu.offers[0].name, "md-3");
    let none: LabelSelector = serde_json::from_value(
        json!({"matchExpressions": [{"key": "pool", "operator": "In", "values": ["arm"]}]}),
    )
    .unwrap();
    assert_eq!(resolve(&mds, Some(&none), &Options::default()).selected, 0);
}

#[test]
fn the_same_node_in_several_zones_is_one_type() {
    let labels = |zone: &str| json!({LABELS_ANNOTATION: format!("{INSTANCE_TYPE_LABEL}=m5.large,{ZONE_LABEL}={zone}"), PRICE_ANNOTATION: "0.096"});
    let mds = [
        md("md-a", labels("us-east-1a"), json!({})),
        md("md-b", labels("us-east-1b"), json!({})),
        // Same name, other size: skipped and named.
        md(
            "md-c",
            json!({LABELS_ANNOTATION: format!("{INSTANCE_TYPE_LABEL}=m5.large,{ZONE_LABEL}=us-east-1c"), CPU_ANNOTATION: "8"}),
            json!({}),
        ),
    ];
    let r = resolve(&mds, None, &Options::default());
    assert_eq!(r.instance_types.len(), 1);
    let it = &r.instance_types[0];
    assert_eq!(it.name, "m5.large");
    let zones: Vec<&str> = it.offerings.iter().map(|o| o.zone.as_str()).collect();
    assert_eq!(zones, ["us-east-1a", "us-east-1b"]);
    let zone_values: Vec<&str> = it.requirements.get(ZONE_LABEL).unwrap().values().collect();
    assert_eq!(zone_values.len(), 2);
    assert_eq!(r.offers.len(), 2);
    assert_eq!(r.skipped.len(), 1);
    let message = r.skipped[0].to_string();
    assert!(
        message.contains("test/md-c") && message.contains("test/md-a"),
        "{message}"
    );
}

#[test]
fn bad_machine_deployments_are_skipped_and_named() {
    let mds = [
        md("good", json!({}), json!({})),
        md("bad-memory", json!({MEMORY_ANNOTATION: "16GiB"}), json!({})),
        md(
            "bad-capacity-type",
            json!({LABELS_ANNOTATION: "karpenter.sh/capacity-type=reserved"}),
            json!({}),
        ),
        md(
            "a-name-far-too-long-to-be-an-instance-type-label-value-of-its-own-x",
            json!({}),
            json!({}),
        ),
    ];
    let r = resolve(&mds, None, &Options::default());
    assert_eq!(r.selected, 4);
    let names: Vec<&str> = r.instance_types.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["good"]);
    let skipped: Vec<&str> = r
        .skipped
        .iter()
        .map(|s| s.machine_deployment.as_str())
        .collect();
    assert_eq!(
        skipped,
        [
            "test/a-name-far-too-long-to-be-an-instance-type-label-value-of-its-own-x",
            "test/bad-capacity-type",
            "test/bad-memory"
        ]
    );
    assert!(r.skipped[2].to_string().contains(MEMORY_ANNOTATION));
}

fn claim(requirements: Value, requests: Value, taints: Value) -> NodeClaim {
    serde_json::from_value(json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": "default-abcde"},
        "spec": {
            "nodeClassRef": {"group": "karpenter.cluster.x-k8s.io", "kind": "ClusterAPINodeClass", "name": "default"},
            "requirements": requirements,
            "resources": {"requests": requests},
            "taints": taints,
        },
    }))
    .unwrap()
}

#[test]
fn a_claim_launches_in_the_cheapest_compatible_available_machine_deployment() {
    let priced = |name: &str, zone: &str, price: &str, cpu: &str| {
        md(
            name,
            json!({LABELS_ANNOTATION: format!("{INSTANCE_TYPE_LABEL}={name}-type,{ZONE_LABEL}={zone}"), PRICE_ANNOTATION: price, CPU_ANNOTATION: cpu}),
            json!({}),
        )
    };
    let mut full = priced("full", "z1", "0.01", "4");
    full.metadata
        .annotations
        .as_mut()
        .unwrap()
        .insert(MAX_SIZE.into(), "1".into());
    let mds = [
        priced("big", "z1", "0.40", "16"),
        priced("small", "z2", "0.10", "2"),
        priced("medium", "z1", "0.20", "4"),
        full,
    ];
    let r = resolve(&mds, None, &Options::default());
    let order = |c: &NodeClaim| -> Vec<String> {
        r.candidates(c)
            .iter()
            .map(|(o, _)| o.name.clone())
            .collect()
    };
    // 3 CPUs: small is too small, full is at its max size.
    let c = claim(json!([]), json!({"cpu": "3"}), json!([]));
    assert_eq!(order(&c), ["medium", "big"]);
    // Only zone z2 allowed.
    let c = claim(
        json!([{"key": ZONE_LABEL, "operator": "In", "values": ["z2"]}]),
        json!({"cpu": "1"}),
        json!([]),
    );
    assert_eq!(order(&c), ["small"]);
    // An instance-type requirement, as the scheduler writes one.
    let c = claim(
        json!([{"key": INSTANCE_TYPE_LABEL, "operator": "In", "values": ["big-type", "medium-type"]}]),
        json!({"cpu": "1"}),
        json!([]),
    );
    assert_eq!(order(&c), ["medium", "big"]);
    // Equal prices: by type name, as upstream picks.
    let same = [
        md(
            "b",
            json!({LABELS_ANNOTATION: format!("{INSTANCE_TYPE_LABEL}=Beta")}),
            json!({}),
        ),
        md(
            "a",
            json!({LABELS_ANNOTATION: format!("{INSTANCE_TYPE_LABEL}=alpha")}),
            json!({}),
        ),
    ];
    let r = resolve(&same, None, &Options::default());
    let names: Vec<&str> = r
        .candidates(&claim(json!([]), json!({}), json!([])))
        .iter()
        .map(|(o, _)| o.instance_type.as_str())
        .collect();
    assert_eq!(names, ["alpha", "Beta"]);
}

#[test]
fn tainted_nodes_only_for_node_pools_that_declare_the_taints() {
    let mds = [
        md("plain", json!({}), json!({})),
        md(
            "gpu",
            json!({TAINTS_ANNOTATION: "nvidia.com/gpu=present:NoSchedule", GPU_COUNT_ANNOTATION: "1", GPU_TYPE_ANNOTATION: "nvidia.com/gpu"}),
            json!({}),
        ),
    ];
    let r = resolve(&mds, None, &Options::default());
    let pool = |taints: Value| -> NodePool {
        serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "p"},
            "spec": {"template": {"spec": {
                "nodeClassRef": {"group": "karpenter.cluster.x-k8s.io", "kind": "ClusterAPINodeClass", "name": "default"},
                "requirements": [], "taints": taints}}},
        }))
        .unwrap()
    };
    let names = |p: &NodePool| -> Vec<String> {
        r.for_node_pool(p).iter().map(|t| t.name.clone()).collect()
    };
    assert_eq!(names(&pool(json!([]))), ["plain"]);
    assert_eq!(
        names(&pool(
            json!([{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}])
        )),
        ["gpu", "plain"]
    );
    assert_eq!(
        names(&pool(
            json!([{"key": "nvidia.com/gpu", "value": "other", "effect": "NoSchedule"}])
        )),
        ["plain"],
        "the value must match too"
    );
    let c = claim(json!([]), json!({"nvidia.com/gpu": "1"}), json!([]));
    assert!(r.candidates(&c).is_empty(), "undeclared taint");
    let c = claim(
        json!([]),
        json!({"nvidia.com/gpu": "1"}),
        json!([{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]),
    );
    assert_eq!(r.candidates(&c)[0].0.name, "gpu");
}
