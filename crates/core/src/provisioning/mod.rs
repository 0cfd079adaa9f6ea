//! Provisioning: deciding which nodes to launch for pods that cannot schedule.

pub mod scheduling;
