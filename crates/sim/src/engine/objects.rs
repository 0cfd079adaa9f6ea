//! The simulated cluster as the API server would hold it — Nodes, NodeClaims, pods, DaemonSets
//! and PodDisruptionBudgets — so that every karpenter decision in the simulator reads it through
//! the core's snapshot builder, exactly as the controller reads its watch-fed state.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{DaemonSet, DaemonSetSpec};
use k8s_openapi::api::core::v1::{
    Namespace, Node, NodeCondition, NodeSpec, NodeStatus, Pod, PodCondition, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use karpenter_api::NodeClaim;
use karpenter_api::labels::NODE_INITIALIZED_LABEL;
use karpenter_api::nodeclaim::condition::{DRIFTED, INITIALIZED, LAUNCHED};
use karpenter_core::disruption::drift::{instance_type_not_found, overlay_drift, template_drift};
use karpenter_core::instancetype::overlay::Evaluation;
use karpenter_core::provisioning::scheduling::default_constraints::{
    SelectorSources, default_spread,
};
use karpenter_core::state::ClusterObjects;
use karpenter_core::state::pods;
use karpenter_core::state::selectors::{ControllerKind, PodController, ServiceSelector};
use karpenter_core::state::volumes::{PodVolumes, Volumes};

use super::disruption::EPOCH;
use super::{SimNode, Simulation};
use crate::scenario::Storage;

/// Virtual second `t` as an API timestamp.
pub(super) fn time(t: u64) -> Option<Time> {
    Timestamp::from_second(EPOCH + t as i64).ok().map(Time)
}

fn condition(type_: &str, at: u64) -> Condition {
    Condition {
        type_: type_.into(),
        status: "True".into(),
        reason: type_.into(),
        message: String::new(),
        last_transition_time: time(at).unwrap_or(Time(Timestamp::UNIX_EPOCH)),
        observed_generation: None,
    }
}

fn provider_id(node: &SimNode) -> String {
    format!("sim:///{}", node.name)
}

impl Simulation {
    /// The cluster now, as API objects.
    /// The workloads' pod selectors, as the API server would hold their controllers: a
    /// Deployment's is its ReplicaSet's (see `workload_owner`).
    fn pod_controllers(&self) -> Vec<PodController> {
        self.workloads
            .iter()
            .filter_map(|(key, w)| {
                let kind = match key.kind.as_str() {
                    "Deployment" | "ReplicaSet" => ControllerKind::ReplicaSet,
                    "StatefulSet" => ControllerKind::StatefulSet,
                    _ => return None,
                };
                Some(PodController {
                    metadata: ObjectMeta {
                        name: Some(key.name.clone()),
                        namespace: Some(key.namespace.clone()),
                        ..Default::default()
                    },
                    kind,
                    selector: w.selector.clone(),
                })
            })
            .collect()
    }

    /// The cluster's default topology spread for `pods` (see
    /// [`karpenter_core::provisioning::scheduling::default_constraints`]), as kube-scheduler
    /// applies it to the pods it binds.
    pub(super) fn default_spread(
        &self,
        pods: &[Pod],
    ) -> std::collections::HashMap<
        String,
        Arc<[k8s_openapi::api::core::v1::TopologySpreadConstraint]>,
    > {
        let constraints = &self.scheduler_config.default_constraints;
        if constraints.is_empty() {
            return Default::default();
        }
        let services: Vec<&ServiceSelector> = self.services.values().collect();
        let controllers = self.pod_controllers();
        let controllers: Vec<&PodController> = controllers.iter().collect();
        default_spread(
            pods.iter(),
            constraints,
            &SelectorSources::new(&services, &controllers),
        )
    }

    pub(super) fn objects(&self) -> ClusterObjects<Pod> {
        let mut objects = ClusterObjects {
            nodes: Vec::new(),
            node_claims: Vec::new(),
            pods: Vec::new(),
            daemonsets: self
                .daemonsets
                .iter()
                .map(|(key, template)| DaemonSet {
                    metadata: ObjectMeta {
                        name: Some(key.name.clone()),
                        namespace: Some(key.namespace.clone()),
                        uid: Some(key.name.clone()),
                        ..Default::default()
                    },
                    spec: Some(DaemonSetSpec {
                        template: template.clone(),
                        ..Default::default()
                    }),
                    status: None,
                })
                .map(Arc::new)
                .collect(),
            pdbs: self.pdbs_with_status().into_iter().map(Arc::new).collect(),
            namespaces: self.namespaces().into_iter().map(Arc::new).collect(),
            volume_claims: self.storage_of(|s| match s {
                Storage::Claim(c) => Some(Arc::new((**c).clone())),
                _ => None,
            }),
            volumes: self.storage_of(|s| match s {
                Storage::Volume(v) => Some(Arc::new((**v).clone())),
                _ => None,
            }),
            storage_classes: self.storage_of(|s| match s {
                Storage::Class(c) => Some(Arc::new((**c).clone())),
                _ => None,
            }),
            // The simulated nodes run no CSI drivers: no volume limits.
            csi_nodes: Vec::new(),
            services: self.services.values().cloned().map(Arc::new).collect(),
            pod_controllers: self.pod_controllers().into_iter().map(Arc::new).collect(),
            nominated: self
                .nominations
                .iter()
                .filter(|(_, until)| **until > self.now)
                .map(|(node, _)| node.clone())
                .collect(),
            devices: Default::default(),
            marked_for_deletion: self
                .nodes
                .iter()
                .filter(|n| n.alive() && n.disrupted && !n.draining)
                .map(|n| n.name.clone())
                .collect(),
        };
        // Upstream's pod-events controller: when a pod last bound to or left each node.
        let mut last_pod_event: Vec<u64> = self.nodes.iter().map(|n| n.ready_at).collect();
        for p in self.pods.iter().filter(|p| !p.is_daemonset_pod()) {
            if let Some(n) = p.node {
                let at = p.ended_at.or(p.bound_at).unwrap_or_default();
                last_pod_event[n] = last_pod_event[n].max(at);
            }
        }
        let overlays = self.overlay_evaluation();
        for (n, node) in self.nodes.iter().enumerate().filter(|(_, n)| n.alive()) {
            if node.ready(self.now) {
                objects.nodes.push(Arc::new(self.node_object(node)));
            }
            if let Some(claim) = self.node_claim_object(node, last_pod_event[n], overlays.as_ref())
            {
                objects.node_claims.push(Arc::new(claim));
            }
        }
        for (i, p) in self.pods.iter().enumerate().filter(|(_, p)| !p.done) {
            let mut pod = p.pod.clone();
            pod.metadata.uid = Some(format!("pod-{i}"));
            pod.metadata.creation_timestamp = time(p.created_at);
            let spec = pod.spec.get_or_insert_with(Default::default);
            spec.node_name = p.node.map(|n| self.nodes[n].name.clone());
            pod.status = Some(match p.bound_at {
                Some(at) => PodStatus {
                    phase: Some("Running".into()),
                    start_time: time(at),
                    ..Default::default()
                },
                // The scheduler stand-in has tried every pending pod by now.
                None => PodStatus {
                    phase: Some("Pending".into()),
                    conditions: Some(vec![PodCondition {
                        type_: "PodScheduled".into(),
                        status: "False".into(),
                        reason: Some("Unschedulable".into()),
                        ..Default::default()
                    }]),
                    ..Default::default()
                },
            });
            objects.pods.push(pod);
        }
        objects
    }

    /// The scenario's Namespaces, and every other namespace its pods use (without labels).
    pub(super) fn namespaces(&self) -> Vec<Namespace> {
        let mut out: BTreeMap<String, Namespace> = self.namespaces.clone();
        for p in self.pods.iter().filter(|p| !p.done) {
            let name = p
                .pod
                .metadata
                .namespace
                .clone()
                .unwrap_or_else(|| "default".into());
            out.entry(name.clone()).or_insert_with(|| Namespace {
                metadata: ObjectMeta {
                    name: Some(name),
                    ..Default::default()
                },
                ..Default::default()
            });
        }
        out.into_values().collect()
    }

    fn storage_of<'a, T>(&'a self, pick: impl Fn(&'a Storage) -> Option<T>) -> Vec<T> {
        self.storage.values().filter_map(pick).collect()
    }

    /// What `pods`' volumes bring to scheduling, by `namespace/name` (for the scheduler
    /// stand-in, which does not go through karpenter's snapshot).
    pub(super) fn pod_volumes(&self, pods: &[Pod]) -> HashMap<String, PodVolumes> {
        if self.storage.is_empty() {
            return HashMap::new();
        }
        let volumes = Volumes::new(
            &self.storage_of(|s| match s {
                Storage::Claim(c) => Some(&**c),
                _ => None,
            }),
            &self.storage_of(|s| match s {
                Storage::Volume(v) => Some(&**v),
                _ => None,
            }),
            &self.storage_of(|s| match s {
                Storage::Class(c) => Some(&**c),
                _ => None,
            }),
        );
        pods.iter()
            .filter_map(|p| Some((pods::key(p), volumes.of_pod(p).ok()?)))
            .filter(|(_, v)| !v.is_empty())
            .collect()
    }

    pub(super) fn node_object(&self, node: &SimNode) -> Node {
        let mut labels = node.labels.clone();
        if node.node_pool.is_some() {
            labels.insert(NODE_INITIALIZED_LABEL.into(), "true".into());
        }
        Node {
            metadata: ObjectMeta {
                name: Some(node.name.clone()),
                labels: Some(labels),
                creation_timestamp: time(node.launched_at),
                deletion_timestamp: node.draining.then(|| time(self.now)).flatten(),
                ..Default::default()
            },
            spec: Some(NodeSpec {
                provider_id: Some(provider_id(node)),
                taints: Some(node.taints.clone()),
                ..Default::default()
            }),
            status: Some(NodeStatus {
                allocatable: Some(node.allocatable.to_list()),
                capacity: Some(node.capacity.to_list()),
                conditions: Some(node_conditions(node)),
                ..Default::default()
            }),
        }
    }

    /// The NodeClaim karpenter created for a node it launched, with the status its lifecycle
    /// and drift controllers would have given it by now.
    fn node_claim_object(
        &self,
        node: &SimNode,
        last_pod_event: u64,
        overlays: Option<&Evaluation>,
    ) -> Option<NodeClaim> {
        let mut claim = node.claim.clone()?;
        claim.metadata.name = Some(node.name.clone());
        claim.metadata.labels = Some(node.labels.clone());
        claim.metadata.creation_timestamp = time(node.launched_at);
        claim.metadata.deletion_timestamp = node.draining.then(|| time(self.now)).flatten();
        let ready = node.ready(self.now);
        let mut conditions = vec![condition(LAUNCHED, node.launched_at)];
        if ready {
            conditions.push(condition(INITIALIZED, node.ready_at));
        }
        let status = claim.status.get_or_insert_with(Default::default);
        status.provider_id = Some(provider_id(node));
        status.node_name = ready.then(|| node.name.clone());
        status.allocatable = node.allocatable.to_list();
        status.capacity = node.capacity.to_list();
        status.last_pod_event_time = time(last_pod_event);
        status.conditions = conditions;
        let pool = node.node_pool.as_ref().and_then(|p| self.pools.get(p));
        let drifted = pool.and_then(|pool| {
            template_drift(pool, &claim)
                .or_else(|| overlays.and_then(|o| overlay_drift(o, pool.name(), &claim)))
                .or_else(|| instance_type_not_found(&self.catalog.instance_types, &claim))
        });
        if drifted.is_some()
            && let Some(status) = claim.status.as_mut()
        {
            status.conditions.push(condition(DRIFTED, self.now));
        }
        Some(claim)
    }
}

/// The node's conditions: `Ready` `True` since launch, then whatever scenario steps set, each
/// with the time it was set as its transition time (what node repair's toleration runs from).
fn node_conditions(node: &SimNode) -> Vec<NodeCondition> {
    let mut conditions = vec![NodeCondition {
        type_: "Ready".into(),
        status: "True".into(),
        last_transition_time: time(node.ready_at),
        ..Default::default()
    }];
    for (type_, (status, since)) in &node.conditions {
        conditions.retain(|c| &c.type_ != type_);
        conditions.push(NodeCondition {
            type_: type_.clone(),
            status: status.clone(),
            last_transition_time: time(*since),
            ..Default::default()
        });
    }
    conditions
}
