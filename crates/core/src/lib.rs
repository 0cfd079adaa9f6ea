//! The decisions of karpenter as pure functions over a snapshot of the cluster: resources,
//! the requirements algebra, instance types, the scheduling simulation and disruption. Nothing
//! here performs I/O, reads a clock or needs a runtime.

pub mod benchmark;
pub mod disruption;
pub mod feature_gates;
pub mod instancetype;
pub mod provisioning;
pub mod resources;
pub mod round;
pub mod scheduling;
pub mod state;
pub mod termination;
