use serde_json::json;

use super::*;
use crate::ecsnodeclass::{DataDisk, SystemDisk};
use crate::launch::LaunchConfig;

#[test]
fn provider_ids_are_acks() {
    assert_eq!(
        provider_id("cn-hangzhou", "i-bp1abc"),
        "cn-hangzhou.i-bp1abc"
    );
    let cases = [
        ("cn-hangzhou.i-bp1abc", Some("i-bp1abc")),
        ("cn-shanghai-finance-1.i-x", Some("i-x")),
        ("i-bp1abc", None),
        (".i-bp1abc", None),
        ("cn-hangzhou.", None),
        ("aws:///us-east-1a/i-0abc", None),
        ("kwok://node-1", None),
    ];
    for (id, expected) in cases {
        assert_eq!(instance_id(id), expected, "{id}");
    }
}

#[test]
fn launch_tags_keep_the_providers_over_the_node_classes() {
    let spec = ECSNodeClassSpec {
        tags: [
            ("team", "a"),
            (NODE_CLAIM_TAG, "spoofed"),
            ("kubernetes.io/cluster/c1", "shared"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect(),
        ..Default::default()
    };
    let tags = launch_tags(&spec, "c1", "default", "general", "general-x7k2p");
    let expected: BTreeMap<String, String> = [
        ("team", "a"),
        ("kubernetes.io/cluster/c1", "owned"),
        ("karpenter.sh/nodepool", "general"),
        ("ecs:ecs-cluster-id", "c1"),
        ("karpenter.k8s.alibabacloud/ecsnodeclass", "default"),
        ("karpenter.sh/nodeclaim", "general-x7k2p"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    assert_eq!(tags, expected);
}

fn group(capacity_type: &str) -> GroupPlan {
    GroupPlan {
        capacity_type: capacity_type.into(),
        configs: vec![
            LaunchConfig {
                instance_type: "ecs.g7.large".into(),
                v_switch_id: "vsw-a".into(),
                zone: "cn-hangzhou-i".into(),
                price: 0.1,
            },
            LaunchConfig {
                instance_type: "ecs.g8i.large".into(),
                v_switch_id: "vsw-b".into(),
                zone: "cn-hangzhou-j".into(),
                price: 0.2,
            },
        ],
        image_id: "aliyun_3_x64_20G_alibase_20240819.vhd".into(),
    }
}

fn params_of(plan: &GroupPlan, spec: &ECSNodeClassSpec) -> BTreeMap<String, String> {
    let tags = BTreeMap::from([("a".to_string(), "1".to_string())]);
    let sgs = ["sg-1".to_string(), "sg-2".to_string()];
    let request = GroupRequest {
        region: "cn-hangzhou",
        spec,
        security_group_ids: &sgs,
        user_data: "IyEvYmluL2Jhc2g=",
        tags: &tags,
        client_token: "uid-1",
    };
    group_params(plan, &request)
        .as_slice()
        .iter()
        .cloned()
        .collect()
}

#[test]
fn a_group_is_instant_one_instance_lowest_price() {
    let p = params_of(&group("spot"), &ECSNodeClassSpec::default());
    let expect = [
        ("RegionId", "cn-hangzhou"),
        ("AutoProvisioningGroupType", "instant"),
        ("TotalTargetCapacity", "1"),
        ("SpotTargetCapacity", "1"),
        ("PayAsYouGoTargetCapacity", "0"),
        ("SpotAllocationStrategy", "lowest-price"),
        ("PayAsYouGoAllocationStrategy", "lowest-price"),
        ("ExcessCapacityTerminationPolicy", "termination"),
        ("ClientToken", "uid-1"),
        ("Tag.1.Key", "karpenter.k8s.alibabacloud/autoprovisiongroup"),
        ("Tag.1.Value", "true"),
        ("LaunchTemplateConfig.1.InstanceType", "ecs.g7.large"),
        ("LaunchTemplateConfig.1.VSwitchId", "vsw-a"),
        ("LaunchTemplateConfig.1.WeightedCapacity", "1"),
        ("LaunchTemplateConfig.2.InstanceType", "ecs.g8i.large"),
        ("LaunchTemplateConfig.2.VSwitchId", "vsw-b"),
        (
            "LaunchConfiguration.ImageId",
            "aliyun_3_x64_20G_alibase_20240819.vhd",
        ),
        ("LaunchConfiguration.UserData", "IyEvYmluL2Jhc2g="),
        ("LaunchConfiguration.SecurityGroupIds.1", "sg-1"),
        ("LaunchConfiguration.SecurityGroupIds.2", "sg-2"),
        ("LaunchConfiguration.Tag.1.Key", "a"),
        ("LaunchConfiguration.Tag.1.Value", "1"),
        ("LaunchConfiguration.SystemDiskSize", "20"),
        ("SystemDiskConfig.1.DiskCategory", "cloud"),
        ("SystemDiskConfig.6.DiskCategory", "cloud_essd_entry"),
    ];
    for (k, v) in expect {
        assert_eq!(p.get(k).map(String::as_str), Some(v), "{k}");
    }
    for absent in [
        "LaunchConfiguration.KeyPairName",
        "LaunchConfiguration.Password",
        "LaunchConfiguration.PasswordInherit",
        "LaunchConfiguration.ResourceGroupId",
        "LaunchConfiguration.DataDisk.1.Size",
        "LaunchConfiguration.SystemDiskPerformanceLevel",
        "LaunchTemplateConfig.3.InstanceType",
    ] {
        assert!(!p.contains_key(absent), "{absent}");
    }
    let p = params_of(&group("on-demand"), &ECSNodeClassSpec::default());
    assert_eq!(p["SpotTargetCapacity"], "0");
    assert_eq!(p["PayAsYouGoTargetCapacity"], "1");
}

#[test]
fn the_node_classs_disks_and_logins_are_sent() {
    let spec = ECSNodeClassSpec {
        system_disk: Some(SystemDisk {
            categories: vec!["cloud_essd".into()],
            volume_size: None,
            size: Some(80),
            performance_level: "PL1".into(),
        }),
        data_disks: vec![
            DataDisk {
                volume_size: "100Gi".into(),
                device: Some("/dev/xvdb".into()),
            },
            DataDisk {
                volume_size: "10Gi".into(),
                device: None,
            },
        ],
        data_disk_categories: vec!["cloud_essd".into(), "cloud_ssd".into()],
        resource_group_id: Some("rg-1".into()),
        key_pair_name: Some("ops".into()),
        password_inherit: true,
        ..Default::default()
    };
    let p = params_of(&group("on-demand"), &spec);
    let expect = [
        ("LaunchConfiguration.SystemDiskSize", "80"),
        ("SystemDiskConfig.1.DiskCategory", "cloud_essd"),
        ("LaunchConfiguration.SystemDiskPerformanceLevel", "PL1"),
        ("LaunchConfiguration.DataDisk.1.Size", "100"),
        ("LaunchConfiguration.DataDisk.1.Device", "/dev/xvdb"),
        ("LaunchConfiguration.DataDisk.2.Size", "20"),
        ("DataDiskConfig.1.DiskCategory", "cloud_essd"),
        ("DataDiskConfig.2.DiskCategory", "cloud_ssd"),
        ("LaunchConfiguration.ResourceGroupId", "rg-1"),
        ("LaunchConfiguration.KeyPairName", "ops"),
        ("LaunchConfiguration.PasswordInherit", "true"),
    ];
    for (k, v) in expect {
        assert_eq!(p.get(k).map(String::as_str), Some(v), "{k}");
    }
    assert!(!p.contains_key("SystemDiskConfig.2.DiskCategory"));
    assert!(!p.contains_key("LaunchConfiguration.DataDisk.2.Device"));
    // Data disks without categories are not made, as upstream.
    let no_categories = ECSNodeClassSpec {
        data_disks: spec.data_disks.clone(),
        ..Default::default()
    };
    let p = params_of(&group("on-demand"), &no_categories);
    assert!(!p.contains_key("LaunchConfiguration.DataDisk.1.Size"));
}

#[test]
fn launch_results_say_what_launched_and_what_ran_out() {
    let answer = |results: serde_json::Value| -> GroupAnswer {
        serde_json::from_value(json!({
            "RequestId": "r-1",
            "AutoProvisioningGroupId": "apg-1",
            "LaunchResults": {"LaunchResult": results},
        }))
        .unwrap()
    };
    let launched = GroupOutcome::of(&answer(json!([
        {"InstanceType": "ecs.g7.large", "ZoneId": "cn-hangzhou-i", "SpotStrategy": "SpotAsPriceGo",
         "ErrorCode": "NoInstanceStock", "ErrorMsg": "no stock"},
        {"InstanceIds": {"InstanceId": ["i-1"]}, "InstanceType": "ecs.g8i.large",
         "ZoneId": "cn-hangzhou-j", "SpotStrategy": "SpotAsPriceGo"},
    ])));
    assert_eq!(
        launched.launched,
        Some(Launched {
            instance_id: "i-1".into(),
            instance_type: "ecs.g8i.large".into(),
            zone: "cn-hangzhou-j".into(),
            capacity_type: "spot".into(),
        })
    );
    assert_eq!(
        launched.out_of_capacity,
        [("ecs.g7.large".to_string(), "cn-hangzhou-i".to_string())]
    );
    assert!(!launched.is_insufficient_capacity());

    let sold_out = GroupOutcome::of(&answer(json!([
        {"InstanceType": "ecs.g7.large", "ZoneId": "cn-hangzhou-i", "SpotStrategy": "NoSpot",
         "ErrorCode": "OperationDenied.NoStock", "ErrorMsg": "sold out"},
    ])));
    assert!(sold_out.launched.is_none());
    assert!(sold_out.is_insufficient_capacity());

    let refused = GroupOutcome::of(&answer(json!([
        {"InstanceType": "ecs.g7.large", "ZoneId": "cn-hangzhou-i",
         "ErrorCode": "InvalidParameter", "ErrorMsg": "bad image"},
    ])));
    assert!(!refused.is_insufficient_capacity());
    assert!(refused.out_of_capacity.is_empty());
    assert_eq!(
        refused.failure,
        Some(("InvalidParameter".into(), "bad image".into()))
    );
    let empty = GroupOutcome::of(&answer(json!([])));
    assert!(empty.launched.is_none() && !empty.is_insufficient_capacity());
}

#[test]
fn an_instance_reads_as_describe_instances_answers() {
    let i: Instance = serde_json::from_value(json!({
        "InstanceId": "i-bp1",
        "RegionId": "cn-hangzhou",
        "ZoneId": "cn-hangzhou-i",
        "InstanceType": "ecs.g7.large",
        "Status": "Running",
        "ImageId": "aliyun_3_x64_20G_alibase_20240819.vhd",
        "SpotStrategy": "NoSpot",
        "CreationTime": "2024-09-01T08:05Z",
        "SecurityGroupIds": {"SecurityGroupId": ["sg-1"]},
        "VpcAttributes": {"VSwitchId": "vsw-a", "VpcId": "vpc-1", "PrivateIpAddress": {"IpAddress": ["10.0.0.5"]}},
        "Tags": {"Tag": [{"TagKey": "karpenter.sh/nodepool", "TagValue": "general"}]},
    }))
    .unwrap();
    assert_eq!(i.capacity_type(), "on-demand");
    assert_eq!(i.vpc_attributes.v_switch_id, "vsw-a");
    assert_eq!(i.tag("karpenter.sh/nodepool"), Some("general"));
    assert_eq!(i.created().unwrap().to_string(), "2024-09-01T08:05:00Z");
    assert!(!i.is_stopping());
    for (status, stopping) in [
        ("Pending", false),
        ("Starting", false),
        ("Stopping", true),
        ("Stopped", true),
    ] {
        let i = Instance {
            status: status.into(),
            ..Default::default()
        };
        assert_eq!(i.is_stopping(), stopping, "{status}");
    }
    for (strategy, ct) in [
        ("NoSpot", "on-demand"),
        ("", "on-demand"),
        ("SpotAsPriceGo", "spot"),
        ("SpotWithPriceLimit", "spot"),
    ] {
        assert_eq!(capacity_type(strategy), ct, "{strategy:?}");
    }
}
