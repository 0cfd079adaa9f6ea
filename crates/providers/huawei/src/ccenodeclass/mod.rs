//! `karpenter.k8s.huawei/v1alpha1` CCENodeClass: how the Huawei Cloud provider asks CCE for
//! nodes — which subnets, the operating system, the disks, the container runtime, the login
//! and the kubelet reservations. Field for field as huaweicloud-samples' provider, so existing
//! manifests apply unchanged.
//!
//! * [`CRD`]: upstream's schema and CEL rules, plus runtime checks for what upstream refuses
//!   only when it creates a node: reservations CCE cannot take;
//! * [`CCENodeClassSpec::validate_for_create`] and [`KubeletConfiguration::reserved`]: those
//!   refusals and the conversion to CCE's `extendParam` units, shared by the runtime checks and
//!   the create path so the two cannot disagree;
//! * [`CCENodeClass::hash`]: the hash behind static drift.
//!
//! Upstream's Go markers and its generated CRD agree on every field; where they ever differ,
//! the CRD wins (it is what the API server enforces). The CRD declares no defaults: what a
//! field means unset (a `root` user, containerd, a 100 GiB `k8s` disk of the root disk's type)
//! is applied when a node is created, by the accessors here.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use karpenter_api::crd::Crd;
use karpenter_api::validation::{Problem, ProblemKind};

mod hash;
mod reserved;
mod schema;
#[cfg(test)]
mod tests;

pub use hash::{
    CCE_NODE_CLASS_HASH_ANNOTATION, CCE_NODE_CLASS_HASH_VERSION,
    CCE_NODE_CLASS_HASH_VERSION_ANNOTATION,
};
pub use reserved::{Reserved, ReservedError, ReservedReason};

pub use crate::GROUP;
/// The only version upstream serves, stored.
pub const VERSION: &str = "v1alpha1";

/// `ccenodeclasses.karpenter.k8s.huawei`. Upstream declares no short names and no printer
/// columns, so neither does this.
pub const CRD: Crd = Crd::new(
    GROUP,
    VERSION,
    "CCENodeClass",
    "ccenodeclasses",
    schema::schema,
)
.with_runtime_checks(runtime_checks);

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

/// The smallest system disk CCE takes, GiB.
pub const MIN_ROOT_VOLUME_SIZE_GIB: i32 = 40;
/// The smallest `k8s` data disk CCE takes, GiB.
pub const MIN_KUBERNETES_VOLUME_SIZE_GIB: i32 = 20;
/// The smallest user data disk CCE takes, GiB.
pub const MIN_USER_VOLUME_SIZE_GIB: i32 = 10;
/// The size of the `k8s` data disk when the class names none, GiB.
pub const DEFAULT_KUBERNETES_VOLUME_SIZE_GIB: i32 = 100;
/// The size a disk is created with when its size is unset (zero), GiB. The CRD requires a
/// size, so only a class built in code meets this.
pub const DEFAULT_VOLUME_SIZE_GIB: i32 = 40;
/// The type a disk is created with when its type is unset (empty).
pub const DEFAULT_VOLUME_TYPE: &str = "SSD";
/// The fewest pods CCE lets a node be limited to.
pub const MIN_MAX_PODS: i32 = 16;
/// The most pods CCE lets a node run.
pub const MAX_MAX_PODS: i32 = 256;
/// The container runtimes CCE installs, in the CRD's order.
pub const RUNTIMES: [&str; 2] = ["docker", "containerd"];
/// The runtime CCE installs when the class names none.
pub const DEFAULT_RUNTIME: &str = "containerd";
/// The only user a password login may name, and the one it means unset.
pub const DEFAULT_USERNAME: &str = "root";
/// The resources `systemReserved` and `kubeReserved` may name.
pub const RESERVED_RESOURCES: [&str; 4] = ["cpu", "memory", "ephemeral-storage", "pid"];

/// What the schema cannot say but upstream refuses when it creates a node: reservations that
/// are not quantities or that CCE's integer fields cannot hold exactly. Such a class is
/// stored, and then every launch from it fails.
fn runtime_checks(object: &Value, problems: &mut Vec<Problem>) {
    karpenter_api::validation::typed::<CCENodeClass>(object, problems, |class, problems| {
        problems.extend(
            class
                .spec
                .create_problems()
                .into_iter()
                .map(|(path, message)| Problem {
                    path,
                    message,
                    kind: ProblemKind::NotReady,
                }),
        );
    });
}

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

impl BlockDevice {
    /// The disk as CCE creates it: an unset (zero or negative) size is
    /// [`DEFAULT_VOLUME_SIZE_GIB`] and an unset type [`DEFAULT_VOLUME_TYPE`], as upstream fills
    /// them in. The hash reads the same, so spelling a default out drifts nothing.
    pub fn effective(&self) -> BlockDevice {
        BlockDevice {
            volume_size: if self.volume_size > 0 {
                self.volume_size
            } else {
                DEFAULT_VOLUME_SIZE_GIB
            },
            volume_type: if self.volume_type.is_empty() {
                DEFAULT_VOLUME_TYPE.to_string()
            } else {
                self.volume_type.clone()
            },
            iops: self.iops,
            throughput: self.throughput,
        }
    }
}

impl BlockDeviceMappings {
    /// The `k8s` data disk CCE creates (already [`BlockDevice::effective`]): the one named, else
    /// [`DEFAULT_KUBERNETES_VOLUME_SIZE_GIB`] of the root disk's type.
    pub fn k8s_or_default(&self) -> BlockDevice {
        match &self.k8s {
            Some(k8s) => k8s.effective(),
            None => BlockDevice {
                volume_size: DEFAULT_KUBERNETES_VOLUME_SIZE_GIB,
                volume_type: self.root.effective().volume_type,
                iops: None,
                throughput: None,
            },
        }
    }
}

/// How a node is logged in to, as CCE's `CreateNode` takes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoginMethod<'a> {
    /// A key pair, by name.
    SshKey(&'a str),
    /// A password (salted and encrypted) for `username`.
    Password {
        /// The user; [`DEFAULT_USERNAME`] when unset.
        username: &'a str,
        /// The password as CCE takes it.
        password: &'a str,
    },
}

impl Login {
    /// The login a node gets: the key pair if one is named (upstream prefers it; the CRD allows
    /// only one), else the password with its user defaulted; `None` when neither is set.
    pub fn method(&self) -> Option<LoginMethod<'_>> {
        if let Some(key) = self.ssh_key.as_deref().filter(|k| !k.is_empty()) {
            return Some(LoginMethod::SshKey(key));
        }
        self.user_password
            .as_ref()
            .map(|login| LoginMethod::Password {
                username: login
                    .username
                    .as_deref()
                    .filter(|u| !u.is_empty())
                    .unwrap_or(DEFAULT_USERNAME),
                password: &login.password,
            })
    }
}

impl CCENodeClassSpec {
    /// The container runtime named, if any; unset (or empty) leaves it to CCE, whose default is
    /// [`DEFAULT_RUNTIME`].
    pub fn runtime(&self) -> Option<&str> {
        self.runtime_configuration
            .as_ref()
            .and_then(|r| r.type_.as_deref())
            .filter(|t| !t.is_empty())
    }

    /// The ECS server group nodes join, if any (an empty id is none, as upstream sends it).
    pub fn ecs_group_id(&self) -> Option<&str> {
        self.ecs_group_id.as_deref().filter(|id| !id.is_empty())
    }

    /// What upstream checks before it asks CCE for a node (its `ResolveIMSForCreateNode`,
    /// `ValidateForCreateNode` and `ValidateKubeletForCreateNode`): an OS family, exactly one
    /// login, the disks' minimum sizes, `maxPods` in range and reservations CCE can take. Every
    /// problem found, each naming its field (`spec.blockDeviceMappings.root.volumeSize must be
    /// at least 40Gi`), joined by `; `. The CRD refuses all but the reservations already; the
    /// same checks run as the CRD's runtime checks, so `karpenter-rs validate` reports a class
    /// that would fail here.
    pub fn validate_for_create(&self) -> Result<(), String> {
        let problems = self.create_problems();
        if problems.is_empty() {
            return Ok(());
        }
        Err(problems
            .iter()
            .map(|(path, message)| format!("{path} {message}"))
            .collect::<Vec<_>>()
            .join("; "))
    }

    /// [`Self::validate_for_create`]'s problems as (field, message).
    fn create_problems(&self) -> Vec<(String, String)> {
        let mut problems = Vec::new();
        let mut problem = |path: &str, message: String| problems.push((path.to_string(), message));
        if self.ims_selector.ims_family.is_empty() {
            problem("spec.imsSelector.imsFamily", "is required".into());
        }
        let has_key = self.login.ssh_key.as_deref().is_some_and(|k| !k.is_empty());
        match (&self.login.user_password, has_key) {
            (Some(_), true) | (None, false) => problem(
                "spec.login",
                "must set exactly one of userPassword or sshKey".into(),
            ),
            (Some(login), false) if login.password.is_empty() => {
                problem("spec.login.userPassword.password", "is required".into());
            }
            _ => {}
        }
        let disks = &self.block_device_mappings;
        if disks.root.volume_size < MIN_ROOT_VOLUME_SIZE_GIB {
            problem(
                "spec.blockDeviceMappings.root.volumeSize",
                format!("must be at least {MIN_ROOT_VOLUME_SIZE_GIB}Gi"),
            );
        }
        if disks
            .k8s
            .as_ref()
            .is_some_and(|k8s| k8s.volume_size < MIN_KUBERNETES_VOLUME_SIZE_GIB)
        {
            problem(
                "spec.blockDeviceMappings.k8s.volumeSize",
                format!("must be at least {MIN_KUBERNETES_VOLUME_SIZE_GIB}Gi"),
            );
        }
        for (i, user) in disks.users.iter().enumerate() {
            if user.volume_size < MIN_USER_VOLUME_SIZE_GIB {
                problem(
                    &format!("spec.blockDeviceMappings.users[{i}].volumeSize"),
                    format!("must be at least {MIN_USER_VOLUME_SIZE_GIB}Gi"),
                );
            }
        }
        if let Some(kubelet) = &self.kubelet {
            if kubelet
                .max_pods
                .is_some_and(|max| !(MIN_MAX_PODS..=MAX_MAX_PODS).contains(&max))
            {
                problem(
                    "spec.kubelet.maxPods",
                    format!("must be between {MIN_MAX_PODS} and {MAX_MAX_PODS}"),
                );
            }
            for e in kubelet.reserved_errors() {
                problem(&e.field, e.reason.to_string());
            }
        }
        problems
    }
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
