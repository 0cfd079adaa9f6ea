//! The Proxmox VE API.
//!
//! * [`config`]: the clusters config file, one cluster per region (pure);
//! * [`upid`]: task ids, which name the node a task runs on (pure);
//! * [`types`]: what the API answers and takes, typed; [`error`]: its error answers and what
//!   they mean ("not found" in particular); [`form`]: how parameters are encoded (pure);
//! * with the `cloud` feature, [`client::PveClient`] for one cluster (token or ticket login,
//!   TLS by the config, retries for reads, tasks followed to their end) with the calls the
//!   provider makes, grouped by what they act on ([`cluster`], [`vm`], [`storage`],
//!   [`firewall`]), and [`multi::PvePool`], a client per region.

pub mod config;
pub mod error;
pub mod form;
pub mod types;
pub mod upid;

#[cfg(feature = "cloud")]
pub mod client;
#[cfg(feature = "cloud")]
pub mod cluster;
#[cfg(feature = "cloud")]
pub mod firewall;
#[cfg(feature = "cloud")]
pub mod multi;
#[cfg(feature = "cloud")]
pub mod storage;
#[cfg(feature = "cloud")]
pub mod vm;

pub use config::{ClustersConfig, ConfigError, Credentials};
pub use error::{ApiError, PveError};
pub use upid::Upid;

#[cfg(feature = "cloud")]
pub use client::PveClient;
#[cfg(feature = "cloud")]
pub use multi::PvePool;
