//! Provisioning: batching pending pods, deciding which nodes to launch for the ones that cannot
//! schedule, and the NodeClaims they are launched as.

pub mod batcher;
pub mod capacity_buffer;
mod nodeclaim;
pub mod nodepools;
pub mod scheduling;
pub mod static_capacity;

pub use batcher::Batcher;
pub use nodeclaim::node_claim_for;
