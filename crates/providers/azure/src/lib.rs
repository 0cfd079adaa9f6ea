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

use karpenter_api::crd::{Crd, GroupKind, RestrictedLabelDomain};
use karpenter_cloudprovider::{NodeClassConversion, Registration};

/// The NodeClass CRDs of this provider.
pub const CRDS: &[Crd] = &[aksnodeclass::CRD];

/// The API group of the Azure provider's NodeClass and labels.
pub const GROUP: &str = "karpenter.azure.com";

/// The well-known labels of the `karpenter.azure.com` domain, the only keys in it that
/// requirements and NodePool labels may use: the list upstream's
/// `hack/validation/requirements.sh` and `labels.sh` patch into karpenter's CRDs.
pub const WELL_KNOWN_LABELS: [&str; 15] = [
    "karpenter.azure.com/aksnodeclass",
    "karpenter.azure.com/sku-name",
    "karpenter.azure.com/sku-family",
    "karpenter.azure.com/sku-series",
    "karpenter.azure.com/sku-version",
    "karpenter.azure.com/sku-cpu",
    "karpenter.azure.com/sku-memory",
    "karpenter.azure.com/sku-networking-accelerated",
    "karpenter.azure.com/sku-storage-premium-capable",
    "karpenter.azure.com/sku-storage-ultra-ssd",
    "karpenter.azure.com/sku-storage-ephemeralos-maxsize",
    "karpenter.azure.com/sku-gpu-name",
    "karpenter.azure.com/sku-gpu-manufacturer",
    "karpenter.azure.com/sku-gpu-count",
    "karpenter.azure.com/placement-scope",
];

/// AKS's label domain, which upstream restricts the same way.
pub const AKS_LABEL_DOMAIN: &str = "kubernetes.azure.com";

/// The keys of [`AKS_LABEL_DOMAIN`] upstream allows: AKS's well-known labels and those
/// Cilium and Azure CNI select on.
pub const AKS_WELL_KNOWN_LABELS: [&str; 12] = [
    "kubernetes.azure.com/mode",
    "kubernetes.azure.com/scalesetpriority",
    "kubernetes.azure.com/priority",
    "kubernetes.azure.com/fips_enabled",
    "kubernetes.azure.com/os-sku",
    "kubernetes.azure.com/cluster",
    "kubernetes.azure.com/sku-cpu",
    "kubernetes.azure.com/sku-memory",
    "kubernetes.azure.com/ebpf-dataplane",
    "kubernetes.azure.com/ebpf-host-routing",
    "kubernetes.azure.com/network-policy",
    "kubernetes.azure.com/hostedvm",
];

/// AKS's legacy labels, which upstream refuses in NodePools and NodeClaims; refused here on
/// those of `AKSNodeClass`es only, since other providers' NodePools may use them.
pub const RESTRICTED_LABELS: [&str; 4] =
    ["agentpool", "storageprofile", "storagetier", "accelerator"];

/// The label domains the Azure provider restricts: [`GROUP`] to [`WELL_KNOWN_LABELS`] and
/// [`AKS_LABEL_DOMAIN`] to [`AKS_WELL_KNOWN_LABELS`], and [`RESTRICTED_LABELS`] refused on
/// the NodePools and NodeClaims of `AKSNodeClass`es.
pub const LABEL_DOMAINS: &[RestrictedLabelDomain] = &[
    RestrictedLabelDomain::new(GROUP, &WELL_KNOWN_LABELS).refusing(&RESTRICTED_LABELS),
    RestrictedLabelDomain::new(AKS_LABEL_DOMAIN, &AKS_WELL_KNOWN_LABELS),
];

/// [`Registration::static_drift`]: the claim's static drift from a NodeClass written as JSON.
fn static_drift(
    class: &serde_json::Value,
    claim: &karpenter_api::NodeClaim,
) -> Option<&'static str> {
    let class: AKSNodeClass = serde_json::from_value(class.clone()).ok()?;
    drift::static_drift(claim, &class)
}

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
    static_drift: Some(static_drift),
};
