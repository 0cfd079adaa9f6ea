//! Node repair policies (upstream's `RepairPolicy`): a node condition that, held for long
//! enough, means the node is broken and should be replaced.

use std::time::Duration;

/// One unhealthy node condition a provider knows how to repair by replacing the node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RepairPolicy {
    /// The node condition type (`Ready`, `AcceleratedHardwareReady`, …).
    pub condition_type: &'static str,
    /// The status that means unhealthy (`False`, `Unknown`).
    pub condition_status: &'static str,
    /// How long the condition must hold before the node is replaced.
    pub toleration: Duration,
}

impl RepairPolicy {
    /// A policy for `condition_type` at `condition_status`, tolerated for `toleration`.
    pub const fn new(
        condition_type: &'static str,
        condition_status: &'static str,
        toleration: Duration,
    ) -> Self {
        Self {
            condition_type,
            condition_status,
            toleration,
        }
    }
}
