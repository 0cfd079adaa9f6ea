//! The boundary between karpenter-rs and a cloud provider, as upstream's
//! `pkg/cloudprovider`: what the controller asks of a cloud ([`CloudProvider`]), how a call
//! fails ([`CloudProviderError`]), and what a provider crate declares about itself
//! ([`Registration`]: its NodeClass kinds and its simulator catalog).
//!
//! This crate is small on purpose: a provider depends on it (and on `karpenter-api` and
//! `karpenter-core` for the types), never on the controller, so its pure part builds without
//! a Kubernetes client or a runtime. The instance-type model ([`InstanceType`], [`Offering`])
//! is `karpenter-core`'s, re-exported here, because the scheduling simulation works on it.

pub mod catalog;
pub mod conditions;
mod error;
#[cfg(feature = "fake")]
pub mod fake;
pub mod hooks;
#[cfg(feature = "http")]
pub mod http;
mod provider;
mod registration;
pub mod resolved;
pub mod settings;
pub mod unavailable;

pub use catalog::Catalog;
pub use error::{BoxError, Cause, CloudProviderError, Result};
pub use hooks::{HookResult, RegistrationHook};
pub use karpenter_core::instancetype::{
    InstanceType, Offering, Overhead, RepairPolicy, Reservation,
};
pub use provider::{CloudProvider, NodeClassReadiness};
pub use registration::{NodeClassConversion, Registration};
pub use resolved::ResolvedTypes;
pub use settings::SettingsError;
