//! `karpenter.sh/v1` NodeClaim: a request for one node, and the parts it shares with NodePool.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Taint;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta, Time};
use serde::{Deserialize, Serialize};

use crate::duration::{Duration, NillableDuration};

/// Resource quantities by resource name (`cpu`, `memory`, `nvidia.com/gpu`, `nodes`, …).
pub type ResourceList = BTreeMap<String, Quantity>;

/// The default `expireAfter`: 30 days.
pub const DEFAULT_EXPIRE_AFTER: NillableDuration = NillableDuration::from_secs(720 * 3600);

pub(crate) fn default_expire_after() -> NillableDuration {
    DEFAULT_EXPIRE_AFTER
}

/// A requirement operator. `Gte` and `Lte` are karpenter's additions to Kubernetes' six.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Operator {
    /// The label has one of the values.
    In,
    /// The label is absent or has none of the values.
    NotIn,
    /// The label is present.
    Exists,
    /// The label is absent.
    DoesNotExist,
    /// The label is an integer greater than the value.
    Gt,
    /// The label is an integer less than the value.
    Lt,
    /// The label is an integer greater than or equal to the value.
    Gte,
    /// The label is an integer less than or equal to the value.
    Lte,
}

impl Operator {
    /// Every operator, in upstream's order.
    pub const ALL: [Operator; 8] = [
        Self::In,
        Self::NotIn,
        Self::Exists,
        Self::DoesNotExist,
        Self::Gt,
        Self::Lt,
        Self::Gte,
        Self::Lte,
    ];

    /// The operator's name as written in YAML.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::In => "In",
            Self::NotIn => "NotIn",
            Self::Exists => "Exists",
            Self::DoesNotExist => "DoesNotExist",
            Self::Gt => "Gt",
            Self::Lt => "Lt",
            Self::Gte => "Gte",
            Self::Lte => "Lte",
        }
    }

    /// Whether the operator compares integers (`Gt`, `Lt`, `Gte`, `Lte`).
    pub fn is_numeric(self) -> bool {
        matches!(self, Self::Gt | Self::Lt | Self::Gte | Self::Lte)
    }
}

/// A node selector requirement with an optional minimum number of distinct values that the
/// launched capacity must keep available (`minValues`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeSelectorRequirementWithMinValues {
    /// The label key.
    pub key: String,
    /// How the key relates to the values.
    pub operator: Operator,
    /// The values; one integer for the numeric operators, none for `Exists`/`DoesNotExist`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
    /// The minimum number of distinct values of this key the instance types must span (1..50).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_values: Option<i32>,
}

/// Points at the provider's NodeClass (for example `karpenter.k8s.aws`/`EC2NodeClass`/`default`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct NodeClassReference {
    /// The NodeClass's API group.
    pub group: String,
    /// The NodeClass's kind.
    pub kind: String,
    /// The NodeClass's name.
    pub name: String,
}

/// Resources a NodeClaim must provide.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ResourceRequirements {
    /// The minimum resources the node must have.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub requests: ResourceList,
}

/// The desired node: every field is immutable once created.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeClaimSpec {
    /// Taints the node is created with.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<Taint>,
    /// Taints that something else removes once the node is ready; pods need not tolerate them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub startup_taints: Vec<Taint>,
    /// What the node's labels must satisfy.
    #[serde(default)]
    pub requirements: Vec<NodeSelectorRequirementWithMinValues>,
    /// The resources the node must provide.
    #[serde(default, skip_serializing_if = "is_default")]
    pub resources: ResourceRequirements,
    /// The provider's NodeClass.
    pub node_class_ref: NodeClassReference,
    /// How long draining may take before pods are deleted regardless; unset waits forever.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub termination_grace_period: Option<Duration>,
    /// How long the node lives before it is replaced; `Never` turns expiry off.
    #[serde(default = "default_expire_after")]
    pub expire_after: NillableDuration,
}

impl Default for NodeClaimSpec {
    fn default() -> Self {
        Self {
            taints: Vec::new(),
            startup_taints: Vec::new(),
            requirements: Vec::new(),
            resources: ResourceRequirements::default(),
            node_class_ref: NodeClassReference::default(),
            termination_grace_period: None,
            expire_after: DEFAULT_EXPIRE_AFTER,
        }
    }
}

fn is_default<T: Default + PartialEq>(value: &T) -> bool {
    *value == T::default()
}

/// What is known about the launched node.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeClaimStatus {
    /// The name of the Node that registered for this claim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
    /// The cloud provider's ID of the instance.
    #[serde(
        rename = "providerID",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub provider_id: Option<String>,
    /// The image the instance booted from.
    #[serde(rename = "imageID", default, skip_serializing_if = "Option::is_none")]
    pub image_id: Option<String>,
    /// The node's capacity.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub capacity: ResourceList,
    /// The node's allocatable resources.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub allocatable: ResourceList,
    /// Lifecycle conditions (see [`condition`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// When a pod was last scheduled to or removed from the node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_pod_event_time: Option<Time>,
}

/// A request for one node, created by karpenter from a NodePool.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodeClaim {
    /// Standard object metadata.
    pub metadata: ObjectMeta,
    /// The desired node.
    pub spec: NodeClaimSpec,
    /// What is known about it.
    pub status: Option<NodeClaimStatus>,
}

crate::cluster_resource!(
    NodeClaim, NodeClaimSpec, NodeClaimStatus,
    group: "karpenter.sh", version: "v1", plural: "nodeclaims"
);

/// NodeClaim condition types.
pub mod condition {
    /// The instance was created.
    pub const LAUNCHED: &str = "Launched";
    /// The Node joined the cluster.
    pub const REGISTERED: &str = "Registered";
    /// The Node is ready, startup taints are gone and its resources are reported.
    pub const INITIALIZED: &str = "Initialized";
    /// The claim can be consolidated (its `consolidateAfter` has passed).
    pub const CONSOLIDATABLE: &str = "Consolidatable";
    /// The claim no longer matches its NodePool or NodeClass.
    pub const DRIFTED: &str = "Drifted";
    /// The node has been drained.
    pub const DRAINED: &str = "Drained";
    /// The node's volumes have been detached.
    pub const VOLUMES_DETACHED: &str = "VolumesDetached";
    /// The instance is being terminated.
    pub const INSTANCE_TERMINATING: &str = "InstanceTerminating";
    /// The node's shape matches what was requested.
    pub const CONSISTENT_STATE_FOUND: &str = "ConsistentStateFound";
    /// A disruption command is in flight; the reason says which.
    pub const DISRUPTION_REASON: &str = "DisruptionReason";
    /// Launched, Registered and Initialized all hold.
    pub const READY: &str = "Ready";
}
