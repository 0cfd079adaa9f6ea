//! The provider against a fake EC2: what no emulator models — capacity errors, retries,
//! drift of a live instance.

mod support;

use karpenter_api::{NodeClaim, NodeSelectorRequirementWithMinValues, Operator};
use karpenter_controller::cloudprovider::{CloudProvider, CloudProviderError};
use karpenter_core::resources::Resources;
use support::{FakeEc2, Store, TYPES, node_class, provider, provider_with};

fn claim(name: &str, capacity_type: &str) -> NodeClaim {
    let mut c = NodeClaim::default();
    c.metadata.name = Some(name.into());
    c.metadata.labels = Some([("karpenter.sh/nodepool".to_string(), "default".to_string())].into());
    c.spec.node_class_ref.name = "default".into();
    c.spec.node_class_ref.group = "karpenter.k8s.aws".into();
    c.spec.node_class_ref.kind = "EC2NodeClass".into();
    c.spec.requirements = vec![NodeSelectorRequirementWithMinValues {
        key: "karpenter.sh/capacity-type".into(),
        operator: Operator::In,
        values: vec![capacity_type.into()],
        min_values: None,
    }];
    c.spec.resources.requests = Resources::parse(&[("cpu", "1")]).to_list();
    c
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}

#[test]
fn capacity_errors_mark_offerings_unavailable_and_the_next_launch_picks_others() {
    block_on(async {
        let fake = FakeEc2::default();
        // Every type but r5.large is out of spot capacity.
        *fake.exhausted.lock().unwrap() = vec!["m5.large".into(), "c5.large".into()];
        let p = provider(fake, node_class(serde_json::json!({})));
        let launched = p.create(&claim("a", "spot")).await.unwrap();
        let labels = launched.metadata.labels.clone().unwrap();
        assert_eq!(labels["node.kubernetes.io/instance-type"], "r5.large");
        assert_eq!(labels["karpenter.sh/capacity-type"], "spot");
        assert_eq!(
            launched.status.as_ref().unwrap().provider_id.as_deref(),
            Some("aws:///us-east-1a/i-0001")
        );
        let now = std::time::Instant::now();
        assert!(
            p.unavailable()
                .is_unavailable("m5.large", "us-east-1a", "spot", now)
        );
        assert!(
            p.unavailable()
                .is_unavailable("c5.large", "us-east-1a", "spot", now)
        );
        assert!(
            !p.unavailable()
                .is_unavailable("m5.large", "us-east-1a", "on-demand", now)
        );
    });
}

#[test]
fn all_offerings_exhausted_is_insufficient_capacity() {
    block_on(async {
        let fake = FakeEc2::default();
        *fake.exhausted.lock().unwrap() = TYPES.iter().map(|t| t.to_string()).collect();
        let p = provider(fake, node_class(serde_json::json!({})));
        let err = p.create(&claim("a", "spot")).await.unwrap_err();
        assert!(
            matches!(err, CloudProviderError::InsufficientCapacity(ref m) if m.message().contains("InsufficientInstanceCapacity")),
            "{err:?}"
        );
        // Every spot offering is now unavailable, so the next attempt fails before asking EC2.
        let err = p.create(&claim("b", "spot")).await.unwrap_err();
        assert!(
            matches!(err, CloudProviderError::InsufficientCapacity(_)),
            "{err:?}"
        );
    });
}

#[test]
fn create_is_idempotent_and_delete_waits_for_termination() {
    block_on(async {
        let p = provider(FakeEc2::default(), node_class(serde_json::json!({})));
        let first = p.create(&claim("a", "on-demand")).await.unwrap();
        let again = p.create(&claim("a", "on-demand")).await.unwrap();
        assert_eq!(
            first.status.as_ref().unwrap().provider_id,
            again.status.as_ref().unwrap().provider_id
        );
        let listed = p.list().await.unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].metadata.name.as_deref(), Some("a"));
        assert_eq!(
            listed[0].metadata.labels.as_ref().unwrap()["karpenter.sh/nodepool"],
            "default"
        );
        // Terminating: Ok (asked again later), then shutting-down stays Ok until it is gone.
        assert!(p.delete(&first).await.is_ok());
        assert!(p.delete(&first).await.is_ok());
        let err = p.get("aws:///us-east-1a/i-9999").await.unwrap_err();
        assert!(matches!(err, CloudProviderError::NotFound(_)));
    });
}

#[test]
fn launch_template_carries_the_node_class() {
    use base64::Engine;
    block_on(async {
        let class = node_class(serde_json::json!({
            "tags": {"team": "a"},
            "detailedMonitoring": true,
            "blockDeviceMappings": [{"deviceName": "/dev/xvda", "rootVolume": true, "ebs": {"volumeSize": "100Gi", "volumeType": "gp3", "encrypted": true}}],
            "metadataOptions": {"httpTokens": "required", "httpPutResponseHopLimit": 2},
            "userData": "#!/bin/bash\necho hi",
        }));
        let fake = FakeEc2::default();
        let p = provider(fake.clone(), class);
        p.create(&claim("a", "on-demand")).await.unwrap();
        let templates = fake.templates.lock().unwrap().clone();
        assert_eq!(templates.len(), 1);
        let (name, data) = templates.into_iter().next().unwrap();
        assert!(name.starts_with("karpenter.k8s.aws/"), "{name}");
        assert_eq!(data.image_id, "ami-1");
        assert_eq!(data.security_groups, vec!["sg-1"]);
        assert!(data.monitoring);
        assert_eq!(data.http_put_response_hop_limit, 2);
        assert_eq!(data.block_devices[0].volume_size_gib, Some(100));
        assert_eq!(data.tags["team"], "a");
        assert_eq!(data.tags["kubernetes.io/cluster/test"], "owned");
        let user_data = String::from_utf8(
            base64::engine::general_purpose::STANDARD
                .decode(&data.user_data)
                .unwrap(),
        )
        .unwrap();
        assert!(user_data.contains("echo hi"), "{user_data}");
        assert!(
            user_data.contains("\"apiServerEndpoint\": \"https://test-cluster\""),
            "{user_data}"
        );
        assert!(
            user_data.contains("karpenter.sh/nodepool=default"),
            "{user_data}"
        );
        // The role got a managed instance profile, which the template uses.
        let profiles = fake.profiles.lock().unwrap().clone();
        assert_eq!(profiles.len(), 1);
        assert_eq!(profiles[0].1, "KarpenterNodeRole");
        assert_eq!(data.instance_profile, profiles[0].0);
        // The fleet asked for on-demand, lowest price first, tagged for List.
        let fleet = fake.fleets.lock().unwrap()[0].clone();
        assert_eq!(fleet.capacity_type, "on-demand");
        assert_eq!(fleet.tags["karpenter.sh/nodeclaim"], "a");
        assert_eq!(fleet.tags["eks:eks-cluster-name"], "test");
    });
}

#[test]
fn drift_on_node_class_hash_and_live_instance() {
    block_on(async {
        let fake = FakeEc2::default();
        let store = Store::default();
        store
            .0
            .lock()
            .unwrap()
            .insert("default".into(), node_class(serde_json::json!({})));
        let p = provider_with(fake.clone(), store.clone());
        let launched = p.create(&claim("a", "on-demand")).await.unwrap();
        let mut c = claim("a", "on-demand");
        c.metadata.annotations = launched.metadata.annotations.clone();
        c.status = launched.status.clone();
        assert_eq!(p.is_drifted(&c).await.unwrap(), None);
        // The instance's security groups changed under it.
        fake.instances.lock().unwrap()[0].security_groups = vec!["sg-other".into()];
        assert_eq!(
            p.is_drifted(&c).await.unwrap().as_deref(),
            Some("SecurityGroupDrift")
        );
        fake.instances.lock().unwrap()[0].security_groups = vec!["sg-1".into()];
        // Its subnet is no longer selected.
        fake.instances.lock().unwrap()[0].subnet_id = "subnet-gone".into();
        assert_eq!(
            p.is_drifted(&c).await.unwrap().as_deref(),
            Some("SubnetDrift")
        );
        fake.instances.lock().unwrap()[0].subnet_id = "subnet-a".into();
        // A newer AMI replaced the one it runs.
        fake.instances.lock().unwrap()[0].image_id = "ami-old".into();
        assert_eq!(p.is_drifted(&c).await.unwrap().as_deref(), Some("AMIDrift"));
        fake.instances.lock().unwrap()[0].image_id = "ami-1".into();
        // The NodeClass itself changed.
        store.0.lock().unwrap().insert(
            "default".into(),
            node_class(serde_json::json!({"tags": {"team": "b"}})),
        );
        assert_eq!(
            p.is_drifted(&c).await.unwrap().as_deref(),
            Some("NodeClassDrift")
        );
        // A claim stamped by another implementation's hash version is not judged by it.
        c.metadata.annotations.as_mut().unwrap().insert(
            "karpenter.k8s.aws/ec2nodeclass-hash-version".into(),
            "v6".into(),
        );
        assert_eq!(p.is_drifted(&c).await.unwrap(), None);
    });
}

#[test]
fn a_missing_node_class_is_not_ready() {
    block_on(async {
        let p = provider_with(FakeEc2::default(), Store::default());
        let err = p.create(&claim("a", "on-demand")).await.unwrap_err();
        assert!(
            matches!(err, CloudProviderError::NodeClassNotReady(ref m) if m.message().contains("EC2NodeClass \"default\" not found")),
            "{err:?}"
        );
    });
}

#[test]
fn on_demand_prices_come_from_the_price_list_unless_isolated() {
    use karpenter_api::NodePool;
    block_on(async {
        let mut pool = NodePool::default();
        pool.spec.template.spec.node_class_ref.name = "default".into();
        let price_of = |types: &[std::sync::Arc<karpenter_core::instancetype::InstanceType>]| {
            types
                .iter()
                .find(|t| t.name == "m5.large")
                .and_then(|t| t.offerings.iter().find(|o| o.capacity_type == "on-demand"))
                .map(|o| o.price)
        };
        let fake = FakeEc2::default();
        *fake.on_demand.lock().unwrap() = vec![("m5.large".into(), 0.01)];
        let p = provider(fake.clone(), node_class(serde_json::json!({})));
        assert_eq!(
            price_of(&p.instance_types(&pool).await.unwrap()),
            Some(0.01)
        );

        let isolated =
            support::provider_with_options(fake, node_class(serde_json::json!({})), |o| {
                o.isolated_vpc = true
            });
        assert_eq!(
            price_of(&isolated.instance_types(&pool).await.unwrap()),
            Some(0.096),
            "the embedded list price"
        );
    });
}

#[test]
fn unreachable_ec2_is_an_error_until_it_answers() {
    use karpenter_api::NodePool;
    block_on(async {
        let mut pool = NodePool::default();
        pool.spec.template.spec.node_class_ref.name = "default".into();
        let fake = FakeEc2::default();
        fake.unreachable
            .store(true, std::sync::atomic::Ordering::SeqCst);
        let p = provider(fake.clone(), node_class(serde_json::json!({})));
        let err = p.instance_types(&pool).await.unwrap_err();
        assert!(
            matches!(err, CloudProviderError::Other(ref m) if m.message().contains("connection refused")),
            "{err:?}"
        );
        fake.unreachable
            .store(false, std::sync::atomic::Ordering::SeqCst);
        assert_eq!(p.instance_types(&pool).await.unwrap().len(), TYPES.len());
    });
}

#[test]
fn reserved_capacity_launches_into_its_reservation() {
    use karpenter_aws::ec2::CapacityReservationInfo;
    block_on(async {
        let fake = FakeEc2::default();
        fake.reservations
            .lock()
            .unwrap()
            .push(CapacityReservationInfo {
                id: "cr-0123".into(),
                instance_type: "m5.large".into(),
                zone: "us-east-1a".into(),
                available: 3,
                instance_match_criteria: "targeted".into(),
                owner_id: "123456789012".into(),
                end_date: None,
                reservation_type: "default".into(),
                state: "active".into(),
            });
        let class = node_class(
            serde_json::json!({"capacityReservationSelectorTerms": [{"id": "cr-0123"}]}),
        );
        let p = provider(fake.clone(), class);
        let mut c = claim("a", "reserved");
        c.spec.requirements[0].values = vec!["reserved".into(), "on-demand".into()];
        let launched = p.create(&c).await.unwrap();
        let labels = launched.metadata.labels.unwrap();
        assert_eq!(labels["karpenter.sh/capacity-type"], "reserved");
        assert_eq!(
            labels["karpenter.k8s.aws/capacity-reservation-id"],
            "cr-0123"
        );
        assert_eq!(labels["node.kubernetes.io/instance-type"], "m5.large");
        let fleet = fake.fleets.lock().unwrap()[0].clone();
        assert_eq!(fleet.capacity_type, "reserved");
        let templates = fake.templates.lock().unwrap().clone();
        assert_eq!(
            templates
                .values()
                .next()
                .unwrap()
                .capacity_reservation_id
                .as_deref(),
            Some("cr-0123")
        );
    });
}

#[test]
fn resolved_types_are_reused_until_an_offering_runs_out() {
    use karpenter_api::NodePool;
    block_on(async {
        let mut pool = NodePool::default();
        pool.spec.template.spec.node_class_ref.name = "default".into();
        let p = provider(FakeEc2::default(), node_class(serde_json::json!({})));
        let first = p.instance_types(&pool).await.unwrap();
        let again = p.instance_types(&pool).await.unwrap();
        assert!(
            std::sync::Arc::ptr_eq(&first[0], &again[0]),
            "the same resolution"
        );
        p.unavailable()
            .mark("m5.large", "us-east-1a", "spot", std::time::Instant::now());
        let after = p.instance_types(&pool).await.unwrap();
        assert!(
            !std::sync::Arc::ptr_eq(&first[0], &after[0]),
            "resolved afresh"
        );
        let m5 = after.iter().find(|t| t.name == "m5.large").unwrap();
        assert!(
            m5.offerings
                .iter()
                .any(|o| o.capacity_type == "spot" && !o.available)
        );
    });
}

#[test]
fn node_class_readiness_is_the_status_loops_ready_condition() {
    use karpenter_api::NodeClassReference;
    use karpenter_controller::cloudprovider::NodeClassReadiness;
    block_on(async {
        let store = Store::default();
        let p = provider_with(FakeEc2::default(), store.clone());
        let reference = |kind: &str, name: &str| NodeClassReference {
            group: "karpenter.k8s.aws".into(),
            kind: kind.into(),
            name: name.into(),
        };
        let readiness = |r: NodeClassReference| {
            let p = &p;
            async move { p.node_class_readiness(&r).await.unwrap() }
        };
        assert_eq!(
            readiness(reference("EC2NodeClass", "default")).await,
            NodeClassReadiness::NotFound
        );
        assert_eq!(
            readiness(reference("KWOKNodeClass", "default")).await,
            NodeClassReadiness::NotFound,
            "not a kind this provider serves"
        );
        store
            .0
            .lock()
            .unwrap()
            .insert("default".into(), node_class(serde_json::json!({})));
        assert!(
            matches!(
                readiness(reference("EC2NodeClass", "default")).await,
                NodeClassReadiness::NotReady { ref reason, .. } if reason == "AwaitingReconciliation"
            ),
            "no status written yet"
        );
        let mut class = node_class(serde_json::json!({}));
        class.status = serde_json::from_value(serde_json::json!({"conditions": [
            {"type": "SubnetsReady", "status": "False", "reason": "SubnetsNotFound", "message": "", "lastTransitionTime": "2024-01-01T00:00:00Z"},
            {"type": "Ready", "status": "False", "reason": "SubnetsNotFound", "message": "spec.subnetSelectorTerms: no subnet matches", "lastTransitionTime": "2024-01-01T00:00:00Z"},
        ]}))
        .unwrap();
        store.0.lock().unwrap().insert("default".into(), class);
        assert_eq!(
            readiness(reference("EC2NodeClass", "default")).await,
            NodeClassReadiness::NotReady {
                reason: "SubnetsNotFound".into(),
                message: "spec.subnetSelectorTerms: no subnet matches".into()
            }
        );
    });
}

#[test]
fn repair_policies_are_upstreams() {
    let p = provider_with(FakeEc2::default(), Store::default());
    let policies: Vec<(&str, &str, u64)> = p
        .repair_policies()
        .iter()
        .map(|r| {
            (
                r.condition_type,
                r.condition_status,
                r.toleration.as_secs() / 60,
            )
        })
        .collect();
    assert_eq!(
        policies,
        [
            ("Ready", "False", 30),
            ("Ready", "Unknown", 30),
            ("AcceleratedHardwareReady", "False", 10),
            ("StorageReady", "False", 30),
            ("NetworkingReady", "False", 30),
            ("KernelReady", "False", 30),
            ("ContainerRuntimeReady", "False", 30),
        ]
    );
}
