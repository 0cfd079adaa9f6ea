//! What the controller's own tests run against: a provider that launches nothing and a
//! context whose client points nowhere, so a test exercises a loop's logic on state it sets
//! itself, on tokio's paused clock.

use std::sync::Arc;

use karpenter_api::crd::Crd;
use karpenter_api::{NodeClaim, NodeClassReference, NodePool};
use karpenter_cloudprovider::{
    CloudProvider, CloudProviderError, InstanceType, NodeClassReadiness, Result,
};

use crate::{Context, Controller, Options};

/// A provider with no instances and no instance types, whose NodeClasses are all of them.
pub struct NoCloud;

impl CloudProvider for NoCloud {
    fn name(&self) -> &'static str {
        "none"
    }

    fn node_classes(&self) -> &'static [Crd] {
        &[]
    }

    // Every NodeClass is its own: tests set state with whatever references they like.
    fn supports(&self, _: &NodeClassReference) -> bool {
        true
    }

    fn manages_node(&self, _: &k8s_openapi::api::core::v1::Node) -> bool {
        true
    }

    async fn node_class_readiness(&self, _: &NodeClassReference) -> Result<NodeClassReadiness> {
        Ok(NodeClassReadiness::Ready)
    }

    async fn create(&self, _: &NodeClaim) -> Result<NodeClaim> {
        Err(CloudProviderError::insufficient_capacity("no cloud"))
    }

    async fn delete(&self, _: &NodeClaim) -> Result<()> {
        Err(CloudProviderError::not_found("no cloud"))
    }

    async fn get(&self, _: &str) -> Result<NodeClaim> {
        Err(CloudProviderError::not_found("no cloud"))
    }

    async fn list(&self) -> Result<Vec<NodeClaim>> {
        Ok(Vec::new())
    }

    async fn is_drifted(&self, _: &NodeClaim) -> Result<Option<String>> {
        Ok(None)
    }

    async fn instance_types(&self, _: &NodePool) -> Result<Vec<Arc<InstanceType>>> {
        Ok(Vec::new())
    }

    fn provider_labels(&self) -> Vec<String> {
        Vec::new()
    }
}

/// A leading controller's context over [`NoCloud`], with a client that reaches no server.
pub fn context(options: Options) -> Arc<Context<NoCloud>> {
    let config = kube::Config::new("http://127.0.0.1:9".parse().expect("a valid URL"));
    let client = kube::Client::try_from(config).expect("a client");
    let controller = Controller::new(client, Arc::new(NoCloud), options);
    controller.leader.send_replace(true);
    let ctx = controller.context();
    // The context keeps its own receiver; the sender may go.
    drop(controller);
    ctx
}
