//! `karpenter.cluster.x-k8s.io/v1alpha1` ClusterAPINodeClass: which MachineDeployments a
//! NodePool launches from, by label selector, as upstream's schema has it.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector, ObjectMeta};
use karpenter_api::crd::{CONDITION_REASON_PATTERN, Crd, conditions, object_root};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::GROUP;

/// `clusterapinodeclasses.karpenter.cluster.x-k8s.io`: cluster-scoped, short names `capinc`
/// and `capincs`, a status subresource, as upstream's.
pub const CRD: Crd = Crd::new(
    GROUP,
    "v1alpha1",
    "ClusterAPINodeClass",
    "clusterapinodeclasses",
    schema,
)
.with_short_names(&["capinc", "capincs"]);

/// The condition saying the selector finds MachineDeployments to launch from (karpenter-rs's;
/// upstream sets only `Ready`).
pub const CONDITION_MACHINE_DEPLOYMENTS_READY: &str = "MachineDeploymentsReady";

/// The parts `Ready` summarises.
pub const READY_CONDITIONS: [&str; 1] = [CONDITION_MACHINE_DEPLOYMENTS_READY];

/// Which Cluster API scalable resources take part.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterAPINodeClassSpec {
    /// Selects the MachineDeployments (among those labelled
    /// `node.cluster.x-k8s.io/karpenter-member`) whose nodes this class launches; unset selects
    /// every member.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scalable_resource_selector: Option<LabelSelector>,
}

/// The observed state of a ClusterAPINodeClass.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ClusterAPINodeClassStatus {
    /// `MachineDeploymentsReady` and `Ready` over it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// The Cluster API provider's NodeClass.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClusterAPINodeClass {
    /// Standard object metadata.
    pub metadata: ObjectMeta,
    /// Which MachineDeployments take part.
    pub spec: ClusterAPINodeClassSpec,
    /// The observed state.
    pub status: Option<ClusterAPINodeClassStatus>,
}

karpenter_api::cluster_resource!(
    ClusterAPINodeClass, ClusterAPINodeClassSpec, ClusterAPINodeClassStatus,
    group: "karpenter.cluster.x-k8s.io", version: "v1alpha1", plural: "clusterapinodeclasses"
);

impl ClusterAPINodeClass {
    /// The class's name.
    pub fn name(&self) -> &str {
        self.metadata.name.as_deref().unwrap_or_default()
    }
}

/// A `metav1.LabelSelector`, as upstream's CRD spells it.
fn label_selector() -> Value {
    json!({
        "description": "Selects the Cluster API scalable resources (MachineDeployments) that take part in provisioning, among those labelled node.cluster.x-k8s.io/karpenter-member. Unset selects them all.",
        "properties": {
            "matchExpressions": {
                "description": "Label selector requirements, ANDed.",
                "items": {
                    "description": "A key, an operator (In, NotIn, Exists, DoesNotExist) and values.",
                    "properties": {
                        "key": {"description": "The label key the selector applies to.", "type": "string"},
                        "operator": {"description": "In, NotIn, Exists or DoesNotExist.", "type": "string"},
                        "values": {
                            "description": "The values for In and NotIn; empty for Exists and DoesNotExist.",
                            "items": {"type": "string"},
                            "type": "array",
                            "x-kubernetes-list-type": "atomic",
                        },
                    },
                    "required": ["key", "operator"],
                    "type": "object",
                },
                "type": "array",
                "x-kubernetes-list-type": "atomic",
            },
            "matchLabels": {
                "additionalProperties": {"type": "string"},
                "description": "Labels that must have these values, ANDed with matchExpressions.",
                "type": "object",
            },
        },
        "type": "object",
        "x-kubernetes-map-type": "atomic",
    })
}

fn schema() -> Value {
    let spec = json!({
        "description": "Which Cluster API MachineDeployments NodePools of this class launch from.",
        "properties": {"scalableResourceSelector": label_selector()},
        "type": "object",
    });
    // Upstream's conditions are a plain list (no list-map keys).
    let mut status_conditions = conditions(CONDITION_REASON_PATTERN, true);
    if let Some(c) = status_conditions.as_object_mut() {
        c.remove("x-kubernetes-list-map-keys");
        c.remove("x-kubernetes-list-type");
    }
    let status = json!({
        "description": "The observed state of the ClusterAPINodeClass.",
        "properties": {"conditions": status_conditions},
        "type": "object",
    });
    object_root(
        "ClusterAPINodeClass selects the Cluster API MachineDeployments a NodePool launches nodes from.",
        spec,
        status,
        false,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_crd_has_upstreams_names_scope_and_subresource() {
        let d = CRD.definition();
        assert_eq!(
            d["metadata"]["name"],
            "clusterapinodeclasses.karpenter.cluster.x-k8s.io"
        );
        assert_eq!(d["spec"]["scope"], "Cluster");
        assert_eq!(d["spec"]["names"]["kind"], "ClusterAPINodeClass");
        assert_eq!(
            d["spec"]["names"]["shortNames"],
            json!(["capinc", "capincs"])
        );
        assert_eq!(d["spec"]["names"]["categories"], json!(["karpenter"]));
        let v = &d["spec"]["versions"][0];
        assert_eq!(v["name"], "v1alpha1");
        assert_eq!(v["subresources"], json!({"status": {}}));
        let selector = &v["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["scalableResourceSelector"];
        assert_eq!(selector["x-kubernetes-map-type"], "atomic");
        assert_eq!(
            selector["properties"]["matchExpressions"]["items"]["required"],
            json!(["key", "operator"])
        );
    }

    #[test]
    fn upstreams_manifests_read() {
        let cases = [
            (
                json!({"apiVersion": "karpenter.cluster.x-k8s.io/v1alpha1", "kind": "ClusterAPINodeClass",
                       "metadata": {"name": "default"}, "spec": {}}),
                None,
            ),
            (
                json!({"apiVersion": "karpenter.cluster.x-k8s.io/v1alpha1", "kind": "ClusterAPINodeClass",
                       "metadata": {"name": "gpu"},
                       "spec": {"scalableResourceSelector": {"matchLabels": {"pool": "gpu"}}}}),
                Some(LabelSelector {
                    match_labels: Some([("pool".to_string(), "gpu".to_string())].into()),
                    match_expressions: None,
                }),
            ),
        ];
        for (manifest, selector) in cases {
            let class: ClusterAPINodeClass = serde_json::from_value(manifest.clone()).unwrap();
            assert_eq!(
                class.spec.scalable_resource_selector, selector,
                "{manifest}"
            );
            let back = serde_json::to_value(&class).unwrap();
            assert_eq!(back["spec"], manifest["spec"]);
        }
        let wrong = json!({"apiVersion": "karpenter.cluster.x-k8s.io/v1beta1", "kind": "ClusterAPINodeClass"});
        assert!(serde_json::from_value::<ClusterAPINodeClass>(wrong).is_err());
    }
}
