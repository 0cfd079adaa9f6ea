//! Capacity buffers (upstream's `CapacityBuffer` gate): spare capacity kept as placeholder
//! ("virtual") pods that provisioning schedules with the real pending pods, so that nodes exist
//! before the workload needs them. The same decisions for the controller, the simulator and
//! `plan`:
//!
//! - [`resolve`]: the pod template a buffer's `podTemplateRef` or `scalableRef` names;
//! - [`resolved_status`]: the chunk count (replicas / percentage / limits, as upstream) and
//!   the `ReadyForProvisioning` condition;
//! - [`virtual_pods`]: the buffer's placeholder pods, named, annotated and stripped as
//!   upstream builds them;
//! - [`placements`], [`provisioning_condition`] and [`buffer_pods_by_node`]: what a scheduling
//!   round did with them — the `Provisioning` condition, and which nodes hold buffer capacity
//!   (emptiness keeps those).
//!
//! Virtual pods never reach the API server: provisioning never binds, nominates or reports
//! events for them.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{
    Pod, PodCondition, PodSpec, PodStatus, PodTemplate, PodTemplateSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta, Time};
use karpenter_api::capacitybuffer::{
    BUFFER_NAME_ANNOTATION, BUFFER_NAMESPACE_ANNOTATION, CapacityBuffer, CapacityBufferStatus,
    FAKE_POD_ANNOTATION, FAKE_POD_ANNOTATION_VALUE, LocalObjectRef, VIRTUAL_POD_PRIORITY,
    condition,
};
use karpenter_api::nodeclaim::ResourceList;

use super::scheduling::Results;
use crate::resources::{PODS, Resources, parse_milli_saturating, pod_requests};
use crate::state::pods::ObservedPod;

/// The objects a buffer may reference, in any namespace.
#[derive(Clone, Copy, Debug, Default)]
pub struct Workloads<'a> {
    /// PodTemplates.
    pub pod_templates: &'a [PodTemplate],
    /// Deployments.
    pub deployments: &'a [Deployment],
    /// StatefulSets.
    pub stateful_sets: &'a [StatefulSet],
    /// ReplicaSets.
    pub replica_sets: &'a [ReplicaSet],
}

/// Where a buffer's pod template came from.
#[derive(Clone, Debug, PartialEq)]
pub enum Source {
    /// The named PodTemplate, at this generation.
    PodTemplate {
        /// Its name.
        name: String,
        /// Its `metadata.generation` (0 when unset).
        generation: i64,
    },
    /// A workload with these replicas (1 when unset, as the API server defaults it).
    Scalable {
        /// Its `spec.replicas`.
        replicas: i32,
    },
}

/// A buffer's resolved pod shape.
#[derive(Clone, Debug, PartialEq)]
pub struct Resolution {
    /// The template of one chunk.
    pub template: PodTemplateSpec,
    /// Where it came from.
    pub source: Source,
}

/// Why a buffer's pod shape could not be resolved.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ResolveError {
    /// The buffer names neither a PodTemplate nor a workload.
    #[error("Neither podTemplateRef nor scalableRef is set")]
    NoReference,
    /// The referenced object does not exist (the user's to fix; not retried sooner).
    #[error("{kind} {namespace}/{name} not found")]
    NotFound {
        /// The referenced kind.
        kind: String,
        /// The buffer's namespace.
        namespace: String,
        /// The referenced name.
        name: String,
    },
    /// `scalableRef.apiGroup` is not `apps`.
    #[error("unsupported scalableRef API group {0:?}")]
    UnsupportedGroup(String),
    /// `scalableRef.kind` is not Deployment, StatefulSet or ReplicaSet.
    #[error("unsupported kind {0:?}")]
    UnsupportedKind(String),
}

fn in_namespace<'a, T: k8s_openapi::Metadata<Ty = ObjectMeta>>(
    objects: &'a [T],
    namespace: &str,
    name: &str,
) -> Option<&'a T> {
    objects.iter().find(|o| {
        let meta = o.metadata();
        meta.name.as_deref() == Some(name)
            && meta.namespace.as_deref().unwrap_or("default") == namespace
    })
}

/// The pod template `buffer` names (its `podTemplateRef` first, as upstream), among `workloads`.
pub fn resolve(
    buffer: &CapacityBuffer,
    workloads: &Workloads<'_>,
) -> Result<Resolution, ResolveError> {
    let namespace = buffer.namespace();
    let not_found = |kind: &str, name: &str| ResolveError::NotFound {
        kind: kind.into(),
        namespace: namespace.into(),
        name: name.into(),
    };
    if let Some(r) = &buffer.spec.pod_template_ref {
        let pt = in_namespace(workloads.pod_templates, namespace, &r.name)
            .ok_or_else(|| not_found("PodTemplate", &r.name))?;
        return Ok(Resolution {
            template: pt.template.clone().unwrap_or_default(),
            source: Source::PodTemplate {
                name: r.name.clone(),
                generation: pt.metadata.generation.unwrap_or(0),
            },
        });
    }
    let Some(r) = &buffer.spec.scalable_ref else {
        return Err(ResolveError::NoReference);
    };
    if !(r.api_group.is_empty() || r.api_group == "apps") {
        return Err(ResolveError::UnsupportedGroup(r.api_group.clone()));
    }
    let found = |template: &PodTemplateSpec, replicas: Option<i32>| Resolution {
        template: template.clone(),
        source: Source::Scalable {
            replicas: replicas.unwrap_or(1),
        },
    };
    match r.kind.as_str() {
        "Deployment" => in_namespace(workloads.deployments, namespace, &r.name)
            .and_then(|d| d.spec.as_ref())
            .map(|s| found(&s.template, s.replicas)),
        "StatefulSet" => in_namespace(workloads.stateful_sets, namespace, &r.name)
            .and_then(|d| d.spec.as_ref())
            .map(|s| found(&s.template, s.replicas)),
        "ReplicaSet" => in_namespace(workloads.replica_sets, namespace, &r.name)
            .and_then(|d| d.spec.as_ref())
            .map(|s| found(&s.template.clone().unwrap_or_default(), s.replicas)),
        other => return Err(ResolveError::UnsupportedKind(other.into())),
    }
    .ok_or_else(|| not_found(&r.kind, &r.name))
}

/// What one chunk requests, as upstream counts it for limits (no `pods` entry).
fn chunk_requests(spec: &PodSpec) -> Resources {
    let pod = Pod {
        spec: Some(spec.clone()),
        ..Default::default()
    };
    let mut requests = pod_requests(&pod).unwrap_or_default();
    requests.set(PODS, 0);
    requests
}

/// How many chunks of `spec` fit in `limits`: the least, over the resources both name, of
/// limit / request rounded down. `None` when no limited resource is requested (the limits
/// constrain nothing).
pub fn limit_replicas(limits: &ResourceList, spec: &PodSpec) -> Option<i32> {
    let requests = chunk_requests(spec);
    limits
        .iter()
        .filter_map(|(name, limit)| {
            let request = requests.get(name);
            if request <= 0 {
                return None;
            }
            let limit = parse_milli_saturating(&limit.0).ok()?;
            Some((limit.max(0) / request).min(i64::from(i32::MAX)) as i32)
        })
        .min()
}

/// `percentage` of a workload's `replicas`, rounded up, at least 1 when both are positive.
pub fn percentage_replicas(replicas: i32, percentage: i32) -> i32 {
    if replicas <= 0 || percentage <= 0 {
        return 0;
    }
    let product = i64::from(replicas) * i64::from(percentage);
    ((product + 99) / 100).clamp(1, i64::from(i32::MAX)) as i32
}

/// The chunks `buffer` keeps with `resolution`, as upstream (and Cluster Autoscaler) count
/// them: the larger of `replicas` and `percentage` (the latter for a `scalableRef` only),
/// capped by `limits`; `limits` alone when neither is set; 0 when nothing is set.
pub fn desired_replicas(buffer: &CapacityBuffer, resolution: &Resolution) -> i32 {
    let spec = &buffer.spec;
    let mut sizes = Vec::new();
    if let (Source::Scalable { replicas }, Some(pct)) = (&resolution.source, spec.percentage)
        && *replicas > 0
    {
        sizes.push(percentage_replicas(*replicas, pct));
    }
    sizes.extend(spec.replicas);
    let desired = sizes.iter().copied().max();
    let by_limits = spec
        .limits
        .as_ref()
        .and_then(|limits| limit_replicas(limits, resolution.template.spec.as_ref()?));
    match (desired, by_limits) {
        (Some(d), Some(l)) => d.min(l),
        (None, Some(l)) => l,
        (d, None) => d.unwrap_or(0),
    }
}

/// Sets `new` among `conditions` as Kubernetes' `SetStatusCondition` does: the transition
/// time moves only when the status changes.
pub fn set_condition(conditions: &mut Vec<Condition>, new: Condition) {
    match conditions.iter_mut().find(|c| c.type_ == new.type_) {
        Some(old) => {
            let since = (old.status == new.status).then(|| old.last_transition_time.clone());
            *old = new;
            if let Some(since) = since {
                old.last_transition_time = since;
            }
        }
        None => conditions.push(new),
    }
}

fn condition_of(
    buffer: &CapacityBuffer,
    kind: &str,
    status: bool,
    reason: &str,
    message: String,
    now: &Time,
) -> Condition {
    Condition {
        type_: kind.into(),
        status: if status { "True" } else { "False" }.into(),
        observed_generation: buffer.metadata.generation,
        last_transition_time: now.clone(),
        reason: reason.into(),
        message,
    }
}

/// The status the buffer controller writes for `buffer` given how its reference resolved:
/// `ReadyForProvisioning` with upstream's reasons, the chunk count, the PodTemplate used and
/// the strategy. Other fields and conditions (the provisioner's `Provisioning`) are kept.
pub fn resolved_status(
    buffer: &CapacityBuffer,
    resolution: &Result<Resolution, ResolveError>,
    now: &Time,
) -> CapacityBufferStatus {
    let mut status = buffer.status.clone().unwrap_or_default();
    let ready = |ok: bool, reason: &str, message: String| {
        condition_of(
            buffer,
            condition::READY_FOR_PROVISIONING,
            ok,
            reason,
            message,
            now,
        )
    };
    match resolution {
        Ok(r) => {
            match &r.source {
                Source::PodTemplate { name, generation } => {
                    status.pod_template_ref = Some(LocalObjectRef { name: name.clone() });
                    status.pod_template_generation = Some(*generation);
                }
                Source::Scalable { .. } => {
                    status.pod_template_ref = None;
                    status.pod_template_generation = None;
                }
            }
            status.replicas = Some(desired_replicas(buffer, r));
            set_condition(
                &mut status.conditions,
                ready(
                    true,
                    condition::REASON_RESOLVED,
                    "Pod template resolved successfully".into(),
                ),
            );
        }
        Err(e) => {
            let reason = match e {
                ResolveError::NotFound { .. } if buffer.spec.pod_template_ref.is_some() => {
                    condition::REASON_POD_TEMPLATE_NOT_FOUND
                }
                ResolveError::NotFound { .. } => condition::REASON_SCALABLE_REF_NOT_FOUND,
                _ => condition::REASON_RESOLUTION_FAILED,
            };
            set_condition(&mut status.conditions, ready(false, reason, e.to_string()));
        }
    }
    status.provisioning_strategy = buffer.spec.provisioning_strategy.clone();
    status
}

/// Whether provisioning keeps capacity for `buffer`: `ReadyForProvisioning`, a reference, and
/// at least one chunk.
pub fn is_ready_for_provisioning(buffer: &CapacityBuffer) -> bool {
    buffer.condition_true(condition::READY_FOR_PROVISIONING)
        && buffer.status.as_ref().and_then(|s| s.replicas).unwrap_or(0) > 0
        && (buffer.spec.pod_template_ref.is_some() || buffer.spec.scalable_ref.is_some())
}

/// The pod spec of a virtual pod: no node name, and no volumes backed by claims (a virtual
/// pod's claims never exist, so their topology cannot be resolved), nor their mounts.
fn sanitized(spec: &PodSpec) -> PodSpec {
    let mut spec = spec.clone();
    spec.node_name = None;
    let mut dropped = Vec::new();
    if let Some(volumes) = &mut spec.volumes {
        volumes.retain(|v| {
            let claim = v.persistent_volume_claim.is_some() || v.ephemeral.is_some();
            if claim {
                dropped.push(v.name.clone());
            }
            !claim
        });
    }
    if !dropped.is_empty() {
        let containers = spec
            .containers
            .iter_mut()
            .chain(spec.init_containers.iter_mut().flatten());
        for c in containers {
            if let Some(mounts) = &mut c.volume_mounts {
                mounts.retain(|m| !dropped.contains(&m.name));
            }
        }
    }
    spec.priority = Some(VIRTUAL_POD_PRIORITY);
    spec
}

/// The placeholder pods of `buffer` with `template`, one per chunk of `status.replicas`:
/// `capacity-buffer-<name>-<i>` (i from 1), UID `<buffer uid>-<i>`, the template's labels (so
/// spread and affinity count them), the buffer annotations, and `PodScheduled=False`
/// (`Unschedulable`) so every provisionable check accepts them.
pub fn virtual_pods(
    buffer: &CapacityBuffer,
    template: &PodTemplateSpec,
    created: &Time,
) -> Vec<Pod> {
    let count = buffer.status.as_ref().and_then(|s| s.replicas).unwrap_or(0);
    if count <= 0 {
        return Vec::new();
    }
    let spec = sanitized(&template.spec.clone().unwrap_or_default());
    let labels = template.metadata.as_ref().and_then(|m| m.labels.clone());
    let uid = buffer.metadata.uid.as_deref().unwrap_or_default();
    (1..=count)
        .map(|i| Pod {
            metadata: ObjectMeta {
                name: Some(format!("capacity-buffer-{}-{i}", buffer.name())),
                namespace: Some(buffer.namespace().into()),
                uid: Some(format!("{uid}-{i}")),
                labels: labels.clone(),
                annotations: Some(BTreeMap::from([
                    (FAKE_POD_ANNOTATION.into(), FAKE_POD_ANNOTATION_VALUE.into()),
                    (BUFFER_NAME_ANNOTATION.into(), buffer.name().into()),
                    (
                        BUFFER_NAMESPACE_ANNOTATION.into(),
                        buffer.namespace().into(),
                    ),
                ])),
                creation_timestamp: Some(created.clone()),
                ..Default::default()
            },
            spec: Some(spec.clone()),
            status: Some(PodStatus {
                conditions: Some(vec![PodCondition {
                    type_: "PodScheduled".into(),
                    status: "False".into(),
                    reason: Some("Unschedulable".into()),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
        })
        .collect()
}

/// The virtual pods of every buffer ready for provisioning whose reference resolves.
pub fn all_virtual_pods(
    buffers: &[CapacityBuffer],
    workloads: &Workloads<'_>,
    created: &Time,
) -> Vec<Pod> {
    buffers
        .iter()
        .filter(|b| is_ready_for_provisioning(b))
        .filter_map(|b| {
            Some(virtual_pods(
                b,
                &resolve(b, workloads).ok()?.template,
                created,
            ))
        })
        .flatten()
        .collect()
}

/// Whether `pod` is a buffer's virtual pod.
pub fn is_virtual_pod(pod: &(impl ObservedPod + ?Sized)) -> bool {
    pod.meta()
        .annotations
        .as_ref()
        .and_then(|a| a.get(FAKE_POD_ANNOTATION))
        .is_some_and(|v| v == FAKE_POD_ANNOTATION_VALUE)
}

/// `namespace/name` of the buffer `pod` stands in for; `None` for any other pod.
pub fn buffer_key_of(pod: &(impl ObservedPod + ?Sized)) -> Option<String> {
    if !is_virtual_pod(pod) {
        return None;
    }
    let annotations = pod.meta().annotations.as_ref()?;
    let namespace = annotations
        .get(BUFFER_NAMESPACE_ANNOTATION)
        .filter(|s| !s.is_empty())?;
    let name = annotations
        .get(BUFFER_NAME_ANNOTATION)
        .filter(|s| !s.is_empty())?;
    Some(format!("{namespace}/{name}"))
}

/// Where one buffer's virtual pods went in a scheduling round.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Placement {
    /// On nodes that exist or are launching.
    pub existing: usize,
    /// On NodeClaims the round creates.
    pub new_capacity: usize,
    /// Nowhere.
    pub failed: usize,
}

/// Where each buffer's virtual pods went, by `namespace/name`; `batch` is what was scheduled.
pub fn placements<P: ObservedPod>(results: &Results, batch: &[P]) -> BTreeMap<String, Placement> {
    let mut out: BTreeMap<String, Placement> = BTreeMap::new();
    let mut count = |i: usize, bump: fn(&mut Placement)| {
        if let Some(key) = batch.get(i).and_then(|p| buffer_key_of(p)) {
            bump(out.entry(key).or_default());
        }
    };
    for &i in results.existing_nodes.values().flatten() {
        count(i, |p| p.existing += 1);
    }
    for claim in &results.new_node_claims {
        for &i in &claim.pods {
            count(i, |p| p.new_capacity += 1);
        }
    }
    for &i in results.pod_errors.keys() {
        count(i, |p| p.failed += 1);
    }
    out
}

/// How many virtual pods a round placed on each existing node, by name: emptiness keeps those
/// nodes (NodeClaims the round creates are young, so consolidation leaves them anyway).
pub fn buffer_pods_by_node<P: ObservedPod>(
    results: &Results,
    batch: &[P],
) -> BTreeMap<String, usize> {
    results
        .existing_nodes
        .iter()
        .map(|(node, pods)| {
            let n = pods
                .iter()
                .filter(|&&i| batch.get(i).is_some_and(|p| is_virtual_pod(p)))
                .count();
            (node.clone(), n)
        })
        .filter(|(_, n)| *n > 0)
        .collect()
}

/// The `Provisioning` condition the provisioner writes on `buffer` after a round, as upstream:
/// `False`/`NotReadyForProvisioning` or `False`/`BufferEmpty` whatever the round did; `False`/
/// `RequiresNewCapacity` when some virtual pods needed new capacity or fit nowhere; `True`/
/// `FitsExistingCapacity` when all fit on existing capacity; `None` (leave it) when the round
/// did not see its pods.
pub fn provisioning_condition(
    buffer: &CapacityBuffer,
    placement: Option<&Placement>,
    now: &Time,
) -> Option<Condition> {
    let cond = |ok: bool, reason: &str, message: String| {
        Some(condition_of(
            buffer,
            condition::PROVISIONING,
            ok,
            reason,
            message,
            now,
        ))
    };
    if !buffer.condition_true(condition::READY_FOR_PROVISIONING) {
        return cond(
            false,
            condition::REASON_NOT_READY_FOR_PROVISIONING,
            "Buffer is not ReadyForProvisioning".into(),
        );
    }
    let desired = buffer
        .status
        .as_ref()
        .and_then(|s| s.replicas)
        .unwrap_or(0)
        .max(0) as usize;
    if desired == 0 {
        return cond(
            false,
            condition::REASON_BUFFER_EMPTY,
            "Buffer has zero desired replicas".into(),
        );
    }
    let p = placement?;
    if p.new_capacity > 0 || p.failed > 0 {
        return cond(
            false,
            condition::REASON_REQUIRES_NEW_CAPACITY,
            format!(
                "{}/{desired} virtual pods required new capacity, {} failed",
                p.new_capacity, p.failed
            ),
        );
    }
    if p.existing == desired {
        return cond(
            true,
            condition::REASON_FITS_EXISTING_CAPACITY,
            format!("All {desired} virtual pods fit on existing capacity"),
        );
    }
    None
}

/// `buffer`'s status with `condition` set, if that changes it.
pub fn with_condition(
    buffer: &CapacityBuffer,
    condition: Condition,
) -> Option<CapacityBufferStatus> {
    let mut status = buffer.status.clone().unwrap_or_default();
    let before = status.clone();
    set_condition(&mut status.conditions, condition);
    let same = |a: &CapacityBufferStatus, b: &CapacityBufferStatus| {
        a.conditions.len() == b.conditions.len()
            && a.conditions.iter().zip(&b.conditions).all(|(x, y)| {
                (
                    &x.type_,
                    &x.status,
                    &x.reason,
                    &x.message,
                    x.observed_generation,
                ) == (
                    &y.type_,
                    &y.status,
                    &y.reason,
                    &y.message,
                    y.observed_generation,
                )
            })
    };
    (!same(&status, &before)).then_some(status)
}

#[cfg(test)]
#[path = "capacity_buffer_tests.rs"]
mod tests;
