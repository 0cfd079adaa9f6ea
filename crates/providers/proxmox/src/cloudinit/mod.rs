//! Cloud-init NoCloud data for the VMs upstream gives a `cdrom` metadata option
//! (`pkg/providers/instance/instance_cloudinit.go`, `pkg/providers/instance/cloudinit/`).
//!
//! * [`template`]: the user's Go templates rendered with upstream's function set;
//! * [`values`]: what the templates see (`.Metadata`, `.Network`, `.Resources`,
//!   `.Kubernetes`, `.Values`), built from the VM's config, the instance type and the
//!   NodeClass;
//! * [`defaults`]: the documents used where the user's Secret has no key;
//! * [`render`]: the four documents, as upstream's `generateCloudInitVars` makes them;
//! * [`iso`]: the `cidata` ISO image carrying them;
//! * [`bootstrap`]: the Kubernetes bootstrap token the node joins with.

pub mod bootstrap;
pub mod defaults;
pub mod iso;
pub mod template;
pub mod values;

mod render;

pub use render::{
    META_DATA_KEY, NETWORK_CONFIG_KEY, NoCloud, USER_DATA_KEY, VENDOR_DATA_KEY, render,
};
