//! The Alibaba Cloud provider, after cloudpilot-ai's. So far:
//!
//! * the `ECSNodeClass` API ([`ecsnodeclass`]: upstream's schema, CEL rules, defaults and
//!   hash);
//! * instance types ([`instancetype`]: `DescribeInstanceTypes` and `DescribeAvailableResource`
//!   answers made into instance types with ACK's allocatable, zonal on-demand and spot
//!   offerings) and prices ([`pricing`]: the embedded per-region table, the price server's
//!   refresh, spot from `DescribeSpotPriceHistory`); with the `cloud` feature, the calls that
//!   fetch them (`catalog_api`);
//! * the node bootstrap ([`cluster`]: ACK's attach script finished with the node's labels,
//!   taints and kubelet configuration and merged with the user's data into a MIME document, or
//!   the user's data alone in a custom cluster; the cluster's CNI and the images ACK offers,
//!   with the `cloud` feature fetched through ACK's ROA API);
//! * the simulator's `alibaba` catalog ([`catalog`]: ECS instance types in cn-hangzhou built
//!   the same way);
//! * the wire: request signing ([`auth::acs3`], the `ACS3-HMAC-SHA256` signature the SDKs use,
//!   and the legacy [`auth::rpc`] one), regional [`endpoint`]s, what error codes mean
//!   ([`errors`]); and, with the `cloud` feature, the credential chain
//!   (`auth::credentials`: environment keys, RRSA, the Alibaba CLI's config file, the ECS
//!   instance's RAM role) and the `client` for ECS, VPC and STS (RPC) and ACK (ROA).
//!
//! * what an ECSNodeClass's selectors resolve to: [`vswitch`]es (`DescribeVSwitches`),
//!   [`securitygroup`]s (`DescribeSecurityGroups`), images ([`imagefamily`]: ACK's image
//!   families, `DescribeImages`, the image an instance type boots), and the status written
//!   from them ([`nodeclass_status`]: the conditions, when to look again).
//!
//! ECS launches (the `CloudProvider`) are to come.

pub mod auth;
pub mod catalog;
#[cfg(feature = "cloud")]
pub mod catalog_api;
#[cfg(feature = "cloud")]
pub mod client;
pub mod cluster;
pub mod drift;
#[cfg(feature = "cloud")]
pub mod ecs;
pub mod ecsnodeclass;
pub mod endpoint;
pub mod errors;
pub mod imagefamily;
pub mod instance;
pub mod instancetype;
pub mod interruption;
pub mod launch;
pub mod nodeclass_status;
#[cfg(feature = "cloud")]
mod nonce;
#[cfg(feature = "cloud")]
pub mod operator;
pub mod pricing;
#[cfg(feature = "cloud")]
pub mod provider;
pub mod securitygroup;
pub mod time;
pub mod vswitch;

use karpenter_api::crd::{Crd, GroupKind, RestrictedLabelDomain};
use karpenter_cloudprovider::Registration;

pub use ecsnodeclass::{ECSNodeClass, ECSNodeClassSpec, ECSNodeClassStatus};

/// The API group of the Alibaba Cloud provider's NodeClass and labels.
pub const GROUP: &str = "karpenter.k8s.alibabacloud";

/// The NodeClass CRDs of this provider.
pub const CRDS: &[Crd] = &[ecsnodeclass::CRD];

/// The keys of the provider's label domain ([`GROUP`]) NodePools and NodeClaims may use:
/// the labels upstream registers as well known in it (`WellKnownLabels`; upstream refuses
/// the rest of its `RestrictedLabelDomains` at runtime) and the NodeClass label karpenter
/// puts on every NodeClaim.
pub const WELL_KNOWN_LABELS: [&str; 12] = [
    instancetype::LABEL_INSTANCE_CATEGORY,
    instancetype::LABEL_INSTANCE_FAMILY,
    instancetype::LABEL_INSTANCE_GENERATION,
    instancetype::LABEL_INSTANCE_SIZE,
    instancetype::LABEL_INSTANCE_CPU,
    instancetype::LABEL_INSTANCE_CPU_MODEL,
    instancetype::LABEL_INSTANCE_MEMORY,
    instancetype::LABEL_INSTANCE_GPU_NAME,
    instancetype::LABEL_INSTANCE_GPU_MANUFACTURER,
    instancetype::LABEL_INSTANCE_GPU_COUNT,
    instancetype::LABEL_INSTANCE_GPU_MEMORY,
    "karpenter.k8s.alibabacloud/ecsnodeclass",
];

/// The label domain the Alibaba Cloud provider restricts to [`WELL_KNOWN_LABELS`].
pub const LABEL_DOMAINS: &[RestrictedLabelDomain] =
    &[RestrictedLabelDomain::new(GROUP, &WELL_KNOWN_LABELS)];

/// [`Registration::static_drift`]: the claim's static drift from a NodeClass written as JSON.
fn static_drift(
    class: &serde_json::Value,
    claim: &karpenter_api::NodeClaim,
) -> Option<&'static str> {
    let class: ECSNodeClass = serde_json::from_value(class.clone()).ok()?;
    drift::static_drift(claim, &class)
}

/// The Alibaba Cloud provider, as the binary's registry lists it.
pub const REGISTRATION: Registration = Registration {
    name: "alibaba",
    node_class: GroupKind::new(GROUP, "ECSNodeClass"),
    crds: CRDS,
    conversions: &[],
    catalog: Some(catalog::catalog),
    static_drift: Some(static_drift),
};
