//! What kube-scheduler, the kubelets and kube-controller-manager would do, reduced to what the
//! controller's loops need to close: pending pods are bound to Ready nodes they fit (node
//! labels, taints, resources; not affinity between pods or spread), the others are marked
//! `Unschedulable`, bound pods run, pods of vanished nodes go, and PDBs report their status.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use karpenter_core::resources::{Resources, pod_requests};
use karpenter_core::scheduling::{AllowUndefined, Requirements, taints};
use serde_json::json;

use crate::{FakeApiServer, eviction};

/// What the stand-in remembers between rounds.
#[derive(Default)]
pub(crate) struct Memory {
    /// The nodes as last seen; unschedulable pods are retried only when they change.
    nodes_seen: Vec<(String, String)>,
}

fn is_ready(node: &Node) -> bool {
    node.metadata.deletion_timestamp.is_none()
        && !node
            .spec
            .as_ref()
            .and_then(|s| s.unschedulable)
            .unwrap_or(false)
        && node
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

fn is_terminal(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

fn node_name(pod: &Pod) -> Option<&str> {
    pod.spec.as_ref().and_then(|s| s.node_name.as_deref())
}

fn marked_unschedulable(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| {
            c.iter()
                .any(|c| c.type_ == "PodScheduled" && c.reason.as_deref() == Some("Unschedulable"))
        })
}

struct Candidate {
    name: String,
    requirements: Requirements,
    taints: Vec<k8s_openapi::api::core::v1::Taint>,
    free: Resources,
}

fn fits(node: &Candidate, pod: &Pod, requests: &Resources) -> bool {
    let tolerations = pod
        .spec
        .as_ref()
        .and_then(|s| s.tolerations.clone())
        .unwrap_or_default();
    let hard: Vec<_> = node
        .taints
        .iter()
        .filter(|t| t.effect != "PreferNoSchedule")
        .cloned()
        .collect();
    taints::first_untolerated(&hard, &tolerations).is_none()
        && requests.fits(&node.free)
        && node
            .requirements
            .compatible(&Requirements::for_pod(pod, false), AllowUndefined::Nothing)
            .is_ok()
}

fn running_status() -> serde_json::Value {
    json!({"status": {"phase": "Running", "conditions": [
        {"type": "PodScheduled", "status": "True"},
        {"type": "Ready", "status": "True"},
    ]}})
}

impl FakeApiServer {
    /// One round of the stand-in. Returns how many pods it bound.
    pub fn reconcile_cluster(&self) -> usize {
        let nodes: Vec<Node> = self.list();
        let pods: Vec<Pod> = self.list();
        let node_names: Vec<&str> = nodes
            .iter()
            .filter_map(|n| n.metadata.name.as_deref())
            .collect();
        let seen: Vec<(String, String)> = nodes
            .iter()
            .map(|n| {
                (
                    n.metadata.name.clone().unwrap_or_default(),
                    n.metadata.resource_version.clone().unwrap_or_default(),
                )
            })
            .collect();
        let nodes_changed = {
            let mut memory = crate::lock(&self.inner.cluster);
            let changed = memory.nodes_seen != seen;
            memory.nodes_seen = seen;
            changed
        };
        let mut candidates: Vec<Candidate> = nodes
            .iter()
            .filter(|n| is_ready(n))
            .map(|n| Candidate {
                name: n.metadata.name.clone().unwrap_or_default(),
                requirements: Requirements::from_labels(
                    n.metadata.labels.as_ref().unwrap_or(&BTreeMap::new()),
                ),
                taints: n
                    .spec
                    .as_ref()
                    .and_then(|s| s.taints.clone())
                    .unwrap_or_default(),
                free: n
                    .status
                    .as_ref()
                    .and_then(|s| s.allocatable.as_ref())
                    .and_then(|a| Resources::from_list(a).ok())
                    .unwrap_or_default(),
            })
            .collect();
        for pod in pods.iter().filter(|p| !is_terminal(p)) {
            if let Some(bound) = node_name(pod)
                && let Some(node) = candidates.iter_mut().find(|c| c.name == bound)
            {
                node.free.sub(&pod_requests(pod).unwrap_or_default());
            }
        }
        let mut bound = 0;
        for pod in &pods {
            let (ns, name) = (
                pod.metadata.namespace.as_deref().unwrap_or("default"),
                pod.metadata.name.as_deref().unwrap_or_default(),
            );
            if let Some(node) = node_name(pod) {
                if !node_names.contains(&node) {
                    // The pod garbage collector removes pods of nodes that are gone.
                    let _ = self.force_delete_pod(ns, name);
                } else if pod
                    .status
                    .as_ref()
                    .and_then(|s| s.phase.as_deref())
                    .is_none_or(|p| p == "Pending")
                    && pod.metadata.deletion_timestamp.is_none()
                {
                    let _ = self.merge::<Pod>(ns, name, running_status());
                }
                continue;
            }
            if pod.metadata.deletion_timestamp.is_some() || is_terminal(pod) {
                continue;
            }
            if marked_unschedulable(pod) && !nodes_changed {
                continue;
            }
            let requests = pod_requests(pod).unwrap_or_default();
            let mut requests_with_pod = requests.clone();
            requests_with_pod.set("pods", 1000);
            if let Some(node) = candidates
                .iter_mut()
                .find(|c| fits(c, pod, &requests_with_pod))
            {
                node.free.sub(&requests_with_pod);
                let mut patch = running_status();
                patch["spec"] = json!({"nodeName": node.name});
                if self.merge::<Pod>(ns, name, patch).is_ok() {
                    bound += 1;
                }
            } else if !marked_unschedulable(pod) {
                let _ = self.merge::<Pod>(
                    ns,
                    name,
                    json!({"status": {"phase": "Pending", "conditions": [{
                        "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                        "message": "0/N nodes are available",
                    }]}}),
                );
            }
        }
        self.refresh_pdb_status();
        bound
    }

    fn force_delete_pod(&self, ns: &str, name: &str) -> Result<(), crate::ApiError> {
        self.merge::<Pod>(ns, name, json!({"metadata": {"finalizers": null}}))?;
        self.delete::<Pod>(ns, name).map(|_| ())
    }

    fn refresh_pdb_status(&self) {
        let pods: Vec<Pod> = self.list();
        for pdb in self.list::<PodDisruptionBudget>() {
            let (expected, healthy, allowed) = eviction::budget_status(&pdb, &pods);
            let status = json!({
                "expectedPods": expected, "currentHealthy": healthy,
                "desiredHealthy": healthy as i32 - allowed, "disruptionsAllowed": allowed,
                "observedGeneration": pdb.metadata.generation,
            });
            let current = serde_json::to_value(&pdb.status).unwrap_or_default();
            let unchanged = ["expectedPods", "currentHealthy", "disruptionsAllowed"]
                .iter()
                .all(|k| current[k] == status[k]);
            if !unchanged {
                let _ = self.merge::<PodDisruptionBudget>(
                    pdb.metadata.namespace.as_deref().unwrap_or("default"),
                    pdb.metadata.name.as_deref().unwrap_or_default(),
                    json!({"status": status}),
                );
            }
        }
    }

    /// Runs [`FakeApiServer::reconcile_cluster`] every `every` until the task is aborted.
    pub fn spawn_cluster(&self, every: Duration) -> tokio::task::JoinHandle<()> {
        let server = self.clone();
        tokio::spawn(async move {
            loop {
                server.reconcile_cluster();
                tokio::time::sleep(every).await;
            }
        })
    }
}
