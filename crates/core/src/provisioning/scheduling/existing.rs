//! Nodes already in the cluster (or launched and not yet registered) as scheduling targets.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Pod, Taint};
use karpenter_api::Operator;
use karpenter_api::labels::{HOSTNAME_LABEL, UNREGISTERED_TAINT_KEY};

use super::{PodData, Rejected};
use crate::resources::Resources;
use crate::scheduling::hostports::{self, HostPort};
use crate::scheduling::volumeusage::VolumeUsage;
use crate::scheduling::{AllowUndefined, Requirement, Requirements, taints};

/// What the scheduler needs to know about an existing node.
#[derive(Clone, Debug, Default)]
pub struct ExistingNodeInput {
    /// The node's name.
    pub name: String,
    /// Its labels.
    pub labels: BTreeMap<String, String>,
    /// Its taints.
    pub taints: Vec<Taint>,
    /// Its startup taints, ignored until it is initialized.
    pub startup_taints: Vec<Taint>,
    /// What pods can use.
    pub allocatable: Resources,
    /// Its capacity (what counts against NodePool limits).
    pub capacity: Resources,
    /// The pods bound to it (terminal pods left out).
    pub pods: Vec<Arc<BoundPod>>,
    /// Whether it is initialized (ready, startup taints gone).
    pub initialized: bool,
    /// The NodePool it belongs to, if karpenter manages it.
    pub node_pool: Option<String>,
    /// Its CSI volume limits (from its CSINode) with the volumes its pods attach.
    pub volume_usage: VolumeUsage,
}

pub use crate::state::BoundPod;

/// Taints a node carries only while it starts, by key and effect (upstream's
/// `KnownEphemeralTaints`); a node that is not yet initialized is judged without them.
const EPHEMERAL_TAINTS: [(&str, &str); 5] = [
    ("node.kubernetes.io/not-ready", "NoSchedule"),
    ("node.kubernetes.io/not-ready", "NoExecute"),
    ("node.kubernetes.io/unreachable", "NoSchedule"),
    (
        "node.cloudprovider.kubernetes.io/uninitialized",
        "NoSchedule",
    ),
    (UNREGISTERED_TAINT_KEY, "NoExecute"),
];

/// Key prefixes of taint families that are ephemeral too (upstream's
/// `KnownEphemeralTaintKeyPrefixes`: the Node Readiness Controller's `readiness.k8s.io/<rule>`).
const EPHEMERAL_TAINT_PREFIXES: [&str; 1] = ["readiness.k8s.io/"];

fn ephemeral(taint: &Taint) -> bool {
    EPHEMERAL_TAINTS
        .iter()
        .any(|(key, effect)| taint.key == *key && taint.effect == *effect)
        || EPHEMERAL_TAINT_PREFIXES
            .iter()
            .any(|p| taint.key.starts_with(p))
}

pub(super) struct ExistingNode {
    pub name: String,
    /// Shared with topology, which counts the node's domains by them.
    pub requirements: Arc<Requirements>,
    pub taints: Vec<Taint>,
    pub remaining: Resources,
    pub host_ports: Vec<HostPort>,
    pub volume_usage: VolumeUsage,
    pub initialized: bool,
    /// Its `node.kubernetes.io/instance-type` label.
    pub instance_type: Option<String>,
    /// Its NodePool, when karpenter manages it.
    pub node_pool: Option<String>,
}

impl ExistingNode {
    pub fn new(input: &ExistingNodeInput, daemonsets: &[(Pod, PodData)]) -> Self {
        let mut requirements = Requirements::from_labels(&input.labels);
        if !input.labels.contains_key(HOSTNAME_LABEL) {
            requirements.add(Requirement::new(
                HOSTNAME_LABEL,
                Operator::In,
                &[input.name.as_str()],
            ));
        }
        let taints: Vec<Taint> = input
            .taints
            .iter()
            .filter(|t| {
                input.initialized
                    || !(ephemeral(t)
                        || input
                            .startup_taints
                            .iter()
                            .any(|s| s.key == t.key && s.effect == t.effect))
            })
            .cloned()
            .collect();
        let mut remaining = input.allocatable.clone();
        let mut daemons_present = Resources::new();
        let mut host_ports = Vec::new();
        for pod in &input.pods {
            remaining.sub(&pod.requests);
            if pod.daemonset {
                daemons_present.add(&pod.requests);
            }
            host_ports.extend(pod.host_ports.iter().cloned());
        }
        // DaemonSet pods that will still start here reserve their share.
        let mut daemons_due = Resources::new();
        for (_, d) in daemonsets {
            if taints::first_untolerated(&taints, &d.tolerations).is_none()
                && requirements
                    .compatible(&d.strict_requirements, AllowUndefined::Nothing)
                    .is_ok()
            {
                daemons_due.add(&d.requests);
            }
        }
        daemons_due.sub(&daemons_present);
        let mut missing = Resources::new();
        missing.max_with(&daemons_due);
        remaining.sub(&missing);
        Self {
            name: input.name.clone(),
            requirements: Arc::new(requirements),
            taints,
            remaining,
            host_ports,
            volume_usage: input.volume_usage.clone(),
            initialized: input.initialized,
            instance_type: input
                .labels
                .get(karpenter_api::labels::INSTANCE_TYPE_LABEL)
                .cloned(),
            node_pool: input.node_pool.clone(),
        }
    }

    /// Whether the pod fits, and the requirements narrowed by its topology.
    pub fn can_add(
        &self,
        pod: &PodData,
        topology: impl FnOnce(&Requirements) -> Result<Option<Requirements>, Rejected>,
    ) -> Result<Option<Requirements>, Rejected> {
        let fits = taints::first_untolerated(&self.taints, &pod.tolerations).is_none()
            && hostports::first_conflict(&pod.host_ports, &self.host_ports).is_none()
            && pod.requests.fits(&self.remaining)
            && (pod.attachments.is_empty()
                || self.volume_usage.exceeds_limits(&pod.attachments).is_none())
            && self
                .requirements
                .compatible(&pod.requirements, AllowUndefined::Nothing)
                .is_ok();
        if !fits {
            // Nobody reads why an existing node declined; the pod moves on to the next one.
            return Err(Rejected);
        }
        topology(&self.requirements)
    }

    pub fn add(&mut self, pod: &PodData) {
        self.remaining.sub(&pod.requests);
        self.host_ports.extend(pod.host_ports.iter().cloned());
        self.volume_usage.add(&pod.attachments);
    }
}
