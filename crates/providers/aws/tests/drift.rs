//! Drift of live instances from their EC2NodeClass, and placement groups at launch, against a
//! fake EC2 (moto models neither placement groups nor capacity reservations): upstream's
//! CapacityReservationDrift and PlacementGroupDrift cases, and a reservation reclaimed by an
//! interruption taking no more launches.

mod support;

use karpenter_api::{NodeClaim, NodePool, NodeSelectorRequirementWithMinValues, Operator};
use karpenter_aws::ec2::CapacityReservationInfo;
use karpenter_aws::ec2_extra::PlacementGroupInfo;
use karpenter_aws::placementgroup::{LABEL_PLACEMENT_GROUP_ID, LABEL_PLACEMENT_GROUP_PARTITION};
use karpenter_controller::cloudprovider::{CloudProvider, CloudProviderError};
use karpenter_core::resources::Resources;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use support::{FakeEc2, Store, node_class, provider_with};

fn requirement(key: &str, values: &[&str]) -> NodeSelectorRequirementWithMinValues {
    NodeSelectorRequirementWithMinValues {
        key: key.into(),
        operator: Operator::In,
        values: values.iter().map(|v| v.to_string()).collect(),
        min_values: None,
    }
}

fn claim(name: &str, capacity_types: &[&str]) -> NodeClaim {
    let mut c = NodeClaim::default();
    c.metadata.name = Some(name.into());
    c.metadata.labels = Some([("karpenter.sh/nodepool".to_string(), "default".to_string())].into());
    c.spec.node_class_ref.name = "default".into();
    c.spec.node_class_ref.group = "karpenter.k8s.aws".into();
    c.spec.node_class_ref.kind = "EC2NodeClass".into();
    c.spec.requirements = vec![requirement("karpenter.sh/capacity-type", capacity_types)];
    c.spec.resources.requests = Resources::parse(&[("cpu", "1")]).to_list();
    c
}

/// The NodeClaim as the controller keeps it after a launch: the request, with the provider's
/// labels, annotations and status.
fn kept(request: NodeClaim, launched: NodeClaim) -> NodeClaim {
    let mut c = request;
    let mut labels = c.metadata.labels.take().unwrap_or_default();
    labels.extend(launched.metadata.labels.unwrap_or_default());
    c.metadata.labels = Some(labels);
    c.metadata.annotations = launched.metadata.annotations;
    c.status = launched.status;
    c
}

/// A claim adopted from another implementation: its hash is of another version, so static
/// drift does not judge it and only the live checks do.
fn adopted(mut c: NodeClaim) -> NodeClaim {
    c.metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(
            "karpenter.k8s.aws/ec2nodeclass-hash-version".into(),
            "v6".into(),
        );
    c
}

/// Changes what resolution reads but static drift ignores, so the next drift check resolves
/// afresh instead of reusing the last minute's answer.
fn resolve_again(store: &Store, n: u32) {
    set_spec(
        store,
        "subnetSelectorTerms",
        serde_json::json!([{"tags": {"karpenter.sh/discovery": format!("test-{n}")}}]),
    );
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}

fn group(id: &str, name: &str, strategy: &str, partitions: i32) -> PlacementGroupInfo {
    PlacementGroupInfo {
        id: id.into(),
        name: name.into(),
        strategy: strategy.into(),
        partition_count: partitions,
        spread_level: None,
    }
}

fn reservation(id: &str) -> CapacityReservationInfo {
    CapacityReservationInfo {
        id: id.into(),
        instance_type: "m5.large".into(),
        zone: "us-east-1a".into(),
        available: 3,
        instance_match_criteria: "targeted".into(),
        owner_id: "123456789012".into(),
        reservation_type: "default".into(),
        state: "active".into(),
        ..Default::default()
    }
}

fn store(class: karpenter_aws::EC2NodeClass) -> Store {
    Store(Arc::new(Mutex::new(BTreeMap::from([(
        "default".to_string(),
        class,
    )]))))
}

fn set_spec(store: &Store, field: &str, value: serde_json::Value) {
    let mut classes = store.0.lock().unwrap();
    let class = classes.get_mut("default").unwrap();
    let mut spec = serde_json::to_value(&class.spec).unwrap();
    if value.is_null() {
        spec.as_object_mut().unwrap().remove(field);
    } else {
        spec[field] = value;
    }
    class.spec = serde_json::from_value(spec).unwrap();
}

#[test]
fn an_instance_in_a_reservation_the_node_class_no_longer_selects_drifts() {
    block_on(async {
        let fake = FakeEc2::default();
        fake.reservations
            .lock()
            .unwrap()
            .push(reservation("cr-0123"));
        let class = node_class(
            serde_json::json!({"capacityReservationSelectorTerms": [{"id": "cr-0123"}]}),
        );
        let store = store(class);
        let p = provider_with(fake.clone(), store.clone());
        let request = claim("a", &["reserved"]);
        let launched = kept(request.clone(), p.create(&request).await.unwrap());
        let labels = launched.metadata.labels.clone().unwrap();
        assert_eq!(
            labels["karpenter.k8s.aws/capacity-reservation-type"],
            "default"
        );
        // EC2 reports the reservation the instance runs in.
        fake.instances.lock().unwrap()[0].capacity_reservation_id = Some("cr-0123".into());
        assert_eq!(p.is_drifted(&launched).await.unwrap(), None);

        // The reservation is no longer selected (nor active): the instance drifted.
        fake.reservations.lock().unwrap().clear();
        set_spec(
            &store,
            "capacityReservationSelectorTerms",
            serde_json::json!([{"id": "cr-other"}]),
        );
        assert_eq!(
            p.is_drifted(&launched).await.unwrap().as_deref(),
            Some("CapacityReservationDrift")
        );
        // An instance that fell back to on-demand matches any reservation selector.
        fake.instances.lock().unwrap()[0].capacity_reservation_id = None;
        assert_eq!(p.is_drifted(&launched).await.unwrap(), None);
    });
}

#[test]
fn security_group_drift_is_reported_before_reservation_drift() {
    block_on(async {
        let fake = FakeEc2::default();
        fake.reservations
            .lock()
            .unwrap()
            .push(reservation("cr-0123"));
        let store = store(node_class(
            serde_json::json!({"capacityReservationSelectorTerms": [{"id": "cr-0123"}]}),
        ));
        let p = provider_with(fake.clone(), store.clone());
        let request = claim("a", &["reserved"]);
        let launched = kept(request.clone(), p.create(&request).await.unwrap());
        // The reservation is no longer selected and the groups changed too.
        fake.reservations.lock().unwrap().clear();
        set_spec(
            &store,
            "capacityReservationSelectorTerms",
            serde_json::json!([{"id": "cr-other"}]),
        );
        {
            let mut instances = fake.instances.lock().unwrap();
            instances[0].capacity_reservation_id = Some("cr-0123".into());
            instances[0].security_groups = vec!["sg-old".into()];
        }
        let launched = adopted(launched);
        assert_eq!(
            p.is_drifted(&launched).await.unwrap().as_deref(),
            Some("SecurityGroupDrift")
        );
        fake.instances.lock().unwrap()[0].security_groups = vec!["sg-1".into()];
        assert_eq!(
            p.is_drifted(&launched).await.unwrap().as_deref(),
            Some("CapacityReservationDrift")
        );
    });
}

#[test]
fn on_demand_and_spot_instances_in_an_open_reservation_do_not_drift() {
    for capacity_type in ["on-demand", "spot"] {
        block_on(async {
            let fake = FakeEc2::default();
            let store = store(node_class(serde_json::json!({})));
            let p = provider_with(fake.clone(), store);
            let request = claim("a", &[capacity_type]);
            let launched = kept(request.clone(), p.create(&request).await.unwrap());
            // EC2 matched the instance to an open reservation the NodeClass never selected.
            fake.instances.lock().unwrap()[0].capacity_reservation_id = Some("cr-open".into());
            assert_eq!(
                p.is_drifted(&launched).await.unwrap(),
                None,
                "{capacity_type}"
            );
        });
    }
}

#[test]
fn launch_templates_keep_on_demand_and_spot_out_of_open_reservations() {
    block_on(async {
        let fake = FakeEc2::default();
        fake.reservations
            .lock()
            .unwrap()
            .push(reservation("cr-0123"));
        let store = store(node_class(
            serde_json::json!({"capacityReservationSelectorTerms": [{"id": "cr-0123"}]}),
        ));
        let p = provider_with(fake.clone(), store);
        p.create(&claim("a", &["on-demand"])).await.unwrap();
        p.create(&claim("b", &["reserved"])).await.unwrap();
        let templates = fake.templates.lock().unwrap();
        let mut seen: Vec<(Option<&str>, Option<&str>)> = templates
            .values()
            .map(|t| {
                (
                    t.capacity_reservation_preference.as_deref(),
                    t.capacity_reservation_id.as_deref(),
                )
            })
            .collect();
        seen.sort();
        assert_eq!(
            seen,
            [
                (Some("capacity-reservations-only"), Some("cr-0123")),
                (Some("none"), None),
            ]
        );
    });
}

#[test]
fn instances_launch_into_the_selected_placement_group_and_drift_when_it_changes() {
    block_on(async {
        let fake = FakeEc2::default();
        fake.checks().placement_groups = vec![
            group("pg-1", "training", "cluster", 0),
            group("pg-2", "other", "cluster", 0),
        ];
        let class = node_class(serde_json::json!({"placementGroupSelector": {"name": "training"}}));
        let store = store(class);
        let p = provider_with(fake.clone(), store.clone());
        let request = claim("a", &["on-demand"]);
        let launched = kept(request.clone(), p.create(&request).await.unwrap());
        let labels = launched.metadata.labels.clone().unwrap();
        assert_eq!(labels[LABEL_PLACEMENT_GROUP_ID], "pg-1");
        assert!(!labels.contains_key(LABEL_PLACEMENT_GROUP_PARTITION));
        let templates = fake.templates.lock().unwrap().clone();
        assert!(!templates.is_empty());
        for data in templates.values() {
            assert_eq!(data.placement, Some(("pg-1".to_string(), None)));
        }
        assert_eq!(p.is_drifted(&launched).await.unwrap(), None);

        // The group was deleted and made again under the same name: same selector, another
        // group, so the node sits in the wrong one.
        fake.checks().placement_groups = vec![
            group("pg-9", "training", "cluster", 0),
            group("pg-2", "other", "cluster", 0),
        ];
        resolve_again(&store, 1);
        assert_eq!(
            p.is_drifted(&launched).await.unwrap().as_deref(),
            Some("PlacementGroupDrift")
        );
        // The selector itself is part of the NodeClass's hash (as upstream's): changing it is
        // static drift, found first.
        set_spec(
            &store,
            "placementGroupSelector",
            serde_json::json!({"id": "pg-2"}),
        );
        assert_eq!(
            p.is_drifted(&launched).await.unwrap().as_deref(),
            Some("NodeClassDrift")
        );
        // Judged by the live group alone (an adopted claim), pg-2 is not where the node is.
        assert_eq!(
            p.is_drifted(&adopted(launched.clone()))
                .await
                .unwrap()
                .as_deref(),
            Some("PlacementGroupDrift")
        );
        // Removed: the node is in a group the NodeClass no longer asks for.
        set_spec(&store, "placementGroupSelector", serde_json::Value::Null);
        assert_eq!(
            p.is_drifted(&adopted(launched)).await.unwrap().as_deref(),
            Some("PlacementGroupDrift")
        );
    });
}

#[test]
fn a_node_launched_outside_any_group_drifts_when_a_selector_is_added() {
    block_on(async {
        let fake = FakeEc2::default();
        fake.checks().placement_groups = vec![group("pg-1", "training", "cluster", 0)];
        let store = store(node_class(serde_json::json!({})));
        let p = provider_with(fake.clone(), store.clone());
        let request = claim("a", &["on-demand"]);
        let launched = adopted(kept(request.clone(), p.create(&request).await.unwrap()));
        assert!(
            !launched
                .metadata
                .labels
                .as_ref()
                .unwrap()
                .contains_key(LABEL_PLACEMENT_GROUP_ID)
        );
        for data in fake.templates.lock().unwrap().values() {
            assert_eq!(data.placement, None);
        }
        assert_eq!(p.is_drifted(&launched).await.unwrap(), None);
        set_spec(
            &store,
            "placementGroupSelector",
            serde_json::json!({"name": "training"}),
        );
        assert_eq!(
            p.is_drifted(&launched).await.unwrap().as_deref(),
            Some("PlacementGroupDrift")
        );
    });
}

#[test]
fn a_partition_group_launches_into_the_partition_the_claim_asks_for() {
    block_on(async {
        let fake = FakeEc2::default();
        fake.checks().placement_groups = vec![group("pg-7", "shards", "partition", 4)];
        let class = node_class(serde_json::json!({"placementGroupSelector": {"id": "pg-7"}}));
        let p = provider_with(fake.clone(), store(class));
        let mut c = claim("a", &["on-demand"]);
        c.spec
            .requirements
            .push(requirement(LABEL_PLACEMENT_GROUP_PARTITION, &["3", "2"]));
        let launched = p.create(&c).await.unwrap();
        let labels = launched.metadata.labels.unwrap();
        assert_eq!(labels[LABEL_PLACEMENT_GROUP_ID], "pg-7");
        assert_eq!(labels[LABEL_PLACEMENT_GROUP_PARTITION], "2");
        for data in fake.templates.lock().unwrap().values() {
            assert_eq!(data.placement, Some(("pg-7".to_string(), Some(2))));
        }
    });
}

#[test]
fn a_missing_placement_group_launches_nothing() {
    block_on(async {
        let fake = FakeEc2::default();
        let class = node_class(serde_json::json!({"placementGroupSelector": {"name": "gone"}}));
        let p = provider_with(fake.clone(), store(class));
        match p.create(&claim("a", &["on-demand"])).await {
            Err(CloudProviderError::NodeClassNotReady(m)) => {
                assert!(
                    m.to_string().contains("placement group \"gone\" not found"),
                    "{m}"
                )
            }
            other => panic!("{other:?}"),
        }
        assert!(fake.fleets.lock().unwrap().is_empty());
    });
}

#[test]
fn a_reclaimed_reservation_takes_no_more_launches_until_ec2_is_asked_again() {
    block_on(async {
        let fake = FakeEc2::default();
        fake.reservations
            .lock()
            .unwrap()
            .push(reservation("cr-0123"));
        let class = node_class(
            serde_json::json!({"capacityReservationSelectorTerms": [{"id": "cr-0123"}]}),
        );
        let p = provider_with(fake.clone(), store(class));
        let mut pool = NodePool::default();
        pool.spec.template.spec.node_class_ref.name = "default".into();
        let reserved_available = |types: &[Arc<karpenter_core::instancetype::InstanceType>]| {
            types
                .iter()
                .flat_map(|t| t.offerings.iter())
                .filter(|o| o.capacity_type == "reserved")
                .map(|o| o.available)
                .collect::<Vec<_>>()
        };
        let before = p.instance_types(&pool).await.unwrap();
        assert_eq!(reserved_available(&before), vec![true]);
        p.mark_reservation_unavailable("cr-0123").await;
        let after = p.instance_types(&pool).await.unwrap();
        // Listed (its nodes keep their price) but not available: nothing launches into it.
        assert_eq!(
            reserved_available(&after),
            vec![false],
            "a reservation with no room offers nothing to launch into"
        );
        // A reserved launch now finds nothing to launch into.
        assert!(p.create(&claim("a", &["reserved"])).await.is_err());
    });
}

#[test]
fn a_reserved_launch_counts_against_the_reservation_until_ec2_is_asked_again() {
    block_on(async {
        let fake = FakeEc2::default();
        let mut one = reservation("cr-one");
        one.available = 1;
        fake.reservations.lock().unwrap().push(one);
        let class =
            node_class(serde_json::json!({"capacityReservationSelectorTerms": [{"id": "cr-one"}]}));
        let p = provider_with(fake.clone(), store(class));
        let mut pool = NodePool::default();
        pool.spec.template.spec.node_class_ref.name = "default".into();
        let reserved_available = |types: &[Arc<karpenter_core::instancetype::InstanceType>]| {
            types
                .iter()
                .flat_map(|t| t.offerings.iter())
                .filter(|o| o.capacity_type == "reserved")
                .map(|o| o.available)
                .collect::<Vec<_>>()
        };
        assert_eq!(
            reserved_available(&p.instance_types(&pool).await.unwrap()),
            vec![true]
        );
        let launched = p.create(&claim("a", &["reserved"])).await.unwrap();
        assert_eq!(
            launched.metadata.labels.as_ref().unwrap()["karpenter.sh/capacity-type"],
            "reserved"
        );
        // EC2 has not been asked again (the fake still says 1): the launch is counted here.
        assert_eq!(
            reserved_available(&p.instance_types(&pool).await.unwrap()),
            vec![false],
            "the one instance is taken"
        );
    });
}
