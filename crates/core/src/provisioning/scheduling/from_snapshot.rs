//! The snapshot as the scheduling simulation reads it: the nodes pending pods may go to, and
//! the options that carry the cluster's namespaces and volumes.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;

use k8s_openapi::api::core::v1::TopologySpreadConstraint;

use super::default_constraints::{SelectorSources, default_spread};
use super::{BoundPod, ExistingNodeInput, SchedulerOptions};
use crate::state::Snapshot;
use crate::state::pods::ObservedPod;

impl<'a, P: ObservedPod> Snapshot<'a, P> {
    /// The nodes pending pods may go to: every node and launched NodeClaim not being deleted.
    /// Bound pods are kept in scheduling's light form, one shared value for all the pods that
    /// read the same (the replicas of a template in a namespace).
    pub fn existing_nodes(&self) -> Vec<ExistingNodeInput> {
        let mut shared = SharedBoundPods::default();
        self.nodes
            .iter()
            .filter(|n| !n.deleting())
            .map(|n| {
                let labels = n.labels(self.observed.provider_labels);
                ExistingNodeInput {
                    name: n.name().to_string(),
                    node_pool: n.node_pool().map(str::to_string),
                    labels,
                    taints: n.taints(),
                    startup_taints: n.startup_taints(),
                    allocatable: n.allocatable(),
                    capacity: n.capacity(),
                    pods: n
                        .pods
                        .iter()
                        .filter_map(|p| p.bound())
                        .map(|p| shared.get(p))
                        .collect(),
                    initialized: n.initialized(),
                    volume_usage: self.volume_usage(n),
                }
            })
            .collect()
    }

    /// `options` with the cluster's namespaces, volumes and default topology spread, as
    /// scheduling here takes them.
    pub fn scheduler_options(&self, options: &SchedulerOptions) -> SchedulerOptions {
        SchedulerOptions {
            namespaces: self.namespaces(),
            pod_volumes: self.pod_volumes.clone(),
            default_spread: self.default_spread(&options.default_constraints),
            ..options.clone()
        }
    }

    /// `constraints` with each pod's deduced selector, for every pod (pending ones and those
    /// disruption may move) that declares no spread of its own; empty when none are set.
    pub fn default_spread(
        &self,
        constraints: &[TopologySpreadConstraint],
    ) -> Arc<HashMap<String, Arc<[TopologySpreadConstraint]>>> {
        if constraints.is_empty() {
            return Arc::default();
        }
        let sources = SelectorSources::new(&self.observed.services, &self.observed.pod_controllers);
        Arc::new(default_spread(
            self.observed.pods.iter().copied(),
            constraints,
            &sources,
        ))
    }
}

/// One [`BoundPod`] per distinct value: 100,000 bound pods are mostly replicas of a few
/// templates, and a copy each would be a large part of a provisioning round's memory.
#[derive(Default)]
struct SharedBoundPods {
    by_hash: HashMap<u64, Vec<Arc<BoundPod>>>,
}

impl SharedBoundPods {
    fn get(&mut self, pod: BoundPod) -> Arc<BoundPod> {
        let mut hasher = DefaultHasher::new();
        // Anti-affinity terms cannot be hashed; equality still compares them.
        (
            &pod.namespace,
            &*pod.labels,
            &pod.requests,
            &pod.host_ports,
            pod.daemonset,
            pod.terminating,
            pod.anti_affinity.len(),
        )
            .hash(&mut hasher);
        let bucket = self.by_hash.entry(hasher.finish()).or_default();
        if let Some(same) = bucket.iter().find(|b| ***b == pod) {
            return same.clone();
        }
        let pod = Arc::new(pod);
        bucket.push(pod.clone());
        pod
    }
}
