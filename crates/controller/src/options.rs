//! Settings, by flag or by upstream's environment variable names.

use std::time::Duration;

use karpenter_api::duration::parse_go_duration;
use karpenter_core::provisioning::scheduling::default_constraints::SchedulerConfiguration;

fn duration(s: &str) -> Result<Duration, String> {
    parse_go_duration(s).map_err(|e| e.to_string())
}

/// `--scheduler-config`: a YAML or JSON document, empty for none.
pub fn scheduler_config(s: &str) -> Result<SchedulerConfiguration, String> {
    if s.trim().is_empty() {
        return Ok(SchedulerConfiguration::default());
    }
    let value: serde_json::Value =
        serde_saphyr::from_str(s).map_err(|e| format!("scheduler config: {e}"))?;
    SchedulerConfiguration::from_value(value).map_err(|e| e.to_string())
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
    /// The leader-election Lease's name.
    #[arg(long, env = "LEADER_ELECTION_NAME", default_value = crate::leader::LEASE_NAME)]
    pub leader_election_name: String,
    /// The leader-election Lease's namespace; the system namespace when empty.
    #[arg(long, env = "LEADER_ELECTION_NAMESPACE", default_value = "")]
    pub leader_election_namespace: String,
    /// The smoothed rate of requests to the API server, per second (a client-side limit).
    #[arg(long, env = "KUBE_CLIENT_QPS", default_value_t = 200, value_parser = clap::value_parser!(u32).range(1..))]
    pub kube_client_qps: u32,
    /// The most requests sent at once above that rate.
    #[arg(long, env = "KUBE_CLIENT_BURST", default_value_t = 300, value_parser = clap::value_parser!(u32).range(1..))]
    pub kube_client_burst: u32,
    /// The container's memory limit in bytes (-1: none). Upstream tunes Go's garbage collector
    /// with it; there is none here, so it is accepted for upstream's chart and logged.
    #[arg(long, env = "MEMORY_LIMIT", default_value_t = -1, allow_negative_numbers = true)]
    pub memory_limit: i64,
    /// The container's CPU requests in millicores (upstream sizes its workers by it; accepted).
    #[arg(long, env = "CPU_REQUESTS", default_value_t = 1000, value_parser = clap::value_parser!(i64).range(1..))]
    pub cpu_requests: i64,
    /// Leave pods' Dynamic Resource Allocation claims to kube-scheduler: such pods get no node.
    /// `false` allocates their devices in the simulation (from ResourceSlices and the
    /// instance types' devices) and watches `resource.k8s.io/v1` for it, as upstream.
    #[arg(long, env = "IGNORE_DRA_REQUESTS", default_value_t = true, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub ignore_dra_requests: bool,
    /// Upstream serves Go's pprof on the metrics port; accepted, and logged when set.
    #[arg(long, env = "ENABLE_PROFILING", default_value_t = false)]
    pub enable_profiling: bool,
    /// Keep no cluster-state metrics.
    #[arg(
        long,
        env = "DISABLE_CLUSTER_STATE_OBSERVABILITY",
        default_value_t = false
    )]
    pub disable_cluster_state_observability: bool,
    /// Upstream's controller warm-up switch; every replica keeps its state warm here.
    #[arg(long, env = "DISABLE_CONTROLLER_WARMUP", default_value_t = true, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true", hide = true)]
    pub disable_controller_warmup: bool,
    /// Upstream's webhook Service name; there are no webhooks here (accepted).
    #[arg(long, env = "KARPENTER_SERVICE", default_value = "", hide = true)]
    pub karpenter_service: String,
    /// What of the cluster's kube-scheduler configuration to mirror, as a YAML or JSON
    /// document: `podTopologySpread.defaultConstraints`, applied to pods that declare no
    /// topology spread of their own (their selector deduced from their Services and
    /// controller, as kube-scheduler does). Empty: none.
    #[arg(long, env = "SCHEDULER_CONFIG", default_value = "", value_parser = scheduler_config)]
    pub scheduler_config: SchedulerConfiguration,
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
    /// How often NodeOverlays are listed, evaluated and their statuses written.
    #[arg(skip = crate::nodeoverlay::RESYNC)]
    pub overlay_poll: Duration,
    /// How often node repair looks at every node (feature gate `NodeRepair`).
    #[arg(skip = crate::repair::POLL)]
    pub repair_poll: Duration,
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
            leader_election_name: crate::leader::LEASE_NAME.into(),
            leader_election_namespace: String::new(),
            kube_client_qps: 200,
            kube_client_burst: 300,
            memory_limit: -1,
            cpu_requests: 1000,
            ignore_dra_requests: true,
            enable_profiling: false,
            disable_cluster_state_observability: false,
            disable_controller_warmup: true,
            karpenter_service: String::new(),
            scheduler_config: SchedulerConfiguration::default(),
            feature_gates: Default::default(),
            garbage_collection_interval: Duration::from_secs(120),
            instance_launch_grace: Duration::from_secs(30),
            min_drain_time: Duration::from_secs(5),
            launch_timeout: crate::lifecycle::LAUNCH_TIMEOUT,
            registration_timeout: crate::lifecycle::REGISTRATION_TIMEOUT,
            disruption_poll: Duration::from_secs(10),
            drift_poll: Duration::from_secs(10),
            overlay_poll: crate::nodeoverlay::RESYNC,
            repair_poll: crate::repair::POLL,
            provider_drift_check: crate::drift::PROVIDER_CHECK_EVERY,
            consolidation_validation: crate::disruption::VALIDATION_DELAY,
            resync: Duration::from_secs(1),
        }
    }
}

impl Options {
    /// The leader-election Lease's namespace: `LEADER_ELECTION_NAMESPACE`, else the system
    /// namespace.
    pub fn lease_namespace(&self) -> &str {
        if self.leader_election_namespace.is_empty() {
            &self.system_namespace
        } else {
            &self.leader_election_namespace
        }
    }

    /// What is set but has no effect here, to say once at startup.
    pub fn not_acted_on(&self) -> Vec<String> {
        // Every feature gate upstream knows is acted on; only settings can be inert.
        let mut out = Vec::new();
        if self.enable_profiling {
            out.push("ENABLE_PROFILING: there is no profiling endpoint".into());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        options: Options,
    }

    fn parse(args: &[&str]) -> Result<Options, clap::Error> {
        Cli::try_parse_from(std::iter::once("karpenter").chain(args.iter().copied()))
            .map(|c| c.options)
    }

    #[test]
    fn upstreams_flags_and_defaults() {
        let o = parse(&[]).unwrap();
        assert_eq!((o.kube_client_qps, o.kube_client_burst), (200, 300));
        assert_eq!(o.leader_election_name, "karpenter-leader-election");
        assert_eq!(o.lease_namespace(), "kube-system");
        assert!(o.ignore_dra_requests);
        assert_eq!(o.memory_limit, -1);
        let o = parse(&[
            "--kube-client-qps=50",
            "--kube-client-burst",
            "70",
            "--leader-election-name=other",
            "--leader-election-namespace=karpenter",
            "--ignore-dra-requests=false",
            "--memory-limit=536870912",
            "--enable-profiling",
        ])
        .unwrap();
        assert_eq!((o.kube_client_qps, o.kube_client_burst), (50, 70));
        assert_eq!(o.leader_election_name, "other");
        assert_eq!(o.lease_namespace(), "karpenter");
        assert!(!o.ignore_dra_requests);
        assert_eq!(o.memory_limit, 536_870_912);
        let said = o.not_acted_on();
        assert!(
            said.iter().any(|s| s.contains("ENABLE_PROFILING")),
            "{said:?}"
        );
        assert!(
            !said.iter().any(|s| s.contains("IGNORE_DRA_REQUESTS")),
            "device claims are simulated: {said:?}"
        );
        for bad in [
            "--kube-client-qps=0",
            "--cpu-requests=0",
            "--ignore-dra-requests=maybe",
        ] {
            let e = parse(&[bad]).unwrap_err().to_string();
            assert!(e.contains(bad.split('=').next().unwrap()), "{bad}: {e}");
        }
    }

    #[test]
    fn scheduler_config_as_upstream_takes_it() {
        assert!(
            parse(&[])
                .unwrap()
                .scheduler_config
                .default_constraints
                .is_empty()
        );
        let yaml = "podTopologySpread:\n  defaultConstraints:\n  - maxSkew: 3\n    topologyKey: kubernetes.io/hostname\n    whenUnsatisfiable: ScheduleAnyway\n";
        let o = parse(&["--scheduler-config", yaml]).unwrap();
        let c = &o.scheduler_config.default_constraints;
        assert_eq!(c.len(), 1);
        assert_eq!(
            (c[0].max_skew, c[0].topology_key.as_str()),
            (3, "kubernetes.io/hostname")
        );
        let json = r#"{"podTopologySpread": {"defaultConstraints": [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule"}]}}"#;
        assert_eq!(
            parse(&["--scheduler-config", json])
                .unwrap()
                .scheduler_config
                .default_constraints[0]
                .when_unsatisfiable,
            "DoNotSchedule"
        );
        let e = parse(&[
            "--scheduler-config",
            "podTopologySpread: {defaultConstraint: []}",
        ])
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("podTopologySpread.defaultConstraint") && e.contains("unknown field"),
            "{e}"
        );
    }
}
