//! `karpenter.proxmox.sinextra.dev/v1alpha1`: the Proxmox VE provider's three kinds, field for
//! field as sergelogvinov/karpenter-provider-proxmox's, so existing manifests apply unchanged.
//!
//! * [`ProxmoxNodeClass`]: how nodes are made — which template they are cloned from, the boot
//!   disk, the cloud-init metadata, kubelet settings, tags, firewall security groups and pool;
//! * [`ProxmoxTemplate`]: a VM template the provider builds on every Proxmox node from a cloud
//!   image it downloads;
//! * [`ProxmoxUnmanagedTemplate`]: a VM template the user made, found by name or tags.
//!
//! Each kind's CRD ([`NODE_CLASS_CRD`], [`TEMPLATE_CRD`], [`UNMANAGED_TEMPLATE_CRD`], together
//! [`CRDS`]) is generated from this crate with upstream's schema: every field, default, enum,
//! pattern, bound and CEL rule as its generated CRD has them, its printer columns and the
//! `karpenter` category. What the schema cannot say but upstream refuses later (when it reads an
//! object or makes a node) is each kind's `validate_for_create`, also run as the CRD's runtime
//! checks so `karpenter-rs validate` reports it.
//!
//! Where upstream's Go markers and its generated CRD disagree, the CRD wins: it is what the API
//! server enforces.

use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use karpenter_api::crd::Crd;
use karpenter_cloudprovider::conditions::CONDITION_READY;

mod gohash;
mod hash;
mod nodeclass;
mod schema;
mod template;
#[cfg(test)]
mod tests;
mod unmanaged;

pub use hash::{
    PROXMOX_NODE_CLASS_HASH_ANNOTATION, PROXMOX_NODE_CLASS_HASH_VERSION,
    PROXMOX_NODE_CLASS_HASH_VERSION_ANNOTATION, PROXMOX_TEMPLATE_HASH_ANNOTATION,
    PROXMOX_TEMPLATE_HASH_VERSION, PROXMOX_TEMPLATE_HASH_VERSION_ANNOTATION, go_string_hash,
};
pub use nodeclass::{
    BlockDevice, CONDITION_INSTANCE_METADATA_OPTIONS_READY, CONDITION_INSTANCE_TEMPLATE_READY,
    DEFAULT_BOOT_DEVICE_SIZE, DEFAULT_SECURITY_GROUP_INTERFACE, InstanceTemplateKind,
    InstanceTemplateRef, KubeletConfiguration, MetadataOptions, MetadataType,
    NODE_CLASS_READY_CONDITIONS, PlacementStrategy, ProxmoxNodeClass, ProxmoxNodeClassSpec,
    ProxmoxNodeClassStatus, SecurityGroup, ZoneBalance,
};
pub use template::{
    CONDITION_TEMPLATE_IMAGE_READY, CONDITION_TEMPLATE_READY, Cpu, IpConfig, Network, PciDevice,
    ProxmoxTemplate, ProxmoxTemplateSpec, ProxmoxTemplateStatus, QemuGuestAgent, SourceImage,
    TEMPLATE_READY_CONDITIONS, Tpm, Vga,
};
pub use unmanaged::{ProxmoxUnmanagedTemplate, ProxmoxUnmanagedTemplateSpec};

/// The API group of the three kinds, and of the provider's labels and annotations.
pub const GROUP: &str = "karpenter.proxmox.sinextra.dev";
/// The only version upstream serves, stored.
pub const VERSION: &str = "v1alpha1";

/// `proxmoxnodeclasses.karpenter.proxmox.sinextra.dev`, with upstream's printer columns.
/// Upstream declares no short names, so neither does this.
pub const NODE_CLASS_CRD: Crd = nodeclass::CRD;
/// `proxmoxtemplates.karpenter.proxmox.sinextra.dev`, with upstream's printer columns.
pub const TEMPLATE_CRD: Crd = template::CRD;
/// `proxmoxunmanagedtemplates.karpenter.proxmox.sinextra.dev`, with upstream's printer
/// columns.
pub const UNMANAGED_TEMPLATE_CRD: Crd = unmanaged::CRD;
/// The provider's CRDs, the NodeClass first.
pub const CRDS: [Crd; 3] = [NODE_CLASS_CRD, TEMPLATE_CRD, UNMANAGED_TEMPLATE_CRD];

/// The finalizer the provider puts on its objects until their VMs and templates are gone.
pub const TERMINATION_FINALIZER: &str = "karpenter.proxmox.sinextra.dev/termination";

/// Node label: the instance family (`c1`, `s1`, `m1`, …).
pub const LABEL_INSTANCE_FAMILY: &str = "karpenter.proxmox.sinextra.dev/instance-family";
/// Node label: the emulated CPU type (`host`, `kvm64`, `x86-64-v2-AES`, …).
pub const LABEL_INSTANCE_CPU_TYPE: &str = "karpenter.proxmox.sinextra.dev/instance-cpu-type";
/// Node label: the image the node was cloned from (its template's hash).
pub const LABEL_INSTANCE_IMAGE_ID: &str = "karpenter.proxmox.sinextra.dev/instance-image-id";
/// Node label: the bootstrap token the node joined the cluster with.
pub const LABEL_BOOTSTRAP_TOKEN: &str = "karpenter.proxmox.sinextra.dev/bootstrap-token";
/// Node label read by awslabs/eks-node-viewer for the node's price.
pub const LABEL_NODE_VIEWER: &str = "eks-node-viewer/instance-price";
/// The labels upstream adds to karpenter's well-known labels, so NodePools may require them.
pub const WELL_KNOWN_LABELS: [&str; 3] = [
    LABEL_INSTANCE_FAMILY,
    LABEL_INSTANCE_CPU_TYPE,
    LABEL_INSTANCE_IMAGE_ID,
];
/// The label domain upstream restricts (NodePools may not set labels in it but the
/// well-known ones).
pub const RESTRICTED_LABEL_DOMAIN: &str = GROUP;

/// NodeClaim annotation: the resource pool the VM was put in, so a pool change moves it.
pub const ANNOTATION_NODE_CLASS_POOL: &str = "karpenter.proxmox.sinextra.dev/proxmoxnodeclass-pool";
/// ProxmoxTemplate annotation: the hash of the fields the provider updates in place.
pub const ANNOTATION_TEMPLATE_IN_PLACE_UPDATE_HASH: &str =
    "karpenter.proxmox.sinextra.dev/proxmoxtemplateinplaceupdate-hash";
/// NodeClaim annotation: the state of the node's cloud-init.
pub const ANNOTATION_CLOUD_INIT_STATUS: &str =
    "karpenter.proxmox.sinextra.dev/proxmoxcloudinit-status";
/// NodeClaim annotation: the id of the kubelet's bootstrap token.
pub const ANNOTATION_CLOUD_INIT_TOKEN: &str =
    "karpenter.proxmox.sinextra.dev/proxmoxcloudinit-token";
/// NodeClaim annotation: the NodeClass's in-place hash the VM was last updated to (tags,
/// security groups, pool).
pub const ANNOTATION_NODE_IN_PLACE_UPDATE_HASH: &str =
    "karpenter.proxmox.sinextra.dev/proxmoxnodeinplaceupdate-hash";

/// The status resource counting the zones (Proxmox nodes) a class or template is ready in.
pub const RESOURCE_ZONES: &str = "zones";

/// One thing wrong with an object: the field (`spec.bootDevice.size`) and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{field} {reason}")]
pub struct FieldError {
    /// The field, as `spec.sourceImage.imageName`.
    pub field: String,
    /// Why it is wrong, to follow the field's name.
    pub reason: String,
}

impl FieldError {
    fn new(field: &str, reason: impl Into<String>) -> Self {
        Self {
            field: field.to_string(),
            reason: reason.into(),
        }
    }
}

/// Everything `validate_for_create` found wrong with an object, in field order.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct InvalidSpec(pub Vec<FieldError>);

impl fmt::Display for InvalidSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let problems: Vec<String> = self.0.iter().map(ToString::to_string).collect();
        f.write_str(&problems.join("; "))
    }
}

impl InvalidSpec {
    /// `Ok` when nothing was found.
    fn check(problems: Vec<FieldError>) -> Result<(), InvalidSpec> {
        if problems.is_empty() {
            Ok(())
        } else {
            Err(InvalidSpec(problems))
        }
    }
}

/// One entry of a status's zones: a VM template (by VM id) on a Proxmox node (the zone) of a
/// Proxmox cluster (the region), written `region/zone/vmid` as upstream's statuses hold them.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SelectedZone {
    /// The Proxmox cluster.
    pub region: String,
    /// The Proxmox node.
    pub zone: String,
    /// The VM id of the template on that node.
    pub template_id: u64,
}

impl SelectedZone {
    /// Reads `region/zone/vmid`; `None` for anything else (upstream skips an entry of fewer
    /// parts; one whose id is not a number is skipped here too, where upstream would read it as
    /// template 0, which no VM has).
    pub fn parse(entry: &str) -> Option<Self> {
        let mut parts = entry.splitn(3, '/');
        let (region, zone, id) = (parts.next()?, parts.next()?, parts.next()?);
        Some(Self {
            region: region.to_string(),
            zone: zone.to_string(),
            template_id: id.parse().ok()?,
        })
    }
}

impl fmt::Display for SelectedZone {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}/{}", self.region, self.zone, self.template_id)
    }
}

/// Whether `conditions` hold `Ready=True` (as upstream's `StatusConditions().IsTrue()`).
fn ready(conditions: &[Condition]) -> bool {
    conditions
        .iter()
        .any(|c| c.type_ == CONDITION_READY && c.status == "True")
}

/// What the NodeClass's status and the provider read from either kind of template (upstream's
/// `ProxmoxCommonTemplate`).
pub trait CommonTemplate {
    /// The template's status, if it has one yet.
    fn template_status(&self) -> Option<&ProxmoxTemplateStatus>;

    /// The image the template's VMs boot: for a managed template the name its image is
    /// downloaded under (`None` while the spec cannot name one), for an unmanaged one what its
    /// status records.
    fn image_id(&self) -> Option<String>;

    /// The `region/zone/vmid` entries the template is ready in, as the status lists them.
    fn zones(&self) -> &[String] {
        self.template_status().map_or(&[], |s| s.zones.as_slice())
    }

    /// The zones the template is ready in, read; entries that do not read are left out.
    fn selected_zones(&self) -> Vec<SelectedZone> {
        self.zones()
            .iter()
            .filter_map(|z| SelectedZone::parse(z))
            .collect()
    }

    /// Whether the template's `Ready` condition is `True`.
    fn is_ready(&self) -> bool {
        self.template_status().is_some_and(|s| ready(&s.conditions))
    }
}
