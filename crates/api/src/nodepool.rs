//! `karpenter.sh/v1` NodePool: the template and policies for the nodes karpenter manages.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Taint;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta};
use serde::{Deserialize, Serialize};

use crate::duration::{Duration, NillableDuration};
use crate::nodeclaim::{
    DEFAULT_EXPIRE_AFTER, NodeClassReference, NodeSelectorRequirementWithMinValues, ResourceList,
    default_expire_after,
};

/// Which nodes consolidation may remove or replace.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ConsolidationPolicy {
    /// Only nodes without workload pods.
    WhenEmpty,
    /// Empty nodes, and nodes whose pods fit elsewhere or on a cheaper node.
    #[default]
    WhenEmptyOrUnderutilized,
    /// Like `WhenEmptyOrUnderutilized`, but only moves whose savings outweigh the disruption.
    Balanced,
}

/// Why a node is disrupted; budgets can be scoped to some of these.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum DisruptionReason {
    /// Consolidation of a node whose pods fit elsewhere or on a cheaper node.
    Underutilized,
    /// Removal of a node without workload pods.
    Empty,
    /// Replacement of a node that no longer matches its NodePool or NodeClass.
    Drifted,
}

impl DisruptionReason {
    /// The reason's name as written in YAML.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Underutilized => "Underutilized",
            Self::Empty => "Empty",
            Self::Drifted => "Drifted",
        }
    }
}

/// The Balanced policy's k: a move is approved when its share of savings is at least 1/k of
/// its share of disruption.
pub const BALANCED_K: f64 = 2.0;

/// The default budget's `nodes`: a tenth of the NodePool's nodes at a time.
pub const DEFAULT_BUDGET_NODES: &str = "10%";

fn default_budget_nodes() -> String {
    DEFAULT_BUDGET_NODES.to_string()
}

fn default_budgets() -> Vec<Budget> {
    vec![Budget::default()]
}

/// How many of a NodePool's nodes may be disrupted at once, optionally only during a schedule.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Budget {
    /// A count (`"5"`) or a percentage of the NodePool's nodes (`"10%"`, rounded up).
    #[serde(default = "default_budget_nodes")]
    pub nodes: String,
    /// When the budget starts to apply: a cron schedule in UTC, set together with `duration`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<String>,
    /// How long the budget applies after each `schedule` firing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<Duration>,
    /// The disruption reasons the budget limits; unset means all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasons: Option<Vec<DisruptionReason>>,
}

impl Default for Budget {
    fn default() -> Self {
        Self {
            nodes: default_budget_nodes(),
            schedule: None,
            duration: None,
            reasons: None,
        }
    }
}

/// How and when the NodePool's nodes may be disrupted.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Disruption {
    /// How long a node must have had no pod scheduled or removed before consolidation considers
    /// it; `Never` turns consolidation off. Defaults to `0s`, as upstream's CRD does.
    #[serde(default = "default_consolidate_after")]
    pub consolidate_after: NillableDuration,
    /// Which nodes consolidation may act on.
    #[serde(default)]
    pub consolidation_policy: ConsolidationPolicy,
    /// Limits on how many nodes may be disrupted at once.
    #[serde(default = "default_budgets")]
    pub budgets: Vec<Budget>,
}

fn default_consolidate_after() -> NillableDuration {
    NillableDuration::from_secs(0)
}

impl Default for Disruption {
    fn default() -> Self {
        Self {
            consolidate_after: default_consolidate_after(),
            consolidation_policy: ConsolidationPolicy::default(),
            budgets: default_budgets(),
        }
    }
}

/// Labels and annotations given to every node of the NodePool.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TemplateMetadata {
    /// Node labels.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Node annotations.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// The NodeClaim spec a NodePool stamps out (NodeClaim's spec without `resources`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeClaimTemplateSpec {
    /// Taints every node is created with.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<Taint>,
    /// Taints removed by something else once nodes are ready.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub startup_taints: Vec<Taint>,
    /// What the nodes' labels must satisfy.
    #[serde(default)]
    pub requirements: Vec<NodeSelectorRequirementWithMinValues>,
    /// The provider's NodeClass.
    pub node_class_ref: NodeClassReference,
    /// How long draining may take before pods are deleted regardless; unset waits forever.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub termination_grace_period: Option<Duration>,
    /// How long nodes live before they are replaced; `Never` turns expiry off.
    #[serde(default = "default_expire_after")]
    pub expire_after: NillableDuration,
}

impl Default for NodeClaimTemplateSpec {
    fn default() -> Self {
        Self {
            taints: Vec::new(),
            startup_taints: Vec::new(),
            requirements: Vec::new(),
            node_class_ref: NodeClassReference::default(),
            termination_grace_period: None,
            expire_after: DEFAULT_EXPIRE_AFTER,
        }
    }
}

/// The template of the NodeClaims a NodePool launches.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeClaimTemplate {
    /// Labels and annotations for the nodes.
    #[serde(default)]
    pub metadata: TemplateMetadata,
    /// The NodeClaim spec.
    pub spec: NodeClaimTemplateSpec,
}

/// The desired behaviour of a NodePool.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NodePoolSpec {
    /// The template of the NodeClaims this NodePool launches.
    pub template: NodeClaimTemplate,
    /// How and when nodes may be disrupted.
    #[serde(default)]
    pub disruption: Disruption,
    /// The most capacity the NodePool may hold (`cpu`, `memory`, `nodes`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<ResourceList>,
    /// Priority among NodePools that fit a pod (1..100, higher first; unset is 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<i32>,
    /// A fixed node count instead of demand-driven scaling (alpha).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i64>,
}

/// The observed state of a NodePool.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodePoolStatus {
    /// The capacity of the NodePool's nodes.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub resources: ResourceList,
    /// How many nodes the NodePool has.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes: Option<i64>,
    /// The NodeClass generation last seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_class_observed_generation: Option<i64>,
    /// `ValidationSucceeded`, `NodeClassReady`, `NodeRegistrationHealthy` and `Ready`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// A pool of nodes karpenter launches and disrupts under one set of rules.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodePool {
    /// Standard object metadata.
    pub metadata: ObjectMeta,
    /// The desired behaviour.
    pub spec: NodePoolSpec,
    /// The observed state.
    pub status: Option<NodePoolStatus>,
}

crate::cluster_resource!(
    NodePool, NodePoolSpec, NodePoolStatus,
    group: "karpenter.sh", version: "v1", plural: "nodepools"
);

impl NodePool {
    /// The NodePool's name (empty when unset).
    pub fn name(&self) -> &str {
        self.metadata.name.as_deref().unwrap_or_default()
    }

    /// The NodePool's weight, 0 when unset.
    pub fn weight(&self) -> i32 {
        self.spec.weight.unwrap_or(0)
    }
}

/// NodePool condition types.
pub mod condition {
    /// The NodePool passed runtime validation.
    pub const VALIDATION_SUCCEEDED: &str = "ValidationSucceeded";
    /// The referenced NodeClass is ready.
    pub const NODE_CLASS_READY: &str = "NodeClassReady";
    /// Nodes launched from the NodePool register.
    pub const NODE_REGISTRATION_HEALTHY: &str = "NodeRegistrationHealthy";
    /// ValidationSucceeded and NodeClassReady hold.
    pub const READY: &str = "Ready";
}
