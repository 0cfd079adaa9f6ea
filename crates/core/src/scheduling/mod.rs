//! Provider-neutral scheduling primitives: label requirements, their algebra, and taints.

pub mod requirement;
pub mod requirements;
pub mod taints;

pub use requirement::Requirement;
pub use requirements::{AllowUndefined, Incompatible, Requirements};
