//! `karpenter.sh/v1alpha1` NodeOverlay: price and extended-resource overrides for the instance
//! types whose labels match its requirements, behind the `NodeOverlay` feature gate.
//!
//! What the fields mean is decided in `karpenter_core::overlay`; this is the API shape, with
//! its validation in [`crate::crd`] (schema and CEL) and
//! [`crate::validation::runtime::validate_node_overlay`] (the runtime checks).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta};
use serde::{Deserialize, Serialize};

use crate::nodeclaim::{NodeSelectorRequirementWithMinValues, Operator, ResourceList};

/// The NodeOverlay's API version.
pub const API_VERSION: &str = "karpenter.sh/v1alpha1";

/// Annotation on NodeClaims launched with a price overlay among their instance types.
pub const PRICE_OVERLAY_APPLIED_ANNOTATION: &str = "karpenter.sh/price-overlay-applied";
/// Annotation on NodeClaims launched with a capacity overlay among their instance types.
pub const CAPACITY_OVERLAY_APPLIED_ANNOTATION: &str = "karpenter.sh/capacity-overlay-applied";
/// Annotation on NodeClaims launched while the `NodeOverlay` gate was on: a hash of the
/// extended resources the overlays gave the launched instance type in its NodePool. Overlay
/// drift compares it with what the overlays give that type now; upstream has no such drift
/// (it leaves overlay changes to consolidation), so the key is this project's own.
pub const CAPACITY_OVERLAY_HASH_ANNOTATION: &str = "karpenter-rs.dev/capacity-overlay-hash";

/// Resources an overlay's `capacity` may not set: it only adds extended resources.
pub const RESTRICTED_CAPACITY: [&str; 4] = ["cpu", "memory", "ephemeral-storage", "pods"];

/// A requirement on the labels an instance type (with its NodePool's labels) has; like a
/// NodePool's, without `minValues`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct OverlayRequirement {
    /// The label key.
    pub key: String,
    /// How the key relates to the values.
    pub operator: Operator,
    /// The values; one integer for the numeric operators, none for `Exists`/`DoesNotExist`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
}

impl OverlayRequirement {
    /// The same requirement in the form NodePools write (no `minValues`).
    pub fn to_node_selector(&self) -> NodeSelectorRequirementWithMinValues {
        NodeSelectorRequirementWithMinValues {
            key: self.key.clone(),
            operator: self.operator,
            values: self.values.clone(),
            min_values: None,
        }
    }
}

/// What a NodeOverlay changes, and for which instance types.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeOverlaySpec {
    /// Which instance types (and offerings) the overlay applies to; none means all.
    #[serde(default)]
    pub requirements: Vec<OverlayRequirement>,
    /// A change to the matching offerings' price: `+0.5`, `-1`, `+10%`, `-15%`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price_adjustment: Option<String>,
    /// The matching offerings' price, replacing the provider's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price: Option<String>,
    /// Extended resources added to the matching instance types' capacity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<ResourceList>,
    /// Precedence over other overlays (1..10000, higher first; unset is 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<i32>,
}

/// The observed state of a NodeOverlay.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeOverlayStatus {
    /// `ValidationSucceeded` and `Ready`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// Overrides of price and capacity for the instance types that match its requirements.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodeOverlay {
    /// Standard object metadata.
    pub metadata: ObjectMeta,
    /// What it changes.
    pub spec: NodeOverlaySpec,
    /// The observed state.
    pub status: Option<NodeOverlayStatus>,
}

crate::cluster_resource!(
    NodeOverlay, NodeOverlaySpec, NodeOverlayStatus,
    group: "karpenter.sh", version: "v1alpha1", plural: "nodeoverlays"
);

impl NodeOverlay {
    /// The NodeOverlay's name (empty when unset).
    pub fn name(&self) -> &str {
        self.metadata.name.as_deref().unwrap_or_default()
    }

    /// The weight, 0 when unset.
    pub fn weight(&self) -> i32 {
        self.spec.weight.unwrap_or(0)
    }
}

/// NodeOverlay condition types and reasons.
pub mod condition {
    /// The overlay passed runtime validation and conflicts with no other.
    pub const VALIDATION_SUCCEEDED: &str = "ValidationSucceeded";
    /// `ValidationSucceeded` holds.
    pub const READY: &str = "Ready";
    /// Reason: the runtime checks failed.
    pub const REASON_RUNTIME_VALIDATION: &str = "RuntimeValidation";
    /// Reason: an overlay of the same weight sets the same thing for some instance type.
    pub const REASON_CONFLICT: &str = "Conflict";
    /// The message of a `Conflict`, as upstream words it.
    pub const CONFLICT_MESSAGE: &str = "conflict with another overlay";
}
