//! A Cluster-Autoscaler-style policy, to compare against karpenter on the same scenario: node
//! groups of one instance type each; every 10 s, scale up into the group the `least-waste`
//! expander picks; scale down a node whose requests stay under 50% of its allocatable for 10
//! minutes (and no scale-up happened in the last 10 minutes) when its pods fit elsewhere.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use karpenter_api::NodePool;
use karpenter_core::instancetype::InstanceType;
use karpenter_core::provisioning::scheduling::{NodePoolInput, Scheduler};
use karpenter_core::resources::pod_requests;
use karpenter_core::scheduling::Requirements;

use super::Simulation;
use crate::catalog::Catalog;

/// How often Cluster Autoscaler looks at the cluster.
const SCAN_SECONDS: u64 = 10;
/// Nodes whose requests are below this share of allocatable are candidates for removal.
const SCALE_DOWN_UTILIZATION: f64 = 0.5;
/// How long a node must stay underused before it is removed.
const SCALE_DOWN_UNNEEDED_SECONDS: u64 = 600;
/// No scale-down this soon after a scale-up.
const SCALE_DOWN_DELAY_AFTER_ADD_SECONDS: u64 = 600;
/// Size tiers (vCPU upper bounds) an operator typically makes node groups for.
const TIERS: [i64; 3] = [4, 16, i64::MAX];

/// A node group: one NodePool's settings with a single instance type.
#[derive(Clone, Debug)]
pub struct NodeGroup {
    /// The NodePool it stands for (labels, taints, requirements).
    pub node_pool: String,
    /// Its only instance type.
    pub instance_type: Arc<InstanceType>,
}

/// Cluster Autoscaler's memory between scans.
#[derive(Clone, Debug, Default)]
pub struct State {
    /// The node groups.
    pub groups: Vec<NodeGroup>,
    /// Since when each node has been underused.
    low_since: BTreeMap<usize, u64>,
    last_scale_up: Option<u64>,
}

impl State {
    /// A fresh state with these node groups.
    pub fn new(groups: Vec<NodeGroup>) -> Self {
        Self {
            groups,
            ..Default::default()
        }
    }
}

/// The node groups an operator would configure for these NodePools: per NodePool, the cheapest
/// instance type per vCPU in each size tier (up to 4, up to 16, and more than 16 vCPU).
pub fn node_groups(pools: &BTreeMap<String, NodePool>, catalog: &Catalog) -> Vec<NodeGroup> {
    let mut groups = Vec::new();
    for (name, np) in pools {
        let mut template = Requirements::from_node_claim(&np.spec.template.spec.requirements);
        template.add_all(&Requirements::from_labels(
            &np.spec.template.metadata.labels,
        ));
        let mut lower = 0;
        for upper in TIERS {
            let best = catalog
                .instance_types
                .iter()
                .filter(|it| {
                    it.capacity.cpu > lower * 1000 && it.capacity.cpu <= upper.saturating_mul(1000)
                })
                .filter(|it| it.requirements.intersects(&template).is_ok())
                .filter_map(|it| {
                    it.cheapest_price(&template)
                        .map(|p| (p / (it.capacity.cpu as f64 / 1000.0), it))
                })
                .min_by(|a, b| a.0.total_cmp(&b.0).then_with(|| a.1.name.cmp(&b.1.name)));
            if let Some((_, it)) = best {
                groups.push(NodeGroup {
                    node_pool: name.clone(),
                    instance_type: it.clone(),
                });
            }
            lower = upper;
        }
    }
    groups
}

impl Simulation {
    /// One Cluster Autoscaler scan, every 10 s.
    pub(super) fn cluster_autoscaler_scan(&mut self) {
        if !self.now.is_multiple_of(SCAN_SECONDS) {
            return;
        }
        self.ca_scale_up();
        self.ca_scale_down();
    }

    fn ca_state(&mut self) -> &mut State {
        match &mut self.autoscaler {
            super::Autoscaler::ClusterAutoscaler(state) => state,
            super::Autoscaler::Karpenter => unreachable!("only called for Cluster Autoscaler"),
        }
    }

    fn ca_scale_up(&mut self) {
        let pending: Vec<usize> = (0..self.pods.len())
            .filter(|&p| !self.pods[p].done && self.pods[p].bound_at.is_none())
            .collect();
        if pending.is_empty() {
            return;
        }
        // Pods that fit on nodes already there or coming are left to them.
        let (existing, _) = self.existing_inputs(true);
        let batch: Vec<Pod> = pending.iter().map(|&p| self.pods[p].pod.clone()).collect();
        let fitted = Scheduler::new(&[], &existing, &[], self.options()).solve(&batch, &|| false);
        let needy: Vec<Pod> = fitted
            .pod_errors
            .keys()
            .map(|&i| batch[i].clone())
            .collect();
        if needy.is_empty() {
            return;
        }
        let groups = match &self.autoscaler {
            super::Autoscaler::ClusterAutoscaler(state) => state.groups.clone(),
            super::Autoscaler::Karpenter => return,
        };
        let daemonsets = self.daemonset_pods();
        // The least-waste expander: help the most pods, then leave the least idle capacity.
        let mut best: Option<(
            usize,
            f64,
            karpenter_core::provisioning::scheduling::Results,
        )> = None;
        for group in &groups {
            let Some(np) = self.pools.get(&group.node_pool) else {
                continue;
            };
            let input = NodePoolInput {
                node_pool: np.clone(),
                instance_types: vec![group.instance_type.clone()],
            };
            let results = Scheduler::new(&[input], &existing, &daemonsets, self.options())
                .solve(&needy, &|| false);
            if results.new_node_claims.is_empty() {
                continue;
            }
            let helped: usize = results.new_node_claims.iter().map(|c| c.pods.len()).sum();
            let allocatable = group.instance_type.allocatable();
            let waste: f64 = results
                .new_node_claims
                .iter()
                .map(|c| {
                    let cpu = 1.0 - c.requests.cpu as f64 / allocatable.cpu.max(1) as f64;
                    let memory = 1.0 - c.requests.memory as f64 / allocatable.memory.max(1) as f64;
                    (cpu + memory) / 2.0
                })
                .sum::<f64>()
                / results.new_node_claims.len() as f64;
            let better = best
                .as_ref()
                .is_none_or(|(h, w, _)| helped > *h || (helped == *h && waste < *w));
            if better {
                best = Some((helped, waste, results));
            }
        }
        let Some((_, _, results)) = best else { return };
        for claim in &results.new_node_claims {
            self.launch(claim, "cluster-autoscaler");
        }
        let now = self.now;
        self.ca_state().last_scale_up = Some(now);
    }

    fn ca_scale_down(&mut self) {
        let now = self.now;
        let utilization: Vec<(usize, f64)> = (0..self.nodes.len())
            .filter(|&n| self.nodes[n].reason == "cluster-autoscaler" && self.nodes[n].ready(now))
            .map(|n| {
                let mut requested = karpenter_core::resources::Resources::new();
                for p in self.pods.iter().filter(|p| {
                    !p.done
                        && p.node == Some(n)
                        && p.owner.as_ref().is_none_or(|o| o.kind != "DaemonSet")
                }) {
                    requested.add(&pod_requests(&p.pod).unwrap_or_default());
                }
                let a = &self.nodes[n].allocatable;
                let share = (requested.cpu as f64 / a.cpu.max(1) as f64)
                    .max(requested.memory as f64 / a.memory.max(1) as f64);
                (n, share)
            })
            .collect();
        let state = self.ca_state();
        let recently_added = state
            .last_scale_up
            .is_some_and(|t| now < t + SCALE_DOWN_DELAY_AFTER_ADD_SECONDS);
        for &(n, share) in &utilization {
            if share < SCALE_DOWN_UTILIZATION {
                state.low_since.entry(n).or_insert(now);
            } else {
                state.low_since.remove(&n);
            }
        }
        if recently_added {
            return;
        }
        let mut candidates: Vec<(usize, f64)> = utilization
            .into_iter()
            .filter(|(n, _)| {
                state
                    .low_since
                    .get(n)
                    .is_some_and(|since| now >= since + SCALE_DOWN_UNNEEDED_SECONDS)
            })
            .collect();
        candidates.sort_by(|a, b| a.1.total_cmp(&b.1));
        // Remove the emptiest node whose pods fit on the others, one per scan.
        for (n, _) in candidates {
            let pods: Vec<Pod> = self
                .pods
                .iter()
                .filter(|p| {
                    !p.done
                        && p.node == Some(n)
                        && p.owner.as_ref().is_none_or(|o| o.kind != "DaemonSet")
                })
                .map(|p| p.pod.clone())
                .collect();
            let (others, _) = self.existing_inputs(false);
            let others: Vec<_> = others
                .into_iter()
                .filter(|e| e.name != self.nodes[n].name)
                .collect();
            let fits = pods.is_empty()
                || Scheduler::new(&[], &others, &[], self.options())
                    .solve(&pods, &|| false)
                    .pod_errors
                    .is_empty();
            if fits {
                self.ca_state().low_since.remove(&n);
                self.terminate(n, "ScaledDown");
                self.disruptions.push(crate::report::Event {
                    t_s: now,
                    kind: "ScaledDown".into(),
                    message: format!(
                        "node/{} under {:.0}% for {}m",
                        self.nodes[n].name,
                        SCALE_DOWN_UTILIZATION * 100.0,
                        SCALE_DOWN_UNNEEDED_SECONDS / 60
                    ),
                });
                return;
            }
        }
    }
}
