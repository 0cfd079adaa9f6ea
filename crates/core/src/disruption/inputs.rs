//! The snapshot as disruption reads it: every node's state, and the owned inputs of a pass.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::jiff::Timestamp;

use super::NodeState;
use crate::provisioning::scheduling::{NodePoolInput, SchedulerOptions};
use crate::state::pods::ObservedPod;
use crate::state::volumes::PodVolumes;
use crate::state::{Snapshot, price_of};

impl<'a, P: ObservedPod> Snapshot<'a, P> {
    /// Every node and launched NodeClaim as disruption sees it, as of `now`.
    pub fn node_states(&self, now: Timestamp) -> Vec<NodeState> {
        self.nodes
            .iter()
            .map(|n| {
                let labels = n.labels(self.observed.provider_labels);
                let node_pool = n.node_pool().map(str::to_string);
                let created_at = n.created_at().unwrap_or(now);
                NodeState {
                    buffer_pods: 0,
                    name: n.name().to_string(),
                    price: node_pool
                        .as_deref()
                        .map_or(0.0, |p| price_of(self.observed.node_pools, p, &labels)),
                    node_pool,
                    annotations: n.annotations(),
                    taints: n.taints(),
                    allocatable: n.allocatable(),
                    capacity: n.capacity(),
                    pods: n.pods.iter().map(|p| p.to_pod()).collect(),
                    initialized: n.initialized(),
                    ready: n.ready(),
                    deleting: n.deleting(),
                    // Provisioning nominates a launching NodeClaim by its own name; the
                    // nomination holds for the node it becomes, whatever that is called.
                    nominated: self.observed.nominated.contains(n.name())
                        || n.claim.is_some_and(|c| {
                            self.observed
                                .nominated
                                .contains(c.metadata.name.as_deref().unwrap_or_default())
                        }),
                    created_at,
                    last_pod_event: n.last_pod_event(created_at),
                    drifted: n.drifted(),
                    drifted_at: n.drifted_at(),
                    instance_terminating: n.instance_terminating(),
                    volume_usage: self.volume_usage(n),
                    termination_grace_period: n.claim.and_then(|c| c.spec.termination_grace_period),
                    unclaimed: n.node.is_some() && n.claim.is_none(),
                    labels,
                }
            })
            .collect()
    }

    /// Everything a disruption pass reads, as of `now`.
    pub fn disruption(&self, now: Timestamp) -> DisruptionInputs {
        DisruptionInputs {
            nodes: self.node_states(now),
            pending_pods: self
                .pods_to_schedule(now)
                .into_iter()
                .map(|p| p.to_pod())
                .collect(),
            daemonset_pods: self.daemonset_pods(),
            pdbs: self.pdbs(),
            namespaces: self.namespaces(),
            pod_volumes: self.pod_volumes.clone(),
        }
    }
}

/// The owned inputs of one disruption pass; [`DisruptionInputs::input`] lends them to
/// [`crate::disruption::decide`].
#[derive(Clone, Debug, Default)]
pub struct DisruptionInputs {
    /// Every node and launched NodeClaim.
    pub nodes: Vec<NodeState>,
    /// Pods that need a node: pending ones and those of nodes being deleted (they must still
    /// fit after a move).
    pub pending_pods: Vec<Pod>,
    /// DaemonSet pods, for replacement overhead.
    pub daemonset_pods: Vec<Pod>,
    /// PodDisruptionBudgets.
    pub pdbs: Vec<PodDisruptionBudget>,
    /// Namespaces with their labels.
    pub namespaces: Vec<(String, BTreeMap<String, String>)>,
    /// What pods' volumes bring to scheduling, by `namespace/name`.
    pub pod_volumes: Arc<HashMap<String, PodVolumes>>,
}

impl DisruptionInputs {
    /// The decision's input over these; `options` gain the namespaces.
    pub fn input<'a>(
        &'a self,
        now: Timestamp,
        node_pools: &'a [NodePoolInput],
        options: SchedulerOptions,
        spot_to_spot: bool,
    ) -> crate::disruption::Input<'a> {
        crate::disruption::Input {
            now,
            nodes: &self.nodes,
            node_pools,
            pdbs: &self.pdbs,
            pending_pods: &self.pending_pods,
            daemonset_pods: &self.daemonset_pods,
            options: SchedulerOptions {
                namespaces: self.namespaces.clone(),
                pod_volumes: self.pod_volumes.clone(),
                ..options
            },
            spot_to_spot,
        }
    }
}
