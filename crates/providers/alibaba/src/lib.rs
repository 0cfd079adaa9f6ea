//! The Alibaba Cloud provider, after cloudpilot-ai's. So far its pure part: the `ECSNodeClass`
//! API ([`ecsnodeclass`]: upstream's schema, CEL rules, defaults and hash) and the simulator's
//! `alibaba` catalog ([`catalog`]: ECS instance types in cn-hangzhou with ACK's allocatable,
//! as the cloudpilot-ai provider computes it). ECS launches are to come.

pub mod catalog;
pub mod ecsnodeclass;

use karpenter_api::crd::{Crd, GroupKind};
use karpenter_cloudprovider::Registration;

pub use ecsnodeclass::{ECSNodeClass, ECSNodeClassSpec, ECSNodeClassStatus};

/// The API group of the Alibaba Cloud provider's NodeClass and labels.
pub const GROUP: &str = "karpenter.k8s.alibabacloud";

/// The NodeClass CRDs of this provider.
pub const CRDS: &[Crd] = &[ecsnodeclass::CRD];

/// The Alibaba Cloud provider, as the binary's registry lists it.
pub const REGISTRATION: Registration = Registration {
    name: "alibaba",
    node_class: GroupKind::new(GROUP, "ECSNodeClass"),
    crds: CRDS,
    conversions: &[],
    catalog: Some(catalog::catalog),
};
