//! `karpenter.k8s.huawei/v1alpha1` CCENodeClass: how the Huawei Cloud provider asks CCE for
//! nodes — which subnets, the operating system, the disks, the container runtime, the login
//! and the kubelet reservations. Field for field as huaweicloud-samples' provider, so existing
//! manifests apply unchanged.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta};
use serde::{Deserialize, Serialize};

pub use crate::GROUP;
/// The only version upstream serves, stored.
pub const VERSION: &str = "v1alpha1";

/// The condition that the subnet selectors found subnets.
pub const CONDITION_SUBNETS_READY: &str = "SubnetsReady";
/// The condition upstream declares for its runtime checks (not part of `Ready`).
pub const CONDITION_VALIDATION_SUCCEEDED: &str = "ValidationSucceeded";
/// The conditions `Ready` summarises, as upstream's status lists them.
pub const READY_CONDITIONS: [&str; 1] = [CONDITION_SUBNETS_READY];

/// The NodeClaim annotation holding the CCE node's id (also its providerID).
pub const ANNOTATION_NODE_ID: &str = "karpenter.k8s.huawei/cce-node-id";
/// The NodeClaim annotation holding the ECS server's id behind the CCE node.
pub const ANNOTATION_SERVER_ID: &str = "karpenter.k8s.huawei/ecs-server-id";

/// A subnet selector: by id, or by name. Huawei Cloud's VPC subnets span the region's zones.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubnetSelectorTerm {
    /// The subnet's id (a UUID: the neutron network id VPC calls `id`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The subnet's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// The operating system of the nodes, as CCE's `CreateNode` names it in `spec.os`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IMSSelector {
    /// The OS family (`Huawei Cloud EulerOS 2.0`, `Ubuntu 22.04`, …).
    #[serde(default)]
    pub ims_family: String,
}

/// One EVS volume.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BlockDevice {
    /// The size in GiB.
    #[serde(default)]
    pub volume_size: i32,
    /// The disk type (`SSD`, `GPSSD`, `ESSD`, `SAS`, `GPSSD2`, `ESSD2`, …).
    #[serde(default)]
    pub volume_type: String,
    /// Provisioned IOPS; GPSSD2 and ESSD2 need it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iops: Option<i32>,
    /// Provisioned throughput (MiB/s); GPSSD2 needs it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throughput: Option<i32>,
}

/// The node's disks.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockDeviceMappings {
    /// The data disk CCE gives the container runtime and the kubelet; 100 GiB of the root
    /// disk's type when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub k8s: Option<BlockDevice>,
    /// The system disk.
    #[serde(default)]
    pub root: BlockDevice,
    /// More data disks, left to the user.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub users: Vec<BlockDevice>,
}

/// The container runtime.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuntimeConfiguration {
    /// `docker` or `containerd`; CCE's default (containerd) when unset.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
}

/// A password login.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserPassword {
    /// Only `root`; `root` when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub username: Option<String>,
    /// The salted, encrypted password (as CCE's API takes it).
    #[serde(default)]
    pub password: String,
}

/// How one logs in to the nodes: exactly one of a password or a key pair.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Login {
    /// A password login.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_password: Option<UserPassword>,
    /// The name of a key pair.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssh_key: Option<String>,
}

/// Kubelet settings CCE's `CreateNode` takes (in `extendParam`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KubeletConfiguration {
    /// The most pods a node runs, 16 to 256.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_pods: Option<i32>,
    /// Resources kept for the OS (`cpu`, `memory`, `ephemeral-storage`, `pid`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub system_reserved: BTreeMap<String, String>,
    /// Resources kept for Kubernetes' daemons, under the same keys.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub kube_reserved: BTreeMap<String, String>,
}

/// How CCE nodes are created.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CCENodeClassSpec {
    /// Which subnets nodes go into; a subnet matching any term is used.
    #[serde(default)]
    pub subnet_selector_terms: Vec<SubnetSelectorTerm>,
    /// Kubelet settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubelet: Option<KubeletConfiguration>,
    /// The ECS server group nodes join.
    #[serde(
        default,
        rename = "ecsGroupId",
        skip_serializing_if = "Option::is_none"
    )]
    pub ecs_group_id: Option<String>,
    /// The operating system.
    #[serde(default)]
    pub ims_selector: IMSSelector,
    /// The disks.
    #[serde(default)]
    pub block_device_mappings: BlockDeviceMappings,
    /// The container runtime.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime_configuration: Option<RuntimeConfiguration>,
    /// How one logs in.
    #[serde(default)]
    pub login: Login,
}

/// A subnet the selectors found.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Subnet {
    /// The subnet's id.
    pub id: String,
}

/// What the selectors resolved to.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CCENodeClassStatus {
    /// Subnets nodes may go into.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subnets: Vec<Subnet>,
    /// `Ready` and the [`READY_CONDITIONS`] it summarises.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// The Huawei Cloud provider's NodeClass.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CCENodeClass {
    /// Standard object metadata.
    pub metadata: ObjectMeta,
    /// How nodes are created.
    pub spec: CCENodeClassSpec,
    /// What the selectors resolved to.
    pub status: Option<CCENodeClassStatus>,
}

karpenter_api::cluster_resource!(
    CCENodeClass, CCENodeClassSpec, CCENodeClassStatus,
    group: "karpenter.k8s.huawei", version: "v1alpha1", plural: "ccenodeclasses"
);
