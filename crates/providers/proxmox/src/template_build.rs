//! Managed templates: what a `ProxmoxTemplate` becomes on the Proxmox nodes, as upstream's
//! instance-template provider builds it.
//!
//! Proxmox downloads the template's cloud image into a storage holding `import` content on a
//! node, the provider creates a VM whose boot disk is imported from that image onto a storage
//! holding `images`, then makes it a template. Each node (zone) that has both kinds of storage
//! gets one template VM; a shared `images` storage gets a single one, which every node can clone
//! from. A template VM belongs to a `ProxmoxTemplate` when it carries the object's name and a
//! `Hash: N` in its description — upstream writes both, so templates upstream built are found
//! again — and it is current when `N` is the spec's [`hash`](crate::apis::ProxmoxTemplateSpec::hash).
//!
//! A pass is:
//!
//! 1. [`plan`] (pure): per region and zone, keep the current template or build one (replacing
//!    older ones of the same object once the new one is made); which regions cannot be served
//!    and why; what is left to delete (outdated templates elsewhere, the previous image);
//! 2. `apply` (feature `cloud`): the Proxmox calls in upstream's order, each task waited for,
//!    a half-made VM deleted again; every zone is tried whatever happened to the others;
//! 3. [`status`] (pure): the object's status from the plan and what applying it did.
//!
//! The finalizer's side is [`removal`] (pure: every template VM and downloaded image of the
//! object) and `remove` (feature `cloud`). [`unmanaged_status`] is the status of a
//! `ProxmoxUnmanagedTemplate` from the template inventory.

mod options;
mod outcome;
mod plan;
mod status;

#[cfg(feature = "cloud")]
mod apply;

pub use options::{
    DEFAULT_DESCRIPTION, VmOptions, description, ipconfig, network_device, template_tags,
};
pub use outcome::{
    BuildFailure, Outcome, Ready, RemovalResult, Step, Target, ZoneOutcome, ZoneState,
};
pub use plan::{
    CONTENT_IMAGES, CONTENT_IMPORT, ImageVolume, Plan, Removal, StorageInfo, Unserved, ZoneAction,
    ZonePlan, is_managed_by, plan, removal,
};
pub use status::{
    MESSAGE_TEMPLATES_NOT_FOUND, Pass, REASON_IMAGE_DOWNLOAD_FAILED, REASON_IMAGE_NOT_DOWNLOADED,
    REASON_INVALID_SPEC, REASON_STORAGE_NOT_FOUND, REASON_TEMPLATE_BUILD_FAILED,
    REASON_TEMPLATE_NOT_BUILT, REASON_TEMPLATE_VALIDATION, REASON_TEMPLATES_NOT_FOUND, status,
    unmanaged_status,
};

#[cfg(feature = "cloud")]
pub use apply::{ApplyOptions, FIRST_TEMPLATE_VMID, apply, remove};
