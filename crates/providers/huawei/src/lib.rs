//! The Huawei Cloud provider, after huaweicloud-samples/karpenter-provider-huawei: Karpenter
//! on CCE, creating nodes through CCE's own `CreateNode` so CCE installs and joins them.
//!
//! * the `CCENodeClass` API ([`ccenodeclass`]: upstream's schema, CEL rules, defaults and
//!   hash);
//! * instance types ([`instancetype`]: ECS flavors and their per-zone sale status made into
//!   instance types with CCE's allocatable) and prices ([`pricing`]: the embedded table, BSS
//!   on-demand ratings);
//! * the simulator's `huawei` catalog ([`catalog`]);
//! * the wire: request signing ([`auth::signer`], `SDK-HMAC-SHA256`), regional [`endpoint`]s,
//!   what error codes mean ([`errors`]); with the `cloud` feature, the credential chain
//!   (`auth::credentials`) and the `client` for CCE, ECS, VPC, BSS and IAM.
//! * with the `cloud` feature, the `CloudProvider` (`provider`, `instance`: CCE nodes
//!   created, read and deleted), what the subnet selectors resolve to ([`subnet`]), the
//!   status written from them ([`nodeclass_status`]), drift ([`drift`]), the second pass that
//!   removes the unregistered taint CCE re-applies ([`unregistered_taint`]) and the settings
//!   (`operator`).

pub mod auth;
pub mod catalog;
#[cfg(feature = "cloud")]
pub mod catalog_api;
pub mod cce;
pub mod ccenodeclass;
#[cfg(feature = "cloud")]
pub mod client;
pub mod drift;
pub mod endpoint;
pub mod errors;
#[cfg(feature = "cloud")]
pub mod instance;
pub mod instancetype;
pub mod nodeclass_status;
#[cfg(feature = "cloud")]
pub mod operator;
pub mod pricing;
#[cfg(feature = "cloud")]
pub mod provider;
pub mod subnet;
pub mod unregistered_taint;

use karpenter_api::crd::{Crd, GroupKind, RestrictedLabelDomain};
use karpenter_cloudprovider::Registration;

pub use ccenodeclass::{CCENodeClass, CCENodeClassSpec, CCENodeClassStatus};

/// The API group of the Huawei Cloud provider's NodeClass, labels and annotations.
pub const GROUP: &str = "karpenter.k8s.huawei";

/// The NodeClass CRDs of this provider.
pub const CRDS: &[Crd] = &[ccenodeclass::CRD];

/// The keys of the provider's label domain ([`GROUP`]) NodePools and NodeClaims may use:
/// the labels upstream registers as well known in it (`WellKnownLabels`; upstream refuses
/// the rest of its `RestrictedLabelDomains` at runtime) and the NodeClass label karpenter
/// puts on every NodeClaim.
pub const WELL_KNOWN_LABELS: [&str; 9] = [
    instancetype::LABEL_INSTANCE_SIZE,
    instancetype::LABEL_INSTANCE_CPU,
    instancetype::LABEL_INSTANCE_MEMORY,
    instancetype::LABEL_INSTANCE_NETWORK_BANDWIDTH,
    instancetype::LABEL_INSTANCE_GPU_NAME,
    instancetype::LABEL_INSTANCE_GPU_MANUFACTURER,
    instancetype::LABEL_INSTANCE_GPU_COUNT,
    instancetype::LABEL_INSTANCE_GPU_MEMORY,
    "karpenter.k8s.huawei/ccenodeclass",
];

/// The label domain the Huawei Cloud provider restricts to [`WELL_KNOWN_LABELS`].
pub const LABEL_DOMAINS: &[RestrictedLabelDomain] =
    &[RestrictedLabelDomain::new(GROUP, &WELL_KNOWN_LABELS)];

/// [`Registration::static_drift`]: the claim's static drift from a NodeClass written as JSON.
fn static_drift(
    class: &serde_json::Value,
    claim: &karpenter_api::NodeClaim,
) -> Option<&'static str> {
    let class: CCENodeClass = serde_json::from_value(class.clone()).ok()?;
    drift::static_drift(claim, &class)
}

/// The Huawei Cloud provider, as the binary's registry lists it.
pub const REGISTRATION: Registration = Registration {
    name: "huawei",
    node_class: GroupKind::new(GROUP, "CCENodeClass"),
    crds: CRDS,
    conversions: &[],
    catalog: Some(catalog::catalog),
    static_drift: Some(static_drift),
};
