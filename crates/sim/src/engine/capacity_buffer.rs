//! CapacityBuffers in the simulation (the `CapacityBuffer` gate): the buffer controller's
//! status each second, the virtual pods provisioning schedules with the pending ones, and the
//! nodes emptiness keeps because they hold buffer capacity — the core's decisions, as the
//! controller makes them.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{
    Deployment, DeploymentSpec, ReplicaSet, ReplicaSetSpec, StatefulSet, StatefulSetSpec,
};
use k8s_openapi::api::core::v1::{Pod, PodTemplate};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use karpenter_api::capacitybuffer::{CapacityBuffer, condition};
use karpenter_core::provisioning::capacity_buffer::{
    Workloads, all_virtual_pods, buffer_pods_by_node, placements, provisioning_condition, resolve,
    resolved_status, with_condition,
};
use karpenter_core::provisioning::scheduling::Results;
use karpenter_core::state::pods::ObservedPod;

use super::Simulation;
use super::objects::time;

/// The buffers and PodTemplates a scenario applied, and what provisioning made of them.
#[derive(Clone, Debug, Default)]
pub(super) struct Buffers {
    /// CapacityBuffers, by `namespace/name`.
    buffers: BTreeMap<String, CapacityBuffer>,
    /// PodTemplates, by `namespace/name`.
    pod_templates: BTreeMap<String, PodTemplate>,
    /// The virtual pods of the ready buffers (the controller's cache).
    virtual_pods: Vec<Pod>,
    /// Virtual pods the last provisioning round placed on each existing node.
    by_node: BTreeMap<String, usize>,
}

fn key(meta: &ObjectMeta) -> String {
    format!(
        "{}/{}",
        meta.namespace.as_deref().unwrap_or("default"),
        meta.name.as_deref().unwrap_or_default()
    )
}

impl Buffers {
    /// Applies a CapacityBuffer (its status is the controller's to write).
    pub(super) fn apply_buffer(&mut self, mut buffer: CapacityBuffer) {
        buffer
            .metadata
            .namespace
            .get_or_insert_with(|| "default".into());
        let key = key(&buffer.metadata);
        let uid = format!("capacitybuffer-{key}");
        buffer.metadata.uid.get_or_insert(uid);
        let generation = self
            .buffers
            .get(&key)
            .and_then(|b| b.metadata.generation)
            .unwrap_or(0);
        buffer.metadata.generation = Some(generation + 1);
        buffer.status = self.buffers.get(&key).and_then(|b| b.status.clone());
        self.buffers.insert(key, buffer);
    }

    /// Applies a PodTemplate (its generation moves on each apply, as the API server's does).
    pub(super) fn apply_pod_template(&mut self, mut template: PodTemplate) {
        template
            .metadata
            .namespace
            .get_or_insert_with(|| "default".into());
        let key = key(&template.metadata);
        let generation = self
            .pod_templates
            .get(&key)
            .and_then(|t| t.metadata.generation)
            .unwrap_or(0);
        template.metadata.generation = Some(generation + 1);
        self.pod_templates.insert(key, template);
    }

    /// Deletes a CapacityBuffer: its virtual pods go at once (the controller drops its cache
    /// entry on the delete event).
    pub(super) fn delete_buffer(&mut self, namespace: &str, name: &str) {
        let key = format!("{namespace}/{name}");
        self.buffers.remove(&key);
        let gone = |p: &Pod| {
            karpenter_core::provisioning::capacity_buffer::buffer_key_of(p).as_deref()
                == Some(key.as_str())
        };
        self.virtual_pods.retain(|p| !gone(p));
    }

    /// The virtual pods provisioning schedules this round.
    pub(super) fn virtual_pods(&self) -> &[Pod] {
        &self.virtual_pods
    }

    /// How many virtual pods the last provisioning round placed on each node.
    pub(super) fn placed(&self) -> &BTreeMap<String, usize> {
        &self.by_node
    }
}

impl Simulation {
    /// The buffers' workloads as the API server would hold them.
    fn workload_objects(&self) -> (Vec<Deployment>, Vec<StatefulSet>, Vec<ReplicaSet>) {
        let (mut deployments, mut sets, mut replica_sets) = (Vec::new(), Vec::new(), Vec::new());
        for (owner, w) in &self.workloads {
            let metadata = ObjectMeta {
                name: Some(owner.name.clone()),
                namespace: Some(owner.namespace.clone()),
                ..Default::default()
            };
            let (replicas, template) = (Some(w.replicas), w.template.clone());
            match owner.kind.as_str() {
                "Deployment" => deployments.push(Deployment {
                    metadata,
                    spec: Some(DeploymentSpec {
                        replicas,
                        template,
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                "StatefulSet" => sets.push(StatefulSet {
                    metadata,
                    spec: Some(StatefulSetSpec {
                        replicas,
                        template,
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                "ReplicaSet" => replica_sets.push(ReplicaSet {
                    metadata,
                    spec: Some(ReplicaSetSpec {
                        replicas,
                        template: Some(template),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                _ => {}
            }
        }
        (deployments, sets, replica_sets)
    }

    fn now_time(&self) -> Time {
        time(self.now).unwrap_or(Time(Timestamp::UNIX_EPOCH))
    }

    /// The buffer controller's pass: resolve every buffer, write its status, rebuild the
    /// virtual pods. Nothing with the gate off.
    pub(super) fn reconcile_buffers(&mut self) {
        if !self.feature_gates.capacity_buffer || self.buffers.buffers.is_empty() {
            return;
        }
        let (deployments, sets, replica_sets) = self.workload_objects();
        let templates: Vec<PodTemplate> = self.buffers.pod_templates.values().cloned().collect();
        let workloads = Workloads {
            pod_templates: &templates,
            deployments: &deployments,
            stateful_sets: &sets,
            replica_sets: &replica_sets,
        };
        let now = self.now_time();
        let mut events = Vec::new();
        for buffer in self.buffers.buffers.values_mut() {
            let status = resolved_status(buffer, &resolve(buffer, &workloads), &now);
            if let Some(line) = change(buffer, &status, condition::READY_FOR_PROVISIONING) {
                events.push(line);
            }
            buffer.status = Some(status);
        }
        let buffers: Vec<CapacityBuffer> = self.buffers.buffers.values().cloned().collect();
        self.buffers.virtual_pods = all_virtual_pods(&buffers, &workloads, &now);
        for e in events {
            self.event("CapacityBuffer", e);
        }
    }

    /// After a provisioning round over `batch`: each buffer's `Provisioning` condition, and
    /// which nodes hold buffer capacity.
    pub(super) fn record_buffer_round<P: ObservedPod>(&mut self, results: &Results, batch: &[P]) {
        if !self.feature_gates.capacity_buffer {
            return;
        }
        self.buffers.by_node = buffer_pods_by_node(results, batch);
        let placed = placements(results, batch);
        let now = self.now_time();
        let mut events = Vec::new();
        for (key, buffer) in &mut self.buffers.buffers {
            let Some(c) = provisioning_condition(buffer, placed.get(key), &now) else {
                continue;
            };
            if let Some(status) = with_condition(buffer, c) {
                if let Some(line) = change(buffer, &status, condition::PROVISIONING) {
                    events.push(line);
                }
                buffer.status = Some(status);
            }
        }
        for e in events {
            self.event("CapacityBuffer", e);
        }
    }

    /// A CapacityBuffer applied by the scenario.
    pub(super) fn apply_buffer(&mut self, buffer: CapacityBuffer) {
        self.event("Applied", format!("capacitybuffer/{}", buffer.key()));
        self.buffers.apply_buffer(buffer);
    }
}

/// `namespace/name Type=Status Reason` when condition `kind` changes from `buffer`'s to
/// `status`'s.
fn change(
    buffer: &CapacityBuffer,
    status: &karpenter_api::capacitybuffer::CapacityBufferStatus,
    kind: &str,
) -> Option<String> {
    let find = |conditions: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition]| {
        conditions
            .iter()
            .find(|c| c.type_ == kind)
            .map(|c| (c.status.clone(), c.reason.clone()))
    };
    let after = find(&status.conditions)?;
    (find(buffer.conditions()) != Some(after.clone()))
        .then(|| format!("{} {kind}={} {}", buffer.key(), after.0, after.1))
}
