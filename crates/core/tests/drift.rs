//! Drift detection and hash stamping, after upstream's NodeClaim drift and NodePool hash
//! suites: which template changes drift a node, which do not, and how a hash-version change
//! is absorbed without drifting anything.

mod support;

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Taint;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use karpenter_api::hash::NODE_POOL_HASH_VERSION;
use karpenter_api::labels::{
    ARCH_LABEL, CAPACITY_TYPE_LABEL, INSTANCE_TYPE_LABEL, NODE_POOL_HASH_ANNOTATION,
    NODE_POOL_HASH_VERSION_ANNOTATION, NODE_POOL_LABEL, OS_LABEL, ZONE_LABEL,
};
use karpenter_api::{
    Duration, NillableDuration, NodeClaim, NodeClaimStatus, NodePool,
    NodeSelectorRequirementWithMinValues, Operator,
};
use karpenter_core::disruption::drift::{
    DriftReason, instance_type_not_found, is_launched, node_claim_hash_annotations,
    node_pool_hash_annotations, template_drift,
};
use karpenter_core::instancetype::{InstanceType, fake};

const TYPE: &str = "fake-it-3";

fn types() -> Vec<Arc<InstanceType>> {
    fake::instance_types(8).into_iter().map(Arc::new).collect()
}

fn req(key: &str, op: &str, values: &[&str]) -> NodeSelectorRequirementWithMinValues {
    NodeSelectorRequirementWithMinValues {
        key: key.into(),
        operator: Operator::ALL
            .into_iter()
            .find(|o| o.as_str() == op)
            .unwrap(),
        values: values.iter().map(|v| v.to_string()).collect(),
        min_values: None,
    }
}

fn taint(key: &str) -> Taint {
    Taint {
        key: key.into(),
        effect: "NoExecute".into(),
        ..Default::default()
    }
}

/// A NodePool with every static field set, stamped with its hash as the hash controller does.
fn pool() -> NodePool {
    let mut np = support::node_pool("default").0;
    let t = &mut np.spec.template;
    t.metadata.labels = BTreeMap::from([
        ("keyLabel".into(), "valueLabel".into()),
        ("keyLabel2".into(), "valueLabel2".into()),
    ]);
    t.metadata.annotations = BTreeMap::from([
        ("keyAnnotation".into(), "valueAnnotation".into()),
        ("keyAnnotation2".into(), "valueAnnotation2".into()),
    ]);
    t.spec.taints = vec![taint("keyvalue1")];
    t.spec.startup_taints = vec![taint("startupkeyvalue1")];
    t.spec.expire_after = NillableDuration::from_secs(300);
    t.spec.termination_grace_period = Some(Duration::from_secs(300));
    stamp(&mut np);
    np
}

fn stamp(np: &mut NodePool) {
    if let Some(a) = node_pool_hash_annotations(np) {
        np.metadata.annotations.get_or_insert_default().extend(a);
    }
}

fn condition(type_: &str, status: &str) -> Condition {
    Condition {
        type_: type_.into(),
        status: status.into(),
        reason: type_.into(),
        message: String::new(),
        last_transition_time: Time(Timestamp::UNIX_EPOCH),
        observed_generation: None,
    }
}

/// A launched claim of `pool`, made under its current hash.
fn claim(pool: &NodePool, labels: &[(&str, &str)]) -> NodeClaim {
    let mut c = NodeClaim::default();
    c.metadata.name = Some("claim".into());
    let mut all = BTreeMap::from([
        (NODE_POOL_LABEL.to_string(), "default".to_string()),
        (INSTANCE_TYPE_LABEL.to_string(), TYPE.to_string()),
        (ZONE_LABEL.to_string(), "test-zone-1".to_string()),
        (CAPACITY_TYPE_LABEL.to_string(), "spot".to_string()),
    ]);
    all.extend(labels.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    c.metadata.labels = Some(all);
    c.metadata.annotations = Some(BTreeMap::from([
        (NODE_POOL_HASH_ANNOTATION.to_string(), pool.hash()),
        (
            NODE_POOL_HASH_VERSION_ANNOTATION.to_string(),
            NODE_POOL_HASH_VERSION.to_string(),
        ),
    ]));
    c.status = Some(NodeClaimStatus {
        conditions: vec![condition("Launched", "True")],
        ..Default::default()
    });
    c
}

fn drift(pool: &NodePool, claim: &NodeClaim) -> Option<DriftReason> {
    template_drift(pool, claim)
}

fn set_annotation(
    meta: &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    key: &str,
    value: Option<&str>,
) {
    let a = meta.annotations.get_or_insert_default();
    match value {
        Some(v) => a.insert(key.to_string(), v.to_string()),
        None => a.remove(key),
    };
}

#[test]
fn a_claim_made_from_the_current_template_has_not_drifted() {
    let np = pool();
    let c = claim(&np, &[]);
    assert_eq!(drift(&np, &c), None);
    assert_eq!(instance_type_not_found(&types(), &c), None);
}

type Edit = fn(&mut NodePool);

#[test]
fn changes_to_static_fields_drift() {
    let table: &[(&str, Edit)] = &[
        ("annotations", |np| {
            np.spec.template.metadata.annotations =
                BTreeMap::from([("keyAnnotationTest".into(), "valueAnnotationTest".into())])
        }),
        ("labels", |np| {
            np.spec.template.metadata.labels =
                BTreeMap::from([("keyLabelTest".into(), "valueLabelTest".into())])
        }),
        ("taints", |np| {
            np.spec.template.spec.taints = vec![taint("keytest2taint")]
        }),
        ("startupTaints", |np| {
            np.spec.template.spec.startup_taints = vec![taint("keytest2taint")]
        }),
        ("nodeClassRef name", |np| {
            np.spec.template.spec.node_class_ref.name = "testName".into()
        }),
        ("expireAfter", |np| {
            np.spec.template.spec.expire_after = NillableDuration::from_secs(6000)
        }),
        ("terminationGracePeriod", |np| {
            np.spec.template.spec.termination_grace_period = Some(Duration::from_secs(6000))
        }),
    ];
    for (field, edit) in table {
        let mut np = pool();
        let c = claim(&np, &[]);
        edit(&mut np);
        stamp(&mut np);
        assert_eq!(
            drift(&np, &c),
            Some(DriftReason::NodePoolDrifted),
            "changing {field} drifts"
        );
    }
}

#[test]
fn changes_to_behaviour_do_not_move_the_hash() {
    let mut np = pool();
    np.spec.limits = Some(BTreeMap::from([(
        "cpu".to_string(),
        k8s_openapi::apimachinery::pkg::api::resource::Quantity("16".into()),
    )]));
    np.spec.disruption.consolidation_policy = karpenter_api::ConsolidationPolicy::WhenEmpty;
    np.spec.disruption.consolidate_after = NillableDuration::from_secs(30);
    np.spec.template.spec.requirements = vec![req(ZONE_LABEL, "In", &["test-zone-1"])];
    np.spec.weight = Some(80);
    assert_eq!(
        node_pool_hash_annotations(&np),
        None,
        "the stamp is still current"
    );
    assert_eq!(drift(&np, &claim(&np, &[])), None);
}

#[test]
fn missing_or_mismatched_hashes_are_not_drift() {
    type EditClaim = fn(&mut NodeClaim);
    let table: &[(&str, Edit, EditClaim)] = &[
        (
            "no hash on the NodePool",
            |np| np.metadata.annotations = Some(BTreeMap::new()),
            |_| {},
        ),
        (
            "no hash on the NodeClaim",
            |_| {},
            |c| set_annotation(&mut c.metadata, NODE_POOL_HASH_ANNOTATION, None),
        ),
        (
            "hash versions differ",
            |np| {
                set_annotation(
                    &mut np.metadata,
                    NODE_POOL_HASH_ANNOTATION,
                    Some("test-hash-1"),
                );
                set_annotation(
                    &mut np.metadata,
                    NODE_POOL_HASH_VERSION_ANNOTATION,
                    Some("test-version-1"),
                );
            },
            |c| {
                set_annotation(
                    &mut c.metadata,
                    NODE_POOL_HASH_ANNOTATION,
                    Some("test-hash-2"),
                );
                set_annotation(
                    &mut c.metadata,
                    NODE_POOL_HASH_VERSION_ANNOTATION,
                    Some("test-version-2"),
                );
            },
        ),
        (
            "no hash version on the NodeClaim",
            |_| {},
            |c| {
                set_annotation(
                    &mut c.metadata,
                    NODE_POOL_HASH_ANNOTATION,
                    Some("test-hash-111111111"),
                );
                set_annotation(&mut c.metadata, NODE_POOL_HASH_VERSION_ANNOTATION, None);
            },
        ),
    ];
    for (case, edit_pool, edit_claim) in table {
        let mut np = pool();
        let mut c = claim(&np, &[]);
        edit_pool(&mut np);
        edit_claim(&mut c);
        assert_eq!(drift(&np, &c), None, "{case}");
    }
}

#[test]
fn static_drift_is_reported_before_requirement_drift() {
    let mut np = pool();
    let c = claim(&np, &[]);
    set_annotation(
        &mut np.metadata,
        NODE_POOL_HASH_ANNOTATION,
        Some("test-123456789"),
    );
    np.spec.template.spec.requirements = vec![req(INSTANCE_TYPE_LABEL, "DoesNotExist", &[])];
    assert_eq!(drift(&np, &c), Some(DriftReason::NodePoolDrifted));
    let mut np = pool();
    np.spec.template.spec.requirements = vec![req(INSTANCE_TYPE_LABEL, "DoesNotExist", &[])];
    assert_eq!(drift(&np, &c), Some(DriftReason::RequirementsDrifted));
}

#[test]
fn requirement_changes_drift_only_nodes_they_exclude() {
    type Reqs = Vec<NodeSelectorRequirementWithMinValues>;
    type Labels = Vec<(&'static str, &'static str)>;
    let od = || req(CAPACITY_TYPE_LABEL, "In", &["on-demand"]);
    let table: Vec<(&str, Reqs, Reqs, Labels, bool)> = vec![
        (
            "the capacity type is switched",
            vec![
                od(),
                req(ARCH_LABEL, "In", &["amd64"]),
                req(OS_LABEL, "In", &["linux"]),
            ],
            vec![req(CAPACITY_TYPE_LABEL, "In", &["spot"])],
            vec![
                (CAPACITY_TYPE_LABEL, "on-demand"),
                (ARCH_LABEL, "amd64"),
                (OS_LABEL, "linux"),
            ],
            true,
        ),
        (
            "a requirement is added",
            vec![od(), req(OS_LABEL, "In", &["linux"])],
            vec![
                od(),
                req(OS_LABEL, "In", &["linux"]),
                req(ARCH_LABEL, "In", &["amd64"]),
            ],
            vec![(CAPACITY_TYPE_LABEL, "on-demand"), (OS_LABEL, "linux")],
            true,
        ),
        (
            "a requirement is narrowed away from the node",
            vec![od(), req(OS_LABEL, "In", &["linux", "windows"])],
            vec![od(), req(OS_LABEL, "In", &["windows"])],
            vec![(CAPACITY_TYPE_LABEL, "on-demand"), (OS_LABEL, "linux")],
            true,
        ),
        (
            "a requirement is widened",
            vec![od(), req(OS_LABEL, "In", &["linux"])],
            vec![od(), req(OS_LABEL, "In", &["linux", "windows"])],
            vec![(CAPACITY_TYPE_LABEL, "on-demand"), (OS_LABEL, "linux")],
            false,
        ),
        (
            "a requirement becomes Exists",
            vec![od(), req(OS_LABEL, "In", &["linux"])],
            vec![od(), req(OS_LABEL, "Exists", &[])],
            vec![(CAPACITY_TYPE_LABEL, "on-demand"), (OS_LABEL, "linux")],
            false,
        ),
        (
            "a requirement becomes DoesNotExist",
            vec![od(), req(OS_LABEL, "In", &["linux"])],
            vec![od(), req(OS_LABEL, "DoesNotExist", &[])],
            vec![(CAPACITY_TYPE_LABEL, "on-demand"), (OS_LABEL, "linux")],
            true,
        ),
        (
            "Gt moves above the node's value",
            vec![od(), req("test-label", "Gt", &["2"])],
            vec![od(), req("test-label", "Gt", &["10"])],
            vec![(CAPACITY_TYPE_LABEL, "on-demand"), ("test-label", "5")],
            true,
        ),
        (
            "Lt moves below the node's value",
            vec![od(), req("test-label", "Lt", &["5"])],
            vec![od(), req("test-label", "Lt", &["1"])],
            vec![(CAPACITY_TYPE_LABEL, "on-demand"), ("test-label", "2")],
            true,
        ),
    ];
    for (case, before, after, labels, drifted) in table {
        let mut np = pool();
        np.spec.template.spec.requirements = before;
        let c = claim(&np, &labels);
        assert_eq!(
            drift(&np, &c),
            None,
            "{case}: not drifted before the change"
        );
        np.spec.template.spec.requirements = after;
        let expected = drifted.then_some(DriftReason::RequirementsDrifted);
        assert_eq!(drift(&np, &c), expected, "{case}");
    }
}

#[test]
fn narrowing_requirements_drifts_only_the_nodes_outside_them() {
    let mut np = pool();
    np.spec.template.spec.requirements = vec![
        req(CAPACITY_TYPE_LABEL, "In", &["on-demand"]),
        req(OS_LABEL, "In", &["linux", "windows"]),
    ];
    let linux = claim(
        &np,
        &[(CAPACITY_TYPE_LABEL, "on-demand"), (OS_LABEL, "linux")],
    );
    let windows = claim(
        &np,
        &[(CAPACITY_TYPE_LABEL, "on-demand"), (OS_LABEL, "windows")],
    );
    assert_eq!((drift(&np, &linux), drift(&np, &windows)), (None, None));
    np.spec.template.spec.requirements[1] = req(OS_LABEL, "In", &["linux"]);
    assert_eq!(drift(&np, &linux), None);
    assert_eq!(drift(&np, &windows), Some(DriftReason::RequirementsDrifted));
}

#[test]
fn a_vanished_instance_type_or_offering_drifts() {
    let np = pool();
    let c = claim(&np, &[]);
    // No instance-type label at all.
    let mut unlabelled = c.clone();
    unlabelled
        .metadata
        .labels
        .as_mut()
        .unwrap()
        .remove(INSTANCE_TYPE_LABEL);
    assert_eq!(
        instance_type_not_found(&types(), &unlabelled),
        Some(DriftReason::InstanceTypeNotFound)
    );
    // The provider no longer lists any type.
    assert_eq!(
        instance_type_not_found(&[], &c),
        Some(DriftReason::InstanceTypeNotFound)
    );
    // The type is listed without offerings.
    let bare: Vec<Arc<InstanceType>> = types()
        .into_iter()
        .map(|it| {
            let mut it = (*it).clone();
            it.offerings.clear();
            Arc::new(it)
        })
        .collect();
    assert_eq!(
        instance_type_not_found(&bare, &c),
        Some(DriftReason::InstanceTypeNotFound)
    );
    // Its offerings are in other zones only.
    let elsewhere: Vec<Arc<InstanceType>> = types()
        .into_iter()
        .map(|it| {
            let mut it = (*it).clone();
            for o in &mut it.offerings {
                o.zone = "another-zone".into();
            }
            Arc::new(it)
        })
        .collect();
    assert_eq!(
        instance_type_not_found(&elsewhere, &c),
        Some(DriftReason::InstanceTypeNotFound)
    );
}

#[test]
fn a_reserved_node_may_fall_back_to_on_demand_offerings() {
    let np = pool();
    let c = claim(&np, &[(CAPACITY_TYPE_LABEL, "reserved")]);
    let on_demand_only = vec![Arc::new(
        fake::FakeInstanceType::new(TYPE)
            .offerings(&[("on-demand", "test-zone-1", 1.0)])
            .build(),
    )];
    assert_eq!(instance_type_not_found(&on_demand_only, &c), None);
    let spot = claim(&np, &[]);
    assert_eq!(
        instance_type_not_found(&on_demand_only, &spot),
        Some(DriftReason::InstanceTypeNotFound),
        "a spot node is not covered by on-demand offerings"
    );
}

#[test]
fn only_launched_claims_are_judged() {
    let np = pool();
    let mut c = claim(&np, &[]);
    assert!(is_launched(&c));
    for status in ["Unknown", "False"] {
        c.status.as_mut().unwrap().conditions = vec![condition("Launched", status)];
        assert!(!is_launched(&c), "Launched={status}");
    }
    c.status = None;
    assert!(!is_launched(&c));
}

#[test]
fn the_hash_controller_stamps_nodepools() {
    // A NodePool without a stamp, or with a stale one, gets the current hash and version.
    let mut np = pool();
    np.metadata.annotations = None;
    let stamp1 = node_pool_hash_annotations(&np).expect("unstamped");
    assert_eq!(stamp1[NODE_POOL_HASH_ANNOTATION], np.hash());
    assert_eq!(
        stamp1[NODE_POOL_HASH_VERSION_ANNOTATION],
        NODE_POOL_HASH_VERSION
    );
    stamp(&mut np);
    assert_eq!(node_pool_hash_annotations(&np), None);
    // A static field changes: a new hash.
    np.spec.template.metadata.labels =
        BTreeMap::from([("keyLabeltest".into(), "valueLabeltest".into())]);
    let stamp2 = node_pool_hash_annotations(&np).expect("template changed");
    assert_ne!(
        stamp2[NODE_POOL_HASH_ANNOTATION],
        stamp1[NODE_POOL_HASH_ANNOTATION]
    );
    // Another version's stamp is replaced even when its hash string happened to match.
    let mut np = pool();
    set_annotation(
        &mut np.metadata,
        NODE_POOL_HASH_VERSION_ANNOTATION,
        Some("test"),
    );
    let stamp3 = node_pool_hash_annotations(&np).expect("other version");
    assert_eq!(
        stamp3[NODE_POOL_HASH_VERSION_ANNOTATION],
        NODE_POOL_HASH_VERSION
    );
}

#[test]
fn claims_of_another_hash_version_are_restamped_not_drifted() {
    let np = pool();
    // Claims stamped by another algorithm (upstream's `v3`, say) adopt the current hash.
    let mut foreign = claim(&np, &[]);
    set_annotation(
        &mut foreign.metadata,
        NODE_POOL_HASH_ANNOTATION,
        Some("123456"),
    );
    set_annotation(
        &mut foreign.metadata,
        NODE_POOL_HASH_VERSION_ANNOTATION,
        Some("v3"),
    );
    let update = node_claim_hash_annotations(&np, &foreign).expect("restamped");
    assert_eq!(update[NODE_POOL_HASH_ANNOTATION], np.hash());
    assert_eq!(
        update[NODE_POOL_HASH_VERSION_ANNOTATION],
        NODE_POOL_HASH_VERSION
    );
    let mut restamped = foreign.clone();
    restamped
        .metadata
        .annotations
        .as_mut()
        .unwrap()
        .extend(update);
    assert_eq!(drift(&np, &restamped), None, "migration drifts nothing");
    // Claims of the current version keep their hash, drifted or not.
    let mut current = claim(&np, &[]);
    set_annotation(
        &mut current.metadata,
        NODE_POOL_HASH_ANNOTATION,
        Some("1234564654"),
    );
    assert_eq!(node_claim_hash_annotations(&np, &current), None);
    // A claim already drifted keeps its old hash (it stays drifted) but takes the version.
    let mut drifted = foreign.clone();
    drifted
        .status
        .as_mut()
        .unwrap()
        .conditions
        .push(condition("Drifted", "True"));
    let update = node_claim_hash_annotations(&np, &drifted).expect("version only");
    assert_eq!(
        update.keys().collect::<Vec<_>>(),
        [NODE_POOL_HASH_VERSION_ANNOTATION]
    );
}

/// A NodeOverlay over `TYPE` (and only it) with `change` (`capacity`, `price`, …).
fn overlay_on_type(
    name: &str,
    change: serde_json::Value,
) -> karpenter_api::nodeoverlay::NodeOverlay {
    let mut spec = serde_json::json!({
        "requirements": [{"key": INSTANCE_TYPE_LABEL, "operator": "In", "values": [TYPE]}],
    });
    for (k, v) in change.as_object().unwrap() {
        spec[k] = v.clone();
    }
    serde_json::from_value(serde_json::json!({"metadata": {"name": name}, "spec": spec})).unwrap()
}

fn evaluation(
    pool: &NodePool,
    overlays: &[karpenter_api::nodeoverlay::NodeOverlay],
) -> karpenter_core::instancetype::overlay::Evaluation {
    let types = types();
    karpenter_core::instancetype::overlay::evaluate(
        overlays,
        &[karpenter_core::instancetype::overlay::PoolTypes {
            node_pool: pool,
            instance_types: &types,
        }],
    )
}

#[test]
fn overlay_capacity_changes_drift_nodes_launched_under_the_gate() {
    use karpenter_api::nodeoverlay::CAPACITY_OVERLAY_HASH_ANNOTATION;
    use karpenter_core::disruption::drift::overlay_drift;
    use serde_json::json;

    let np = pool();
    let fuse = |n: u32| {
        overlay_on_type(
            "fuse",
            json!({"capacity": {"smarter-devices/fuse": n.to_string()}}),
        )
    };
    let price = |p: &str| overlay_on_type("price", json!({"price": p}));
    let hugepages = overlay_on_type(
        "hugepages",
        json!({"weight": 2, "capacity": {"hugepages-2Mi": "100Mi"}}),
    );
    // Overlays when the claim launched under the gate (`None`: the gate was off, or the claim
    // predates it or came from upstream), the overlays now, and whether the claim has drifted.
    let cases: Vec<(&str, Option<Vec<_>>, Vec<_>, bool)> = vec![
        (
            "unchanged capacity overlay",
            Some(vec![fuse(1)]),
            vec![fuse(1)],
            false,
        ),
        (
            "capacity overlay changed",
            Some(vec![fuse(1)]),
            vec![fuse(2)],
            true,
        ),
        (
            "capacity overlay removed",
            Some(vec![fuse(1)]),
            vec![],
            true,
        ),
        (
            "another capacity added beside",
            Some(vec![fuse(1)]),
            vec![fuse(1), hugepages.clone()],
            true,
        ),
        (
            "a first capacity overlay added (nothing was recorded)",
            Some(vec![]),
            vec![fuse(1)],
            false,
        ),
        (
            "only a price changed",
            Some(vec![price("1.0")]),
            vec![price("2.0")],
            false,
        ),
        (
            "price overlay added beside the capacity one",
            Some(vec![fuse(1)]),
            vec![fuse(1), price("2.0")],
            false,
        ),
        (
            "launched without the gate (gate off, before, upstream)",
            None,
            vec![fuse(2)],
            false,
        ),
    ];
    for (name, launched_with, now, drifted) in cases {
        let mut c = claim(&np, &[]);
        // What the controller's launch records.
        if let Some(hash) = launched_with
            .and_then(|overlays| evaluation(&np, &overlays).capacity_record("default", TYPE))
        {
            set_annotation(
                &mut c.metadata,
                CAPACITY_OVERLAY_HASH_ANNOTATION,
                Some(&hash),
            );
        }
        let expected = drifted.then_some(DriftReason::NodeOverlayDrifted);
        assert_eq!(
            overlay_drift(&evaluation(&np, &now), "default", &c),
            expected,
            "{name}"
        );
    }
}

#[test]
fn overlay_drift_judges_the_claims_own_nodepool_and_type() {
    use karpenter_api::nodeoverlay::CAPACITY_OVERLAY_HASH_ANNOTATION;
    use karpenter_core::disruption::drift::overlay_drift;

    let np = pool();
    let fuse = |n: &str| {
        overlay_on_type(
            "fuse",
            serde_json::json!({"capacity": {"smarter-devices/fuse": n}}),
        )
    };
    let recorded = evaluation(&np, &[fuse("1")])
        .capacity_record("default", TYPE)
        .expect("a capacity overlay on the type is recorded");
    assert_eq!(
        evaluation(&np, &[fuse("1")]).capacity_record("default", "fake-it-4"),
        None,
        "a type no capacity overlay touches records nothing"
    );
    let now = evaluation(&np, &[fuse("2")]);
    let mut overlaid = claim(&np, &[]);
    set_annotation(
        &mut overlaid.metadata,
        CAPACITY_OVERLAY_HASH_ANNOTATION,
        Some(&recorded),
    );
    assert_eq!(
        overlay_drift(&now, "default", &overlaid),
        Some(DriftReason::NodeOverlayDrifted)
    );
    // Not in a NodePool the evaluation never saw.
    assert_eq!(overlay_drift(&now, "elsewhere", &overlaid), None);
    // Nor when the type is missing from the NodePool's list this time (a short provider
    // answer, a cold cache): that says nothing about its overlays.
    let short: Vec<_> = types().into_iter().filter(|t| t.name != TYPE).collect();
    let partial = karpenter_core::instancetype::overlay::evaluate(
        &[],
        &[karpenter_core::instancetype::overlay::PoolTypes {
            node_pool: &np,
            instance_types: &short,
        }],
    );
    assert_eq!(overlay_drift(&partial, "default", &overlaid), None);
}
