//! Provider-neutral scheduling primitives: label requirements, their algebra, and taints.

pub mod requirement;

pub use requirement::Requirement;
