//! The `karpenter.sh/v1` API as Rust types, with the CRDs and the validation the API server
//! and karpenter apply to them.
//!
//! - [`nodepool`] and [`nodeclaim`]: the resources, field for field as upstream, with its
//!   defaults; [`kwok`] and [`aws`]: the KWOK and AWS providers' NodeClasses.
//! - [`labels`]: well-known labels, annotations, taints and the finalizer.
//! - [`duration`] and [`cron`]: Go durations and budget schedules.
//! - [`crd`]: the CustomResourceDefinitions; [`validation`]: checks manifests against them.
//! - [`convert`]: turns `karpenter.sh/v1beta1` NodePools into `v1`.

pub mod aws;
pub mod convert;
pub mod crd;
pub mod cron;
pub mod duration;
pub mod hash;
pub mod kwok;
pub mod labels;
pub mod nodeclaim;
pub mod nodepool;
mod resource;
pub mod validation;

pub use aws::EC2NodeClass;
pub use duration::{Duration, NillableDuration};
pub use kwok::KWOKNodeClass;
pub use nodeclaim::{
    NodeClaim, NodeClaimSpec, NodeClaimStatus, NodeClassReference,
    NodeSelectorRequirementWithMinValues, Operator,
};
pub use nodepool::{
    Budget, ConsolidationPolicy, Disruption, DisruptionReason, NodePool, NodePoolSpec,
};
