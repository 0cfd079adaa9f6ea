//! The simulator: runs karpenter's decisions against an in-memory cluster on a virtual clock,
//! so users can see what it would launch and what it would cost before any cloud bill.

pub mod catalog;
pub mod compare;
pub mod engine;
pub mod report;
pub mod scenario;
pub mod svg;
