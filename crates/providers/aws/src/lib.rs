//! The AWS cloud provider.
//!
//! Pure (no AWS calls; the simulator uses these without the `cloud` feature):
//! - [`instancetype`]: EC2 instance types as the scheduler sees them (capacity, overhead,
//!   labels, offerings), from DescribeInstanceTypes or the embedded us-east-1 catalog;
//!   [`pricing`]: on-demand, spot and reserved prices.
//! - [`launch`]: what one CreateFleet asks for; [`unavailable`]: offerings that just ran out
//!   of capacity; [`userdata`]: AL2023, AL2, Bottlerocket, Windows and Custom user data;
//!   [`interfaces`]: the network interfaces a launch template attaches.
//! - [`interruption`]: reading interruption messages and deciding what to do.
//!
//! Talking to AWS (`cloud`, on by default):
//! - [`auth`] (SigV4, credentials) and [`http`]; [`ec2`], [`ssm`], [`iam`], [`pricing_api`],
//!   [`sqs`], [`eks`]: the calls, each behind a trait a test can fake; [`version`]: the
//!   Kubernetes version kept current.
//! - [`operator`]: the settings (upstream's names) and how the controller builds and runs the
//!   provider.
//! - [`nodeclass`]: resolving an EC2NodeClass's selectors; [`provider`]: the controller's
//!   `CloudProvider`; [`nodeclass_status`] and [`interruption_controller`]: the provider's own
//!   loops beside the controller's.
//! - [`placementgroup`] (the NodeClass's placement group, its labels and drift),
//!   [`validation`] (`ValidationSucceeded`'s dry runs, through [`ec2_extra`]) and
//!   [`reservation_expiration`] (nodes of ending capacity blocks replaced ahead of EC2).
//!
//! The API, pure too: [`ec2nodeclass`] (`EC2NodeClass`, `karpenter.k8s.aws/v1`: the types,
//! the CRD with upstream's CEL rules, the hash, the v1beta1 conversion), [`catalog`] (the simulator's `aws` catalog) and
//! [`REGISTRATION`], what the binary's registry knows of this provider.

pub mod catalog;
pub mod ec2nodeclass;
pub mod instancetype;
pub mod interfaces;
pub mod interruption;
pub mod launch;
pub mod pricing;
pub mod unavailable;
pub mod userdata;

pub use ec2nodeclass::{EC2NodeClass, EC2NodeClassSpec, EC2NodeClassStatus};

use karpenter_api::crd::{Crd, GroupKind, RestrictedLabelDomain};
use karpenter_cloudprovider::{NodeClassConversion, Registration};

/// The NodeClass CRDs of this provider.
pub const CRDS: &[Crd] = &[ec2nodeclass::CRD];

/// The well-known labels of the `karpenter.k8s.aws` domain, the only keys in it that NodePool
/// and NodeClaim requirements and NodePool labels may use: the list upstream's
/// `hack/validation/requirements.sh` and `labels.sh` patch into karpenter's CRDs.
pub const WELL_KNOWN_LABELS: [&str; 29] = [
    "karpenter.k8s.aws/instance-tenancy",
    "karpenter.k8s.aws/capacity-reservation-type",
    "karpenter.k8s.aws/capacity-reservation-id",
    "karpenter.k8s.aws/capacity-reservation-interruptible",
    "karpenter.k8s.aws/ec2nodeclass",
    "karpenter.k8s.aws/instance-encryption-in-transit-supported",
    "karpenter.k8s.aws/nitro-sandbox",
    "karpenter.k8s.aws/instance-category",
    "karpenter.k8s.aws/instance-hypervisor",
    "karpenter.k8s.aws/instance-family",
    "karpenter.k8s.aws/instance-generation",
    "karpenter.k8s.aws/instance-local-nvme",
    "karpenter.k8s.aws/instance-size",
    "karpenter.k8s.aws/instance-cpu",
    "karpenter.k8s.aws/instance-cpu-manufacturer",
    "karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz",
    "karpenter.k8s.aws/instance-memory",
    "karpenter.k8s.aws/instance-ebs-bandwidth",
    "karpenter.k8s.aws/instance-network-bandwidth",
    "karpenter.k8s.aws/instance-gpu-name",
    "karpenter.k8s.aws/instance-gpu-manufacturer",
    "karpenter.k8s.aws/instance-gpu-count",
    "karpenter.k8s.aws/instance-gpu-memory",
    "karpenter.k8s.aws/instance-accelerator-name",
    "karpenter.k8s.aws/instance-accelerator-manufacturer",
    "karpenter.k8s.aws/instance-accelerator-count",
    "karpenter.k8s.aws/instance-capability-flex",
    "karpenter.k8s.aws/placement-group-id",
    "karpenter.k8s.aws/placement-group-partition",
];

/// The keys of [`WELL_KNOWN_LABELS`] NodeOverlay requirements may use: upstream leaves out
/// tenancy, capacity reservations and placement groups, which overlays do not support.
pub const NODE_OVERLAY_LABELS: [&str; 23] = [
    "karpenter.k8s.aws/ec2nodeclass",
    "karpenter.k8s.aws/instance-encryption-in-transit-supported",
    "karpenter.k8s.aws/nitro-sandbox",
    "karpenter.k8s.aws/instance-category",
    "karpenter.k8s.aws/instance-hypervisor",
    "karpenter.k8s.aws/instance-family",
    "karpenter.k8s.aws/instance-generation",
    "karpenter.k8s.aws/instance-local-nvme",
    "karpenter.k8s.aws/instance-size",
    "karpenter.k8s.aws/instance-cpu",
    "karpenter.k8s.aws/instance-cpu-manufacturer",
    "karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz",
    "karpenter.k8s.aws/instance-memory",
    "karpenter.k8s.aws/instance-ebs-bandwidth",
    "karpenter.k8s.aws/instance-network-bandwidth",
    "karpenter.k8s.aws/instance-gpu-name",
    "karpenter.k8s.aws/instance-gpu-manufacturer",
    "karpenter.k8s.aws/instance-gpu-count",
    "karpenter.k8s.aws/instance-gpu-memory",
    "karpenter.k8s.aws/instance-accelerator-name",
    "karpenter.k8s.aws/instance-accelerator-manufacturer",
    "karpenter.k8s.aws/instance-accelerator-count",
    "karpenter.k8s.aws/instance-capability-flex",
];

/// The label domain the AWS provider restricts to [`WELL_KNOWN_LABELS`].
pub const LABEL_DOMAINS: &[RestrictedLabelDomain] =
    &[
        RestrictedLabelDomain::new(ec2nodeclass::GROUP, &WELL_KNOWN_LABELS)
            .with_overlay_keys(&NODE_OVERLAY_LABELS),
    ];

/// [`Registration::static_drift`]: the claim's static drift from a NodeClass written as JSON.
fn static_drift(
    class: &serde_json::Value,
    claim: &karpenter_api::NodeClaim,
) -> Option<&'static str> {
    let class: ec2nodeclass::EC2NodeClass = serde_json::from_value(class.clone()).ok()?;
    class.static_drift(claim)
}

/// The AWS provider, as the binary's registry lists it.
pub const REGISTRATION: Registration = Registration {
    name: "aws",
    node_class: GroupKind::new(ec2nodeclass::GROUP, "EC2NodeClass"),
    crds: CRDS,
    conversions: &[NodeClassConversion {
        from_api_version: "karpenter.k8s.aws/v1beta1",
        kind: "EC2NodeClass",
        convert: ec2nodeclass::conversion::convert_v1beta1,
    }],
    catalog: Some(catalog::catalog),
    static_drift: Some(static_drift),
};

#[cfg(feature = "cloud")]
pub mod auth;
#[cfg(feature = "cloud")]
pub mod ec2;
#[cfg(feature = "cloud")]
pub mod ec2_extra;
#[cfg(feature = "cloud")]
pub mod eks;
#[cfg(feature = "cloud")]
pub mod http;
#[cfg(feature = "cloud")]
pub mod iam;
#[cfg(feature = "cloud")]
pub mod interruption_controller;
#[cfg(feature = "cloud")]
pub mod nodeclass;
#[cfg(feature = "cloud")]
pub mod nodeclass_status;
#[cfg(feature = "cloud")]
pub mod operator;
#[cfg(feature = "cloud")]
pub mod placementgroup;
#[cfg(feature = "cloud")]
pub mod pricing_api;
#[cfg(feature = "cloud")]
pub mod provider;
#[cfg(feature = "cloud")]
pub mod reservation_expiration;
#[cfg(feature = "cloud")]
pub mod sqs;
#[cfg(feature = "cloud")]
pub mod ssm;
#[cfg(feature = "cloud")]
pub mod validation;
#[cfg(feature = "cloud")]
pub mod version;
