//! The AWS cloud provider.
//!
//! - [`instancetype`]: EC2 instance types as the scheduler sees them (capacity, overhead,
//!   labels, offerings), from DescribeInstanceTypes or the embedded us-east-1 catalog.
//! - [`pricing`]: on-demand and spot prices.
//!
//! The EC2NodeClass API types live in `karpenter-api` (so `karpenter-rs validate` and the CRD
//! generator share one schema machinery) and are re-exported here.

pub mod instancetype;
pub mod pricing;

pub use karpenter_api::aws::{EC2NodeClass, EC2NodeClassSpec, EC2NodeClassStatus};

#[cfg(feature = "cloud")]
pub mod auth;
#[cfg(feature = "cloud")]
pub mod ec2;
#[cfg(feature = "cloud")]
pub mod http;
#[cfg(feature = "cloud")]
pub mod iam;
pub mod interruption;
#[cfg(feature = "cloud")]
pub mod interruption_controller;
pub mod launch;
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
pub mod unavailable;
pub mod userdata;
