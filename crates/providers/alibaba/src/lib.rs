//! The Alibaba Cloud provider. So far its pure part only: the simulator's `alibaba` catalog
//! ([`catalog`]: ECS instance types in cn-hangzhou with ACK's allocatable, as the
//! cloudpilot-ai provider computes it). The `ECSNodeClass` and ECS launches are to come; the
//! registration already names the NodeClass so `convert` recognises its NodePools.

pub mod catalog;

use karpenter_api::crd::GroupKind;
use karpenter_cloudprovider::Registration;

/// The API group of the Alibaba Cloud provider's NodeClass and labels.
pub const GROUP: &str = "karpenter.k8s.alibabacloud";

/// The Alibaba Cloud provider, as the binary's registry lists it.
pub const REGISTRATION: Registration = Registration {
    name: "alibaba",
    node_class: GroupKind::new(GROUP, "ECSNodeClass"),
    crds: &[],
    conversions: &[],
    catalog: Some(catalog::catalog),
};
