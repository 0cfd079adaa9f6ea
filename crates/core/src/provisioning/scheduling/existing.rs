//! Nodes already in the cluster (or launched and not yet registered) as scheduling targets.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Pod, Taint};
use karpenter_api::Operator;
use karpenter_api::labels::{HOSTNAME_LABEL, UNREGISTERED_TAINT_KEY};

use super::{PodData, Rejected};
use crate::resources::{Resources, pod_requests};
use crate::scheduling::hostports::{self, HostPort};
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
    /// The pods bound to it.
    pub pods: Vec<Pod>,
    /// Whether it is initialized (ready, startup taints gone).
    pub initialized: bool,
    /// The NodePool it belongs to, if karpenter manages it.
    pub node_pool: Option<String>,
}

/// Taints a node carries only while it starts; a node that is not yet initialized is judged
/// without them.
const EPHEMERAL_TAINTS: [&str; 3] = [
    "node.kubernetes.io/not-ready",
    "node.kubernetes.io/unreachable",
    UNREGISTERED_TAINT_KEY,
];

pub(super) struct ExistingNode {
    pub name: String,
    pub requirements: Requirements,
    pub taints: Vec<Taint>,
    pub remaining: Resources,
    pub host_ports: Vec<HostPort>,
    pub initialized: bool,
}

fn is_daemonset_pod(pod: &Pod) -> bool {
    pod.metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.kind == "DaemonSet")
}

fn is_active(pod: &Pod) -> bool {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    !matches!(phase, Some("Succeeded" | "Failed"))
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
                    || !(EPHEMERAL_TAINTS.contains(&t.key.as_str())
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
        for pod in input.pods.iter().filter(|p| is_active(p)) {
            let requests = pod_requests(pod).unwrap_or_default();
            remaining.sub(&requests);
            if is_daemonset_pod(pod) {
                daemons_present.add(&requests);
            }
            host_ports.extend(hostports::host_ports(pod));
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
            requirements,
            taints,
            remaining,
            host_ports,
            initialized: input.initialized,
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
    }
}
