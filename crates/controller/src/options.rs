//! Settings, by flag or by upstream's environment variable names.

use std::time::Duration;

use karpenter_api::duration::parse_go_duration;

fn duration(s: &str) -> Result<Duration, String> {
    parse_go_duration(s).map_err(|e| e.to_string())
}

/// How the controller behaves. Every setting has upstream's flag and environment variable.
#[derive(Clone, Debug, clap::Args)]
pub struct Options {
    /// How long the provisioner waits for more pods after the last one arrived.
    #[arg(long, env = "BATCH_IDLE_DURATION", default_value = "1s", value_parser = duration)]
    pub batch_idle_duration: Duration,
    /// The longest a provisioning batch stays open.
    #[arg(long, env = "BATCH_MAX_DURATION", default_value = "10s", value_parser = duration)]
    pub batch_max_duration: Duration,
    /// `Respect` honours preferred affinities and ScheduleAnyway spread; `Ignore` drops them.
    #[arg(long, env = "PREFERENCE_POLICY", default_value = "Respect", value_parser = ["Respect", "Ignore"])]
    pub preference_policy: String,
    /// `Strict` fails NodeClaims that cannot keep minValues; `BestEffort` relaxes them.
    #[arg(long, env = "MIN_VALUES_POLICY", default_value = "Strict", value_parser = ["Strict", "BestEffort"])]
    pub min_values_policy: String,
    /// Port of `/metrics`.
    #[arg(long, env = "METRICS_PORT", default_value_t = 8080)]
    pub metrics_port: u16,
    /// Port of `/healthz` and `/readyz`.
    #[arg(long, env = "HEALTH_PROBE_PORT", default_value_t = 8081)]
    pub health_probe_port: u16,
    /// Run without leader election (one replica only).
    #[arg(long, env = "DISABLE_LEADER_ELECTION", default_value_t = false)]
    pub disable_leader_election: bool,
    /// Namespace of the leader-election Lease (the controller's own namespace).
    #[arg(long, env = "SYSTEM_NAMESPACE", default_value = "kube-system")]
    pub system_namespace: String,
    /// This replica's identity in the Lease (the pod name).
    #[arg(long, env = "POD_NAME", default_value = "")]
    pub identity: String,
    /// Upstream's feature gates, e.g. `SpotToSpotConsolidation=true`.
    #[arg(long, env = "FEATURE_GATES", default_value = "", value_parser = <karpenter_core::feature_gates::FeatureGates as std::str::FromStr>::from_str)]
    pub feature_gates: karpenter_core::feature_gates::FeatureGates,
    /// How often instances without a NodeClaim are looked for.
    #[arg(skip = Duration::from_secs(120))]
    pub garbage_collection_interval: Duration,
    /// How old an instance without a NodeClaim must be before it is collected (its claim's
    /// status may still be on its way).
    #[arg(skip = Duration::from_secs(30))]
    pub instance_launch_grace: Duration,
    /// How long a drained node stays empty before its instance is terminated (upstream 5s:
    /// catches pods bound just before the taint).
    #[arg(skip = Duration::from_secs(5))]
    pub min_drain_time: Duration,
    /// A NodeClaim not launched this long after it was created is deleted (upstream: 5m).
    #[arg(skip = crate::lifecycle::LAUNCH_TIMEOUT)]
    pub launch_timeout: Duration,
    /// A launched NodeClaim whose Node has not registered this long after launch is deleted
    /// (upstream: 15m).
    #[arg(skip = crate::lifecycle::REGISTRATION_TIMEOUT)]
    pub registration_timeout: Duration,
    /// How often disruption decides (upstream: every 10s).
    #[arg(skip = Duration::from_secs(10))]
    pub disruption_poll: Duration,
    /// How often NodePool hashes and NodeClaim drift are re-checked.
    #[arg(skip = Duration::from_secs(10))]
    pub drift_poll: Duration,
    /// How long the provider's drift answer for a NodeClaim stands (upstream: 5m).
    #[arg(skip = crate::drift::PROVIDER_CHECK_EVERY)]
    pub provider_drift_check: Duration,
    /// How long a consolidation decision waits before it is re-validated and acted on
    /// (upstream: 15s).
    #[arg(skip = crate::disruption::VALIDATION_DELAY)]
    pub consolidation_validation: Duration,
    /// How often the loops run when nothing changes.
    #[arg(skip = Duration::from_secs(1))]
    pub resync: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            batch_idle_duration: Duration::from_secs(1),
            batch_max_duration: Duration::from_secs(10),
            preference_policy: "Respect".into(),
            min_values_policy: "Strict".into(),
            metrics_port: 8080,
            health_probe_port: 8081,
            disable_leader_election: false,
            system_namespace: "kube-system".into(),
            identity: String::new(),
            feature_gates: Default::default(),
            garbage_collection_interval: Duration::from_secs(120),
            instance_launch_grace: Duration::from_secs(30),
            min_drain_time: Duration::from_secs(5),
            launch_timeout: crate::lifecycle::LAUNCH_TIMEOUT,
            registration_timeout: crate::lifecycle::REGISTRATION_TIMEOUT,
            disruption_poll: Duration::from_secs(10),
            drift_poll: Duration::from_secs(10),
            provider_drift_check: crate::drift::PROVIDER_CHECK_EVERY,
            consolidation_validation: crate::disruption::VALIDATION_DELAY,
            resync: Duration::from_secs(1),
        }
    }
}
