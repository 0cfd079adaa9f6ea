//! The instance-type catalogs the simulator launches from. Each provider crate owns its own
//! (instance types, prices, its allocatable formula); the binary's registry names them, and
//! the simulator takes whichever it is given.

pub use karpenter_cloudprovider::Catalog;
