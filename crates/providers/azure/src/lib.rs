//! The Azure provider, being built. The pure part: the `AKSNodeClass` API ([`aksnodeclass`]:
//! upstream's schema, CEL rules, defaults and hash), the simulator's `azure` catalog
//! ([`catalog`], AKS's allocatable as upstream computes it), instance types from ARM's Resource
//! SKUs with upstream's filters ([`skus`], [`vmsize`], [`gpus`], [`instancetype`]), prices from
//! the Retail Prices API with an embedded fallback ([`pricing`]), what ARM's capacity errors
//! block ([`offerings`]), and which AKS node image a NodeClaim boots ([`images`]: each family's
//! image definitions, `status.images`, the pick per instance type). With the `cloud` feature:
//! Entra ID tokens ([`auth`]), ARM over REST ([`arm`]), node VMs ([`compute`]) and the
//! community galleries' latest image versions (`images::CommunityImages`). Still to come: the
//! `CloudProvider` that ties them together, bootstrap, and the controller registration.

pub mod aksnodeclass;
pub mod allocation;
#[cfg(feature = "cloud")]
pub mod arm;
#[cfg(feature = "cloud")]
pub mod auth;
pub mod bootstrap;
pub mod catalog;
#[cfg(feature = "cloud")]
pub mod catalog_api;
pub mod cloud;
#[cfg(feature = "cloud")]
pub mod compute;
pub mod drift;
pub mod gpus;
pub mod images;
pub mod instancetype;
pub mod labels;
pub mod network;
#[cfg(feature = "cloud")]
pub mod nodeclass_status;
pub mod offerings;
#[cfg(feature = "cloud")]
pub mod operator;
pub mod pricing;
#[cfg(feature = "cloud")]
pub mod provider;
pub mod skus;
pub mod vmsize;

pub use aksnodeclass::{AKSNodeClass, AKSNodeClassSpec, AKSNodeClassStatus};

use karpenter_api::crd::{Crd, GroupKind};
use karpenter_cloudprovider::{NodeClassConversion, Registration};

/// The NodeClass CRDs of this provider.
pub const CRDS: &[Crd] = &[aksnodeclass::CRD];

/// The API group of the Azure provider's NodeClass and labels.
pub const GROUP: &str = "karpenter.azure.com";

/// The Azure provider, as the binary's registry lists it.
pub const REGISTRATION: Registration = Registration {
    name: "azure",
    node_class: GroupKind::new(GROUP, "AKSNodeClass"),
    crds: CRDS,
    conversions: &[NodeClassConversion {
        from_api_version: "karpenter.azure.com/v1alpha2",
        kind: "AKSNodeClass",
        convert: aksnodeclass::conversion::convert_v1alpha2,
    }],
    catalog: Some(catalog::catalog),
};
