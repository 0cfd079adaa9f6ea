//! A small stateful ECS, VPC and ACK on top of the [`Mock`]: the recorded instance types and
//! zonal stock, two vSwitches and a security group, ACK's attach script, CNI and images, and
//! instances that `CreateAutoProvisioningGroup` makes (lowest price first, honouring the client
//! token), `DescribeInstances` finds by tag or id, and `DeleteInstance` releases.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use karpenter_alibaba::provider::AlibabaOptions;
use serde_json::{Value, json};

use super::{Mock, Reply};

pub const AK: &str = "LTAI5tMockAccessKeyId";
pub const SECRET: &str = "mock-access-key-secret";
pub const CLUSTER: &str = "c0123456789abcdef";
pub const REGION: &str = "cn-hangzhou";

/// An instance the fake launched.
#[derive(Clone, Debug)]
pub struct FakeInstance {
    pub id: String,
    pub instance_type: String,
    pub zone: String,
    pub v_switch: String,
    pub spot: bool,
    pub image: String,
    pub user_data: String,
    pub security_groups: Vec<String>,
    pub tags: BTreeMap<String, String>,
}

/// What the fake holds.
#[derive(Debug, Default)]
pub struct State {
    pub instances: Vec<FakeInstance>,
    /// Client token → the group's answer.
    pub groups: BTreeMap<String, Value>,
    /// Types ECS has no stock of in any zone.
    pub sold_out: BTreeSet<String>,
    /// Instances released.
    pub deleted: Vec<String>,
    next: u32,
}

pub type Shared = Arc<Mutex<State>>;

pub fn fixture(name: &str) -> Value {
    let path = format!("{}/tests/testdata/{name}", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

/// The provider's options for the fake (no price server: embedded prices).
pub fn options() -> AlibabaOptions {
    AlibabaOptions {
        cluster_id: CLUSTER.into(),
        region: REGION.into(),
        vm_memory_overhead_percent: 0.065,
        price_server_url: None,
        interruption: true,
    }
}

/// The zones the recorded stock has on demand, two of which get a vSwitch.
pub const ZONES: [(&str, &str); 2] = [("vsw-i", "cn-hangzhou-i"), ("vsw-j", "cn-hangzhou-j")];

fn params_list(call: &super::Call, prefix: &str, suffix: &str) -> Vec<String> {
    (1..)
        .map_while(|n| call.params.get(&format!("{prefix}.{n}{suffix}")).cloned())
        .collect()
}

fn instance_json(i: &FakeInstance) -> Value {
    json!({
        "InstanceId": i.id, "RegionId": REGION, "ZoneId": i.zone, "InstanceType": i.instance_type,
        "Status": "Running", "ImageId": i.image,
        "SpotStrategy": if i.spot { "SpotAsPriceGo" } else { "NoSpot" },
        "CreationTime": "2026-11-24T08:00Z",
        "SecurityGroupIds": {"SecurityGroupId": i.security_groups},
        "VpcAttributes": {"VSwitchId": i.v_switch, "VpcId": "vpc-1"},
        "Tags": {"Tag": i.tags.iter().map(|(k, v)| json!({"TagKey": k, "TagValue": v})).collect::<Vec<_>>()},
    })
}

fn request_id() -> String {
    "5A9F3C9E-0000-4000-8000-000000000000".into()
}

/// Installs the fake's answers on `mock` (which accepts [`AK`]).
pub fn install(mock: &Mock) -> Shared {
    mock.allow(AK, SECRET);
    let state: Shared = Arc::default();
    let (types_1, types_2) = (
        fixture("describe-instance-types-1.json"),
        fixture("describe-instance-types-2.json"),
    );
    mock.on("DescribeInstanceTypes", move |call| {
        match call.params.get("NextToken").map(String::as_str) {
            None => Reply::Ok(types_1.clone()),
            Some(_) => Reply::Ok(types_2.clone()),
        }
    });
    let (on_demand, spot) = (
        fixture("describe-available-resource-postpaid.json"),
        fixture("describe-available-resource-spot.json"),
    );
    mock.on("DescribeAvailableResource", move |call| {
        match call.params.get("SpotStrategy").map(String::as_str) {
            Some("SpotAsPriceGo") => Reply::Ok(spot.clone()),
            _ => Reply::Ok(on_demand.clone()),
        }
    });
    mock.reply(
        "DescribeSpotPriceHistory",
        json!({"RequestId": request_id(), "Currency": "CNY", "SpotPrices": {"SpotPriceType": []}}),
    );
    mock.reply(
        "DescribeVSwitches",
        json!({
            "RequestId": request_id(), "TotalCount": 2, "PageNumber": 1, "PageSize": 50,
            "VSwitches": {"VSwitch": ZONES.iter().map(|(id, zone)| json!({
                "VSwitchId": id, "ZoneId": zone, "AvailableIpAddressCount": 200, "VpcId": "vpc-1",
                "Tags": {"Tag": [{"Key": "karpenter.sh/discovery", "Value": CLUSTER}]},
            })).collect::<Vec<_>>()},
        }),
    );
    mock.reply(
        "DescribeSecurityGroups",
        json!({
            "RequestId": request_id(), "TotalCount": 1,
            "SecurityGroups": {"SecurityGroup": [{"SecurityGroupId": "sg-1", "SecurityGroupName": "k8s-nodes",
                "Tags": {"Tag": [{"TagKey": "karpenter.sh/discovery", "TagValue": CLUSTER}]}}]},
        }),
    );
    mock.reply(
        "DescribeClusterDetail",
        json!({
            "cluster_id": CLUSTER, "cluster_type": "ManagedKubernetes", "region_id": REGION,
            "state": "running", "current_version": "1.31.1-aliyun.1",
            "meta_data": json!({"Capabilities": {"Network": "Flannel"}}).to_string(),
        }),
    );
    mock.on("DescribeClusterAttachScripts", |_| {
        Reply::Text("curl -fsSL https://aliacs-k8s-cn-hangzhou.oss-cn-hangzhou.aliyuncs.com/attach_node.sh | bash -s -- --openapi-token t0k3n --runtime containerd --runtime-version 1.6.28".into())
    });
    mock.reply(
        "DescribeClusterNodePools",
        json!({"nodepools": [], "page_info": {"page_number": 1, "page_size": 10, "total_count": 0}}),
    );
    mock.reply(
        "DescribeKubernetesVersionMetadata",
        json!([{
            "version": "1.31.1-aliyun.1", "runtimes": [{"name": "containerd", "version": "1.6.28"}],
            "images": [
                {"image_id": "aliyun_3_x64_20G_alibase_20240819.vhd", "image_name": "Alibaba Cloud Linux 3.2104", "platform": "AliyunLinux", "os_version": "3.2104", "image_type": "AliyunLinux3", "os_type": "Linux", "architecture": "x86_64"},
                {"image_id": "aliyun_3_arm64_20G_alibase_20240819.vhd", "image_name": "Alibaba Cloud Linux 3.2104 ARM", "platform": "AliyunLinux", "os_version": "3.2104", "image_type": "AliyunLinux3Arm64", "os_type": "Linux", "architecture": "arm64"},
            ],
        }]),
    );
    let s = state.clone();
    mock.on("CreateAutoProvisioningGroup", move |call| {
        let mut state = s.lock().unwrap();
        let token = call.params.get("ClientToken").cloned().unwrap_or_default();
        if let Some(answer) = state.groups.get(&token) {
            return Reply::Ok(answer.clone());
        }
        let types = params_list(call, "LaunchTemplateConfig", ".InstanceType");
        let v_switches = params_list(call, "LaunchTemplateConfig", ".VSwitchId");
        let spot = call.params.get("SpotTargetCapacity").map(String::as_str) == Some("1");
        let strategy = if spot { "SpotAsPriceGo" } else { "NoSpot" };
        let zone_of = |vsw: &str| {
            ZONES
                .iter()
                .find(|(id, _)| *id == vsw)
                .map(|(_, z)| z.to_string())
                .unwrap_or_default()
        };
        // The configs come cheapest first: the first with stock launches.
        let mut results = Vec::new();
        let mut launched = None;
        for (t, vsw) in types.iter().zip(&v_switches) {
            if state.sold_out.contains(t) {
                results.push(json!({"InstanceType": t, "ZoneId": zone_of(vsw), "SpotStrategy": strategy,
                    "ErrorCode": "NoInstanceStock", "ErrorMsg": "The resource is out of stock in the specified zone."}));
                continue;
            }
            launched = Some((t.clone(), vsw.clone()));
            break;
        }
        if let Some((t, vsw)) = launched {
            state.next += 1;
            let id = format!("i-bp1fake{:04}", state.next);
            let tags: BTreeMap<String, String> = params_list(call, "LaunchConfiguration.Tag", ".Key")
                .into_iter()
                .zip(params_list(call, "LaunchConfiguration.Tag", ".Value"))
                .collect();
            state.instances.push(FakeInstance {
                id: id.clone(),
                instance_type: t.clone(),
                zone: zone_of(&vsw),
                v_switch: vsw,
                spot,
                image: call.params["LaunchConfiguration.ImageId"].clone(),
                user_data: call.params["LaunchConfiguration.UserData"].clone(),
                security_groups: params_list(call, "LaunchConfiguration.SecurityGroupIds", ""),
                tags,
            });
            results.push(json!({"InstanceIds": {"InstanceId": [id]}, "InstanceType": t,
                "ZoneId": state.instances.last().unwrap().zone, "SpotStrategy": strategy}));
        }
        let answer = json!({
            "RequestId": request_id(),
            "AutoProvisioningGroupId": format!("apg-{token}"),
            "LaunchResults": {"LaunchResult": results},
        });
        state.groups.insert(token, answer.clone());
        Reply::Ok(answer)
    });
    let s = state.clone();
    mock.on("DescribeInstances", move |call| {
        let state = s.lock().unwrap();
        let keys = params_list(call, "Tag", ".Key");
        let values = params_list(call, "Tag", ".Value");
        let ids: Option<Vec<String>> = call
            .params
            .get("InstanceIds")
            .map(|ids| serde_json::from_str(ids).unwrap());
        let found: Vec<Value> = state
            .instances
            .iter()
            .filter(|i| {
                keys.iter()
                    .zip(&values)
                    .all(|(k, v)| i.tags.get(k) == Some(v))
            })
            .filter(|i| ids.as_ref().is_none_or(|ids| ids.contains(&i.id)))
            .map(instance_json)
            .collect();
        Reply::Ok(json!({"RequestId": request_id(), "Instances": {"Instance": found}}))
    });
    let s = state.clone();
    mock.on("DeleteInstance", move |call| {
        let mut state = s.lock().unwrap();
        let id = call.params["InstanceId"].clone();
        let before = state.instances.len();
        state.instances.retain(|i| i.id != id);
        if state.instances.len() == before {
            return Reply::error(
                404,
                "InvalidInstanceId.NotFound",
                "The specified InstanceId does not exist.",
            );
        }
        state.deleted.push(id);
        Reply::Ok(json!({"RequestId": request_id()}))
    });
    state
}

/// An ECSNodeClass selecting the fake's vSwitches and security group by tag, booting ACK's
/// Alibaba Cloud Linux 3.
pub fn node_class() -> Value {
    json!({
        "apiVersion": "karpenter.k8s.alibabacloud/v1alpha1", "kind": "ECSNodeClass",
        "metadata": {"name": "default"},
        "spec": {
            "vSwitchSelectorTerms": [{"tags": {"karpenter.sh/discovery": CLUSTER}}],
            "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": CLUSTER}}],
            "imageSelectorTerms": [{"alias": "AlibabaCloudLinux3"}],
            "tags": {"team": "platform"},
        },
    })
}
