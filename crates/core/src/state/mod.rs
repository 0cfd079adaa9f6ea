//! The cluster as karpenter's decisions see it (upstream's `state` package): what is asked of
//! a pod, and the one builder that turns observed objects into the inputs of provisioning and
//! disruption.

mod bound;
mod objects;
pub mod pdb;
pub mod pods;
pub mod selectors;
mod snapshot;
pub mod volumes;

pub use bound::BoundPod;
pub use objects::ClusterObjects;
pub use snapshot::{Counts, Observed, Snapshot, StateNode, price_of};

/// The node's `Ready` condition is true.
pub fn node_ready(node: &k8s_openapi::api::core::v1::Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}
