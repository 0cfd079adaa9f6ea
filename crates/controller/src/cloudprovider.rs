//! The cloud provider interface the controller drives, as upstream's `cloudprovider.CloudProvider`:
//! launch an instance for a NodeClaim, find it, list them, delete it, and say which instance
//! types a NodePool may use.

use std::future::Future;
use std::sync::Arc;

use karpenter_api::{NodeClaim, NodePool};
use karpenter_core::cloudprovider::InstanceType;

/// Why a provider call failed. The lifecycle reacts to the kind, as upstream does.
#[derive(Clone, Debug, thiserror::Error, PartialEq)]
pub enum CloudProviderError {
    /// The instance does not exist (any more): deletion is complete.
    #[error("instance not found: {0}")]
    NotFound(String),
    /// No offering could be launched; the NodeClaim is deleted so the next attempt picks
    /// others.
    #[error("insufficient capacity: {0}")]
    InsufficientCapacity(String),
    /// The NodeClass is missing or not ready; the NodeClaim is deleted.
    #[error("nodeclass not ready: {0}")]
    NodeClassNotReady(String),
    /// Anything else; retried.
    #[error("{0}")]
    Other(String),
}

impl CloudProviderError {
    /// The label for `karpenter_cloudprovider_errors_total`.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Self::NotFound(_) => "NodeClaimNotFoundError",
            Self::InsufficientCapacity(_) => "InsufficientCapacityError",
            Self::NodeClassNotReady(_) => "NodeClassNotReadyError",
            Self::Other(_) => "",
        }
    }
}

/// A result of a provider call.
pub type Result<T> = std::result::Result<T, CloudProviderError>;

/// What the controller needs of a cloud.
pub trait CloudProvider: Send + Sync + 'static {
    /// The provider's name, for metrics (`kwok`, `aws`, …).
    fn name(&self) -> &'static str;

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

    /// The instance types a NodePool may launch.
    fn instance_types(
        &self,
        node_pool: &NodePool,
    ) -> impl Future<Output = Result<Vec<Arc<InstanceType>>>> + Send;

    /// Labels the provider defines on its instance types (`karpenter.kwok.sh/instance-cpu`, …).
    fn provider_labels(&self) -> Vec<String>;
}
