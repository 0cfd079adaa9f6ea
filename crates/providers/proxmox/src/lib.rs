//! The Proxmox VE provider, after sergelogvinov/karpenter-provider-proxmox: Karpenter for
//! Proxmox clusters (homelabs and on-premises), making nodes by cloning VM templates.
//!
//! * the APIs ([`apis`]: `ProxmoxNodeClass`, `ProxmoxTemplate`, `ProxmoxUnmanagedTemplate`,
//!   upstream's schemas, rules, defaults and hashes);
//! * instance types ([`instancetype`]: upstream's synthetic families or a file of the
//!   operator's), what the Proxmox nodes have room for ([`capacity`]), which node a VM goes to
//!   ([`placement`]) and prices by upstream's formula ([`pricing`]);
//! * the simulator's `proxmox` catalog ([`catalog`]);
//! * cloud-init NoCloud data rendered from the user's Go templates and packed as an ISO
//!   ([`cloudinit`]);
//! * the Proxmox VE API ([`pve`]: the clusters' config file, token and ticket auth, tasks);
//! * managed templates built from their cloud image ([`template_build`]), and with the
//!   `cloud` feature the loops that build them and follow unmanaged ones (`template_status`);
//! * tags, security groups and resource pool kept current on running VMs ([`inplace`]);
//! * with the `cloud` feature, the `CloudProvider` (`provider`, `instance`, `bootstrap`) and
//!   its settings (`operator`).

pub mod apis;
#[cfg(feature = "cloud")]
pub mod bootstrap;
pub mod capacity;
pub mod catalog;
pub mod cloudinit;
pub mod drift;
pub mod inplace;
#[cfg(feature = "cloud")]
pub mod instance;
pub mod instancetype;
pub mod nodeclass_status;
#[cfg(feature = "cloud")]
pub mod operator;
pub mod placement;
pub mod pricing;
#[cfg(feature = "cloud")]
pub mod provider;
pub mod provider_id;
pub mod pve;
pub mod template_build;
#[cfg(feature = "cloud")]
pub mod template_status;
pub mod templates;

use karpenter_api::crd::{Crd, GroupKind, RestrictedLabelDomain};
use karpenter_cloudprovider::Registration;

pub use apis::{
    GROUP, ProxmoxNodeClass, ProxmoxNodeClassSpec, ProxmoxNodeClassStatus, ProxmoxTemplate,
    ProxmoxTemplateSpec, ProxmoxTemplateStatus, ProxmoxUnmanagedTemplate,
    ProxmoxUnmanagedTemplateSpec,
};

/// The CRDs of this provider: the NodeClass and the two template kinds.
pub const CRDS: &[Crd] = &apis::CRDS;

/// The keys of the provider's label domain ([`apis::RESTRICTED_LABEL_DOMAIN`]) NodePools
/// and NodeClaims may use: upstream's well-known labels ([`apis::WELL_KNOWN_LABELS`];
/// upstream refuses the rest of the domain at runtime) and the NodeClass label karpenter
/// puts on every NodeClaim.
pub const ALLOWED_LABELS: [&str; 4] = [
    apis::LABEL_INSTANCE_FAMILY,
    apis::LABEL_INSTANCE_CPU_TYPE,
    apis::LABEL_INSTANCE_IMAGE_ID,
    "karpenter.proxmox.sinextra.dev/proxmoxnodeclass",
];

/// The label domain the Proxmox VE provider restricts to [`ALLOWED_LABELS`].
pub const LABEL_DOMAINS: &[RestrictedLabelDomain] = &[RestrictedLabelDomain::new(
    apis::RESTRICTED_LABEL_DOMAIN,
    &ALLOWED_LABELS,
)];

/// [`Registration::static_drift`]: the claim's static drift from a NodeClass written as JSON.
fn static_drift(
    class: &serde_json::Value,
    claim: &karpenter_api::NodeClaim,
) -> Option<&'static str> {
    let class: ProxmoxNodeClass = serde_json::from_value(class.clone()).ok()?;
    drift::static_drift(claim, &class)
}

/// The Proxmox VE provider, as the binary's registry lists it.
pub const REGISTRATION: Registration = Registration {
    name: "proxmox",
    node_class: GroupKind::new(GROUP, "ProxmoxNodeClass"),
    crds: CRDS,
    conversions: &[],
    catalog: Some(catalog::catalog),
    static_drift: Some(static_drift),
};
