//! `autoscaling.x-k8s.io/v1beta1` CapacityBuffer: spare capacity kept ready by placeholder
//! ("virtual") pods, behind the `CapacityBuffer` feature gate.
//!
//! The API belongs to Kubernetes SIG Autoscaling (Cluster Autoscaler defines it); upstream
//! Karpenter ships the same CRD and acts on it. What the fields mean is decided in
//! `karpenter_core::provisioning::capacity_buffer`; the schema and its CEL rules are in
//! [`crate::crd::CAPACITY_BUFFER`].

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta};
use serde::{Deserialize, Serialize};

use crate::nodeclaim::ResourceList;

/// The CapacityBuffer's API group.
pub const GROUP: &str = "autoscaling.x-k8s.io";
/// The CapacityBuffer's API version.
pub const API_VERSION: &str = "autoscaling.x-k8s.io/v1beta1";

/// The only provisioning strategy, and the default: placeholder pods make the autoscaler
/// launch capacity ahead of demand.
pub const ACTIVE_PROVISIONING_STRATEGY: &str = "buffer.x-k8s.io/active-capacity";

/// Annotation (`"true"`) that marks a pod as a buffer's virtual pod; such pods never exist in
/// the API server.
pub const FAKE_POD_ANNOTATION: &str = "karpenter.sh/capacity-buffer-fake-pod";
/// The value of [`FAKE_POD_ANNOTATION`].
pub const FAKE_POD_ANNOTATION_VALUE: &str = "true";
/// Annotation naming the CapacityBuffer a virtual pod belongs to.
pub const BUFFER_NAME_ANNOTATION: &str = "karpenter.sh/capacity-buffer-name";
/// Annotation naming the namespace of the CapacityBuffer a virtual pod belongs to.
pub const BUFFER_NAMESPACE_ANNOTATION: &str = "karpenter.sh/capacity-buffer-namespace";
/// The priority stamped on virtual pods (the lowest there is), marking them as worth least.
pub const VIRTUAL_POD_PRIORITY: i32 = i32::MIN;

/// `scalableRef` kinds a buffer may follow (API group `apps`).
pub const SCALABLE_KINDS: [&str; 3] = ["Deployment", "StatefulSet", "ReplicaSet"];

/// A reference to an object in the buffer's namespace.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LocalObjectRef {
    /// The referent's name.
    pub name: String,
}

/// A reference to an object with a scale subresource, in the buffer's namespace.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScalableRef {
    /// The referent's API group; empty for the core group.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_group: String,
    /// The referent's kind.
    pub kind: String,
    /// The referent's name.
    pub name: String,
}

/// What capacity a buffer keeps spare.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CapacityBufferSpec {
    /// How the buffer is used; [`ACTIVE_PROVISIONING_STRATEGY`] when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provisioning_strategy: Option<String>,
    /// The PodTemplate that shapes one chunk of the buffer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_template_ref: Option<LocalObjectRef>,
    /// The workload whose pod template shapes a chunk (and whose replicas `percentage` reads).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scalable_ref: Option<ScalableRef>,
    /// How many chunks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// How many chunks, as a percentage of the `scalableRef`'s replicas (rounded up).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub percentage: Option<i32>,
    /// The most the chunks may request in total, by resource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<ResourceList>,
}

/// What the autoscaler made of a buffer.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CapacityBufferStatus {
    /// The PodTemplate used, when the buffer names one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_template_ref: Option<LocalObjectRef>,
    /// How many chunks are kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// The generation of the PodTemplate used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_template_generation: Option<i64>,
    /// `ReadyForProvisioning` and `Provisioning`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The strategy observed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provisioning_strategy: Option<String>,
}

/// Spare capacity, kept as placeholder pods the provisioner schedules with the real ones.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CapacityBuffer {
    /// Standard object metadata.
    pub metadata: ObjectMeta,
    /// What to keep.
    pub spec: CapacityBufferSpec,
    /// The observed state.
    pub status: Option<CapacityBufferStatus>,
}

crate::cluster_resource!(
    CapacityBuffer, CapacityBufferSpec, CapacityBufferStatus,
    group: "autoscaling.x-k8s.io", version: "v1beta1", plural: "capacitybuffers", namespaced
);

impl CapacityBuffer {
    /// The buffer's name (empty when unset).
    pub fn name(&self) -> &str {
        self.metadata.name.as_deref().unwrap_or_default()
    }

    /// The buffer's namespace (`default` when unset, as the API server fills it in).
    pub fn namespace(&self) -> &str {
        self.metadata.namespace.as_deref().unwrap_or("default")
    }

    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace(), self.name())
    }

    /// Its conditions (none without a status).
    pub fn conditions(&self) -> &[Condition] {
        self.status
            .as_ref()
            .map_or(&[][..], |s| s.conditions.as_slice())
    }

    /// Whether condition `kind` is `True`.
    pub fn condition_true(&self, kind: &str) -> bool {
        self.conditions()
            .iter()
            .any(|c| c.type_ == kind && c.status == "True")
    }
}

/// CapacityBuffer condition types and reasons, as upstream writes them.
pub mod condition {
    /// The buffer's pod shape and chunk count are known.
    pub const READY_FOR_PROVISIONING: &str = "ReadyForProvisioning";
    /// The buffer's chunks fit on capacity that exists (`True`) or need new capacity.
    pub const PROVISIONING: &str = "Provisioning";
    /// Reason: the pod template was found.
    pub const REASON_RESOLVED: &str = "Resolved";
    /// Reason: the `scalableRef` names nothing.
    pub const REASON_SCALABLE_REF_NOT_FOUND: &str = "ScalableRefNotFound";
    /// Reason: the `podTemplateRef` names nothing.
    pub const REASON_POD_TEMPLATE_NOT_FOUND: &str = "PodTemplateNotFound";
    /// Reason: the buffer could not be resolved otherwise.
    pub const REASON_RESOLUTION_FAILED: &str = "ResolutionFailed";
    /// Reason: every virtual pod fits on existing capacity.
    pub const REASON_FITS_EXISTING_CAPACITY: &str = "FitsExistingCapacity";
    /// Reason: some virtual pods need new capacity (or fit nowhere).
    pub const REASON_REQUIRES_NEW_CAPACITY: &str = "RequiresNewCapacity";
    /// Reason: `ReadyForProvisioning` is not `True`.
    pub const REASON_NOT_READY_FOR_PROVISIONING: &str = "NotReadyForProvisioning";
    /// Reason: the buffer wants no chunks.
    pub const REASON_BUFFER_EMPTY: &str = "BufferEmpty";
}
