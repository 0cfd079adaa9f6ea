//! The KWOK provider: an "instance" is a Node object with providerID `kwok://NAME`, so
//! karpenter-rs runs on any cluster (kind, k3d) with no cloud, as upstream's KWOK provider
//! does. With [KWOK](https://kwok.sigs.k8s.io) installed, those nodes get kubelet-like status
//! and pods bound to them appear to run.
//!
//! Pure (what `validate`, `crds`, the simulator and the planner use; no Kubernetes client):
//! - [`nodeclass`]: `KWOKNodeClass` (`karpenter.kwok.sh/v1alpha1`), its type and CRD.
//! - [`catalog`]: upstream's 144 generated instance types, the `kwok` catalog.
//! - [`REGISTRATION`]: what the binary's registry knows of this provider.
//!
//! The provider (`cloud`, on by default): [`provider`], the controller's `CloudProvider`.

pub mod catalog;
pub mod nodeclass;

#[cfg(feature = "cloud")]
pub mod provider;

pub use nodeclass::{KWOKNodeClass, KwokNodeClassSpec, KwokNodeClassStatus};
#[cfg(feature = "cloud")]
pub use provider::KwokProvider;

use karpenter_api::crd::{Crd, GroupKind, RestrictedLabelDomain};
use karpenter_cloudprovider::Registration;

/// The NodeClass CRDs of this provider.
pub const CRDS: &[Crd] = &[nodeclass::CRD];

/// The keys of the `karpenter.kwok.sh` domain requirements may use: upstream's list
/// (`kwok/hack/validation/requirements.sh`), the NodeClass label and the instance-type labels.
pub const WELL_KNOWN_LABELS: [&str; 5] = [
    "karpenter.kwok.sh/kwoknodeclass",
    catalog::KWOK_LABELS[2],
    catalog::KWOK_LABELS[3],
    catalog::KWOK_LABELS[1],
    catalog::KWOK_LABELS[0],
];

/// The label domain the KWOK provider restricts to [`WELL_KNOWN_LABELS`]: in NodePool and
/// NodeClaim requirements only, as upstream.
pub const LABEL_DOMAINS: &[RestrictedLabelDomain] =
    &[RestrictedLabelDomain::new(nodeclass::GROUP, &WELL_KNOWN_LABELS).requirements_only()];

/// The KWOK provider, as the binary's registry lists it.
pub const REGISTRATION: Registration = Registration {
    name: "kwok",
    node_class: GroupKind::new(nodeclass::GROUP, "KWOKNodeClass"),
    crds: CRDS,
    conversions: &[],
    catalog: Some(catalog::catalog),
    static_drift: None,
};
