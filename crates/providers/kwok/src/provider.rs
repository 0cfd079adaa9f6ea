//! The KWOK cloud provider. Instance types are upstream's generated 144 ([`crate::catalog`]). A
//! launch picks the cheapest type and offering the NodeClaim allows that fit its requests, and
//! names the Node after the NodeClaim, so launching the same claim twice finds the first Node
//! instead of making a second.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, NodeCondition, NodeSpec, NodeStatus, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use karpenter_api::crd::Crd;
use karpenter_api::labels::{HOSTNAME_LABEL, UNREGISTERED_TAINT_KEY};
use karpenter_api::{NodeClaim, NodeClaimStatus, NodeClassReference, NodePool};
use karpenter_cloudprovider::{
    BoxError, CloudProvider, CloudProviderError, InstanceType, NodeClassReadiness, Offering,
    RepairPolicy, Result,
};
use karpenter_controller::cloudprovider::Provider;

use crate::KWOKNodeClass;
use crate::catalog::{KWOK_LABELS, instance_types};
use karpenter_core::instancetype::{cheapest_launch, launch_labels};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt};
use serde_json::json;

/// The label and annotation KWOK manages its fake nodes by.
pub const KWOK_NODE_KEY: &str = "kwok.x-k8s.io/node";
/// The providerID scheme.
pub const PROVIDER_ID_PREFIX: &str = "kwok://";

/// The KWOK provider.
pub struct KwokProvider {
    client: Client,
    instance_types: Vec<Arc<InstanceType>>,
}

fn other(e: kube::Error) -> CloudProviderError {
    CloudProviderError::other(e)
}

fn not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

/// The Node KWOK would run for a claim launched as `it` in `offering`.
pub fn node_for(claim: &NodeClaim, it: &InstanceType, offering: &Offering) -> Node {
    let name = claim.name_any();
    let mut labels = launch_labels(claim, it, offering, &KWOK_LABELS);
    labels.insert(HOSTNAME_LABEL.into(), name.clone());
    labels.insert(KWOK_NODE_KEY.into(), "fake".into());
    Node {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            labels: Some(labels),
            annotations: Some([(KWOK_NODE_KEY.to_string(), "fake".to_string())].into()),
            ..Default::default()
        },
        spec: Some(NodeSpec {
            provider_id: Some(format!("{PROVIDER_ID_PREFIX}{name}")),
            taints: Some(vec![Taint {
                key: UNREGISTERED_TAINT_KEY.into(),
                effect: "NoExecute".into(),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        status: Some(node_status(it)),
    }
}

fn node_status(it: &InstanceType) -> NodeStatus {
    NodeStatus {
        capacity: Some(it.capacity.to_list()),
        allocatable: Some(it.allocatable().to_list()),
        conditions: Some(vec![NodeCondition {
            type_: "Ready".into(),
            status: "True".into(),
            reason: Some("KubeletReady".into()),
            message: Some("kwok node is ready".into()),
            last_transition_time: Some(Time(Timestamp::now())),
            last_heartbeat_time: Some(Time(Timestamp::now())),
        }]),
        ..Default::default()
    }
}

/// The instance a Node stands for, as a NodeClaim.
fn as_claim(node: &Node) -> NodeClaim {
    let status = node.status.clone().unwrap_or_default();
    NodeClaim {
        metadata: ObjectMeta {
            name: node.metadata.name.clone(),
            labels: node.metadata.labels.clone(),
            creation_timestamp: node.metadata.creation_timestamp.clone(),
            ..Default::default()
        },
        spec: Default::default(),
        status: Some(NodeClaimStatus {
            provider_id: node.spec.as_ref().and_then(|s| s.provider_id.clone()),
            capacity: status.capacity.unwrap_or_default(),
            allocatable: status.allocatable.unwrap_or_default(),
            ..Default::default()
        }),
    }
}

impl KwokProvider {
    /// The provider with upstream's 144 instance types.
    pub fn new(client: Client) -> Self {
        Self::with_instance_types(client, instance_types().into_iter().map(Arc::new).collect())
    }

    /// The provider with the given instance types.
    pub fn with_instance_types(client: Client, instance_types: Vec<Arc<InstanceType>>) -> Self {
        Self {
            client,
            instance_types,
        }
    }

    async fn create_node(client: Client, node: Node) -> std::result::Result<Node, kube::Error> {
        let api: Api<Node> = Api::all(client);
        let name = node.name_any();
        let created = match api.create(&PostParams::default(), &node).await {
            Ok(n) => n,
            // Launched before (a retry, a restart): the same instance, not a second one.
            Err(kube::Error::Api(e)) if e.code == 409 => api.get(&name).await?,
            Err(e) => return Err(e),
        };
        // The API server may drop status on create; KWOK keeps it fresh afterwards.
        let status = json!({"status": node.status});
        api.patch_status(&name, &PatchParams::default(), &Patch::Merge(status))
            .await
            .or(Ok(created))
    }
}

impl CloudProvider for KwokProvider {
    fn name(&self) -> &'static str {
        "kwok"
    }

    fn node_classes(&self) -> &'static [Crd] {
        crate::CRDS
    }

    async fn node_class_readiness(
        &self,
        reference: &NodeClassReference,
    ) -> Result<NodeClassReadiness> {
        if !self.supports(reference) {
            return Ok(NodeClassReadiness::NotFound);
        }
        let classes: Api<KWOKNodeClass> = Api::all(self.client.clone());
        match classes.get_opt(&reference.name).await {
            // The CRD defaults status to Ready; an object written before that still is.
            Ok(Some(class)) => Ok(match class.status {
                Some(status) if !status.conditions.is_empty() => {
                    NodeClassReadiness::from_object(&json!({"status": status}))
                }
                _ => NodeClassReadiness::Ready,
            }),
            Ok(None) => Ok(NodeClassReadiness::NotFound),
            Err(e) => Err(other(e)),
        }
    }

    /// Upstream's KWOK policies: a node not Ready for 10 minutes is replaced.
    fn repair_policies(&self) -> Vec<RepairPolicy> {
        crate::catalog::repair_policies()
    }

    async fn create(&self, claim: &NodeClaim) -> Result<NodeClaim> {
        let classes: Api<KWOKNodeClass> = Api::all(self.client.clone());
        let class_name = &claim.spec.node_class_ref.name;
        let class = match classes.get_opt(class_name).await {
            Ok(Some(c)) => c,
            Ok(None) => {
                return Err(CloudProviderError::insufficient_capacity(format!(
                    "KWOKNodeClass {class_name:?} not found"
                )));
            }
            Err(e) => return Err(other(e)),
        };
        let (it, offering) = cheapest_launch(&self.instance_types, claim).ok_or_else(|| {
            CloudProviderError::insufficient_capacity(
                "no instance type satisfies the requirements and requests",
            )
        })?;
        let node = node_for(claim, it, offering);
        let delay = class
            .spec
            .node_registration_delay
            .map_or(Duration::ZERO, |d| d.0);
        let launched = as_claim(&node);
        if delay.is_zero() {
            Self::create_node(self.client.clone(), node)
                .await
                .map_err(other)?;
        } else {
            let client = self.client.clone();
            tokio::spawn(async move {
                tokio::time::sleep(delay).await;
                if let Err(e) = Self::create_node(client, node).await {
                    tracing::warn!(error = %e, "creating kwok node");
                }
            });
        }
        Ok(launched)
    }

    async fn delete(&self, claim: &NodeClaim) -> Result<()> {
        let id = claim
            .status
            .as_ref()
            .and_then(|s| s.provider_id.as_deref())
            .unwrap_or_default();
        let name = id.strip_prefix(PROVIDER_ID_PREFIX).unwrap_or(id);
        let api: Api<Node> = Api::all(self.client.clone());
        match api.delete(name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(e) if not_found(&e) => {}
            Err(e) => return Err(other(e)),
        }
        // As upstream: a fake instance is gone the moment it is asked to go; the Node object
        // goes through karpenter's own termination.
        Err(CloudProviderError::not_found("instance terminated"))
    }

    async fn get(&self, provider_id: &str) -> Result<NodeClaim> {
        let name = provider_id
            .strip_prefix(PROVIDER_ID_PREFIX)
            .unwrap_or(provider_id);
        let api: Api<Node> = Api::all(self.client.clone());
        match api.get_opt(name).await {
            Ok(Some(n)) if n.metadata.deletion_timestamp.is_none() => Ok(as_claim(&n)),
            Ok(_) => Err(CloudProviderError::not_found(provider_id)),
            Err(e) => Err(other(e)),
        }
    }

    async fn list(&self) -> Result<Vec<NodeClaim>> {
        let api: Api<Node> = Api::all(self.client.clone());
        let nodes = api
            .list(&ListParams::default().labels(&format!("{KWOK_NODE_KEY}=fake")))
            .await
            .map_err(other)?;
        Ok(nodes
            .items
            .iter()
            .filter(|n| {
                n.spec
                    .as_ref()
                    .and_then(|s| s.provider_id.as_deref())
                    .is_some_and(|id| id.starts_with(PROVIDER_ID_PREFIX))
            })
            .map(as_claim)
            .collect())
    }

    /// KWOK nodes have no image or network to drift from (upstream's answers "" too).
    async fn is_drifted(&self, _claim: &NodeClaim) -> Result<Option<String>> {
        Ok(None)
    }

    async fn instance_types(&self, _node_pool: &NodePool) -> Result<Vec<Arc<InstanceType>>> {
        Ok(self.instance_types.clone())
    }

    fn provider_labels(&self) -> Vec<String> {
        KWOK_LABELS.iter().map(|s| s.to_string()).collect()
    }
}

/// The KWOK provider takes no settings of its own.
#[derive(Clone, Debug, Default, clap::Args)]
pub struct KwokSettings {}

impl Provider for KwokProvider {
    type Settings = KwokSettings;

    async fn build(client: Client, _settings: KwokSettings) -> std::result::Result<Self, BoxError> {
        Ok(Self::new(client))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use karpenter_api::labels::ZONE_LABEL;
    use karpenter_api::{NodeSelectorRequirementWithMinValues, Operator};
    use karpenter_core::resources::Resources;

    fn claim(requirements: &[(&str, &[&str])], cpu: &str) -> NodeClaim {
        let mut c = NodeClaim::default();
        c.metadata.name = Some("default-abcde".into());
        c.spec.requirements = requirements
            .iter()
            .map(|(k, v)| NodeSelectorRequirementWithMinValues {
                key: k.to_string(),
                operator: Operator::In,
                values: v.iter().map(|s| s.to_string()).collect(),
                min_values: None,
            })
            .collect();
        c.spec.resources.requests = Resources::parse(&[("cpu", cpu)]).to_list();
        c
    }

    #[test]
    fn launches_the_cheapest_type_and_offering_that_fit() {
        let types: Vec<Arc<InstanceType>> = instance_types().into_iter().map(Arc::new).collect();
        let (it, o) = cheapest_launch(&types, &claim(&[], "3")).unwrap();
        assert_eq!(
            (it.name.as_str(), o.capacity_type.as_str()),
            ("c-4x-amd64-linux", "spot")
        );
        let (it, o) = cheapest_launch(
            &types,
            &claim(
                &[
                    ("karpenter.sh/capacity-type", &["on-demand"]),
                    ("kubernetes.io/arch", &["arm64"]),
                ],
                "1",
            ),
        )
        .unwrap();
        assert_eq!(
            (it.name.as_str(), o.capacity_type.as_str()),
            ("c-2x-arm64-linux", "on-demand"),
            "1 cpu + overhead needs 2"
        );
        assert!(
            cheapest_launch(
                &types,
                &claim(
                    &[("node.kubernetes.io/instance-type", &["c-1x-amd64-linux"])],
                    "4"
                )
            )
            .is_none()
        );
    }

    #[test]
    fn the_node_carries_the_offering_and_the_unregistered_taint() {
        let types: Vec<Arc<InstanceType>> = instance_types().into_iter().map(Arc::new).collect();
        let c = claim(&[("topology.kubernetes.io/zone", &["test-zone-b"])], "1");
        let (it, o) = cheapest_launch(&types, &c).unwrap();
        let node = node_for(&c, it, o);
        let labels = node.metadata.labels.as_ref().unwrap();
        assert_eq!(labels[ZONE_LABEL], "test-zone-b");
        assert_eq!(labels[HOSTNAME_LABEL], "default-abcde");
        assert_eq!(labels["karpenter.kwok.sh/instance-family"], "c");
        assert_eq!(
            node.spec.as_ref().unwrap().provider_id.as_deref(),
            Some("kwok://default-abcde")
        );
        assert_eq!(
            node.spec.as_ref().unwrap().taints.as_ref().unwrap()[0].key,
            UNREGISTERED_TAINT_KEY
        );
    }
}
