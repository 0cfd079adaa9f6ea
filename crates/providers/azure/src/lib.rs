//! The Azure provider. So far its pure part only: the simulator's `azure` catalog
//! ([`catalog`]: VM sizes in eastus with AKS's allocatable, as upstream's
//! karpenter-provider-azure computes it). The `AKSNodeClass` and launches through ARM are to
//! come; the registration already names the NodeClass so `convert` recognises AKS NodePools.

pub mod catalog;
pub mod gpus;
pub mod instancetype;
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
