//! What an ECSNodeClass's selectors resolve to, asked of the in-process Alibaba endpoint
//! (which checks every signature): the parameters upstream sends for each kind of term, how
//! pages are followed, and a whole pass — observe, then status — ready, not found and failed.

mod support;

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use karpenter_alibaba::ecsnodeclass::{
    ECSNodeClass, ECSNodeClassSpec, ImageSelectorTerm, SecurityGroupSelectorTerm,
    VSwitchSelectorTerm,
};
use karpenter_alibaba::imagefamily::{self, ClusterImage, ImageError};
use karpenter_alibaba::nodeclass_status::{self, REQUEUE_NOT_FOUND, REQUEUE_RESOLVED};
use karpenter_alibaba::securitygroup::{self, SecurityGroupError};
use karpenter_alibaba::vswitch::{self, VSwitchError};
use serde_json::{Value, json};
use support::{Auth, Call, Mock, Reply};

const AK: &str = "LTAI5tMockAccessKeyId";
const SECRET: &str = "mock-access-key-secret";

async fn mock() -> Mock {
    let mock = Mock::start().await;
    mock.allow(AK, SECRET);
    mock
}

fn param<'a>(call: &'a Call, name: &str) -> Option<&'a str> {
    call.params.get(name).map(String::as_str)
}

fn tags(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// A vSwitch as `DescribeVSwitches` lists it.
fn v_switch(id: &str, zone: &str, free: i64) -> Value {
    json!({
        "VSwitchId": id,
        "VSwitchName": format!("{id}-name"),
        "ZoneId": zone,
        "VpcId": "vpc-bp1opxu1zkhn00gzv26cm",
        "CidrBlock": "172.16.0.0/24",
        "Status": "Available",
        "AvailableIpAddressCount": free,
        "IsDefault": false,
        "CreationTime": "2024-08-19T07:53:24Z",
        "ResourceGroupId": "rg-acfmxazb4ph6aiy",
        "Tags": {"Tag": [{"Key": "karpenter.sh/discovery", "Value": "c1"}]},
    })
}

fn v_switch_page(items: Vec<Value>, total: usize, page: u32) -> Value {
    json!({
        "VSwitches": {"VSwitch": items},
        "TotalCount": total,
        "PageNumber": page,
        "PageSize": 50,
        "RequestId": "0ED8D006-F706-4D23-88ED-E11ED28DCAC0",
    })
}

/// `DescribeVSwitches`: `vsw-id` by id; by the discovery tag, 52 vSwitches over two pages.
fn serve_v_switches(mock: &Mock) {
    mock.on("DescribeVSwitches", |call| {
        if let Some(id) = param(call, "VSwitchId") {
            return Reply::Ok(v_switch_page(vec![v_switch(id, "cn-hangzhou-k", 10)], 1, 1));
        }
        if param(call, "Tag.1.Key") != Some("karpenter.sh/discovery") {
            return Reply::Ok(v_switch_page(Vec::new(), 0, 1));
        }
        let page: u32 = param(call, "PageNumber").unwrap().parse().unwrap();
        let all: Vec<Value> = (0..52)
            .map(|i| {
                let zone = if i % 2 == 0 {
                    "cn-hangzhou-h"
                } else {
                    "cn-hangzhou-i"
                };
                v_switch(&format!("vsw-{i:02}"), zone, 100 + i)
            })
            .collect();
        let items = all
            .chunks(50)
            .nth(page as usize - 1)
            .unwrap_or(&[])
            .to_vec();
        Reply::Ok(v_switch_page(items, 52, page))
    });
}

#[tokio::test]
async fn vswitches_are_asked_per_term_every_page() {
    let mock = mock().await;
    serve_v_switches(&mock);
    let terms = [
        VSwitchSelectorTerm {
            id: Some("vsw-id".into()),
            ..Default::default()
        },
        VSwitchSelectorTerm {
            tags: tags(&[("karpenter.sh/discovery", "*")]),
            ..Default::default()
        },
    ];
    let found = vswitch::describe(&mock.client(AK, SECRET), &terms)
        .await
        .unwrap();
    assert_eq!(found.len(), 53);
    // Most free addresses first.
    assert_eq!(
        (found[0].id.as_str(), found[0].available_ip_address_count),
        ("vsw-51", 151)
    );
    assert_eq!(found.last().unwrap().id, "vsw-id");
    let status: Vec<_> = found.iter().map(|v| v.to_status()).collect();
    let best = vswitch::first_per_zone(&status);
    assert_eq!(best["cn-hangzhou-h"].id, "vsw-50");
    assert_eq!(best["cn-hangzhou-i"].id, "vsw-51");
    assert_eq!(best["cn-hangzhou-k"].id, "vsw-id");

    let calls = mock.calls_to("DescribeVSwitches");
    assert_eq!(calls.len(), 3, "one page by id, two by tags");
    for call in &calls {
        assert_eq!(call.auth, Auth::Acs3);
        assert_eq!(call.version, "2016-04-28");
        assert_eq!(param(call, "RegionId"), Some("cn-hangzhou"));
        assert_eq!(param(call, "PageSize"), Some("50"));
    }
    assert_eq!(param(&calls[0], "VSwitchId"), Some("vsw-id"));
    assert_eq!(param(&calls[0], "Tag.1.Key"), None);
    for (call, page) in calls[1..].iter().zip(["1", "2"]) {
        assert_eq!(param(call, "VSwitchId"), None);
        assert_eq!(param(call, "Tag.1.Key"), Some("karpenter.sh/discovery"));
        assert_eq!(param(call, "Tag.1.Value"), None, "\"*\" matches any value");
        assert_eq!(param(call, "PageNumber"), Some(page));
    }
}

#[tokio::test]
async fn a_refused_vswitch_listing_names_its_term() {
    let mock = mock().await;
    mock.on("DescribeVSwitches", |_| {
        Reply::error(
            403,
            "Forbidden.RAM",
            "User not authorized to operate on the specified resource.",
        )
    });
    let terms = [VSwitchSelectorTerm {
        tags: tags(&[("team", "a")]),
        ..Default::default()
    }];
    let e = vswitch::describe(&mock.client(AK, SECRET), &terms)
        .await
        .unwrap_err();
    assert!(
        matches!(&e, VSwitchError::Describe { index: 0, source } if source.code() == Some("Forbidden.RAM")),
        "{e}"
    );
    assert!(
        e.to_string()
            .starts_with("describing vSwitches for spec.vSwitchSelectorTerms[0]: Forbidden.RAM"),
        "{e}"
    );
    assert_eq!(
        param(&mock.calls_to("DescribeVSwitches")[0], "Tag.1.Value"),
        Some("a")
    );
}

#[tokio::test]
async fn an_empty_term_asks_nothing() {
    let mock = mock().await;
    let client = mock.client(AK, SECRET);
    let v = vswitch::describe(
        &client,
        &[
            VSwitchSelectorTerm {
                id: Some("vsw-1".into()),
                ..Default::default()
            },
            VSwitchSelectorTerm::default(),
        ],
    )
    .await;
    assert_eq!(v, Err(VSwitchError::EmptyTerm { index: 1 }));
    let g = securitygroup::describe(&client, &[SecurityGroupSelectorTerm::default()]).await;
    assert_eq!(g, Err(SecurityGroupError::EmptyTerm { index: 0 }));
    let i = imagefamily::resolve(&client, &[ImageSelectorTerm::default()], &[]).await;
    assert_eq!(i, Err(ImageError::EmptyTerm { index: 0 }));
    assert!(mock.calls().is_empty());
    // No terms: nothing to ask, nothing found.
    assert_eq!(vswitch::describe(&client, &[]).await, Ok(Vec::new()));
}

fn security_group(id: &str, name: &str) -> Value {
    json!({
        "SecurityGroupId": id,
        "SecurityGroupName": name,
        "Description": "nodes",
        "VpcId": "vpc-bp1opxu1zkhn00gzv26cm",
        "SecurityGroupType": "normal",
        "CreationTime": "2024-08-19T07:53:24Z",
        "EcsCount": 3,
        "AvailableInstanceAmount": 1997,
        "ServiceManaged": false,
        "ResourceGroupId": "",
        "Tags": {"Tag": [{"TagKey": "karpenter.sh/discovery", "TagValue": "c1"}]},
    })
}

/// `DescribeSecurityGroups`: by name one group; by tags two pages by `NextToken`; by id the
/// group of that id.
fn serve_security_groups(mock: &Mock) {
    mock.on("DescribeSecurityGroups", |call| {
        let answer = |groups: Vec<Value>, next: &str| {
            Reply::Ok(json!({
                "RegionId": "cn-hangzhou",
                "RequestId": "473469C7-AA6F-4DC5-B3DB-A3DC0DE3C83E",
                "NextToken": next,
                "SecurityGroups": {"SecurityGroup": groups},
            }))
        };
        if let Some(id) = param(call, "SecurityGroupId") {
            return answer(vec![security_group(id, "by-id")], "");
        }
        if let Some(name) = param(call, "SecurityGroupName") {
            return answer(vec![security_group("sg-named", name)], "");
        }
        match param(call, "NextToken") {
            None => answer(vec![security_group("sg-t2", "t2")], "e71d8a535bd9cc11"),
            Some("e71d8a535bd9cc11") => answer(vec![security_group("sg-t1", "")], ""),
            Some(_) => Reply::error(
                400,
                "InvalidParameter.NextToken",
                "The NextToken is invalid.",
            ),
        }
    });
}

#[tokio::test]
async fn security_groups_are_asked_by_id_name_or_tags_every_page() {
    let mock = mock().await;
    serve_security_groups(&mock);
    let terms = [
        SecurityGroupSelectorTerm {
            name: Some("nodes".into()),
            tags: tags(&[("ignored", "x")]),
            ..Default::default()
        },
        SecurityGroupSelectorTerm {
            tags: tags(&[("karpenter.sh/discovery", "c1"), ("env", "*")]),
            ..Default::default()
        },
        SecurityGroupSelectorTerm {
            id: Some("sg-named".into()),
            name: Some("ignored".into()),
            ..Default::default()
        },
    ];
    let found = securitygroup::describe(&mock.client(AK, SECRET), &terms)
        .await
        .unwrap();
    let got: Vec<(&str, &str)> = found
        .iter()
        .map(|g| (g.id.as_str(), g.name.as_str()))
        .collect();
    // sg-named twice, by name and by id: once, as the later listing said.
    assert_eq!(got, [("sg-named", "by-id"), ("sg-t1", ""), ("sg-t2", "t2")]);

    let calls = mock.calls_to("DescribeSecurityGroups");
    assert_eq!(calls.len(), 4);
    for call in &calls {
        assert_eq!(call.version, "2014-05-26");
        assert_eq!(param(call, "RegionId"), Some("cn-hangzhou"));
        assert_eq!(param(call, "MaxResults"), Some("100"));
        assert_eq!(param(call, "IsQueryEcsCount"), Some("true"));
        assert_eq!(param(call, "PageNumber"), None, "paged by token");
    }
    assert_eq!(param(&calls[0], "SecurityGroupName"), Some("nodes"));
    assert_eq!(param(&calls[0], "Tag.1.Key"), None, "a name wins over tags");
    for call in &calls[1..3] {
        assert_eq!(param(call, "Tag.1.Key"), Some("env"));
        assert_eq!(param(call, "Tag.1.Value"), None);
        assert_eq!(param(call, "Tag.2.Key"), Some("karpenter.sh/discovery"));
        assert_eq!(param(call, "Tag.2.Value"), Some("c1"));
    }
    assert_eq!(param(&calls[1], "NextToken"), None);
    assert_eq!(param(&calls[2], "NextToken"), Some("e71d8a535bd9cc11"));
    assert_eq!(param(&calls[3], "SecurityGroupId"), Some("sg-named"));
    assert_eq!(param(&calls[3], "SecurityGroupName"), None, "an id wins");
}

/// What ACK offers for the cluster's version.
fn cluster_images() -> Vec<ClusterImage> {
    let image = |id: &str, name: &str, arch: &str| ClusterImage {
        id: id.into(),
        name: name.into(),
        platform: "AliyunLinux".into(),
        os_version: "3".into(),
        image_type: "AliyunLinux3".into(),
        os_type: "Linux".into(),
        architecture: arch.into(),
    };
    vec![
        image(
            "aliyun_3_x64_20G_alibase_20240819.vhd",
            "Alibaba Cloud Linux 3.2104 LTS 64 bit",
            "x86_64",
        ),
        image(
            "lifsea_3_x64_10G_containerd_1_6_28_alibase_20240805.vhd",
            "ContainerOS 3.3 64 bit",
            "x86_64",
        ),
    ]
}

/// `DescribeImages` knowing `m-arm` (arm64) and `m-x86` (x86_64).
fn serve_images(mock: &Mock) {
    mock.on("DescribeImages", |call| {
        let known = [("m-arm", "arm64"), ("m-x86", "x86_64")];
        let images: Vec<Value> = known
            .iter()
            .filter(|(id, _)| param(call, "ImageId") == Some(id))
            .map(|(id, arch)| {
                json!({
                    "ImageId": id,
                    "ImageName": format!("custom-{arch}"),
                    "Architecture": arch,
                    "OSType": "linux",
                    "Platform": "Aliyun",
                    "Status": "Available",
                    "Size": 20,
                    "IsPublic": false,
                })
            })
            .collect();
        Reply::Ok(json!({
            "RegionId": "cn-hangzhou",
            "TotalCount": images.len(),
            "PageNumber": 1,
            "PageSize": 10,
            "RequestId": "1CCA1533-3163-4B62-8E2A-F6AE8BFFC1AB",
            "Images": {"Image": images},
        }))
    });
}

#[tokio::test]
async fn images_by_alias_and_by_id_one_per_architecture() {
    let mock = mock().await;
    serve_images(&mock);
    let terms = [
        ImageSelectorTerm {
            id: Some("m-x86".into()),
            ..Default::default()
        },
        ImageSelectorTerm {
            id: Some("m-arm".into()),
            ..Default::default()
        },
        ImageSelectorTerm {
            id: Some("m-gone".into()),
            ..Default::default()
        },
    ];
    let images = imagefamily::resolve(&mock.client(AK, SECRET), &terms, &cluster_images())
        .await
        .unwrap();
    let got: Vec<(&str, Option<&str>)> = images
        .iter()
        .map(|i| (i.id.as_str(), i.name.as_deref()))
        .collect();
    assert_eq!(
        got,
        [
            ("m-x86", Some("custom-x86_64")),
            ("m-arm", Some("custom-arm64"))
        ]
    );
    let calls = mock.calls_to("DescribeImages");
    assert_eq!(calls.len(), 3);
    for (call, id) in calls.iter().zip(["m-x86", "m-arm", "m-gone"]) {
        assert_eq!(call.version, "2014-05-26");
        assert_eq!(param(call, "ImageId"), Some(id));
        assert_eq!(param(call, "ShowExpired"), Some("true"));
        assert_eq!(param(call, "RegionId"), Some("cn-hangzhou"));
    }

    // An alias asks ECS nothing; a later x86_64 image is not kept beside the alias's.
    let terms = [
        ImageSelectorTerm {
            alias: Some("ContainerOS@latest".into()),
            ..Default::default()
        },
        ImageSelectorTerm {
            id: Some("m-x86".into()),
            ..Default::default()
        },
    ];
    let images = imagefamily::resolve(&mock.client(AK, SECRET), &terms, &cluster_images())
        .await
        .unwrap();
    assert_eq!(images.len(), 1);
    assert_eq!(
        images[0].id,
        "lifsea_3_x64_10G_containerd_1_6_28_alibase_20240805.vhd"
    );
    assert_eq!(mock.calls_to("DescribeImages").len(), 4);
}

fn node_class(spec: ECSNodeClassSpec) -> ECSNodeClass {
    ECSNodeClass {
        metadata: ObjectMeta {
            name: Some("default".into()),
            generation: Some(1),
            creation_timestamp: Some(Time(Timestamp::from_second(1_700_000_000).unwrap())),
            ..ObjectMeta::default()
        },
        spec,
        status: None,
    }
}

fn condition(class: &ECSNodeClass, type_: &str) -> (String, String, String) {
    let c = class
        .status
        .as_ref()
        .unwrap()
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .unwrap();
    (c.status.clone(), c.reason.clone(), c.message.clone())
}

fn owned(s: (&str, &str, &str)) -> (String, String, String) {
    (s.0.into(), s.1.into(), s.2.into())
}

#[tokio::test]
async fn a_pass_observes_then_writes_the_status() {
    let mock = mock().await;
    serve_v_switches(&mock);
    serve_security_groups(&mock);
    serve_images(&mock);
    let client = mock.client(AK, SECRET);
    let mut class = node_class(ECSNodeClassSpec {
        v_switch_selector_terms: vec![VSwitchSelectorTerm {
            id: Some("vsw-id".into()),
            ..Default::default()
        }],
        security_group_selector_terms: vec![SecurityGroupSelectorTerm {
            name: Some("nodes".into()),
            ..Default::default()
        }],
        image_selector_terms: vec![ImageSelectorTerm {
            alias: Some("AlibabaCloudLinux3".into()),
            ..Default::default()
        }],
        ..Default::default()
    });
    let now = Timestamp::from_second(1_700_000_100).unwrap();

    let observed = nodeclass_status::observe(&client, &class.spec, &cluster_images()).await;
    class.status = Some(nodeclass_status::status(&class, &observed, now));
    let s = class.status.as_ref().unwrap();
    assert_eq!(s.v_switches[0].id, "vsw-id");
    assert_eq!(s.v_switches[0].zone_id, "cn-hangzhou-k");
    assert_eq!(s.security_groups[0].name.as_deref(), Some("nodes"));
    assert_eq!(s.images[0].id, "aliyun_3_x64_20G_alibase_20240819.vhd");
    assert_eq!(condition(&class, "Ready"), owned(("True", "Ready", "")));
    assert_eq!(
        nodeclass_status::requeue_after(&class.spec, &observed),
        Ok(REQUEUE_RESOLVED)
    );
    // The status as the API server stores it.
    let wire = serde_json::to_value(s).unwrap();
    assert_eq!(wire["vSwitches"][0]["zoneID"], "cn-hangzhou-k");
    assert_eq!(
        wire["images"][0]["requirements"][0],
        json!({"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]})
    );

    // The vSwitch is deleted: not found, looked at again soon.
    mock.on("DescribeVSwitches", |_| {
        Reply::Ok(v_switch_page(Vec::new(), 0, 1))
    });
    let observed = nodeclass_status::observe(&client, &class.spec, &cluster_images()).await;
    class.status = Some(nodeclass_status::status(&class, &observed, now));
    assert_eq!(
        condition(&class, "VSwitchesReady"),
        owned((
            "False",
            "vSwitchesNotFound",
            "VSwitchSelector did not match any VSwitches"
        ))
    );
    assert_eq!(
        condition(&class, "Ready"),
        owned(("False", "UnhealthyDependents", "VSwitchesReady=False"))
    );
    assert!(class.status.as_ref().unwrap().v_switches.is_empty());
    assert_eq!(
        nodeclass_status::requeue_after(&class.spec, &observed),
        Ok(REQUEUE_NOT_FOUND)
    );

    // ECS refuses the security groups: their part stays as it was, the pass fails.
    mock.on("DescribeSecurityGroups", |_| {
        Reply::error(403, "Forbidden.RAM", "User not authorized.")
    });
    let before = class.status.clone();
    let observed = nodeclass_status::observe(&client, &class.spec, &cluster_images()).await;
    class.status = Some(nodeclass_status::status(&class, &observed, now));
    assert_eq!(class.status, before);
    let failure = nodeclass_status::requeue_after(&class.spec, &observed).unwrap_err();
    assert!(
        failure.to_string().contains(
            "describing security groups for spec.securityGroupSelectorTerms[0]: Forbidden.RAM"
        ),
        "{failure}"
    );
    assert!(mock.refused().is_empty());
}
