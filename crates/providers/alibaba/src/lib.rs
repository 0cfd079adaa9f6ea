//! The Alibaba Cloud provider. So far:
//!
//! * the simulator's `alibaba` catalog ([`catalog`]: ECS instance types in cn-hangzhou with
//!   ACK's allocatable, as the cloudpilot-ai provider computes it);
//! * the wire: request signing ([`auth::acs3`], the `ACS3-HMAC-SHA256` signature the SDKs use,
//!   and the legacy [`auth::rpc`] one), regional [`endpoint`]s, what error codes mean
//!   ([`errors`]); and, with the `cloud` feature, the credential chain
//!   (`auth::credentials`: environment keys, RRSA, the Alibaba CLI's config file, the ECS
//!   instance's RAM role) and the RPC `client` for ECS, VPC and STS.
//!
//! The `ECSNodeClass` and ECS launches are to come; the registration already names the
//! NodeClass so `convert` recognises its NodePools.

pub mod auth;
pub mod catalog;
#[cfg(feature = "cloud")]
pub mod client;
pub mod endpoint;
pub mod errors;
#[cfg(feature = "cloud")]
mod retry;
pub mod time;

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
