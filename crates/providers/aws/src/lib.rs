//! The AWS cloud provider.
//!
//! Pure (no AWS calls; the simulator uses these without the `cloud` feature):
//! - [`instancetype`]: EC2 instance types as the scheduler sees them (capacity, overhead,
//!   labels, offerings), from DescribeInstanceTypes or the embedded us-east-1 catalog;
//!   [`pricing`]: on-demand, spot and reserved prices.
//! - [`launch`]: what one CreateFleet asks for; [`unavailable`]: offerings that just ran out
//!   of capacity; [`userdata`]: AL2023, Bottlerocket and Custom user data.
//! - [`interruption`]: reading interruption messages and deciding what to do.
//!
//! Talking to AWS (`cloud`, on by default):
//! - [`auth`] (SigV4, credentials) and [`http`]; [`ec2`], [`ssm`], [`iam`], [`pricing_api`],
//!   [`sqs`]: the calls, each behind a trait a test can fake.
//! - [`nodeclass`]: resolving an EC2NodeClass's selectors; [`provider`]: the controller's
//!   `CloudProvider`; [`nodeclass_status`] and [`interruption_controller`]: the provider's own
//!   loops beside the controller's.
//!
//! The EC2NodeClass API types live in `karpenter-api` (so `karpenter-rs validate` and the CRD
//! generator share one schema machinery) and are re-exported here.

pub mod instancetype;
pub mod interruption;
pub mod launch;
pub mod pricing;
pub mod unavailable;
pub mod userdata;

pub use karpenter_api::aws::{EC2NodeClass, EC2NodeClassSpec, EC2NodeClassStatus};

#[cfg(feature = "cloud")]
pub mod auth;
#[cfg(feature = "cloud")]
pub mod ec2;
#[cfg(feature = "cloud")]
pub mod http;
#[cfg(feature = "cloud")]
pub mod iam;
#[cfg(feature = "cloud")]
pub mod interruption_controller;
#[cfg(feature = "cloud")]
pub mod nodeclass;
#[cfg(feature = "cloud")]
pub mod nodeclass_status;
#[cfg(feature = "cloud")]
pub mod pricing_api;
#[cfg(feature = "cloud")]
pub mod provider;
#[cfg(feature = "cloud")]
pub mod sqs;
#[cfg(feature = "cloud")]
pub mod ssm;
