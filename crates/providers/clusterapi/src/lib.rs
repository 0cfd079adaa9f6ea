//! The Cluster API provider, after kubernetes-sigs/karpenter-provider-cluster-api: Karpenter on
//! any cloud or distribution Cluster API reaches, by scaling MachineDeployments and claiming
//! the Machines they make.
//!
//! Pure (what `validate`, `crds` and the tests use; no Kubernetes client):
//! - [`nodeclass`]: `ClusterAPINodeClass` (`karpenter.cluster.x-k8s.io/v1alpha1`), its CRD
//!   and conditions;
//! - [`capi`]: the Cluster API objects read (MachineDeployment, MachineSet, Machine in
//!   `cluster.x-k8s.io/v1beta1` and `v1beta2`), their well-known labels and annotations, the
//!   template hash drift compares;
//! - [`shape`]: what a MachineDeployment's scale-from-zero annotations (the Cluster
//!   Autoscaler's) say its nodes are, every bad annotation named;
//! - [`instancetype`]: the selected MachineDeployments made into instance types and offerings;
//! - [`claim`]: the decisions of a launch (how far to scale, which Machine to claim) and of a
//!   deletion;
//! - [`nodeclass_status`]: the NodeClass's status from what its selector finds.
//!
//! With the `cloud` feature: `management` (the management cluster's client, its settings and
//! API version), `provider` (the `CloudProvider`) and `operator` (how the controller binary
//! builds it).

pub mod capi;
pub mod claim;
pub mod instancetype;
#[cfg(feature = "cloud")]
pub mod management;
pub mod nodeclass;
pub mod nodeclass_status;
#[cfg(feature = "cloud")]
pub mod operator;
#[cfg(feature = "cloud")]
pub mod provider;
pub mod shape;

use karpenter_api::crd::{Crd, GroupKind, RestrictedLabelDomain};
use karpenter_cloudprovider::Registration;

pub use nodeclass::{ClusterAPINodeClass, ClusterAPINodeClassSpec, ClusterAPINodeClassStatus};

/// The API group of the provider's NodeClass, labels and annotations.
pub const GROUP: &str = "karpenter.cluster.x-k8s.io";

/// The NodeClass CRDs of this provider.
pub const CRDS: &[Crd] = &[nodeclass::CRD];

/// The keys of the provider's label domain ([`GROUP`]) NodePools and NodeClaims may use:
/// the labels upstream registers as well known in it (`WellKnownLabels`, in its operator
/// and its API package; upstream refuses the rest of its `RestrictedLabelDomains` at
/// runtime) and the NodeClass label karpenter puts on every NodeClaim.
pub const WELL_KNOWN_LABELS: [&str; 7] = [
    instancetype::INSTANCE_SIZE_LABEL,
    instancetype::INSTANCE_FAMILY_LABEL,
    instancetype::INSTANCE_CPU_LABEL,
    instancetype::INSTANCE_MEMORY_LABEL,
    "capacity.karpenter.cluster.x-k8s.io/cpu",
    "capacity.karpenter.cluster.x-k8s.io/memory",
    "karpenter.cluster.x-k8s.io/clusterapinodeclass",
];

/// The label domain the Cluster API provider restricts to [`WELL_KNOWN_LABELS`].
pub const LABEL_DOMAINS: &[RestrictedLabelDomain] =
    &[RestrictedLabelDomain::new(GROUP, &WELL_KNOWN_LABELS)];

/// The Cluster API provider, as the binary's registry lists it. It has no catalog: its
/// instance types are the cluster's MachineDeployments (`karpenter-rs plan` shows them).
pub const REGISTRATION: Registration = Registration {
    name: "clusterapi",
    node_class: GroupKind::new(GROUP, "ClusterAPINodeClass"),
    crds: CRDS,
    conversions: &[],
    catalog: None,
    static_drift: None,
};
