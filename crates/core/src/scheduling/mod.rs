//! Provider-neutral scheduling primitives: label requirements, their algebra, and taints.

pub mod dynamic_resources;
pub mod hostports;
pub mod requirement;
pub mod requirements;
pub mod selector;
pub mod taints;
pub mod volumeusage;

pub use requirement::Requirement;
pub use requirements::{AllowUndefined, Incompatible, Requirements};
