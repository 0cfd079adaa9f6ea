//! The cloud provider interface (upstream's `cloudprovider.CloudProvider`).

use std::future::Future;
use std::sync::Arc;

use karpenter_api::crd::Crd;
use karpenter_api::{NodeClaim, NodeClassReference, NodePool};
use karpenter_core::instancetype::InstanceType;
use serde_json::Value;

use crate::RepairPolicy;
use crate::error::Result;

/// What a provider reports of a NodeClass: whether NodePools that use it may launch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NodeClassReadiness {
    /// Its `Ready` condition is true.
    Ready,
    /// It exists but is not ready (selectors resolve to nothing, status not written yet, …).
    NotReady {
        /// The condition reason, CamelCase.
        reason: String,
        /// What is wrong, naming the field where the provider knows it.
        message: String,
    },
    /// No NodeClass of that kind and name exists, or the provider does not serve the kind.
    NotFound,
}

impl NodeClassReadiness {
    /// Readiness read off a NodeClass object's `status.conditions`, as upstream's readiness
    /// controller reads the root `Ready` condition: no condition yet is not ready.
    pub fn from_object(object: &Value) -> Self {
        let ready = object
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .and_then(|cs| cs.iter().find(|c| c["type"] == "Ready"));
        match ready {
            Some(c) if c["status"] == "True" => Self::Ready,
            Some(c) => Self::NotReady {
                reason: c["reason"].as_str().unwrap_or("NotReady").to_string(),
                message: c["message"].as_str().unwrap_or_default().to_string(),
            },
            None => Self::NotReady {
                reason: "AwaitingReconciliation".into(),
                message: "the NodeClass has no Ready condition yet".into(),
            },
        }
    }

    /// Readiness of a NodeClass looked up by name: `NotFound` when there is none, else what
    /// its `Ready` condition says ([`Self::from_object`]); a failed lookup is the error.
    pub fn of_lookup<T: serde::Serialize>(
        found: std::result::Result<Option<T>, String>,
    ) -> Result<Self> {
        match found {
            Ok(Some(class)) => Ok(Self::from_object(
                &serde_json::to_value(&class).map_err(crate::CloudProviderError::other)?,
            )),
            Ok(None) => Ok(Self::NotFound),
            Err(e) => Err(crate::CloudProviderError::Other(e.into())),
        }
    }
}

/// What the controller needs of a cloud.
pub trait CloudProvider: Send + Sync + 'static {
    /// The provider's name, for metrics and `--cloud-provider` (`kwok`, `aws`, …).
    fn name(&self) -> &'static str;

    /// The NodeClass CRDs this provider launches from, the default first (upstream's
    /// `GetSupportedNodeClasses`).
    fn node_classes(&self) -> &'static [Crd];

    /// Whether `reference` names a NodeClass of this provider's.
    fn supports(&self, reference: &NodeClassReference) -> bool {
        self.node_classes()
            .iter()
            .any(|c| c.group() == reference.group && c.kind() == reference.kind)
    }

    /// The hooks a NodeClaim's registration waits for (none by default; see
    /// [`crate::hooks`]).
    fn registration_hooks(&self) -> Vec<std::sync::Arc<dyn crate::RegistrationHook>> {
        Vec::new()
    }

    /// Whether `node` came from a NodeClass of this provider's: it carries one's label
    /// (`karpenter.k8s.aws/ec2nodeclass`, …), as registration copies it from the NodeClaim
    /// (upstream's `nodeutils.IsManaged`).
    fn manages_node(&self, node: &k8s_openapi::api::core::v1::Node) -> bool {
        let labels = node.metadata.labels.as_ref();
        self.node_classes().iter().any(|c| {
            labels.is_some_and(|l| {
                l.contains_key(&karpenter_api::labels::node_class_label_key(
                    c.group(),
                    c.kind(),
                ))
            })
        })
    }

    /// Whether the NodeClass `reference` names is ready to launch from.
    fn node_class_readiness(
        &self,
        reference: &NodeClassReference,
    ) -> impl Future<Output = Result<NodeClassReadiness>> + Send;

    /// Launches an instance for the claim. The answer is the claim as launched: `status`
    /// carries providerID, capacity and allocatable, `metadata.labels` the instance's labels.
    /// Calling it again for the same claim must not launch a second instance.
    fn create(&self, claim: &NodeClaim) -> impl Future<Output = Result<NodeClaim>> + Send;

    /// Terminates the claim's instance. `NotFound` means it is gone.
    fn delete(&self, claim: &NodeClaim) -> impl Future<Output = Result<()>> + Send;

    /// The instance with this providerID, as a NodeClaim.
    fn get(&self, provider_id: &str) -> impl Future<Output = Result<NodeClaim>> + Send;

    /// Every instance this provider launched for the cluster, as NodeClaims (name and
    /// providerID set), so instances without a NodeClaim can be collected.
    fn list(&self) -> impl Future<Output = Result<Vec<NodeClaim>>> + Send;

    /// Whether the claim's instance drifted from its NodeClass (an image or subnet that moved
    /// on): the reason, or `None`. Asked only after the template checks found nothing.
    fn is_drifted(&self, claim: &NodeClaim) -> impl Future<Output = Result<Option<String>>> + Send;

    /// The instance types a NodePool may launch, every one, even those with no available
    /// offering.
    fn instance_types(
        &self,
        node_pool: &NodePool,
    ) -> impl Future<Output = Result<Vec<Arc<InstanceType>>>> + Send;

    /// Labels the provider defines on its instance types (`karpenter.kwok.sh/instance-cpu`, …).
    fn provider_labels(&self) -> Vec<String>;

    /// The node conditions that mean a node is broken and should be replaced (upstream's
    /// `RepairPolicies`); none by default.
    fn repair_policies(&self) -> Vec<RepairPolicy> {
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn readiness_of_a_lookup() {
        let ready = json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}});
        assert_eq!(
            NodeClassReadiness::of_lookup(Ok(Some(ready))).unwrap(),
            NodeClassReadiness::Ready
        );
        assert_eq!(
            NodeClassReadiness::of_lookup(Ok(None::<Value>)).unwrap(),
            NodeClassReadiness::NotFound
        );
        assert!(
            NodeClassReadiness::of_lookup(Err::<Option<Value>, _>("forbidden".into())).is_err()
        );
    }

    #[test]
    fn readiness_from_the_ready_condition() {
        let cases = [
            (
                json!({"status": {"conditions": [{"type": "Ready", "status": "True", "reason": "Ready"}]}}),
                NodeClassReadiness::Ready,
            ),
            (
                json!({"status": {"conditions": [
                    {"type": "SubnetsReady", "status": "True"},
                    {"type": "Ready", "status": "False", "reason": "SubnetsNotFound", "message": "spec.subnetSelectorTerms: no subnet matches"},
                ]}}),
                NodeClassReadiness::NotReady {
                    reason: "SubnetsNotFound".into(),
                    message: "spec.subnetSelectorTerms: no subnet matches".into(),
                },
            ),
            (
                json!({"status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}}),
                NodeClassReadiness::NotReady {
                    reason: "NotReady".into(),
                    message: String::new(),
                },
            ),
            (
                json!({"spec": {}}),
                NodeClassReadiness::NotReady {
                    reason: "AwaitingReconciliation".into(),
                    message: "the NodeClass has no Ready condition yet".into(),
                },
            ),
        ];
        for (object, expected) in cases {
            assert_eq!(
                NodeClassReadiness::from_object(&object),
                expected,
                "{object}"
            );
        }
    }
}
