//! The `karpenter.sh/v1` API as Rust types, with the CRDs and the validation the API server
//! and karpenter apply to them.
//!
//! - [`nodepool`] and [`nodeclaim`]: the resources, field for field as upstream, with its
//!   defaults. Providers' NodeClasses live in their provider crates, built with what this
//!   crate exports for them: [`cluster_resource!`], the schema helpers in [`crd`], the
//!   runtime-check plumbing in [`validation`] and [`hash::Fnv`].
//! - [`nodeoverlay`]: `karpenter.sh/v1alpha1` NodeOverlay (feature gate `NodeOverlay`).
//! - [`capacitybuffer`]: `autoscaling.x-k8s.io/v1beta1` CapacityBuffer (feature gate `CapacityBuffer`).
//! - [`labels`]: well-known labels, annotations, taints and the finalizer.
//! - [`duration`] and [`cron`]: Go durations and budget schedules.
//! - [`crd`]: the CustomResourceDefinitions; [`validation`]: checks manifests against them.
//! - [`convert`]: turns `karpenter.sh/v1beta1` NodePools into `v1`.

// The `cluster_resource!` macro names this crate by its name, from inside and outside alike.
extern crate self as karpenter_api;

pub mod capacitybuffer;
pub mod convert;
pub mod crd;
pub mod cron;
pub mod dra;
pub mod duration;
pub mod hash;
pub mod labels;
pub mod nodeclaim;
pub mod nodeoverlay;
pub mod nodepool;
mod resource;
pub mod validation;

pub use duration::{Duration, NillableDuration};
pub use nodeclaim::{
    NodeClaim, NodeClaimSpec, NodeClaimStatus, NodeClassReference,
    NodeSelectorRequirementWithMinValues, Operator,
};
/// What [`cluster_resource!`] expands to needs; not part of the API.
#[doc(hidden)]
pub mod __private {
    pub use k8s_openapi;
    pub use serde;
}

pub use nodepool::{
    Budget, ConsolidationPolicy, Disruption, DisruptionReason, NodePool, NodePoolSpec,
};
