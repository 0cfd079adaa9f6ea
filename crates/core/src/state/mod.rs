//! The cluster as karpenter's decisions see it (upstream's `state` package): what is asked of
//! a pod, and the one builder that turns observed objects into the inputs of provisioning and
//! disruption.

pub mod pods;
mod snapshot;
pub mod volumes;

pub use snapshot::{Counts, DisruptionInputs, Observed, Snapshot, StateNode, price_of};
