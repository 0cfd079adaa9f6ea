//! The Azure provider, being built. The pure part: the simulator's `azure` catalog
//! ([`catalog`], AKS's allocatable as upstream computes it), instance types from ARM's Resource
//! SKUs with upstream's filters ([`skus`], [`vmsize`], [`gpus`], [`instancetype`]), prices from
//! the Retail Prices API with an embedded fallback ([`pricing`]), and what ARM's capacity
//! errors block ([`offerings`]). With the `cloud` feature: Entra ID tokens ([`auth`]), ARM over
//! REST ([`arm`]) and node VMs ([`compute`]). Still to come: the `CloudProvider` that ties
//! them together, bootstrap, and the controller registration.

#[cfg(feature = "cloud")]
pub mod arm;
#[cfg(feature = "cloud")]
pub mod auth;
pub mod catalog;
#[cfg(feature = "cloud")]
pub mod compute;
pub mod gpus;
pub mod instancetype;
pub mod offerings;
pub mod pricing;
pub mod skus;
pub mod vmsize;

use karpenter_api::crd::GroupKind;
use karpenter_cloudprovider::Registration;

/// The API group of the Azure provider's NodeClass and labels.
pub const GROUP: &str = "karpenter.azure.com";

/// The Azure provider, as the binary's registry lists it.
pub const REGISTRATION: Registration = Registration {
    name: "azure",
    node_class: GroupKind::new(GROUP, "AKSNodeClass"),
    crds: &[],
    conversions: &[],
    catalog: Some(catalog::catalog),
};
