//! The Azure provider. So far its pure part only: the simulator's `azure` catalog
//! ([`catalog`]: VM sizes in eastus with AKS's allocatable, as upstream's
//! karpenter-provider-azure computes it). The `AKSNodeClass` and launches through ARM are to
//! come; the registration already names the NodeClass so `convert` recognises AKS NodePools.

pub mod aksnodeclass;
pub mod catalog;

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
