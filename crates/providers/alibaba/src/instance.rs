//! ECS instances as the provider sees them: the providerID ACK registers nodes with
//! (`<region>.<instance-id>`), the tags every launch carries, the `CreateAutoProvisioningGroup`
//! request a [`GroupPlan`] becomes, what its launch results say, and an instance read from
//! `DescribeInstances`. Pure; the calls are in `ecs`.

use std::collections::BTreeMap;

use karpenter_api::labels::{CAPACITY_TYPE_ON_DEMAND, CAPACITY_TYPE_SPOT, NODE_POOL_LABEL};
use serde::Deserialize;

#[cfg(feature = "cloud")]
use crate::client::Params;
use crate::ecsnodeclass::ECSNodeClassSpec;
use crate::errors;
#[cfg(feature = "cloud")]
use crate::launch::GroupPlan;

/// The tag that scopes instances to a cluster (`kubernetes.io/cluster/<cluster-id>=owned`):
/// List and garbage collection see only these.
pub fn cluster_tag(cluster_id: &str) -> String {
    format!("kubernetes.io/cluster/{cluster_id}")
}

/// ECS's own cluster tag upstream sets (`ecs:ecs-cluster-id`).
pub const ECS_CLUSTER_ID_TAG: &str = "ecs:ecs-cluster-id";
/// The NodeClaim an instance was launched for: a retried Create finds its instance by it.
pub const NODE_CLAIM_TAG: &str = "karpenter.sh/nodeclaim";
/// The ECSNodeClass an instance was launched from.
pub const NODE_CLASS_TAG: &str = "karpenter.k8s.alibabacloud/ecsnodeclass";
/// The tag on the auto-provisioning group itself, which Alibaba watches to support Karpenter's
/// groups (upstream sets it on every group).
pub const GROUP_TAG: &str = "karpenter.k8s.alibabacloud/autoprovisiongroup";

/// `DescribeInstances` statuses that matter here.
pub mod status {
    /// Being created.
    pub const PENDING: &str = "Pending";
    /// Shutting down.
    pub const STOPPING: &str = "Stopping";
    /// Down.
    pub const STOPPED: &str = "Stopped";
}

/// The providerID of an instance: `<region>.<instance-id>`, as ACK's cloud controller
/// registers the node.
pub fn provider_id(region: &str, instance_id: &str) -> String {
    format!("{region}.{instance_id}")
}

/// The instance id in a providerID: what follows the last `.` (upstream's `(.*)\.(.*)`).
pub fn instance_id(provider_id: &str) -> Option<&str> {
    let (region, id) = provider_id.rsplit_once('.')?;
    (!region.is_empty() && id.starts_with("i-") && id.len() > 2).then_some(id)
}

/// The tags of a launch: the NodeClass's, under the ones the provider relies on (upstream's
/// `getTags`, plus the NodeClaim's name so a retried Create finds its instance).
pub fn launch_tags(
    spec: &ECSNodeClassSpec,
    cluster_id: &str,
    node_class: &str,
    node_pool: &str,
    node_claim: &str,
) -> BTreeMap<String, String> {
    let mut tags = spec.tags.clone();
    tags.extend([
        (cluster_tag(cluster_id), "owned".to_string()),
        (NODE_POOL_LABEL.to_string(), node_pool.to_string()),
        (ECS_CLUSTER_ID_TAG.to_string(), cluster_id.to_string()),
        (NODE_CLASS_TAG.to_string(), node_class.to_string()),
        (NODE_CLAIM_TAG.to_string(), node_claim.to_string()),
    ]);
    tags
}

/// The system disk a launch gets when the NodeClass sets none, or sets no size (upstream's
/// `DefaultSystemDisk`: 20 GiB).
pub const DEFAULT_SYSTEM_DISK_GIB: i32 = 20;
/// The smallest data disk ECS makes (upstream's `defaultDataDiskSize`).
pub const MIN_DATA_DISK_GIB: i32 = 20;
/// Upstream's order of system disk categories when the NodeClass sets no `systemDisk`.
pub const DEFAULT_SYSTEM_DISK_CATEGORIES: [&str; 6] = [
    "cloud",
    "cloud_ssd",
    "cloud_efficiency",
    "cloud_essd",
    "cloud_auto",
    "cloud_essd_entry",
];

#[cfg(feature = "cloud")]
/// What goes into a launch besides the plan.
#[derive(Clone, Debug)]
pub struct GroupRequest<'a> {
    /// The region.
    pub region: &'a str,
    /// The NodeClass.
    pub spec: &'a ECSNodeClassSpec,
    /// `status.securityGroups`' ids.
    pub security_group_ids: &'a [String],
    /// The user data, base64.
    pub user_data: &'a str,
    /// The instance tags.
    pub tags: &'a BTreeMap<String, String>,
    /// Makes the call idempotent: Alibaba answers a repeated token with the first call's
    /// group instead of launching again (at most 64 ASCII characters).
    pub client_token: &'a str,
}

#[cfg(feature = "cloud")]
/// The `CreateAutoProvisioningGroup` parameters of a launch: an `instant` group of one
/// instance, spot or pay-as-you-go, lowest price first across the plan's type × vSwitch
/// configs.
pub fn group_params(plan: &GroupPlan, request: &GroupRequest<'_>) -> Params {
    let spec = request.spec;
    let (spot, pay_as_you_go) = if plan.spot() { ("1", "0") } else { ("0", "1") };
    let mut p = Params::new()
        .with("RegionId", request.region)
        .with("AutoProvisioningGroupType", "instant")
        .with("TotalTargetCapacity", "1")
        .with("SpotTargetCapacity", spot)
        .with("PayAsYouGoTargetCapacity", pay_as_you_go)
        .with("SpotAllocationStrategy", "lowest-price")
        .with("PayAsYouGoAllocationStrategy", "lowest-price")
        .with("ExcessCapacityTerminationPolicy", "termination")
        .with("ClientToken", request.client_token)
        .with("Tag.1.Key", GROUP_TAG)
        .with("Tag.1.Value", "true")
        .with("LaunchConfiguration.ImageId", plan.image_id.as_str())
        .with("LaunchConfiguration.UserData", request.user_data);
    for (i, c) in plan.configs.iter().enumerate() {
        let n = i + 1;
        p.set(
            format!("LaunchTemplateConfig.{n}.InstanceType"),
            c.instance_type.as_str(),
        );
        p.set(
            format!("LaunchTemplateConfig.{n}.VSwitchId"),
            c.v_switch_id.as_str(),
        );
        p.set(format!("LaunchTemplateConfig.{n}.WeightedCapacity"), "1");
    }
    for (i, id) in request.security_group_ids.iter().enumerate() {
        p.set(
            format!("LaunchConfiguration.SecurityGroupIds.{}", i + 1),
            id.as_str(),
        );
    }
    for (i, (k, v)) in request.tags.iter().enumerate() {
        p.set(format!("LaunchConfiguration.Tag.{}.Key", i + 1), k.as_str());
        p.set(
            format!("LaunchConfiguration.Tag.{}.Value", i + 1),
            v.as_str(),
        );
    }
    // The NodeClass's size when it sets one (`volumeSize`, else `size`), else 20 GiB; upstream
    // fills in 20Gi before reading either, so its `size` never takes effect.
    let disk = spec.system_disk.as_ref();
    let gib = disk
        .map(|d| d.gib())
        .filter(|g| *g > 0)
        .unwrap_or(DEFAULT_SYSTEM_DISK_GIB);
    p.set("LaunchConfiguration.SystemDiskSize", gib.to_string());
    let categories: Vec<&str> = match disk {
        Some(d) => d.categories.iter().map(String::as_str).collect(),
        None => DEFAULT_SYSTEM_DISK_CATEGORIES.to_vec(),
    };
    for (i, category) in categories.iter().enumerate() {
        p.set(
            format!("SystemDiskConfig.{}.DiskCategory", i + 1),
            *category,
        );
    }
    // ECS reads it only for ESSDs; upstream accepts the field but never sends it.
    if let Some(d) = disk {
        p.set(
            "LaunchConfiguration.SystemDiskPerformanceLevel",
            d.performance_level.as_str(),
        );
    }
    // As upstream: data disks need categories to be made in.
    if !spec.data_disks.is_empty() && !spec.data_disk_categories.is_empty() {
        for (i, d) in spec.data_disks.iter().enumerate() {
            let n = i + 1;
            p.set(
                format!("LaunchConfiguration.DataDisk.{n}.Size"),
                d.gib().max(MIN_DATA_DISK_GIB).to_string(),
            );
            if let Some(device) = &d.device {
                p.set(
                    format!("LaunchConfiguration.DataDisk.{n}.Device"),
                    device.as_str(),
                );
            }
        }
        for (i, category) in spec.data_disk_categories.iter().enumerate() {
            p.set(
                format!("DataDiskConfig.{}.DiskCategory", i + 1),
                category.as_str(),
            );
        }
    }
    if let Some(rg) = spec.resource_group_id.as_deref().filter(|s| !s.is_empty()) {
        p.set("LaunchConfiguration.ResourceGroupId", rg);
    }
    if let Some(key) = spec.key_pair_name.as_deref().filter(|s| !s.is_empty()) {
        p.set("LaunchConfiguration.KeyPairName", key);
    }
    if let Some(password) = spec.password.as_deref().filter(|s| !s.is_empty()) {
        p.set("LaunchConfiguration.Password", password);
    }
    if spec.password_inherit {
        p.set("LaunchConfiguration.PasswordInherit", "true");
    }
    p
}

/// One entry of `LaunchResults.LaunchResult`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub struct LaunchResult {
    /// `InstanceIds.InstanceId`.
    pub instance_ids: InstanceIds,
    /// The type launched or refused.
    pub instance_type: String,
    /// The zone.
    pub zone_id: String,
    /// `NoSpot`, `SpotAsPriceGo`, `SpotWithPriceLimit`.
    pub spot_strategy: String,
    /// Set when this config failed.
    pub error_code: String,
    /// What the failure said.
    pub error_msg: String,
}

/// `InstanceIds`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub struct InstanceIds {
    /// The ids.
    pub instance_id: Vec<String>,
}

/// `CreateAutoProvisioningGroup`'s answer.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub struct GroupAnswer {
    /// `apg-…`.
    pub auto_provisioning_group_id: String,
    /// `LaunchResults`.
    pub launch_results: LaunchResults,
    /// For support cases.
    pub request_id: String,
}

/// `LaunchResults`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub struct LaunchResults {
    /// One per config tried.
    pub launch_result: Vec<LaunchResult>,
}

/// What a group's answer means.
#[derive(Clone, Debug, PartialEq)]
pub struct GroupOutcome {
    /// The instance launched, with its type and zone, if any.
    pub launched: Option<Launched>,
    /// `(type, zone)` refused for lack of stock or quota: each to be marked unavailable.
    pub out_of_capacity: Vec<(String, String)>,
    /// The first failure's code and message, for the error when nothing launched.
    pub failure: Option<(String, String)>,
}

/// An instance a group launched.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Launched {
    /// `i-…`.
    pub instance_id: String,
    /// Its type.
    pub instance_type: String,
    /// Its zone.
    pub zone: String,
    /// `spot` or `on-demand`.
    pub capacity_type: String,
}

impl GroupOutcome {
    /// Reads a group's launch results: the first instance launched, and every config refused
    /// for capacity (upstream marks every such result, launched or not).
    pub fn of(answer: &GroupAnswer) -> Self {
        let results = &answer.launch_results.launch_result;
        let launched = results.iter().find_map(|r| {
            Some(Launched {
                instance_id: r.instance_ids.instance_id.first()?.clone(),
                instance_type: r.instance_type.clone(),
                zone: r.zone_id.clone(),
                capacity_type: capacity_type(&r.spot_strategy).to_string(),
            })
        });
        let out_of_capacity = results
            .iter()
            .filter(|r| errors::is_insufficient_capacity(&r.error_code))
            .filter(|r| !r.instance_type.is_empty() && !r.zone_id.is_empty())
            .map(|r| (r.instance_type.clone(), r.zone_id.clone()))
            .collect();
        let failure = results
            .iter()
            .find(|r| !r.error_code.is_empty())
            .map(|r| (r.error_code.clone(), r.error_msg.clone()));
        Self {
            launched,
            out_of_capacity,
            failure,
        }
    }

    /// Whether nothing launched because every failure was a capacity one (the next attempt,
    /// with those offerings marked, may pick others).
    pub fn is_insufficient_capacity(&self) -> bool {
        self.launched.is_none()
            && self
                .failure
                .as_ref()
                .is_some_and(|(code, _)| errors::is_insufficient_capacity(code))
    }
}

/// `spot` unless the strategy is `NoSpot` (upstream's `GetCapacityTypes`).
pub fn capacity_type(spot_strategy: &str) -> &'static str {
    if spot_strategy == "NoSpot" || spot_strategy.is_empty() {
        CAPACITY_TYPE_ON_DEMAND
    } else {
        CAPACITY_TYPE_SPOT
    }
}

/// An instance from `DescribeInstances` (`Instances.Instance[]`).
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub struct Instance {
    /// `i-…`.
    pub instance_id: String,
    /// `cn-hangzhou`.
    pub region_id: String,
    /// `cn-hangzhou-i`.
    pub zone_id: String,
    /// `ecs.g7.large`.
    pub instance_type: String,
    /// `Pending`, `Starting`, `Running`, `Stopping`, `Stopped`.
    pub status: String,
    /// The image it booted.
    pub image_id: String,
    /// `NoSpot`, `SpotAsPriceGo`, …
    pub spot_strategy: String,
    /// `2024-09-01T08:00Z`.
    pub creation_time: String,
    /// `SecurityGroupIds.SecurityGroupId`.
    pub security_group_ids: SecurityGroupIds,
    /// `VpcAttributes.VSwitchId`.
    pub vpc_attributes: VpcAttributes,
    /// `Tags.Tag[]`.
    pub tags: Tags,
}

/// `SecurityGroupIds`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub struct SecurityGroupIds {
    /// The ids.
    pub security_group_id: Vec<String>,
}

/// `VpcAttributes`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub struct VpcAttributes {
    /// The instance's vSwitch.
    #[serde(rename = "VSwitchId")]
    pub v_switch_id: String,
}

/// `Tags`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub struct Tags {
    /// The tags.
    pub tag: Vec<Tag>,
}

/// One tag, as `DescribeInstances` spells it.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub struct Tag {
    /// The key.
    pub tag_key: String,
    /// The value.
    pub tag_value: String,
}

impl Instance {
    /// A tag's value.
    pub fn tag(&self, key: &str) -> Option<&str> {
        self.tags
            .tag
            .iter()
            .find(|t| t.tag_key == key)
            .map(|t| t.tag_value.as_str())
    }

    /// `spot` or `on-demand`.
    pub fn capacity_type(&self) -> &'static str {
        capacity_type(&self.spot_strategy)
    }

    /// Whether it is shutting down or down: upstream reports such an instance's NodeClaim as
    /// being deleted.
    pub fn is_stopping(&self) -> bool {
        self.status == status::STOPPING || self.status == status::STOPPED
    }

    /// When it was created, from ECS's minute-precision UTC time (`2024-09-01T08:00Z`).
    pub fn created(&self) -> Option<k8s_openapi::jiff::Timestamp> {
        let t = self.creation_time.trim();
        if let Some(minutes) = t.strip_suffix('Z').filter(|s| s.len() == 16) {
            return format!("{minutes}:00Z").parse().ok();
        }
        t.parse().ok()
    }
}

#[cfg(test)]
#[path = "instance_tests.rs"]
mod tests;
