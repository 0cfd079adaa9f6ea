//! A pod already on a node as scheduling reads it: the light form state keeps of every bound
//! pod.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Pod, PodAffinityTerm};

use crate::resources::{Resources, pod_requests};
use crate::scheduling::hostports::{self, HostPort};

/// A pod already on a node, reduced to what scheduling reads of it: its requests and host
/// ports take room, its labels count for topology, its required anti-affinity repels. A few
/// hundred bytes instead of a whole `Pod`, so state for 100,000 pods stays small.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BoundPod {
    /// The pod's namespace.
    pub namespace: String,
    /// The pod's labels (shared: pods of one template have the same).
    pub labels: Arc<BTreeMap<String, String>>,
    /// What the pod requests (init containers, sidecars and overhead included).
    pub requests: Resources,
    /// Host ports the pod binds.
    pub host_ports: Vec<HostPort>,
    /// Whether a DaemonSet owns it.
    pub daemonset: bool,
    /// Its required pod anti-affinity terms.
    pub anti_affinity: Vec<PodAffinityTerm>,
    /// Being deleted: it still takes room but no longer counts for topology.
    pub terminating: bool,
}

impl BoundPod {
    /// The pod as scheduling sees it; `None` for a pod that finished (it takes no room).
    pub fn new(pod: &Pod) -> Option<Self> {
        if !is_active(pod) {
            return None;
        }
        Some(Self {
            namespace: pod
                .metadata
                .namespace
                .clone()
                .unwrap_or_else(|| "default".into()),
            labels: Arc::new(pod.metadata.labels.clone().unwrap_or_default()),
            requests: pod_requests(pod).unwrap_or_default(),
            host_ports: hostports::host_ports(pod),
            daemonset: is_daemonset_pod(pod),
            anti_affinity: pod
                .spec
                .as_ref()
                .and_then(|s| s.affinity.as_ref())
                .and_then(|a| a.pod_anti_affinity.as_ref())
                .and_then(|a| {
                    a.required_during_scheduling_ignored_during_execution
                        .clone()
                })
                .unwrap_or_default(),
            terminating: pod.metadata.deletion_timestamp.is_some(),
        })
    }

    /// Every active pod of a list, shared.
    pub fn all<'a>(pods: impl IntoIterator<Item = &'a Pod>) -> Vec<Arc<Self>> {
        pods.into_iter()
            .filter_map(Self::new)
            .map(Arc::new)
            .collect()
    }
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
