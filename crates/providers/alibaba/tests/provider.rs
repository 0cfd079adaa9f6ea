//! The CloudProvider against the in-process ECS, VPC and ACK (every call's signature checked):
//! a launch is one instant auto-provisioning group of the cheapest fitting types with ACK's
//! bootstrap and the cluster's tags; a retried launch finds its instance instead of making a
//! second; stock-outs mark offerings unavailable; Delete is idempotent; List and Get find the
//! cluster's instances; drift compares the instance with the NodeClass's status.

mod support;

use std::collections::BTreeMap;
use std::time::Instant;

use base64::Engine;
use k8s_openapi::jiff::Timestamp;
use karpenter_alibaba::ECSNodeClass;
use karpenter_alibaba::cluster::{Cluster, ClusterType};
use karpenter_alibaba::nodeclass_status;
use karpenter_alibaba::provider::{AlibabaCloudProvider, StaticState};
use karpenter_api::NodeClaim;
use karpenter_cloudprovider::{CloudProvider, CloudProviderError};
use serde_json::json;
use support::Mock;
use support::ecs::{self, AK, CLUSTER, REGION, SECRET, Shared};

type Provider = AlibabaCloudProvider<StaticState>;

/// The fake cloud, and a provider whose NodeClass the status code resolved against it.
async fn setup() -> (Mock, Shared, Provider, ECSNodeClass) {
    let mock = Mock::start().await;
    let cloud = ecs::install(&mock);
    let client = mock.client(AK, SECRET);
    let cluster = Cluster::new(ClusterType::AckManaged, client.clone(), CLUSTER, REGION);
    let mut class: ECSNodeClass = serde_json::from_value(ecs::node_class()).unwrap();
    let images = cluster.supported_images("v1.31.1").await.unwrap();
    let observed = nodeclass_status::observe(&client, &class.spec, &images).await;
    class.status = Some(nodeclass_status::status(
        &class,
        &observed,
        Timestamp::now(),
    ));
    let state: StaticState = BTreeMap::from([("default".to_string(), class.clone())]);
    let provider =
        AlibabaCloudProvider::new(client, support::http(), cluster, state, ecs::options());
    (mock, cloud, provider, class)
}

fn claim(name: &str, types: &[&str], capacity_types: &[&str]) -> NodeClaim {
    serde_json::from_value(json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": name, "uid": format!("uid-{name}"), "labels": {"karpenter.sh/nodepool": "general"}},
        "spec": {
            "nodeClassRef": {"group": "karpenter.k8s.alibabacloud", "kind": "ECSNodeClass", "name": "default"},
            "requirements": [
                {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": types},
                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": capacity_types},
            ],
            "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
            "taints": [{"key": "dedicated", "value": "web", "effect": "NoSchedule"}],
        },
    }))
    .unwrap()
}

fn provider_id(c: &NodeClaim) -> String {
    c.status.as_ref().unwrap().provider_id.clone().unwrap()
}

#[tokio::test]
async fn a_launch_is_one_group_of_the_cheapest_types_with_acks_bootstrap() {
    let (mock, cloud, provider, class) = setup().await;
    let status = class.status.as_ref().unwrap();
    assert!(
        status
            .conditions
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True"),
        "{:?}",
        status.conditions
    );
    let c = claim(
        "general-a1",
        &["ecs.g7.large", "ecs.g7a.large"],
        &["on-demand"],
    );
    let launched = provider.create(&c).await.unwrap();

    let instances = cloud.lock().unwrap().instances.clone();
    assert_eq!(instances.len(), 1);
    let i = &instances[0];
    assert_eq!(provider_id(&launched), format!("cn-hangzhou.{}", i.id));
    assert!(!i.spot);
    assert_eq!(i.image, "aliyun_3_x64_20G_alibase_20240819.vhd");
    assert_eq!(i.security_groups, ["sg-1"]);
    for (k, v) in [
        ("kubernetes.io/cluster/c0123456789abcdef", "owned"),
        ("karpenter.sh/nodepool", "general"),
        ("karpenter.sh/nodeclaim", "general-a1"),
        ("karpenter.k8s.alibabacloud/ecsnodeclass", "default"),
        ("team", "platform"),
    ] {
        assert_eq!(i.tags.get(k).map(String::as_str), Some(v), "{k}");
    }
    let group = &mock.calls_to("CreateAutoProvisioningGroup")[0];
    assert_eq!(group.params["AutoProvisioningGroupType"], "instant");
    assert_eq!(group.params["PayAsYouGoTargetCapacity"], "1");
    assert_eq!(group.params["ClientToken"], "uid-general-a1");
    // Both types, cheapest first, in vSwitches of zones where each has stock.
    let types: Vec<&str> = (1..=2)
        .map(|n| group.params[&format!("LaunchTemplateConfig.{n}.InstanceType")].as_str())
        .collect();
    assert_eq!(types.len(), 2);
    assert_eq!(
        group.params["LaunchTemplateConfig.1.InstanceType"], i.instance_type,
        "the cheapest launched"
    );
    // ACK's attach script with the claim's labels and taints, in a MIME document.
    let user_data = String::from_utf8(
        base64::engine::general_purpose::STANDARD
            .decode(&i.user_data)
            .unwrap(),
    )
    .unwrap();
    assert!(user_data.contains("attach_node.sh"), "{user_data}");
    assert!(
        user_data.contains("karpenter.sh/nodepool=general"),
        "{user_data}"
    );
    assert!(
        user_data.contains("karpenter.sh/capacity-type=on-demand"),
        "{user_data}"
    );
    assert!(
        user_data.contains("dedicated=web:NoSchedule"),
        "{user_data}"
    );
    assert!(
        user_data.contains("karpenter.sh/unregistered"),
        "{user_data}"
    );

    let labels = launched.metadata.labels.clone().unwrap();
    assert_eq!(labels["karpenter.sh/capacity-type"], "on-demand");
    assert_eq!(labels["topology.kubernetes.io/zone"], i.zone);
    assert_eq!(labels["node.kubernetes.io/instance-type"], i.instance_type);
    let annotations = launched.metadata.annotations.clone().unwrap();
    assert_eq!(
        annotations["karpenter.k8s.alibabacloud/ecsnodeclass-hash"],
        class.hash()
    );
    assert!(!launched.status.as_ref().unwrap().allocatable.is_empty());

    // A retry (the answer was lost, the controller restarted) finds the instance.
    let again = provider.create(&c).await.unwrap();
    assert_eq!(provider_id(&again), provider_id(&launched));
    assert_eq!(mock.calls_to("CreateAutoProvisioningGroup").len(), 1);
    assert_eq!(cloud.lock().unwrap().instances.len(), 1);
}

#[tokio::test]
async fn a_stock_out_marks_the_offering_and_the_next_launch_goes_elsewhere() {
    let (_mock, cloud, provider, _) = setup().await;
    cloud
        .lock()
        .unwrap()
        .sold_out
        .insert("ecs.g8y.large".into());
    // ecs.g8y.large (arm64, the cheapest) is the only type its image boots: nothing launches.
    let types = ["ecs.g8y.large", "ecs.g7.large"];
    let err = provider
        .create(&claim("general-b1", &types, &["on-demand"]))
        .await
        .unwrap_err();
    assert!(
        matches!(err, CloudProviderError::InsufficientCapacity(_)),
        "{err}"
    );
    assert!(provider.unavailable().is_unavailable(
        "ecs.g8y.large",
        "cn-hangzhou-i",
        "on-demand",
        Instant::now()
    ));
    let launched = provider
        .create(&claim("general-b2", &types, &["on-demand"]))
        .await
        .unwrap();
    assert_eq!(
        launched.metadata.labels.unwrap()["node.kubernetes.io/instance-type"],
        "ecs.g7.large"
    );
}

#[tokio::test]
async fn spot_when_allowed_and_offered() {
    let (mock, cloud, provider, _) = setup().await;
    let launched = provider
        .create(&claim(
            "general-s1",
            &["ecs.g7.large"],
            &["spot", "on-demand"],
        ))
        .await
        .unwrap();
    assert_eq!(
        launched.metadata.labels.unwrap()["karpenter.sh/capacity-type"],
        "spot"
    );
    let group = &mock.calls_to("CreateAutoProvisioningGroup")[0];
    assert_eq!(group.params["SpotTargetCapacity"], "1");
    // Spot stock of ecs.g7.large is in zones i and k; only i has a vSwitch.
    assert_eq!(group.params["LaunchTemplateConfig.1.VSwitchId"], "vsw-i");
    assert!(cloud.lock().unwrap().instances[0].spot);
}

#[tokio::test]
async fn delete_list_and_get() {
    let (_mock, cloud, provider, _) = setup().await;
    let c = claim("general-d1", &["ecs.g7.large"], &["on-demand"]);
    let launched = provider.create(&c).await.unwrap();
    let id = provider_id(&launched);

    // An instance of ACK's own node pool carries the cluster tag too: never Karpenter's.
    cloud.lock().unwrap().instances.push(ecs::FakeInstance {
        id: "i-ack-pool".into(),
        instance_type: "ecs.g7.large".into(),
        zone: "cn-hangzhou-i".into(),
        v_switch: "vsw-i".into(),
        spot: false,
        image: String::new(),
        user_data: String::new(),
        security_groups: vec!["sg-1".into()],
        tags: BTreeMap::from([(format!("kubernetes.io/cluster/{CLUSTER}"), "owned".into())]),
    });
    let listed = provider.list().await.unwrap();
    assert_eq!(listed.len(), 1, "only what a NodePool launched");
    assert_eq!(listed[0].metadata.name.as_deref(), Some("general-d1"));
    assert_eq!(provider_id(&listed[0]), id);
    assert_eq!(provider_id(&provider.get(&id).await.unwrap()), id);
    assert!(matches!(
        provider.get("cn-hangzhou.i-unknown").await,
        Err(CloudProviderError::NotFound(_))
    ));
    assert!(matches!(
        provider.get("aws:///us-east-1a/i-0abc").await,
        Err(CloudProviderError::NotFound(_))
    ));

    let mut deleting = c.clone();
    deleting.status = launched.status.clone();
    provider.delete(&deleting).await.unwrap();
    cloud
        .lock()
        .unwrap()
        .instances
        .retain(|i| i.id != "i-ack-pool");
    assert!(cloud.lock().unwrap().instances.is_empty());
    assert!(matches!(
        provider.delete(&deleting).await,
        Err(CloudProviderError::NotFound(_))
    ));

    // A claim whose providerID was never written still owns the instance tagged with its name.
    provider
        .create(&claim("general-d2", &["ecs.g7.large"], &["on-demand"]))
        .await
        .unwrap();
    provider
        .delete(&claim("general-d2", &["ecs.g7.large"], &["on-demand"]))
        .await
        .unwrap();
    assert!(cloud.lock().unwrap().instances.is_empty());
}

#[tokio::test]
async fn drift_compares_the_instance_with_the_status() {
    let (mock, _cloud, provider, class) = setup().await;
    let c = claim("general-x1", &["ecs.g7.large"], &["on-demand"]);
    let mut launched = provider.create(&c).await.unwrap();
    launched.spec = c.spec.clone();
    assert_eq!(provider.is_drifted(&launched).await.unwrap(), None);

    // The security group selector now finds another group.
    mock.reply(
        "DescribeSecurityGroups",
        json!({"RequestId": "r", "TotalCount": 1,
               "SecurityGroups": {"SecurityGroup": [{"SecurityGroupId": "sg-2", "SecurityGroupName": "new"}]}}),
    );
    let client = mock.client(AK, SECRET);
    let cluster = Cluster::new(ClusterType::AckManaged, client.clone(), CLUSTER, REGION);
    let mut moved = class.clone();
    let images = cluster.supported_images("v1.31.1").await.unwrap();
    let observed = nodeclass_status::observe(&client, &moved.spec, &images).await;
    moved.status = Some(nodeclass_status::status(
        &moved,
        &observed,
        Timestamp::now(),
    ));
    let state: StaticState = BTreeMap::from([("default".to_string(), moved)]);
    let provider =
        AlibabaCloudProvider::new(client, support::http(), cluster, state, ecs::options());
    assert_eq!(
        provider.is_drifted(&launched).await.unwrap().as_deref(),
        Some("SecurityGroupDrift")
    );

    // A changed static field wins.
    let mut stamped = launched.clone();
    stamped.metadata.annotations.as_mut().unwrap().insert(
        "karpenter.k8s.alibabacloud/ecsnodeclass-hash".into(),
        "0".into(),
    );
    assert_eq!(
        provider.is_drifted(&stamped).await.unwrap().as_deref(),
        Some("NodeClassDrift")
    );
}
